// Package exec is the action plugin "exec": it runs a command that the
// agent configuration names, once per operation.
//
// The command gets the request as JSON on stdin and in NO8S_* environment
// variables, writes its outputs as one JSON value to stdout and its logs to
// stderr, and its exit code decides: 0 succeeds. No shell is involved: the
// command is an argument vector.
//
// The command does not inherit the agent's environment, which holds the
// agent's own tokens: it gets PATH and HOME, the fixed values of the env
// setting and the variables passEnv names, nothing else.
//
// NO8S_FENCING_TOKEN is the request's fencing token: it grows with every
// claim of the resource, so a system the command changes can refuse a
// token lower than the highest it has seen for the resource.
//
// Each run has its own process group. When the operation times out or its
// context is cancelled, the whole group gets SIGTERM and, after a short
// grace, SIGKILL, so that a script's children do not outlive it. Processes
// of the group still running when the command exits are killed as well. The
// plugin reaps the orphans it kills when the agent is their parent (as when
// it runs as PID 1 in a container); otherwise the system's init does.
//
// On Linux the group also dies with the agent, even when the agent is
// killed with SIGKILL: the agent's binary, started again as a small
// supervisor (see package proc), leads the group, runs the command in
// it and kills the group when the agent dies. Otherwise a crashed agent's
// commands would run on next to those of the agent that takes their
// resources over. Elsewhere the command runs directly and outlives a
// killed agent. It works on Linux and other Unix systems.
package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/redact"
)

// Plugin is the plugin's name in the agent configuration.
const Plugin = "exec"

// DefaultTimeout bounds an operation when the settings set no timeout.
const DefaultTimeout = 5 * time.Minute

const (
	// maxStdout bounds the outputs a command may write: outputs are stored
	// with every resource and every history row.
	maxStdout = 1 << 20
	// stderrTail is how much of the end of stderr an error quotes: enough
	// for the message that explains a failure, not a whole log.
	stderrTail = 4 << 10
	// maxSpecEnv is the largest spec passed in NO8S_RESOURCE_SPEC. Linux
	// refuses to start a program with an environment string over 128 KiB;
	// staying well below leaves room for the rest. stdin always has it.
	maxSpecEnv = 32 << 10
	// maxProgressLine bounds one progress message.
	maxProgressLine = 1 << 10
	// grace is how long a cancelled command's group has between SIGTERM and
	// SIGKILL to clean up.
	grace = 2 * time.Second
	// reapWait bounds how long, after SIGKILL, the plugin waits for the
	// killed processes to disappear so that it can reap them.
	reapWait = time.Second
	// pollInterval is how often the process group is checked while waiting.
	pollInterval = 20 * time.Millisecond
)

// settings are the plugin's settings in the agent configuration.
type settings struct {
	// Command is the argument vector; the first element is a program found
	// in PATH, or a path (relative to Dir when relative).
	Command []string `json:"command"`
	// Dir is the working directory; default the agent's.
	Dir string `json:"dir"`
	// Timeout bounds one operation, as a Go duration such as "5m".
	Timeout string `json:"timeout"`
	// Env are fixed, non-secret environment variables.
	Env map[string]string `json:"env"`
	// PassEnv names agent environment variables passed to the command: the
	// way to give it secrets, which the configuration never holds.
	PassEnv []string `json:"passEnv"`
	// Plan makes the action a Planner: the command runs with
	// NO8S_OPERATION=plan and answers with its exit code.
	Plan bool `json:"plan"`
}

// supervisorEnv switches the agent's binary into the supervisor that runs
// a command on Linux (see package proc). The command never sees it.
const supervisorEnv = proc.SupervisorEnv

// reservedEnv are the variables the plugin sets for each request; settings
// may not set them, since they would be overwritten.
var reservedEnv = []string{
	"NO8S_OPERATION", "NO8S_ACTION", "NO8S_TRIGGER",
	"NO8S_RESOURCE_ID", "NO8S_RESOURCE_KIND", "NO8S_RESOURCE_NAMESPACE", "NO8S_RESOURCE_NAME",
	"NO8S_RESOURCE_API_VERSION", "NO8S_RESOURCE_GENERATION",
	"NO8S_RESOURCE_SOURCE", "NO8S_RESOURCE_REVISION",
	"NO8S_RESOURCE_SPEC", "NO8S_RESOURCE_SPEC_OMITTED", "NO8S_RESOURCE_PLUGIN_CONFIG", "NO8S_FENCING_TOKEN",
	supervisorEnv,
}

