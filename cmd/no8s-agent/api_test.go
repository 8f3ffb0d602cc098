package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

var servingRE = regexp.MustCompile(`msg="serving HTTP" addr=(\S+)`)

// addr waits for the agent to listen and returns its base URL.
func (a *agentRun) addr() string {
	a.t.Helper()
	var base string
	waitFor(a.t, 30*time.Second, a, "the HTTP server", func() (bool, string) {
		m := servingRE.FindStringSubmatch(a.log.String())
		if m == nil {
			return false, "not serving yet"
		}
		base = "http://" + m[1]
		return true, ""
	})
	return base
}

// setSecret sets an environment variable with a name of its own for the
// test (os.Setenv, as parallel tests cannot use t.Setenv) and returns it.
func setSecret(t *testing.T, value string) string {
	t.Helper()
	name := "NO8S_TEST_" + strings.ToUpper(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), "_")) + fmt.Sprint(time.Now().UnixNano())
	if err := os.Setenv(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(name) })
	return name
}

// curl sends a request as the predecessor's README does, plus the token.
func curl(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// waitLine reads lines until one matches, failing when the stream ends or
// 30 seconds pass first.
func waitLine(t *testing.T, lines <-chan string, match func(string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if match(l) {
				return
			}
		case <-deadline:
			t.Fatal("no matching event within 30s")
		}
	}
}

// The predecessor's README examples, verbatim.
const (
	seedType = `{
    "name": "DatabaseCluster",
    "version": "v1",
    "description": "Managed database cluster",
    "schema": {
      "type": "object",
      "required": ["engine", "engine_version", "instance_class", "storage_gb"],
      "properties": {
        "engine": {
          "type": "string",
          "enum": ["postgres", "mysql", "mariadb"],
          "description": "Database engine type"
        },
        "engine_version": {
          "type": "string",
          "description": "Database engine version"
        },
        "instance_class": {
          "type": "string",
          "description": "Instance size class (e.g. db.small, db.medium, db.large)"
        },
        "storage_gb": {
          "type": "integer",
          "minimum": 10,
          "maximum": 10000,
          "description": "Storage size in GB"
        },
        "replicas": {
          "type": "integer",
          "minimum": 0,
          "maximum": 5,
          "default": 0,
          "description": "Number of read replicas"
        },
        "backup_retention_days": {
          "type": "integer",
          "minimum": 1,
          "maximum": 35,
          "default": 7,
          "description": "Number of days to retain backups"
        },
        "high_availability": {
          "type": "boolean",
          "default": false,
          "description": "Enable multi-AZ high availability"
        }
      }
    }
  }`
	seedResource = `{
    "name": "production-pg",
    "resource_type_name": "DatabaseCluster",
    "resource_type_version": "v1",
    "action_plugin": "github_actions",
    "spec": {
      "engine": "postgres",
      "engine_version": "16.2",
      "instance_class": "db.large",
      "storage_gb": 500,
      "replicas": 2,
      "backup_retention_days": 14,
      "high_availability": true
    }
  }`
	seedUpdate = `{
    "spec": {
      "engine": "postgres",
      "engine_version": "16.2",
      "instance_class": "db.xlarge",
      "storage_gb": 1000,
      "replicas": 3,
      "backup_retention_days": 14,
      "high_availability": true
    }
  }`
)

