package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
)

// TestWriteUnknownFields: resource writes through the API follow the rule
// of Git sources for fields the schema does not declare: refused by default
// (400 naming the field and the field it may be a misspelling of), kept or
// dropped with a Warning header when the agent says so.
func TestWriteUnknownFields(t *testing.T) {
	t.Parallel()
	const create = `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1, "sise": 2}}`
	tests := []struct {
		mode manifest.UnknownFields
		// status and spec of the creation; warning is its Warning header.
		status        int
		spec, warning string
	}{
		{"", http.StatusBadRequest, "", ""},
		{manifest.UnknownFieldsStrict, http.StatusBadRequest, "", ""},
		{manifest.UnknownFieldsWarn, http.StatusCreated, `{"sise":2,"size":1}`, `299 - "unknown field \"spec.sise\" kept, did you mean \"size\"?"`},
		{manifest.UnknownFieldsPrune, http.StatusCreated, `{"size":1}`, `299 - "unknown field \"spec.sise\" dropped, did you mean \"size\"?"`},
	}
	for _, tt := range tests {
		t.Run("mode "+string(tt.mode), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			if tt.mode != "" {
				e.syncer.UseAPIUnknownFields(tt.mode)
			}
			e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
			status, body, hdr := e.call("POST", "/api/v1/resources", writeToken, create)
			if status != tt.status || hdr.Get("Warning") != tt.warning {
				t.Fatalf("create = %d %s, Warning %q; want %d, %q", status, body, hdr.Get("Warning"), tt.status, tt.warning)
			}
			if status == http.StatusBadRequest {
				for _, want := range []string{`unknown field \"spec.sise\", did you mean \"size\"?`, `"field":"spec.sise"`, `"pointer":"/spec/sise"`, `unknownFields: strict`} {
					if !strings.Contains(string(body), want) {
						t.Errorf("refusal %s lacks %s", body, want)
					}
				}
				// An update is held to the same rule.
				var w api.Resource
				e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated, &w)
				if status, body, _ := e.call("PUT", "/api/v1/resources/"+itoa(w.ID), writeToken, `{"spec": {"size": 2, "sise": 3}}`); status != http.StatusBadRequest ||
					!strings.Contains(string(body), `unknown field \"spec.sise\", did you mean \"size\"?`) {
					t.Errorf("update = %d %s", status, body)
				}
				return
			}
			var w api.Resource
			if err := jsonUnmarshal(body, &w); err != nil {
				t.Fatal(err)
			}
			if string(w.Spec) != tt.spec {
				t.Errorf("stored spec %s, want %s", w.Spec, tt.spec)
			}
			if _, body, _ := e.call("GET", "/api/v1/sources/api/history?limit=1", "", ""); !strings.Contains(string(body), `warning: unknown field \"spec.sise\"`) {
				t.Errorf("the sync history does not warn: %s", body)
			}
		})
	}
}
