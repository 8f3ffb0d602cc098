//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// GroupAlive reports whether process group pgid still has a process that
// has not ended. A zombie has ended: it only waits to be reaped, by a
// parent that may be slow to do it.
func GroupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	// Signal 0 checks existence; a zombie still answers.
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return liveMember(pgid)
}
