package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestRoutes checks every route's answers, good and bad, on one server.
func TestRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var typ api.ResourceType
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, &typ)
	var res api.Resource
	e.must("POST", "/api/v1/resources", writeToken, dbResource, http.StatusCreated, &res)
	if res.Generation != 1 || res.Status != manifest.PhasePending || res.Source.Name != "api" ||
		string(res.Spec) != `{"engine":"postgres","replicas":0,"storage_gb":500}` || res.ActionPlugin != "provision-db" {
		t.Fatalf("created resource = %+v", res)
	}
	git := e.gitRes.ID
	tests := []struct {
		name, method, path, token, body string
		status                          int
		// contains must all appear in the body.
		contains []string
	}{
		{"list types", "GET", "/api/v1/resource-types", "", "", 200, []string{`"name":"DatabaseCluster"`, `"name":"Network"`}},
		{"list types by name", "GET", "/api/v1/resource-types?name=Network", "", "", 200, []string{`"name":"Network"`}},
		{"type by id", "GET", fmt.Sprintf("/api/v1/resource-types/%d", typ.ID), "", "", 200, []string{`"version":"v1"`, `"source":{"name":"api"`}},
		{"type by id missing", "GET", "/api/v1/resource-types/999999", "", "", 404, []string{`"error"`}},
		{"type bad id", "GET", "/api/v1/resource-types/abc", "", "", 400, []string{`id: \"abc\" is not a positive integer`}},
		{"type by name", "GET", "/api/v1/resource-types/DatabaseCluster/v1", "", "", 200, []string{`"name":"DatabaseCluster"`}},
		{"type by name missing", "GET", "/api/v1/resource-types/DatabaseCluster/v9", "", "", 404, nil},
		{"type schema invalid", "POST", "/api/v1/resource-types", writeToken,
			`{"name": "Queue", "version": "v1", "schema": {"type": "object", "properties": {"size": {"type": "bogus"}}}}`,
			400, []string{`"field":"schema.properties.size.type"`}},
		{"type name invalid", "POST", "/api/v1/resource-types", writeToken, `{"name": "queue", "version": "v1"}`, 400, []string{`"field":"name"`}},
		{"type owned by git", "POST", "/api/v1/resource-types", writeToken,
			`{"name": "Network", "version": "v2", "schema": {"type": "object"}}`, 409, []string{`source \"infra\"`, "types/network.yaml"}},
		{"type unknown field", "POST", "/api/v1/resource-types", writeToken, `{"name": "Queue", "version": "v1", "shema": {}}`, 400, []string{`"field":"shema"`}},

		{"list resources", "GET", "/api/v1/resources", "", "", 200, []string{`"name":"production-pg"`, `"name":"prod-vpc"`}},
		{"list by kind", "GET", "/api/v1/resources?kind=Network", "", "", 200, []string{`"name":"prod-vpc"`}},
		{"list by source", "GET", "/api/v1/resources?source=api", "", "", 200, []string{`"name":"production-pg"`}},
		{"list by status", "GET", "/api/v1/resources?status=pending", "", "", 200, []string{`"status":"pending"`}},
		{"list bad status", "GET", "/api/v1/resources?status=happy", "", "", 400, []string{"status"}},
		{"list bad limit", "GET", "/api/v1/resources?limit=-1", "", "", 400, []string{"limit"}},
		{"list limit too high", "GET", "/api/v1/resources?limit=5000", "", "", 400, []string{"at most 1000"}},
		{"list bad label", "GET", "/api/v1/resources?label=team", "", "", 400, []string{"key=value"}},
		{"get resource", "GET", fmt.Sprintf("/api/v1/resources/%d", res.ID), "", "", 200, []string{`"resource_type_name":"DatabaseCluster"`, `"observed_generation":0`}},
		{"get missing", "GET", "/api/v1/resources/999999", "", "", 404, []string{`"details":[]`}},
		{"get bad id", "GET", "/api/v1/resources/x1", "", "", 400, nil},
		{"by name", "GET", "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", "", "", 200, []string{`"name":"production-pg"`}},
		{"by name wrong version", "GET", "/api/v1/resources/by-name/DatabaseCluster/v2/production-pg", "", "", 404, nil},
		{"by name missing", "GET", "/api/v1/resources/by-name/DatabaseCluster/v1/nope", "", "", 404, nil},
		{"history", "GET", fmt.Sprintf("/api/v1/resources/%d/history", res.ID), "", "", 200, []string{"[]"}},
		{"history missing", "GET", "/api/v1/resources/999999/history", "", "", 404, nil},
		{"outputs", "GET", fmt.Sprintf("/api/v1/resources/%d/outputs", res.ID), "", "", 200, []string{`"outputs":null`}},
		{"outputs missing", "GET", "/api/v1/resources/999999/outputs", "", "", 404, nil},
		{"create schema violation", "POST", "/api/v1/resources", writeToken,
			`{"name": "small-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1", "spec": {"engine": "oracle", "storage_gb": 5}}`,
			400, []string{`"field":"spec.storage_gb"`, `"pointer":"/spec/storage_gb"`, `"field":"spec.engine"`}},
		{"create missing name", "POST", "/api/v1/resources", writeToken, `{"resource_type_name": "DatabaseCluster", "spec": {}}`, 400, []string{`"field":"name"`}},
		{"create bad name", "POST", "/api/v1/resources", writeToken,
			`{"name": "Bad_Name", "resource_type_name": "DatabaseCluster", "spec": {"engine": "mysql", "storage_gb": 10}}`, 400, []string{`"field":"name"`}},
		{"create unknown type", "POST", "/api/v1/resources", writeToken, `{"name": "x", "resource_type_name": "Nope", "spec": {}}`, 400, []string{`"field":"resource_type_name"`}},
		{"create unknown version", "POST", "/api/v1/resources", writeToken,
			`{"name": "x", "resource_type_name": "DatabaseCluster", "resource_type_version": "v7", "spec": {}}`, 400, []string{`"field":"resource_type_version"`}},
		{"create taken by git", "POST", "/api/v1/resources", writeToken,
			`{"name": "prod-vpc", "resource_type_name": "Network", "spec": {"cidr": "10.1.0.0/16"}}`, 409,
			[]string{`source \"infra\"`, "net/network.yaml", "main@sha1:abab"}},
		{"create broken json", "POST", "/api/v1/resources", writeToken, `{"name": "x",`, 400, []string{"JSON object"}},
		{"create not an object", "POST", "/api/v1/resources", writeToken, `[1, 2]`, 400, []string{"JSON object"}},
		{"create wrong field type", "POST", "/api/v1/resources", writeToken, `{"name": 5, "resource_type_name": "DatabaseCluster"}`, 400, []string{`"field":"name"`}},
		{"create bad depends_on", "POST", "/api/v1/resources", writeToken,
			`{"name": "dep", "resource_type_name": "DatabaseCluster", "spec": {"engine": "mysql", "storage_gb": 10}, "depends_on": [{"kind": "Network"}]}`,
			400, []string{`depends_on`}},
		{"update git owned", "PUT", fmt.Sprintf("/api/v1/resources/%d", git), writeToken, `{"spec": {"cidr": "10.9.0.0/16"}}`, 409,
			[]string{`source \"infra\"`, "net/network.yaml", "main@sha1:abab"}},
		{"update missing", "PUT", "/api/v1/resources/999999", writeToken, `{"spec": {}}`, 404, nil},
		{"update immutable name", "PUT", fmt.Sprintf("/api/v1/resources/%d", res.ID), writeToken, `{"name": "other"}`, 400, []string{"cannot change"}},
		{"update schema violation", "PUT", fmt.Sprintf("/api/v1/resources/%d", res.ID), writeToken, `{"spec": {"engine": "postgres"}}`, 400,
			[]string{`"field":"spec"`, "storage_gb"}},
		{"delete git owned", "DELETE", fmt.Sprintf("/api/v1/resources/%d", git), writeToken, "", 409, []string{`source \"infra\"`}},
		{"delete missing", "DELETE", "/api/v1/resources/999999", writeToken, "", 404, nil},
		{"reconcile missing", "POST", "/api/v1/resources/999999/reconcile", writeToken, "", 404, nil},
		{"reconcile", "POST", fmt.Sprintf("/api/v1/resources/%d/reconcile", res.ID), writeToken, "", 202,
			[]string{fmt.Sprintf(`"message":"Reconciliation triggered","resource_id":%d,"id":%d,"name":"production-pg"`, res.ID, res.ID)}},

		{"list sources", "GET", "/api/v1/sources", "", "", 200, []string{`"name":"infra"`, `"name":"api"`, `"kind":"git"`}},
		{"source", "GET", "/api/v1/sources/infra", "", "", 200, []string{`"last_applied_revision":"main@sha1:abab`}},
		{"source missing", "GET", "/api/v1/sources/nope", "", "", 404, nil},
		{"source history", "GET", "/api/v1/sources/infra/history", "", "", 200, []string{`"success":true`}},
		{"source history missing", "GET", "/api/v1/sources/nope/history", "", "", 404, nil},
		{"sync", "POST", "/api/v1/sources/infra/sync", writeToken, "", 202, []string{`"sync":"requested"`}},
		{"sync unknown", "POST", "/api/v1/sources/nope/sync", writeToken, "", 404, nil},
		{"sync api", "POST", "/api/v1/sources/api/sync", writeToken, "", 400, []string{"nothing to fetch"}},
		{"approve not stalled", "POST", "/api/v1/sources/infra/approve", writeToken, "", 400, []string{"not stalled"}},
		{"approve a revision of a source not stalled", "POST", "/api/v1/sources/infra/approve?revision=main@sha1:1234", writeToken, "", 409, []string{"not stalled"}},
		{"approve missing", "POST", "/api/v1/sources/nope/approve?revision=x", writeToken, "", 404, nil},
		{"approve api", "POST", "/api/v1/sources/api/approve?revision=zzz", writeToken, "", 400, []string{"nothing to fetch"}},
		{"type version keeps the group", "POST", "/api/v1/resource-types", writeToken,
			`{"name": "Queue", "version": "v1", "group": "mq.example.com", "schema": {"type": "object"}}`, 201, []string{`"group":"mq.example.com"`}},
		{"type version inherits the group", "POST", "/api/v1/resource-types", writeToken,
			`{"name": "Queue", "version": "v1beta1", "schema": {"type": "object"}}`, 201, []string{`"group":"mq.example.com"`}},
		{"type version with another group", "POST", "/api/v1/resource-types", writeToken,
			`{"name": "Queue", "version": "v2", "group": "other.example.com", "schema": {"type": "object"}}`, 400, []string{`"field":"group"`, "share one group"}},

		{"unknown api path", "GET", "/api/v2/things", "", "", 404, []string{`"error":"no such endpoint"`}},
		{"wrong method", "PATCH", "/api/v1/resources", writeToken, "{}", 405, []string{"method PATCH is not allowed", "GET"}},
		{"wrong method on an item", "POST", fmt.Sprintf("/api/v1/resources/%d", res.ID), writeToken, "{}", 405, []string{"not allowed"}},
		{"conflicting labels", "GET", "/api/v1/resources?label=team=a&label=team=b", "", "", 400, []string{"cannot both hold"}},
		{"healthz", "GET", "/healthz", "", "", 200, []string{`"ok"`}},
		{"readyz", "GET", "/readyz", "", "", 200, []string{`"healthy"`}},
		{"health", "GET", "/health", "", "", 200, []string{`"healthy"`}},
		{"filter by action instance", "GET", "/api/v1/resources?action_plugin=no-such-instance", "", "", 200, []string{`[]`}},
		{"unknown query parameter", "GET", "/api/v1/resources?action=noop", "", "", 400,
			[]string{`unknown query parameter \"action\" (known: kind, status, source, label, action_plugin`}},
		{"query parameter of a route that takes none", "GET", "/api/v1/sources?limit=5", "", "", 400, []string{`takes none`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, hdr := e.call(tt.method, tt.path, tt.token, tt.body)
			if status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, status, body, tt.status)
			}
			for _, want := range tt.contains {
				if !strings.Contains(string(body), want) {
					t.Errorf("body %s does not contain %s", body, want)
				}
			}
			if status >= 400 {
				var eb api.ErrorBody
				if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" || eb.Details == nil || eb.Detail != eb.Error {
					t.Errorf("error body %s is not {error, details, detail}", body)
				}
				if ct := hdr.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			}
		})
	}
	if got := e.runner.calls(); strings.Join(got, ",") != "infra" {
		t.Errorf("triggers = %v, want the sync of infra (its approval was refused)", got)
	}
	// The refused approval left no trace.
	if src, err := e.store.GetSource(t.Context(), "api"); err != nil || src.ApprovedRevision != "" {
		t.Errorf("api source after a refused approval: %+v %v", src, err)
	}
	// Nothing the refused writes sent reached the store.
	rows, err := e.store.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Errorf("%d resources after refused writes, want 2", len(rows))
	}
	vpc, err := e.store.GetResource(t.Context(), git)
	if err != nil || string(vpc.Spec) != `{"cidr":"10.0.0.0/16"}` || vpc.Generation != 1 {
		t.Errorf("git-owned resource changed: %+v %v", vpc, err)
	}
}

