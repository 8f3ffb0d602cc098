package terraform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/redact"
)

const (
	// maxOutput bounds what one run's stdout and stderr are kept to.
	maxOutput = 4 << 20
	// errorTail is how much of the end of the output an error quotes.
	errorTail = 4 << 10
)

// runSpec is one run of the binary.
type runSpec struct {
	dir   string
	args  []string
	phase string // init, plan, apply, destroy: for progress
	// req, when set, receives progress, and, when record is true, the run's
	// process as the attempt's handle.
	req    *action.Request
	record bool
	// okCodes are exit codes that are not failures (plan's 2).
	okCodes []int
}

// runResult is what a run left.
type runResult struct {
	stdout, stderr string
	code           int
}

// runError is a run that exited with a failing code.
type runError struct {
	args   []string
	code   int
	output string
}

func (e *runError) Error() string {
	return fmt.Sprintf("%s exited %d: %s", strings.Join(e.args[:1], " "), e.code, tail(e.output))
}

// run runs the binary once, in a process group of its own that dies with
// the agent (see package proc). The context's end interrupts the group
// (SIGINT), and after the grace kills it.
func (a *Action) run(ctx context.Context, spec runSpec) (*runResult, error) {
	args := append([]string(nil), spec.args...)
	cmd := osexec.Command(a.binary, args...)
	cmd.Dir = spec.dir
	cmd.Env = slices.Clip(a.env)
	if spec.req != nil {
		cmd.Env = append(cmd.Env, requestEnv(spec.req)...)
	}
	// Output goes to files, not pipes: a binary interrupted because the
	// agent died would die of SIGPIPE on its first word to a closed pipe,
	// before it saved its state and released its lock.
	// They are kept beside the work folders, not in the run's folder,
	// where init -from-module wants nothing.
	outDir := filepath.Join(a.root, ".output")
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the output folder: %w", err)
	}
	outFile, err := os.CreateTemp(outDir, outputPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("create the output file: %w", err)
	}
	defer os.Remove(outFile.Name())
	defer outFile.Close()
	errFile, err := os.CreateTemp(outDir, outputPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("create the output file: %w", err)
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, errFile
	var progress io.Writer = io.Discard
	if spec.req != nil && spec.req.Reporter != nil {
		progress = &progressWriter{phase: spec.phase, reporter: spec.req.Reporter, masker: a.masker}
	}
	tailDone, stopTail := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(tailDone)
		follow(outFile.Name(), progress, stopTail)
	}()
	var tailOnce sync.Once
	endTail := func() { tailOnce.Do(func() { close(stopTail); <-tailDone }) }
	defer endTail()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// On Linux the supervisor leads the group; when the agent dies it
	// interrupts the group, gives the binary the grace to save its state
	// and release its lock, then kills what is left, a provisioner's
	// processes included. Its parent-death signal fires when the thread
	// that started it ends, so the thread stays this goroutine's until
	// Wait returns.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	status, closeStatus, err := proc.Supervise(cmd, proc.Options{InterruptGrace: a.grace})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", a.binary, err)
	}
	err = cmd.Start()
	closeStatus()
	if err != nil {
		if status != nil {
			status.Close()
		}
		return nil, fmt.Errorf("start %s: %w", a.binary, err)
	}
	// The group's leader: the supervisor on Linux, the binary elsewhere.
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	startErr := func() error {
		if err := proc.StartError(status); err != nil {
			return fmt.Errorf("start %s: %w", a.binary, err)
		}
		return nil
	}

	if spec.record && spec.req != nil {
		if err := action.RecordHandle(ctx, spec.req, encodeHandle(pid)); err != nil {
			a.stop(pid, waited)
			_ = startErr()
			return nil, fmt.Errorf("record the run of %s: %w", a.binary, err)
		}
	}

	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		a.log.Info("interrupting "+spec.phase, "dir", spec.dir, "pid", pid, "cause", context.Cause(ctx))
		stopped := a.stop(pid, waited)
		_ = startErr()
		if !stopped {
			return nil, fmt.Errorf("%s: %w; it did not stop within %s of an interrupt and was killed: %w",
				spec.phase, context.Cause(ctx), a.grace, action.ErrStillRunning)
		}
		killGroup(pid)
		return nil, fmt.Errorf("%s interrupted: %w", spec.phase, context.Cause(ctx))
	}
	killGroup(pid) // providers a crashed binary left behind
	if err := startErr(); err != nil {
		return nil, err
	}
	endTail()
	res := &runResult{stdout: readCapped(outFile), stderr: readCapped(errFile)}
	var exitErr *osexec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		res.code = exitErr.ExitCode()
	default:
		return nil, fmt.Errorf("run %s: %w", a.binary, waitErr)
	}
	if res.code != 0 && !slices.Contains(spec.okCodes, res.code) {
		// Masked before the error cuts it to its tail, which may begin
		// inside a secret.
		err := &runError{args: args, code: res.code, output: a.masker.Mask(res.stderr + res.stdout)}
		if res.code == -1 && spec.record {
			// Ended by a signal nobody here sent (a crash, the OOM killer,
			// an operator's kill -9), it may have left the state locked.
			// Its handle is kept for the next attempt, which then finds
			// this run gone and may force-unlock its lock; cleared, the
			// next attempt could not tell the lock's holder from a run
			// still going on, and the resource would wait for a person.
			return res, fmt.Errorf("%w (%w)", err, action.ErrStillRunning)
		}
		return res, err
	}
	return res, nil
}

