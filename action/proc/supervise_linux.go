//go:build linux

package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// On Linux every command runs under a supervisor: the agent's own binary,
// started again in supervisor mode. The agent starts the supervisor as the
// leader of a new process group with the parent-death signal set to
// SIGTERM; the supervisor starts the command in that group and, when the
// agent dies, even by SIGKILL, kills the whole group with SIGKILL, at once
// or after an interrupt and a grace (Options.InterruptGrace). As the
// subreaper of the command's processes it also finds and kills those that
// left the group. The
// parent-death signal alone would not do: it reaches only the process that
// the agent started, and a script's children (terraform, sleep, ...) do not
// inherit it.

const (
	// supervisorArg0 is the supervisor's argv[0], which ps shows.
	supervisorArg0 = "no8s-exec-supervisor"
	// selfExe is the running binary. Unlike the path os.Executable returns,
	// it still works after the binary was replaced on disk by an upgrade.
	selfExe = "/proc/self/exe"
	// statusFD is where the supervisor finds the status pipe: the agent's
	// ExtraFiles[0]. The supervisor writes to it why it could not start the
	// command, or closes it without a word once the command runs.
	statusFD = 3
	// exitNotStarted is the supervisor's exit code when the command could
	// not start; the status pipe says why.
	exitNotStarted = 127
)

// caught are the signals the supervisor handles itself. Its parent's death
// arrives as SIGTERM. The others are caught so that a signal meant for the
// whole group (which reaches the command directly) does not kill the
// supervisor and lose the command's exit status.
var caught = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// init runs the supervisor when the binary was started as one, before the
// program (the agent, or a test binary that imports this package) does
// anything else, and never returns then.
func init() {
	parent, ok := os.LookupEnv(SupervisorEnv)
	if !ok {
		return
	}
	os.Exit(supervise(parent, os.Args[1:]))
}

// Supervise makes cmd, built to run the command directly in a process group
// of its own (SysProcAttr with Setpgid), run it under a supervisor that
// leads that group. The caller must start cmd from a goroutine locked to
// its OS thread and keep it locked until Wait returns: the parent-death
// signal fires when the thread that started the process exits, and Go ends
// threads it no longer needs. The caller calls closeWriter once Start
// returned, and reads status with StartError after Wait. cmd.Process is
// then the supervisor: its pid is the group's id.
func Supervise(cmd *osexec.Cmd, opts Options) (status *os.File, closeWriter func(), err error) {
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid {
		return nil, nil, errors.New("the command must start a process group of its own")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("status pipe: %w", err)
	}
	value := strconv.Itoa(os.Getpid())
	if opts.InterruptGrace > 0 {
		value += "," + strconv.FormatInt(max(opts.InterruptGrace.Milliseconds(), 1), 10)
	}
	cmd.Args = append([]string{supervisorArg0, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = selfExe
	cmd.Env = append(slices.Clip(cmd.Env), SupervisorEnv+"="+value)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return r, func() { w.Close() }, nil
}

// StartError reads the status pipe after the supervisor has exited: what it
// says is why the command could not start. A nil status has nothing to say.
func StartError(status *os.File) error {
	if status == nil {
		return nil
	}
	defer status.Close()
	msg, err := io.ReadAll(io.LimitReader(status, 4<<10))
	if err != nil {
		return fmt.Errorf("read the supervisor's status: %w", err)
	}
	if len(msg) == 0 {
		return nil
	}
	return errors.New(strings.TrimSpace(string(msg)))
}

// supervise is the supervisor: it runs argv in its own process group and
// exits as the command did. setting is SupervisorEnv's value: the agent's
// pid and the grace after an interrupt.
func supervise(setting string, argv []string) int {
	// Catch the signals first: from here on, the agent's death is an event
	// to act on. Had the agent died before this, the parent-death signal
	// would have killed the supervisor, with no command started; Go's
	// runtime sends it too when the agent died before it was set.
	sigs := make(chan os.Signal, 8)
	for _, sig := range caught {
		// A signal the agent was started with ignored (SIGHUP under
		// nohup) stays ignored, for the command too, as without a
		// supervisor. The parent-death signal is always caught.
		if sig == syscall.SIGTERM || !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	status := os.NewFile(statusFD, "status")
	fail := func(msg string) int {
		if _, err := io.WriteString(status, msg); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s\n", supervisorArg0, msg)
		}
		return exitNotStarted
	}
	parent, graceMS, hasGrace := strings.Cut(setting, ",")
	ppid, err := strconv.Atoi(parent)
	var grace time.Duration
	if hasGrace {
		ms, gerr := strconv.ParseInt(graceMS, 10, 64)
		if gerr != nil || ms <= 0 {
			err = errors.Join(err, fmt.Errorf("grace %q", graceMS))
		}
		grace = time.Duration(ms) * time.Millisecond
	}
	if err != nil || ppid <= 1 || len(argv) == 0 {
		return fail(fmt.Sprintf("%s is set to %q: the agent sets it for the processes it starts, nobody else may", SupervisorEnv, setting))
	}
	if os.Getppid() != ppid {
		return 128 + int(syscall.SIGTERM) // the agent is gone already
	}
	// The command must not inherit the status pipe: it would keep it open.
	syscall.CloseOnExec(statusFD)
	// A process of the run that leaves the group (setsid, as a daemon
	// does) stays the supervisor's descendant: orphaned, it is reparented
	// to the supervisor rather than to init, so that it can be found and
	// ended with the group when the agent dies.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fail(fmt.Sprintf("become the subreaper of the command's processes: %v", errno))
	}

	// The command's parent-death signal guards against the supervisor
	// itself being killed (by the OOM killer, say); set from this thread,
	// which stays locked, like the agent's.
	runtime.LockOSThread()
	cmd := &osexec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, SupervisorEnv+"=") }),
		Stdin:  os.Stdin, // *os.File: the command gets the agent's pipes themselves
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		// Same process group: no Setpgid.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		return fail(err.Error())
	}
	status.Close()
	// Only the command reads stdin: a command that closes it early must see
	// the agent's writes fail, as without a supervisor.
	os.Stdin.Close()

	done := make(chan struct{})
	go func() {
		cmd.Wait() // the outcome is in cmd.ProcessState
		close(done)
	}()
	for {
		select {
		case <-done:
			return exitAs(cmd.ProcessState)
		case <-sigs:
			if os.Getppid() == ppid {
				// The agent is alive: it signalled the group (a timeout or a
				// cancellation) and the command got the signal as well. The
				// agent escalates to SIGKILL itself when the grace is over.
				continue
			}
			// The agent is gone and nobody else will stop the command.
			if grace > 0 {
				interrupt(done, sigs, grace)
			}
			// Kill what left the group, then the whole group, the
			// supervisor included.
			killDescendants()
			syscall.Kill(0, syscall.SIGKILL)
			return 128 + int(syscall.SIGKILL)
		}
	}
}

