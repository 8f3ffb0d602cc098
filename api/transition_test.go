package api_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestTransitionRulesOnAPIWrites: a resource of a CRD that a Git source
// declares, written through the API, keeps the CRD's CEL rules: a rule is a
// 400 naming the field, and an update that changes an immutable field is
// refused against the stored spec.
func TestTransitionRulesOnAPIWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, f := range []string{"gateway-api-gatewayclasses.yaml", "crossplane-usages.yaml"} {
		data, err := os.ReadFile("../manifest/testdata/crds/" + f)
		if err != nil {
			t.Fatal(err)
		}
		snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{file(f, string(data))}}
		if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "crds-" + f[:5], Kind: store.SourceGit, URL: "https://git.example.com/crds.git"}, snap, false); err != nil {
			t.Fatal(err)
		}
	}
	var gc api.Resource
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "internet", "resource_type_name": "GatewayClass", "resource_type_version": "v1",
	  "spec": {"controllerName": "example.net/gateway-controller"}}`, http.StatusCreated, &gc)
	for _, c := range []struct {
		name, method, path, body, field, message string
	}{
		{"immutable field", "PUT", "/api/v1/resources/" + itoa(gc.ID), `{"spec": {"controllerName": "example.net/other"}}`,
			"spec.controllerName", "Value is immutable"},
		{"rule on create", "POST", "/api/v1/resources", `{"name": "keep-cm", "resource_type_name": "Usage",
		  "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "cm"}}}}`,
			"spec", `or \"spec.reason\" must be specified.`},
	} {
		status, body, _ := e.call(c.method, c.path, writeToken, c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.message) || !strings.Contains(string(body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.name, status, body)
		}
	}
	e.must("PUT", "/api/v1/resources/"+itoa(gc.ID), writeToken, `{"spec": {"controllerName": "example.net/gateway-controller", "description": "the way in"}}`, http.StatusOK, &gc)
	if gc.Generation != 2 {
		t.Errorf("a change the rules allow: generation %d", gc.Generation)
	}
}
