package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

const (
	glToken  = "glht-4b7e19-never-show-me"
	glHost   = "gitlab.example.com"
	zeroSHA1 = "0000000000000000000000000000000000000000"
)

// glKeyBytes and glKey are a signing key as GitLab makes them: 32 random
// bytes, base64, behind whsec_.
var (
	glKeyBytes = func() []byte { s := sha256.Sum256([]byte("no8s gitlab test key")); return s[:] }()
	glKey      = "whsec_" + base64.StdEncoding.EncodeToString(glKeyBytes)
	// glNow is the handlers' clock in the signed tests.
	glNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
)

// glSources follow project g/p (a group) in every URL spelling, and
// projects whose paths are like it: g/p2, g/sub/p (a subgroup) and one
// deeper still, plus g/p on another host.
var glSources = []Source{
	{Name: "p-main", URL: "https://" + glHost + "/g/p.git", Branch: "main"},
	{Name: "p-main-scp", URL: "git@" + glHost + ":G/P.git", Branch: "main"},
	{Name: "p-dev-ssh", URL: "ssh://git@" + glHost + ":2222/g/p.git", Branch: "dev"},
	{Name: "p-default", URL: "https://oauth2:glpat-xyz@" + glHost + "/g/p"},
	{Name: "p-tag", URL: "https://" + glHost + "/g/p.git", Tag: "v1.2.3"},
	{Name: "p-semver", URL: "https://" + glHost + "/g/p.git", SemVer: ">=1.0.0 <2.0.0"},
	{Name: "p-pinned", URL: "https://" + glHost + "/g/p.git", Branch: "main", Commit: "0123456789abcdef0123456789abcdef01234567"},
	{Name: "p2-main", URL: "https://" + glHost + "/g/p2.git", Branch: "main"},
	{Name: "sub-p-main", URL: "git@" + glHost + ":g/sub/p.git", Branch: "main"},
	{Name: "sub-p-main-ssh", URL: "ssh://git@" + glHost + ":2222/g/sub/p.git", Branch: "main"},
	{Name: "deep-main", URL: "https://" + glHost + "/a/b/c/d/p.git", Branch: "main"},
	{Name: "other-host", URL: "https://gitlab.other.example/g/p.git", Branch: "main"},
}

func newGitLabHandler(t *testing.T, opts GitLabOptions) (*gitLab, *recorder) {
	t.Helper()
	rec := &recorder{}
	if opts.Sources == nil {
		opts.Sources = glSources
	}
	opts.Trigger = rec.trigger
	opts.OnDelivery = rec.onDelivery
	h := NewGitLab(opts).(*gitLab)
	h.now = func() time.Time { return glNow }
	return h, rec
}

// glProject is a payload's project object in the shape GitLab's webhook
// events documentation shows, for the project at path on glHost.
func glProject(path, defaultBranch string) map[string]any {
	return map[string]any{
		"id": 15, "name": path[strings.LastIndexByte(path, '/')+1:], "description": "",
		"web_url":    "http://" + glHost + "/" + path,
		"avatar_url": nil,
		// GitLab's SSH URLs are scp-like even when its SSH port is not 22.
		"git_ssh_url":         "git@" + glHost + ":" + path + ".git",
		"git_http_url":        "http://" + glHost + "/" + path + ".git",
		"namespace":           "G",
		"visibility_level":    0,
		"path_with_namespace": path,
		"default_branch":      defaultBranch,
		"homepage":            "http://" + glHost + "/" + path,
		"url":                 "git@" + glHost + ":" + path + ".git",
		"ssh_url":             "git@" + glHost + ":" + path + ".git",
		"http_url":            "http://" + glHost + "/" + path + ".git",
	}
}

func glRepository(path string) map[string]any {
	return map[string]any{
		"name": path[strings.LastIndexByte(path, '/')+1:], "description": "",
		"url":              "ssh://git@" + glHost + "/" + path + ".git",
		"homepage":         "http://" + glHost + "/" + path,
		"git_http_url":     "http://" + glHost + "/" + path + ".git",
		"git_ssh_url":      "git@" + glHost + ":" + path + ".git",
		"visibility_level": 0,
	}
}

