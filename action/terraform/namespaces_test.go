package terraform_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
)

// namespaceModule records, per apply and destroy, the namespace the module
// was given and its input.
const namespaceModule = `
variable "no8s_namespace" { type = string }
resource "terraform_data" "res" {
  input            = "${var.no8s_namespace}:%[1]s"
  triggers_replace = ["${var.no8s_namespace}:%[1]s"]
  provisioner "local-exec" {
    command = "echo created ${self.input} >> %[2]s"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed ${self.input} >> %[2]s"
  }
}
`

// inNamespace is request(name, ...) for a resource in namespace ns.
func inNamespace(ns, name string, gen int64) *action.Request {
	req := request(name, gen, `{}`, &recorder{})
	req.Resource.Namespace = ns
	return req
}

// TestNamespacesNeverShareState: the same kind and name in two namespaces
// have two work folders and two backend keys, and destroying one leaves
// the other's state; the namespace "default" and cluster-scoped kinds keep
// the folder and key they had before namespaces; a folder of the earlier
// layout is the default namespace's, never another's; a backend template
// that does not tell namespaces apart serves only those.
func TestNamespacesNeverShareState(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	tf := mustInstance(t, "tf", fmt.Sprintf(namespaceModule, "v", events), work, nil)
	ctx := t.Context()
	for _, ns := range []string{"team-a", "team-b", "default"} {
		if _, err := tf.Apply(ctx, inNamespace(ns, "web", 1)); err != nil {
			t.Fatalf("apply in %s: %v", ns, err)
		}
	}
	for _, dir := range []string{"tf/team-a/Database/web", "tf/team-b/Database/web", "tf/Database/web"} {
		if _, err := os.Stat(filepath.Join(work, filepath.FromSlash(dir), "terraform.tfstate")); err != nil {
			t.Errorf("no state in %s: %v", dir, err)
		}
	}
	if got := readEvents(t, events); got != "created team-a:v created team-b:v created default:v" {
		t.Fatalf("events %q", got)
	}
	// Destroying team-a's leaves team-b's and default's: applying them
	// again changes nothing.
	if _, err := tf.Destroy(ctx, inNamespace("team-a", "web", 1)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-b", "default", ""} {
		res, err := tf.Apply(ctx, inNamespace(ns, "web", 2))
		if err != nil {
			t.Fatalf("apply in %q: %v", ns, err)
		}
		if ns != "" && res.Created+res.Updated+res.Deleted != 0 {
			t.Errorf("apply in %s after team-a's destroy: %+v", ns, res)
		}
	}
	// A cluster-scoped kind's is where the default namespace's is: a kind
	// is one or the other, never both.
	if got := readEvents(t, events); got != "created team-a:v created team-b:v created default:v destroyed team-a:v destroyed default:v created :v" {
		t.Errorf("events %q", got)
	}

	// A folder of the earlier layout, <workingDir>/<kind>/<name>, belongs
	// to the default namespace's resource: one in another namespace does
	// not take it.
	legacy := filepath.Join(work, "Database", "old")
	if _, err := tf.Apply(ctx, inNamespace("default", "old", 1)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(work, "tf", "Database", "old"), legacy); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Apply(ctx, inNamespace("team-a", "old", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(legacy, "terraform.tfstate")); err != nil {
		t.Errorf("team-a/old took the default namespace's folder of the earlier layout: %v", err)
	}
	if res, err := tf.Apply(ctx, inNamespace("default", "old", 2)); err != nil || res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("default/old over its folder of the earlier layout: %+v, %v", res, err)
	}

	// Backends: {{ .Key }} has the namespace outside "default".
	srv := tofutest.NewStateServer(t)
	remote := mustInstance(t, "tf-r", fmt.Sprintf(namespaceModule, "r", events), filepath.Join(t.TempDir(), "work"), map[string]any{"backend": srv.Backend()})
	for _, ns := range []string{"team-a", "team-b", "default", ""} {
		if _, err := remote.Apply(ctx, inNamespace(ns, "db", 1)); err != nil {
			t.Fatalf("apply in %q with a backend: %v", ns, err)
		}
	}
	keys := srv.Keys()
	for _, want := range []string{"/state/tf-r/team-a/Database/db", "/state/tf-r/team-b/Database/db", "/state/tf-r/Database/db"} {
		if !slices.Contains(keys, want) {
			t.Errorf("no state at %s: %v", want, keys)
		}
	}
	// A template of before namespaces, which tells instances, kinds and
	// names apart but not namespaces, still serves the default namespace
	// and cluster-scoped kinds, and refuses the others, which it would
	// give one state.
	old := `backend "http" {
  address        = "` + srv.URL + `/state/{{ .Instance }}/{{ .Kind }}/{{ .Name }}"
  lock_address   = "` + srv.URL + `/lock/{{ .Instance }}/{{ .Kind }}/{{ .Name }}"
  unlock_address = "` + srv.URL + `/lock/{{ .Instance }}/{{ .Kind }}/{{ .Name }}"
}`
	byName := mustInstance(t, "tf-o", fmt.Sprintf(namespaceModule, "o", events), filepath.Join(t.TempDir(), "work"), map[string]any{"backend": old})
	if _, err := byName.Apply(ctx, inNamespace("default", "db", 1)); err != nil {
		t.Fatalf("the default namespace with a template of before: %v", err)
	}
	_, err := byName.Apply(ctx, inNamespace("team-a", "db", 1))
	if err == nil || !strings.Contains(err.Error(), "{{ .Key }}") || !strings.Contains(err.Error(), "Database/team-a/db") {
		t.Fatalf("team-a with a template that ignores namespaces: %v", err)
	}
	if strings.Contains(readEvents(t, events), "team-a:o") {
		t.Error("team-a's module ran with a template that ignores namespaces")
	}
	// A template that joins the namespace to the name with a '-', which
	// both may hold, is refused when the agent starts.
	for _, tmpl := range []string{
		`backend "http" { address = "` + srv.URL + `/state/{{ .Instance }}/{{ .Kind }}/{{ .Namespace }}-{{ .Name }}" }`,
	} {
		_, err := newInstance(t, "tf-x", fmt.Sprintf(namespaceModule, "x", events), work, map[string]any{"backend": tmpl})
		if err == nil || !strings.Contains(err.Error(), "the namespace and the name meet") {
			t.Errorf("backend %s: error %v, want one about the namespace and the name meeting", tmpl, err)
		}
	}
}
