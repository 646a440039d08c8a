package ooniuid

import "unicode/utf8"

// SetMaxNodes sets the bound on the nodes a document's aliases expand to,
// for a test, and returns the function that restores it.
func SetMaxNodes(n int) (restore func()) {
	old := maxNodes
	maxNodes = n
	return func() { maxNodes = old }
}

// FullDate is Date without its reading of the canonical form.
var FullDate = fullDate

// JSONDateBytewise is JSONDate with its strings read eight bytes at a
// time, not 64 (scan64).
func JSONDateBytewise(line []byte) (string, bool) { return jsonDate(line, utf8.Valid(line), false) }

// HasScan64 tells whether scan64 runs here.
var HasScan64 = hasScan64
