package reader

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/index"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// genAutoclaved writes a clean autoclaved corpus of one bucket.
func genAutoclaved(t testing.TB, reports int) *Bucket {
	t.Helper()
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = 1, reports, 1<<20, 4000
	cfg.Format = corpus.FormatAutoclaved
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, cfg.Start.Format("2006-01-02")), Options{Datums: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Format != FormatAutoclaved || len(b.Problems) != 0 {
		t.Fatalf("format %s, problems %v", b.Format, b.Problems)
	}
	return b
}

type realOffsets struct {
	filename, textname                        string
	frameOff, frameSize, intraOff, reportSize int64
}

// readRealOffsets reads the five real autoclaved report positions the
// OONI API's tests hold (testdata/ooni, from the realdata samples).
func readRealOffsets(t testing.TB) []realOffsets {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "ooni", "autoclaved_report_offsets_from_ooni-api_tests.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []realOffsets
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 8 || c[0] == "case" {
			continue
		}
		n := func(s string) int64 {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		out = append(out, realOffsets{c[1], c[2], n(c[3]), n(c[4]), n(c[5]), n(c[6])})
	}
	if len(out) != 5 {
		t.Fatalf("%d rows of real offsets", len(out))
	}
	return out
}

// The generated autoclaved form has the structure the real offsets show:
// the first member of a tar, with a textname too long for a plain tar
// header, has its data at 1536 (LongLink header, name block, header); a
// report's JSON lines are its datums back to back, each with its "\n"
// (the API's report_size = Σ(intra_size+1)); a report over 256 KiB spans
// several frames, each flushed at 256 KiB or more; a datum's "\n" may be
// the next frame's first byte. The real textnames are
// textnames the reader takes.
func TestAutoclaved_RealOffsets(t *testing.T) {
	real := readRealOffsets(t)
	b := genAutoclaved(t, 120)
	for _, r := range real {
		if report.KindOf(r.textname) == report.KindUnknown || !strings.HasPrefix(r.filename, r.textname[:11]) {
			t.Errorf("real textname %s of %s: not a report of its file's bucket", r.textname, r.filename)
		}
		if r.intraOff == 1536 && r.frameOff == 0 && (len(r.textname) <= 100 || len(r.textname) > 512) {
			t.Errorf("real first member at 1536 with a %d-byte name: not the LongLink case", len(r.textname))
		}
	}
	var firsts, spanning, nextNewline int
	for _, c := range b.Containers {
		f := c.AC
		for i, fr := range f.Frames {
			if i < len(f.Frames)-1 && fr.TextSize < corpus.FrameFlush {
				t.Errorf("%s: frame %d holds %d bytes, under the flush size", c.Name, i, fr.TextSize)
			}
		}
		for i, r := range f.Reports {
			if c.Tar && i == 0 && r.Datums > 0 && len(r.Textname) > 100 {
				firsts++
				if r.Items[0].TextOff != 1536 {
					t.Errorf("%s: first datum at %d, the real one is at 1536", c.Name, r.Items[0].TextOff)
				}
			}
			for _, d := range r.Items {
				for _, fr := range f.Frames {
					if d.TextOff+d.TextSize == fr.TextOff+fr.TextSize {
						nextNewline++ // its "\n" is the next frame's first byte
					}
				}
			}
			for k := 1; k < len(r.Items); k++ {
				if prev := r.Items[k-1]; r.Items[k].TextOff != prev.TextOff+prev.TextSize+1 {
					t.Fatalf("%s: datums %d and %d are not back to back", r.Textname, k-1, k)
				}
			}
			if n := len(r.Items); n > 0 {
				last := r.Items[n-1]
				size := last.TextOff + last.TextSize + 1 - r.Items[0].TextOff
				in := 0
				for _, fr := range f.Frames {
					if fr.TextOff < r.Items[0].TextOff+size && r.Items[0].TextOff < fr.TextOff+fr.TextSize {
						in++
					}
				}
				if size > 2*corpus.FrameFlush {
					spanning++
					if in < 2 {
						t.Errorf("%s: %d bytes in %d frame", r.Textname, size, in)
					}
				}
			}
		}
	}
	if firsts == 0 || spanning == 0 || nextNewline == 0 {
		t.Fatalf("the corpus has %d first members, %d reports spanning frames, %d datums whose newline is in the next frame (the real next_frame_newline case)", firsts, spanning, nextNewline)
	}
}

