package ooniuid

// SetMaxNodes sets the bound on the nodes a document's aliases expand to,
// for a test, and returns the function that restores it.
func SetMaxNodes(n int) (restore func()) {
	old := maxNodes
	maxNodes = n
	return func() { maxNodes = old }
}
