package ooniuid_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// golden is a row of testdata/golden.tsv: what OONI's own code (ooni/backend's
// fastpath, run by the project's oracle tool over testdata/raw) gives a
// measurement.
type golden struct {
	uid, hash string
}

func readGolden(t *testing.T) map[string]map[int]golden {
	return readGoldenFile(t, "testdata/golden.tsv")
}

func readGoldenFile(t *testing.T, name string) map[string]map[int]golden {
	f, err := os.Open(name)
	testutil.Check(t, err)
	defer f.Close()
	out := map[string]map[int]golden{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 4 {
			t.Fatalf("golden line %q", sc.Text())
		}
		ndx, err := strconv.Atoi(fields[1])
		testutil.Check(t, err)
		if out[fields[0]] == nil {
			out[fields[0]] = map[int]golden{}
		}
		out[fields[0]][ndx] = golden{fields[2], fields[3]}
	}
	testutil.Check(t, sc.Err())
	return out
}

// Every measurement of the raw reports (real samples, and JSON lines made
// to exercise every rule of the date and of ujson) gets the content hash
// and the measurement_uid OONI's code computed: read through the
// project's report reader, the blobs it numbers are OONI's.
func TestGolden(t *testing.T) {
	want := readGolden(t)
	files, err := filepath.Glob("testdata/raw/*/*")
	testutil.Check(t, err)
	rr := report.NewReader()
	rr.UIDs = true
	seen, uids := 0, 0
	for _, file := range files {
		tn := filepath.Base(filepath.Dir(file)) + "/" + filepath.Base(file)
		raw, err := os.ReadFile(file)
		testutil.Check(t, err)
		kind := report.KindOf(tn)
		got := map[int]golden{}
		_, err = rr.Read(bytes.NewReader(raw), kind, func(m report.Measurement) {
			// The reader's, as a run computes them; and from the blob's
			// bytes, which must agree.
			g := golden{hash: m.ID.Hash.String(), uid: m.ID.UID}
			if g.uid == "" {
				g.uid = "-"
			}
			blob := raw[m.Offset : m.Offset+m.Size]
			direct := ooniuid.Sum(blob)
			if kind == report.KindJSON {
				direct = ooniuid.Sum(blob, []byte("\n"))
			}
			if direct != m.ID.Hash {
				t.Errorf("%s #%d: the reader's hash is not that of the blob's bytes", tn, m.Ndx)
			}
			got[int(m.Ndx)] = g
		}, func(deadletter.Record) {})
		testutil.Check(t, err)
		for ndx, w := range want[tn] {
			g, ok := got[ndx]
			switch {
			case !ok:
				t.Errorf("%s #%d: not read; OONI's is %s", tn, ndx, w.uid)
			case g.hash != w.hash:
				t.Errorf("%s #%d: hash %s, OONI's %s", tn, ndx, g.hash, w.hash)
			case g.uid != w.uid:
				t.Errorf("%s #%d: uid %s, OONI's %s", tn, ndx, g.uid, w.uid)
			}
			seen++
			if w.uid != "-" {
				uids++
			}
		}
		if len(got) != len(want[tn]) {
			t.Errorf("%s: %d measurements read, OONI has %d", tn, len(got), len(want[tn]))
		}
	}
	if seen < 50 || uids < 40 {
		t.Fatalf("%d measurements compared (%d with a uid): the golden data is too thin", seen, uids)
	}

	// Blobs over MaxBlob are not kept whole: they are hashed as they
	// stream, one state at a time, to the same hashes.
	rr.MaxBlob = 100
	streamed := 0
	for _, file := range files {
		tn := filepath.Base(filepath.Dir(file)) + "/" + filepath.Base(file)
		raw, err := os.ReadFile(file)
		testutil.Check(t, err)
		_, err = rr.Read(bytes.NewReader(raw), report.KindOf(tn), func(m report.Measurement) {
			if m.Size > 100 {
				streamed++
			}
			if w := want[tn][int(m.Ndx)]; m.ID.Hash.String() != w.hash {
				t.Errorf("%s #%d, streamed: hash %s, OONI's %s", tn, m.Ndx, m.ID.Hash, w.hash)
			}
		}, func(deadletter.Record) {})
		testutil.Check(t, err)
	}
	if streamed < 20 {
		t.Errorf("only %d blobs over 100 bytes: the streamed path is not exercised", streamed)
	}
}

