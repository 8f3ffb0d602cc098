package preview_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/preview"
)

// tfActions resolves "provision" to one terraform instance.
type tfActions struct{ act action.Action }

func (a tfActions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: terraform.Plugin, Action: a.act}, name == "provision"
}

// A pull request changing a resource bound to a terraform instance gets
// that resource's real plan, from OpenTofu, in the sticky comment; the
// work folder the reconciler uses is left as it was.
func TestTerraformPlanInPullRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	dir := t.TempDir()
	module := filepath.Join(dir, "module")
	if err := os.MkdirAll(module, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(`
variable "storage_gb" { type = number }
resource "terraform_data" "disk" {
  input = { gb = var.storage_gb }
}
output "gb" { value = terraform_data.disk.output.gb }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"binary": tofutest.Binary(t), "module": module, "workingDir": filepath.Join(dir, "work")})
	act, err := terraform.New(action.Settings{Instance: "provision", Config: cfg,
		Getenv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.Getenv("PATH"), true
			}
			return "", false
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The agent applied Database/a at 100 GB.
	applied := &action.Request{Instance: "provision", FencingToken: 1, Reporter: action.NoopReporter{},
		Resource: action.Resource{ID: 1, Kind: "Database", Name: "a", Spec: json.RawMessage(`{"storage_gb":100}`), Generation: 1}}
	if _, err := act.Apply(t.Context(), applied); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "work", "provision", "Database", "a", "terraform.tfstate")
	before, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}

	p := preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: tfActions{act}, Sources: []*preview.Source{f.src}})
	sha := f.push(1, map[string]string{"dbs/a.yaml": db("a", 150)})
	if err := p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	c := f.only(1)
	for _, want := range []string{
		"<details><summary>Plan of Database/a by provision: 0 to add, 1 to change, 0 to destroy</summary>",
		"~ input", "~ gb = 100 -> 150",
	} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, c.Body)
		}
	}
	after, err := os.ReadFile(state)
	if err != nil || string(after) != string(before) {
		t.Errorf("the preview changed the state (%v)", err)
	}
}
