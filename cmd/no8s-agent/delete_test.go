package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// seedOrphans makes an embedded store with the example's resource type in
// source kept, and two resources in each of the sources gone and doomed,
// which are orphaned.
func seedOrphans(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "no8s.db")
	st, err := openStore(ctx, path, migrateStore, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := sync.New(st, nil)
	typ := "apiVersion: no8s.io/v1\nkind: ResourceType\nmetadata: {name: Widget}\nspec:\n  group: example.com\n  versions:\n    - name: v1\n      schema: {type: object}\n"
	item := func(name string) manifest.File {
		return manifest.File{Path: name + ".yaml", Data: []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + "}\nspec: {}\n")}
	}
	// kept first: the others use its type.
	for _, src := range []struct {
		name  string
		files []manifest.File
	}{
		{"kept", []manifest.File{{Path: "types.yaml", Data: []byte(typ)}}},
		{"gone", []manifest.File{item("g1"), item("g2")}},
		{"doomed", []manifest.File{item("d1"), item("d2")}},
	} {
		snap := &source.Snapshot{Revision: source.DigestRevision(src.files, nil), Files: src.files}
		if _, err := s.Sync(ctx, sync.Target{Name: src.name, Kind: store.SourceDir, Path: "/srv/" + src.name}, snap, false); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestDeleteSourceCLI(t *testing.T) {
	t.Parallel()
	path := seedOrphans(t)
	ctx := context.Background()
	st, err := openStore(ctx, path, readStore, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sync.New(st, nil).MarkOrphans(ctx, []string{"kept"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(cfg, []byte("database: "+path+"\nsources:\n  - name: kept\n    dir: /srv/kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "get", "sources", "--database", path)
	if code != 0 || strings.Count(out, "orphaned") != 2 {
		t.Fatalf("get sources: exit %d, %s %s; want gone and doomed orphaned", code, out, errOut)
	}
	// Their resources say so in STATUS; the kept source's type is no
	// resource.
	code, out, errOut = runCLI(t, "get", "resources", "--database", path)
	if code != 0 || strings.Count(out, ",orphaned") != 4 {
		t.Fatalf("get resources: exit %d, %s %s; want 4 orphaned", code, out, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) < 4 || !strings.HasSuffix(f[3], ",orphaned") {
			t.Errorf("get resources row %q: want STATUS <phase>,orphaned", line)
		}
	}
	if code, out, errOut := runCLI(t, "delete", "--help"); code != 0 || !strings.Contains(out+errOut, "-mode") {
		t.Errorf("delete --help: exit %d, %s%s", code, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"delete", "source", "gone", "--database", path}, "--mode"},
		{[]string{"delete", "source", "gone", "--mode", "erase", "--database", path}, "forget"},
		{[]string{"delete", "sources", "--mode", "forget", "--database", path}, "delete source NAME"},
		{[]string{"delete", "source", "nope", "--mode", "forget", "--database", path}, "not found"},
		{[]string{"delete", "source", "kept", "--mode", "forget", "--config", cfg}, "in the configuration"},
		{[]string{"delete", "source", "kept", "--mode", "forget", "--database", path}, "not orphaned"},
		{[]string{"delete", "source", "doomed", "--mode", "prune", "--database", path}, "--approve"},
		// Without the agents' configuration, the CLI does not know their
		// admission hooks: a prune would go unreviewed unless asked for.
		{[]string{"delete", "source", "doomed", "--mode", "prune", "--approve", "--database", path}, "--no-admission"},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a failure saying %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
	code, out, errOut = runCLI(t, "delete", "source", "gone", "--mode", "forget", "--config", cfg)
	if code != 0 || !strings.Contains(out, "2 resource(s) forgotten") {
		t.Fatalf("forget: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "delete", "source", "doomed", "--mode", "prune", "--approve", "--no-admission", "--database", path)
	if code != 0 || !strings.Contains(out, "2 resource(s) to destroy") {
		t.Fatalf("prune: exit %d, %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "get", "resources", "--database", path)
	if code != 0 || strings.Contains(out, "g1") || strings.Count(out, "deleting") != 2 {
		t.Fatalf("resources after forget and prune: %s", out)
	}
}
