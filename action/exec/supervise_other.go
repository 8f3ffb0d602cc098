//go:build !linux

package exec

import (
	"os"
	osexec "os/exec"
)

// superviseCommand leaves cmd as it is: only Linux has a parent-death
// signal, so elsewhere the command runs directly, and its process group
// outlives an agent that is killed.
func superviseCommand(*osexec.Cmd) (status *os.File, closeWriter func(), err error) {
	return nil, func() {}, nil
}

// startError has nothing to read without a supervisor.
func startError(*os.File) error { return nil }
