package reconcile_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// Drift checks through the real terraform action: while the state matches
// the spec, checks plan and apply nothing; when the state loses the
// resource outside the agent, the next check re-applies it, once.
func TestTerraformDrift(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	if _, err := st.PutResourceType(t.Context(), &store.ResourceType{Name: "Widget", Version: "v1", Group: "example.com",
		DriftInterval: 300 * time.Millisecond, Schema: json.RawMessage(`{"type":"object"}`), Source: src}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "module")
	if err := os.MkdirAll(module, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(`
variable "size" { type = number }
resource "terraform_data" "w" {
  input = var.size
}
output "id" { value = terraform_data.w.id }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"binary": tofutest.Binary(t), "module": module, "workingDir": filepath.Join(dir, "work")})
	tf, err := terraform.New(action.Settings{Instance: "tf", Config: cfg, Getenv: func(k string) (string, bool) {
		if k == "PATH" {
			return os.Getenv("PATH"), true
		}
		return "", false
	}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, st, actionSet{"tf": tf}, options("agent-tf-drift"))
	w := apply(t, st, widget("w", `{"size":1}`, "tf"))
	waitPhase(t, st, "w", manifest.PhaseReady, 1)

	// checks counts the no-drift checks, folded or not; rows the history
	// rows they take.
	count := func() (checks, rows, reapplies int) {
		for _, r := range history(t, st, w.ID) {
			if r.Trigger != store.TriggerDrift {
				continue
			}
			if r.Created+r.Updated+r.Deleted > 0 {
				reapplies++
			} else {
				checks += r.NoDriftChecks
				rows++
			}
		}
		return checks, rows, reapplies
	}
	waitFor(t, 30*time.Second, "three drift checks", func() (bool, string) {
		c, _, _ := count()
		return c >= 3, ""
	})
	// The same plan each time: the checks fold into one record.
	if c, rows, r := count(); r != 0 || rows != 1 {
		t.Fatalf("%d re-applies of an unchanged resource; %d checks in %d records, want one", r, c, rows)
	}

	// The state loses the resource outside the agent.
	cmd := exec.Command(tofutest.Binary(t), "state", "rm", "terraform_data.w")
	cmd.Dir = filepath.Join(dir, "work", "tf", "Widget", "w")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("state rm: %v\n%s", err, out)
	}
	before, _, _ := count()
	waitFor(t, 30*time.Second, "a re-apply of the drifted resource, then two more checks", func() (bool, string) {
		c, _, r := count()
		return r >= 1 && c >= before+2, ""
	})
	// The re-apply breaks the run: the checks after it have a record of
	// their own.
	if c, rows, r := count(); r != 1 || rows != 2 {
		t.Errorf("%d re-applies after one drift; %d checks in %d records", r, c, rows)
	}
}
