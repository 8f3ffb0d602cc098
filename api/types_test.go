package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
)

// TestTypeUpdateAndDelete changes and removes type versions the API
// declared; those a Git source declares stay read-only, naming the file,
// and a version resources use cannot go.
func TestTypeUpdateAndDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var db, widget api.ResourceType
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, &db)
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, &widget)
	e.must("POST", "/api/v1/resources", writeToken, dbResource, http.StatusCreated, nil)
	var gitType []api.ResourceType
	e.must("GET", "/api/v1/resource-types?name=Network", "", "", http.StatusOK, &gitType)
	if len(gitType) != 1 {
		t.Fatalf("Network types: %+v", gitType)
	}

	var updated api.ResourceType
	e.must("PUT", "/api/v1/resource-types/"+itoa(widget.ID), writeToken,
		`{"description": "A widget", "schema": {"type": "object", "properties": {"size": {"type": "integer", "maximum": 9}}}}`,
		http.StatusOK, &updated)
	if updated.ID != widget.ID || updated.Description != "A widget" || !strings.Contains(string(updated.Schema), `"maximum":9`) {
		t.Errorf("after PUT: %+v", updated)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		contains                 string
	}{
		{"rename", "PUT", "/api/v1/resource-types/" + itoa(widget.ID), `{"name": "Gizmo"}`, 400, `name: cannot change (\"Widget\")`},
		{"unknown field", "PUT", "/api/v1/resource-types/" + itoa(widget.ID), `{"colour": "red"}`, 400, `colour`},
		{"schema that is not one", "PUT", "/api/v1/resource-types/" + itoa(widget.ID), `{"schema": {"type": 5}}`, 400, `schema`},
		{"update a Git type", "PUT", "/api/v1/resource-types/" + itoa(gitType[0].ID), `{"description": "x"}`, 409,
			`declared in types/network.yaml`},
		{"update missing", "PUT", "/api/v1/resource-types/999999", `{"description": "x"}`, 404, ``},
		{"delete in use", "DELETE", "/api/v1/resource-types/" + itoa(db.ID), ``, 409, `DatabaseCluster/v1 is in use`},
		{"delete a Git type", "DELETE", "/api/v1/resource-types/" + itoa(gitType[0].ID), ``, 409, `declared in types/network.yaml`},
		{"delete", "DELETE", "/api/v1/resource-types/" + itoa(widget.ID), ``, 204, ``},
		{"gone", "GET", "/api/v1/resource-types/" + itoa(widget.ID), ``, 404, ``},
		{"delete again", "DELETE", "/api/v1/resource-types/" + itoa(widget.ID), ``, 404, ``},
	}
	for _, tt := range tests {
		status, body, _ := e.call(tt.method, tt.path, writeToken, tt.body)
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: %s %s = %d %s; want %d with %s", tt.name, tt.method, tt.path, status, body, tt.status, tt.contains)
		}
	}
	// The deletion is in the API's sync history.
	if status, body, _ := e.call("GET", "/api/v1/sources/api/history?limit=1", "", ""); status != http.StatusOK ||
		!strings.Contains(string(body), "api@delete:resourcetype/Widget/v1") {
		t.Errorf("history after the deletion: %d %s", status, body)
	}
}

// TestDeprecatedTypes marks a type version deprecated: it still validates,
// and each write of a resource that uses it carries a warning, in the
// answer and in the sync history.
func TestDeprecatedTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var typ api.ResourceType
	e.must("POST", "/api/v1/resource-types", writeToken, strings.Replace(widgetType, `"version": "v1",`, `"version": "v1", "status": "deprecated",`, 1),
		http.StatusCreated, &typ)
	if typ.Status != api.TypeDeprecated {
		t.Fatalf("created %+v", typ)
	}
	status, body, hdr := e.call("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`)
	if status != http.StatusCreated || !strings.Contains(hdr.Get("Warning"), `299 - "resource type Widget version v1 is deprecated`) {
		t.Errorf("a write using a deprecated version = %d %s, Warning %q", status, body, hdr.Get("Warning"))
	}
	var w1 api.Resource
	if err := jsonUnmarshal(body, &w1); err != nil {
		t.Fatal(err)
	}
	if _, body, _ := e.call("GET", "/api/v1/sources/api/history?limit=1", "", ""); !strings.Contains(string(body), "warning: resource type Widget version v1 is deprecated") {
		t.Errorf("the sync history does not warn: %s", body)
	}
	if status, body, _ := e.call("POST", "/api/v1/resource-types", writeToken,
		strings.Replace(widgetType, `"version": "v1",`, `"version": "v1", "status": "retired",`, 1)); status != http.StatusBadRequest ||
		!strings.Contains(string(body), `status: \"retired\" is not active or deprecated`) {
		t.Errorf("an unknown status = %d %s", status, body)
	}
	e.must("PUT", "/api/v1/resource-types/"+itoa(typ.ID), writeToken, `{"status": "active"}`, http.StatusOK, &typ)
	status, _, hdr = e.call("PUT", "/api/v1/resources/"+itoa(w1.ID), writeToken, `{"spec": {"size": 2}}`)
	if typ.Status != api.TypeActive || status != http.StatusOK || hdr.Get("Warning") != "" {
		t.Errorf("after the type is active again: %+v, %d, Warning %q", typ, status, hdr.Get("Warning"))
	}
}
