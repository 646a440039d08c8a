package index

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// autoclavedSample is an autoclaved index in the writer's form (sort_keys,
// Python separators), with the row shapes of the real examples of
// docs/formats.md §2.3: a report spanning two frames, a frame holding two
// reports, a badblob, a truncated report and an empty as-is file frame.
var autoclavedSample = readSample("testdata/autoclaved-sample.jsonl")

// readSample is a file of testdata, for a test's sample.
func readSample(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// enumerate is the §2.4 walk: (textname, ndx) per datum, and per badblob
// too under the blobs policy.
func enumerate(t *testing.T, index string, countBadblobs bool) ([]string, []error) {
	t.Helper()
	x := NewAutoclaved(strings.NewReader(index))
	var out []string
	var errs []error
	var cur string
	ndx := 0
	for {
		ev, err := x.Next()
		if err == io.EOF {
			return out, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch ev.Kind {
		case RowReport:
			cur, ndx = ev.Textname, 0
		case RowDatum:
			out = append(out, fmt.Sprintf("%s %d @%d+%d", cur, ndx, ev.TextOff, ev.TextSize))
			ndx++
		case RowBadblob:
			if countBadblobs {
				out = append(out, fmt.Sprintf("%s %d badblob", cur, ndx))
				ndx++
			}
		case RowEndReport:
			out = append(out, fmt.Sprintf("%s n=%d cutoff=%v/%d", cur, ndx, ev.HasCutoff, ev.Cutoff))
		case RowEndFile:
			out = append(out, fmt.Sprintf("/file %d %d", ev.FileSize, ev.CRC32))
		}
	}
}

func TestAutoclavedIndex_Enumerate(t *testing.T) {
	for _, v := range []struct {
		badblobs bool
		want     string
	}{
		{true, `2017-08-28/a.json 0 @1536+58327
2017-08-28/a.json 1 badblob
2017-08-28/a.json 2 @362462+10
2017-08-28/a.json n=3 cutoff=false/0
2017-08-28/b.yaml 0 @362473+5
2017-08-28/b.yaml n=1 cutoff=true/49484700
2017-08-28/c.json n=0 cutoff=false/0
/file 163864 -156566611
/file 15 927831702`},
		{false, `2017-08-28/a.json 0 @1536+58327
2017-08-28/a.json 1 @362462+10
2017-08-28/a.json n=2 cutoff=false/0
2017-08-28/b.yaml 0 @362473+5
2017-08-28/b.yaml n=1 cutoff=true/49484700
2017-08-28/c.json n=0 cutoff=false/0
/file 163864 -156566611
/file 15 927831702`},
	} {
		got, errs := enumerate(t, autoclavedSample, v.badblobs)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if strings.Join(got, "\n") != v.want {
			t.Errorf("badblobs counted %v:\n%s\nwant\n%s", v.badblobs, strings.Join(got, "\n"), v.want)
		}
	}
}

// Every bad row is an error with its line; the rows after it are read.
func TestAutoclavedIndex_BadRows(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(autoclavedSample, "\n"), "\n")
	edit := func(i int, s string) string {
		l := append([]string(nil), lines...)
		l[i] = s
		return strings.Join(l, "\n") + "\n"
	}
	for _, v := range []struct {
		name, index string
		line        int
		msg         string
	}{
		{"not JSON", edit(3, `{"orig_sha1": "OSVZy4G4`), 4, "does not parse"},
		{"no type", edit(3, `{"text_off": 1}`), 4, `without "type"`},
		{"unknown type", edit(3, `{"type": "blob"}`), 4, "unknown row type"},
		{"negative offset", edit(3, `{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "text_off": -1, "text_size": 5, "type": "datum"}`), 4, "not a size"},
		{"bad sha1", edit(3, `{"orig_sha1": "xx", "text_off": 1, "text_size": 5, "type": "datum"}`), 4, "base64 SHA-1"},
		{"crc out of range", edit(15, `{"file_crc32": 4294967295, "file_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "file_size": 1, "type": "/file"}`), 16, "signed 32-bit"},
		{"datum outside a report", edit(2, `{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "text_off": 1, "text_size": 5, "type": "datum"}`), 3, "outside a report"},
		{"report outside a frame", edit(1, `{"type": "/frame"}`), 2, "outside a frame"},
		{"truncated", strings.Join(lines[:8], "\n") + "\n", 8, "ends inside a report"},
		{"long row", edit(3, strings.Repeat("x", MaxAutoclavedIndexLine+10)), 4, "longer than"},
	} {
		_, errs := enumerate(t, v.index, true)
		if len(errs) == 0 {
			t.Errorf("%s: no error", v.name)
			continue
		}
		var ie *Error
		if !errors.As(errs[0], &ie) || ie.Line != v.line || !strings.Contains(errs[0].Error(), v.msg) || !errors.Is(errs[0], ErrIndex) {
			t.Errorf("%s: %v, want line %d with %q", v.name, errs[0], v.line, v.msg)
		}
	}
}

// The hand parser of the common rows agrees with encoding/json wherever
// it accepts a row, and accepts the writer's form.
func FuzzAutoclavedDatum(f *testing.F) {
	f.Add([]byte(`{"file_off": 162864, "file_size": 1000, "text_off": 362462, "text_size": 300000, "type": "frame"}`))
	f.Add([]byte(`{"file_off": 0, "file_size": 15, "text_off": 0, "text_size": 0, "type": "frame"}` + "\r\n"))
	f.Add([]byte(`{"type": "/frame"}`))
	f.Add([]byte(`{"type": "/report"}` + "\n"))
	f.Add([]byte(`{"info": "<class 'ValueError'>", "src_cutoff": 1200, "type": "/report"}`))
	f.Add([]byte(`{"info": "a\\u00e9", "orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "src_off": 10, "src_size": 3, "type": "badblob"}`))
	f.Add([]byte(`{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "src_size": 9, "textname": "2017-06-01/x.json", "type": "report"}`))
	f.Add([]byte(`{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "src_size": 9, "textname": "", "type": "report"}`))
	f.Add([]byte(`{"filename": "2017-06-01/a.json.lz4", "type": "file"}`))
	f.Add([]byte(`{"file_crc32": -2147483648, "file_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "file_size": 15, "type": "/file"}`))
	f.Add([]byte(`{"file_crc32": -0, "file_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "file_size": 15, "type": "/file"}`))
	f.Add([]byte(`{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "text_off": 1536, "text_size": 58327, "type": "datum"}`))
	f.Add([]byte(`{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "text_off": 01, "text_size": 5, "type": "datum"}`))
	f.Add([]byte(`{"orig_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "text_off": 9007199254740993, "text_size": 5, "type": "datum"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast AutoclavedEvent
		ok := parseRowFast(b, &fast)
		if !ok {
			return
		}
		slow, err := parseAutoclavedRow(b)
		if err != nil || slow != fast {
			t.Fatalf("%q: fast %+v, json %+v %v", b, fast, slow, err)
		}
	})
}

// Arbitrary bytes give rows or errors, never a panic or a hang.
func FuzzAutoclavedIndex(f *testing.F) {
	f.Add([]byte(autoclavedSample))
	f.Add([]byte(autoclavedSample[:400]))
	f.Add([]byte("{\"type\": \"file\"}\n\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := NewAutoclaved(strings.NewReader(string(b)))
		for i := 0; ; i++ {
			if i > len(b)+2 {
				t.Fatalf("more rows than lines")
			}
			_, err := x.Next()
			if err == io.EOF {
				return
			}
		}
	})
}

// The hand parser takes every row of the writer's form, as encoding/json
// reads it.
func TestParseRowFast_WritersForm(t *testing.T) {
	kinds := map[AutoclavedRow]bool{}
	for _, line := range strings.Split(strings.TrimSpace(autoclavedSample), "\n") {
		slow, err := parseAutoclavedRow([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		var fast AutoclavedEvent
		ok := parseRowFast([]byte(line+"\n"), &fast)
		if !ok || fast != slow {
			t.Errorf("%s: fast %+v (%v), json %+v", line, fast, ok, slow)
		}
		kinds[slow.Kind] = true
	}
	if len(kinds) != len(rowNames) {
		t.Errorf("the sample has %d row kinds of %d", len(kinds), len(rowNames))
	}
}

// decodeSHA1 agrees with base64.StdEncoding on every 28 characters.
func FuzzDecodeSHA1(f *testing.F) {
	f.Add([]byte("OSVZy4G4MaKizTNl5m3+LGoSdW4="))
	f.Add([]byte("OSVZy4G4MaKizTNl5m3+LGoSdW5="))
	f.Add([]byte("OSVZy4G4MaKizTNl5m3+LGoSdW=="))
	f.Add([]byte("OSVZy4G4MaKizTNl5m3-LGoSdW4="))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got [20]byte
		ok := decodeSHA1(&got, b)
		want, err := base64.StdEncoding.DecodeString(string(b))
		wantOK := len(b) == 28 && err == nil && len(want) == 20
		if ok != wantOK || ok && !bytes.Equal(got[:], want) {
			t.Fatalf("%q: %x %v, base64 gives %x %v", b, got, ok, want, err)
		}
	})
}