// Every measurement_uid OONI's code gives a report's measurements is on a
// row the reader gives, or in a dead-letter record's measurement_uids,
// once: over the golden reports, and over JSON reports framed so that
// OONI's lines and autoclaving's documents differ (a blank line, CRLF, a
// line that starts with a space, a tab, a '[' or a BOM, or ends with
// something else than '}', a last line without its "\n"). No row carries
// a uid OONI's code does not give.
func TestGolden_EveryUIDAccountedFor(t *testing.T) {
	for _, set := range []string{"testdata", "testdata/framing"} {
		want := readGoldenFile(t, set+"/golden.tsv")
		files, err := filepath.Glob(set + "/raw/*/*")
		testutil.Check(t, err)
		rr := report.NewReader()
		rr.UIDs = true
		listed := 0
		for _, file := range files {
			tn := filepath.Base(filepath.Dir(file)) + "/" + filepath.Base(file)
			raw, err := os.ReadFile(file)
			testutil.Check(t, err)
			var got []string
			_, err = rr.Read(bytes.NewReader(raw), report.KindOf(tn), func(m report.Measurement) {
				if m.ID.UID != "" {
					got = append(got, m.ID.UID)
				}
			}, func(d deadletter.Record) {
				got = append(got, d.MeasurementUIDs...)
				listed += len(d.MeasurementUIDs)
			})
			testutil.Check(t, err)
			var oonis []string
			for _, g := range want[tn] {
				if g.uid != "-" {
					oonis = append(oonis, g.uid)
				}
			}
			slices.Sort(got)
			slices.Sort(oonis)
			if !slices.Equal(got, oonis) {
				t.Errorf("%s: the rows and records carry the uids\n%v\nOONI's code gives\n%v", tn, got, oonis)
			}
		}
		if set == "testdata/framing" && listed < 20 {
			t.Errorf("%s: %d uids listed in records: the framing cases prove nothing", set, listed)
		}
	}
}

// OONI's own test vector of trivial_id: the hash of no bytes, on the date
// of its measurement_start_time.
func TestUID_OONIVector(t *testing.T) {
	if got := ooniuid.UID(ooniuid.Date("2021-02-03 10:11:12"), ooniuid.Sum(nil)); got != "01202102037f9c2ba4e88f827d61604550760585" {
		t.Errorf("uid %s, OONI's test gives 01202102037f9c2ba4e88f827d61604550760585", got)
	}
}

// The loader's bound is on what aliases expand to, not on the document's
// own nodes: a long list (PyYAML loads a million scalars) keeps its uid,
// and aliases of aliases (a billion laughs) are refused in bounded time.
func TestYAMLUID_BoundIsOnAliases(t *testing.T) {
	header := []byte("---\nprobe_cc: ZZ\nprobe_asn: AS0\nstart_time: 1388707200.0\nreport_id: r\ntest_name: dns_consistency\n...\n")
	long := []byte("---\ninput: x\ntest_start_time: 1388707200.0\nlist: [" + strings.Repeat("1, ", 3000) + "1]\n...\n")
	bomb := []byte("---\ninput: x\ntest_start_time: 1388707200.0\na: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n...\n")
	unbounded := ooniuid.NewYAMLReport(header).UID(long, ooniuid.Sum(long))
	if unbounded == "" {
		t.Fatal("the long list gets no uid under the usual bound")
	}
	defer ooniuid.SetMaxNodes(1000)()
	if got := ooniuid.NewYAMLReport(header).UID(long, ooniuid.Sum(long)); got != unbounded {
		t.Errorf("a list of 3,001 scalars under a bound of 1,000: uid %q, want %q", got, unbounded)
	}
	if got := ooniuid.NewYAMLReport(header).UID(bomb, ooniuid.Sum(bomb)); got != "" {
		t.Errorf("aliases that expand to 10,000 nodes under a bound of 1,000: uid %q, want none", got)
	}
}
