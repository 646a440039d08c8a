// Package reader reads OONI bucket folders of either layout, canned or
// autoclaved: it lists a bucket and fingerprints it, tells its layout,
// opens its index (pipeline/reader/index) and reads its containers (LZ4
// frames, tar members) into reports (pipeline/reader/report), each with
// its measurements and every problem named; and it checks an autoclaved
// bucket against its canned twin. Its functions are synchronous and
// single-goroutine; the orchestrator runs them in parallel.
package reader
