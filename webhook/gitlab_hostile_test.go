package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// These tests try to get around the GitLab receiver's checks: with
// signatures re-framed or re-encoded, headers repeated, event types
// swapped, and payloads that name other projects or refs. Each delivery
// must be refused or act on nothing it should not.

// glSignedAt is glSigned with the timestamp header spelled as given and
// signed as spelled.
func glSignedAt(event string, body []byte, id, ts string) *http.Request {
	r := glRequest(event, body, "")
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", ts)
	r.Header.Set("webhook-signature", svSign(glKeyBytes, id, ts, body))
	return r
}

// TestGitLabSignatureFraming re-frames and re-encodes a valid signature:
// the HMAC covers id, timestamp and body as sent, and only the standard
// base64 of the exact digest in a v1 entry of the first webhook-signature
// header passes.
func TestGitLabSignatureFraming(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/dev", "g/p")
	ts := strconv.FormatInt(glNow.Unix(), 10)
	// An id whose signature has a + or a /, so that URL-safe base64
	// spells it differently.
	id := "msg.1"
	for i := 0; !strings.ContainsAny(glSignedAt("Push Hook", push, id, ts).Header.Get("webhook-signature"), "+/"); i++ {
		id = "msg.1." + strconv.Itoa(i)
	}
	good := func() *http.Request { return glSignedAt("Push Hook", push, id, ts) }
	goodSig := good().Header.Get("webhook-signature")
	_, goodB64, _ := strings.Cut(goodSig, ",")
	raw, _ := base64.StdEncoding.DecodeString(goodB64)

	refused := map[string]func() *http.Request{
		// The dot that ends the id moved: "msg" + "1.ts" is not a number,
		// and "msg.1.ts" as the id leaves no timestamp to sign.
		"id shortened at its dot": func() *http.Request {
			r := good()
			before, after, _ := strings.Cut(id, ".")
			r.Header.Set("webhook-id", before)
			r.Header.Set("webhook-timestamp", after+"."+ts)
			return r
		},
		"timestamp moved into the id": func() *http.Request {
			r := good()
			r.Header.Set("webhook-id", id+"."+ts)
			r.Header.Set("webhook-timestamp", ts)
			return r
		},
		// Same number, other spelling: the signature is over the text.
		"timestamp with a plus":         func() *http.Request { r := good(); r.Header.Set("webhook-timestamp", "+"+ts); return r },
		"timestamp with a leading zero": func() *http.Request { r := good(); r.Header.Set("webhook-timestamp", "0"+ts); return r },
		"timestamp with a space":        func() *http.Request { r := good(); r.Header.Set("webhook-timestamp", ts+" "); return r },
		"id with a space":               func() *http.Request { r := good(); r.Header.Set("webhook-id", id+" "); return r },
		"body with a trailing newline": func() *http.Request {
			r := good()
			r2 := glRequest("Push Hook", append(slices.Clone(push), '\n'), "")
			r2.Header = r.Header.Clone()
			r2.ContentLength = int64(len(push) + 1)
			return r2
		},
		// Encodings of the same digest other than standard base64.
		"URL-safe base64": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,"+base64.URLEncoding.EncodeToString(raw))
			return r
		},
		"unpadded base64": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,"+base64.RawStdEncoding.EncodeToString(raw))
			return r
		},
		"digest truncated": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(raw[:16]))
			return r
		},
		"digest with a byte more": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(append(slices.Clone(raw), 0)))
			return r
		},
		"empty v1 entry": func() *http.Request { r := good(); r.Header.Set("webhook-signature", "v1,"); return r },
		"V1 in capitals": func() *http.Request { r := good(); r.Header.Set("webhook-signature", "V1,"+goodB64); return r },
		"comma-separated list": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,AAAA,"+goodSig)
			return r
		},
		// Only the first header line of each name is read: a valid
		// signature, id or timestamp on a second line counts for nothing.
		"valid signature on a second header line": func() *http.Request {
			r := good()
			r.Header["Webhook-Signature"] = []string{"v1,AAAA", goodSig}
			return r
		},
		"another id on the first line": func() *http.Request {
			r := good()
			r.Header["Webhook-Id"] = []string{"msg.2", id}
			return r
		},
		// Signed as GitLab would sign them, timestamps far from now:
		// refused for the window, without overflowing.
		"negative timestamp":       func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "-1") },
		"zero timestamp":           func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "0") },
		"largest int64 timestamp":  func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "9223372036854775807") },
		"smallest int64 timestamp": func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "-9223372036854775808") },
		"timestamp beyond int64":   func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "99999999999999999999") },
		"timestamp in nanoseconds": func() *http.Request {
			return glSignedAt("Push Hook", push, "msg.1", strconv.FormatInt(glNow.UnixNano(), 10))
		},
	}
	for name, req := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
			if w := serve(h, req()); w.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401; body %s", w.Code, w.Body)
			}
			if got := rec.calls(); len(got) != 0 {
				t.Errorf("Trigger called for %v", got)
			}
		})
	}

	accepted := map[string]func() *http.Request{
		"the delivery as signed": good,
		// A list of many entries and one that matches: each costs a
		// base64 decoding, the HMAC is computed once.
		"the valid entry after 5000 others": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", strings.Repeat("v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" ", 5000)+goodSig)
			return r
		},
		"tabs between entries": func() *http.Request {
			r := good()
			r.Header.Set("webhook-signature", "v1,AAAA\t"+goodSig)
			return r
		},
		// GitLab would not send these, but they are signed as sent.
		"signed timestamp with a plus": func() *http.Request { return glSignedAt("Push Hook", push, "msg.1", "+"+ts) },
		"signed id full of dots":       func() *http.Request { return glSignedAt("Push Hook", push, "a.b.c...", ts) },
	}
	for name, req := range accepted {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
			if w := serve(h, req()); w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
			}
			if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
				t.Errorf("Trigger called for %v, want [p-dev-ssh]", got)
			}
		})
	}
}

