package tofutest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// StateServer speaks the protocol of OpenTofu's http backend: GET, POST and
// DELETE of a state under /state/, LOCK and UNLOCK of its lock under
// /lock/. It keeps a lock until it is unlocked: unlike the local backend's
// file lock, which the system releases, a holder that dies leaves it held,
// as with most remote backends.
type StateServer struct {
	// URL is the server's base URL.
	URL string

	mu     sync.Mutex
	states map[string][]byte
	locks  map[string][]byte // the holder's lock info, by lock path
	// bare, when set, answers a LOCK of a held lock as some servers do:
	// 409 with a text, not the holder's lock info.
	bare bool
}

// AnswerLockedBare makes a LOCK of a held lock answer 409 with a text that
// is not the holder's lock info, as some servers of the protocol do: the
// binary then cannot say whose lock it is.
func (s *StateServer) AnswerLockedBare() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bare = true
}

// NewStateServer starts a StateServer, stopped when t ends.
func NewStateServer(t testing.TB) *StateServer {
	s := &StateServer{states: map[string][]byte{}, locks: map[string][]byte{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Backend is a backend template for the terraform action: one state and one
// lock per instance and resource, at /state/<Key> and /lock/<Key>, where the
// key is <instance>/<kind>/<name>.
func (s *StateServer) Backend() string {
	return `backend "http" {
  address        = "` + s.URL + `/state/{{ .Key }}"
  lock_address   = "` + s.URL + `/lock/{{ .Key }}"
  unlock_address = "` + s.URL + `/lock/{{ .Key }}"
}`
}

// key is the path of a resource's state or lock.
func key(kind, instance, resKind, name string) string {
	return "/" + kind + "/" + instance + "/" + resKind + "/" + name
}

// ServeHTTP implements http.Handler.
func (s *StateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
			if s.bare {
				http.Error(w, "locked", http.StatusConflict)
				return
			}
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

// Lock takes the lock of instance's kind/name for a holder on this host, as
// a run that died holding it would have left it.
func (s *StateServer) Lock(instance, kind, name, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	host, _ := os.Hostname()
	s.locks[key("lock", instance, kind, name)], _ = json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply",
		"Who": "root@" + host, "Version": "1.10.10", "Created": "2026-11-24T08:00:00Z", "Path": ""})
}

// Unlock releases the lock of instance's kind/name.
func (s *StateServer) Unlock(instance, kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.locks, key("lock", instance, kind, name))
}

// Held reports whether the lock of instance's kind/name is held.
func (s *StateServer) Held(instance, kind, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.locks[key("lock", instance, kind, name)]
	return ok
}

// HasState reports whether instance's kind/name has a state.
func (s *StateServer) HasState(instance, kind, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.states[key("state", instance, kind, name)]
	return ok
}

// Keys lists the paths that hold a state, sorted.
func (s *StateServer) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.states {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
