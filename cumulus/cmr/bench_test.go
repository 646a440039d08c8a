package cmr

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// padded returns a fixture grown to about size bytes with content the
// rules do not read, placed where real files carry it (access URLs,
// attributes, polygons).
func padded(b testing.TB, file string, size int) []byte {
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	var unit, at string
	switch f, _ := FormatOf(file); f {
	case ECHO10:
		unit, at = "<OnlineAccessURL><URL>https://example.org/data/file.hdf</URL><URLDescription>File to download</URLDescription></OnlineAccessURL>", "</Granule>"
	case ISO:
		unit, at = "<gmd:contact><gmd:CI_ResponsibleParty><gmd:organisationName><gco:CharacterString>NSIDC DAAC</gco:CharacterString></gmd:organisationName></gmd:CI_ResponsibleParty></gmd:contact>", "</gmi:MI_Metadata>"
	case UMMG:
		unit, at = `{"URL":"https://example.org/data/file.nc","Type":"GET DATA","Description":"Download file.nc"},`, `"RelatedUrls":[`
	}
	var pad strings.Builder
	for pad.Len()+len(s) < size {
		pad.WriteString(unit)
	}
	i := strings.Index(s, at)
	if at == `"RelatedUrls":[` {
		i += len(at)
	}
	return []byte(s[:i] + pad.String() + s[i:])
}

// genericXML builds the whole document as nested maps with
// encoding/xml's tokens: the baseline of a DOM-style read.
func genericXML(r io.Reader) (map[string]any, error) {
	d := xml.NewDecoder(r)
	type frame struct {
		name string
		m    map[string]any
		text strings.Builder
	}
	stack := []*frame{{m: map[string]any{}}}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return stack[0].m, nil
		}
		if err != nil {
			return nil, err
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, &frame{name: t.Name.Local, m: map[string]any{}})
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			parent := stack[len(stack)-1]
			var v any = top.m
			if len(top.m) == 0 {
				v = top.text.String()
			}
			switch old := parent.m[top.name].(type) {
			case nil:
				parent.m[top.name] = v
			case []any:
				parent.m[top.name] = append(old, v)
			default:
				parent.m[top.name] = []any{old, v}
			}
		case xml.CharData:
			top.text.Write(t)
		}
	}
}

// CMR files read per second, by format and size, beside encoding/json or
// encoding/xml building a generic map of the same file. Run with
//
//	go test -run '^$' -bench CMR ./cumulus/cmr/
func BenchmarkCMR(b *testing.B) {
	for _, fx := range []struct{ file string }{{echoBase}, {isoBase}, {ummgBase}} {
		f, _ := FormatOf(fx.file)
		for _, size := range []int{1 << 10, 100 << 10, 1 << 20} {
			data := padded(b, fx.file, size)
			name := fmt.Sprintf("format=%s/size=%dKiB", f, (len(data)+512)>>10) // the fixture itself when over size
			b.Run(name+"/impl=generic-map", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					var err error
					if f == UMMG {
						var m map[string]any
						err = json.Unmarshal(data, &m)
					} else {
						_, err = genericXML(bytes.NewReader(data))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
			})
			b.Run(name+"/impl=cmr", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := Read(bytes.NewReader(data), f, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
			})
		}
	}
}

// The padded files still give the fixture's values.
func TestPadded(t *testing.T) {
	for _, fx := range fixtures {
		f, _ := FormatOf(fx.file)
		tm, err := Read(bytes.NewReader(padded(t, fx.file, 1<<20)), f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range tm.values() {
			if v.Str != fx.raw[i] {
				t.Errorf("%s padded: %s = %v, want %q", fx.file, Fields[i], v, fx.raw[i])
			}
		}
	}
}
