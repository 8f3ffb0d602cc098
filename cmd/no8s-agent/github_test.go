package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

const deployType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Site}
spec:
  action: deploy
  versions:
    - name: v1
      schema:
        type: object
        properties:
          replicas: {type: integer, default: 1}
`

// TestGitHubActionsThroughTheAgent runs the github_actions plugin in the
// agent against a fake GitHub: a successful run makes its resource ready
// with the artifact's outputs, a failed one fails it with the run and job
// named and a retry scheduled, and a fresh agent destroys a removed
// resource by dispatching operation=destroy. The token shows nowhere.
func TestGitHubActionsThroughTheAgent(t *testing.T) {
	t.Parallel()
	const ghToken = "ghp_agentT0kenNeverShown"
	fake := githubtest.New(t, githubtest.Options{Token: ghToken, ReturnRunDetails: true, Script: func(d githubtest.Dispatch) githubtest.Script {
		if d.Inputs["name"] == "broken" {
			return githubtest.Script{Conclusion: "failure", Polls: 1,
				Jobs: []githubtest.Job{{Name: "deploy", Conclusion: "failure", Steps: []string{"checkout", "rollout"}}}}
		}
		out := fmt.Sprintf(`{"url": "https://%s.example.com", "operation": %q}`, d.Inputs["name"], d.Inputs["operation"])
		return githubtest.Script{Conclusion: "success", Polls: 2, Jobs: []githubtest.Job{{Name: "deploy", Conclusion: "success", Steps: []string{"rollout"}}},
			Artifacts: []githubtest.Artifact{{Name: "no8s-outputs", Files: map[string][]byte{"outputs.json": []byte(out)}}}}
	}})
	o := fake.Options()
	repo := t.TempDir()
	for name, data := range map[string]string{
		"types.yaml":  deployType,
		"shop.yaml":   "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: shop}\nspec: {replicas: 2}\n",
		"broken.yaml": "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: broken}\nspec: {}\n",
	} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`sources:
  - {name: sites, dir: %q}
actions:
  deploy:
    plugin: github_actions
    config: {owner: %s, repo: %s, workflow: %s, apiURL: %q, tokenEnv: %s, pollInterval: 10ms, timeout: 30s}
reconcile: {backoff: {initial: 1h, max: 2h}}
`, repo, o.Owner, o.Repo, o.Workflow, fake.BaseURL(), setSecret(t, ghToken))
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	get := func(name string) *store.Resource {
		r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: name})
		if err != nil {
			return nil
		}
		return r
	}
	first := startAgent(t, url, "--config", path)
	waitFor(t, 30*time.Second, first, "shop ready and broken failed", func() (bool, string) {
		shop, broken := get("shop"), get("broken")
		if shop == nil || broken == nil {
			return false, "not synced"
		}
		return shop.Phase == manifest.PhaseReady && broken.Phase == manifest.PhaseFailed, describe([]*store.Resource{shop, broken})
	})
	shop, broken := get("shop"), get("broken")
	if !strings.Contains(string(shop.Outputs), `"url":"https://shop.example.com"`) || !strings.Contains(string(shop.Outputs), `"conclusion":"success"`) {
		t.Errorf("shop outputs = %s", shop.Outputs)
	}
	if c := manifest.FindCondition(shop.Conditions, "WorkflowRun"); c == nil || c.Status != manifest.ConditionTrue {
		t.Errorf("shop conditions = %+v", shop.Conditions)
	}
	if !strings.Contains(broken.StatusMessage, "/actions/runs/") || !strings.Contains(broken.StatusMessage, `job "deploy" failure at step "rollout"`) ||
		broken.RetryCount != 1 || broken.NextReconcileAt == nil || time.Until(*broken.NextReconcileAt) < 50*time.Minute {
		t.Errorf("broken = %s, retry %d at %v", broken.StatusMessage, broken.RetryCount, broken.NextReconcileAt)
	}
	if code, _ := first.stop(); code != 0 {
		t.Fatalf("first agent exited %d", code)
	}

	// A fresh agent knows nothing of the runs; removing the file destroys
	// shop through the workflow all the same.
	second := startAgent(t, url, "--config", path)
	if err := os.Remove(filepath.Join(repo, "shop.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, second, "shop destroyed", func() (bool, string) {
		return get("shop") == nil, "still there"
	})
	ds := fake.Dispatches()
	last := ds[len(ds)-1]
	if last.Inputs["operation"] != "destroy" || last.Inputs["name"] != "shop" || last.Inputs["spec"] != `{"replicas":2}` {
		t.Errorf("last dispatch = %+v", last)
	}
	records, err := st.ListReconcileRecords(t.Context(), shop.ID, 10)
	if err != nil || len(records) != 2 || records[0].Trigger != store.TriggerDelete || !records[0].Success ||
		!strings.Contains(string(records[0].Outputs), `"operation":"destroy"`) {
		t.Fatalf("shop history = %+v %v", records, err)
	}
	if code, _ := second.stop(); code != 0 {
		t.Fatalf("second agent exited %d", code)
	}

	var seen strings.Builder
	seen.WriteString(first.log.String() + second.log.String())
	for _, name := range []string{"broken"} {
		r := get(name)
		fmt.Fprintf(&seen, "%s %s %+v\n", r.StatusMessage, r.Outputs, r.Conditions)
		recs, _ := st.ListReconcileRecords(t.Context(), r.ID, 10)
		for _, h := range recs {
			fmt.Fprintf(&seen, "%s %s\n", h.Error, h.Outputs)
		}
	}
	for _, h := range records {
		fmt.Fprintf(&seen, "%s %s\n", h.Error, h.Outputs)
	}
	if strings.Contains(seen.String(), ghToken) {
		t.Error("the GitHub token shows in a log line, a status, the outputs or the history")
	}
	downloads := 0
	for _, r := range fake.Requests() {
		switch {
		case strings.HasPrefix(r.Path, "/_downloads/"):
			downloads++
			if r.Authorization != "" {
				t.Errorf("the artifact download from a signed URL carried Authorization")
			}
		case r.Authorization != "Bearer "+ghToken:
			t.Errorf("%s %s sent Authorization %q", r.Method, r.Path, r.Authorization)
		}
	}
	if downloads == 0 {
		t.Error("no artifact was downloaded")
	}
}
