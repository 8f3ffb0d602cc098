//go:build linux

package proc_test

import (
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that leaves the group (setsid, as daemons do) is still the
// run's: when the agent dies, it dies with the group.
func TestEscapedProcessDiesWithTheAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	script := `setsid sh -c 'echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 300' </dev/null >/dev/null 2>&1 & sleep 300`
	raw, err := json.Marshal(agentSpec{Script: script, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := osexec.Command(self, "-test.run=^$")
	agent.Env = append(os.Environ(), agentEnv+"="+string(raw), "PIDFILE="+pidfile)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var escaped int
	waitFor(t, 30*time.Second, "the escaped process to start", func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		escaped, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agent.Wait()
	waitFor(t, 15*time.Second, "the escaped process to die", func() bool { return !running(escaped) })
}

// running reports whether pid is a process that has not ended.
func running(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
