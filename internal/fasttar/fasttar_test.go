package fasttar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// tarWalk is what a walk of a tar gives, as the canned reader uses it:
// each member's type, name, bytes and the stream offset its header starts
// at, and how the walk ended.
type tarWalk struct {
	members []string
	end     error
}

func walkTar(data []byte, fast bool) tarWalk {
	in := bytes.NewReader(data)
	var next func() (string, byte, error)
	var body io.Reader
	if fast {
		ft := &Reader{}
		ft.Reset(in)
		next = func() (string, byte, error) { name, err := ft.Next(); return name, tar.TypeReg, err }
		body = ft
	} else {
		tr := tar.NewReader(in)
		next = func() (string, byte, error) {
			h, err := tr.Next()
			if err != nil {
				return "", 0, err
			}
			return h.Name, h.Typeflag, nil
		}
		body = tr
	}
	var w tarWalk
	for {
		off := len(data) - in.Len() // the offsets the canned reader gives its reports
		name, typ, err := next()
		if err != nil {
			w.end = err
			return w
		}
		if typ != tar.TypeReg {
			w.members = append(w.members, fmt.Sprintf("%d %c %q", off, typ, name))
			continue // as the canned reader
		}
		// No member of a tar that is not sparse holds more than the tar.
		b, err := io.ReadAll(io.LimitReader(body, int64(len(data))+1))
		w.members = append(w.members, fmt.Sprintf("%d %c %q %q %v", off, typ, name, b, err))
		if err != nil {
			w.end = err
			return w
		}
	}
}

// A walk the fast reader finishes gives what archive/tar gives.
func sameWalk(t *testing.T, data []byte) (taken bool) {
	t.Helper()
	fast := walkTar(data, true)
	if fast.end != io.EOF {
		return false
	}
	std := walkTar(data, false)
	if std.end != io.EOF || strings.Join(fast.members, "\n") != strings.Join(std.members, "\n") {
		t.Fatalf("the fast walk gives\n%s\n(%v)\narchive/tar\n%s\n(%v)", strings.Join(fast.members, "\n"), fast.end,
			strings.Join(std.members, "\n"), std.end)
	}
	return true
}

type tarFile struct {
	name string
	body string
	typ  byte
}

func makeTar(t testing.TB, format tar.Format, files ...tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Typeflag: typ, Name: f.name, Size: int64(len(f.body)), Mode: 0o644,
			Uname: "ooni", Gname: "ooni", ModTime: time.Unix(1_500_000_000, 0), Format: format}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	longName = "2017-06-01/20170601T000000Z-US-AS1234-web_connectivity-20170601T000012Z_AS1234_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ-0.2.0-probe.json"
	// A name archive/tar's writer splits into a USTAR prefix and name.
	splitName = "2017-06-01/" + strings.Repeat("d", 90) + "/20170601T000000Z-US-AS1234-http_requests-0.2.0-probe.yaml"
)

func sampleTarFiles() []tarFile {
	return []tarFile{
		{name: "2017-06-01/a.json", body: "{}\n"},
		{name: "2017-06-01/empty.json"},
		{name: longName, body: strings.Repeat("x", 511)},
		{name: "2017-06-01/b.yaml", body: strings.Repeat("y", 512)},
		{name: "2017-06-01/c.yaml", body: strings.Repeat("z", 513)},
		{name: "2017-06-01/d.json", body: strings.Repeat("{\"k\": 1}\n", 200)},
	}
}

// The forms the canning step and gen write are walked by the fast reader,
// to the same members, bytes and offsets as archive/tar; every cut of
// them is either refused or walked the same.
func TestReader_TakesUsualForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format tar.Format
		files  []tarFile
	}{
		{"GNU", tar.FormatGNU, sampleTarFiles()},
		{"USTAR", tar.FormatUSTAR, append(sampleTarFiles()[:2], tarFile{name: splitName, body: "---\n"})},
		{"empty archive", tar.FormatGNU, nil},
	} {
		data := makeTar(t, tc.format, tc.files...)
		if !sameWalk(t, data) {
			t.Fatalf("%s: the fast walk does not take it: %v", tc.name, walkTar(data, true).end)
		}
		if got := len(walkTar(data, true).members); got != len(tc.files) {
			t.Fatalf("%s: %d members walked, want %d", tc.name, got, len(tc.files))
		}
		for cut := range data {
			sameWalk(t, data[:cut])
		}
	}
	// The names are the writer's, long and split ones whole.
	w := walkTar(makeTar(t, tar.FormatUSTAR, tarFile{name: splitName, body: "x"}), true)
	if len(w.members) != 1 || !strings.Contains(w.members[0], splitName) {
		t.Fatalf("USTAR prefix: %v", w.members)
	}
}

