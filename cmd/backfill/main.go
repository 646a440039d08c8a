package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/backfill-dev/backfill/internal/cli"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "backfill: interrupt received, stopping (press again to force)")
		cancel()
		<-sigs
		os.Exit(cli.ExitInterrupted)
	}()
	stop := profile(os.Getenv("BACKFILL_CPUPROFILE"))
	err := run(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// profile writes a CPU profile of the command to path (none when empty),
// for go tool pprof; the returned function ends it.
func profile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "backfill: BACKFILL_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// exitCode maps the error of run to the exit status, printing it once.
func exitCode(err error, stderr io.Writer) int {
	return cli.ExitCode(err, stderr, commandNames())
}
