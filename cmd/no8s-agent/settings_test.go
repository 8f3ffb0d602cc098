package main

import (
	"context"
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

// TestReadCommandsNeedOnlyTheDatabase reads and changes the store with a
// configuration that names secrets none of whose variables is set (Git,
// pull-request, API, webhook, notification and admission secrets): every
// command but run needs only the database and listen settings, and run
// still refuses to start without them, naming each.
func TestReadCommandsNeedOnlyTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	s := sync.New(st, nil)
	typ := "apiVersion: no8s.io/v1\nkind: ResourceType\nmetadata: {name: Widget}\nspec:\n  group: example.com\n  versions:\n    - name: v1\n      schema: {type: object}\n"
	item := func(name string) manifest.File {
		return manifest.File{Path: name + ".yaml", Data: []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + "}\nspec: {}\n")}
	}
	for _, src := range []struct {
		name  string
		files []manifest.File
	}{
		{"kept", []manifest.File{{Path: "types.yaml", Data: []byte(typ)}, item("k1")}},
		{"gone", []manifest.File{item("g1")}},
	} {
		snap := &source.Snapshot{Revision: source.DigestRevision(src.files, nil), Files: src.files}
		if _, err := s.Sync(ctx, sync.Target{Name: src.name, Kind: store.SourceDir, Path: "/srv/" + src.name}, snap, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.MarkOrphans(ctx, []string{"kept", "infra"}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	folder := filepath.Join(dir, "kept")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []manifest.File{{Path: "types.yaml", Data: []byte(typ)}, item("k1"), item("k2")} {
		if err := os.WriteFile(filepath.Join(folder, f.Path), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unset := func(what string) string {
		name := fmt.Sprintf("NO8S_TEST_UNSET_%s_%d", what, time.Now().UnixNano())
		if _, ok := os.LookupEnv(name); ok {
			t.Fatalf("%s is set", name)
		}
		return name
	}
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`database: %q
listen: 127.0.0.1:1
sources:
  - name: kept
    dir: %q
  - name: infra
    git:
      url: https://github.com/acme/infra.git
      branch: main
      auth: {tokenEnv: %s}
    pullRequests: {enabled: true, tokenEnv: %s}
api: {writeTokenEnv: %s, readTokenEnv: %s}
webhooks: {githubSecretEnv: %s}
notifications:
  providers:
    status: {type: github, tokenEnv: %s}
    hook: {type: webhook, urlEnv: %s, secretEnv: %s}
admission:
  - {name: tickets, url: "http://127.0.0.1:1/review", type: validating, secretEnv: %s}
`, url, folder, unset("GIT"), unset("PR"), unset("WRITE"), unset("READ"), unset("WEBHOOK"), unset("STATUS"),
		unset("HOOKURL"), unset("HOOKSECRET"), unset("ADMISSION"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	with := func(args ...string) []string { return append(args, "--config", cfgPath) }
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{with("get", "resources", "-o", "name"), 0, "Widget/k1\n"},
		{with("get", "res", "k1"), 0, "k1"},
		{with("get", "sources", "-o", "name"), 0, "source/kept\n"},
		{with("get", "types", "-o", "name"), 0, "resourcetype/Widget/v1\n"},
		{with("get", "history"), 0, "kept"},
		{with("get", "history", "--resource", "Widget/k1"), 0, ""},
		{with("diff", folder, "--source", "kept"), exitChanges, "k2"},
		{with("diff", folder, "--source", "kept", "--base", folder), 0, ""},
		{with("delete", "source", "gone", "--mode", "forget"), 0, "1 resource(s) forgotten"},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: exit %d (want %d), want %q in stdout\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.code, tt.want, out, errOut)
		}
	}
	// What cannot be masked, as its value is not known here, is said.
	if _, _, errOut := runCLI(t, with("get", "res")...); !strings.Contains(errOut, "warning: NO8S_TEST_UNSET_GIT_") {
		t.Errorf("get res: no warning that the unset secrets cannot be masked:\n%s", errOut)
	}
	// The verbs that talk to an agent read its address from the
	// configuration: nothing listens there, and that is what they say.
	for _, args := range [][]string{with("describe", "source", "kept"), with("sync", "source", "kept"),
		with("suspend", "resource", "Widget/k1"), with("get", "res", "-w")} {
		code, out, errOut := runCLI(t, args...)
		if code != 1 || !strings.Contains(errOut, "connection refused") || strings.Contains(errOut, cfgPath) {
			t.Errorf("%s: exit %d, want connection refused\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	// The agent itself needs every secret its configuration names.
	code, out, errOut := runCLI(t, "run", "--config", cfgPath)
	for _, key := range []string{"sources[1].git.auth.tokenEnv", "api.writeTokenEnv", "webhooks.githubSecretEnv",
		"notifications.providers.status.tokenEnv", "admission[0].secretEnv"} {
		if code != 1 || !strings.Contains(errOut, key+": environment variable NO8S_TEST_UNSET_") {
			t.Errorf("run: exit %d, want it refused naming %s\nstdout:\n%s\nstderr:\n%s", code, key, out, errOut)
		}
	}
}
