// Package faults_test breaks the agent on purpose, with real processes: the
// agent binary killed with SIGKILL, PostgreSQL restarted under it, Git
// remotes that vanish, hang or lose their refs, hostile input and secrets
// echoed back by actions. Each test asserts what must never happen (two runs
// of one resource at once, a destroy nobody asked for, a secret shown), not
// only that the agent recovers.
//
// Run it alone with `make faults`; `make test` runs it with everything else.
package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// binDir holds the agent binary, built once for every test of the package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "no8s-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce gosync.Once
	buildErr  error
)

// agentBinary builds the agent once per test binary and returns its path.
func agentBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "no8s-agent")
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "../cmd/no8s-agent").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// logBuffer is an agent's combined output, safe to read while it is written.
type logBuffer struct {
	mu  gosync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// agent is the agent binary running as a process of its own.
type agent struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{}
	err  error
}

// startAgent runs the agent binary in workDir with args and returns at once.
// It is killed, if still running, when the test ends; its log is printed
// when the test failed.
func startAgent(t *testing.T, workDir string, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, log: &logBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(agentBinary(t), args...)
	a.cmd.Dir = workDir
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		if !a.Exited() {
			a.cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("log of agent %d (%s):\n%s", a.PID(), strings.Join(args, " "), a.log)
		}
	})
	return a
}

var servingRE = regexp.MustCompile(`msg="serving HTTP" addr=(\S+)`)

// URL waits until the agent serves HTTP and returns its base URL.
func (a *agent) URL() string {
	a.t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := servingRE.FindStringSubmatch(a.log.String()); m != nil {
			return "http://" + m[1]
		}
		select {
		case <-a.done:
			a.t.Fatalf("agent %d exited before serving: %v", a.PID(), a.err)
		case <-deadline.C:
			a.t.Fatalf("agent %d did not serve within 60s", a.PID())
		case <-tick.C:
		}
	}
}

// PID is the agent's process id.
func (a *agent) PID() int { return a.cmd.Process.Pid }

// Log is what the agent printed so far.
func (a *agent) Log() string { return a.log.String() }

// Exited reports whether the process ended.
func (a *agent) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Kill9 kills the agent with SIGKILL, as the kernel's OOM killer or a
// power cut would, and waits until the process is gone.
func (a *agent) Kill9() {
	a.t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		a.t.Fatalf("kill -9 agent %d: %v", a.PID(), err)
	}
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		a.t.Fatalf("agent %d still running 30s after SIGKILL", a.PID())
	}
}

// Stop sends SIGTERM, as a service manager does, and waits for a clean exit.
func (a *agent) Stop() {
	a.t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		a.t.Fatalf("stop agent %d: %v", a.PID(), err)
	}
	select {
	case <-a.done:
		if a.err != nil {
			a.t.Fatalf("agent %d exited with %v after SIGTERM", a.PID(), a.err)
		}
	case <-time.After(60 * time.Second):
		a.t.Fatalf("agent %d did not exit within 60s of SIGTERM", a.PID())
	}
}

// writeFile writes content to path, creating its folders.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeConfig writes the agent configuration dir/no8s.yaml and returns its path.
func writeConfig(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "no8s.yaml")
	writeFile(t, path, yaml)
	return path
}

// waitUntil calls check until it reports done or timeout passes; then the
// test fails with what check last said.
func waitUntil(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		done, state := check()
		if done {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("waiting for %s: not done after %v; last state: %s", what, timeout, state)
		case <-tick.C:
		}
	}
}

// apiGet reads url as JSON into into (when the status is 200 and into is
// not nil) and returns the status; a network error is status 0.
func apiGet(t *testing.T, url string, into any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	if resp.StatusCode == http.StatusOK && into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v\n%s", url, err, body)
		}
	}
	return resp.StatusCode
}

// gitRemote is a Git repository that agents fetch from.
type gitRemote struct {
	repo *gittest.Repo
}

// newGitRemote creates an empty repository whose branch will be main.
func newGitRemote(t *testing.T) *gitRemote {
	t.Helper()
	return &gitRemote{repo: gittest.NewRepo(t)}
}

// Commit writes files (content "" deletes one), commits them on the
// checked-out branch and returns the new commit's hash.
func (r *gitRemote) Commit(t *testing.T, files map[string]string, msg string) string {
	t.Helper()
	r.repo.Write(files)
	return r.repo.Commit(msg)
}

// Run runs git in the repository and returns its trimmed output.
func (r *gitRemote) Run(t *testing.T, args ...string) string {
	t.Helper()
	return r.repo.Git(args...)
}

// FileURL is the repository's file:// URL.
func (r *gitRemote) FileURL() string { return r.repo.URL() }

// gitHTTP serves a repository over Git's smart HTTP protocol (git
// http-backend) on a fixed loopback port that can go down, come back, or
// hang: accept connections and never answer.
type gitHTTP struct {
	t       *testing.T
	addr    string
	path    string
	handler http.Handler

	mu   gosync.Mutex
	srv  *http.Server
	hung net.Listener
	held []net.Conn
	wg   gosync.WaitGroup
}

// serveGitHTTP starts serving r; it stops when the test ends.
func serveGitHTTP(t *testing.T, r *gitRemote) *gitHTTP {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	g := &gitHTTP{
		t:    t,
		path: "/" + filepath.Base(r.repo.Dir) + "/.git",
		handler: &cgi.Handler{
			Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
			Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.repo.Dir), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.addr = ln.Addr().String()
	g.serve(ln)
	t.Cleanup(func() {
		g.Down()
		g.wg.Wait()
	})
	return g
}

// URL is the clone URL.
func (g *gitHTTP) URL() string { return "http://" + g.addr + g.path }

func (g *gitHTTP) serve(ln net.Listener) {
	srv := &http.Server{Handler: g.handler, ReadHeaderTimeout: 10 * time.Second}
	g.mu.Lock()
	g.srv = srv
	g.mu.Unlock()
	g.wg.Go(func() { srv.Serve(ln) })
}

// Down stops serving: connections are refused, and those open are closed.
func (g *gitHTTP) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.srv != nil {
		g.srv.Close()
		g.srv = nil
	}
	if g.hung != nil {
		g.hung.Close()
		g.hung = nil
	}
	for _, c := range g.held {
		c.Close()
	}
	g.held = nil
}

// Up serves again on the same port.
func (g *gitHTTP) Up() {
	g.t.Helper()
	g.Down()
	g.serve(g.listen())
}

// Hang makes the port accept connections and never answer them.
func (g *gitHTTP) Hang() {
	g.t.Helper()
	g.Down()
	ln := g.listen()
	g.mu.Lock()
	g.hung = ln
	g.mu.Unlock()
	g.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.mu.Lock()
			g.held = append(g.held, c)
			g.mu.Unlock()
		}
	})
}

// listen binds the server's port again, retrying while the old socket lets go.
func (g *gitHTTP) listen() net.Listener {
	g.t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		ln, err := net.Listen("tcp", g.addr)
		if err == nil {
			return ln
		}
		select {
		case <-deadline.C:
			g.t.Fatalf("listen on %s again: %v", g.addr, err)
		case <-retry.C:
		}
	}
}
