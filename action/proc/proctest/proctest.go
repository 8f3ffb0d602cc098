// Package proctest starts the running test binary again as a stand-in for
// the agent, so that tests can kill it, with SIGKILL, while the processes
// of an action it runs are alive.
package proctest

import (
	"io"
	"os"
	"os/exec"
	"testing"
)

// StartAgent starts the test binary again, running no tests, with env
// added to its environment (by which the test's TestMain tells that it is
// to act as the agent) and its standard error written to stderr when that
// is not nil. The agent is killed at the test's end if it still runs.
func StartAgent(t testing.TB, stderr io.Writer, env ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(self, "-test.run=^$")
	agent.Env = append(os.Environ(), env...)
	if stderr != nil {
		agent.Stderr = stderr
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Both fail harmlessly once the test has killed and reaped it.
		_ = agent.Process.Kill()
		_ = agent.Wait()
	})
	return agent
}