// glPushBody is a Push Hook (kind push) or Tag Push Hook (kind tag_push)
// payload in GitLab's documented shape.
func glPushBody(t *testing.T, kind, ref, after string, project, repository map[string]any) []byte {
	t.Helper()
	checkout := any(after)
	commits := []any{map[string]any{
		"id": after, "message": "Grow the shop\n", "title": "Grow the shop",
		"timestamp": "2026-03-14T15:09:00+01:00",
		"url":       "http://" + glHost + "/g/p/-/commit/" + after,
		"author":    map[string]any{"name": "Jane", "email": "jane@example.com"},
		"added":     []string{"sites/shop.yaml"}, "modified": []string{}, "removed": []string{},
	}}
	if zeroSHA(after) {
		checkout, commits = nil, []any{}
	}
	b, err := json.Marshal(map[string]any{
		"object_kind": kind, "event_name": kind,
		"before": "95790bf891e76fee5e1747ab589903a6a1f80f22", "after": after,
		"ref": ref, "ref_protected": true, "checkout_sha": checkout, "message": nil,
		"user_id": 4, "user_name": "Jane", "user_username": "jane", "user_email": "jane@example.com",
		"user_avatar": "https://secure.gravatar.com/avatar/x", "project_id": 15,
		"project": project, "repository": repository,
		"commits": commits, "total_commits_count": len(commits),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func glPush(t *testing.T, ref, path string) []byte {
	t.Helper()
	return glPushBody(t, "push", ref, "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", glProject(path, "main"), glRepository(path))
}

// glMergeRequestBody is a Merge Request Hook payload in GitLab's
// documented shape.
func glMergeRequestBody(t *testing.T) []byte {
	t.Helper()
	p := glProject("g/p", "main")
	b, err := json.Marshal(map[string]any{
		"object_kind": "merge_request", "event_type": "merge_request",
		"user":       map[string]any{"id": 1, "name": "Administrator", "username": "root", "email": "admin@example.com"},
		"project":    p,
		"repository": map[string]any{"name": "p", "url": p["git_http_url"], "description": "", "homepage": p["web_url"]},
		"object_attributes": map[string]any{
			"id": 99, "iid": 7, "target_branch": "main", "source_branch": "grow-shop",
			"source_project_id": 15, "target_project_id": 15, "author_id": 51,
			"title": "Grow the shop", "created_at": "2026-03-14T15:00:00Z", "updated_at": "2026-03-14T15:09:00Z",
			"state": "opened", "draft": false, "merge_status": "unchecked", "detailed_merge_status": "mergeable",
			"url":    "http://" + glHost + "/g/p/-/merge_requests/7",
			"source": p, "target": p,
			"last_commit": map[string]any{
				"id": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "message": "Grow the shop", "title": "Grow the shop",
				"timestamp": "2026-03-14T15:08:00+01:00", "url": "http://" + glHost + "/g/p/-/commit/da15",
				"author": map[string]any{"name": "Jane", "email": "jane@example.com"},
			},
			"oldrev": "95790bf891e76fee5e1747ab589903a6a1f80f22",
			"action": "update",
		},
		"labels":  []any{},
		"changes": map[string]any{"updated_at": map[string]any{"previous": "2026-03-14 15:00:00 UTC", "current": "2026-03-14 15:09:00 UTC"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// glNoteBody is a Note Hook payload (a comment on a commit), an event the
// agent does not act on.
const glNoteBody = `{
  "object_kind": "note", "event_type": "note",
  "user": {"id": 1, "name": "Administrator", "username": "root", "email": "admin@example.com"},
  "project_id": 15,
  "project": {"id": 15, "name": "p", "web_url": "http://gitlab.example.com/g/p",
    "git_ssh_url": "git@gitlab.example.com:g/p.git", "git_http_url": "http://gitlab.example.com/g/p.git",
    "path_with_namespace": "g/p", "default_branch": "main"},
  "object_attributes": {"id": 1243, "note": "Looks right.", "noteable_type": "Commit", "author_id": 1,
    "created_at": "2026-03-14 15:09:00 UTC", "updated_at": "2026-03-14 15:09:00 UTC", "project_id": 15,
    "commit_id": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "noteable_id": null, "system": false,
    "action": "create", "url": "http://gitlab.example.com/g/p/-/commit/da15#note_1243"},
  "commit": {"id": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "message": "Grow the shop\n",
    "timestamp": "2026-03-14T15:08:00+01:00", "url": "http://gitlab.example.com/g/p/-/commit/da15",
    "author": {"name": "Jane", "email": "jane@example.com"}}
}`

// glRequest builds a delivery as GitLab sends it, with the secret token
// when token is not empty.
func glRequest(event string, body []byte, token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "GitLab/18.2.0")
	r.Header.Set("X-Gitlab-Event", event)
	r.Header.Set("X-Gitlab-Instance", "https://"+glHost)
	r.Header.Set("X-Gitlab-Event-UUID", "7f0bbd3d-3e29-4d8e-a3c6-1a0d2a4c1e01")
	r.Header.Set("X-Gitlab-Webhook-UUID", "0a1b7a8e-5f7f-4d4a-9f7e-2b3c4d5e6f70")
	if token != "" {
		r.Header.Set("X-Gitlab-Token", token)
	}
	return r
}

// svSign is the Standard Webhooks signature of a delivery, written from
// the specification: base64 of HMAC-SHA256 over id.timestamp.body, with the
// key that follows whsec_, serialized as v1,<base64>.
func svSign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// glSigned builds a delivery signed as GitLab's signed webhooks are: the
// webhook-id is also sent as Idempotency-Key.
func glSigned(event string, body []byte, token, id string, at time.Time) *http.Request {
	r := glRequest(event, body, token)
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set("Idempotency-Key", id)
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", ts)
	r.Header.Set("webhook-signature", svSign(glKeyBytes, id, ts, body))
	return r
}

func triggeredList(t *testing.T, w *httptest.ResponseRecorder) []string {
	t.Helper()
	body := decode(t, w)
	list, ok := body["triggered"].([]any)
	if !ok {
		t.Fatalf("body = %s, want a triggered list", w.Body)
	}
	out := []string{}
	for _, v := range list {
		out = append(out, v.(string))
	}
	return out
}

func TestGitLabPush(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	onlyRepository := glProject("g/p", "main")
	for _, k := range []string{"web_url", "git_ssh_url", "git_http_url", "homepage", "url", "ssh_url", "http_url"} {
		delete(onlyRepository, k)
	}
	onlyProject := func(key string) map[string]any {
		p := glProject("g/p", "main")
		return map[string]any{key: p[key], "default_branch": "main", "path_with_namespace": "g/p"}
	}
	tests := []struct {
		name       string
		event      string
		kind       string
		ref, after string
		project    map[string]any
		repository map[string]any
		want       []string
	}{
		{"default branch", "Push Hook", "push", "refs/heads/main", sha, glProject("g/p", "main"), glRepository("g/p"),
			[]string{"p-main", "p-main-scp", "p-default"}},
		{"other branch over ssh with a port", "Push Hook", "push", "refs/heads/dev", sha, glProject("g/p", "main"), glRepository("g/p"),
			[]string{"p-dev-ssh"}},
		{"main is not the default branch", "Push Hook", "push", "refs/heads/main", sha, glProject("g/p", "trunk"), glRepository("g/p"),
			[]string{"p-main", "p-main-scp"}},
		{"default branch trunk", "Push Hook", "push", "refs/heads/trunk", sha, glProject("g/p", "trunk"), glRepository("g/p"),
			[]string{"p-default"}},
		{"unfollowed branch", "Push Hook", "push", "refs/heads/feature/x", sha, glProject("g/p", "main"), glRepository("g/p"), nil},
		{"deleted branch", "Push Hook", "push", "refs/heads/main", zeroSHA1, glProject("g/p", "main"), glRepository("g/p"), nil},
		{"deleted branch, SHA-256 repository", "Push Hook", "push", "refs/heads/main", strings.Repeat("0", 64),
			glProject("g/p", "main"), glRepository("g/p"), nil},
		{"similar name g/p2", "Push Hook", "push", "refs/heads/main", sha, glProject("g/p2", "main"), glRepository("g/p2"),
			[]string{"p2-main"}},
		{"subgroup g/sub/p", "Push Hook", "push", "refs/heads/main", sha, glProject("g/sub/p", "main"), glRepository("g/sub/p"),
			[]string{"sub-p-main", "sub-p-main-ssh"}},
		{"nested groups a/b/c/d/p", "Push Hook", "push", "refs/heads/main", sha, glProject("a/b/c/d/p", "main"), glRepository("a/b/c/d/p"),
			[]string{"deep-main"}},
		{"parent group a/b/c/d", "Push Hook", "push", "refs/heads/main", sha, glProject("a/b/c/d", "main"), glRepository("a/b/c/d"), nil},
		{"path sub/p", "Push Hook", "push", "refs/heads/main", sha, glProject("sub/p", "main"), glRepository("sub/p"), nil},
		{"case differs", "Push Hook", "push", "refs/heads/main", sha, glProject("G/P", "main"), glRepository("G/P"),
			[]string{"p-main", "p-main-scp", "p-default"}},
		{"only repository URLs", "Push Hook", "push", "refs/heads/dev", sha, onlyRepository, glRepository("g/p"), []string{"p-dev-ssh"}},
		{"only project git_ssh_url", "Push Hook", "push", "refs/heads/dev", sha, onlyProject("git_ssh_url"), nil, []string{"p-dev-ssh"}},
		{"only project git_http_url", "Push Hook", "push", "refs/heads/dev", sha, onlyProject("git_http_url"), nil, []string{"p-dev-ssh"}},
		{"no URL at all", "Push Hook", "push", "refs/heads/main", sha, map[string]any{"default_branch": "main"}, nil, nil},
		{"tag and semver", "Tag Push Hook", "tag_push", "refs/tags/v1.2.3", sha, glProject("g/p", "main"), glRepository("g/p"),
			[]string{"p-tag", "p-semver"}},
		{"tag in semver range", "Tag Push Hook", "tag_push", "refs/tags/v1.9.0", sha, glProject("g/p", "main"), glRepository("g/p"),
			[]string{"p-semver"}},
		{"tag above the range", "Tag Push Hook", "tag_push", "refs/tags/v2.0.0", sha, glProject("g/p", "main"), glRepository("g/p"), nil},
		{"deleted tag", "Tag Push Hook", "tag_push", "refs/tags/v1.2.3", zeroSHA1, glProject("g/p", "main"), glRepository("g/p"), nil},
		{"tag named like the branch", "Tag Push Hook", "tag_push", "refs/tags/main", sha, glProject("g/p", "main"), glRepository("g/p"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{Token: glToken})
			body := glPushBody(t, tt.kind, tt.ref, tt.after, tt.project, tt.repository)
			w := serve(h, glRequest(tt.event, body, glToken))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
			}
			want := sorted(tt.want)
			if got := triggeredList(t, w); !slices.Equal(sorted(got), want) {
				t.Errorf("answered triggered %v, want %v", got, want)
			}
			if got := rec.calls(); !slices.Equal(sorted(got), want) {
				t.Errorf("Trigger called for %v, want %v", got, want)
			}
			label, result := GitLabEventPush, ResultTriggered
			if tt.event == "Tag Push Hook" {
				label = GitLabEventTagPush
			}
			if len(want) == 0 {
				result = ResultUnmatched
			}
			if got := rec.lastDelivery(t); got != [2]string{label, result} {
				t.Errorf("OnDelivery%v, want (%s, %s)", got, label, result)
			}
		})
	}
}

// TestGitLabRefused covers deliveries refused before anything is acted
// on, with a token, a signing key or both configured.
func TestGitLabRefused(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/main", "g/p")
	other := glPush(t, "refs/heads/main", "g/p2")
	tests := []struct {
		name   string
		opts   GitLabOptions
		req    func() *http.Request
		status int
		result string
		label  string // reported event; "" means GitLabUnknownEvent
	}{
		{"no token", GitLabOptions{Token: glToken}, func() *http.Request { return glRequest("Push Hook", push, "") },
			401, ResultUnauthorized, ""},
		{"wrong token", GitLabOptions{Token: glToken}, func() *http.Request {
			return glRequest("Push Hook", push, "glht-4b7e19-never-show-mE")
		}, 401, ResultUnauthorized, ""},
		{"shorter token", GitLabOptions{Token: glToken}, func() *http.Request { return glRequest("Push Hook", push, glToken[:8]) },
			401, ResultUnauthorized, ""},
		{"longer token", GitLabOptions{Token: glToken}, func() *http.Request { return glRequest("Push Hook", push, glToken+"x") },
			401, ResultUnauthorized, ""},
		{"token as the signature", GitLabOptions{Token: glToken}, func() *http.Request {
			r := glRequest("Push Hook", push, "")
			r.Header.Set("webhook-signature", "v1,"+glToken)
			return r
		}, 401, ResultUnauthorized, ""},
		{"unsigned, signing required", GitLabOptions{SigningKey: glKey}, func() *http.Request { return glRequest("Push Hook", push, "") },
			401, ResultUnauthorized, ""},
		{"token valid, signing required and missing", GitLabOptions{Token: glToken, SigningKey: glKey},
			func() *http.Request { return glRequest("Push Hook", push, glToken) }, 401, ResultUnauthorized, ""},
		{"signed, token required and wrong", GitLabOptions{Token: glToken, SigningKey: glKey},
			func() *http.Request { return glSigned("Push Hook", push, "nope", "msg-1", glNow) }, 401, ResultUnauthorized, ""},
		{"signed, token required and missing", GitLabOptions{Token: glToken, SigningKey: glKey},
			func() *http.Request { return glSigned("Push Hook", push, "", "msg-1", glNow) }, 401, ResultUnauthorized, ""},
		{"missing webhook-id", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Del("webhook-id")
			return r
		}, 401, ResultUnauthorized, ""},
		{"missing webhook-timestamp", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Del("webhook-timestamp")
			return r
		}, 401, ResultUnauthorized, ""},
		{"missing webhook-signature", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Del("webhook-signature")
			return r
		}, 401, ResultUnauthorized, ""},
		{"signature over a different body", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Set("webhook-signature", glSigned("Push Hook", other, "", "msg-1", glNow).Header.Get("webhook-signature"))
			return r
		}, 401, ResultUnauthorized, ""},
		{"signature of another id", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Set("webhook-id", "msg-2")
			return r
		}, 401, ResultUnauthorized, ""},
		{"signature of another timestamp", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Set("webhook-timestamp", strconv.FormatInt(glNow.Unix()+1, 10))
			return r
		}, 401, ResultUnauthorized, ""},
		{"signature with another key", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			ts := r.Header.Get("webhook-timestamp")
			r.Header.Set("webhook-signature", svSign([]byte("another key of at least 24 bytes"), "msg-1", ts, push))
			return r
		}, 401, ResultUnauthorized, ""},
		{"v1a entry only", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			_, b64, _ := strings.Cut(r.Header.Get("webhook-signature"), ",")
			r.Header.Set("webhook-signature", "v1a,"+b64)
			return r
		}, 401, ResultUnauthorized, ""},
		{"v1 without a comma", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.Header.Set("webhook-signature", strings.Replace(r.Header.Get("webhook-signature"), ",", "", 1))
			return r
		}, 401, ResultUnauthorized, ""},
		{"hex instead of base64", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			_, b64, _ := strings.Cut(r.Header.Get("webhook-signature"), ",")
			raw, _ := base64.StdEncoding.DecodeString(b64)
			r.Header.Set("webhook-signature", fmt.Sprintf("v1,%x", raw))
			return r
		}, 401, ResultUnauthorized, ""},
		{"timestamp 6 minutes old", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "", "msg-1", glNow.Add(-6*time.Minute))
		}, 401, ResultUnauthorized, ""},
		{"timestamp 6 minutes ahead", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "", "msg-1", glNow.Add(6*time.Minute))
		}, 401, ResultUnauthorized, ""},
		{"timestamp in milliseconds", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			ts := strconv.FormatInt(glNow.UnixMilli(), 10)
			r.Header.Set("webhook-timestamp", ts)
			r.Header.Set("webhook-signature", svSign(glKeyBytes, "msg-1", ts, push))
			return r
		}, 401, ResultUnauthorized, ""},
		{"timestamp not a number", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			ts := glNow.Format(time.RFC3339)
			r.Header.Set("webhook-timestamp", ts)
			r.Header.Set("webhook-signature", svSign(glKeyBytes, "msg-1", ts, push))
			return r
		}, 401, ResultUnauthorized, ""},
		{"not configured", GitLabOptions{}, func() *http.Request { return glRequest("Push Hook", push, glToken) },
			403, ResultUnconfigured, ""},
		{"signing key that does not parse", GitLabOptions{Token: glToken, SigningKey: "whsec_short"},
			func() *http.Request { return glSigned("Push Hook", push, glToken, "msg-1", glNow) }, 403, ResultUnconfigured, ""},
		{"GET", GitLabOptions{Token: glToken}, func() *http.Request {
			r := glRequest("Push Hook", nil, glToken)
			r.Method = http.MethodGet
			return r
		}, 405, ResultInvalid, ""},
		{"form content type", GitLabOptions{Token: glToken}, func() *http.Request {
			r := glRequest("Push Hook", push, glToken)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 415, ResultInvalid, ""},
		{"no content type", GitLabOptions{Token: glToken}, func() *http.Request {
			r := glRequest("Push Hook", push, glToken)
			r.Header.Del("Content-Type")
			return r
		}, 415, ResultInvalid, ""},
		{"declared too large", GitLabOptions{Token: glToken, MaxBodyBytes: 1024}, func() *http.Request {
			return glRequest("Push Hook", push, glToken)
		}, 413, ResultInvalid, ""},
		{"too large, length not declared", GitLabOptions{Token: glToken, MaxBodyBytes: 1024}, func() *http.Request {
			r := glRequest("Push Hook", push, glToken)
			r.ContentLength = -1
			return r
		}, 413, ResultInvalid, ""},
		{"too large, signed", GitLabOptions{SigningKey: glKey, MaxBodyBytes: 1024}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			r.ContentLength = -1
			return r
		}, 413, ResultInvalid, ""},
		{"malformed JSON", GitLabOptions{Token: glToken}, func() *http.Request {
			return glRequest("Push Hook", []byte(`{"object_kind": "push",`), glToken)
		}, 400, ResultInvalid, GitLabEventPush},
		{"malformed JSON, signed", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", []byte(`{"object_kind": "push",`), "", "msg-1", glNow)
		}, 400, ResultInvalid, GitLabEventPush},
		{"push of the wrong shape", GitLabOptions{Token: glToken}, func() *http.Request {
			return glRequest("Push Hook", []byte(`{"object_kind": "push", "ref": 7}`), glToken)
		}, 400, ResultInvalid, GitLabEventPush},
		{"no event header", GitLabOptions{Token: glToken}, func() *http.Request { return glRequest("", push, glToken) },
			400, ResultInvalid, GitLabEventOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			tt.opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			h, rec := newGitLabHandler(t, tt.opts)
			req := tt.req()
			sig := req.Header.Get("webhook-signature")
			w := serve(h, req)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if msg, _ := decode(t, w)["error"].(string); msg == "" {
				t.Errorf("body %s has no error message", w.Body)
			}
			if got := rec.calls(); len(got) != 0 {
				t.Errorf("Trigger called for %v", got)
			}
			label := cmpOr(tt.label, GitLabUnknownEvent)
			if got := rec.lastDelivery(t); got != [2]string{label, tt.result} {
				t.Errorf("OnDelivery%v, want (%s, %s)", got, label, tt.result)
			}
			if n := strings.Count(logs.String(), `"msg":"GitLab webhook delivery"`); n != 1 {
				t.Errorf("%d delivery lines logged, want 1:\n%s", n, logs.String())
			}
			for _, secret := range []string{glToken, glKey[len("whsec_"):], sig} {
				if secret != "" && (strings.Contains(logs.String(), secret) || strings.Contains(w.Body.String(), secret)) {
					t.Errorf("%q shown in the log or the answer:\n%s\n%s", secret, logs.String(), w.Body)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestGitLabSigned checks the deliveries a signing key accepts: one
// signature among several (a key being rotated), a timestamp within the
// tolerance either way, with and without a token also required.
func TestGitLabSigned(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/dev", "g/p")
	tests := []struct {
		name string
		opts GitLabOptions
		req  func() *http.Request
	}{
		{"signed", GitLabOptions{SigningKey: glKey}, func() *http.Request { return glSigned("Push Hook", push, "", "msg-1", glNow) }},
		{"signed and the token", GitLabOptions{SigningKey: glKey, Token: glToken}, func() *http.Request {
			return glSigned("Push Hook", push, glToken, "msg-1", glNow)
		}},
		{"a token sent but not required", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "anything", "msg-1", glNow)
		}},
		{"4 minutes old", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "", "msg-1", glNow.Add(-4*time.Minute))
		}},
		{"4 minutes ahead", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "", "msg-1", glNow.Add(4*time.Minute))
		}},
		{"exactly 5 minutes old", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			return glSigned("Push Hook", push, "", "msg-1", glNow.Add(-SignatureTolerance))
		}},
		{"one of several signatures", GitLabOptions{SigningKey: glKey}, func() *http.Request {
			r := glSigned("Push Hook", push, "", "msg-1", glNow)
			good := r.Header.Get("webhook-signature")
			_, b64, _ := strings.Cut(good, ",")
			old := svSign([]byte("the key before the rotation...."), "msg-1", r.Header.Get("webhook-timestamp"), push)
			r.Header.Set("webhook-signature", strings.Join([]string{old, "v1a," + b64, "v2," + b64, "garbage", good}, " "))
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, tt.opts)
			w := serve(h, tt.req())
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
			}
			if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
				t.Errorf("Trigger called for %v, want [p-dev-ssh]", got)
			}
			if got := rec.lastDelivery(t); got != [2]string{GitLabEventPush, ResultTriggered} {
				t.Errorf("OnDelivery%v", got)
			}
		})
	}
}