// The data path over a clean generated bucket records nothing and gives
// every report the count of its index rows; the enumeration from the
// index gives the same reports.
func TestAutoclaved_DataPathMatchesIndex(t *testing.T) {
	b := genAutoclaved(t, 80)
	ar := NewAutoclavedReader()
	ar.Verify = true
	for _, c := range b.Containers {
		var data, index []ContainerReport
		problem := func(d deadletter.Record) { t.Errorf("%s: %+v", c.Name, d) }
		st, err := ar.Read(context.Background(), b, c, Handler{Report: func(r ContainerReport) { data = append(data, r) }, Problem: problem})
		if err != nil {
			t.Fatal(err)
		}
		IndexReports(b, c, false, Handler{Report: func(r ContainerReport) { index = append(index, r) }, Problem: problem})
		if st.BytesIn != c.Size || len(data) != len(c.AC.Reports) || len(index) != len(data) {
			t.Fatalf("%s: read %d of %d bytes, %d reports, index %d, rows %d", c.Name, st.BytesIn, c.Size, len(data), len(index), len(c.AC.Reports))
		}
		for i := range data {
			if data[i].Textname != index[i].Textname || data[i].Stats != index[i].Stats || data[i].Offset != index[i].Offset {
				t.Errorf("%s: data %+v, index %+v", c.Name, data[i], index[i])
			}
		}
	}
}

// Any index bytes: opening the bucket and enumerating it never panics or
// hangs, and every report it gives is one the index lists.
func FuzzAutoclavedBucket(f *testing.F) {
	sample, err := os.ReadFile("index/testdata/autoclaved-sample.jsonl") // the index package's sample
	if err != nil {
		f.Fatal(err)
	}
	autoclavedSample := string(sample)
	f.Add([]byte(autoclavedSample))
	f.Add([]byte(strings.Replace(autoclavedSample, `"type": "/report"`, `"type": "datum"`, 1)))
	f.Add([]byte(autoclavedSample[:700]))
	canned, err := OpenBucket(cannedSample(f))
	if err != nil {
		f.Fatal(err)
	}
	check := NewCannedCheck(false, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "2017-08-28")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, IndexName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Open(dir, Options{Format: FormatAutoclaved, Datums: true})
		if err != nil {
			t.Fatal(err)
		}
		// The report rows, as the row parser alone reads them.
		rows := map[string]bool{}
		x := index.NewAutoclaved(bytes.NewReader(data))
		for {
			ev, err := x.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil && ev.Kind == index.RowReport {
				rows[ev.Textname] = true
			}
		}
		ar := NewAutoclavedReader()
		for _, c := range b.Containers {
			h := Handler{Problem: func(deadletter.Record) {}, Report: func(r ContainerReport) {
				if !rows[r.Textname] {
					t.Fatalf("report %q is not a report row of the index", r.Textname)
				}
			}}
			IndexReports(b, c, true, h)
			ar.Read(context.Background(), b, c, h)
			_, err := check.Check(context.Background(), b, c, canned, func(p deadletter.Record) {
				if p.Reason != deadletter.CannedMismatch || p.File != c.Name || p.Message == "" {
					t.Fatalf("canned check record %+v", p)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// cannedSample writes a canned bucket holding the files and reports that
// autoclavedSample lists, and returns its folder.
func cannedSample(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "2017-08-28")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, m := range []struct{ name, body string }{
		{"2017-08-28/a.json", "{\"a\": 1}\n{\"b\": 2}\n"},
		{"2017-08-28/b.yaml", "---\nh: 1\n...\n---\na: 1\n...\n---\nb: ["},
		{"2017-08-28/c.json", ""},
	} {
		testutil.Check(t, tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg}))
		tw.Write([]byte(m.body))
	}
	testutil.Check(t, tw.Close())
	for name, data := range map[string][]byte{"web_connectivity.02.tar.lz4": tb.Bytes(), "d.json.lz4": []byte("{\"d\": 1}\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), testutil.LZ4Frame(t, data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
