package githubactions

import (
	"os"
	"slices"
	"testing"

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
		case in == InputPluginConfig && d.Required:
			t.Errorf("the example workflow requires %s, which is sent only for resources that have one", in)
		}
	}
	for in := range declared {
		if !slices.Contains(standardInputs, in) {
			t.Errorf("the example workflow declares %s, which the plugin never sends", in)
		}
	}
}