// TestStandardWebhooksVector checks the signer of these tests and the
// handler against the signature the Standard Webhooks libraries' own tests
// expect.
func TestStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = "1614265330"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	payload := []byte(`{"test": 2432232314}`)
	key, err := ParseSigningKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	if got := svSign(key, id, ts, payload); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	for _, tt := range []struct {
		name, signature string
		status          int
	}{
		{"the vector", want, http.StatusOK},
		{"one bit off", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=", http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: secret})
			h.now = func() time.Time { return time.Unix(1614265330, 0).Add(90 * time.Second) }
			r := glRequest("Note Hook", payload, "")
			r.Header.Set("webhook-id", id)
			r.Header.Set("webhook-timestamp", ts)
			r.Header.Set("webhook-signature", tt.signature)
			if w := serve(h, r); w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if tt.status == http.StatusOK {
				if got := rec.lastDelivery(t); got != [2]string{"gitlab_note", ResultIgnored} {
					t.Errorf("OnDelivery%v", got)
				}
			}
		})
	}
}

// TestGitLabReplay checks that a signed delivery is acted on once per
// webhook-id however often it arrives, and again once it could no longer
// be replayed anyway.
func TestGitLabReplay(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/dev", "g/p")
	other := glPush(t, "refs/heads/main", "g/p2")
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	var now atomic.Pointer[time.Time]
	at := func(t time.Time) { now.Store(&t) }
	at(glNow)
	h.now = func() time.Time { return *now.Load() }

	step := func(name string, r *http.Request, status int, result string, triggered []string) {
		t.Helper()
		before := len(rec.calls())
		w := serve(h, r)
		if w.Code != status {
			t.Fatalf("%s: status = %d, want %d; body %s", name, w.Code, status, w.Body)
		}
		if got := rec.calls()[before:]; !slices.Equal(got, triggered) {
			t.Errorf("%s: triggered %v, want %v", name, got, triggered)
		}
		rec.mu.Lock()
		last := rec.deliveries[len(rec.deliveries)-1]
		rec.mu.Unlock()
		if last[1] != result {
			t.Errorf("%s: result %s, want %s", name, last[1], result)
		}
		if result == ResultDuplicate && !strings.Contains(w.Body.String(), `"duplicate":true`) {
			t.Errorf("%s: body %s", name, w.Body)
		}
	}
	step("first", glSigned("Push Hook", push, "", "msg-1", glNow), 200, ResultTriggered, []string{"p-dev-ssh"})
	step("replayed", glSigned("Push Hook", push, "", "msg-1", glNow), 200, ResultDuplicate, []string{})
	at(glNow.Add(4 * time.Minute))
	step("replayed later", glSigned("Push Hook", push, "", "msg-1", glNow), 200, ResultDuplicate, []string{})
	step("id reused with another body, signed", glSigned("Push Hook", other, "", "msg-1", glNow.Add(4*time.Minute)),
		200, ResultDuplicate, []string{})
	forged := glSigned("Push Hook", other, "", "msg-1", glNow)
	forged.Header.Set("webhook-signature", glSigned("Push Hook", push, "", "msg-1", glNow).Header.Get("webhook-signature"))
	step("id reused with another body, old signature", forged, 401, ResultUnauthorized, []string{})
	step("another id", glSigned("Push Hook", push, "", "msg-2", glNow.Add(4*time.Minute)), 200, ResultTriggered, []string{"p-dev-ssh"})
	// At the very end of the tolerance the timestamp still passes: the id
	// must still be remembered.
	at(glNow.Add(SignatureTolerance))
	step("replayed at the last moment", glSigned("Push Hook", push, "", "msg-1", glNow), 200, ResultDuplicate, []string{})
	// Past the tolerance the replay is refused for its timestamp, and a
	// new delivery may use the id again.
	at(glNow.Add(SignatureTolerance + time.Second))
	step("replayed too late", glSigned("Push Hook", push, "", "msg-1", glNow), 401, ResultUnauthorized, []string{})
	step("id used again after it expired", glSigned("Push Hook", push, "", "msg-1", glNow.Add(SignatureTolerance)),
		200, ResultTriggered, []string{"p-dev-ssh"})
}

