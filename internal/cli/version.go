package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Build is what the program says of its build.
type Build struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"revision_time,omitempty"`
	Dirty    bool   `json:"dirty,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Version is the program's version: stamped (set at link time) when it
// is not empty, else the module's version, else "(devel)".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// ReadBuild returns the build of the running program: its version (as
// Version says) and the VCS revision the go command recorded.
func ReadBuild(stamped string) Build {
	out := Build{Version: Version(stamped), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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

// Write writes the build as text, or as one JSON object.
func (b Build) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		j, _ := json.Marshal(b)
		_, err := fmt.Fprintf(w, "%s\n", j)
		return err
	}
	fmt.Fprintf(w, "backfill %s\n", b.Version)
	if b.Revision != "" {
		dirty := ""
		if b.Dirty {
			dirty = "+dirty"
		}
		fmt.Fprintf(w, "revision %s%s (%s)\n", b.Revision, dirty, b.Time)
	}
	_, err := fmt.Fprintf(w, "built    with %s for %s\n", b.Go, b.Platform)
	return err
}
