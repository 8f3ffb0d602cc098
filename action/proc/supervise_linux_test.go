//go:build linux

package proc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/action/proc/proctest"
)

// agentEnv makes the test binary a stand-in for the agent: it runs the
// script its value names under a supervisor with the grace it names, and
// waits until it is killed.
const agentEnv = "NO8S_PROC_TEST_AGENT"

type agentSpec struct {
	Script string        `json:"script"`
	Grace  time.Duration `json:"grace"`
}

func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(agentEnv); ok {
		os.Exit(runAgent(raw))
	}
	os.Exit(m.Run())
}

func runAgent(raw string) int {
	var spec agentSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	runtime.LockOSThread()
	cmd := osexec.Command("/bin/sh", "-c", spec.Script)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	status, closeWriter, err := proc.Supervise(cmd, proc.Options{InterruptGrace: spec.Grace})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = cmd.Start()
	closeWriter()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = cmd.Wait()
	fmt.Fprintln(os.Stderr, "the command returned:", err, proc.StartError(status))
	return 3
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not after %v", what, timeout)
		case <-tick.C:
		}
	}
}

// startAgent starts the test binary as an agent that runs spec, with env
// added to its environment and its standard error written to stderr (when
// not nil).
func startAgent(t *testing.T, spec agentSpec, stderr io.Writer, env ...string) *osexec.Cmd {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return proctest.StartAgent(t, stderr, append([]string{agentEnv + "=" + string(raw)}, env...)...)
}

// waitPidFile waits until the pid file holds a pid, and returns it.
func waitPidFile(t *testing.T, pidfile, what string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, what, func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// When the agent dies, a supervisor with an interrupt grace sends the
// whole group SIGINT, gives the command the grace to exit, and kills what
// is left: at once once the command exited, at the grace's end when it
// ignores the interrupt.
func TestInterruptGraceWhenTheAgentDies(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	tests := []struct {
		name string
		// script writes its pid to $PIDFILE once it runs; $OUT is for its
		// own record.
		script    string
		atLeast   time.Duration
		out       string
		survivors bool
	}{
		{
			// The shell stops on the interrupt; its background child, which
			// a non-interactive shell starts ignoring SIGINT, is killed
			// once the shell exited.
			name:   "command stops on the interrupt",
			script: `trap 'echo interrupted > "$OUT"; exit 0' INT; sleep 300 & echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; wait`,
			out:    "interrupted",
		},
		{
			name:    "command ignores the interrupt",
			script:  `trap '' INT; echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; sleep 300; echo ended > "$OUT"`,
			atLeast: grace,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidfile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
			var agentErr strings.Builder
			agent := startAgent(t, agentSpec{Script: tt.script, Grace: grace}, &agentErr, "PIDFILE="+pidfile, "OUT="+out)
			pid := waitPidFile(t, pidfile, "the script to start")
			pgid, err := syscall.Getpgid(pid)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
			if pgid == pid || !proc.GroupAlive(pgid) {
				t.Fatalf("the script %d is in group %d: want the supervisor's", pid, pgid)
			}
			if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			agent.Wait()
			killed := time.Now()
			waitFor(t, grace+15*time.Second, "the group to end", func() bool { return !proc.GroupAlive(pgid) })
			if took := time.Since(killed); took < tt.atLeast {
				t.Errorf("the group ended %v after the agent, before the grace of %v", took, tt.atLeast)
			}
			got, err := os.ReadFile(out)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(got)) != tt.out {
				t.Errorf("the script wrote %q, want %q", got, tt.out)
			}
			if strings.Contains(agentErr.String(), "the command returned") {
				t.Errorf("the command returned before the agent was killed: %s", agentErr.String())
			}
		})
	}
}

// GroupAlive sees a group whose leader is gone while one of its processes
// is not, and none once that one is gone too.
func TestGroupAlive(t *testing.T) {
	t.Parallel()
	if proc.GroupAlive(0) || proc.GroupAlive(-1) {
		t.Error("GroupAlive of no group")
	}
	leader := osexec.Command("/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outb, err := leader.Output() // the leader exits at once
	if err != nil {
		t.Fatal(err)
	}
	pgid := leader.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	child, err := strconv.Atoi(strings.TrimSpace(string(outb)))
	if err != nil {
		t.Fatal(err)
	}
	if !proc.GroupAlive(pgid) {
		t.Fatal("a group whose leader exited but whose child runs is not alive")
	}
	if members, err := proc.GroupMembers(pgid); err != nil || len(members) != 1 || members[0] != child {
		t.Fatalf("GroupMembers(%d) = %v, %v; want the child %d alone", pgid, members, err, child)
	}
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the group to end", func() bool { return !proc.GroupAlive(pgid) })
}
