package terraform_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/no8s/no8s-agent/action"
)

// stateServer speaks the protocol of OpenTofu's http backend: GET and POST
// of the state, LOCK and UNLOCK of its lock, which it keeps until unlocked:
// unlike the local backend's file lock, a holder that dies leaves it held.
type stateServer struct {
	mu     sync.Mutex
	states map[string][]byte
	locks  map[string][]byte // the holder's lock info
}

func newStateServer(t *testing.T) (*stateServer, string) {
	s := &stateServer{states: map[string][]byte{}, locks: map[string][]byte{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *stateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.URL.Path
	body, _ := io.ReadAll(r.Body)
	switch {
	case strings.HasPrefix(key, "/state/") && r.Method == http.MethodGet:
		st, ok := s.states[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Write(st)
	case strings.HasPrefix(key, "/state/") && r.Method == http.MethodPost:
		s.states[key] = body
	case strings.HasPrefix(key, "/state/") && r.Method == http.MethodDelete:
		delete(s.states, key)
	case strings.HasPrefix(key, "/lock/") && r.Method == "LOCK":
		if held, ok := s.locks[key]; ok {
			w.WriteHeader(http.StatusLocked)
			w.Write(held)
			return
		}
		s.locks[key] = body
	case strings.HasPrefix(key, "/lock/") && r.Method == "UNLOCK":
		delete(s.locks, key)
	default:
		http.Error(w, "unexpected "+r.Method+" "+key, http.StatusBadRequest)
	}
}

func (s *stateServer) lock(key, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	host, _ := os.Hostname()
	s.locks[key], _ = json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Who": "root@" + host,
		"Version": "1.10.10", "Created": "2026-11-24T08:00:00Z", "Path": ""})
}

func (s *stateServer) held(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.locks[key]
	return ok
}

// deadRun starts and ends a process and returns the handle an attempt
// would have recorded for it: a run that is provably gone.
func deadRun(t *testing.T) *action.Handle {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+1:])
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	host, _ := os.Hostname()
	return &action.Handle{Value: fmt.Sprintf(`{"host":%q,"pid":%d,"start":%q}`, host, cmd.Process.Pid, fields[19]),
		Operation: action.OperationApply, Generation: 1}
}

// A lock left by a run that is gone is force-unlocked, with its id logged;
// a lock whose holder is not known to be gone is left alone, and the error
// says how to unlock it by hand.
func TestStaleLock(t *testing.T) {
	t.Parallel()
	srv, url := newStateServer(t)
	backend := fmt.Sprintf(`backend "http" {
  address        = "%[1]s/state/{{ .Kind }}-{{ .Name }}"
  lock_address   = "%[1]s/lock/{{ .Kind }}-{{ .Name }}"
  unlock_address = "%[1]s/lock/{{ .Kind }}-{{ .Name }}"
}`, url)
	f := newFixture(t, dbModule, map[string]any{"backend": backend})
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("locked", 1, `{"size": 1}`, &recorder{})); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if _, err := os.Stat(f.dir("locked") + "/terraform.tfstate"); err == nil {
		t.Error("the state is in the work folder, not in the backend")
	}
	const key = "/lock/Database-locked"
	if srv.held(key) {
		t.Fatal("the first apply left its lock")
	}

	// Nobody knows who holds it: no force.
	srv.lock(key, "lock-of-someone")
	_, err := f.act.Apply(ctx, request("locked", 2, `{"size": 2}`, &recorder{}))
	if err == nil || !strings.Contains(err.Error(), "the state is locked (lock lock-of-someone") ||
		!strings.Contains(err.Error(), "force-unlock lock-of-someone") {
		t.Fatalf("apply against a live lock: %v", err)
	}
	if !srv.held(key) {
		t.Fatal("a lock whose holder may live was forced")
	}

	// The previous attempt's process is gone: force, log, go on.
	srv.mu.Lock()
	delete(srv.locks, key)
	srv.mu.Unlock()
	srv.lock(key, "lock-of-the-dead")
	req := request("locked", 2, `{"size": 2}`, &recorder{})
	req.PriorHandle = deadRun(t)
	res, err := f.act.Apply(ctx, req)
	if err != nil {
		t.Fatalf("apply after a dead run: %v", err)
	}
	if res.Updated != 1 || srv.held(key) {
		t.Errorf("result %+v, lock held %v", res, srv.held(key))
	}
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if !strings.Contains(logs, "force-unlocking") || !strings.Contains(logs, "lock=lock-of-the-dead") {
		t.Errorf("the forced lock is not logged:\n%s", logs)
	}
}
