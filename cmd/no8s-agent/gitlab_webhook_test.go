package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// gitlabPushPayload is a Push Hook payload in GitLab's documented shape,
// for the project whose URLs GitLab would send for the repository served
// at base/name.
func gitlabPushPayload(base, name, ref, before, after string) string {
	host := strings.TrimPrefix(base, "http://")
	return fmt.Sprintf(`{"object_kind": "push", "event_name": "push", "before": %q, "after": %q, "ref": %q,
  "ref_protected": true, "checkout_sha": %q, "user_id": 4, "user_name": "Jane", "user_username": "jane",
  "project_id": 15,
  "project": {"id": 15, "name": %q, "web_url": "%s/%s", "git_ssh_url": "git@%s:%s.git", "git_http_url": "%s/%s.git",
    "namespace": "sites", "path_with_namespace": %q, "default_branch": "main"},
  "repository": {"name": %q, "url": "git@%s:%s.git", "homepage": "%s/%s",
    "git_http_url": "%s/%s.git", "git_ssh_url": "git@%s:%s.git"},
  "commits": [{"id": %q, "message": "Grow the shop\n", "title": "Grow the shop",
    "timestamp": "2026-03-14T15:09:00+01:00", "author": {"name": "Jane", "email": "jane@example.com"},
    "added": [], "modified": ["sites/shop.yaml"], "removed": []}],
  "total_commits_count": 1}`, before, after, ref, after,
		name, base, name, host, name, base, name, name,
		name, host, name, base, name, base, name, host, name, after)
}

// gitlabDelivery is one request as GitLab sends it: the secret token when
// token is set, and a Standard Webhooks signature when key is.
type gitlabDelivery struct {
	event, body, token string
	key                []byte
	id                 string
	at                 time.Time
	// badSignature signs another body than the one sent.
	badSignature bool
}