// runner runs the configured command for Apply and Destroy. It is safe for
// concurrent use: every operation starts its own process.
type runner struct {
	instance string
	path     string   // the program, resolved at build time
	args     []string // the arguments after the program
	dir      string   // absolute
	timeout  time.Duration
	env      []string // PATH, HOME, env and passEnv, in that order
	secrets  []string // the values of the passEnv variables
	// masker masks the secrets in what the action keeps of stdout and
	// stderr before cutting it: the agent masks again, but cannot find
	// a piece a cut left.
	masker *redact.Masker
	log    *slog.Logger
}

// planner is a runner that is also an action.Planner: what New returns when
// the settings say plan: true. A separate type keeps the reconciler's "is it
// a Planner?" check truthful for commands that cannot plan.
type planner struct {
	*runner
}

var (
	_ action.Action       = (*runner)(nil)
	_ action.Timeouter    = (*runner)(nil)
	_ action.SecretHolder = (*runner)(nil)
	_ action.Planner      = planner{}
)

// New builds an exec instance from its settings. It checks that the command
// and dir exist and that every passEnv variable is set, so that a mistake
// stops the agent at start; every error names its setting.
func New(s action.Settings) (action.Action, error) {
	var cfg settings
	if err := s.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &runner{instance: s.Instance, timeout: DefaultTimeout, log: log}
	var problems []error
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		switch {
		case err != nil:
			fail("timeout: %q is not a duration such as \"5m\" or \"90s\"", cfg.Timeout)
		case d <= 0:
			fail("timeout: must be positive, not %q", cfg.Timeout)
		default:
			a.timeout = d
		}
	}

	// Resolve dir now, so that the agent changing its working directory
	// later cannot move where commands run.
	dir := cfg.Dir
	if dir == "" {
		dir = "."
	}
	if abs, err := filepath.Abs(dir); err != nil {
		fail("dir: %w", err)
	} else if fi, err := os.Stat(abs); err != nil {
		fail("dir: %w", err)
	} else if !fi.IsDir() {
		fail("dir: %s is not a directory", abs)
	} else {
		a.dir = abs
	}

	switch {
	case len(cfg.Command) == 0:
		fail("command: required: the program and its arguments, such as [\"./deploy.sh\", \"--verbose\"]")
	case cfg.Command[0] == "":
		fail("command: the program (the first element) is empty")
	case slices.ContainsFunc(cfg.Command, func(arg string) bool { return strings.ContainsRune(arg, 0) }):
		fail("command: an argument contains a NUL byte")
	case a.dir != "":
		path, err := resolve(cfg.Command[0], a.dir)
		if err != nil {
			fail("command: %w", err)
		}
		a.path, a.args = path, cfg.Command[1:]
	}

	vars, secrets, envProblems := s.CommandEnv(cfg.Env, cfg.PassEnv, reservedEnv, "is set by the agent for each request")
	a.env, a.secrets, a.masker = vars, secrets, redact.New(secrets...)
	problems = append(problems, envProblems...)

	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if cfg.Plan {
		return planner{a}, nil
	}
	return a, nil
}

// resolve finds the program: a name without a slash in PATH, like a shell
// would; anything else as a path, relative to dir.
func resolve(program, dir string) (string, error) {
	if !strings.Contains(program, "/") {
		path, err := osexec.LookPath(program)
		if err != nil {
			return "", err
		}
		return path, nil
	}
	path := program
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%s is a directory", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not executable", path)
	}
	return path, nil
}

// Timeout implements action.Timeouter.
func (a *runner) Timeout() time.Duration { return a.timeout }

// TakesPluginConfig implements action.PluginConfigTaker.
func (a *runner) TakesPluginConfig() string {
	return "in the request on stdin (resource.pluginConfig) and in NO8S_RESOURCE_PLUGIN_CONFIG"
}

