package scaleout_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

var scheme = ooid.Scheme{CounterBits: 8, SHA1Offset: 33}

// randomShards makes reports over few timestamps with wide ranges, so many
// collide, split over k shards; each shard's own verdicts come from a
// resolver over its reports alone, as a shard's run settles them.
func randomShards(r *rand.Rand, reports, k int) ([][]scaleout.ManifestEntry, []scaleout.ManifestEntry) {
	var all []scaleout.ManifestEntry
	shards := make([][]scaleout.ManifestEntry, k)
	for i := range reports {
		e := scaleout.ManifestEntry{TS: uint32(1000 + r.IntN(6)), Base: uint32(r.IntN(256)), N: uint32(1 + r.IntN(40)),
			Textname: fmt.Sprintf("2017-06-%02d/r%04d", 1+r.IntN(5), i), Bucket: fmt.Sprintf("b%d", r.IntN(k))}
		if r.IntN(50) == 0 {
			e.N = 300 // more than 2^8: rejected on its own
			e.RejectedBy = e.Textname
		}
		all = append(all, e)
	}
	for i := range all {
		s := int(all[i].Bucket[1] - '0')
		shards[s] = append(shards[s], all[i])
	}
	for s := range shards {
		settleAlone(shards[s])
	}
	return shards, all
}

// settleAlone sets each entry's verdict from one resolver over them all:
// the verdicts of a single run over them.
func settleAlone(es []scaleout.ManifestEntry) map[string]string {
	res := collisions.NewResolver(scheme.CounterBits)
	refs := map[int]uint32{}
	for i, e := range es {
		rg := collisions.Range{TS: e.TS, Base: e.Base, N: e.N}
		if !rg.SelfOverlaps(scheme.CounterBits) {
			refs[i], _ = res.Add(e.Textname, rg, 0)
		}
	}
	out := map[string]string{}
	for i := range es {
		ref, ok := refs[i]
		if !ok {
			out[es[i].Textname] = es[i].RejectedBy
			continue
		}
		es[i].RejectedBy = ""
		if w, lost := res.Winner(ref); lost {
			es[i].RejectedBy = res.Name(w)
		}
		out[es[i].Textname] = es[i].RejectedBy
	}
	return out
}

func readers(t *testing.T, shards [][]scaleout.ManifestEntry) []*scaleout.ManifestReader {
	t.Helper()
	var rs []*scaleout.ManifestReader
	for i, es := range shards {
		var b bytes.Buffer
		if err := scaleout.EncodeManifest(&b, scaleout.ManifestHeader{Scheme: scheme, Buckets: []string{fmt.Sprintf("b%d", i)}}, es); err != nil {
			t.Fatal(err)
		}
		r, err := scaleout.NewManifestReader(fmt.Sprint(i), &b)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// Merge gives, over the shards, the verdicts one resolver gives over all
// the reports (a single run's), reporting exactly those that differ from
// the shards'.
func TestMerge_SameAsOneRun(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		k := 1 + r.IntN(7)
		shards, all := randomShards(r, 20+r.IntN(200), k)
		local := map[string]string{}
		for _, es := range shards {
			for _, e := range es {
				local[e.Textname] = e.RejectedBy
			}
		}
		want := settleAlone(all)
		got := map[string]string{}
		st, err := scaleout.Merge(readers(t, shards), func(v scaleout.Change) error {
			got[v.Textname] = v.RejectedBy
			if v.RejectedBy != "" && !strings.Contains(v.Message, v.RejectedBy) {
				t.Errorf("message %q does not name the winner", v.Message)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for name, w := range want {
			if w != local[name] {
				changed++
				if g, ok := got[name]; !ok || g != w {
					t.Fatalf("round %d: %s: merge says %q (reported %v), one run says %q", round, name, g, ok, w)
				}
			} else if _, ok := got[name]; ok {
				t.Fatalf("round %d: %s reported changed, but its shard's verdict stands", round, name)
			}
		}
		if st.Changed != int64(changed) || st.Reports != int64(len(all)) {
			t.Fatalf("round %d: stats %+v, want %d changed of %d", round, st, changed, len(all))
		}
	}
}

func TestReader_Refuses(t *testing.T) {
	head := "#backfill-manifest v1\t8\t33\t\n"
	for _, tc := range []struct{ text, want string }{
		{"", "empty"},
		{"ts\tbase\n", "not a backfill manifest"},
		{head + "5\t1\t1\ta\tb\t\n4\t1\t1\tc\tb\t\n", "out of order"},
		{head + "5\t1\t1\ta\tb\t\n5\t1\t1\ta\tb\t\n", "out of order"},
		{head + "5\t1\t1\ta\tb\n", "5 fields"},
		{head + "5\tx\t1\ta\tb\t\n", "invalid syntax"},
		{head + "5\t1\t1\ta\tb\t\n#bucket\tb\n", "bucket line after"},
	} {
		r, err := scaleout.NewManifestReader("m", strings.NewReader(tc.text))
		for err == nil {
			_, err = r.Next()
		}
		if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	// A report in two manifests, and manifests of two schemes.
	a := "#backfill-manifest v1\t8\t33\t\n5\t1\t1\tx\tb\t\n"
	b := "#backfill-manifest v1\t9\t33\t\n"
	ra, _ := scaleout.NewManifestReader("a", strings.NewReader(a))
	ra2, _ := scaleout.NewManifestReader("a2", strings.NewReader(a))
	if _, err := scaleout.Merge([]*scaleout.ManifestReader{ra, ra2}, func(scaleout.Change) error { return nil }); err == nil || !strings.Contains(err.Error(), "two manifests") {
		t.Errorf("a report twice: %v", err)
	}
	ra, _ = scaleout.NewManifestReader("a", strings.NewReader(a))
	rb, _ := scaleout.NewManifestReader("b", strings.NewReader(b))
	if _, err := scaleout.Merge([]*scaleout.ManifestReader{ra, rb}, func(scaleout.Change) error { return nil }); err == nil || !strings.Contains(err.Error(), "two schemes") {
		t.Errorf("two schemes: %v", err)
	}
}

// FuzzReader: whatever the bytes, a manifest reads to an error or the end,
// never a panic or a hang.
func FuzzReader(f *testing.F) {
	f.Add([]byte("#backfill-manifest v1\t8\t33\t\n#bucket\tb\n5\t1\t1\ta\tb\t\n6\t1\t1\ta\tb\tc\n"))
	f.Add([]byte("#backfill-manifest v1\t28\t33\tk\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := scaleout.NewManifestReader("f", bytes.NewReader(data))
		if err != nil {
			return
		}
		for range len(data) + 2 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
		t.Fatal("more entries than lines")
	})
}
