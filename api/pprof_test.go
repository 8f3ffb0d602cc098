package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
)

// TestProfiling checks that the runtime's profiles are served only when
// profiling is on, and then only to holders of the read token.
func TestProfiling(t *testing.T) {
	t.Parallel()
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dashboard")) })
	tests := []struct {
		name      string
		profiling bool
		readToken string
		token     string
		path      string
		status    int
		contains  string
	}{
		{name: "off", path: "/debug/pprof/", status: http.StatusNotFound},
		{name: "off, a profile", path: "/debug/pprof/heap", status: http.StatusNotFound},
		{name: "on", profiling: true, path: "/debug/pprof/", status: http.StatusOK, contains: "goroutine"},
		{name: "on, a profile", profiling: true, path: "/debug/pprof/goroutine?debug=1", status: http.StatusOK, contains: "goroutine profile:"},
		{name: "on, without the read token", profiling: true, readToken: readToken, path: "/debug/pprof/", status: http.StatusUnauthorized},
		{name: "on, with the read token", profiling: true, readToken: readToken, token: readToken, path: "/debug/pprof/", status: http.StatusOK, contains: "heap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(o *api.Options) { o.Profiling, o.ReadToken, o.Dashboard = tt.profiling, tt.readToken, dash })
			status, body, _ := e.call("GET", tt.path, tt.token, "")
			if status != tt.status || !strings.Contains(string(body), tt.contains) {
				t.Fatalf("GET %s = %d %.300s, want %d with %q", tt.path, status, body, tt.status, tt.contains)
			}
			if strings.Contains(string(body), "dashboard") {
				t.Errorf("GET %s reached the dashboard", tt.path)
			}
		})
	}
}
