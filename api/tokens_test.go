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

const widgetType = `{"name": "Widget", "version": "v1", "schema": {"type": "object", "properties": {"size": {"type": "integer"}}}}`

// TestScopedTokens gives tokens verbs on some kinds and sources: what they
// may not do is refused with 403 naming the missing permission, reads need
// a token once scoped tokens exist, and writes are recorded with the
// token's name.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	const ci, viewer, deployer = "ci-token-51e0a8", "viewer-token-b27c", "deployer-token-9f11"
	e := newEnv(t, func(o *api.Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("no8s_up 1\n")) })
		o.Tokens = []api.Token{
			{Name: "ci", Value: ci, Grants: []api.Grant{{Verbs: []string{api.VerbCreate, api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}},
			{Name: "viewer", Value: viewer, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}},
			{Name: "deployer", Value: deployer, Grants: []api.Grant{{Verbs: []string{api.VerbSync}, Sources: []string{"infra"}}}},
		}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	widget := `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`
	var created api.Resource
	e.must("POST", "/api/v1/resources", ci, widget, http.StatusCreated, &created)

	tests := []struct {
		name, method, path, token, body string
		status                          int
		contains                        string
	}{
		{"another kind", "POST", "/api/v1/resources", ci, dbResource, 403,
			`token \"ci\" may not create DatabaseCluster in source api (missing permission create on kinds [DatabaseCluster], sources [api])`},
		{"a verb not granted", "DELETE", "/api/v1/resources/" + itoa(created.ID), ci, "", 403,
			`token \"ci\" may not delete (missing permission delete; it may [create,get,list on Widget])`},
		{"list of every kind", "GET", "/api/v1/resources", ci, "", 403, `may not list resources of every kind`},
		{"list of its kind", "GET", "/api/v1/resources?kind=Widget", ci, "", 200, `"name":"w1"`},
		{"get of another kind", "GET", "/api/v1/resources/" + itoa(e.gitRes.ID), ci, "", 403, `may not get Network in source infra`},
		{"get of its kind", "GET", "/api/v1/resources/" + itoa(created.ID), ci, "", 200, `"name":"w1"`},
		{"a source it may not read", "GET", "/api/v1/sources/infra", ci, "", 403, `may not get source infra`},
		{"reads need a token now", "GET", "/api/v1/resources", "", "", 401, `a token is required`},
		{"a wrong token", "GET", "/api/v1/resources", "not-a-token", "", 401, `not valid`},
		{"a viewer reads", "GET", "/api/v1/resources", viewer, "", 200, `"name":"prod-vpc"`},
		{"a viewer writes", "POST", "/api/v1/resources", viewer, widget, 403, `token \"viewer\" may not create`},
		{"a deployer syncs its source", "POST", "/api/v1/sources/infra/sync", deployer, "", 202, `"sync":"requested"`},
		{"a deployer syncs another", "POST", "/api/v1/sources/api/sync", deployer, "", 403, `may not sync source api`},
		{"the metrics show everything", "GET", "/metrics", ci, "", 403, `token \"ci\" may not read everything, which /metrics shows`},
		{"a viewer reads the metrics", "GET", "/metrics", viewer, "", 200, `no8s_up 1`},
		{"the write token may all", "DELETE", "/api/v1/resources/" + itoa(created.ID), writeToken, "", 202, `"resource_id"`},
	}
	for _, tt := range tests {
		status, body, _ := e.call(tt.method, tt.path, tt.token, tt.body)
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: %s %s = %d %s; want %d with %s", tt.name, tt.method, tt.path, status, body, tt.status, tt.contains)
		}
	}
	// The audit trail: the sync history of the API names each write's token,
	// and the log each request's.
	status, body, _ := e.call("GET", "/api/v1/sources/api/history", viewer, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"author":"token ci"`) || !strings.Contains(string(body), `"author":"token write"`) {
		t.Errorf("the API's sync history does not name the tokens: %d %s", status, body)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `msg="api request" token=ci method=POST path=/api/v1/resources`) ||
		!strings.Contains(logs, `token=viewer method=GET`) {
		t.Errorf("the log does not audit the requests by token:\n%s", logs)
	}
}

// TestCreateIsNotUpdate: a token that may create but not update cannot
// change what exists by POSTing it again, whether a resource or a type
// version; it still creates what does not exist.
func TestCreateIsNotUpdate(t *testing.T) {
	t.Parallel()
	const creator = "creator-token-6b2d"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "creator", Value: creator,
			Grants: []api.Grant{{Verbs: []string{api.VerbCreate, api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}}}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	var before api.Resource
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`,
		http.StatusCreated, &before)

	status, body, _ := e.call("POST", "/api/v1/resources", creator, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 99}}`)
	if status != http.StatusForbidden || !strings.Contains(string(body), "missing permission update") {
		t.Errorf("POST of an existing resource with a create-only token = %d %s; want 403 naming update", status, body)
	}
	var after api.Resource
	e.must("GET", "/api/v1/resources/"+itoa(before.ID), writeToken, "", http.StatusOK, &after)
	if string(after.Spec) != string(before.Spec) || after.Generation != before.Generation {
		t.Errorf("the refused POST changed the resource: spec %s generation %d, was %s %d", after.Spec, after.Generation, before.Spec, before.Generation)
	}
	changedType := strings.Replace(widgetType, `"integer"`, `"string"`, 1)
	status, body, _ = e.call("POST", "/api/v1/resource-types", creator, changedType)
	if status != http.StatusForbidden || !strings.Contains(string(body), "missing permission update") {
		t.Errorf("POST of an existing type version with a create-only token = %d %s; want 403 naming update", status, body)
	}
	status, body, _ = e.call("GET", "/api/v1/resource-types/Widget/v1", writeToken, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"size":{"type":"integer"}`) {
		t.Errorf("the refused POST changed the type: %d %s", status, body)
	}
	// What does not exist yet, it creates.
	e.must("POST", "/api/v1/resources", creator, `{"name": "w2", "resource_type_name": "Widget", "spec": {"size": 2}}`, http.StatusCreated, nil)
}

