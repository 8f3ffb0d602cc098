package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDottedNames: resources written through the API take DNS subdomain
// names, served by name in URLs; a type the API declares may ask for
// labels with the annotation a stored type keeps; names that could move a
// path are refused in the API server's words, and a URL cannot reach a
// resource through dot segments.
func TestDottedNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken,
		`{"name": "Host", "version": "v1", "metadata": {"no8s.io/name-format": "label"}, "schema": {"type": "object"}}`, http.StatusCreated, nil)
	create := func(kind, name string) (int, string) {
		body, _ := json.Marshal(map[string]any{"name": name, "resource_type_name": kind,
			"spec": map[string]any{"engine": "postgres", "storage_gb": 10}})
		if kind == "Host" {
			body, _ = json.Marshal(map[string]any{"name": name, "resource_type_name": kind, "spec": map[string]any{}})
		}
		st, data, _ := e.call("POST", "/api/v1/resources", writeToken, string(body))
		return st, string(data)
	}
	tests := []struct {
		kind, name string
		status     int
		contains   string
	}{
		{"DatabaseCluster", "xnopresources.nop.example.org", 201, `"name":"xnopresources.nop.example.org"`},
		{"DatabaseCluster", "db.eu-west-1.example.org", 201, `"name":"db.eu-west-1.example.org"`},
		{"Host", "web-1", 201, `"name":"web-1"`},
		{"Host", "web.example.org", 400, `Invalid value: \"web.example.org\": a lowercase RFC 1123 label must consist of`},
		{"DatabaseCluster", "..", 400, `Invalid value: \"..\": a lowercase RFC 1123 subdomain must consist of`},
		{"DatabaseCluster", "a..b", 400, `Invalid value: \"a..b\": a lowercase RFC 1123 subdomain`},
		{"DatabaseCluster", "../etc", 400, `Invalid value: \"../etc\": a lowercase RFC 1123 subdomain`},
		{"DatabaseCluster", ".hidden", 400, `Invalid value: \".hidden\": a lowercase RFC 1123 subdomain`},
		{"DatabaseCluster", strings.Repeat("a", 254), 400, `must be no more than 253 characters`},
	}
	for _, tt := range tests {
		st, body := create(tt.kind, tt.name)
		if st != tt.status || !strings.Contains(body, tt.contains) {
			t.Errorf("create %s %q = %d %s, want %d with %s", tt.kind, tt.name, st, body, tt.status, tt.contains)
		}
		if st == 400 && !strings.Contains(body, `"field":"name"`) {
			t.Errorf("create %s %q: the problem does not name the field: %s", tt.kind, tt.name, body)
		}
	}
	for _, tt := range []struct {
		path     string
		status   int
		contains string
	}{
		{"/api/v1/resources/by-name/DatabaseCluster/v1/xnopresources.nop.example.org", 200, `"name":"xnopresources.nop.example.org"`},
		{"/api/v1/resources/by-name/DatabaseCluster/v1/db.eu-west-1.example.org", 200, `"name":"db.eu-west-1.example.org"`},
		{"/api/v1/resources/by-name/Host/v1/web-1", 200, `"name":"web-1"`},
		{"/api/v1/resources/by-name/DatabaseCluster/v1/xnopresources.nop", 404, ""},
		{"/api/v1/resources/by-name/DatabaseCluster/v1/%2E%2E", 404, ""},
		{"/api/v1/resources/by-name/DatabaseCluster/v1/a%2F..%2Fb", 404, ""},
	} {
		st, data, _ := e.call("GET", tt.path, "", "")
		if st != tt.status || !strings.Contains(string(data), tt.contains) {
			t.Errorf("GET %s = %d %s, want %d with %s", tt.path, st, data, tt.status, tt.contains)
		}
	}
	// A dot segment is cleaned away before routing: it names no resource.
	st, data, _ := e.call("GET", "/api/v1/resources/by-name/DatabaseCluster/v1/xnopresources.nop.example.org/../xnopresources.nop.example.org", "", "")
	if st == 200 && !strings.Contains(string(data), `"name":"xnopresources.nop.example.org"`) {
		t.Errorf("a dot segment reached %s", data)
	}
	var page []struct {
		Name string `json:"name"`
	}
	e.must("GET", "/api/v1/resources?kind=DatabaseCluster&source=api", "", "", 200, &page)
	var names []string
	for _, it := range page {
		names = append(names, it.Name)
	}
	slices.Sort(names)
	if got := fmt.Sprint(names); got != "[db.eu-west-1.example.org xnopresources.nop.example.org]" {
		t.Errorf("listed %s", got)
	}
}

// TestLabelFormatOfEveryVersion: the API declares a type one version at a
// time, each with its own metadata. A version that asks for labels is not
// undone by another version that says nothing of names, whichever sorts
// first ("v10" before "v2"): a dotted name of the type is refused at every
// version, as the stored type says.
func TestLabelFormatOfEveryVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken,
		`{"name": "Host", "version": "v2", "metadata": {"no8s.io/name-format": "label"}, "schema": {"type": "object"}}`, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken,
		`{"name": "Host", "version": "v10", "metadata": {"team": "web"}, "schema": {"type": "object"}}`, http.StatusCreated, nil)
	for _, version := range []string{"v2", "v10"} {
		body := `{"name": "web.example.org", "resource_type_name": "Host", "resource_type_version": "` + version + `", "spec": {}}`
		st, data, _ := e.call("POST", "/api/v1/resources", writeToken, body)
		if st != http.StatusBadRequest || !strings.Contains(string(data), `Invalid value: \"web.example.org\": a lowercase RFC 1123 label must consist of`) {
			t.Errorf("a dotted name of Host %s = %d %s, want 400 naming the label rule", version, st, data)
		}
	}
	body := `{"name": "web-1", "resource_type_name": "Host", "resource_type_version": "v2", "spec": {}}`
	e.must("POST", "/api/v1/resources", writeToken, body, http.StatusCreated, nil)
}
