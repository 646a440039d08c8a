// Package reader reads OONI bucket folders: their indexes and, in later
// stages, the canned and autoclaved containers. Its functions are
// synchronous and single-goroutine; the orchestrator runs them in parallel.
package reader