func (d gitlabDelivery) send(t *testing.T, base string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/hooks/gitlab", strings.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitLab/18.2.0")
	req.Header.Set("X-Gitlab-Event", d.event)
	if d.token != "" {
		req.Header.Set("X-Gitlab-Token", d.token)
	}
	if d.key != nil {
		ts := strconv.FormatInt(d.at.Unix(), 10)
		signed := d.body
		if d.badSignature {
			signed = strings.Replace(d.body, "refs/heads/main", "refs/heads/evil", 1)
		}
		mac := hmac.New(sha256.New, d.key)
		mac.Write([]byte(d.id + "." + ts + "." + signed))
		req.Header.Set("Idempotency-Key", d.id)
		req.Header.Set("webhook-id", d.id)
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// gitlabFixture is an agent syncing one Git source, polled once an hour,
// with GitLab webhooks configured as webhooksYAML says (%s in it are
// replaced by the variables holding the token and the signing key).
type gitlabFixture struct {
	repo    *gittest.Repo
	git     *gittest.Server
	name    string
	st      *postgres.Store
	agent   *agentRun
	base    string
	token   string
	keyText string
	key     []byte
}

func newGitLabFixture(t *testing.T, webhooksYAML string) *gitlabFixture {
	t.Helper()
	f := &gitlabFixture{token: "glht-" + rand.Text()}
	f.key = make([]byte, 32)
	if _, err := rand.Read(f.key); err != nil {
		t.Fatal(err)
	}
	f.keyText = "whsec_" + base64.StdEncoding.EncodeToString(f.key)
	f.repo = gittest.NewRepo(t)
	f.repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	f.repo.Commit("first")
	f.git = gittest.NewServer(t, filepath.Dir(f.repo.Dir), "bot", "git-pass-5e0a")
	f.name = filepath.Base(f.repo.Dir)
	remote := f.git.URL + "/" + f.name + "/.git"
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
webhooks: %s
actions: {web: {plugin: noop}}
`, remote, setSecret(t, "bot"), setSecret(t, "git-pass-5e0a"),
		fmt.Sprintf(webhooksYAML, setSecret(t, f.token), setSecret(t, f.keyText)))
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	f.st = openTestStore(t, url)
	f.agent = startAgent(t, url, "--config", path)
	f.base = f.agent.addr()
	waitFor(t, 30*time.Second, f.agent, "the first sync", func() (bool, string) {
		return strings.HasSuffix(f.revision(t), f.repo.Head()), f.revision(t)
	})
	f.waitMetric(t, `no8s_sync_runs_total{result="applied",source="sites"} 1`)
	return f
}

func (f *gitlabFixture) revision(t *testing.T) string {
	src, err := f.st.GetSource(t.Context(), "sites")
	if err != nil {
		return ""
	}
	return string(src.LastAppliedRevision)
}

func (f *gitlabFixture) generation(t *testing.T) int64 {
	t.Helper()
	r, err := f.st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	return r.Generation
}

// commit changes the shop and returns the new head and the old one.
func (f *gitlabFixture) commit(replicas int) (head, before string) {
	before = f.repo.Head()
	f.repo.Write(map[string]string{"sites/shop.yaml": site("shop", replicas)})
	return f.repo.Commit(fmt.Sprintf("%d replicas", replicas)), before
}

func (f *gitlabFixture) push(before, after string) string {
	return gitlabPushPayload(f.git.URL, f.name, "refs/heads/main", before, after)
}

func (f *gitlabFixture) metrics(t *testing.T) string {
	_, text := curl(t, "GET", f.base+"/metrics", "", "")
	return text
}

func (f *gitlabFixture) waitMetric(t *testing.T, line string) {
	t.Helper()
	waitFor(t, 30*time.Second, f.agent, line, func() (bool, string) {
		return strings.Contains(f.metrics(t), line+"\n"), "not yet"
	})
}

// refused sends deliveries that must each be 401 and checks that none of
// them fetched or synced anything.
func (f *gitlabFixture) refused(t *testing.T, head string, deliveries map[string]gitlabDelivery) {
	t.Helper()
	f.git.Take()
	for name, d := range deliveries {
		if code, body := d.send(t, f.base); code != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want 401 with an error", name, code, body)
		}
	}
	if rev := f.revision(t); strings.HasSuffix(rev, head) {
		t.Fatalf("refused deliveries synced %s", rev)
	}
	if g := f.generation(t); g != 1 {
		t.Errorf("generation %d after refused deliveries, want 1", g)
	}
	if got := f.git.Take(); len(got) != 0 {
		t.Errorf("refused deliveries fetched: %v", got)
	}
}

// TestGitLabWebhookToken checks that a push with the secret token syncs
// the source at once, although it is polled once an hour, and that a
// wrong or missing token is refused and triggers nothing.
func TestGitLabWebhookToken(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, "{gitlabTokenEnv: %s}  # %s unused")
	head, before := f.commit(3)
	body := f.push(before, head)
	f.refused(t, head, map[string]gitlabDelivery{
		"no token":      {event: "Push Hook", body: body},
		"wrong token":   {event: "Push Hook", body: body, token: f.token[:len(f.token)-1] + "x"},
		"shorter token": {event: "Push Hook", body: body, token: f.token[:5]},
		"signed only":   {event: "Push Hook", body: body, key: f.key, id: "msg-1", at: time.Now()},
	})
	if code, resp := (gitlabDelivery{event: "Push Hook", body: body, token: f.token}).send(t, f.base); code != http.StatusOK ||
		!strings.Contains(resp, `"triggered":["sites"]`) {
		t.Fatalf("push with the token: %d %s", code, resp)
	}
	waitFor(t, 30*time.Second, f.agent, "the push to be synced", func() (bool, string) {
		return strings.HasSuffix(f.revision(t), head), f.revision(t)
	})
	if g := f.generation(t); g != 2 {
		t.Errorf("generation %d after the push, want 2", g)
	}
	f.waitMetric(t, `no8s_sync_runs_total{result="applied",source="sites"} 2`)
	text := f.metrics(t)
	for _, want := range []string{
		`no8s_webhook_deliveries_total{event="gitlab_push",result="triggered"} 1`,
		`no8s_webhook_deliveries_total{event="gitlab_unknown",result="unauthorized"} 4`,
		`no8s_webhook_deliveries_total{event="gitlab_tag_push",result="triggered"} 0`,
		`no8s_webhook_deliveries_total{event="gitlab_merge_request",result="ignored"} 0`,
		`no8s_http_requests_total{code="401",method="post",route="POST /hooks/gitlab"} 4`,
		`no8s_sync_runs_total{result="unchanged",source="sites"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// GitHub is not configured: its series are not started.
	if strings.Contains(text, `event="push"`) {
		t.Error("/metrics has GitHub's series")
	}
	// No source previews merge requests: the merge request hook is
	// acknowledged and ignored.
	if code, resp := (gitlabDelivery{event: "Merge Request Hook", body: `{"object_kind": "merge_request"}`, token: f.token}).send(t, f.base); code != http.StatusAccepted {
		t.Errorf("merge request: %d %s, want 202", code, resp)
	}
	f.agent.stop()
	if log := f.agent.log.String(); strings.Contains(log, f.token) || !strings.Contains(log, "GitLab webhook delivery") {
		t.Errorf("the log shows the token, or no delivery line")
	}
}

// TestGitLabWebhookSigned checks signed deliveries with a token required
// too: a good one syncs at once, a bad signature or a stale one is
// refused, and a replayed webhook-id is acted on once.
func TestGitLabWebhookSigned(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, "{gitlabTokenEnv: %s, gitlabSigningKeyEnv: %s}")
	head, before := f.commit(3)
	body := f.push(before, head)
	good := gitlabDelivery{event: "Push Hook", body: body, token: f.token, key: f.key, id: "msg-" + rand.Text(), at: time.Now()}
	bad, stale, unsigned, otherKey := good, good, good, good
	bad.badSignature = true
	stale.at = time.Now().Add(-6 * time.Minute)
	unsigned.key = nil
	otherKey.key = []byte("an attacker's key of 32 bytes...")
	f.refused(t, head, map[string]gitlabDelivery{
		"signature over another body": bad, "stale": stale, "token but no signature": unsigned, "another key": otherKey,
	})
	if code, resp := good.send(t, f.base); code != http.StatusOK || !strings.Contains(resp, `"triggered":["sites"]`) {
		t.Fatalf("signed push: %d %s", code, resp)
	}
	waitFor(t, 30*time.Second, f.agent, "the signed push to be synced", func() (bool, string) {
		return strings.HasSuffix(f.revision(t), head), f.revision(t)
	})
	f.waitMetric(t, `no8s_sync_runs_total{result="applied",source="sites"} 2`)

	// Replayed: acknowledged, not acted on.
	for range 2 {
		if code, resp := good.send(t, f.base); code != http.StatusOK || !strings.Contains(resp, `"duplicate":true`) {
			t.Fatalf("replayed push: %d %s", code, resp)
		}
	}
	// A new push under a new id is synced; had the replays triggered
	// syncs, they would be counted beside it.
	head3, before3 := f.commit(4)
	next := gitlabDelivery{event: "Push Hook", body: f.push(before3, head3), token: f.token, key: f.key,
		id: "msg-" + rand.Text(), at: time.Now()}
	if code, resp := next.send(t, f.base); code != http.StatusOK || !strings.Contains(resp, `"triggered":["sites"]`) {
		t.Fatalf("second signed push: %d %s", code, resp)
	}
	f.waitMetric(t, `no8s_sync_runs_total{result="applied",source="sites"} 3`)
	if g := f.generation(t); g != 3 {
		t.Errorf("generation %d, want 3", g)
	}
	text := f.metrics(t)
	for _, want := range []string{
		`no8s_webhook_deliveries_total{event="gitlab_push",result="triggered"} 2`,
		`no8s_webhook_deliveries_total{event="gitlab_push",result="duplicate"} 2`,
		`no8s_webhook_deliveries_total{event="gitlab_unknown",result="unauthorized"} 4`,
		`no8s_sync_runs_total{result="unchanged",source="sites"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
