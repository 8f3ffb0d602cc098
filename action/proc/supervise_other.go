//go:build !linux

package proc

import (
	"os"
	osexec "os/exec"
)

// Supervise leaves cmd as it is: only Linux has a parent-death signal, so
// elsewhere the command runs directly, and its process group outlives an
// agent that is killed.
func Supervise(*osexec.Cmd, Options) (status *os.File, closeWriter func(), err error) {
	return nil, func() {}, nil
}

// StartError has nothing to read without a supervisor.
func StartError(*os.File) error { return nil }
