package cli

import (
	"os"
	"runtime/debug"
)

// HeapLimit is the soft limit on the memory of the commands that hold
// state for the whole output (run, verify, census): past it the garbage collector
// runs sooner, instead of letting the heap grow to twice what is live. At
// full scale they hold about 230 to 280 MB, so it keeps their peak RSS
// near 400 MiB where it would reach 450 to 570. A heap that has to be
// larger still grows, at the price of more collection.
const HeapLimit = 384 << 20

// LimitHeap sets HeapLimit unless GOMEMLIMIT sets a limit of its own.
func LimitHeap() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(HeapLimit)
	}
}