// TestListingsOfEverything: the agents and the action instances are about
// no kind or source, so they need list on every kind and source, as the
// dashboard does.
func TestListingsOfEverything(t *testing.T) {
	t.Parallel()
	const ci, viewer = "ci-token-0a7c", "viewer-token-5d1e"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{
			{Name: "ci", Value: ci, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}},
			{Name: "infra", Value: "infra-token-77", Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Sources: []string{"infra"}}}},
			{Name: "viewer", Value: viewer, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}},
		}
	})
	for _, path := range []string{"/api/v1/agents", "/api/v1/plugins/actions"} {
		for _, tok := range []string{ci, "infra-token-77"} {
			status, body, _ := e.call("GET", path, tok, "")
			if status != http.StatusForbidden || !strings.Contains(string(body), "missing permission list on every kind and source") {
				t.Errorf("GET %s with a narrowed token = %d %s; want 403", path, status, body)
			}
		}
		e.must("GET", path, viewer, "", http.StatusOK, nil)
	}
}

// TestGrantActions limits a token's writes to resources of the action
// instance a: it cannot write a resource naming b, nor one naming none
// whose type's default is b or that falls to noop, nor move its resource to
// b, nor touch a resource of b; a plugin's name stands for its one
// instance. The limited grant covers writes to resources only.
func TestGrantActions(t *testing.T) {
	t.Parallel()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"a": {Plugin: "exec", Config: json.RawMessage(`{"command": ["true"]}`)},
		"b": {Plugin: "noop"},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const deployer = "deployer-token-31c8"
	e := newEnv(t, func(o *api.Options) {
		o.Actions = instances
		o.Tokens = []api.Token{{Name: "deployer", Value: deployer, Grants: []api.Grant{
			{Verbs: []string{api.VerbCreate, api.VerbUpdate, api.VerbDelete, api.VerbReconcile, api.VerbSuspend, api.VerbList},
				Kinds: []string{"Widget", "Gadget"}, Actions: []string{"a"}},
			{Verbs: []string{api.VerbGet}, Kinds: []string{"Widget", "Gadget"}},
		}}}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, strings.Replace(strings.Replace(widgetType, "Widget", "Gadget", 1),
		`"schema"`, `"action": "b", "schema"`, 1), http.StatusCreated, nil)
	var theirs, own api.Resource
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w-b", "resource_type_name": "Widget", "action_plugin": "b", "spec": {"size": 1}}`,
		http.StatusCreated, &theirs)
	e.must("POST", "/api/v1/resources", deployer, `{"name": "w-a", "resource_type_name": "Widget", "action_plugin": "exec", "spec": {"size": 1}}`,
		http.StatusCreated, &own)

	tests := []struct {
		name, method, path, body string
		status                   int
		contains                 string
	}{
		{"naming b", "POST", "/api/v1/resources", `{"name": "w2", "resource_type_name": "Widget", "action_plugin": "b", "spec": {}}`, 403,
			`token \"deployer\" may not create Widget in source api with action b (missing permission create on kinds [Widget], sources [api], actions [b])`},
		{"naming none, of a type whose default is b", "POST", "/api/v1/resources", `{"name": "g1", "resource_type_name": "Gadget", "spec": {}}`, 403,
			`missing permission create on kinds [Gadget], sources [api], actions [b]`},
		{"naming none, of a type with none", "POST", "/api/v1/resources", `{"name": "w3", "resource_type_name": "Widget", "spec": {}}`, 403,
			`actions [noop]`},
		{"POSTing a resource of b", "POST", "/api/v1/resources", `{"name": "w-b", "resource_type_name": "Widget", "action_plugin": "a", "spec": {}}`, 403,
			`may not update Widget in source api with action b`},
		{"moving its resource to b", "PUT", "/api/v1/resources/" + itoa(own.ID), `{"action_plugin": "b"}`, 403, `actions [b]`},
		{"updating a resource of b", "PUT", "/api/v1/resources/" + itoa(theirs.ID), `{"spec": {"size": 2}}`, 403, `actions [b]`},
		{"reconciling a resource of b", "POST", "/api/v1/resources/" + itoa(theirs.ID) + "/reconcile", "", 403, `actions [b]`},
		{"suspending a resource of b", "POST", "/api/v1/resources/" + itoa(theirs.ID) + "/suspend", "", 403, `actions [b]`},
		{"deleting a resource of b", "DELETE", "/api/v1/resources/" + itoa(theirs.ID), "", 403, `actions [b]`},
		{"listing: not a write", "GET", "/api/v1/resources?kind=Widget", "", 403, `may not list Widget`},
		{"a type: not a resource", "POST", "/api/v1/resource-types", strings.Replace(widgetType, "Widget", "Gizmo", 1), 403, `may not create Gizmo`},
		{"updating its resource", "PUT", "/api/v1/resources/" + itoa(own.ID), `{"spec": {"size": 2}}`, 200, `"size":2`},
		{"naming a", "POST", "/api/v1/resources", `{"name": "w4", "resource_type_name": "Widget", "action_plugin": "a", "spec": {}}`, 201, `"name":"w4"`},
		{"reconciling its resource", "POST", "/api/v1/resources/" + itoa(own.ID) + "/reconcile", "", 202, `"resource_id"`},
		{"deleting its resource", "DELETE", "/api/v1/resources/" + itoa(own.ID), "", 202, `"resource_id"`},
	}
	for _, tt := range tests {
		status, body, _ := e.call(tt.method, tt.path, deployer, tt.body)
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: %s %s = %d %s; want %d with %s", tt.name, tt.method, tt.path, status, body, tt.status, tt.contains)
		}
	}
	var after api.Resource
	e.must("GET", "/api/v1/resources/"+itoa(theirs.ID), writeToken, "", http.StatusOK, &after)
	if after.ActionPlugin != "b" || after.Generation != theirs.Generation || after.Suspended || after.DeletionRequestedAt != nil {
		t.Errorf("the refused writes changed w-b: %+v", after)
	}
	for _, name := range []string{"w2", "g1", "w3"} {
		if status, _, _ := e.call("GET", "/api/v1/resources/by-name/Widget/v1/"+name, writeToken, ""); status != http.StatusNotFound {
			t.Errorf("a refused write created %s", name)
		}
	}
}
