package reader

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/fasttar"
)

// walk walks a tar as the canned reader does, archive/tar's walk or the
// fast one: each member's offset, type and name, and a regular member's
// bytes (no more than the tar holds).
func walk(data []byte, fast bool) ([]string, error) {
	in := &countingReader{r: bytes.NewReader(data)}
	var tr tarMembers = stdTar{tar.NewReader(in)}
	if fast {
		ft := &fastTar{}
		ft.Reset(in)
		tr = ft
	}
	var members []string
	for {
		off := in.n
		name, typ, err := tr.member()
		if err != nil {
			return members, err
		}
		if typ != tar.TypeReg {
			members = append(members, fmt.Sprintf("%d %c %q", off, typ, name))
			continue
		}
		body, err := io.ReadAll(io.LimitReader(tr, int64(len(data))+1))
		members = append(members, fmt.Sprintf("%d %c %q %q %v", off, typ, name, body, err))
		if err != nil {
			return members, err
		}
	}
}

// A regular file made sparse by PAX records is not read as a report: its
// holes would read as zeros up to the size its records claim (a terabyte
// here). archive/tar's walk names it a sparse file, which the canned
// reader records and skips.
func TestStdTar_SparseIsNotRegular(t *testing.T) {
	records := ""
	for _, kv := range []string{"GNU.sparse.major=1", "GNU.sparse.minor=0", "GNU.sparse.name=2017-06-01/a.json", "GNU.sparse.realsize=1000000000000"} {
		n := len(kv) + 2 + 1
		for len(fmt.Sprint(n))+len(kv)+2 != n {
			n++
		}
		records += fmt.Sprintf("%d %s\n", n, kv)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range [][2]string{
		{"PaxHeaders/a.json", records},
		{"2017-06-01/a.json", "1\n0\n5\n" + strings.Repeat("\x00", 506) + "hello"},
		{"2017-06-01/b.json", "{}\n"},
	} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f[0], Size: int64(len(f[1])), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatGNU}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// The first member's header becomes a PAX record header.
	h := data[:512]
	h[156] = tar.TypeXHeader
	copy(h[148:156], "        ")
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))

	std, end := walk(data, false)
	want := []string{`0 S "2017-06-01/a.json"`, `2048 0 "2017-06-01/b.json" "{}\n" <nil>`}
	if end != io.EOF || strings.Join(std, "\n") != strings.Join(want, "\n") {
		t.Fatalf("archive/tar's walk gives\n%s\n(%v), want\n%s", strings.Join(std, "\n"), end, strings.Join(want, "\n"))
	}
	if _, end := walk(data, true); !errors.Is(end, fasttar.ErrForm) {
		t.Fatalf("the fast walk ends with %v, want fasttar.ErrForm", end)
	}
}