// interrupt sends SIGINT to the whole group, as a terminal's Ctrl-C does,
// and waits up to grace for the command to exit (done). Every process of
// the group gets it: the command, which may stop cleanly (OpenTofu saves
// its state and releases its lock), and what it started (a provisioner's
// shell and its children), which would otherwise run on unwatched.
func interrupt(done <-chan struct{}, sigs <-chan os.Signal, grace time.Duration) {
	for _, pid := range descendants() {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
			syscall.Kill(pid, syscall.SIGINT) // left the group: not reached below
		}
	}
	syscall.Kill(0, syscall.SIGINT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		select {
		case <-done:
			return
		case <-timer.C:
			return
		case <-sigs:
			// The supervisor's own SIGINT, or more of the agent's end.
		}
	}
}

// exitAs ends the supervisor the way the command ended: with its exit code,
// or by the signal that killed it, so that the agent sees "signal: killed"
// as it would without a supervisor. It returns an exit code only when the
// signal could not be raised: 128 plus the signal's number, as shells do.
func exitAs(ps *os.ProcessState) int {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return ps.ExitCode()
	case ws.Exited():
		return ws.ExitStatus()
	case !ws.Signaled():
		return 128
	}
	sig := ws.Signal()
	signal.Reset(sig)
	// Go's runtime handles most signals itself (SIGQUIT dumps goroutines,
	// SIGSEGV crashes with a trace); the default action is what the command
	// got. A zero struct sigaction is SIG_DFL with no flags and an empty
	// mask on every architecture.
	// (SIGKILL cannot be handled, and sigaction refuses it.)
	var dfl [4]uint64
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	if errno == 0 || sig == syscall.SIGKILL {
		// The command may have dumped core already; the supervisor's would
		// only be noise.
		syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
		// To this thread, whose signal mask Go leaves open: the signal is
		// acted on before the call returns to Go.
		syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	}
	return 128 + int(sig)
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// descendants lists the supervisor's descendants that have not ended, from
// the parent pids in /proc.
func descendants() []int {
	procs, err := liveProcesses()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for pid, st := range procs {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var out []int
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// killDescendants kills the supervisor's descendants, again while one is
// found (one may fork while they are listed), up to a bound.
func killDescendants() {
	for range 20 {
		pids := descendants()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
