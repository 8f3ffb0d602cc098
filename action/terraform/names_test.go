package terraform_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestDottedNamesKeepToTheirWorkFolders: a resource's name is one path
// component of its work folder, <workingDir>/<instance>/<kind>/<name>, and
// of its backend key. Names are DNS subdomains now, dots included: a dotted
// name gets a folder of its own under its kind, and names the manifests
// refuse (".." and the like), should one ever reach the plugin, are encoded
// into one harmless component, never a way out of workingDir or into
// another resource's folder.
func TestDottedNamesKeepToTheirWorkFolders(t *testing.T) {
	t.Parallel()
	srv := tofutest.NewStateServer(t)
	tests := []struct {
		name  string
		valid bool // the manifests accept it
	}{
		{"xnopresources.nop.example.org", true},
		{"a.b", true},
		{strings.Repeat("a", 62) + "." + strings.Repeat("b", 62) + ".example.org", true},
		{"..", false},
		{".", false},
		{"../../escape", false},
		{".hidden", false},
		{"a/../b", false},
		{"a..b", false},
		{`..\..\escape`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 30)], func(t *testing.T) {
			t.Parallel()
			if manifest.ValidName(tt.name) != tt.valid {
				t.Fatalf("ValidName(%q) = %v", tt.name, !tt.valid)
			}
			root := t.TempDir()
			work := filepath.Join(root, "work")
			events := filepath.Join(root, "events")
			a := mustInstance(t, "tf", fmt.Sprintf(recordingModule, "a", events), work, nil)
			if _, err := a.Apply(t.Context(), request(tt.name, 1, `{}`, &recorder{})); err != nil {
				t.Fatalf("apply: %v", err)
			}
			// Nothing but the work folder and the module's record beside it.
			if got := entries(t, root); !slices.Equal(got, []string{"events", "work"}) {
				t.Errorf("beside workingDir: %q", got)
			}
			// The instance's folder, and the plugin's own (dot-folders).
			if got := entries(t, work); !slices.Contains(got, "tf") || slices.ContainsFunc(got, func(e string) bool {
				return e != "tf" && e != ".modules" && e != ".output"
			}) {
				t.Errorf("in workingDir: %q", got)
			}
			if got := entries(t, filepath.Join(work, "tf")); !slices.Equal(got, []string{"Database"}) {
				t.Errorf("in the instance's folder: %q", got)
			}
			got := entries(t, filepath.Join(work, "tf", "Database"))
			if len(got) != 1 {
				t.Fatalf("in the kind's folder: %q, want one folder", got)
			}
			folder := got[0]
			if tt.valid && folder != tt.name {
				t.Errorf("the work folder of %q is %q, not the name itself", tt.name, folder)
			}
			if strings.ContainsAny(folder, `/\`) || folder == "." || folder == ".." || strings.HasPrefix(folder, ".") {
				t.Errorf("the work folder of %q is %q", tt.name, folder)
			}
			if back, err := url.PathUnescape(folder); err != nil || back != tt.name {
				t.Errorf("the work folder %q does not stand for %q alone (%q, %v)", folder, tt.name, back, err)
			}
			if _, err := os.Stat(filepath.Join(work, "tf", "Database", folder, "terraform.tfstate")); err != nil {
				t.Errorf("no state in the work folder: %v", err)
			}
			if got := readEvents(t, events); got != "created a" {
				t.Errorf("events %q", got)
			}
			if !tt.valid {
				return
			}
			// A backend's key holds the dotted name as it is.
			remote := mustInstance(t, "tf-r", fmt.Sprintf(recordingModule, "r", events), filepath.Join(root, "remote"), map[string]any{"backend": srv.Backend()})
			if _, err := remote.Apply(t.Context(), request(tt.name, 1, `{}`, &recorder{})); err != nil {
				t.Fatalf("apply with a backend: %v", err)
			}
			if !srv.HasState("tf-r", "Database", tt.name) {
				t.Errorf("no state at tf-r/Database/%s in the backend: %v", tt.name, srv.Keys())
			}
		})
	}
}

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// namedModule's one resource is named for the resource it belongs to
// (no8s_name) and appends "created <name>" or "destroyed <name>" to a file:
// a run against another resource's state replaces that resource's.
const namedModule = `
variable "no8s_name" { type = string }
resource "terraform_data" "res" {
  input            = var.no8s_name
  triggers_replace = [var.no8s_name]
  provisioner "local-exec" {
    command = "echo created ${self.input} >> %[1]s"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed ${self.input} >> %[1]s"
  }
}
`

// TestPostgresSchemaNameWithinIdentifierLimit: the pg backend keeps each
// state in the schema schema_name names, and PostgreSQL cuts identifiers
// to 63 bytes without a word. A name of up to 253 characters makes two
// resources' schema names differ past that point only: the second's run
// would read the first's state and replace what it made. A rendered
// schema name over 63 bytes is refused before the binary runs; one that
// fits works.
func TestPostgresSchemaNameWithinIdentifierLimit(t *testing.T) {
	t.Parallel()
	conn := pgtest.NewServer(t).URL(t)
	root := t.TempDir()
	events := filepath.Join(root, "events")
	backend := fmt.Sprintf("backend \"pg\" {\n  conn_str    = %q\n  schema_name = \"no8s_{{ .Instance }}_{{ .Kind }}_{{ .Name }}\"\n}", conn)
	a := mustInstance(t, "tf", fmt.Sprintf(namedModule, events), filepath.Join(root, "work"), map[string]any{"backend": backend})
	// no8s_tf_Database_ and 46 characters: 63 bytes.
	fits := strings.Repeat("p", 30) + ".eu.example.org"
	fits += strings.Repeat("q", 63-len("no8s_tf_Database_")-len(fits))
	long := fits + ".two"
	if !manifest.ValidName(fits) || !manifest.ValidName(long) {
		t.Fatalf("invalid names %q, %q", fits, long)
	}
	if _, err := a.Apply(t.Context(), request(fits, 1, `{}`, &recorder{})); err != nil {
		t.Fatalf("apply %s: %v", fits, err)
	}
	_, err := a.Apply(t.Context(), request(long, 1, `{}`, &recorder{}))
	if err == nil || !strings.Contains(err.Error(), "63 bytes") {
		t.Errorf("apply %s: %v, want a refusal naming PostgreSQL's 63 bytes", long, err)
	}
	if got, want := readEvents(t, events), "created "+fits; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}
