package terraform_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
)

// TestSecretCutAtALimit has the binary print the passEnv secret where the
// plugin cuts what it shows: a progress line longer than a progress message
// may be, and the start of the error's tail of the output. A script stands
// in for the binary, so that the secret falls exactly on the cut. No piece
// of the secret is left in the error or the progress.
func TestSecretCutAtALimit(t *testing.T) {
	pad := func(n int, c string) string { return "$(printf '%" + strconv.Itoa(n) + "s' '' | tr ' ' " + c + ")" }
	cases := []struct{ name, script string }{
		// The plugin keeps 200 bytes of a resource line; the secret is
		// at bytes 189 to 208.
		{"progress line", `echo "terraform_data.db[\"` + pad(170, "x") + `$TF_VAR_password\"]: Creating..."` + "\necho 'Error: boom' >&2\nexit 1\n"},
		// The error quotes the last 4096 bytes, which begin 10 bytes
		// before the secret's end.
		{"error tail", `printf 'Error: %s%s' "$TF_VAR_password" "` + pad(4096-10, "y") + `" >&2` + "\nexit 1\n"},
	}
	dir := t.TempDir()
	binaries := map[string]string{}
	for i, c := range cases {
		path := filepath.Join(dir, "tofu"+strconv.Itoa(i))
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+c.script), 0o755); err != nil {
			t.Fatal(err)
		}
		binaries[c.name] = path
	}
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mod := t.TempDir()
			if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte(dbModule), 0o644); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(map[string]any{"binary": binaries[c.name], "module": mod,
				"workingDir": filepath.Join(t.TempDir(), "work"), "passEnv": []string{"TF_VAR_password"}})
			env := map[string]string{"PATH": os.Getenv("PATH"), "TF_VAR_password": secretValue}
			act, err := terraform.New(action.Settings{Instance: "tf", Config: raw,
				Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			rec := &recorder{}
			_, err = act.Apply(t.Context(), request("db", 1, `{"size":1}`, rec))
			if err == nil {
				t.Fatal("apply succeeded")
			}
			// The agent masks the whole secret wherever it is shown; a
			// piece of it is what it cannot find.
			shown := strings.ReplaceAll(err.Error()+"\n"+rec.all(), secretValue, "***")
			if !strings.Contains(shown, "xxxxxxxx") && !strings.Contains(shown, "yyyyyyyy") {
				t.Fatalf("the plugin showed too little for the test to mean anything: %q", shown)
			}
			for i := 0; i+6 <= len(secretValue); i++ {
				if piece := secretValue[i : i+6]; strings.Contains(shown, piece) {
					t.Fatalf("%q is shown, a piece of the secret:\n%.300s", piece, shown)
				}
			}
		})
	}
}