// Secrets returns the values of the passEnv variables: passEnv is how
// secrets reach a command, and a command may print them.
func (a *runner) Secrets() []string { return a.secrets }

// Apply implements action.Action.
func (a *runner) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	return a.operate(ctx, action.OperationApply, req)
}

// Destroy implements action.Action.
func (a *runner) Destroy(ctx context.Context, req *action.Request) (*action.Result, error) {
	return a.operate(ctx, action.OperationDestroy, req)
}

// operate runs an Apply or a Destroy: exit code 0 succeeds and stdout, when
// not empty, is the outputs.
func (a *runner) operate(ctx context.Context, op action.Operation, req *action.Request) (*action.Result, error) {
	run, err := a.run(ctx, op, req)
	if err != nil {
		return nil, err
	}
	if run.exitErr != nil {
		return nil, exitError(run.exitErr, run.stderr)
	}
	if err := run.stdoutErr(); err != nil {
		return nil, err
	}
	out := bytes.TrimSpace(run.stdout.Bytes())
	res := &action.Result{Message: run.stderr.lastLine}
	if len(out) == 0 {
		return res, nil
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("stdout is not one JSON value (%s): stdout is for the outputs only; write logs to stderr", excerpt([]byte(a.masker.Mask(string(out)))))
	}
	res.Outputs = json.RawMessage(bytes.Clone(out))
	return res, nil
}

// Plan implements action.Planner: the command runs with
// NO8S_OPERATION=plan and exits 0 for no changes, 2 for changes; its stdout
// is the plan.
func (p planner) Plan(ctx context.Context, req *action.Request) (*action.Plan, error) {
	run, err := p.run(ctx, action.OperationPlan, req)
	if err != nil {
		return nil, err
	}
	if err := run.stdoutErr(); err != nil {
		return nil, err
	}
	plan := &action.Plan{Output: run.stdout.String()}
	switch code := run.exitCode(); code {
	case 0:
		plan.Summary = "no changes"
	case 2:
		plan.Changes = true
		plan.Summary = "changes"
	default:
		return nil, fmt.Errorf("plan: %w (a plan exits 0 for no changes, 2 for changes)", exitError(run.exitErr, run.stderr))
	}
	for line := range strings.Lines(plan.Output) {
		if line = strings.TrimSpace(line); line != "" {
			plan.Summary = line
			break
		}
	}
	return plan, nil
}

// result is what one run of the command left.
type result struct {
	stdout  *capped
	stderr  *stderrWriter
	exitErr *osexec.ExitError // nil when the command exited 0
}

func (r *result) exitCode() int {
	if r.exitErr == nil {
		return 0
	}
	return r.exitErr.ExitCode()
}

// stdoutErr reports stdout that went over its limit.
func (r *result) stdoutErr() error {
	if r.stdout.overflow {
		return fmt.Errorf("stdout exceeds %d bytes: stdout is for the outputs only; write logs to stderr", maxStdout)
	}
	return nil
}

