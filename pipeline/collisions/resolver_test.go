package collisions

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// referenceVerdicts is the policy written out over the whole set: a report
// loses to the first-sorting of the reports it collides with that sort
// before it.
func referenceVerdicts(names []string, rgs []Range, bits int) map[string]string {
	pairs, _ := bruteForce(rgs, bits)
	out := map[string]string{}
	for p := range pairs {
		if p.A == p.B {
			continue
		}
		a, b := names[p.A], names[p.B]
		if b < a {
			a, b = b, a
		}
		if w, ok := out[b]; !ok || a < w {
			out[b] = a
		}
	}
	return out
}

// randomReports returns count named reports on ts timestamps, each of up
// to maxN measurements at a random base.
func randomReports(rng *rand.Rand, count, ts int, maxN uint32, name func(int) string) ([]string, []Range) {
	var names []string
	var rgs []Range
	for i := range count {
		names = append(names, name(i))
		rgs = append(rgs, Range{TS: uint32(rng.IntN(ts)), Base: rng.Uint32(), N: 1 + rng.Uint32N(maxN)})
	}
	return names, rgs
}

func resolve(names []string, rgs []Range, bits int, order []int) map[string]string {
	r := NewResolver(bits)
	for _, i := range order {
		r.Add(names[i], rgs[i], uint32(i))
	}
	out := map[string]string{}
	for ref := range r.Len() {
		if w, ok := r.Winner(uint32(ref)); ok {
			out[r.Name(uint32(ref))] = r.Name(w)
		}
	}
	return out
}

func sameVerdicts(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for l, w := range want {
		if got[l] != w {
			t.Errorf("%s: %s lost to %q, want %q", what, l, got[l], w)
		}
	}
	for l, w := range got {
		if _, ok := want[l]; !ok {
			t.Errorf("%s: %s lost to %s but keeps its IDs by the policy", what, l, w)
		}
	}
}

// The verdicts equal the policy over the whole set, for every order of
// adding the reports: chains (a beats b, b beats c) included.
func TestResolverOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const bits = 20
	names, rgs := randomReports(rng, 400, 4, 20000, func(i int) string {
		return fmt.Sprintf("2018-06-%02d/r%04d", 1+rng.IntN(28), rng.IntN(10000)*1000+i)
	})
	want := referenceVerdicts(names, rgs, bits)
	if len(want) < 10 {
		t.Fatalf("only %d losers: the test proves little", len(want))
	}
	chains := 0
	for _, w := range want {
		if _, lost := want[w]; lost {
			chains++
		}
	}
	if chains == 0 {
		t.Fatal("no winner that itself lost: chains are not exercised")
	}
	for k := range 20 {
		order := rng.Perm(len(names))
		if k == 0 {
			for i := range order {
				order[i] = i
			}
		}
		sameVerdicts(t, fmt.Sprint("order ", k), resolve(names, rgs, bits, order), want)
	}
}

// Add reports every change of verdict as it happens, so a caller that
// applies the changes ends with the final verdicts.
func TestResolverChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const bits = 20
	names, rgs := randomReports(rng, 300, 3, 30000, func(i int) string {
		return fmt.Sprintf("n%05d", rng.IntN(100000)*10+i%10)
	})
	r := NewResolver(bits)
	applied := map[string]string{}
	for _, i := range rng.Perm(len(names)) {
		_, changed := r.Add(names[i], rgs[i], 0)
		for _, c := range changed {
			w, ok := r.Winner(c)
			if !ok {
				t.Fatalf("%s reported as changed but keeps its IDs", r.Name(c))
			}
			if old, had := applied[r.Name(c)]; had && old <= r.Name(w) {
				t.Fatalf("%s: winner went from %s to %s, not to an earlier-sorting one", r.Name(c), old, r.Name(w))
			}
			applied[r.Name(c)] = r.Name(w)
		}
	}
	sameVerdicts(t, "applied changes", applied, referenceVerdicts(names, rgs, bits))
}

