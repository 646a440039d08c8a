package cli

import (
	"os"
	"runtime"
)

// SpareProcs makes sure the scheduler runs n goroutines at once
// (GOMAXPROCS), unless GOMAXPROCS is set in the environment: the readers of
// a run, busy on the CPU, and the goroutines that answer the network (a
// PostgreSQL COPY, an S3 upload) beside them. With fewer, as on one CPU
// (a pod limited to one, or taskset), a COPY's goroutine that the socket
// wakes waits behind the readers' time slices, and the server waits on
// it; with a processor of the scheduler's to spare it runs at once, the
// kernel sharing the CPU between the threads.
func SpareProcs(n int) {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}
