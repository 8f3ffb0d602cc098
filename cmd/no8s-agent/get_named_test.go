package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// seedNamed syncs a source "kept" declaring the type Widget and the
// widgets w1 and w2 into a new PostgreSQL database, and returns its URL.
func seedNamed(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	typ := "apiVersion: no8s.io/v1\nkind: ResourceType\nmetadata: {name: Widget}\nspec:\n  group: example.com\n  versions:\n    - name: v1\n      schema: {type: object}\n"
	files := []manifest.File{{Path: "types.yaml", Data: []byte(typ)}}
	for _, name := range []string{"w1", "w2"} {
		files = append(files, manifest.File{Path: name + ".yaml", Data: []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + "}\nspec: {}\n")})
	}
	snap := &source.Snapshot{Revision: source.DigestRevision(files, nil), Files: files}
	if _, err := sync.New(st, nil).Sync(ctx, sync.Target{Name: "kept", Kind: store.SourceDir, Path: "/srv/kept"}, snap, false); err != nil {
		t.Fatal(err)
	}
	return url
}

// A get by name prints the object in -o json and -o yaml, as kubectl does;
// a get without one prints a list, of one object too.
func TestGetByNamePrintsTheObject(t *testing.T) {
	t.Parallel()
	url := seedNamed(t)
	for _, tt := range []struct {
		object, name, field, want string
	}{
		{"src", "kept", "name", "kept"},
		{"res", "w1", "name", "w1"},
		{"rt", "Widget", "name", "Widget"},
	} {
		for _, format := range []string{"json", "yaml"} {
			code, out, errOut := runCLI(t, "get", tt.object, tt.name, "-o", format, "--database", url)
			var obj map[string]any
			err := yaml.Unmarshal([]byte(out), &obj) // YAML reads JSON too
			if code != 0 || err != nil || obj[tt.field] != tt.want {
				t.Errorf("get %s %s -o %s: exit %d, %v; want the object with %s %q\nstdout:\n%s\nstderr:\n%s", tt.object, tt.name, format, code, err, tt.field, tt.want, out, errOut)
			}
			if format == "json" && !json.Valid([]byte(out)) {
				t.Errorf("get %s %s -o json: not JSON:\n%s", tt.object, tt.name, out)
			}
			// Without a name: a list, even of one.
			code, out, errOut = runCLI(t, "get", tt.object, "-o", format, "--database", url)
			var list []map[string]any
			if err := yaml.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) == 0 {
				t.Errorf("get %s -o %s: exit %d, %v; want a list\nstdout:\n%s\nstderr:\n%s", tt.object, format, code, err, out, errOut)
			}
		}
	}
}

// A get of a name that is not there fails, in every format, saying so on
// stderr, as kubectl does; a filter that matches nothing is an empty list.
func TestGetByNameNotFound(t *testing.T) {
	t.Parallel()
	url := seedNamed(t)
	for _, object := range []string{"types", "rt", "resources", "res", "sources", "src"} {
		for _, format := range []string{"table", "wide", "name", "json", "yaml"} {
			code, out, errOut := runCLI(t, "get", object, "nosuch", "-o", format, "--database", url)
			if code != 1 || out != "" || !strings.Contains(errOut, "Error from store (NotFound): ") || !strings.Contains(errOut, `"nosuch" not found`) {
				t.Errorf("get %s nosuch -o %s: exit %d, want 1 and NotFound\nstdout:\n%s\nstderr:\n%s", object, format, code, out, errOut)
			}
		}
	}
	if code, _, errOut := runCLI(t, "get", "res", "w1", "-n", "other", "--database", url); code != 1 || !strings.Contains(errOut, `resources "w1" not found in namespace "other"`) {
		t.Errorf("get res w1 -n other: exit %d\n%s", code, errOut)
	}
	// The watch does not start on what is not there.
	if code, _, errOut := runCLI(t, "get", "res", "nosuch", "-w", "--database", url, "--server", "http://127.0.0.1:1"); code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("get res nosuch -w: exit %d\n%s", code, errOut)
	}
	for _, args := range [][]string{{"get", "res", "--kind", "Nothing"}, {"get", "rt", "--source", "nosuch"}} {
		if code, out, errOut := runCLI(t, append(args, "--database", url)...); code != 0 || out != "" || !strings.Contains(errOut, "No resources found") {
			t.Errorf("%s: exit %d, want 0 and No resources found\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, out, _ := runCLI(t, "get", "res", "--kind", "Nothing", "-o", "json", "--database", url); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("get res --kind Nothing -o json: exit %d, %q; want []", code, out)
	}
}