// TestConcurrentUpdates sends updates of different fields of one resource at
// once: each is applied over the others' results, none is lost.
func TestConcurrentUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	var res api.Resource
	e.must("POST", "/api/v1/resources", writeToken, dbResource, 201, &res)
	path := fmt.Sprintf("/api/v1/resources/%d", res.ID)
	bodies := []string{
		`{"spec": {"engine": "mysql", "storage_gb": 500}}`,
		`{"labels": {"team": "data"}}`,
		`{"annotations": {"owner": "ada"}}`,
		`{"action_plugin": "provision-db-v2"}`,
		`{"depends_on": [{"kind": "Network", "name": "prod-vpc"}]}`,
	}
	done := make(chan struct{})
	for _, b := range bodies {
		go func() {
			defer func() { done <- struct{}{} }()
			if st, body, _ := e.call("PUT", path, writeToken, b); st != 200 {
				t.Errorf("PUT %s = %d %s", b, st, body)
			}
		}()
	}
	for range bodies {
		<-done
	}
	var got api.Resource
	e.must("GET", path, "", "", 200, &got)
	if !strings.Contains(string(got.Spec), `"engine":"mysql"`) || got.Labels["team"] != "data" || got.Annotations["owner"] != "ada" ||
		got.ActionPlugin != "provision-db-v2" || len(got.DependsOn) != 1 {
		t.Errorf("after concurrent updates: spec %s labels %v annotations %v action %s dependsOn %v",
			got.Spec, got.Labels, got.Annotations, got.ActionPlugin, got.DependsOn)
	}
}
