package main

import (
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestGetMasksSecretsWithConfig stores a resource whose spec, labels and
// annotations quote secrets the configuration names (an API token and an
// exec action's passEnv value, with a quote, '&', '<', '>', a newline and
// spaces), and prints it with get and --config in every format: the secrets
// are in none of the outputs, in no form. Without --config get knows no
// secret, and prints the spec as declared.
func TestGetMasksSecretsWithConfig(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"token":   `wr"ite-&<tok>-7f2ab4e8`,
		"passEnv": "pass 'env'\n\"&<>\" 51f0e2",
	}
	env := map[string]string{}
	for k, v := range secrets {
		env[k] = setSecret(t, v)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	cfg := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`database: %q
api: {writeTokenEnv: %s}
actions:
  runner:
    plugin: exec
    config: {command: [/bin/true], passEnv: [%s]}
`, db, env["token"], env["passEnv"])), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t.Context(), db, migrateStore, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"note": "token " + secrets["token"], "nested": map[string]string{"env": secrets["passEnv"]},
		"long": strings.Repeat("x", 90) + secrets["passEnv"]})
	r := &manifest.Resource{Kind: "Task", Group: "no8s.io", Version: "v1", Name: "leaky", Spec: spec, SpecHash: "sha256:x",
		Labels: map[string]string{"note": "x" + strings.Repeat("y", 50)}, Annotations: map[string]string{"quote": secrets["token"]}}
	got, _, err := st.ApplyResource(t.Context(), r, store.SourceRef{Name: "tasks", Path: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetResourceStatus(t.Context(), got.ID, store.StatusUpdate{Phase: manifest.PhaseFailed,
		Message: "failed with " + secrets["passEnv"]}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, args := range [][]string{{"get", "resources", "-o", "json"}, {"get", "resources", "-o", "yaml"},
		{"get", "resources"}, {"get", "resources", "-o", "wide"}, {"get", "resources", "leaky", "-o", "json"}} {
		var out, errOut strings.Builder
		if code := run(t.Context(), append(args, "--config", cfg), &out, &errOut); code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
		}
		printed := out.String() + errOut.String()
		if strings.Contains(args[len(args)-1], "json") && !strings.Contains(printed, `"note": "token ***"`) {
			t.Errorf("%s: the spec is not printed masked; the check would prove nothing:\n%s", strings.Join(args, " "), printed)
		}
		for name, value := range secrets {
			for _, form := range cliForms(value) {
				if strings.Contains(printed, form) {
					t.Errorf("%s: the %s secret is printed as %q:\n%s", strings.Join(args, " "), name, form, printed)
				}
			}
		}
	}
	// Without the configuration, the spec is printed as declared.
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"get", "resources", "-o", "json", "--database", db}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "wr\\\"ite-") {
		t.Errorf("get --database: exit %d, want the spec as declared:\n%s%s", code, out.String(), errOut.String())
	}
}

// cliForms are the forms a secret takes in the CLI's outputs: as is, a
// line of it, JSON (as encoding/json writes it), YAML's quoted styles,
// HTML, a URL query and with control characters escaped.
func cliForms(value string) []string {
	js, _ := json.Marshal(value)
	forms := []string{value, string(js[1 : len(js)-1]), html.EscapeString(value), url.QueryEscape(value),
		strings.ReplaceAll(value, "'", "''"), manifest.EscapeControl(value), fmt.Sprintf("%q", value)}
	for line := range strings.Lines(value) {
		if line = strings.TrimSpace(line); len(line) >= 8 {
			forms = append(forms, line)
		}
	}
	return forms
}
