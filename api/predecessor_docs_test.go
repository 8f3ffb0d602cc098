package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/api"
)

// The predecessor's documented requests, beyond its README: resource types
// with status, metadata, filters and partial updates; resources with
// metadata, plugin_config, filters and read-modify-write; the history
// limit and the event stream's filter. Written out from its documentation
// (its resource and resource-type pages), not from its code.
const docsType = `{"name": "DatabaseCluster", "version": "v1", "description": "Managed PostgreSQL or MySQL cluster",
  "schema": {"type": "object", "required": ["engine", "instance_class", "storage_gb"],
    "properties": {"engine": {"type": "string", "enum": ["postgres", "mysql"]}, "instance_class": {"type": "string"},
      "storage_gb": {"type": "integer", "minimum": 10, "maximum": 10000},
      "replicas": {"type": "integer", "minimum": 0, "default": 0},
      "high_availability": {"type": "boolean", "default": false}}}}`

const docsResource = `{"name": "production-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
  "action_plugin": "github_actions",
  "metadata": {"team": "dba", "cost_center": "cc-42"},
  "plugin_config": {"ref": "release", "region": "eu-west-1"},
  "spec": {"engine": "postgres", "instance_class": "db.large", "storage_gb": 500, "replicas": 2, "high_availability": true}}`