// TestGitLabReplayAfterFailure checks that a delivery that failed can be
// resent with its webhook-id, while one handled cannot.
func TestGitLabReplayAfterFailure(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	fail := atomic.Bool{}
	fail.Store(true)
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey, OnMergeRequest: func(context.Context, *gitlab.MergeEvent) error {
		calls.Add(1)
		if fail.Load() {
			return errors.New("GitLab answered 502")
		}
		return nil
	}})
	mr := glMergeRequestBody(t)
	for i, want := range []int{500, 200, 200} {
		if i == 1 {
			fail.Store(false)
		}
		if w := serve(h, glSigned("Merge Request Hook", mr, "", "msg-mr", glNow)); w.Code != want {
			t.Fatalf("delivery %d: status %d, want %d; body %s", i, w.Code, want, w.Body)
		}
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("OnMergeRequest called %d times, want 2 (failed, then resent)", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := [][2]string{{GitLabEventMergeRequest, ResultFailed}, {GitLabEventMergeRequest, ResultHandled},
		{GitLabEventMergeRequest, ResultDuplicate}}
	if !slices.Equal(rec.deliveries, want) {
		t.Errorf("deliveries %v, want %v", rec.deliveries, want)
	}
}

// TestGitLabConcurrentReplay sends one signed delivery many times at once:
// it must be acted on exactly once.
func TestGitLabConcurrentReplay(t *testing.T) {
	t.Parallel()
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	push := glPush(t, "refs/heads/dev", "g/p")
	const n = 32
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = glSigned("Push Hook", push, "", "msg-concurrent", glNow)
	}
	start := make(chan struct{})
	var wg gosync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			<-start
			codes[i] = serve(h, reqs[i]).Code
		})
	}
	close(start)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("delivery %d: status %d", i, c)
		}
	}
	if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
		t.Errorf("Trigger called for %v, want once for p-dev-ssh", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	results := map[string]int{}
	for _, d := range rec.deliveries {
		results[d[1]]++
	}
	if results[ResultTriggered] != 1 || results[ResultDuplicate] != n-1 {
		t.Errorf("results %v, want 1 triggered and %d duplicate", results, n-1)
	}
}

