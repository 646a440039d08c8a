package store

import "syscall"

// DupLockFile gives a second descriptor of a local lock's open file, as a
// child caught between fork and exec holds one.
func DupLockFile(l Lock) (int, error) { return syscall.Dup(int(l.(*localLock).f.Fd())) }
