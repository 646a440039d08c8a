package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	rtrace "runtime/trace"
	"syscall"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
)

// stopGrace bounds how long a command may take to stop once told to
// (SIGTERM, SIGINT): past it, the process exits at once. What it writes
// is written whole or not at all (files renamed into place, transactions
// committed whole, the stamp state's mark made durable before any ID past
// it), so an exit at any moment loses nothing that was said to be done; a
// command held in a call that does not see the interruption (a read of a
// silent standard input, a server that stopped answering) cannot hold
// the process past it.
const stopGrace = 5 * time.Second

// ownProcess is set by main: the command runs as a process of its own,
// whose process-wide settings (GOMAXPROCS) it may tune; run called
// in-process (the tests) leaves them alone.
var ownProcess bool

func main() {
	ownProcess = true
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	// SIGHUP (a terminal or an ssh session gone) stops a command as
	// SIGTERM does: whole buckets, nothing left in OUT/.tmp/.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// A closed standard output (| head) makes a write fail with EPIPE,
	// which the command reports (exit 1), where SIGPIPE would kill the
	// process (status 141) with its work half said.
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		<-sigs
		fmt.Fprintf(os.Stderr, "backfill: interrupt received, stopping (within %s; press again to force)\n", stopGrace)
		cancel()
		select {
		case <-sigs:
		case <-time.After(stopGrace):
			fmt.Fprintf(os.Stderr, "backfill: not stopped within %s: exiting now (what was written is whole; run again to go on)\n", stopGrace)
		}
		os.Exit(cli.ExitInterrupted)
	}()
	if len(os.Args) > 0 && os.Args[0] != "" {
		progName = os.Args[0]
	}
	stop := profile(os.Getenv("BACKFILL_CPUPROFILE"), os.Getenv("BACKFILL_TRACE"))
	err := run(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// profile writes a CPU profile of the command to cpu, for go tool pprof,
// and an execution trace to trace, for go tool trace (none where a path is
// empty); the returned function ends them.
func profile(cpu, trace string) func() {
	var stops []func()
	start := func(env, path string, begin func(io.Writer) error, end func()) {
		if path == "" {
			return
		}
		f, err := os.Create(path)
		if err == nil {
			if err = begin(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "backfill: %s: %v\n", env, err)
			return
		}
		stops = append(stops, func() { end(); f.Close() })
	}
	start("BACKFILL_CPUPROFILE", cpu, pprof.StartCPUProfile, pprof.StopCPUProfile)
	start("BACKFILL_TRACE", trace, rtrace.Start, rtrace.Stop)
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// exitCode maps the error of run to the exit status, printing it once.
func exitCode(err error, stderr io.Writer) int {
	return cli.ExitCode(err, stderr, commandNames())
}