// TestPredecessorDocsReplay replays the predecessor's documented requests;
// each answers with the predecessor's status and fields, except where the
// README's "Coming from no8s-operator" says otherwise.
func TestPredecessorDocsReplay(t *testing.T) {
	t.Parallel()
	module := t.TempDir()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"deploy": {Plugin: "github_actions", Config: json.RawMessage(`{"owner": "acme", "repo": "infra", "workflow": "deploy.yml",
			"apiURL": "https://github.example.com/api/v3/", "tokenEnv": "GH_TOKEN"}`)},
		"tf": {Plugin: "terraform", Config: json.RawMessage(`{"module": "` + module + `", "binary": "/bin/true"}`)},
	}, func(string) (string, bool) { return "gh-token-1234567", true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Actions = instances })
	call := func(method, path, body string, want int) map[string]any {
		t.Helper()
		token := ""
		if method != http.MethodGet {
			token = writeToken
		}
		status, out, _ := e.call(method, path, token, body)
		if status != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, status, out, want)
		}
		var m map[string]any
		if len(out) > 0 && out[0] == '{' {
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	list := func(path string) []map[string]any {
		t.Helper()
		status, out, _ := e.call("GET", path, "", "")
		var l []map[string]any
		if status != http.StatusOK || json.Unmarshal(out, &l) != nil {
			t.Fatalf("GET %s = %d %s", path, status, out)
		}
		return l
	}

	// Resource types: created active with empty metadata; metadata kept.
	typ := call("POST", "/api/v1/resource-types", docsType, http.StatusCreated)
	if typ["status"] != "active" || !jsonEqual(typ["metadata"], map[string]any{}) {
		t.Errorf("created type: status %v, metadata %v", typ["status"], typ["metadata"])
	}
	tid := itoa(int64(typ["id"].(float64)))
	v2 := call("POST", "/api/v1/resource-types", strings.Replace(strings.Replace(docsType, `"v1"`, `"v2"`, 1),
		`"name": "DatabaseCluster"`, `"name": "DatabaseCluster", "metadata": {"owner": "platform"}`, 1), http.StatusCreated)
	if !jsonEqual(v2["metadata"], map[string]any{"owner": "platform"}) {
		t.Errorf("metadata of v2: %v", v2["metadata"])
	}
	call("POST", "/api/v1/resource-types", strings.Replace(docsType, `"name": "DatabaseCluster"`,
		`"name": "DatabaseCluster", "metadata": {"owner": 7}`, 1), http.StatusBadRequest)

	// Partial updates: a schema alone keeps the description; then deprecated.
	up := call("PUT", "/api/v1/resource-types/"+tid, `{"schema": {"type": "object", "required": ["engine", "instance_class", "storage_gb"],
	  "properties": {"engine": {"type": "string", "enum": ["postgres", "mysql", "mariadb"]}, "instance_class": {"type": "string"},
	    "storage_gb": {"type": "integer", "minimum": 10}, "replicas": {"type": "integer", "minimum": 0, "default": 0},
	    "high_availability": {"type": "boolean", "default": false}}}}`, http.StatusOK)
	if up["description"] != "Managed PostgreSQL or MySQL cluster" || !strings.Contains(string(mustJSON(t, up["schema"])), "mariadb") {
		t.Errorf("after a schema-only PUT: %v", up)
	}
	dep := call("PUT", "/api/v1/resource-types/"+tid, `{"status": "deprecated", "description": "Use DatabaseCluster/v2 instead"}`, http.StatusOK)
	if dep["status"] != "deprecated" || dep["description"] != "Use DatabaseCluster/v2 instead" {
		t.Errorf("after deprecating: %v", dep)
	}
	if l := list("/api/v1/resource-types?status=deprecated"); len(l) != 1 || l[0]["version"] != "v1" {
		t.Errorf("?status=deprecated: %v", l)
	}
	if l := list("/api/v1/resource-types?name=DatabaseCluster"); len(l) != 2 {
		t.Errorf("?name=DatabaseCluster: %v", l)
	}
	if l := list("/api/v1/resource-types?limit=1"); len(l) != 1 {
		t.Errorf("?limit=1: %v", l)
	}
	call("GET", "/api/v1/resource-types/DatabaseCluster/v2", "", http.StatusOK)
	call("GET", "/api/v1/resource-types/999999", "", http.StatusNotFound)
	call("GET", "/api/v1/resource-types/DatabaseCluster/v9", "", http.StatusNotFound)
	call("PUT", "/api/v1/resource-types/"+tid, `{"status": "active"}`, http.StatusOK)

	// A resource with metadata and plugin_config: both are kept and shown.
	res := call("POST", "/api/v1/resources", docsResource, http.StatusCreated)
	rid := itoa(int64(res["id"].(float64)))
	for k, want := range map[string]any{
		"status": "pending", "generation": float64(1), "observed_generation": float64(0),
		"metadata":      map[string]any{"team": "dba", "cost_center": "cc-42"},
		"plugin_config": map[string]any{"ref": "release", "region": "eu-west-1"},
		"finalizers":    []any{api.FinalizerDestroy},
	} {
		if !jsonEqual(res[k], want) {
			t.Errorf("created resource %s = %v, want %v", k, res[k], want)
		}
	}
	if _, ok := res["conditions"].([]any); !ok {
		t.Errorf("conditions: %v, want a list", res["conditions"])
	}

	// Refused at once, changing nothing: metadata that are not strings,
	// metadata beside annotations, plugin_config that is not an object, and
	// plugin_config for an action that would ignore it.
	for _, c := range []struct{ name, from, to, field string }{
		{"metadata number", `"cost_center": "cc-42"`, `"cost_center": 42`, "metadata.cost_center"},
		{"metadata and other annotations", `"metadata": {`, `"annotations": {"a": "b"}, "metadata": {`, "metadata"},
		{"plugin_config array", `"plugin_config": {"ref": "release", "region": "eu-west-1"}`, `"plugin_config": ["release"]`, "plugin_config"},
		{"plugin_config for terraform", `"action_plugin": "github_actions"`, `"action_plugin": "tf"`, "plugin_config"},
		{"plugin_config for noop", `"action_plugin": "github_actions",`, ``, "plugin_config"},
	} {
		body := strings.Replace(strings.Replace(docsResource, c.from, c.to, 1), "production-pg", "refused-pg", 1)
		bad := call("POST", "/api/v1/resources", body, http.StatusBadRequest)
		details, _ := bad["details"].([]any)
		if len(details) == 0 || details[0].(map[string]any)["field"] != c.field || bad["detail"] == nil {
			t.Errorf("%s: %v, want a detail naming %s", c.name, bad, c.field)
		}
	}
	if l := list("/api/v1/resources?kind=DatabaseCluster"); len(l) != 1 {
		t.Errorf("a refused write stored something: %v", l)
	}

	// Filters and lookups.
	if l := list("/api/v1/resources?kind=DatabaseCluster&status=pending&limit=50"); len(l) != 1 || l[0]["name"] != "production-pg" {
		t.Errorf("?status=pending: %v", l)
	}
	if l := list("/api/v1/resources?kind=DatabaseCluster&status=failed"); len(l) != 0 {
		t.Errorf("?status=failed: %v", l)
	}
	call("GET", "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", "", http.StatusOK)
	call("GET", "/api/v1/resources/by-name/DatabaseCluster/v1/nothing-here", "", http.StatusNotFound)
	call("GET", "/api/v1/resources/999999", "", http.StatusNotFound)

	// An update of spec is a new generation; plugin_config alone too (the
	// action acts on it); metadata alone is not.
	steps := []struct {
		body string
		gen  float64
	}{
		{`{"spec": {"engine": "postgres", "instance_class": "db.xlarge", "storage_gb": 1000, "replicas": 3, "high_availability": true}}`, 2},
		{`{"plugin_config": {"ref": "main"}}`, 3},
		{`{"metadata": {"team": "platform"}}`, 3},
		{`{"plugin_config": {"ref": "main"}}`, 3},
	}
	for _, s := range steps {
		if got := call("PUT", "/api/v1/resources/"+rid, s.body, http.StatusOK); got["generation"] != s.gen {
			t.Errorf("PUT %s: generation %v, want %v", s.body, got["generation"], s.gen)
		}
	}
	got := call("GET", "/api/v1/resources/"+rid, "", http.StatusOK)
	if !jsonEqual(got["plugin_config"], map[string]any{"ref": "main"}) || !jsonEqual(got["metadata"], map[string]any{"team": "platform"}) ||
		!jsonEqual(got["annotations"], got["metadata"]) || mustJSON(t, got["spec"]) == "" {
		t.Errorf("after updates: plugin_config %v metadata %v annotations %v", got["plugin_config"], got["metadata"], got["annotations"])
	}

	// Read, modify, write: the object as read goes back unchanged.
	_, raw, _ := e.call("GET", "/api/v1/resources/"+rid, "", "")
	if back := call("PUT", "/api/v1/resources/"+rid, string(raw), http.StatusOK); back["generation"] != float64(3) {
		t.Errorf("writing back the object read: generation %v, want 3", back["generation"])
	}
	// null removes the plugin configuration: a new generation.
	if cleared := call("PUT", "/api/v1/resources/"+rid, `{"plugin_config": null}`, http.StatusOK); cleared["plugin_config"] != nil || cleared["generation"] != float64(4) {
		t.Errorf("plugin_config null: %v (generation %v)", cleared["plugin_config"], cleared["generation"])
	}

	// History with the documented limit, outputs, reconcile.
	if l := list("/api/v1/resources/" + rid + "/history?limit=20"); len(l) != 0 {
		t.Errorf("history before any attempt: %v", l)
	}
	if out := call("GET", "/api/v1/resources/"+rid+"/outputs", "", http.StatusOK); out["outputs"] != nil {
		t.Errorf("outputs: %v", out)
	}
	call("POST", "/api/v1/resources/"+rid+"/reconcile", "", http.StatusAccepted)

	// The event stream takes the predecessor's filter name.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.http.URL+"/api/v1/events?resource_type=DatabaseCluster", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("events?resource_type=: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// A type version in use cannot go; an unused one can (204).
	call("DELETE", "/api/v1/resource-types/"+tid, "", http.StatusConflict)
	call("DELETE", "/api/v1/resource-types/"+itoa(int64(v2["id"].(float64))), "", http.StatusNoContent)
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
