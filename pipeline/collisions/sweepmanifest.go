package collisions

import (
	"cmp"
	"io"
	"slices"
	"sync"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// manifestBatch is a run of consecutive manifest lines, hashed by a
// worker and added in order.
type manifestBatch struct {
	names []byte
	ends  []uint32 // of each textname in names
	ns    []uint32
	lines []int64
	bad   []badLine // lines not taken, in line order once sorted
	// filled by the worker:
	reps  []sweepRep // ref unset
	bases []uint32
	sums  [][20]byte
	done  chan struct{}
}

type badLine struct {
	line int64
	err  error
}

const batchLines = 4096

// AddManifest adds the reports of a manifest (as [ReadManifest] reads
// it), parsing and hashing the textnames on workers goroutines while the
// calling one reads. The reports are added in line order, as Add would add
// them, and bad is called in line order for each line not taken: with a
// [*ManifestError] for a malformed line, or the textname's error.
func (a *Sweep) AddManifest(r io.Reader, workers int, bad func(line int64, err error)) error {
	workers = max(workers, 1)
	todo := make(chan *manifestBatch, workers)
	order := make(chan *manifestBatch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range todo {
				a.hashBatch(b)
				close(b.done)
			}
		}()
	}
	// The assembler adds finished batches in order and hands them back
	// for the next lines: the batches in flight are all the memory the
	// reading needs, however long the manifest.
	free := make(chan *manifestBatch, cap(todo)+cap(order)+2)
	var assembled sync.WaitGroup
	assembled.Add(1)
	go func() {
		defer assembled.Done()
		for b := range order {
			<-b.done
			a.addBatch(b, bad)
			b.reset()
			select {
			case free <- b:
			default:
			}
		}
	}()
	newBatch := func() *manifestBatch {
		select {
		case b := <-free:
			return b
		default:
			return &manifestBatch{done: make(chan struct{}), names: make([]byte, 0, batchLines*128)}
		}
	}
	cur := newBatch()
	flush := func() {
		order <- cur
		todo <- cur
		cur = newBatch()
	}
	err := ReadManifest(r, func(line int64, textname []byte, n uint32) error {
		cur.names = append(cur.names, textname...)
		cur.ends = append(cur.ends, uint32(len(cur.names)))
		cur.ns = append(cur.ns, n)
		cur.lines = append(cur.lines, line)
		if len(cur.ns) == batchLines {
			flush()
		}
		return nil
	}, func(err error) {
		var line int64
		if me, ok := err.(*ManifestError); ok {
			line = me.Line
		}
		cur.bad = append(cur.bad, badLine{line, err})
	})
	flush()
	close(todo)
	close(order)
	wg.Wait()
	assembled.Wait()
	return err
}

// reset empties b for the next lines, keeping its buffers.
func (b *manifestBatch) reset() {
	b.names, b.ends, b.ns, b.lines, b.bad = b.names[:0], b.ends[:0], b.ns[:0], b.lines[:0], nil
	b.reps, b.bases, b.sums = b.reps[:0], b.bases[:0], b.sums[:0]
	b.done = make(chan struct{})
}

func (a *Sweep) hashBatch(b *manifestBatch) {
	start := uint32(0)
	var sum [20]byte
	for i, end := range b.ends {
		name := b.names[start:end]
		start = end
		t, err := ooid.ParseTextnameBytes(name)
		if err != nil {
			b.bad = append(b.bad, badLine{b.lines[i], err})
			continue
		}
		b.bases = a.hashes.base(name, t.TS, b.bases, &sum)
		if a.hashes.sums {
			b.sums = append(b.sums, sum)
		}
		b.reps = append(b.reps, sweepRep{ts: t.TS, n: b.ns[i]})
	}
}

func (a *Sweep) addBatch(b *manifestBatch, bad func(int64, error)) {
	for _, r := range b.reps {
		r.ref = uint32(a.Reports)
		a.reps = append(a.reps, r)
		a.Reports++
		a.Measurements += int64(r.n)
	}
	a.bases = append(a.bases, b.bases...)
	a.sums = append(a.sums, b.sums...)
	slices.SortStableFunc(b.bad, func(x, y badLine) int { return cmp.Compare(x.line, y.line) })
	for _, l := range b.bad {
		bad(l.line, l.err)
	}
}