// requestEnv gives the module the resource's kind, namespace (empty for a
// cluster-scoped kind), name and generation as the variables no8s_kind,
// no8s_namespace, no8s_name and no8s_generation. In the
// environment, unlike in a variables file, they raise no warning in a
// module that does not declare them, whose warnings would otherwise fill
// every plan (in an order that changes from run to run).
func requestEnv(req *action.Request) []string {
	return []string{"TF_VAR_no8s_kind=" + req.Resource.Kind, "TF_VAR_no8s_namespace=" + req.Resource.Namespace,
		"TF_VAR_no8s_name=" + req.Resource.Name,
		"TF_VAR_no8s_generation=" + strconv.FormatInt(req.Resource.Generation, 10)}
}

// stop interrupts the group pgid, as a terminal's Ctrl-C does (the binary
// stops cleanly; providers ignore it; a provisioner's processes end), and
// waits up to the grace for its leader to exit; then it kills the group.
// It reports whether the leader exited by itself.
func (a *Action) stop(pgid int, waited <-chan error) bool {
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	timer := time.NewTimer(a.grace)
	defer timer.Stop()
	select {
	case <-waited:
		return true
	case <-timer.C:
		killGroup(pgid)
		<-waited
		return false
	}
}

// killGroup kills what is left of the process group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// progressWriter turns the binary's lines about resources into progress:
// "apply: terraform_data.db: Creating...".
type progressWriter struct {
	mu       sync.Mutex
	phase    string
	reporter action.Reporter
	masker   *redact.Masker // masks a line before it is cut
	buf      []byte
}

// resourceLine is a line of plan or apply output about one resource.
var resourceLine = regexp.MustCompile(`^\S+(\[[^\]]*\])?: (Creating|Modifying|Destroying|Refreshing state|Reading|Still creating|Still modifying|Still destroying|Creation complete|Modifications complete|Destruction complete)`)

func (w *progressWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if resourceLine.MatchString(line) {
			line = w.masker.Mask(line)
			if len(line) > 200 {
				line = line[:200]
			}
			w.reporter.Progress(w.phase + ": " + line)
		}
	}
	if len(w.buf) > 64<<10 {
		w.buf = w.buf[:0] // a line that long is not a resource line
	}
	return len(p), nil
}

// outputPrefix names the files a run's output goes to.
const outputPrefix = ".no8s-output-"

// follow copies what is appended to the file at path to w until stop is
// closed, and what is left after that.
func follow(path string, w io.Writer, stop <-chan struct{}) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		_, _ = io.Copy(w, f)
		select {
		case <-stop:
			_, _ = io.Copy(w, f)
			return
		case <-tick.C:
		}
	}
}

// readCapped reads up to maxOutput bytes of f from its start.
func readCapped(f *os.File) string {
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, maxOutput))
	return string(b)
}

// tail returns the end of output, from the first "Error:" in it when there
// is one, where the binary explains a failure.
func tail(output string) string {
	if i := strings.Index(output, "Error: "); i >= 0 {
		output = output[i:]
	}
	output = strings.TrimSpace(output)
	if len(output) > errorTail {
		output = "..." + output[len(output)-errorTail:]
	}
	return output
}

// lockInfo is what the binary says of a state lock it could not take: the
// holder's lock id and who took it, each empty when the binary did not say.
type lockInfo struct {
	id, who string
}

var (
	lockIDLine  = regexp.MustCompile(`(?m)^[ \t]*ID:[ \t]+(\S+)[ \t]*$`)
	lockWhoLine = regexp.MustCompile(`(?m)^[ \t]*Who:[ \t]+(\S+)[ \t]*$`)
	// heldByLine is the http backend's message naming the holder's lock
	// id, read from the lock info the server answered with. Some binaries
	// print their own request's lock info under "Lock Info" beside it.
	heldByLine = regexp.MustCompile(`already locked: ID=(\S+)`)
	// ownInfoLine is the http backend's message when the server's answer
	// was no lock info: the "Lock Info" printed is then the binary's own
	// request's, not the holder's.
	ownInfoLine = regexp.MustCompile(`already locked, failed to (?:unmarshal|read) body`)
)

// lockError reports the lock an error is about, when it is the binary's
// "Error acquiring the state lock". The lock info printed is the holder's,
// but for the http backend: there the holder's id is the one its message
// names, and when the server did not describe the lock, nothing printed
// is the holder's.
func lockError(err error) (lockInfo, bool) {
	var re *runError
	if !errors.As(err, &re) || !strings.Contains(re.output, "Error acquiring the state lock") {
		return lockInfo{}, false
	}
	if ownInfoLine.MatchString(re.output) {
		return lockInfo{}, true
	}
	var li lockInfo
	if m := lockIDLine.FindStringSubmatch(re.output); m != nil {
		li.id = m[1]
	}
	if m := lockWhoLine.FindStringSubmatch(re.output); m != nil {
		li.who = m[1]
	}
	if m := heldByLine.FindStringSubmatch(re.output); m != nil && m[1] != li.id {
		// The lock info printed is the request's own: only the id is known.
		li = lockInfo{id: m[1]}
	}
	return li, true
}

// hostname is this host's name, for handles; empty when unknown.
var hostname = func() string { h, _ := os.Hostname(); return h }()
