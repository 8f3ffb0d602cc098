package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

const siteType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Site}
spec:
  action: web
  versions:
    - name: v1
      schema:
        type: object
        required: [replicas]
        properties:
          replicas: {type: integer}
          tier: {type: string, default: standard}
`

func site(name string, replicas int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: %s}\nspec: {replicas: %d}\n", name, replicas)
}

// recordingScript records every call it gets, one resource at a time as the
// agent runs them: a line per call in <name>.log (operation, trigger,
// generation, revision, spec from the environment) and the request from
// stdin in <name>.<operation>.<generation>.json. An apply prints outputs.
const recordingScript = `#!/bin/sh
set -eu
printf '%s %s %s %s %s\n' "$NO8S_OPERATION" "$NO8S_TRIGGER" "$NO8S_RESOURCE_GENERATION" \
	"$NO8S_RESOURCE_REVISION" "$NO8S_RESOURCE_SPEC" >>"$CALLS/$NO8S_RESOURCE_NAME.log"
cat >"$CALLS/$NO8S_RESOURCE_NAME.$NO8S_OPERATION.$NO8S_RESOURCE_GENERATION.json"
echo "$NO8S_OPERATION of $NO8S_RESOURCE_NAME done" >&2
if [ "$NO8S_OPERATION" = apply ]; then
	printf '{"url":"https://%s.example.com","generation":%s}\n' "$NO8S_RESOURCE_NAME" "$NO8S_RESOURCE_GENERATION"
