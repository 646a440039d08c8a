package job_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/keysearch"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// keyedFor searches a key table that makes the corpus collision-free at
// 20 bits, and returns its scheme as read back from its scheme file.
func keyedFor(t testing.TB, truth []corpus.Truth, seed string) ooid.Scheme {
	t.Helper()
	var census keysearch.Census
	for _, tr := range truth {
		if tn, err := ooid.ParseTextname(tr.Textname); err == nil && tr.Textname != "" {
			census.Add(tn.TS, uint32(tr.N))
		}
	}
	c := keysearch.NewCorpus(census.Shape())
	for _, tr := range truth {
		if tn, err := ooid.ParseTextname(tr.Textname); err == nil && tr.Textname != "" {
			testutil.Check(t, c.Add(tn.TS, []byte(tr.Textname), uint32(tr.N)))
		}
	}
	tab, err := c.SearchTable(context.Background(), keysearch.Options{Bits: 20, Seed: seed, From: 0, To: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ooid.MarshalScheme(ooid.KeyedScheme(20, tab.Keys))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ooid.ParseScheme(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// refKeyedID is a keyed backfilled OOID computed from the scheme file's
// definition: key I of seed S is the first 16 bytes of SHA-256 of
// "backfill-ooid-key" 0 S 0 I, as little-endian words.
func refKeyedID(t testing.TB, s ooid.Scheme, textname string, ndx uint32) uint64 {
	t.Helper()
	tn, err := ooid.ParseTextname(textname)
	if err != nil {
		t.Fatal(err)
	}
	idx := s.Keys().Default()
	for _, o := range s.Keys().Overrides() {
		if o.TS == tn.TS {
			idx = o.Index
		}
	}
	sum := sha256.Sum256(append([]byte("backfill-ooid-key\x00"+s.Keys().Seed()+"\x00"), binary.BigEndian.AppendUint64(nil, idx)...))
	k := ooid.Key{K0: binary.LittleEndian.Uint64(sum[:8]), K1: binary.LittleEndian.Uint64(sum[8:16])}
	mask := uint64(1)<<s.CounterBits - 1
	return uint64(tn.TS)<<32 | 0xF<<28 | (ooid.SipHash24(k, textname)+uint64(ndx))&mask
}

// A run under a key table found for a corpus that collides under the
// SHA-1 window writes no collision record, and every ID is the reference
// computation's; outputs record the table and runs of other schemes are
// kept apart.
func TestRun_KeyedScheme(t *testing.T) {
	skipUnderRace(t)
	in := genColliding(t, 11)
	truth := corpustest.ReadTruth(t, in)
	if n := len(expectedLosers(t, truth)); n < 5 {
		t.Fatalf("only %d colliding reports under the SHA-1 window", n)
	}
	scheme := keyedFor(t, truth, "job-test")
	if len(scheme.Keys().Overrides()) == 0 {
		t.Log("a single key was enough")
	}
	run := func(out string, s ooid.Scheme, resume bool, buckets ...string) (job.Summary, error) {
		sk, err := parquetfile.Open(t.Context(), store.Local(out))
		if err != nil {
			t.Fatal(err)
		}
		defer sk.Close()
		return job.Run(context.Background(), job.Config{In: store.Local(in), Buckets: buckets, Workers: 2, Scheme: s, MaxBlob: maxBlob, Version: "test", Resume: resume}, sk)
	}
	out := t.TempDir()
	sum, err := run(out, scheme, false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Reasons[deadletter.Collision] != 0 {
		t.Errorf("%d collision records under the key table", sum.Reasons[deadletter.Collision])
	}
	want := map[string]int{}
	var total int64
	for _, tr := range truth {
		if tr.Textname != "" && tr.N > 0 {
			want[tr.Textname] = tr.N
			total += int64(tr.N)
		}
	}
	ms, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	var rows int64
	for _, f := range ms {
		for _, m := range readParquetScheme[parquetfile.Measurement](t, f, "20", "-1") {
			rows++
			if got, ref := uint64(m.OOID), refKeyedID(t, scheme, m.Textname, uint32(m.Ndx)); got != ref {
				t.Fatalf("%s ndx %d: OOID %016x, reference %016x", m.Textname, m.Ndx, got, ref)
			}
		}
	}
	states, err := parquetfile.ReadState(t.Context(), store.Local(out))
	if err != nil || len(states) != 4 {
		t.Fatalf("ledger: %v %v", states, err)
	}
	for _, st := range states {
		if !st.Meta.Scheme.Equal(scheme) {
			t.Errorf("bucket %s recorded under %s, want %s", st.Meta.Bucket, st.Meta.Scheme, scheme)
		}
	}
	if rows != total {
		t.Errorf("%d measurement rows, want %d", rows, total)
	}

	// The same scheme, loaded again, finds the output complete; another
	// key table redoes it whole, and may not join it bucket by bucket.
	if sum, err := run(out, keyedFor(t, truth, "job-test"), true); err != nil || sum.Skipped != 4 {
		t.Errorf("resume with the same scheme: %+v %v", sum, err)
	}
	other := keyedFor(t, truth, "another-seed")
	_, err = run(out, other, false, "2017-06-02")
	if err == nil || !strings.Contains(err.Error(), "key_table="+scheme.Table) {
		t.Errorf("one bucket under another key table: %v", err)
	}
	if sum, err := run(out, other, true); err != nil || sum.Buckets != 4 {
		t.Errorf("resume with another key table: %+v %v", sum, err)
	}
}
