package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/api"
)

// TestAdmissionOnAPIWrites: API writes pass the same admission hooks as
// syncs: a denial is a 403 with the hook's message and stores nothing, a
// mutating hook's patch is stored, and a hook that cannot answer under
// failurePolicy Fail is a 502.
func TestAdmissionOnAPIWrites(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var review struct {
			Request struct {
				UID       string          `json:"uid"`
				Name      string          `json:"name"`
				Operation string          `json:"operation"`
				Object    json.RawMessage `json:"object"`
			} `json:"request"`
		}
		json.Unmarshal(body, &review)
		resp := map[string]any{"uid": review.Request.UID, "allowed": true}
		switch {
		case r.URL.Path == "/validate" && review.Request.Operation == "delete":
			resp = map[string]any{"uid": review.Request.UID, "allowed": false, "status": map[string]any{"message": "databases are never deleted"}}
		case review.Request.Name == "broken":
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		case r.URL.Path == "/validate" && strings.Contains(string(review.Request.Object), `"engine":"mysql"`):
			resp = map[string]any{"uid": review.Request.UID, "allowed": false, "status": map[string]any{"message": "mysql is retired"}}
		case r.URL.Path == "/mutate":
			resp["patch"] = json.RawMessage(`[{"op": "replace", "path": "/spec/replicas", "value": 2}]`)
		}
		json.NewEncoder(w).Encode(map[string]any{"response": resp})
	}))
	t.Cleanup(hook.Close)
	e := newEnv(t, nil)
	chain, err := admission.New([]admission.Hook{
		{Name: "replicas", URL: hook.URL + "/mutate", Type: admission.Mutating, Kinds: []string{"DatabaseCluster"},
			Operations: []admission.Operation{admission.Create, admission.Update}},
		{Name: "engines", URL: hook.URL + "/validate", Type: admission.Validating},
	}, func(string) (string, bool) { return "", false }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.syncer.UseAdmission(chain)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, nil)

	var created api.Resource
	e.must("POST", "/api/v1/resources", writeToken, dbResource, http.StatusCreated, &created)
	if !strings.Contains(string(created.Spec), `"replicas":2`) {
		t.Errorf("the mutating hook's patch was not stored: %s", created.Spec)
	}
	status, body, _ := e.call("PUT", "/api/v1/resources/"+itoa(created.ID), writeToken, `{"spec": {"engine": "mysql", "storage_gb": 500}}`)
	if status != http.StatusForbidden || !strings.Contains(string(body), "mysql is retired") || !strings.Contains(string(body), "engines") {
		t.Errorf("a denied update = %d %s", status, body)
	}
	var after api.Resource
	e.must("GET", "/api/v1/resources/"+itoa(created.ID), "", "", http.StatusOK, &after)
	if after.Generation != created.Generation || !strings.Contains(string(after.Spec), "postgres") {
		t.Errorf("a denied update changed the resource: %+v", after)
	}
	status, body, _ = e.call("DELETE", "/api/v1/resources/"+itoa(created.ID), writeToken, "")
	e.must("GET", "/api/v1/resources/"+itoa(created.ID), "", "", http.StatusOK, &after)
	if status != http.StatusForbidden || !strings.Contains(string(body), "databases are never deleted") || after.DeletionRequestedAt != nil {
		t.Errorf("a denied deletion = %d %s; deletion requested at %v", status, body, after.DeletionRequestedAt)
	}
	status, body, _ = e.call("POST", "/api/v1/resources", writeToken, strings.Replace(dbResource, "production-pg", "broken", 1))
	if status != http.StatusBadGateway || !strings.Contains(string(body), "replicas") {
		t.Errorf("a failing hook = %d %s", status, body)
	}
}