fi
`

// TestEndToEndGitToExec follows a resource through its whole life, with a
// real Git repository (file://), PostgreSQL and an exec command: a commit
// creates it and the command applies it; a commit changes its spec and the
// command applies the new one; a commit removes it and the command destroys
// it, the row goes, its history stays. A resource beside it that does not
// change is applied once.
func TestEndToEndGitToExec(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	if err := os.Mkdir(calls, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "record.sh")
	if err := os.WriteFile(script, []byte(recordingScript), 0o755); err != nil {
		t.Fatal(err)
	}
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{
		"infra/types.yaml":      siteType,
		"infra/sites/shop.yaml": site("shop", 2),
		"infra/sites/blog.yaml": site("blog", 1),
		"README.md":             "# sites\n",
	})
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - name: infra
    git: {url: %q, branch: main, path: infra, interval: 1s}
actions:
  web:
    plugin: exec
    config: {command: [%q], timeout: 1m, env: {CALLS: %q}}
`, repo.URL(), script, calls)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)

	get := func(name string) (*store.Resource, error) {
		return st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: name})
	}
	// ready waits until the site is reconciled at generation gen.
	ready := func(agent *agentRun, name string, gen int64) *store.Resource {
		t.Helper()
		var r *store.Resource
		waitFor(t, 30*time.Second, agent, fmt.Sprintf("%s to be ready at generation %d", name, gen), func() (bool, string) {
			var err error
			r, err = get(name)
			if errors.Is(err, store.ErrNotFound) {
				return false, "not synced yet"
			} else if err != nil {
				t.Fatal(err)
			}
			return r.Generation == gen && reconciled(r), describe([]*store.Resource{r})
		})
		return r
	}
	logLines := func(name string) []string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(calls, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	request := func(name, op string, gen int64) map[string]any {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(calls, fmt.Sprintf("%s.%s.%d.json", name, op, gen)))
		if err != nil {
			t.Fatal(err)
		}
		var req map[string]any
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatalf("the request on stdin: %v\n%s", err, data)
		}
		return req
	}
	revision := func(commit string) string { return "main@sha1:" + commit }

	// A commit: the command gets the spec, the resource turns ready.
	first := repo.Commit("Add the shop and the blog")
	committed := time.Now()
	agent := startAgent(t, url, "--config", cfgPath)
	shop := ready(agent, "shop", 1)
	t.Logf("first commit to ready (agent start included): %v", time.Since(committed).Round(time.Millisecond))
	ready(agent, "blog", 1)
	if shop.ObservedGeneration != 1 || string(shop.Outputs) != `{"url":"https://shop.example.com","generation":1}` ||
		shop.StatusMessage != "apply of shop done" {
		t.Errorf("shop after the first commit: %s, outputs %s", describe([]*store.Resource{shop}), shop.Outputs)
	}
	spec1 := `{"replicas":2,"tier":"standard"}`
	if got, want := logLines("shop"), []string{"apply create 1 " + revision(first) + " " + spec1}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls for shop: %q, want %q", got, want)
	}
	req := request("shop", "apply", 1)
	res, _ := req["resource"].(map[string]any)
	if req["operation"] != "apply" || req["action"] != "web" || req["trigger"] != "create" || res == nil ||
		res["kind"] != "Site" || res["name"] != "shop" || res["apiVersion"] != "no8s.io/v1" || res["generation"] != 1.0 ||
		res["source"] != "infra" || res["revision"] != revision(first) || res["outputs"] != nil ||
		!reflect.DeepEqual(res["spec"], map[string]any{"replicas": 2.0, "tier": "standard"}) {
		t.Errorf("the apply request on stdin: %v", req)
	}

	// A spec change: generation 2, applied with the new spec.
	repo.Write(map[string]string{"infra/sites/shop.yaml": site("shop", 3)})
	second := repo.Commit("Scale the shop")
	committed = time.Now()
	shop = ready(agent, "shop", 2)
	t.Logf("spec change commit to ready: %v", time.Since(committed).Round(time.Millisecond))
	if shop.ObservedGeneration != 2 || string(shop.Outputs) != `{"url":"https://shop.example.com","generation":2}` {
		t.Errorf("shop after the change: %s, outputs %s", describe([]*store.Resource{shop}), shop.Outputs)
	}
	spec2 := `{"replicas":3,"tier":"standard"}`
	if got := logLines("shop"); len(got) != 2 || got[1] != "apply update 2 "+revision(second)+" "+spec2 {
		t.Errorf("calls for shop: %q", got)
	}
	// The request carries the outputs of the last success.
	res, _ = request("shop", "apply", 2)["resource"].(map[string]any)
	if res == nil || !reflect.DeepEqual(res["outputs"], map[string]any{"url": "https://shop.example.com", "generation": 1.0}) {
		t.Errorf("the second apply request's resource: %v", res)
	}

	// The file removed: Destroy runs, the row goes, the history stays.
	repo.Write(map[string]string{"infra/sites/shop.yaml": ""})
	repo.Commit("Retire the shop")
	committed = time.Now()
	waitFor(t, 30*time.Second, agent, "the shop to be destroyed", func() (bool, string) {
		r, err := get("shop")
		if errors.Is(err, store.ErrNotFound) {
			return true, ""
		} else if err != nil {
			t.Fatal(err)
		}
		return false, describe([]*store.Resource{r})
	})
	t.Logf("removal commit to destroyed: %v", time.Since(committed).Round(time.Millisecond))
	if got := logLines("shop"); len(got) != 3 || !strings.HasPrefix(got[2], "destroy delete 2 ") || !strings.HasSuffix(got[2], " "+spec2) {
		t.Errorf("calls for shop: %q", got)
	}
	if req := request("shop", "destroy", 2); req["operation"] != "destroy" || req["trigger"] != "delete" {
		t.Errorf("the destroy request: %v", req)
	}
	recs, err := st.ListReconcileRecords(t.Context(), shop.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		trigger  store.Trigger
		gen      int64
		revision string
	}{{store.TriggerDelete, 2, ""}, {store.TriggerUpdate, 2, revision(second)}, {store.TriggerCreate, 1, revision(first)}}
	if len(recs) != len(want) {
		t.Fatalf("history of the destroyed shop: %s", describeRecords(recs))
	}
	for i, w := range want {
		r := recs[i]
		if r.Trigger != w.trigger || r.Generation != w.gen || !r.Success || r.Phase != "completed" || r.Kind != "Site" ||
			r.Name != "shop" || (w.revision != "" && string(r.SourceRevision) != w.revision) {
			t.Errorf("history record %d: %+v, want %s of generation %d", i, r, w.trigger, w.gen)
		}
	}

	// The blog changed in none of the commits: applied once, still ready.
	blog, err := get("blog")
	if err != nil {
		t.Fatal(err)
	}
	if got := logLines("blog"); len(got) != 1 || !strings.HasPrefix(got[0], "apply create 1 ") || !reconciled(blog) ||
		blog.Generation != 1 || blog.Phase != manifest.PhaseReady {
		t.Errorf("blog: calls %q, %s", got, describe([]*store.Resource{blog}))
	}
	if code, _ := agent.stop(); code != 0 {
		t.Errorf("run exited %d", code)
	}
}
