//go:build linux

package exec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/proc/proctest"
)

// TestAgentKilled kills, with SIGKILL, a process that runs an action whose
// script started a child, and expects the script and its child to die: the
// scripts' children are what would otherwise run on next to the run of the
// agent that takes the resource over.
func TestAgentKilled(t *testing.T) {
	dir := t.TempDir()
	// The pid file is written in one go, once the child runs.
	const record = "echo \"$$ $!\" > \"$PIDFILE.tmp\"\nmv \"$PIDFILE.tmp\" \"$PIDFILE\"\n"
	plain := writeScript(t, dir, "plain.sh", "sleep 300 &\n"+record+"wait\n")
	// The child inherits the ignored SIGTERM: only SIGKILL stops them.
	stubborn := writeScript(t, dir, "stubborn.sh", "trap '' TERM\nsleep 300 &\n"+record+"wait\n")
	// A grandchild of the script, in a subshell that does not wait for it.
	deep := writeScript(t, dir, "deep.sh", "(sleep 300 & "+strings.ReplaceAll(record, "\n", "; ")+") \nwait\nsleep 300\n")
	t.Parallel()

	tests := []struct {
		name   string
		script string
	}{
		{name: "child", script: plain},
		{name: "child ignoring SIGTERM", script: stubborn},
		{name: "grandchild", script: deep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "pids")
			cfg, err := json.Marshal(map[string]any{
				"command": []string{tt.script},
				"env":     map[string]string{"PIDFILE": pidfile},
				"timeout": "5m",
			})
			if err != nil {
				t.Fatal(err)
			}
			var agentErr strings.Builder
			agent := proctest.StartAgent(t, &agentErr, agentEnv+"="+string(cfg))

			var pids []int
			waitFor(t, 30*time.Second, "the script never wrote its pids", func() bool {
				b, err := os.ReadFile(pidfile)
				if err != nil {
					return false
				}
				for f := range strings.FieldsSeq(string(b)) {
					pid, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("pid file %q: %v", b, err)
					}
					pids = append(pids, pid)
				}
				return true
			})
			if len(pids) != 2 {
				t.Fatalf("pid file has %v, want the script's and its child's", pids)
			}
			script, child := pids[0], pids[1]
			pgid, err := syscall.Getpgid(script)
			if err != nil {
				t.Fatal(err)
			}
			// Whatever happens, the group does not outlive the test.
			t.Cleanup(func() {
				syscall.Kill(-pgid, syscall.SIGKILL)
				waitGroup(pgid, time.Now().Add(5*time.Second))
			})
			if g, err := syscall.Getpgid(child); err != nil || g != pgid {
				t.Fatalf("the child %d is in group %d (%v), want the script's, %d", child, g, err, pgid)
			}

			if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			agent.Wait()

			// The orphans come to this process, a subreaper (see TestMain),
			// which must reap them: a zombie still answers signal 0.
			waitFor(t, 15*time.Second, fmt.Sprintf("the script %d and its child %d outlive the agent", script, child), func() bool {
				reap(pgid)
				return errors.Is(syscall.Kill(script, 0), syscall.ESRCH) && errors.Is(syscall.Kill(child, 0), syscall.ESRCH)
			})
			if strings.Contains(agentErr.String(), "Apply returned") {
				t.Fatalf("Apply returned before the agent was killed: %s", agentErr.String())
			}
		})
	}
}

// TestSupervisorEnvRefused checks that nobody can set the variable that
// switches the binary into supervisor mode through the settings.
func TestSupervisorEnvRefused(t *testing.T) {
	t.Parallel()
	getenv := func(string) (string, bool) { return "1", true }
	for _, key := range []string{"env", "passEnv"} {
		var val any = map[string]string{supervisorEnv: "1"}
		if key == "passEnv" {
			val = []string{supervisorEnv}
		}
		_, err := newAction(map[string]any{"command": []string{"true"}, key: val}, getenv)
		if err == nil || !strings.Contains(err.Error(), key+": "+supervisorEnv) {
			t.Errorf("%s: error = %v, want one naming %s", key, err, supervisorEnv)
		}
	}
}
