package main

import (
	"net/http"
	"testing"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestRunPprofFlag checks that run serves the runtime's profiles on its
// listener with --pprof, and not without.
func TestRunPprofFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		status int
	}{
		{"off by default", nil, http.StatusNotFound},
		{"on", []string{"--pprof"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			repo := copyTree(t, "../../examples/repo")
			a := startAgent(t, pgtest.URL(t), append([]string{"--source", repo}, tt.args...)...)
			status, body := curl(t, "GET", a.addr()+"/debug/pprof/", "", "")
			if status != tt.status {
				t.Fatalf("GET /debug/pprof/ = %d %.300s, want %d", status, body, tt.status)
			}
		})
	}
}
