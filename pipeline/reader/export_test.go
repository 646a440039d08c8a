package reader

// Checked makes cr read every container with the LZ4 checksums, as the
// reference a test holds the first read to.
func Checked(cr *ContainerReader) { cr.checked = true }

// SetMaxHeldEvents sets the bound on what a first read holds, for a
// test, and returns the function that restores it.
func SetMaxHeldEvents(n int) (restore func()) {
	old := maxHeldEvents
	maxHeldEvents = n
	return func() { maxHeldEvents = old }
}