// run runs the command once for op. Its error is for a command that could
// not run to its end: not started, timed out or cancelled; how it exited is
// in the result.
func (a *runner) run(ctx context.Context, op action.Operation, req *action.Request) (*result, error) {
	r := *req
	r.Operation = op
	if r.Instance == "" {
		r.Instance = a.instance
	}
	body, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}

	errTimeout := fmt.Errorf("timed out after %s", a.timeout)
	runCtx, cancel := context.WithTimeoutCause(ctx, a.timeout, errTimeout)
	defer cancel()

	res := &result{stdout: &capped{limit: maxStdout}, stderr: &stderrWriter{reporter: req.Reporter, masker: a.masker}}
	cmd := osexec.CommandContext(runCtx, a.path, a.args...)
	cmd.Dir = a.dir
	cmd.Env = append(slices.Clip(a.env), requestEnv(&r)...)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stdout = res.stdout
	cmd.Stderr = res.stderr
	// Its own process group, so that one signal reaches every process the
	// command starts, and a terminal's Ctrl-C meant for the agent does not.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var termAt atomic.Int64 // when the group got SIGTERM, in Unix nanoseconds
	cmd.Cancel = func() error {
		termAt.Store(time.Now().UnixNano())
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	// After the grace, Wait kills the leader and stops waiting for output
	// that a lingering child may hold open; stopGroup deals with the rest.
	// The same bound applies when the command exits but a background child
	// keeps stdout or stderr open.
	cmd.WaitDelay = grace

	// On Linux, the command runs under a supervisor that kills the group
	// when the agent dies. Its parent-death signal fires when the thread
	// that started it exits, so the thread stays this goroutine's until the
	// supervisor is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	status, closeStatus, err := proc.Supervise(cmd, proc.Options{})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", a.path, err)
	}
	err = cmd.Start()
	closeStatus()
	if err != nil {
		if status != nil {
			status.Close()
		}
		return nil, fmt.Errorf("start %s: %w", a.path, err)
	}
	pgid := cmd.Process.Pid
	waitErr := cmd.Wait()
	if err := proc.StartError(status); err != nil {
		stopGroup(pgid, time.Now())
		return nil, fmt.Errorf("start %s: %w", a.path, err)
	}

	deadline := time.Now() // leftovers of a command that exited get no grace
	if ns := termAt.Load(); ns != 0 {
		deadline = time.Unix(0, ns).Add(grace)
	}
	stopGroup(pgid, deadline)

	if runCtx.Err() != nil {
		if cause := context.Cause(runCtx); errors.Is(cause, errTimeout) {
			return nil, withTail(errTimeout, res.stderr)
		}
		return nil, withTail(fmt.Errorf("%s: %w", op, ctx.Err()), res.stderr)
	}
	var exitErr *osexec.ExitError
	switch {
	case errors.As(waitErr, &exitErr):
		res.exitErr = exitErr
	case errors.Is(waitErr, osexec.ErrWaitDelay):
		// The command exited but left a process holding its stdout or stderr;
		// stopGroup killed it. The exit code still decides.
		a.log.Warn("a process the command started kept its output open after it exited; it was killed",
			"operation", op, "command", a.path)
	case waitErr != nil:
		return nil, fmt.Errorf("run %s: %w", a.path, waitErr)
	}
	return res, nil
}

// stopGroup makes sure that no process of the group pgid outlives the
// operation: it waits until deadline for the group to end by itself, kills
// what is left, and reaps the processes whose parent the agent has become.
func stopGroup(pgid int, deadline time.Time) {
	if waitGroup(pgid, deadline) {
		return
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return
	}
	waitGroup(pgid, time.Now().Add(reapWait))
}

// waitGroup polls until the group pgid has no process left or deadline
// passes, reaping on the way; it reports whether the group is gone.
func waitGroup(pgid int, deadline time.Time) bool {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		reap(pgid)
		// Signal 0 checks existence. A zombie still counts, which is why
		// reap runs first.
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		select {
		case <-ticker.C:
		case <-timer.C:
			return false
		}
	}
}

// reap collects the exit status of the group's processes that are the
// agent's children. Only orphans can be: the command itself was reaped by
// Wait, and its descendants become the agent's children only when the agent
// is PID 1 or a subreaper. Without reaping, they would stay zombies there.
func reap(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if err != nil || pid <= 0 {
			return
		}
	}
}

// requestEnv is the request in NO8S_* variables, for commands that need no
// JSON parser to read a field.
func requestEnv(r *action.Request) []string {
	res := r.Resource
	env := []string{
		"NO8S_OPERATION=" + string(r.Operation),
		"NO8S_ACTION=" + r.Instance,
		"NO8S_TRIGGER=" + r.Trigger,
		"NO8S_FENCING_TOKEN=" + strconv.FormatInt(r.FencingToken, 10),
		"NO8S_RESOURCE_ID=" + strconv.FormatInt(res.ID, 10),
		"NO8S_RESOURCE_KIND=" + res.Kind,
		// Empty for a resource of a cluster-scoped kind.
		"NO8S_RESOURCE_NAMESPACE=" + res.Namespace,
		"NO8S_RESOURCE_NAME=" + res.Name,
		"NO8S_RESOURCE_API_VERSION=" + res.APIVersion,
		"NO8S_RESOURCE_GENERATION=" + strconv.FormatInt(res.Generation, 10),
		"NO8S_RESOURCE_SOURCE=" + res.Source,
		"NO8S_RESOURCE_REVISION=" + res.Revision,
	}
	spec := string(res.Spec)
	if spec == "" {
		spec = "null" // what stdin says for a missing spec
	}
	// The plugin configuration is small settings; the spec's bound keeps
	// both well within what one variable may hold.
	if len(res.PluginConfig) > 0 && len(res.PluginConfig) <= maxSpecEnv {
		env = append(env, "NO8S_RESOURCE_PLUGIN_CONFIG="+string(res.PluginConfig))
	}
	if len(spec) > maxSpecEnv {
		return append(env, "NO8S_RESOURCE_SPEC_OMITTED=1")
	}
	return append(env, "NO8S_RESOURCE_SPEC="+spec)
}

