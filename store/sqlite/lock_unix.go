//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockFile takes the exclusive advisory lock on path+".lock" without
// waiting, and writes this process's ID in it so that whoever is refused
// can be told who holds it. The kernel releases a flock when its holder
// exits, however it exits, so a crashed agent leaves no stale lock.
func lockFile(path string) (*os.File, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := io.ReadAll(io.LimitReader(f, 64)); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = "process " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("sqlite: %s is in use by %s (lock file %s): %w", path, holder, name, ErrLocked)
		}
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// unlockFile clears the process ID and releases the lock. The file stays:
// removing it would let two agents lock two different files of that name.
func unlockFile(f *os.File) {
	f.Truncate(0)
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
