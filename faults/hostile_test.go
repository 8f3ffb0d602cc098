package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// call sends a request to the agent and returns its status, body and
// Retry-After; a network error is status 0.
func call(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("Retry-After")
}

// TestStoreDownIs503 stops the agent's PostgreSQL server: every route that
// needs the store answers 503 with Retry-After (not 500) while it is down,
// the agent keeps running, and answers 200 again once it is back.
func TestStoreDownIs503(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewServer(t)
	dbURL := pg.URL(t)
	work := t.TempDir()
	manifests := filepath.Join(work, "manifests")
	writeFile(t, filepath.Join(manifests, "types.yaml"), siteType)
	writeFile(t, filepath.Join(manifests, "shop.yaml"), site("shop", 1))
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: local
    dir: %q
reconcile: {backoff: {initial: 1s, max: 2s}}
`, dbURL, manifests))
	a := startAgent(t, work, "run", "--config", cfg)
	base := a.URL()
	waitUntil(t, 60*time.Second, "the first sync", func() (bool, string) {
		st, body, _ := call(t, "GET", base+"/api/v1/resources/by-name/Site/v1/shop")
		return st == 200, fmt.Sprintf("%d %s", st, body)
	})

	// A clean shutdown: the test is about the store being away, not about
	// what a crash of a server without fsync loses.
	pg.Stop(t, "fast")
	routes := []string{"/api/v1/resources", "/api/v1/resources/by-name/Site/v1/shop", "/api/v1/resource-types",
		"/api/v1/sources", "/api/v1/sources/local", "/api/v1/sources/local/history", "/readyz", "/", "/sources/local"}
	for _, route := range routes {
		st, body, retry := call(t, "GET", base+route)
		if st != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("GET %s with the store down = %d %s (Retry-After %q), want 503 with Retry-After", route, st, body, retry)
		}
		if strings.Contains(body, dbURL) || strings.Contains(body, "/tmp/") {
			t.Errorf("GET %s names the database: %s", route, body)
		}
	}
	if a.Exited() {
		t.Fatal("the agent exited while the store was down")
	}
	if strings.Contains(a.Log(), `msg="request failed"`) {
		t.Errorf("an unreachable store was logged as an internal error")
	}

	pg.Start(t)
	waitUntil(t, 60*time.Second, "the API to answer again", func() (bool, string) {
		for _, route := range routes {
			if st, body, _ := call(t, "GET", base+route); st != 200 {
				return false, fmt.Sprintf("GET %s = %d %s", route, st, body)
			}
		}
		return true, ""
	})
}

// TestHostileSourceFiles runs the agent on a folder holding an alias bomb
// and files whose names hold control characters: the bomb is refused with
// a clear error and nothing of it stored, and no file name forges a line of
// the agent's log or of its messages.
func TestHostileSourceFiles(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	manifests := filepath.Join(work, "manifests")
	writeFile(t, filepath.Join(manifests, "types.yaml"), siteType)
	writeFile(t, filepath.Join(manifests, "shop.yaml"), site("shop", 1))
	// 40 KiB aliased 256 times: a 42 KB file standing for a 10 MiB spec.
	bomb := "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: bomb}\nspec:\n  replicas: 1\n" +
		"  pad: &a " + strings.Repeat("x", 40<<10) + "\n  more: [" + strings.TrimSuffix(strings.Repeat("*a,", 256), ",") + "]\n"
	writeFile(t, filepath.Join(manifests, "bomb.yaml"), bomb)
	forged := "x.yaml\nlevel=INFO msg=\"sync applied\" forged=yes\n.yaml"
	if err := os.WriteFile(filepath.Join(manifests, forged), []byte("kind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: local
    dir: %q
`, pgtest.URL(t), manifests))
	a := startAgent(t, work, "run", "--config", cfg)
	base := a.URL()
	var src struct {
		Phase   string `json:"phase"`
		Message string `json:"message"`
		Errors  []struct {
			File    string `json:"file"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	waitUntil(t, 60*time.Second, "the sync to be refused", func() (bool, string) {
		if apiGet(t, base+"/api/v1/sources/local", &src) != 200 {
			return false, "source not readable"
		}
		return src.Phase == "failed", fmt.Sprintf("%s: %s", src.Phase, src.Message)
	})
	var bombErr, forgedErr bool
	for _, e := range src.Errors {
		bombErr = bombErr || (e.File == "bomb.yaml" && strings.Contains(e.Message, "document expands to more than 1572864 bytes"))
		forgedErr = forgedErr || e.File == forged
	}
	if !bombErr || !forgedErr {
		t.Errorf("errors do not name the bomb and the forged file: %+v", src.Errors)
	}
	if strings.ContainsAny(src.Message, "\n\r") {
		t.Errorf("the source's message spans lines: %q", src.Message)
	}
	if st := apiGet(t, base+"/api/v1/resources/by-name/Site/v1/bomb", nil); st != 404 {
		t.Errorf("the bomb was stored (%d)", st)
	}
	for _, line := range strings.Split(a.Log(), "\n") {
		if strings.Contains(line, "forged=yes") && !strings.Contains(line, `\n`) {
			t.Errorf("a file name forged a log line: %q", line)
		}
	}
	var resp json.RawMessage
	if apiGet(t, base+"/api/v1/sources/local/history", &resp) != 200 {
		t.Error("history not readable")
	}
}

// TestConfigDurationMinimums checks that the agent refuses to start with
// a duration below its minimum, naming the key.
func TestConfigDurationMinimums(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "m", "types.yaml"), siteType)
	cfg := writeConfig(t, work, `listen: 127.0.0.1:0
sources:
  - {name: local, dir: m, interval: 1ns}
reconcile: {leaseDuration: 1ns}
`)
	a := startAgent(t, work, "run", "--config", cfg)
	waitUntil(t, 30*time.Second, "the agent to refuse its configuration", func() (bool, string) {
		return a.Exited(), "still running"
	})
	for _, want := range []string{"sources[0].interval: must be at least 1s, not 1ns", "reconcile.leaseDuration: must be at least 1s, not 1ns"} {
		if !strings.Contains(a.Log(), want) {
			t.Errorf("log does not say %q:\n%s", want, a.Log())
		}
	}
}
