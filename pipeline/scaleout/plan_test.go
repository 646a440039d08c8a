package scaleout_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

// days returns n buckets from 2012-12-05 on, with sizes like the archive's:
// mostly tens of MB, a few days ten times that.
func days(n int, seed uint64) []scaleout.Bucket {
	r := rand.New(rand.NewPCG(seed, 9))
	start := time.Date(2012, 12, 5, 0, 0, 0, 0, time.UTC)
	out := make([]scaleout.Bucket, n)
	for i := range out {
		size := 10<<20 + r.Int64N(60<<20)
		if r.IntN(20) == 0 {
			size *= 10
		}
		out[i] = scaleout.Bucket{Name: start.AddDate(0, 0, i).Format(time.DateOnly), Bytes: size, Fingerprint: "fp" + string(rune('a'+i%26))}
	}
	return out
}

func TestPlan_Balanced(t *testing.T) {
	for _, shards := range []int{1, 3, 7, 64} {
		bs := days(2000, uint64(shards))
		p, err := scaleout.NewPlan("/in", bs, shards)
		if err != nil {
			t.Fatal(err)
		}
		var total, largest int64
		for _, b := range bs {
			total += b.Bytes
			largest = max(largest, b.Bytes)
		}
		mean := float64(total) / float64(shards)
		bound := max((1+scaleout.Slack)*mean, mean+float64(largest))
		loads := p.Loads()
		var sum int64
		for i, l := range loads {
			sum += l
			if float64(l) > bound {
				t.Errorf("%d shards: shard %d holds %d bytes, above the bound %.0f", shards, i, l, bound)
			}
		}
		if sum != total || len(p.Buckets) != len(bs) {
			t.Fatalf("%d shards: %d bytes in %d buckets planned of %d in %d", shards, sum, len(p.Buckets), total, len(bs))
		}
		t.Logf("%d shards: largest shard %.3f of the mean", shards, float64(slices.Max(loads))/mean)
	}
}

// The same listing in any order gives the same plan; adding a day moves
// few buckets.
func TestPlan_Stable(t *testing.T) {
	bs := days(1500, 1)
	want, _ := scaleout.NewPlan("/in", bs, 7)
	shuffled := slices.Clone(bs)
	rand.New(rand.NewPCG(2, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	got, _ := scaleout.NewPlan("/in", shuffled, 7)
	if string(got.Marshal()) != string(want.Marshal()) {
		t.Fatal("a reordered listing gives another plan")
	}
	more := days(1501, 1)
	next, _ := scaleout.NewPlan("/in", more, 7)
	moved := 0
	for i, b := range want.Buckets {
		if next.Buckets[i].Shard != b.Shard {
			moved++
		}
	}
	if moved*100 > len(bs) {
		t.Errorf("adding a day moved %d of %d buckets", moved, len(bs))
	}
	t.Logf("adding a day moved %d of %d buckets", moved, len(bs))
}

func TestPlan_Parse(t *testing.T) {
	p, _ := scaleout.NewPlan("s3://x/canned", days(40, 3), 3)
	data := p.Marshal()
	back, err := scaleout.ParsePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Marshal()) != string(data) {
		t.Fatal("a plan read back is not the plan written")
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"shard": 1`, `"shard": 2`, "checksum"},
		{`"version": 1`, `"version": 2`, "version 2"},
		{`"bytes"`, `"size"`, "unknown field"},
	} {
		_, err := scaleout.ParsePlan([]byte(strings.Replace(string(data), tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s changed to %s: %v, want an error naming %q", tc.from, tc.to, err, tc.want)
		}
	}
	if _, err := scaleout.NewPlan("/in", append(days(3, 1), days(1, 1)...), 2); err == nil {
		t.Error("a bucket listed twice is planned")
	}
	// A relative input would be found only from the planner's folder.
	if _, err := scaleout.NewPlan("data/canned", days(3, 1), 2); err == nil || !strings.Contains(err.Error(), "relative path") {
		t.Errorf("a relative input is planned: %v", err)
	}
	// Shards past any Job's completions: refused before anything is
	// allocated for them, from the flag and from a plan forged with its
	// checksum recomputed.
	for _, n := range []int{scaleout.MaxShards + 1, 1 << 32, 4e18} {
		if _, err := scaleout.NewPlan("/in", days(3, 1), n); err == nil {
			t.Errorf("%d shards planned", n)
		}
		forged := p
		forged.Shards = n
		if _, err := scaleout.ParsePlan(forged.Marshal()); err == nil || !strings.Contains(err.Error(), "shards") {
			t.Errorf("a plan of %d shards is read: %v", n, err)
		}
	}
	rel := p
	rel.Input = "data/canned"
	if _, err := scaleout.ParsePlan(rel.Marshal()); err == nil || !strings.Contains(err.Error(), "relative path") {
		t.Errorf("a plan of a relative input is read: %v", err)
	}
}

// TestShard: a shard given wins; without one, JOB_COMPLETION_INDEX picks
// it; a Job whose completions are not the plan's shards, an index that is
// not a number or not a shard, and no index at all are refused.
func TestShard(t *testing.T) {
	p := scaleout.Plan{Shards: 4}
	for _, tc := range []struct {
		shard int
		env   map[string]string
		want  int
		err   string
	}{
		{shard: 2, want: 2},
		{shard: -1, env: map[string]string{"JOB_COMPLETION_INDEX": "3"}, want: 3},
		{shard: -1, env: map[string]string{"JOB_COMPLETION_INDEX": "1", "JOB_COMPLETION_COUNT": "4"}, want: 1},
		{shard: -1, err: "--shard, or JOB_COMPLETION_INDEX"},
		{shard: -1, env: map[string]string{"JOB_COMPLETION_INDEX": "x"}, err: "not a shard number"},
		{shard: -1, env: map[string]string{"JOB_COMPLETION_INDEX": "4"}, err: "not one of the plan's 0..3"},
		{shard: 1, env: map[string]string{"JOB_COMPLETION_COUNT": "5"}, err: "completions must be the plan's shards"},
	} {
		got, err := p.Shard(tc.shard, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Shard(%d, %v) = %d, %v; want %d", tc.shard, tc.env, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Shard(%d, %v) = %d, %v; want an error with %q", tc.shard, tc.env, got, err, tc.err)
		}
	}
}
