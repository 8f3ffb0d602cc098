package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestResourceShape pins the JSON field names clients of the predecessor's
// API rely on, and that empty collections are [] or {}, never null.
func TestResourceShape(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 1, 15, 10, 30, 0, 0, time.UTC)
	r := &store.Resource{ID: 1, Resource: manifest.Resource{Kind: "DatabaseCluster", Group: "infra.example.com", Version: "v1",
		Name: "production-pg", Spec: json.RawMessage(`{"engine":"postgres"}`), Action: "provision-db"},
		Source: store.SourceRef{Name: "infra", Path: "db.yaml", Revision: "main@sha1:abc"}, Generation: 2,
		ObservedGeneration: 1, Phase: manifest.PhaseReady, StatusMessage: "Reconciliation successful", CreatedAt: now, UpdatedAt: now}
	b, err := json.Marshal(NewResource(r))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": 1.0, "name": "production-pg", "kind": "DatabaseCluster", "resource_type_name": "DatabaseCluster",
		"resource_type_version": "v1", "action_plugin": "provision-db", "status": "ready",
		"status_message": "Reconciliation successful", "generation": 2.0, "observed_generation": 1.0,
		"created_at": "2024-01-15T10:30:00Z", "last_reconcile_time": nil, "outputs": nil,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	for _, k := range []string{"conditions", "labels", "annotations", "depends_on", "spec", "source"} {
		if m[k] == nil {
			t.Errorf("%s is null", k)
		}
	}
	if src := m["source"].(map[string]any); src["name"] != "infra" || src["path"] != "db.yaml" || src["revision"] != "main@sha1:abc" {
		t.Errorf("source = %v", src)
	}
}

func TestSourceAndHistoryShapes(t *testing.T) {
	t.Parallel()
	s := NewSource(&store.Source{Name: "infra", Kind: store.SourceGit, URL: "https://example.com/r.git", Phase: store.SourceFailed,
		Errors: []manifest.Problem{{File: "a.yaml", Line: 3, Pointer: "/spec/x", Message: "spec.x: bad"}}})
	b, _ := json.Marshal(s)
	for _, want := range []string{`"kind":"git"`, `"url":"https://example.com/r.git"`, `"phase":"failed"`, `"last_commit":null`,
		`"errors":[{"file":"a.yaml","line":3,"document":0,"pointer":"/spec/x","message":"spec.x: bad"}]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("source JSON %s lacks %s", b, want)
		}
	}
	empty, _ := json.Marshal(NewSource(&store.Source{Name: "x"}))
	if !strings.Contains(string(empty), `"errors":[]`) {
		t.Errorf("no errors must be [], got %s", empty)
	}
	h := NewReconcileRecord(&store.ReconcileRecord{ID: 5, ResourceID: 1, Generation: 2, Success: true, Phase: "completed",
		Updated: 1, Duration: 1500 * time.Millisecond})
	hb, _ := json.Marshal(h)
	for _, want := range []string{`"error_message":null`, `"resources_updated":1`, `"duration_ms":1500`, `"phase":"completed"`} {
		if !strings.Contains(string(hb), want) {
			t.Errorf("history JSON %s lacks %s", hb, want)
		}
	}
	failed, _ := json.Marshal(NewReconcileRecord(&store.ReconcileRecord{Error: "boom"}))
	if !strings.Contains(string(failed), `"error_message":"boom"`) {
		t.Errorf("failed attempt: %s", failed)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://github.com/acme/infra.git":            "https://github.com/acme/infra.git",
		"https://bot:s3cr3t@github.com/acme/infra.git": "https://bot:xxxxx@github.com/acme/infra.git",
		"https://ghp_t0ken@github.com/acme/infra.git":  "https://xxxxx@github.com/acme/infra.git",
		"ssh://git@github.com/acme/infra.git":          "ssh://git@github.com/acme/infra.git",
		"git@github.com:acme/infra.git":                "git@github.com:acme/infra.git",
		"/srv/manifests":                               "/srv/manifests",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
