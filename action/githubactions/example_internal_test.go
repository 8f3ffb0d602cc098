package githubactions

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"

	"go.yaml.in/yaml/v3"
)

// TestExampleWorkflowDeclaresTheInputs: the workflow the README offers to
// start from declares every input the plugin may send, since GitHub refuses
// a dispatch with an input the workflow does not declare. Inputs sent only
// for some resources must not be required.
func TestExampleWorkflowDeclaresTheInputs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../examples/github/no8s-apply.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Dispatch struct {
				Inputs map[string]struct {
					Required bool `yaml:"required"`
				} `yaml:"inputs"`
			} `yaml:"workflow_dispatch"`
		} `yaml:"on"` // YAML 1.2: on is a string, not true
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	declared := wf.On.Dispatch.Inputs
	for _, in := range standardInputs {
		d, ok := declared[in]
		switch {
		case !ok:
			t.Errorf("the example workflow does not declare the input %s", in)
		case (in == InputPluginConfig || in == InputNamespace) && d.Required:
			t.Errorf("the example workflow requires %s, which is sent only for resources that have one", in)
		}
	}
	for in := range declared {
		if !slices.Contains(standardInputs, in) {
			t.Errorf("the example workflow declares %s, which the plugin never sends", in)
		}
	}
}

// TestCorrelationIDOfLongNames: a name of up to 253 characters (a DNS
// subdomain) gives a correlation id no longer than a 63-character label
// did, still unique per dispatch, starting with as much of the name as fits.
func TestCorrelationIDOfLongNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 62) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + ".example.org"
	tests := []struct {
		name, prefix string
	}{
		{"production-pg", "databasecluster-production-pg-g3-apply-"},
		{"xnopresources.nop.example.org", "databasecluster-xnopresources.nop.example.org-g3-apply-"},
		{strings.Repeat("x", 63), "databasecluster-" + strings.Repeat("x", 63) + "-g3-apply-"},
		{long, "databasecluster-" + strings.Repeat("a", 62) + "-g3-apply-"},
		{strings.Repeat("x", 63) + "yyy", "databasecluster-" + strings.Repeat("x", 63) + "-g3-apply-"},
	}
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 20)], func(t *testing.T) {
			t.Parallel()
			req := &action.Request{Resource: action.Resource{Kind: "DatabaseCluster", Name: tt.name, Generation: 3}}
			a, err := correlationID(req, action.OperationApply)
			if err != nil {
				t.Fatal(err)
			}
			b, err := correlationID(req, action.OperationApply)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(a, tt.prefix) || len(a) != len(tt.prefix)+12 || a == b {
				t.Errorf("correlation ids %q and %q, want %q and 12 random hex digits each", a, b, tt.prefix)
			}
			if limit := len("databasecluster-") + 63 + len("-g3-apply-") + 12; len(a) > limit {
				t.Errorf("correlation id of %d characters, more than %d", len(a), limit)
			}
		})
	}
}
