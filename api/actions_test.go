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

// TestActionInstances lists the agent's action instances without their
// settings, refuses a write naming no instance at once, and takes the
// name of a plugin with one instance for that instance.
func TestActionInstances(t *testing.T) {
	t.Parallel()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"provision-db": {Plugin: "exec", Config: json.RawMessage(`{"command": ["true"], "env": {"MODE": "secret-mode-1"}}`)},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Actions = instances })
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, nil)

	var list []api.ActionInstance
	status, body, _ := e.call("GET", "/api/v1/plugins/actions", "", "")
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 2 ||
		list[0] != (api.ActionInstance{Name: "noop", Plugin: "noop"}) || list[1] != (api.ActionInstance{Name: "provision-db", Plugin: "exec"}) {
		t.Errorf("GET /api/v1/plugins/actions = %d %s", status, body)
	}
	if strings.Contains(string(body), "secret-mode-1") || strings.Contains(string(body), "command") {
		t.Errorf("the instances' settings are shown: %s", body)
	}

	unknown := strings.Replace(dbResource, `"provision-db"`, `"github_actions"`, 1)
	status, body, _ = e.call("POST", "/api/v1/resources", writeToken, unknown)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"action_plugin"`) ||
		!strings.Contains(string(body), `unknown action instance \"github_actions\" (instances: noop, provision-db)`) {
		t.Errorf("a write naming no instance = %d %s", status, body)
	}
	if status, body, _ := e.call("GET", "/api/v1/resources?source=api", "", ""); status != http.StatusOK || string(body) != "[]\n" {
		t.Errorf("the refused write left %s", body)
	}
	// The plugin exec has one instance: naming the plugin names it.
	byPlugin := strings.Replace(dbResource, `"provision-db"`, `"exec"`, 1)
	var created api.Resource
	e.must("POST", "/api/v1/resources", writeToken, byPlugin, http.StatusCreated, &created)
	if created.ActionPlugin != "exec" {
		t.Errorf("created with action_plugin exec: stored %q, want it as given", created.ActionPlugin)
	}
	if got, ok := instances.Get(created.ActionPlugin); !ok || got.Name != "provision-db" {
		t.Errorf("the instance that exec stands for: %+v %v", got, ok)
	}
	// The filter action_plugin finds a resource by its instance's name or
	// its plugin's, however it was written.
	byName := strings.Replace(dbResource, `"production-pg"`, `"staging-pg"`, 1)
	e.must("POST", "/api/v1/resources", writeToken, byName, http.StatusCreated, nil)
	for filter, want := range map[string]string{
		"provision-db": "production-pg staging-pg",
		"exec":         "production-pg staging-pg",
		"noop":         "",
		"http":         "",
	} {
		var got []api.Resource
		e.must("GET", "/api/v1/resources?action_plugin="+filter, "", "", http.StatusOK, &got)
		var names []string
		for _, r := range got {
			names = append(names, r.Name)
		}
		if strings.Join(names, " ") != want {
			t.Errorf("?action_plugin=%s found %v, want [%s]", filter, names, want)
		}
	}
}
