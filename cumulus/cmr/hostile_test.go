package cmr

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repeatReader yields prefix, then n bytes of fill, then suffix, without
// holding them.
func repeatReader(prefix string, fill byte, n int64, suffix string) io.Reader {
	return io.MultiReader(strings.NewReader(prefix), io.LimitReader(fillReader(fill), n), strings.NewReader(suffix))
}

// hostileMax is the size bound of the hostile reads: a 256th of the
// gigabyte inputs.
const hostileMax = 4 << 20

type fillReader byte

func (f fillReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// Entity expansion, deep nesting and a gigabyte of text are errors, with
// memory bounded whatever the input: what is allocated is a small multiple
// of the size bound (the decoders buffer one token, grown by doubling; the
// race detector's allocator doubles it again), never of the input.
func TestRead_Hostile(t *testing.T) {
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><Granule><LastUpdate>&lol3;</LastUpdate></Granule>`
	external := `<?xml version="1.0"?><!DOCTYPE g [<!ENTITY x SYSTEM "file:///etc/passwd">]><Granule><LastUpdate>&x;</LastUpdate></Granule>`
	for _, tc := range []struct {
		name string
		in   func() io.Reader
		f    Format
		want string
	}{
		{"entity expansion", func() io.Reader { return strings.NewReader(laughs) }, ECHO10, "invalid character entity &lol3;"},
		{"external entity", func() io.Reader { return strings.NewReader(external) }, ECHO10, "invalid character entity &x;"},
		{"deep nesting", func() io.Reader {
			return strings.NewReader("<Granule>" + strings.Repeat("<a>", 100000) + strings.Repeat("</a>", 100000) + "</Granule>")
		}, ECHO10, "nested deeper than 256"},
		{"a gigabyte of text", func() io.Reader {
			return repeatReader("<Granule><LastUpdate>", 'x', 1<<30, "</LastUpdate></Granule>")
		}, ECHO10, "larger than the CMR file size bound"},
		{"a gigabyte of UMM-G", func() io.Reader { return repeatReader(`{"x":"`, 'x', 1<<30, `"}`) }, UMMG, "larger than the CMR file size bound"},
		{"cut short", func() io.Reader { return strings.NewReader("<Granule><Temporal><RangeDateTime>") }, ECHO10, "ends inside"},
		{"mismatched tags", func() io.Reader { return strings.NewReader("<Granule><a></b></Granule>") }, ECHO10, "</b> does not close <a>"},
		{"two roots", func() io.Reader { return strings.NewReader("<Granule/><Granule/>") }, ECHO10, "second root"},
		{"text outside", func() io.Reader { return strings.NewReader("<Granule/>text") }, ECHO10, "text outside"},
		{"empty", func() io.Reader { return strings.NewReader("") }, ISO, "no root element"},
		{"not UTF-8 declared", func() io.Reader {
			return strings.NewReader(`<?xml version="1.0" encoding="ISO-8859-1"?><Granule/>`)
		}, ECHO10, "ISO-8859-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Read(tc.in(), tc.f, hostileMax)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 6*hostileMax {
				t.Errorf("%d MiB allocated reading at most %d MiB", grew>>20, hostileMax>>20)
			}
		})
	}
	// At the bound exactly is fine; one byte more is not.
	b, _ := os.ReadFile(filepath.Join("testdata", echoBase))
	if _, err := Read(bytes.NewReader(b), ECHO10, int64(len(b))); err != nil {
		t.Errorf("a file of exactly the bound: %v", err)
	}
	if _, err := Read(bytes.NewReader(b), ECHO10, int64(len(b)-1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file one byte over the bound: %v", err)
	}
}

// The parsers return values or errors on any input, never panic, and
// agree with themselves: a file read twice gives the same answer.
func FuzzRead(f *testing.F) {
	for _, fx := range fixtures {
		b, err := os.ReadFile(filepath.Join("testdata", fx.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
		f.Add(b, uint8(1))
		f.Add(b, uint8(2))
	}
	f.Add([]byte("<Granule><LastUpdate>2019-01-01</LastUpdate></Granule>"), uint8(0))
	f.Add([]byte(`{"ProviderDates":[null]}`), uint8(1))
	formats := []Format{ECHO10, UMMG, ISO}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		fm := formats[int(which)%len(formats)]
		tm, err := Read(bytes.NewReader(b), fm, 1<<20)
		tm2, err2 := Read(bytes.NewReader(b), fm, 1<<20)
		if (err == nil) != (err2 == nil) || tm != tm2 {
			t.Fatalf("two reads differ: %v %v", err, err2)
		}
		if err == nil {
			tm.Normalize()
		}
	})
}

// Any string given to the date reader gives a date or an error, and a
// date it gives reads back to itself.
func FuzzParseJSDate(f *testing.F) {
	for _, s := range []string{"2019-01-01T00:00:00Z", "+275760-09-13T00:00:00Z", "2019-02-31 24:00", "2019-01-01T00:00:00.123456+05:30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseJSDate(s)
		if err != nil {
			return
		}
		iso := formatISO(ms)
		back, err := parseJSDate(iso)
		if err != nil || back != ms {
			t.Fatalf("%q → %d → %q → %d, %v", s, ms, iso, back, err)
		}
	})
}
