package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

// LimitHeap sets the soft limit, unless GOMEMLIMIT sets one.
func TestLimitHeap(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	LimitHeap()
	if got := debug.SetMemoryLimit(-1); got != HeapLimit {
		t.Errorf("limit %d, want %d", got, HeapLimit)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	LimitHeap()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d under GOMEMLIMIT, want it left alone", got)
	}
}
