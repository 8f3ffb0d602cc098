package terraform_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
)

// processStart returns the start time of the running process pid, as a
// handle records it.
func processStart(t *testing.T, pid int) string {
	t.Helper()
	start, known := terraform.StartTime(pid)
	if !known || start == "" {
		t.Fatalf("no start time of process %d", pid)
	}
	return start
}

// deadRun starts and ends a process and returns the handle an attempt
// would have recorded for it: a run that is provably gone.
func deadRun(t *testing.T) *action.Handle {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := processStart(t, cmd.Process.Pid)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	host, _ := os.Hostname()
	return &action.Handle{Value: fmt.Sprintf(`{"host":%q,"pid":%d,"start":%q}`, host, cmd.Process.Pid, start),
		Operation: action.OperationApply, Generation: 1}
}

// A lock left by a run that is gone is force-unlocked, with its id logged;
// a lock whose holder is not known to be gone is left alone, and the error
// says how to unlock it by hand.
func TestStaleLock(t *testing.T) {
	t.Parallel()
	srv := tofutest.NewStateServer(t)
	f := newFixture(t, dbModule, map[string]any{"backend": srv.Backend()})
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("locked", 1, `{"size": 1}`, &recorder{})); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if _, err := os.Stat(f.dir("locked") + "/terraform.tfstate"); err == nil {
		t.Error("the state is in the work folder, not in the backend")
	}
	if !srv.HasState("tf", "Database", "locked") {
		t.Error("no state in the backend")
	}
	if srv.Held("tf", "Database", "locked") {
		t.Fatal("the first apply left its lock")
	}

	// Nobody knows who holds it: no force.
	srv.Lock("tf", "Database", "locked", "lock-of-someone")
	_, err := f.act.Apply(ctx, request("locked", 2, `{"size": 2}`, &recorder{}))
	if err == nil || !strings.Contains(err.Error(), "the state is locked (lock lock-of-someone") ||
		!strings.Contains(err.Error(), "force-unlock lock-of-someone") {
		t.Fatalf("apply against a live lock: %v", err)
	}
	if !srv.Held("tf", "Database", "locked") {
		t.Fatal("a lock whose holder may live was forced")
	}

	// The previous attempt's process is gone: force, log, go on.
	srv.Unlock("tf", "Database", "locked")
	srv.Lock("tf", "Database", "locked", "lock-of-the-dead")
	req := request("locked", 2, `{"size": 2}`, &recorder{})
	req.PriorHandle = deadRun(t)
	res, err := f.act.Apply(ctx, req)
	if err != nil {
		t.Fatalf("apply after a dead run: %v", err)
	}
	if res.Updated != 1 || srv.Held("tf", "Database", "locked") {
		t.Errorf("result %+v, lock held %v", res, srv.Held("tf", "Database", "locked"))
	}
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if !strings.Contains(logs, "force-unlocking") || !strings.Contains(logs, "lock=lock-of-the-dead") {
		t.Errorf("the forced lock is not logged:\n%s", logs)
	}
}

// A server that answers a held lock without its lock info leaves the
// binary printing its own request's lock info: that id is not the holder's,
// so it is neither shown as the holder's nor forced, even when the previous
// attempt's run is gone; the error says the backend did not name the lock.
func TestLockWithoutHolderInfo(t *testing.T) {
	t.Parallel()
	srv := tofutest.NewStateServer(t)
	f := newFixture(t, dbModule, map[string]any{"backend": srv.Backend()})
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("bare", 1, `{"size": 1}`, &recorder{})); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	srv.AnswerLockedBare()
	srv.Lock("tf", "Database", "bare", "lock-of-someone")
	for _, prior := range []*action.Handle{nil, deadRun(t)} {
		req := request("bare", 2, `{"size": 2}`, &recorder{})
		req.PriorHandle = prior
		_, err := f.act.Apply(ctx, req)
		if err == nil || !strings.Contains(err.Error(), "the backend did not say by which lock") ||
			strings.Contains(err.Error(), "the state is locked (lock ") || !strings.Contains(err.Error(), "force-unlock ID") {
			t.Errorf("prior run %v: apply against a lock the server did not describe: %v", prior != nil, err)
		}
		if !srv.Held("tf", "Database", "bare") {
			t.Fatalf("prior run %v: a lock nobody named was forced", prior != nil)
		}
	}
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if strings.Contains(logs, "force-unlocking") {
		t.Errorf("a force-unlock was tried:\n%s", logs)
	}
}
