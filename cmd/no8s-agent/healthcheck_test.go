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
	// A URL's password never reaches what is printed (a container's
	// stored health log), whatever the answer.
	withPassword := strings.Replace(srv.URL, "http://", "http://probe:s3cret-pw@", 1)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, out, errOut := runCLI(t, "healthcheck", "--url", withPassword+path)
		if strings.Contains(out+errOut, "s3cret-pw") || !strings.Contains(out+errOut, "probe:xxxxx@") {
			t.Errorf("%s: exit %d, printed the password or no URL: %q %q", path, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "healthcheck", "--url", "http://probe:s3cret-pw@"+addr+"/healthz", "--timeout", "2s"); code != exitError || strings.Contains(errOut, "s3cret-pw") {
		t.Errorf("down, with a password: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "healthcheck", "--url", "::not a url s3cret-pw"); code != exitError || strings.Contains(errOut, "s3cret-pw") {
		t.Errorf("a bad URL: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "healthcheck", "extra"); code != exitError {
		t.Errorf("an argument: exit %d", code)
	}
}
