// Package proc runs the programs that action plugins start in a process
// group of their own that does not outlive the agent.
//
// On Linux a program runs under a supervisor: the agent's own binary,
// started again in supervisor mode (see supervise_linux.go). It leads the
// group, runs the program in it and, when the agent dies, even by SIGKILL,
// ends the whole group, and the program's processes that left it (setsid):
// at once, or after an interrupt and a grace in which the program may stop
// by itself (OpenTofu saving its state and releasing its lock). Elsewhere the program runs directly and outlives a killed
// agent.
//
// GroupAlive tells whether a group still has a process that has not ended,
// so that the agent taking a resource over can wait for the previous
// attempt's group rather than only for the process it started.
package proc

import "time"

// SupervisorEnv switches the agent's binary into the supervisor; its value
// is the pid of the agent that started it, then, after a comma, the grace
// in milliseconds that the program gets after an interrupt when the agent
// dies (none: killed at once). The program never sees it, and settings may
// not set it.
const SupervisorEnv = "NO8S_EXEC_SUPERVISOR"

// Options are how the supervisor ends the group when the agent dies.
type Options struct {
	// InterruptGrace, when positive, makes the supervisor send SIGINT to
	// the whole group when the agent dies (as a terminal's Ctrl-C does) and
	// give the program that long to exit before it kills the group. Zero
	// kills the group at once.
	InterruptGrace time.Duration
}
