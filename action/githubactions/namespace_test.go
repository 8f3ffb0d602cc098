package githubactions_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/githubactions"
	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
)

// TestNamespaceInput shows what a workflow is told of a resource's
// namespace: nothing in the namespace "default" and for a cluster-scoped
// resource, so that workflows written before namespaces keep working;
// the namespace otherwise, under the name inputs maps it to.
func TestNamespaceInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, namespace, extra string
		input, want            string // the input's name and value; "" when not sent
	}{
		{name: "default", namespace: "default"},
		{name: "cluster-scoped", namespace: ""},
		{name: "team", namespace: "team-a", input: "namespace", want: "team-a"},
		{name: "renamed", namespace: "team-a", extra: `, "inputs": {"namespace": "resource_namespace"}`, input: "resource_namespace", want: "team-a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
			a := newAction(t, srv, tt.extra)
			req := request("production-pg", 3, &reporter{})
			req.Resource.Namespace = tt.namespace
			_, err := a.Apply(t.Context(), req)
			ds := srv.Dispatches()
			if err != nil || len(ds) != 1 {
				t.Fatalf("Apply = %v with %d dispatches", err, len(ds))
			}
			for name, v := range ds[0].Inputs {
				if strings.Contains(name, "namespace") && name != tt.input {
					t.Errorf("input %s = %q sent", name, v)
				}
			}
			if tt.input != "" && ds[0].Inputs[tt.input] != tt.want {
				t.Errorf("input %s = %q, want %q", tt.input, ds[0].Inputs[tt.input], tt.want)
			}
		})
	}
}

// TestNamespaceInputNotLeftOut refuses a configuration that maps the
// namespace input to nothing: a resource outside "default" would run as
// that of the same kind and name in every other namespace.
func TestNamespaceInputNotLeftOut(t *testing.T) {
	t.Parallel()
	_, err := githubactions.New(action.Settings{Instance: "deploy", Getenv: func(string) (string, bool) { return token, true },
		Config: json.RawMessage(`{"owner": "acme", "repo": "infra", "workflow": "no8s-apply.yml", "tokenEnv": "GH_TOKEN", "inputs": {"namespace": ""}}`)})
	if err == nil || !strings.Contains(err.Error(), "namespace cannot be left out") {
		t.Fatalf("New = %v, want the namespace input refused", err)
	}
}
