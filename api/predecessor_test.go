package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store"
)

// The predecessor's README flow, written out from its documented requests
// and shapes: the resource type, its second version, the resource through
// the github_actions plugin, its status, update, history, outputs,
// reconcile, delete and the health check.
const (
	seedType = `{"name": "DatabaseCluster", "version": "v1", "description": "Managed database cluster",
  "schema": {"type": "object", "required": ["engine", "engine_version", "instance_class", "storage_gb"],
    "properties": {
      "engine": {"type": "string", "enum": ["postgres", "mysql", "mariadb"], "description": "Database engine type"},
      "engine_version": {"type": "string"}, "instance_class": {"type": "string"},
      "storage_gb": {"type": "integer", "minimum": 10, "maximum": 10000},
      "replicas": {"type": "integer", "minimum": 0, "maximum": 5, "default": 0},
      "backup_retention_days": {"type": "integer", "minimum": 1, "maximum": 35, "default": 7},
      "high_availability": {"type": "boolean", "default": false}}}}`
	seedResource = `{"name": "production-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
  "action_plugin": "github_actions",
  "spec": {"engine": "postgres", "engine_version": "16.2", "instance_class": "db.large", "storage_gb": 500,
    "replicas": 2, "high_availability": true}}`
	seedUpdate = `{"spec": {"engine": "postgres", "engine_version": "16.2", "instance_class": "db.xlarge", "storage_gb": 1000,
  "replicas": 3, "backup_retention_days": 14, "high_availability": true}}`
)

// TestPredecessorReplay replays the predecessor's README against the API:
// each call answers with the predecessor's status and fields; where this
// API differs by design (README: "Coming from no8s-operator") the test
// says which.
func TestPredecessorReplay(t *testing.T) {
	t.Parallel()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"deploy": {Plugin: "github_actions", Config: json.RawMessage(`{"owner": "acme", "repo": "infra", "workflow": "deploy.yml",
			"apiURL": "https://github.example.com/api/v3/", "tokenEnv": "GH_TOKEN"}`)},
	}, func(string) (string, bool) { return "gh-token-1234567", true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Actions = instances })
	fields := func(body []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("not an object: %s", body)
		}
		return m
	}
	call := func(method, path, body string, want int) []byte {
		t.Helper()
		token := ""
		if method != http.MethodGet {
			token = writeToken // the predecessor had none; writes here need the write token
		}
		status, out, _ := e.call(method, path, token, body)
		if status != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, status, out, want)
		}
		return out
	}

	// Resource types: create (201 here), list, filter, by id, by name and version, a second version.
	typ := fields(call("POST", "/api/v1/resource-types", seedType, http.StatusCreated))
	id := itoa(int64(typ["id"].(float64)))
	for _, f := range []string{"id", "name", "version", "description", "schema", "created_at", "updated_at"} {
		if _, ok := typ[f]; !ok {
			t.Errorf("resource type lacks %q: %v", f, typ)
		}
	}
	var list []map[string]any
	if json.Unmarshal(call("GET", "/api/v1/resource-types", "", 200), &list); len(list) < 2 { // with the Git source's Network
		t.Errorf("types: %v", list)
	}
	if json.Unmarshal(call("GET", "/api/v1/resource-types?name=DatabaseCluster", "", 200), &list); len(list) != 1 {
		t.Errorf("types named DatabaseCluster: %v", list)
	}
	if got := fields(call("GET", "/api/v1/resource-types/"+id, "", 200)); got["name"] != "DatabaseCluster" || got["version"] != "v1" {
		t.Errorf("type by id: %v", got)
	}
	call("GET", "/api/v1/resource-types/DatabaseCluster/v1", "", 200)
	call("POST", "/api/v1/resource-types", strings.Replace(seedType, `"v1"`, `"v1beta1"`, 1), http.StatusCreated)

	// A resource through the github_actions plugin; an invalid spec is a 400.
	res := fields(call("POST", "/api/v1/resources", seedResource, http.StatusCreated))
	rid := itoa(int64(res["id"].(float64)))
	want := map[string]any{"name": "production-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
		"action_plugin": "github_actions", "status": "pending", "generation": float64(1), "observed_generation": float64(0)}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("created resource %s = %v, want %v", k, res[k], v)
		}
	}
	if spec := res["spec"].(map[string]any); spec["backup_retention_days"] != float64(7) {
		t.Errorf("the schema's defaults were not applied: %v", spec)
	}
	invalid := fields(call("POST", "/api/v1/resources", strings.Replace(seedResource, `"storage_gb": 500`, `"storage_gb": 5`, 1), 400))
	if d, _ := invalid["detail"].(string); !strings.Contains(d, "storage_gb") {
		t.Errorf("a 400 the predecessor's clients can read: %v", invalid)
	}

	// Status by id and by name; the documented fields are there.
	got := fields(call("GET", "/api/v1/resources/"+rid, "", 200))
	for _, f := range []string{"id", "name", "resource_type_name", "resource_type_version", "action_plugin", "status",
		"status_message", "generation", "observed_generation", "created_at", "updated_at", "last_reconcile_time", "conditions", "finalizers"} {
		if _, ok := got[f]; !ok {
			t.Errorf("resource lacks %q", f)
		}
	}
	call("GET", "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", "", 200)

	// An update is a new generation.
	if up := fields(call("PUT", "/api/v1/resources/"+rid, seedUpdate, 200)); up["generation"] != float64(2) {
		t.Errorf("after PUT: generation %v", up["generation"])
	}

	// History, with the documented fields once an attempt is recorded.
	now := time.Now()
	if _, err := e.store.AddReconcileRecord(t.Context(), &store.ReconcileRecord{ResourceID: int64(res["id"].(float64)),
		Kind: "DatabaseCluster", Name: "production-pg", Generation: 2, Trigger: store.TriggerUpdate, Phase: "completed",
		Success: true, Updated: 1, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	var hist []map[string]any
	json.Unmarshal(call("GET", "/api/v1/resources/"+rid+"/history", "", 200), &hist)
	if len(hist) != 1 {
		t.Fatalf("history: %v", hist)
	}
	for _, f := range []string{"id", "resource_id", "generation", "success", "phase", "error_message", "resources_created",
		"resources_updated", "resources_deleted", "reconcile_time"} {
		if _, ok := hist[0][f]; !ok {
			t.Errorf("history record lacks %q: %v", f, hist[0])
		}
	}
	if out := fields(call("GET", "/api/v1/resources/"+rid+"/outputs", "", 200)); out["outputs"] != nil {
		t.Errorf("outputs before any apply: %v", out)
	}

	// Reconcile and delete answer {message, resource_id} (202 here).
	for _, c := range []struct{ method, path, message string }{
		{"POST", "/api/v1/resources/" + rid + "/reconcile", "Reconciliation triggered"},
		{"DELETE", "/api/v1/resources/" + rid, "Resource deletion initiated"},
	} {
		m := fields(call(c.method, c.path, "", http.StatusAccepted))
		if m["message"] != c.message || m["resource_id"] != res["id"] {
			t.Errorf("%s %s = %v", c.method, c.path, m)
		}
	}
	if h := fields(call("GET", "/health", "", 200)); h["status"] != "healthy" {
		t.Errorf("health: %v", h)
	}
}
