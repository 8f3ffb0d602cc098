package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// pushPayload is the part of GitHub's push event the agent reads.
func pushPayload(cloneURL, ref, after string) string {
	return fmt.Sprintf(`{"ref": %q, "after": %q, "deleted": false,
  "repository": {"full_name": "acme/sites", "clone_url": %q, "html_url": "https://github.com/acme/sites",
    "default_branch": "main", "master_branch": "main"},
  "head_commit": {"id": %q, "message": "Grow the shop"}}`, ref, after, cloneURL, after)
}

// deliver posts a webhook as GitHub does, signed with secret unless it is empty.
func deliver(t *testing.T, base, event, body, secret string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/hooks/github", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("delivery-%d", time.Now().UnixNano()))
	if secret != "" {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebhookTriggersSync checks that a signed push syncs the matching
// source at once, although its poll interval is an hour, and that a
// forged or unsigned one is refused.
func TestWebhookTriggersSync(t *testing.T) {
	dir := t.TempDir()
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	repo.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(repo.Dir), "bot", "git-pass-73c1")
	remote := gs.URL + "/" + filepath.Base(repo.Dir) + "/.git"
	const secret = "hook-secret-42af"
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
webhooks: {githubSecretEnv: %s}
actions: {web: {plugin: noop}}
`, remote, setSecret(t, "bot"), setSecret(t, "git-pass-73c1"), setSecret(t, secret))
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", path)
	base := agent.addr()
	revision := func() string {
		src, err := st.GetSource(t.Context(), "sites")
		if err != nil {
			return ""
		}
		return string(src.LastAppliedRevision)
	}
	waitFor(t, 30*time.Second, agent, "the first sync", func() (bool, string) {
		return strings.HasSuffix(revision(), repo.Head()), revision()
	})

	repo.Write(map[string]string{"sites/shop.yaml": site("shop", 3)})
	head := repo.Commit("grow the shop")
	body := pushPayload(remote, "refs/heads/main", head)
	if code := deliver(t, base, "push", body, ""); code != http.StatusUnauthorized {
		t.Errorf("unsigned push = %d, want 401", code)
	}
	if code := deliver(t, base, "push", body, "not-the-secret"); code != http.StatusUnauthorized {
		t.Errorf("forged push = %d, want 401", code)
	}
	if rev := revision(); strings.HasSuffix(rev, head) {
		t.Fatalf("refused pushes synced %s", rev)
	}
	if code := deliver(t, base, "ping", `{"zen": "Keep it logically awesome."}`, secret); code != http.StatusOK {
		t.Errorf("ping = %d, want 200", code)
	}
	if code := deliver(t, base, "push", body, secret); code != http.StatusOK {
		t.Fatalf("signed push = %d, want 200", code)
	}
	waitFor(t, 30*time.Second, agent, "the push to be synced", func() (bool, string) {
		return strings.HasSuffix(revision(), head), revision()
	})
	r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: "shop"})
	if err != nil || r.Generation != 2 {
		t.Fatalf("shop after the push: %+v %v", r, err)
	}
	// The deliveries and syncs are counted. The sync is counted once it
	// has returned, a moment after its revision is in the store.
	var metricsText string
	waitFor(t, 30*time.Second, agent, "the sync to be counted", func() (bool, string) {
		_, metricsText = curl(t, "GET", base+"/metrics", "", "")
		return strings.Contains(metricsText, `no8s_sync_runs_total{result="applied",source="sites"} 2`), "not yet"
	})
	for _, want := range []string{
		`no8s_webhook_deliveries_total{event="push",result="triggered"} 1`,
		`no8s_webhook_deliveries_total{event="unknown",result="unauthorized"} 2`,
		`no8s_webhook_deliveries_total{event="ping",result="pong"} 1`,
		`no8s_sync_runs_total{result="applied",source="sites"} 2`,
		`no8s_source_last_applied_timestamp_seconds{source="sites"}`,
		`no8s_http_requests_total{code="401",method="post",route="POST /hooks/github"} 2`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
