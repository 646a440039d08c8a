package cli

import (
	"runtime"
	"testing"
)

// SpareProcs raises GOMAXPROCS to n, never lowers it, and leaves a
// GOMAXPROCS of the environment alone.
func TestSpareProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(1)
	SpareProcs(3)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS 1, SpareProcs(3): %d", n)
	}
	SpareProcs(2)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS 3, SpareProcs(2): %d", n)
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	SpareProcs(4)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS=1 in the environment, SpareProcs(4): %d", n)
	}
}
