package gitlabpipelines

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestExampleDeclaresTheInputs: the .gitlab-ci.yml the docs offer to start
// from declares every input the plugin may send, each with a default (the
// pipelines of pushes and merge requests get none), refers to no input it
// does not declare (GitLab refuses such a configuration), names pipelines
// after the correlation id, runs apply and destroy by the operation, and
// validates and diffs the manifests of merge requests with the CLI's real
// flags.
func TestExampleDeclaresTheInputs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../examples/gitlab/.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Spec struct {
			Inputs map[string]*struct {
				Default *string `yaml:"default"`
				Regex   string  `yaml:"regex"`
			} `yaml:"inputs"`
		} `yaml:"spec"`
	}
	var config map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&header); err != nil {
		t.Fatalf("the spec header: %v", err)
	}
	if err := dec.Decode(&config); err != nil {
		t.Fatalf("the configuration after the header: %v", err)
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		t.Fatalf("more than a header and a configuration: %v", err)
	}

	declared := header.Spec.Inputs
	for _, in := range standardInputs {
		switch d, ok := declared[in]; {
		case !ok:
			t.Errorf("the example does not declare the input %s", in)
		case d == nil || d.Default == nil:
			t.Errorf("the input %s has no default: pipelines of pushes and merge requests, which get no inputs, would fail", in)
		}
	}
	for in := range declared {
		if !slices.Contains(standardInputs, in) {
			t.Errorf("the example declares %s, which the plugin never sends", in)
		}
	}
	if op := declared[InputOperation]; op != nil {
		re := regexp.MustCompile(op.Regex)
		for _, v := range []string{"apply", "destroy", ""} {
			if !re.MatchString(v) {
				t.Errorf("the operation's regex %q refuses %q", op.Regex, v)
			}
		}
	}
	refs := regexp.MustCompile(`\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]`).FindAllStringSubmatch(string(data), -1)
	if len(refs) == 0 {
		t.Fatal("the example uses no input")
	}
	for _, m := range refs {
		if _, ok := declared[m[1]]; !ok {
			t.Errorf("the example refers to the input %s, which it does not declare", m[1])
		}
	}

	workflow, _ := config["workflow"].(map[string]any)
	if name, _ := workflow["name"].(string); !strings.Contains(name, "$[[ inputs."+InputCorrelationID+" ]]") {
		t.Errorf("workflow:name is %q: without the correlation id, a pipeline whose creation answer was lost is not found", name)
	}
	job := func(name string) (string, string) {
		j, ok := config[name].(map[string]any)
		if !ok {
			t.Errorf("no job %s", name)
			return "", ""
		}
		out, err := yaml.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		base := ""
		if ext, ok := j["extends"].(string); ok {
			b, _ := yaml.Marshal(config[ext])
			base = string(b)
		}
		return string(out), base
	}
	for _, op := range []string{"apply", "destroy"} {
		text, base := job(op)
		if !strings.Contains(text, `$NO8S_OPERATION == "`+op+`"`) || !strings.Contains(base, "no8s-outputs.json") {
			t.Errorf("job %s does not run by the operation or upload %s:\n%s%s", op, OutputsFile, text, base)
		}
	}
	vars, _ := config["variables"].(map[string]any)
	if v, _ := vars["NO8S_OPERATION"].(string); v != "$[[ inputs.operation ]]" {
		t.Errorf("NO8S_OPERATION is %q", v)
	}
	for name, want := range map[string][]string{
		"validate": {`no8s-agent validate "$MANIFESTS"`},
		"diff": {`git worktree add --detach "$CI_PROJECT_DIR/.base" "$CI_MERGE_REQUEST_DIFF_BASE_SHA"`,
			`no8s-agent validate --base ".base/$MANIFESTS" "$MANIFESTS"`,
			`no8s-agent diff --source "$SOURCE" --base ".base/$MANIFESTS" -o markdown "$MANIFESTS"`},
	} {
		text, base := job(name)
		if !strings.Contains(base, `$CI_PIPELINE_SOURCE == "merge_request_event"`) {
			t.Errorf("job %s does not run in merge-request pipelines:\n%s", name, base)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("job %s does not run %s:\n%s", name, w, text)
			}
		}
	}
}