// TestGitLabEvents covers the events other than pushes.
func TestGitLabEvents(t *testing.T) {
	t.Parallel()
	mr := glMergeRequestBody(t)
	tests := []struct {
		name    string
		event   string
		body    []byte
		onMR    string // "" none, "ok" or "fail"
		status  int
		label   string
		result  string
		bodyHas string
	}{
		{"merge request without a handler", "Merge Request Hook", mr, "", 202, GitLabEventMergeRequest, ResultIgnored, `"ignored":true`},
		{"merge request handled", "Merge Request Hook", mr, "ok", 200, GitLabEventMergeRequest, ResultHandled, `"handled":true`},
		{"merge request failing", "Merge Request Hook", mr, "fail", 500, GitLabEventMergeRequest, ResultFailed, `"error"`},
		{"merge request of the wrong shape", "Merge Request Hook", []byte(`{"object_attributes": {"iid": "seven"}}`), "ok",
			400, GitLabEventMergeRequest, ResultInvalid, `"error"`},
		{"note", "Note Hook", []byte(glNoteBody), "ok", 200, "gitlab_note", ResultIgnored, `"ignored":true`},
		{"pipeline", "Pipeline Hook", []byte(`{"object_kind": "pipeline"}`), "", 200, "gitlab_pipeline", ResultIgnored, `"ignored":true`},
		{"made-up event", "Bogus Hook", []byte(`{}`), "", 200, GitLabEventOther, ResultIgnored, `"ignored":true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got *gitlab.MergeEvent
			opts := GitLabOptions{Token: glToken}
			switch tt.onMR {
			case "ok":
				opts.OnMergeRequest = func(_ context.Context, ev *gitlab.MergeEvent) error { got = ev; return nil }
			case "fail":
				opts.OnMergeRequest = func(context.Context, *gitlab.MergeEvent) error {
					return errors.New("cannot reach the database at postgres://internal")
				}
			}
			h, rec := newGitLabHandler(t, opts)
			w := serve(h, glRequest(tt.event, tt.body, glToken))
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.bodyHas) {
				t.Fatalf("status = %d, body %s; want %d with %s", w.Code, w.Body, tt.status, tt.bodyHas)
			}
			if strings.Contains(w.Body.String(), "postgres") {
				t.Errorf("the handler's error is in the answer: %s", w.Body)
			}
			if c := rec.calls(); len(c) != 0 {
				t.Errorf("Trigger called for %v", c)
			}
			if d := rec.lastDelivery(t); d != [2]string{tt.label, tt.result} {
				t.Errorf("OnDelivery%v, want (%s, %s)", d, tt.label, tt.result)
			}
			if tt.result != ResultHandled {
				return
			}
			// The handler got the payload decoded.
			a := got.ObjectAttributes
			if a.IID != 7 || a.Action != "update" || a.SourceBranch != "grow-shop" || a.TargetBranch != "main" ||
				a.LastCommit.ID != "da1560886d4f094c3e6c9ef40349f7d38b5d27d7" || a.OldRev == "" || got.Project.PathWithNamespace != "g/p" {
				t.Errorf("merge event decoded as %+v", a)
			}
		})
	}
}

// TestGitLabLogLine checks the one line logged per delivery, and that
// neither the token nor the signature is in it.
func TestGitLabLogLine(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h, _ := newGitLabHandler(t, GitLabOptions{Token: glToken, SigningKey: glKey, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	r := glSigned("Push Hook", glPush(t, "refs/heads/main", "g/sub/p"), glToken, "msg-log", glNow)
	sig := r.Header.Get("webhook-signature")
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, logs.String())
	}
	want := map[string]any{"msg": "GitLab webhook delivery", "event": "Push Hook", "delivery": "msg-log",
		"result": ResultTriggered, "status": float64(200), "repository": "g/sub/p"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
	for _, s := range []string{glToken, glKey, sig, sig[len("v1,"):]} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("log shows %q: %s", s, logs.String())
		}
	}
}

func TestParseSigningKey(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa7}, n)) }
	tests := []struct {
		in    string
		size  int
		error string
	}{
		{"whsec_" + b64(32), 32, ""},
		{"whsec_" + b64(24), 24, ""},
		{"whsec_" + b64(64), 64, ""},
		{"whsec_" + b64(23), 0, "23 bytes"},
		{"whsec_" + b64(65), 0, "65 bytes"},
		{b64(32), 0, `starts with "whsec_"`},
		{"WHSEC_" + b64(32), 0, `starts with "whsec_"`},
		{"whsec_" + strings.TrimRight(b64(32), "="), 0, "not standard base64"},
		{"whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(b64(32)) + "-_", 0, "not standard base64"},
		{"whsec_", 0, "0 bytes"},
		{"", 0, `starts with "whsec_"`},
	}
	for _, tt := range tests {
		key, err := ParseSigningKey(tt.in)
		switch {
		case tt.error == "" && (err != nil || len(key) != tt.size):
			t.Errorf("ParseSigningKey(%q) = %d bytes, %v; want %d bytes", tt.in, len(key), err, tt.size)
		case tt.error != "" && (err == nil || !strings.Contains(err.Error(), tt.error)):
			t.Errorf("ParseSigningKey(%q) error %v, want one saying %q", tt.in, err, tt.error)
		case err != nil && len(tt.in) > len("whsec_") && strings.Contains(err.Error(), tt.in[len("whsec_"):]):
			t.Errorf("the error quotes the key: %v", err)
		}
	}
}

// TestSeenIDsBound checks that the set of webhook-ids stays within its
// bound: expired ids go first, then those closest to expiring.
func TestSeenIDsBound(t *testing.T) {
	t.Parallel()
	fill := func() *seenIDs {
		s := &seenIDs{max: 3, until: map[[sha256.Size]byte]time.Time{}}
		for _, id := range []string{"a", "b", "c"} {
			until := map[string]time.Duration{"a": time.Minute, "b": 3 * time.Minute, "c": 2 * time.Minute}[id]
			if !s.claim(id, glNow.Add(until), glNow) {
				t.Fatalf("%s is not new", id)
			}
		}
		return s
	}
	has := func(s *seenIDs) []string {
		var out []string
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if _, ok := s.until[sha256.Sum256([]byte(id))]; ok {
				out = append(out, id)
			}
		}
		return out
	}

	s := fill()
	if s.claim("b", glNow.Add(time.Hour), glNow) {
		t.Error("b claimed twice")
	}
	// Full, nothing expired: a, closest to expiring, makes room for d.
	if !s.claim("d", glNow.Add(4*time.Minute), glNow) {
		t.Fatal("d not claimed")
	}
	if got := has(s); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("kept %v, want [b c d]", got)
	}

	// Past two minutes a and c have expired: both go when room is needed.
	s = fill()
	later := glNow.Add(2*time.Minute + time.Second)
	if !s.claim("e", later.Add(time.Minute), later) {
		t.Fatal("e not claimed")
	}
	if got := has(s); !slices.Equal(got, []string{"b", "e"}) {
		t.Errorf("kept %v, want [b e]", got)
	}
	// An expired id is new again, whether swept or not.
	s = fill()
	if !s.claim("a", later.Add(time.Minute), later) {
		t.Error("a, expired, is not new")
	}

	s.release("b")
	if !s.claim("b", glNow.Add(time.Minute), glNow) {
		t.Error("b released but not new")
	}
}

// TestGitLabOutcomes checks that the series started at 0 are those the
// handler reports and share no event label with GitHub's.
func TestGitLabOutcomes(t *testing.T) {
	t.Parallel()
	for header, label := range map[string]string{"Push Hook": GitLabEventPush, "Tag Push Hook": GitLabEventTagPush,
		"Merge Request Hook": GitLabEventMergeRequest, "Note Hook": "gitlab_note", "Confidential Note Hook": "gitlab_confidential_note",
		"Push hook": GitLabEventOther, "push": GitLabEventOther} {
		if got := gitlabEventLabel(header); got != label {
			t.Errorf("label of %q = %s, want %s", header, got, label)
		}
	}
	github := Outcomes("unknown")
	for label := range GitLabOutcomes() {
		if _, ok := github[label]; ok || !strings.HasPrefix(label, "gitlab_") {
			t.Errorf("label %s is GitHub's too, or not gitlab_", label)
		}
	}
}

// TestGitLabSourceWarnings checks that sources a push cannot trigger are
// warned about only when GitLab webhooks are configured, since the agent
// always mounts the handler.
func TestGitLabSourceWarnings(t *testing.T) {
	t.Parallel()
	sources := []Source{{Name: "local", URL: "file:///srv/git/p", Branch: "main"}, {Name: "bad-range", URL: "https://" + glHost + "/g/p", SemVer: "not a range"}}
	for _, tc := range []struct {
		opts  GitLabOptions
		warns bool
	}{{GitLabOptions{}, false}, {GitLabOptions{Token: glToken}, true}, {GitLabOptions{SigningKey: glKey}, true}} {
		var logs bytes.Buffer
		tc.opts.Sources, tc.opts.Logger = sources, slog.New(slog.NewTextHandler(&logs, nil))
		NewGitLab(tc.opts)
		got := strings.Contains(logs.String(), "GitLab webhooks cannot match the URL of this source") &&
			strings.Contains(logs.String(), "semver range does not parse")
		if got != tc.warns || (!tc.warns && logs.Len() > 0) {
			t.Errorf("configured %v: logged %q", tc.warns, logs.String())
		}
		if strings.Contains(logs.String(), "file://") {
			t.Errorf("the URL is logged: %s", logs.String())
		}
	}
}