// The same textname added twice (a report listed twice): the first added
// keeps its IDs.
func TestResolverSameName(t *testing.T) {
	r := NewResolver(28)
	a, _ := r.Add("2018-06-20/x", Range{TS: 1, Base: 10, N: 5}, 0)
	b, changed := r.Add("2018-06-20/x", Range{TS: 1, Base: 10, N: 5}, 0)
	if w, ok := r.Winner(b); !ok || w != a || len(changed) != 1 || changed[0] != b {
		t.Errorf("second copy: winner %v %v, changed %v", w, ok, changed)
	}
	if _, ok := r.Winner(a); ok {
		t.Error("the first copy lost")
	}
}

// TestResolver_TextnamesSpilled: with the textnames in the resolver's file
// (a few hundred bytes kept in memory), every verdict and name is the
// policy's, as with all of them in memory.
func TestResolver_TextnamesSpilled(t *testing.T) {
	defer func(n int) { spillAt = n }(spillAt)
	spillAt = 300
	rng := rand.New(rand.NewPCG(5, 6))
	names, rgs := randomReports(rng, 3000, 200, 3000, func(i int) string {
		return fmt.Sprintf("2018-06-%02d/20180620T0029%02dZ-DE-AS%d-probe.json", 1+i%28, i%60, rng.IntN(1e6))
	})
	const bits = 20
	order := rng.Perm(len(names))
	got := resolve(names, rgs, bits, order)
	want := referenceVerdicts(names, rgs, bits)
	if len(want) < 50 {
		t.Fatalf("only %d reports lose: the set does not collide enough", len(want))
	}
	sameVerdicts(t, "spilled", got, want)

	r := NewResolver(bits)
	for _, i := range order {
		r.Add(names[i], rgs[i], 0)
	}
	if r.names.f == nil || r.names.memStart == 0 {
		t.Fatal("the textnames were not spilled")
	}
	for ref, i := range order {
		if r.Name(uint32(ref)) != names[i] {
			t.Fatalf("ref %d reads %q, want %q", ref, r.Name(uint32(ref)), names[i])
		}
	}
	if err := errors.Join(r.Err(), r.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestResolver_TextnamesFileFails: a textnames' file that cannot be made
// is an error the caller sees, not verdicts made without the names.
func TestResolver_TextnamesFileFails(t *testing.T) {
	defer func(n int) { spillAt = n }(spillAt)
	spillAt = 100
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	r := NewResolver(20)
	for i := range 10 {
		r.Add(fmt.Sprintf("2018-06-01/20180601T000000Z-DE-AS%d-%060d-probe.json", i, i), Range{TS: 1, Base: uint32(i), N: 1}, 0)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "textnames") {
		t.Errorf("Err() = %v, want the textnames' file's error", err)
	}
}

// Settle, the rule as it reads, and Resolver, the rule as reports come in
// any order, give every report the same verdict, as does the brute force.
func TestSettle_SameAsResolver(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bits := range []int{16, 20, 24} {
		names, rgs := randomReports(rng, 300, 3, 1<<uint(bits-4), func(i int) string {
			return fmt.Sprintf("2018-06-%02d/r%05d", 1+rng.IntN(28), rng.IntN(100000)*10+i%10)
		})
		// In textname order, the reports whose range wraps onto itself out.
		order := make([]int, len(names))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
		sorted, out := make([]Range, len(order)), make([]bool, len(order))
		for k, i := range order {
			sorted[k], out[k] = rgs[i], rgs[i].SelfOverlaps(bits)
		}
		got := map[string]string{}
		for k, w := range Settle(sorted, bits, out) {
			if w >= 0 {
				got[names[order[k]]] = names[order[w]]
			}
		}
		var in []int // the reports that take part, for the others
		for k, i := range order {
			if !out[k] {
				in = append(in, i)
			}
		}
		want := resolve(names, rgs, bits, in)
		if len(want) < 10 {
			t.Fatalf("%d bits: only %d losers: the test proves little", bits, len(want))
		}
		sameVerdicts(t, fmt.Sprint(bits, " bits: Settle against Resolver"), got, want)
		sameVerdicts(t, fmt.Sprint(bits, " bits: Resolver against Settle"), want, got)
	}
}
