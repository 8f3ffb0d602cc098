package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/api"
)

// TestGrantActionsTypeVersions: the versions of a type the API declared may
// have different default actions (a PUT changes one version's). A token
// limited to instance a writes a resource of the version whose default is
// a, naming no action: the resource runs a, not the default of the type's
// first version, b.
func TestGrantActionsTypeVersions(t *testing.T) {
	t.Parallel()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"a": {Plugin: "noop"},
		"b": {Plugin: "exec", Config: json.RawMessage(`{"command": ["true"]}`)},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const deployer = "deployer-token-8e41"
	e := newEnv(t, func(o *api.Options) {
		o.Actions = instances
		o.Tokens = []api.Token{{Name: "deployer", Value: deployer, Grants: []api.Grant{
			{Verbs: []string{api.VerbCreate, api.VerbUpdate}, Kinds: []string{"Widget"}, Actions: []string{"a"}},
		}}}
	})
	withAction := func(version, inst string) string {
		return strings.Replace(strings.Replace(widgetType, `"v1"`, `"`+version+`"`, 1), `"schema"`, `"action": "`+inst+`", "schema"`, 1)
	}
	e.must("POST", "/api/v1/resource-types", writeToken, withAction("v1", "b"), http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, withAction("v2", "a"), http.StatusCreated, nil)

	status, body, _ := e.call("POST", "/api/v1/resources", deployer,
		`{"name": "w1", "resource_type_name": "Widget", "resource_type_version": "v2", "spec": {"size": 1}}`)
	if status == http.StatusForbidden {
		return
	}
	var got api.Resource
	e.must("GET", "/api/v1/resources/by-name/Widget/v2/w1", writeToken, "", http.StatusOK, &got)
	if got.ActionPlugin != "a" {
		t.Errorf("a token limited to a wrote a resource that runs %q: %d %s", got.ActionPlugin, status, body)
	}
	// Refused: version v1's default is b.
	status, body, _ = e.call("POST", "/api/v1/resources", deployer,
		`{"name": "w2", "resource_type_name": "Widget", "resource_type_version": "v1", "spec": {"size": 1}}`)
	if status != http.StatusForbidden || !strings.Contains(string(body), "actions [b]") {
		t.Errorf("a resource of v1, whose default is b: %d %s", status, body)
	}
}
