package store

import (
	"fmt"
	"io/fs"
	"syscall"
)

// inodeStamp is a local file's inode and change time.
func inodeStamp(info fs.FileInfo) string {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d %d.%09d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
}
