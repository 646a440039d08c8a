package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
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
		os.Exit(exitInterrupted)
	}()
	stop := profile(os.Getenv("BACKFILL_CPUPROFILE"))
	err := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
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
