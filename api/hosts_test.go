package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
)

// serveOn serves srv on ln with Serve, as the agent does, until the test ends.
func serveOn(t *testing.T, srv *api.Server, ln net.Listener) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// hostCall sends a GET to base+path with the Host header host (none when
// empty) and returns the status and body.
func hostCall(t *testing.T, base, path, host string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestLoopbackRefusesOtherHosts is a DNS rebinding attack: a page of
// evil.example whose name the attacker points at 127.0.0.1 makes the
// browser send requests to the agent with Host: evil.example. An agent
// listening on loopback answers only loopback names; health, metrics and
// webhooks included.
func TestLoopbackRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "no8s_up 1\n") })
		o.GitHubWebhook = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := serveOn(t, e.srv, ln)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, path := range []string{"/api/v1/resources", "/healthz", "/metrics"} {
		for _, host := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example", "127.0.0.1.nip.io:" + port} {
			status, body := hostCall(t, base, path, host)
			if status != http.StatusMisdirectedRequest || !strings.Contains(body, "api.allowedHosts") {
				t.Errorf("GET %s with Host %s = %d %s; want 421 naming api.allowedHosts", path, host, status, body)
			}
		}
		for _, host := range []string{"", "localhost", "localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port, "127.5.6.7", "[::1]:" + port} {
			if status, body := hostCall(t, base, path, host); status != http.StatusOK {
				t.Errorf("GET %s with Host %q = %d %s; want 200", path, host, status, body)
			}
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/hooks/github", strings.NewReader("{}"))
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("the webhook with Host evil.example = %d; want 421", resp.StatusCode)
	}
}

// TestAllowedHosts: the names listed are answered besides loopback ones,
// with any port or the one given; an agent listening on every address
// checks the Host only when names are listed, and then also answers the
// address a request is sent to, as a probe from another host sends it.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) {
		o.AllowedHosts = []string{"agent.example.com", "Other.example:8443", "[fd00::7]"}
	})
	loopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := serveOn(t, e.srv, loopback)
	for host, want := range map[string]int{
		"agent.example.com": 200, "AGENT.example.com.:8080": 200, "other.example:8443": 200, "[fd00::7]:80": 200, "localhost": 200,
		"other.example:9999": 421, "other.example": 421, "evil.example": 421, "agent.example.com.evil.example": 421, "10.1.2.3": 421,
	} {
		if status, body := hostCall(t, base, "/healthz", host); status != want {
			t.Errorf("loopback agent, Host %s = %d %s; want %d", host, status, body, want)
		}
	}

	// Every address: without a list, any Host.
	open := newEnv(t, nil)
	everywhere, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(everywhere.Addr().String())
	serveOn(t, open.srv, everywhere)
	base = "http://127.0.0.1:" + port
	if status, body := hostCall(t, base, "/healthz", "evil.example"); status != http.StatusOK {
		t.Errorf("agent on every address without a list, Host evil.example = %d %s", status, body)
	}

	// Every address, with a list.
	listed := newEnv(t, func(o *api.Options) { o.AllowedHosts = []string{"agent.example.com"} })
	everywhere, err = net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(everywhere.Addr().String())
	serveOn(t, listed.srv, everywhere)
	base = "http://127.0.0.1:" + port
	for host, want := range map[string]int{"agent.example.com": 200, "localhost:" + port: 200, "evil.example": 421, "10.1.2.3": 421} {
		if status, body := hostCall(t, base, "/healthz", host); status != want {
			t.Errorf("agent on every address with a list, Host %s = %d %s; want %d", host, status, body, want)
		}
	}
	// A probe from another host sends the address it connects to.
	if ip := externalIPv4(t); ip != "" {
		addr := net.JoinHostPort(ip, port)
		if status, body := hostCall(t, "http://"+addr, "/healthz", ""); status != http.StatusOK {
			t.Errorf("agent on every address with a list, Host %s (the address it is reached at) = %d %s", addr, status, body)
		}
	}
}

// externalIPv4 is an IPv4 address of this machine that is not loopback,
// or "" when it has none.
func externalIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}