// Every other form is left to archive/tar: the fast walk stops with
// ErrForm, for the caller to read it with archive/tar.
func TestReader_LeavesOtherForms(t *testing.T) {
	gnu := makeTar(t, tar.FormatGNU, tarFile{name: "2017-06-01/a.json", body: "{}\n"})
	withHeader := func(edit func(h *[512]byte)) []byte {
		d := append([]byte(nil), gnu...)
		h := (*[512]byte)(d[:512])
		edit(h)
		// Keep the header's checksum right, unsigned.
		copy(h[148:156], "        ")
		var sum int64
		for _, c := range h {
			sum += int64(c)
		}
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
		return d
	}
	signed := withHeader(func(h *[512]byte) { h[20] = 0xE9 })
	{
		// The same header with its checksum as the signed sum, which
		// archive/tar also takes.
		var sum int64
		for i, c := range signed[:512] {
			if i >= 148 && i < 156 {
				c = ' '
			}
			sum += int64(int8(c))
		}
		copy(signed[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"PAX records", makeTar(t, tar.FormatPAX, tarFile{name: "2017-06-01/\u00e9.json", body: "{}\n"})},
		{"a folder", makeTar(t, tar.FormatGNU, tarFile{name: "2017-06-01/", typ: tar.TypeDir})},
		{"a symbolic link", makeTar(t, tar.FormatGNU, tarFile{name: "2017-06-01/l", typ: tar.TypeSymlink})},
		{"V7", withHeader(func(h *[512]byte) { copy(h[257:265], make([]byte, 8)) })},
		{"STAR", withHeader(func(h *[512]byte) { copy(h[257:265], "ustar\x0000"); copy(h[508:512], "tar\x00") })},
		{"a base-256 size", withHeader(func(h *[512]byte) { copy(h[124:136], "\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03") })},
		{"an old-style regular file", withHeader(func(h *[512]byte) { h[156] = 0 })},
		{"GNU access time", withHeader(func(h *[512]byte) { copy(h[345:357], "00000000001\x00") })},
		{"the signed checksum", signed},
		{"a zero block, then a header", append(make([]byte, 512), gnu...)},
	} {
		fast := walkTar(tc.data, true)
		if !errors.Is(fast.end, ErrForm) {
			t.Errorf("%s: the fast walk ends with %v, want ErrForm", tc.name, fast.end)
		}
		if std := walkTar(tc.data, false); tc.name != "a zero block, then a header" && std.end != io.EOF {
			t.Errorf("%s: archive/tar does not read the test's tar: %v", tc.name, std.end)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(makeTar(f, tar.FormatGNU, tarFile{name: "2017-06-01/a.json", body: "{}\n"}, tarFile{name: longName, body: "x"}))
	f.Add(makeTar(f, tar.FormatUSTAR, tarFile{name: splitName, body: "---\n"}))
	f.Add(makeTar(f, tar.FormatPAX, tarFile{name: "a", body: "b"}))
	f.Add(makeTar(f, tar.FormatGNU, tarFile{name: longName}, tarFile{name: "d/", typ: tar.TypeDir}))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameWalk(t, data)
		// The same with the first header's checksum made right, so that
		// the fields behind it are explored too.
		if len(data) >= 512 {
			fixed := append([]byte(nil), data...)
			copy(fixed[148:156], "        ")
			var sum int64
			for _, c := range fixed[:512] {
				sum += int64(c)
			}
			copy(fixed[148:156], fmt.Sprintf("%06o\x00 ", sum))
			sameWalk(t, fixed)
		}
	})
}

// BenchmarkWalk walks a tar of members of the real corpus's names
// (each needs a GNU long name, so two headers a member) with archive/tar
// and with the fast walker; with bodies of 1 byte, ns/member is what the
// headers cost, with bodies of 28 KB (the real shape's reports) what the
// walk costs beside copying them out.
func BenchmarkWalk(b *testing.B) {
	for _, body := range []int{1, 28 << 10} {
		b.Run(fmt.Sprintf("body=%d", body), func(b *testing.B) { benchWalk(b, body) })
	}
}

func benchWalk(b *testing.B, body int) {
	var files []tarFile
	for i := range 2000 {
		files = append(files, tarFile{name: fmt.Sprintf("%s.%d", longName, i), body: strings.Repeat("x", body)})
	}
	data := makeTar(b, tar.FormatGNU, files...)
	for _, impl := range []string{"archive-tar", "fast"} {
		b.Run("impl="+impl, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			buf := make([]byte, 64<<10)
			ft := &Reader{}
			for b.Loop() {
				r := bytes.NewReader(data)
				tr := tar.NewReader(struct{ io.Reader }{r})
				ft.Reset(r)
				var member io.Reader = tr
				next := func() error { _, err := tr.Next(); return err }
				if impl == "fast" {
					member = ft
					next = func() error { _, err := ft.Next(); return err }
				}
				n := 0
				for {
					err := next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{member}, buf); err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != len(files) {
					b.Fatalf("%d members, want %d", n, len(files))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(files)), "ns/member")
		})
	}
}