// TestPredecessorFlow replays the predecessor's README against a running
// agent that has no sources, only the API: create a type and a resource,
// read it by id and by name, update it to generation 2, read its history
// and outputs, ask for a reconcile, delete it.
func TestPredecessorFlow(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const token = "flow-token-5d1e9a"
	dir := t.TempDir()
	// The instance is named after the predecessor's plugin so that its
	// resource body works unchanged. It prints the outputs the README shows.
	cfg := fmt.Sprintf(`api: {writeTokenEnv: %s}
actions:
  github_actions:
    plugin: exec
    config:
      command: [sh, -c, 'cat >/dev/null; echo "{\"jobs\":[{\"name\":\"deploy\",\"status\":\"completed\",\"conclusion\":\"success\"}],\"artifacts\":[{\"name\":\"build-output\",\"size_in_bytes\":1234567}]}"']
`, setSecret(t, token))
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, url, "--config", path)
	base := agent.addr() + "/api/v1"
	// The event stream, through every wrapper the agent puts around its
	// routes, shows the resource becoming ready.
	events := make(chan string, 1024)
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	req, err := http.NewRequestWithContext(streamCtx, "GET", base+"/events?kind=DatabaseCluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	waitLine(t, events, func(l string) bool { return l == ": subscribed" })

	if st, body := curl(t, "POST", base+"/resource-types", token, seedType); st != 201 {
		t.Fatalf("create type = %d %s", st, body)
	}
	for _, p := range []string{"/resource-types", "/resource-types?name=DatabaseCluster", "/resource-types/1", "/resource-types/DatabaseCluster/v1"} {
		if st, body := curl(t, "GET", base+p, "", ""); st != 200 || !strings.Contains(body, `"name":"DatabaseCluster"`) {
			t.Errorf("GET %s = %d %s", p, st, body)
		}
	}
	st, body := curl(t, "POST", base+"/resources", token, seedResource)
	if st != 201 {
		t.Fatalf("create resource = %d %s", st, body)
	}
	var created api.Resource
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	get := func(path string) api.Resource {
		t.Helper()
		st, body := curl(t, "GET", base+path, "", "")
		if st != 200 {
			t.Fatalf("GET %s = %d %s", path, st, body)
		}
		var r api.Resource
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	byID := fmt.Sprintf("/resources/%d", created.ID)
	waitReady := func(gen int64) api.Resource {
		t.Helper()
		var r api.Resource
		waitFor(t, 30*time.Second, agent, fmt.Sprintf("generation %d ready", gen), func() (bool, string) {
			r = get(byID)
			return r.Status == manifest.PhaseReady && r.ObservedGeneration == gen, fmt.Sprintf("%s %d/%d %s", r.Status, r.ObservedGeneration, r.Generation, r.StatusMessage)
		})
		return r
	}
	r := waitReady(1)
	if r.Name != "production-pg" || r.ResourceTypeName != "DatabaseCluster" || r.ResourceTypeVersion != "v1" ||
		r.ActionPlugin != "github_actions" || r.StatusMessage == "" || r.LastReconcileTime == nil || len(r.Conditions) < 3 {
		t.Errorf("resource = %+v", r)
	}
	waitLine(t, events, func(l string) bool {
		return strings.HasPrefix(l, "data: ") && strings.Contains(l, `"name":"production-pg"`) && strings.Contains(l, `"status":"ready"`)
	})
	if byName := get("/resources/by-name/DatabaseCluster/v1/production-pg"); byName.ID != created.ID {
		t.Errorf("by name = %+v", byName)
	}

	if st, body := curl(t, "PUT", base+byID, token, seedUpdate); st != 200 || !strings.Contains(body, `"generation":2`) {
		t.Fatalf("update = %d %s", st, body)
	}
	r = waitReady(2)
	if !strings.Contains(string(r.Spec), `"instance_class":"db.xlarge"`) {
		t.Errorf("spec after update = %s", r.Spec)
	}

	st, body = curl(t, "GET", base+byID+"/history", "", "")
	var history []api.ReconcileRecord
	if err := json.Unmarshal([]byte(body), &history); st != 200 || err != nil {
		t.Fatalf("history = %d %s", st, body)
	}
	if len(history) != 2 || history[0].Generation != 2 || history[1].Generation != 1 || !history[0].Success ||
		history[0].Phase != "completed" || history[0].ErrorMessage != nil || history[0].ResourcesUpdated != 1 || history[1].ResourcesCreated != 1 {
		t.Errorf("history = %s", body)
	}
	st, body = curl(t, "GET", base+byID+"/outputs", "", "")
	var outputs struct {
		Outputs struct {
			Jobs      []struct{ Name, Status, Conclusion string }
			Artifacts []struct {
				Name        string
				SizeInBytes int `json:"size_in_bytes"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &outputs); st != 200 || err != nil || len(outputs.Outputs.Jobs) != 1 ||
		outputs.Outputs.Jobs[0].Conclusion != "success" || outputs.Outputs.Artifacts[0].SizeInBytes != 1234567 {
		t.Errorf("outputs = %d %s", st, body)
	}

	// A manual reconcile runs the action again at the same generation.
	if st, body := curl(t, "POST", base+byID+"/reconcile", token, ""); st != 202 {
		t.Fatalf("reconcile = %d %s", st, body)
	}
	waitFor(t, 30*time.Second, agent, "the manual reconcile", func() (bool, string) {
		_, body := curl(t, "GET", base+byID+"/history", "", "")
		return strings.Count(body, `"trigger":"manual"`) == 1, body
	})

	if st, body := curl(t, "DELETE", base+byID, token, ""); st != 202 || !strings.Contains(body, `"status":"deleting"`) {
		t.Fatalf("delete = %d %s", st, body)
	}
	waitFor(t, 30*time.Second, agent, "the resource to be destroyed", func() (bool, string) {
		st, body := curl(t, "GET", base+byID, "", "")
		return st == 404, body
	})
	// The history outlives the resource, with the destroy last.
	st, body = curl(t, "GET", base+byID+"/history", "", "")
	if err := json.Unmarshal([]byte(body), &history); st != 200 || err != nil || len(history) != 4 ||
		history[0].Trigger != "delete" || !history[0].Success || history[0].ResourcesDeleted != 1 {
		t.Errorf("history after the deletion = %d %s", st, body)
	}
	_, body = curl(t, "GET", base+"/sources/api/history", "", "")
	if strings.Count(body, `"success":true`) != 4 {
		t.Errorf("the api source's history should hold the type, the creation, the update and the deletion: %s", body)
	}
	if code, _ := agent.stop(); code != 0 {
		t.Errorf("run exited %d", code)
	}
}
