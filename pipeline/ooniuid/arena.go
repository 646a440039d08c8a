package ooniuid

// arena hands out the slices and dicts of one YAML entry's values from
// blocks it keeps from one entry to the next: an entry's values are dead
// once its uid is known (YAMLReport.UID keeps none of them), so reset
// frees the blocks for the next entry, without the garbage collector. A
// nil arena allocates as make does.
type arena struct {
	anys  []any
	strs  []string
	dicts []pyDict
}

// A new block is twice the size of the one before, from 64 elements to
// arenaBlock, and at least the size of the slice it is made for. A block
// past arenaKeep is not kept past the entry that needed it.
const (
	arenaBlock = 4096
	arenaKeep  = 1 << 16
)

// carve hands out n of the block's elements with room for c, from a new
// block when the block has not that room left.
func carve[T any](block *[]T, n, c int) []T {
	b := *block
	if len(b)+c > cap(b) {
		b = make([]T, 0, max(c, min(2*cap(b), arenaBlock), 64))
	}
	s := b[len(b) : len(b)+n : len(b)+c]
	*block = b[:len(b)+c]
	return s
}

func (a *arena) anySlice(n, c int) []any {
	if a == nil {
		return make([]any, n, c)
	}
	return carve(&a.anys, n, c)
}

func (a *arena) strSlice(n, c int) []string {
	if a == nil {
		return make([]string, n, c)
	}
	return carve(&a.strs, n, c)
}

func (a *arena) dict() *pyDict {
	if a == nil {
		return newDict()
	}
	return &carve(&a.dicts, 1, 1)[0]
}

// reset frees what was handed out: it is cleared, so that it holds on to
// nothing.
func (a *arena) reset() {
	a.anys = reuse(a.anys)
	a.strs = reuse(a.strs)
	a.dicts = reuse(a.dicts)
}

func reuse[T any](b []T) []T {
	if cap(b) > arenaKeep {
		return nil
	}
	clear(b)
	return b[:0]
}
