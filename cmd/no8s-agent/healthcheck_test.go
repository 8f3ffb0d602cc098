package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// healthcheck exits 0 on a 2xx answer and 1 on any other answer or none: a
// container's health check runs it.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()

	if code, out, errOut := runCLI(t, "healthcheck", "--url", srv.URL+"/healthz"); code != exitOK || !strings.Contains(out, "200 OK") {
		t.Errorf("healthy: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "healthcheck", "--url", srv.URL+"/readyz"); code != exitError || !strings.Contains(errOut, "503 Service Unavailable") {
		t.Errorf("not ready: exit %d, %q", code, errOut)
	}
	// A port nothing listens on: a listener closed at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if code, _, errOut := runCLI(t, "healthcheck", "--url", "http://"+addr+"/healthz", "--timeout", "2s"); code != exitError || !strings.Contains(errOut, "healthcheck:") {
		t.Errorf("down: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "healthcheck", "extra"); code != exitError {
		t.Errorf("an argument: exit %d", code)
	}
}
