package api_test

import (
	"net/http"
	"strings"
	"testing"

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