// exitError describes a command that exited unsuccessfully, quoting the end
// of its stderr, where the reason usually is.
func exitError(exitErr *osexec.ExitError, stderr *stderrWriter) error {
	// ProcessState says "exit status 3" or "signal: killed".
	return withTail(errors.New(exitErr.ProcessState.String()), stderr)
}

func withTail(err error, stderr *stderrWriter) error {
	if tail := stderr.tailText(); tail != "" {
		return fmt.Errorf("%w: %s", err, tail)
	}
	return err
}

// excerpt quotes the start of b for an error message.
func excerpt(b []byte) string {
	const n = 80
	if len(b) > n {
		return strconv.Quote(string(truncate(b, n))) + "..."
	}
	return strconv.Quote(string(b))
}

// truncate cuts b to at most n bytes without splitting a UTF-8 sequence.
func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

// capped keeps the first limit bytes written to it and notes whether more
// came. It keeps accepting writes, so that a command writing too much is
// not stopped by a broken pipe but fails on its own terms. (The buffer is a
// field, not embedded: io.Copy would use an embedded ReadFrom and bypass
// the limit.)
type capped struct {
	buf      bytes.Buffer
	limit    int
	overflow bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.overflow = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }

// stderrWriter passes each complete line of stderr to the reporter as
// progress and keeps the end of stderr for error messages. os/exec calls it
// from one goroutine only.
type stderrWriter struct {
	reporter action.Reporter
	masker   *redact.Masker
	line     []byte // the incomplete current line, at most maxProgressLine
	lineCut  bool   // the current line was longer than maxProgressLine
	tail     []byte // the last bytes written, up to 2*stderrTail
	written  int    // how many bytes were written in all
	lastLine string
}

func (w *stderrWriter) Write(p []byte) (int, error) {
	w.written += len(p)
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2*stderrTail {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-stderrTail:]...)
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.appendLine(rest)
			break
		}
		w.appendLine(rest[:i])
		w.endLine()
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (w *stderrWriter) appendLine(p []byte) {
	room := maxProgressLine - len(w.line)
	if room > 0 {
		w.line = append(w.line, p[:min(room, len(p))]...)
	}
	if len(p) > room {
		w.lineCut = true
	}
}

func (w *stderrWriter) endLine() {
	// A secret the cut went through would be left in part: mask before
	// the agent sees the line.
	line := w.masker.MaskCut(string(w.line), false, w.lineCut)
	line = strings.TrimSpace(strings.ToValidUTF8(line, "\uFFFD"))
	w.line, w.lineCut = w.line[:0], false
	if line == "" {
		return
	}
	w.lastLine = line
	if w.reporter != nil {
		w.reporter.Progress(line)
	}
}

// tailText is the last stderrTail bytes of stderr, trimmed.
func (w *stderrWriter) tailText() string {
	t := w.tail
	if len(t) > stderrTail {
		t = t[len(t)-stderrTail:]
		for len(t) > 0 && !utf8.RuneStart(t[0]) {
			t = t[1:]
		}
	}
	// The tail may begin inside a secret: mask what is left of it.
	masked := w.masker.MaskCut(string(t), w.written > len(t), false)
	return strings.TrimSpace(strings.ToValidUTF8(masked, "\uFFFD"))
}
