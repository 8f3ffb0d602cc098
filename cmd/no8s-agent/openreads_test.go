package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// An agent whose reads need no token says so when it listens beyond this
// host, and only then.
func TestRunWarnsOfOpenReadsOffLoopback(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		listen, token string
		warn          bool
	}{
		{"127.0.0.1:0", "", false},
		{"0.0.0.0:0", "", true},
		{"0.0.0.0:0", "NO8S_TEST_OPEN_READS_TOKEN", false},
	} {
		t.Run(tt.listen+" "+tt.token, func(t *testing.T) {
			t.Parallel()
			url := pgtest.URL(t)
			repo := copyTree(t, "../../examples/repo")
			cfg := filepath.Join(t.TempDir(), "no8s.yaml")
			text := "sources:\n  - name: local\n    dir: " + repo + "\n"
			if tt.token != "" {
				// A name of this test's own: os.Setenv, as t.Setenv
				// refuses parallel tests.
				if err := os.Setenv(tt.token, "a-read-token-of-enough-length-0123456789"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Unsetenv(tt.token) })
				text += "api:\n  readTokenEnv: " + tt.token + "\n"
			}
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			log, stop := runAgent(t, url, "--config", cfg, "--listen", tt.listen)
			// It synced, so it has long been serving; once stopped, its
			// log is whole.
			stop()
			if !strings.Contains(log.String(), "serving HTTP") {
				t.Fatalf("the agent never served HTTP:\n%s", log)
			}
			if got := strings.Contains(log.String(), "reads are open"); got != tt.warn {
				t.Errorf("warned %v, want %v:\n%s", got, tt.warn, log)
			}
		})
	}
}

// The agent's environment, where its secrets are, is not for the commands
// its actions run, which share its user: its /proc entries are root's.
// (The tests run as root, who reads them anyway; the flag is what a
// non-root agent relies on.)
func TestRunHidesItsEnvironmentFromActions(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc and PR_SET_DUMPABLE are linux's")
	}
	url := pgtest.URL(t)
	repo := copyTree(t, "../../examples/repo")
	cfg := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(cfg, []byte("sources:\n  - name: local\n    dir: "+repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stop := runAgent(t, url, "--config", cfg)
	defer stop()
	dumpable, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dumpable != 0 {
		t.Errorf("the running agent is dumpable (%d): a command its action runs reads /proc/<agent>/environ", dumpable)
	}
	// Its own /proc entries are still its own to read.
	if _, err := os.ReadFile("/proc/self/maps"); err != nil {
		t.Errorf("/proc/self/maps: %v", err)
	}
}

// The attack itself: a process of the agent's user, as an action's command
// is, reads /proc/<agent>/environ. It is refused, while the same read of
// another process of that user succeeds, so the reader is not what fails.
func TestAgentEnvironmentRefusedToItsOwnUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc and PR_SET_DUMPABLE are linux's")
	}
	if os.Geteuid() != 0 {
		t.Skip("running the agent as another user needs root; TestRunHidesItsEnvironmentFromActions checks the flag")
	}
	t.Parallel()
	const uid, secret = 65534, "env-secret-4f1d9c"
	as := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	env := []string{"PATH=/usr/bin:/bin", "NO8S_TEST_ENV_SECRET=" + secret}

	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	for _, c := range [][]string{{"cp", binary(t), filepath.Join(dir, "no8s-agent")}, {"cp", "-r", "../../examples/repo", work + "/"},
		{"chmod", "755", filepath.Dir(dir), dir}, {"chown", "-R", "65534:65534", work}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	log := &lockedWriter{w: &bytes.Buffer{}}
	agent := exec.Command(filepath.Join(dir, "no8s-agent"), "run", "--database", "state.db", "--source", ".",
		"--listen", "127.0.0.1:0", "--cache-dir", "cache")
	agent.Dir, agent.Env, agent.SysProcAttr, agent.Stdout, agent.Stderr = work, env, as, log, log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(log.String(), "serving HTTP") {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the agent never served:\n%s", log)
		}
	}

	read := func(pid int) (string, error) {
		c := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", pid))
		c.SysProcAttr = as
		out, err := c.CombinedOutput()
		return string(out), err
	}
	other := exec.Command("sleep", "60")
	other.Env, other.SysProcAttr = env, as
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if out, err := read(other.Process.Pid); err != nil || !strings.Contains(out, secret) {
		t.Fatalf("reading another process of the same user: %v %q; the check below would prove nothing", err, out)
	}
	if out, err := read(agent.Process.Pid); err == nil || strings.Contains(out, secret) {
		t.Errorf("a process of the agent's user read its environment: %v %q", err, out)
	}
}
