package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The files a local store writes, through Create or WriteFile (the Dead
// Letter Archive's records, the ledgers) or WriteLocalFile, get 0666 less
// the process's umask, as the kernel reports it.
func TestLocal_FileModeFollowsUmask(t *testing.T) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status to read the umask from")
	}
	var umask uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if umask, err = strconv.ParseUint(strings.TrimSpace(v), 8, 32); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := os.FileMode(0o666 &^ umask)
	dir := t.TempDir()
	st := Local(dir)
	if err := WriteFile(t.Context(), st, "a/b.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := WriteLocalFile(filepath.Join(dir, "c.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a/b.json", "c.json"} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v (umask %03o)", f, got, want, umask)
		}
	}
}
