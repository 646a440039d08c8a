package reader_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/reader/index"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// sampleBucket generates one clean bucket and returns it with its first
// tar container and that container's bytes.
func sampleBucket(t testing.TB) (*reader.Bucket, reader.Container, []byte) {
	t.Helper()
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = 1, 30, 24<<10, 200
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := reader.OpenBucket(filepath.Join(dir, "2017-06-01"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range b.Containers {
		if c.Tar && len(c.Entry.Texts) > 2 {
			data, err := store.ReadFile(t.Context(), b.FS, c.Path)
			if err != nil {
				t.Fatal(err)
			}
			return b, c, data
		}
	}
	t.Fatal("no tar container with 3 reports")
	return nil, reader.Container{}, nil
}

type outcome struct {
	measurements int
	dead         []deadletter.Record
}

// readAs reads data as if it were container c.
func readAs(t testing.TB, cr *reader.ContainerReader, b *reader.Bucket, c reader.Container, data []byte) outcome {
	t.Helper()
	b, c = inTemp(t, b, c, data)
	c.Size = int64(len(data))
	var o outcome
	_, err := cr.Read(context.Background(), b, c, reader.Handler{
		Report:  func(r reader.ContainerReport) { o.measurements += int(r.Stats.N) },
		Problem: func(d deadletter.Record) { o.dead = append(o.dead, d) },
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	for _, d := range o.dead {
		if d.Reason == "" || d.Message == "" || d.File != c.Name || d.Bucket != b.Date {
			t.Fatalf("dead letter without reason, message or location: %+v", d)
		}
	}
	return o
}

// Every truncation of a container, and random damage, gives dead letters
// and fewer measurements, never a panic, a hang or an error.
func TestContainerReader_Damage(t *testing.T) {
	b, c, data := sampleBucket(t)
	cr := reader.NewContainerReader()
	whole := readAs(t, cr, b, c, data)
	if len(whole.dead) != 0 || whole.measurements == 0 {
		t.Fatalf("clean container: %d measurements, dead letters %v", whole.measurements, whole.dead)
	}
	step := max(len(data)/300, 1)
	for cut := 0; cut < len(data); cut += step {
		o := readAs(t, cr, b, c, data[:cut])
		if len(o.dead) == 0 || o.measurements > whole.measurements {
			t.Fatalf("cut at %d of %d: %d measurements, %d dead letters", cut, len(data), o.measurements, len(o.dead))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		bad := append([]byte(nil), data...)
		for range 1 + rng.IntN(4) {
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		}
		if o := readAs(t, cr, b, c, bad); len(o.dead) == 0 {
			t.Fatal("a damaged container gave no dead letter")
		}
	}
}

func FuzzContainerReader(f *testing.F) {
	b, c, data := sampleBucket(f)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{0x04, 0x22, 0x4d, 0x18, 0x64, 0x70, 0xb9})
	cr := reader.NewContainerReader()
	f.Fuzz(func(t *testing.T, in []byte) {
		readAs(t, cr, b, c, in)
	})
}

// A report whose SHA-1 differs from the index's is flagged when SHA-1s
// are verified, and read as it is either way; a CRC-32 difference is
// always flagged.
func TestContainerReader_Checksums(t *testing.T) {
	b, c, data := sampleBucket(t)
	c.Entry.Texts = append([]index.Text(nil), c.Entry.Texts...)
	c.Entry.Texts[1].SHA1[0] ^= 1
	cr := reader.NewContainerReader()
	for _, verify := range []bool{false, true} {
		cr.VerifySHA1 = verify
		o := readAs(t, cr, b, c, data)
		if got := len(o.dead); verify && (got != 1 || o.dead[0].Reason != deadletter.ChecksumMismatch || o.dead[0].Textname != c.Entry.Texts[1].Textname) || !verify && got != 0 {
			t.Errorf("verify %v: dead letters %+v", verify, o.dead)
		}
	}
	c.Entry.Texts[1].SHA1[0] ^= 1
	c.Entry.Texts[2].CRC32++
	cr.VerifySHA1 = false
	if o := readAs(t, cr, b, c, data); len(o.dead) != 1 || o.dead[0].Reason != deadletter.ChecksumMismatch {
		t.Errorf("CRC-32 mismatch: dead letters %+v", o.dead)
	}
}

// Containers the index does not list are recorded in name order, so a
// bucket's records do not depend on map order; and the layout of a bucket
// without an index is told from its first .lz4 file. A name that starts
// with a dot is a name like any other: recorded, never passed over as
// hidden.
func TestOpen_UnlistedInOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "2017-06-01")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"d.lz4", "b.tar.lz4", "a.lz4", "c.tar.lz4", "e.lz4", "f.tar.lz4", ".g.lz4"}
	for _, n := range names {
		// An LZ4 frame magic with the flags the lz4 CLI writes: canned.
		if err := os.WriteFile(filepath.Join(dir, n), []byte{0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		b, err := reader.Open(dir, reader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Format != reader.FormatCanned {
			t.Fatalf("format %s, want canned", b.Format)
		}
		var got []string
		for _, p := range b.Problems {
			if p.Reason == deadletter.NotInIndex {
				got = append(got, strings.TrimPrefix(p.File, "2017-06-01/"))
			}
		}
		want := []string{".g.lz4", "a.lz4", "b.tar.lz4", "c.tar.lz4", "d.lz4", "e.lz4", "f.tar.lz4"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("unlisted containers recorded as %v, want %v", got, want)
		}
	}
}

// readRecords reads data as container c and returns every call the
// handler got, measurements and their uids included, in order; with
// checked, a reader that checks the LZ4 checksums on its only read.
func readRecords(t testing.TB, cr *reader.ContainerReader, b *reader.Bucket, c reader.Container, data []byte, checked bool) []string {
	t.Helper()
	b, c = inTemp(t, b, c, data)
	c.Size = int64(len(data))
	var calls []string
	h := reader.Handler{
		Report:  func(r reader.ContainerReport) { calls = append(calls, fmt.Sprintf("report %+v", r.Stats)) },
		Problem: func(d deadletter.Record) { calls = append(calls, fmt.Sprintf("record %+v", d)) },
	}
	h.Blob = func(textname string, m report.Measurement) {
		calls = append(calls, fmt.Sprintf("blob %s %+v", textname, m))
	}
	if checked {
		cr = reader.NewContainerReader()
		reader.Checked(cr)
	}
	cr.Reports.UIDs = true
	st, err := cr.Read(context.Background(), b, c, h)
	if err != nil {
		t.Fatal(err)
	}
	return append(calls, fmt.Sprintf("stats %+v", st))
}

// A listed container is read first without the LZ4 checksums; whatever
// the damage, the handler then gets exactly what a read with every check
// gives it: the same reports, records and stats, in the same order.
func TestContainerReader_FastReadSameAsChecked(t *testing.T) {
	b, c, data := sampleBucket(t)
	cr := reader.NewContainerReader()
	same := func(what string, in []byte) {
		t.Helper()
		fast, checked := readRecords(t, cr, b, c, in, false), readRecords(t, cr, b, c, in, true)
		if strings.Join(fast, "\n") != strings.Join(checked, "\n") {
			t.Fatalf("%s: the fast read gives\n%s\nthe checked read\n%s", what, strings.Join(fast, "\n"), strings.Join(checked, "\n"))
		}
	}
	same("clean", data)
	// A container of more measurements than the first read holds is read
	// again, with every check: the same calls.
	restore := reader.SetMaxHeldEvents(5)
	same("over the bound of what the first read holds", data)
	restore()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		bad := append([]byte(nil), data...)
		for range 1 + rng.IntN(3) {
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		}
		same(fmt.Sprint("damage ", i), bad)
	}
	// The one difference: a frame whose stored content checksum alone is
	// wrong, in a file the index's CRC-32 was computed from. Every report
	// still matches its CRC-32 and the fast read records nothing; the
	// checked read records the LZ4 layer's complaint.
	bad := append([]byte(nil), data...)
	bad[len(bad)-1] ^= 0x55
	c2 := c
	c2.Entry.CRC32 = int32(crc32.ChecksumIEEE(bad))
	fast, checked := readRecords(t, cr, b, c2, bad, false), readRecords(t, cr, b, c2, bad, true)
	clean := readRecords(t, cr, b, c, data, true)
	if strings.Join(fast[:len(fast)-1], "\n") != strings.Join(clean[:len(clean)-1], "\n") {
		t.Errorf("content checksum alone wrong: the fast read gives\n%s\nthe clean data\n%s", strings.Join(fast, "\n"), strings.Join(clean, "\n"))
	}
	if !strings.Contains(strings.Join(checked, "\n"), "lz4") {
		t.Errorf("the checked read does not complain of the content checksum:\n%s", strings.Join(checked, "\n"))
	}
}

// inTemp puts data in a folder of its own as the only file of a copy of
// b, named as c.
func inTemp(t testing.TB, b *reader.Bucket, c reader.Container, data []byte) (*reader.Bucket, reader.Container) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.lz4"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	bb := *b
	bb.FS = store.Local(dir)
	c.Path = "c.lz4"
	return &bb, c
}
