//go:build linux

package proc_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/proc"
)

// A process that leaves the group (setsid, as daemons do) is still the
// run's: when the agent dies, it dies with the group.
func TestEscapedProcessDiesWithTheAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	script := `setsid sh -c 'echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 300' </dev/null >/dev/null 2>&1 & sleep 300`
	agent := startAgent(t, agentSpec{Script: script, Grace: time.Second}, nil, "PIDFILE="+pidfile)
	escaped := waitPidFile(t, pidfile, "the escaped process to start")
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agent.Wait()
	waitFor(t, 15*time.Second, "the escaped process to die", func() bool { return !proc.Running(escaped) })
}
