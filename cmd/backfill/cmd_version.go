package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/backfill-dev/backfill/internal/cli"
)

// buildInfo is what the version command says.
type buildInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"revision_time,omitempty"`
	Dirty    bool   `json:"dirty,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func runVersion(_ context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("version", std)
	asJSON := fs.Bool("json", false, "one JSON object")
	args, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return cli.Usagef("version takes no arguments")
	}
	bi := readBuildInfo()
	if *asJSON {
		b, _ := json.Marshal(bi)
		fmt.Fprintf(std.Out, "%s\n", b)
		return nil
	}
	fmt.Fprintf(std.Out, "backfill %s\n", bi.Version)
	if bi.Revision != "" {
		dirty := ""
		if bi.Dirty {
			dirty = "+dirty"
		}
		fmt.Fprintf(std.Out, "revision %s%s (%s)\n", bi.Revision, dirty, bi.Time)
	}
	fmt.Fprintf(std.Out, "built    with %s for %s\n", bi.Go, bi.Platform)
	return nil
}

func readBuildInfo() buildInfo {
	out := buildInfo{Version: buildVersion(), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.time":
				out.Time = s.Value
			case "vcs.modified":
				out.Dirty = s.Value == "true"
			}
		}
	}
	return out
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
