package collisions

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// The radix sort is a stable sort by timestamp, every byte value
// included.
func TestSortByTS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 255, 256, 10000} {
		reps := make([]sweepRep, n)
		for i := range reps {
			ts := rng.Uint32()
			switch rng.IntN(4) {
			case 0:
				ts = 0xFFFFFFFF - uint32(rng.IntN(3))
			case 1:
				ts = uint32(rng.IntN(300)) << 24
			}
			reps[i] = sweepRep{ts: ts, ref: uint32(i)}
		}
		want := slices.Clone(reps)
		slices.SortStableFunc(want, func(a, b sweepRep) int { return cmp.Compare(a.ts, b.ts) })
		if got := sortByTS(reps); !slices.Equal(got, want) {
			t.Errorf("%d reports: not a stable sort by timestamp", n)
		}
	}
}

// AddManifest on several workers adds what Add adds line by line, in the
// same order, and reports the same bad lines in line order.
func TestAddManifest_SameAsAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// More batches than are ever in flight: batches are reused.
	names, ns := textnames(rng, 12*batchLines+17)
	var b strings.Builder
	var lines []string
	for i, name := range names {
		switch i % 997 {
		case 3:
			lines = append(lines, "2012-12-05/garbage\t4")
		case 5:
			lines = append(lines, name) // no tab
		case 7:
			lines = append(lines, strings.Repeat("x", MaxManifestLine+1)+"\t1")
		}
		lines = append(lines, fmt.Sprintf("%s\t%d", name, ns[i]))
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	kt, _ := ooid.NewKeyTable("m", 0, nil)
	schemes := []ooid.Scheme{{CounterBits: 20, SHA1Offset: 33}, {CounterBits: 22, SHA1Offset: 0}, ooid.KeyedScheme(20, kt)}
	seq, _ := NewSchemeSweep(schemes, 1<<20)
	var seqBad []string
	err := ReadManifest(strings.NewReader(b.String()), func(line int64, name []byte, n uint32) error {
		if err := seq.Add(name, n); err != nil {
			seqBad = append(seqBad, fmt.Sprint(line, err))
		}
		return nil
	}, func(err error) { seqBad = append(seqBad, fmt.Sprint(err.(*ManifestError).Line, err)) })
	if err != nil {
		t.Fatal(err)
	}
	seqReps := slices.Clone(seq.reps) // Finish sorts them
	s := seq.Finish()
	for _, workers := range []int{1, 2, 5} {
		par, _ := NewSchemeSweep(schemes, 1<<20)
		if workers == 2 {
			par.Grow(len(names) / 2)
		}
		var parBad []string
		if err := par.AddManifest(strings.NewReader(b.String()), workers, func(line int64, err error) {
			parBad = append(parBad, fmt.Sprint(line, err))
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(parBad, seqBad) || len(seqBad) == 0 {
			t.Errorf("%d workers: bad lines\n%v\nwant\n%v", workers, parBad, seqBad)
		}
		if par.Reports != seq.Reports || par.Measurements != seq.Measurements || !slices.Equal(par.reps, seqReps) ||
			!slices.Equal(par.bases, seq.bases) {
			t.Errorf("%d workers: %d reports, %d measurements; Add gives %d, %d", workers, par.Reports, par.Measurements, seq.Reports, seq.Measurements)
		}
		a := par.Finish()
		for i := range a {
			if a[i].Pairs != s[i].Pairs || !slices.Equal(a[i].First, s[i].First) {
				t.Errorf("%d workers, %s: %d pairs, Add gives %d", workers, a[i].Scheme, a[i].Pairs, s[i].Pairs)
			}
		}
		if s[0].Pairs == 0 {
			t.Error("no pair at 20 bits: the manifest does not exercise the sweep")
		}
	}
}

// Grow's room costs no memory until reports fill it: an audit makes room
// for a manifest's size over its shortest line, many times what a
// manifest of long lines needs. (slices.Grow zeroed all of it: 0.5 s of
// page faults and about 30 MiB more at the full scale.) The reports added
// after it are those added without it. The room is made in a process of
// its own, as an audit's is: in this one, memory the tests before freed
// may be given to it, and that the allocator must clear.
func TestSweepGrow_RoomUntouched(t *testing.T) {
	if os.Getenv("BACKFILL_TEST_ROOM") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSweepGrow_RoomUntouched$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "BACKFILL_TEST_ROOM=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestSweepGrow_RoomUntouched")) {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	rss := func() int64 {
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			t.Skip("no /proc/self/statm:", err)
		}
		var size, resident int64
		if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
			t.Fatal(err)
		}
		return resident * int64(os.Getpagesize())
	}
	grown, _ := NewSweep([]int{24}, []int{0}, 0)
	plain, _ := NewSweep([]int{24}, []int{0}, 0)
	add := func(s *Sweep, from, to int) {
		for i := from; i < to; i++ {
			if err := s.Add(fmt.Appendf(nil, "2017-06-01/20170601T%02d%02d00Z-IT-AS%d-web_connectivity-no_report_id-0.2.0-probe.json", i/60%24, i%60, i), uint32(i%50)); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(grown, 0, 1000)
	add(plain, 0, 1000)
	const room = 1 << 25 // 32 M reports: 512 MiB of room
	before := rss()
	grown.Grow(room)
	if got := rss() - before; got > 16<<20 {
		t.Errorf("making room for %d reports took %d MiB of memory", room, got>>20)
	}
	if cap(grown.reps) < len(grown.reps)+room || cap(grown.bases) < len(grown.bases)+room*grown.hashes.stride {
		t.Fatalf("room for %d, %d reports", cap(grown.reps)-len(grown.reps), (cap(grown.bases)-len(grown.bases))/grown.hashes.stride)
	}
	reps := &grown.reps[0]
	add(grown, 1000, 3000)
	add(plain, 1000, 3000)
	if &grown.reps[0] != reps {
		t.Error("adding reports within the room moved them")
	}
	if !slices.Equal(grown.reps, plain.reps) || !slices.Equal(grown.bases, plain.bases) || grown.Reports != plain.Reports {
		t.Error("the reports added after Grow differ from those added without it")
	}
}