// TestGitLabReplayTricks replays a delivery handled once with its headers
// changed: the id the signature covers is the one remembered, whatever
// else the replay adds.
func TestGitLabReplayTricks(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/dev", "g/p")
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	first := glSigned("Push Hook", push, "", "msg-1", glNow)
	if w := serve(h, first); w.Code != http.StatusOK {
		t.Fatalf("first delivery: %d %s", w.Code, w.Body)
	}
	replays := map[string]func(r *http.Request){
		"another id on a second line":     func(r *http.Request) { r.Header.Add("webhook-id", "msg-2") },
		"another Idempotency-Key":         func(r *http.Request) { r.Header.Set("Idempotency-Key", "msg-2") },
		"another X-Gitlab-Event-UUID":     func(r *http.Request) { r.Header.Set("X-Gitlab-Event-UUID", "other") },
		"as a Tag Push Hook":              func(r *http.Request) { r.Header.Set("X-Gitlab-Event", "Tag Push Hook") },
		"as a Merge Request Hook":         func(r *http.Request) { r.Header.Set("X-Gitlab-Event", "Merge Request Hook") },
		"with a signature list around it": func(r *http.Request) { r.Header.Set("webhook-signature", "v1,AAAA "+r.Header.Get("webhook-signature")) },
	}
	for name, change := range replays {
		r := glSigned("Push Hook", push, "", "msg-1", glNow)
		change(r)
		w := serve(h, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"duplicate":true`) {
			t.Errorf("%s: %d %s, want a duplicate", name, w.Code, w.Body)
		}
	}
	// A new id with the old signature is a forgery.
	r := glSigned("Push Hook", push, "", "msg-1", glNow)
	r.Header.Set("webhook-id", "msg-2")
	if w := serve(h, r); w.Code != http.StatusUnauthorized {
		t.Errorf("new id, old signature: %d %s", w.Code, w.Body)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
		t.Errorf("Trigger called for %v, want once", got)
	}
}

// TestGitLabEventMismatch sends signed payloads under another event's
// header: X-Gitlab-Event is not signed, so the payload's object_kind must
// agree with it before anything acts on the payload.
func TestGitLabEventMismatch(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	push := glPush(t, "refs/heads/main", "g/p")
	tagPush := glPushBody(t, "tag_push", "refs/tags/v1.2.3", sha, glProject("g/p", "main"), glRepository("g/p"))
	mr := glMergeRequestBody(t)
	pipeline := []byte(`{"object_kind": "pipeline", "ref": "refs/heads/main", "project": {"git_http_url": "http://` + glHost +
		`/g/p.git", "default_branch": "main"}, "object_attributes": {"ref": "main"}}`)
	noKind := []byte(`{"ref": "refs/heads/main", "after": "` + sha + `", "project": {"git_http_url": "http://` + glHost +
		`/g/p.git", "default_branch": "main"}}`)
	tests := []struct {
		name, event string
		body        []byte
	}{
		{"tag push as a push", "Push Hook", tagPush},
		{"push as a tag push", "Tag Push Hook", push},
		{"merge request as a push", "Push Hook", mr},
		{"pipeline as a push", "Push Hook", pipeline},
		{"push without object_kind", "Push Hook", noKind},
		{"push as a merge request", "Merge Request Hook", push},
		{"pipeline as a merge request", "Merge Request Hook", pipeline},
		{"merge request without object_kind", "Merge Request Hook", []byte(`{"object_attributes": {"iid": 7}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			called := false
			h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey,
				OnMergeRequest: func(context.Context, *gitlab.MergeEvent) error { called = true; return nil }})
			w := serve(h, glSigned(tt.event, tt.body, "", "msg-1", glNow))
			if w.Code != http.StatusBadRequest {
				t.Errorf("status = %d, want 400; body %s", w.Code, w.Body)
			}
			if got := rec.calls(); len(got) != 0 {
				t.Errorf("Trigger called for %v", got)
			}
			if called {
				t.Error("OnMergeRequest called")
			}
			// Refused, the id is not spent: GitLab's own delivery of it
			// still counts.
			if !h.seen.claim("msg-1", glNow.Add(time.Minute), glNow) {
				t.Error("the refused delivery's id was kept")
			}
		})
	}
}

// TestGitLabPushNamesOtherProject sends pushes whose payload URLs are
// spelled to look like a followed project: only a URL naming the same
// host and full project path matches; user info, a port, case, .git and
// slashes are spellings of one project.
func TestGitLabPushNamesOtherProject(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	sources := []Source{
		{Name: "p", URL: "https://" + glHost + "/g/p.git", Branch: "main"},
		{Name: "p-sub", URL: "https://" + glHost + "/g/p/sub.git", Branch: "main"},
	}
	tests := []struct {
		url  string
		want []string
	}{
		{"https://" + glHost + "/g/p", []string{"p"}},
		{"https://evil@" + glHost + "/g/p", []string{"p"}},
		{"https://" + glHost + ":8443/g/p.git/", []string{"p"}},
		{"HTTPS://" + strings.ToUpper(glHost) + "/G/P.GIT", []string{"p"}},
		{"https://" + glHost + "/g%2Fp", []string{"p"}}, // GitLab paths hold no %: the same project
		{"https://" + glHost + "/g/p/sub", []string{"p-sub"}},
		{"https://" + glHost + "/g/./p/sub/..", []string{"p"}},
		{"https://" + glHost + ".evil.example/g/p", nil},
		{"https://evil.example/" + glHost + "/g/p", nil},
		{"https://" + glHost + "@evil.example/g/p", nil},
		{"https://" + glHost + "./g/p", nil},
		{"https://gitlаb.example.com/g/p", nil}, // Cyrillic а
		{"https://" + glHost + "/g/p.wiki", nil},
		{"https://" + glHost + "/g/p2", nil},
		{"https://" + glHost + "/g", nil},
		{"https://" + glHost + "/g/p/sub/x", nil},
		{"https://" + glHost + "/g/p?x=/g/p", []string{"p"}},
		{"file:///g/p", nil},
		{"evil.example:" + glHost + "/g/p", nil},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{Token: glToken, Sources: sources})
			body := glPushBody(t, "push", "refs/heads/main", sha,
				map[string]any{"git_http_url": tt.url, "default_branch": "main", "path_with_namespace": "g/p"}, nil)
			if w := serve(h, glRequest("Push Hook", body, glToken)); w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got, want := sorted(rec.calls()), sorted(tt.want); !slices.Equal(got, want) {
				t.Errorf("triggered %v, want %v", got, want)
			}
		})
	}
}

// TestGitLabPushRefTricks sends refs that resemble a followed branch or
// tag: only the exact ref of the right kind triggers.
func TestGitLabPushRefTricks(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	sources := []Source{
		{Name: "main", URL: "https://" + glHost + "/g/p.git", Branch: "main"},
		{Name: "tag", URL: "https://" + glHost + "/g/p.git", Tag: "v1"},
		{Name: "default", URL: "https://" + glHost + "/g/p.git"},
	}
	tests := []struct {
		kind, ref, after, defaultBranch string
		want                            []string
	}{
		{"push", "refs/heads/main", sha, "main", []string{"main", "default"}},
		{"push", "refs/heads/main/../x", sha, "main", nil},
		{"push", "refs/heads/x/../main", sha, "main", nil},
		{"push", "refs/heads//main", sha, "main", nil},
		{"push", "refs/heads/Main", sha, "main", nil},
		{"push", "refs/heads/main ", sha, "main", nil},
		{"push", "refs/heads/main\x00", sha, "main", nil},
		{"push", "main", sha, "main", nil},
		{"push", "refs/remotes/origin/main", sha, "main", nil},
		{"push", "refs/tags/main", sha, "main", nil},
		{"push", "refs/tags/v1", sha, "main", nil},
		{"push", "refs/heads/v1", sha, "main", nil},
		{"push", "refs/heads/main", sha, "", []string{"main"}},
		{"push", "refs/heads/", sha, "", nil},
		{"push", "refs/heads/main", zeroSHA1, "main", nil},
		{"tag_push", "refs/tags/v1", sha, "main", []string{"tag"}},
		{"tag_push", "refs/tags/v1/../v1", sha, "main", nil},
		{"tag_push", "refs/heads/main", sha, "main", nil},
		{"tag_push", "refs/tags/v1", zeroSHA1, "main", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.ref, func(t *testing.T) {
			t.Parallel()
			h, rec := newGitLabHandler(t, GitLabOptions{Token: glToken, Sources: sources})
			event := "Push Hook"
			if tt.kind == "tag_push" {
				event = "Tag Push Hook"
			}
			body := glPushBody(t, tt.kind, tt.ref, tt.after, glProject("g/p", tt.defaultBranch), nil)
			if w := serve(h, glRequest(event, body, glToken)); w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got, want := sorted(rec.calls()), sorted(tt.want); !slices.Equal(got, want) {
				t.Errorf("triggered %v, want %v", got, want)
			}
		})
	}
}

// TestGitLabDuplicateKeys checks that a payload with a key twice is read
// the same way everywhere in the handler (Go keeps the last one, and
// matches keys without regard to case): the log line names the project
// the push was matched against. The signature covers the bytes, so what
// GitLab signed is what is read.
func TestGitLabDuplicateKeys(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	body := []byte(`{"object_kind": "push", "ref": "refs/heads/main", "REF": "refs/heads/dev", "after": "` + sha + `",
  "project": {"path_with_namespace": "g/p2", "git_http_url": "http://` + glHost + `/g/p2.git", "default_branch": "main"},
  "project": {"path_with_namespace": "g/p", "git_http_url": "http://` + glHost + `/g/p.git", "default_branch": "main"}}`)
	var logs bytes.Buffer
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if w := serve(h, glSigned("Push Hook", body, "", "msg-1", glNow)); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
		t.Errorf("triggered %v, want [p-dev-ssh] (the last project and ref)", got)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line["repository"] != "g/p" {
		t.Errorf("logged repository %v (%v), want g/p", line["repository"], err)
	}
}

// TestGitLabLogInjection sends payload and header values meant to forge
// or flood log lines: each delivery is one line, every value bounded.
func TestGitLabLogInjection(t *testing.T) {
	t.Parallel()
	const sha = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
	forged := "g/p\n" + `time=2026-03-14T15:09:26Z level=ERROR msg="agent compromised"` + strings.Repeat("x", 10000)
	body := glPushBody(t, "push", "refs/heads/main", sha, glProject(forged, "main"), nil)
	for _, handler := range []string{"text", "json"} {
		var logs bytes.Buffer
		var lh slog.Handler = slog.NewTextHandler(&logs, nil)
		if handler == "json" {
			lh = slog.NewJSONHandler(&logs, nil)
		}
		h, _ := newGitLabHandler(t, GitLabOptions{Token: glToken, Logger: slog.New(lh)})
		r := glRequest("Bogus Hook "+strings.Repeat("y", 10000), body, glToken)
		r.Header.Set("X-Gitlab-Event-UUID", strings.Repeat("z", 10000))
		if w := serve(h, r); w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		out := logs.String()
		if n := strings.Count(out, "\n"); n != 1 {
			t.Errorf("%s: %d lines logged, want 1:\n%s", handler, n, out)
		}
		if len(out) > 2000 {
			t.Errorf("%s: a %d-byte log line", handler, len(out))
		}
	}
}

// TestGitLabHeaderCaseOnTheWire sends the Standard Webhooks headers in
// lower case, as GitLab writes them, through a real server: header names
// are case-insensitive.
func TestGitLabHeaderCaseOnTheWire(t *testing.T) {
	t.Parallel()
	h, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	srv := httptest.NewServer(h)
	defer srv.Close()
	push := glPush(t, "refs/heads/dev", "g/p")
	signed := glSigned("Push Hook", push, "", "msg-1", glNow)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/hooks/gitlab", bytes.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		req.Header[k] = []string{signed.Header.Get(k)} // sent as written
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
		t.Errorf("Trigger called for %v", got)
	}
}

// TestGitLabSeenIDsUnauthenticated checks that only verified deliveries
// take room in the set of webhook-ids: callers without the key cannot
// fill it to push GitLab's ids out.
func TestGitLabSeenIDsUnauthenticated(t *testing.T) {
	t.Parallel()
	h, _ := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	push := glPush(t, "refs/heads/dev", "g/p")
	for i := range 100 {
		r := glSigned("Push Hook", push, "", "forged-"+strconv.Itoa(i), glNow)
		r.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
		if w := serve(h, r); w.Code != http.StatusUnauthorized {
			t.Fatalf("forged delivery: %d", w.Code)
		}
	}
	h.seen.mu.Lock()
	n := len(h.seen.until)
	h.seen.mu.Unlock()
	if n != 0 {
		t.Errorf("%d ids remembered from forged deliveries", n)
	}
}

// TestGitLabReplayAcrossRestart documents what a restart forgets: the
// webhook-ids are held in memory, so a delivery captured before a restart
// can be replayed once after it, within SignatureTolerance of its
// timestamp. The replay triggers a sync of what the sources already
// follow (the fetch reads the repository, not the payload), or hands a
// merge request event GitLab did send to OnMergeRequest again, which must
// be idempotent for GitLab's own retries anyway. Past the tolerance the
// replay is refused.
func TestGitLabReplayAcrossRestart(t *testing.T) {
	t.Parallel()
	push := glPush(t, "refs/heads/dev", "g/p")
	before, _ := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	if w := serve(before, glSigned("Push Hook", push, "", "msg-1", glNow)); w.Code != http.StatusOK {
		t.Fatalf("first delivery: %d", w.Code)
	}
	after, rec := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	after.now = func() time.Time { return glNow.Add(SignatureTolerance) }
	for i, want := range []string{`"triggered":["p-dev-ssh"]`, `"duplicate":true`} {
		if w := serve(after, glSigned("Push Hook", push, "", "msg-1", glNow)); !strings.Contains(w.Body.String(), want) {
			t.Errorf("replay %d after the restart: %d %s, want %s", i, w.Code, w.Body, want)
		}
	}
	late, _ := newGitLabHandler(t, GitLabOptions{SigningKey: glKey})
	late.now = func() time.Time { return glNow.Add(SignatureTolerance + time.Second) }
	if w := serve(late, glSigned("Push Hook", push, "", "msg-1", glNow)); w.Code != http.StatusUnauthorized {
		t.Errorf("replay past the tolerance: %d %s", w.Code, w.Body)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"p-dev-ssh"}) {
		t.Errorf("Trigger called for %v after the restart, want once", got)
	}
}
