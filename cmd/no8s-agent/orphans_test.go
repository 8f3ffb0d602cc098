package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// TestOrphanedThroughTheAgent: a source in the store that the agent's
// configuration no longer lists is orphaned as the agent starts; describe
// shows its resource orphaned and says what to do, and reconcile is refused
// with why instead of being accepted and never run.
func TestOrphanedThroughTheAgent(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	const typ = "apiVersion: no8s.io/v1\nkind: ResourceType\nmetadata: {name: Gadget}\nspec:\n  versions:\n    - name: v1\n      schema: {type: object}\n"
	if err := os.WriteFile(filepath.Join(repo, "types.yaml"), []byte(typ), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenEnv := setSecret(t, "orphans-write-token")
	cfgPath := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("sources:\n  - {name: local, dir: %q}\napi: {writeTokenEnv: %s}\n", repo, tokenEnv)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	// A source an earlier configuration listed, with the type in its own
	// files, and one resource.
	files := []manifest.File{{Path: "types.yaml", Data: []byte(typ)},
		{Path: "g.yaml", Data: []byte("apiVersion: no8s.io/v1\nkind: Gadget\nmetadata: {name: left}\nspec: {}\n")}}
	snap := &source.Snapshot{Revision: source.DigestRevision(files, nil), Files: files}
	if _, err := sync.New(st, nil).Sync(t.Context(), sync.Target{Name: "old", Kind: store.SourceDir, Path: "/srv/old"}, snap, false); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, url, "--config", cfgPath)
	base := agent.addr()
	srv := []string{"--server", base, "--token-env", tokenEnv}
	var out, errOut string
	waitFor(t, 30*time.Second, agent, "describe to show Gadget/left orphaned", func() (bool, string) {
		var code int
		code, out, errOut = runCLI(t, append([]string{"describe", "resource", "Gadget/left"}, srv...)...)
		return code == 0 && strings.Contains(out, "Orphaned:"), out + errOut
	})
	for _, want := range []string{",orphaned", "no agent's configuration lists source old", "delete source old"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut := runCLI(t, append([]string{"reconcile", "resource", "Gadget/left"}, srv...)...)
	if code == 0 || !strings.Contains(errOut, "its source old is orphaned") || !strings.Contains(errOut, "409") && !strings.Contains(errOut, "onflict") {
		t.Errorf("reconcile of an orphaned source's resource: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
