package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/masked"
)

// testSecret is a secret value the agent knows, in specs, outputs and plans.
const testSecret = "s3cr3t-t0ken-9f2a71"

// widget returns a declared resource of kind Widget with spec.
func widget(name, spec string, labels map[string]string) *manifest.Resource {
	sum := sha256.Sum256([]byte(spec))
	return &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: name, Namespace: "default",
		Labels: labels, Spec: json.RawMessage(spec), SpecHash: "sha256:" + hex.EncodeToString(sum[:]),
		Origin: manifest.Origin{File: "widgets/" + name + ".yaml"}}
}

// explained is a store holding one resource with two generations, a
// history and outputs, and the dashboard serving it with a masker.
type explained struct {
	h  http.Handler
	st store.Store
	id int64
}

func newExplained(t *testing.T) explained {
	t.Helper()
	ctx := t.Context()
	pg := openStore(t)
	m := redact.New(testSecret)
	st := masked.New(pg, m)
	rev1 := manifest.Revision("api@sha256:" + strings.Repeat("1", 64))
	rev2 := manifest.Revision("api@sha256:" + strings.Repeat("2", 64))
	labels := map[string]string{"team": "<script>alert('label')</script>"}
	r1 := widget("web", `{"size": 1, "name": "<script>alert('spec')</script>", "token": "`+testSecret+`", "zone": "eu"}`, labels)
	res, _, err := st.ApplyResource(ctx, r1, store.SourceRef{Name: store.APISource, Revision: rev1})
	if err != nil {
		t.Fatal(err)
	}
	r2 := widget("web", `{"zone": "eu", "token": "`+testSecret+`", "size": 2, "name": "<script>alert('spec')</script>"}`, labels)
	if res, _, err = st.ApplyResource(ctx, r2, store.SourceRef{Name: store.APISource, Revision: rev2}); err != nil || res.Generation != 2 {
		t.Fatalf("second generation: %v", err)
	}
	for i, rev := range []manifest.Revision{rev1, rev2} {
		if _, err := st.AddSyncRecord(ctx, &store.SyncRecord{Source: store.APISource, Revision: rev, Success: true, Created: 1 - i, Updated: i,
			Commit: manifest.Commit{Author: "deployer-token"}, StartedAt: time.Now(), FinishedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	conds := []manifest.Condition{
		{Type: manifest.ConditionReady, Status: manifest.ConditionTrue, Reason: "Succeeded", Message: "done", LastTransitionTime: time.Now()},
		{Type: "GitHubActions", Status: manifest.ConditionTrue, Reason: "Succeeded",
			Message: "apply: run https://github.com/acme/infra/actions/runs/42 succeeded; see javascript:alert('cond') too"},
	}
	outputs := `{"run_url": "https://github.com/acme/infra/actions/runs/42", "evil": "javascript:alert('out')", "password": "` + testSecret + `"}`
	if _, err := st.SetResourceStatus(ctx, res.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: 2,
		Conditions: conds, Outputs: json.RawMessage(outputs)}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for _, rec := range []*store.ReconcileRecord{
		{Generation: 1, SourceRevision: rev1, Trigger: store.TriggerCreate, Phase: "completed", Success: true},
		{Generation: 2, SourceRevision: rev2, Trigger: store.TriggerUpdate, Phase: "completed", Success: true},
		{Generation: 2, SourceRevision: rev2, Trigger: store.TriggerDrift, Phase: "planning", Success: true,
			PlanOutput: "~ resource \"widget\" {\n    token = \"" + testSecret + "\"\n  - size  = 3 -> 2\n}"},
	} {
		rec.ResourceID, rec.Kind, rec.Namespace, rec.Name, rec.StartedAt, rec.FinishedAt = res.ID, "Widget", "default", "web", at, at
		// Written around the masking store, as an older agent might have.
		if _, err := pg.AddReconcileRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	return explained{h: newHandler(st, Options{Masker: m, Refresh: -1}), st: st, id: res.ID}
}

// cell matches a diff's line of code of class del or add, capturing its text.
var cell = regexp.MustCompile(`<td class="code (del|add)"><span class="sign">(?:-|&#43;)</span>([^<]*)</td>`)

// changes returns the removed and added lines of a diff page, unescaped.
func changes(body string) (del, add []string) {
	for _, m := range cell.FindAllStringSubmatch(body, -1) {
		line := strings.TrimSpace(text(m[2]))
		if m[1] == "del" {
			del = append(del, line)
		} else {
			add = append(add, line)
		}
	}
	return del, add
}

func TestResourceDiff(t *testing.T) {
	t.Parallel()
	x := newExplained(t)
	for _, tt := range []struct{ name, query string }{
		{"unified", "?diff=1..2"},
		{"split", "?diff=1..2&view=split"},
		{"the form", "?from=1&to=2&view=unified"},
	} {
		code, body, _ := get(t, x.h, fmt.Sprintf("/resources/%d%s", x.id, tt.query))
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", tt.name, code)
		}
		del, add := changes(body)
		// Only the changed field: the keys' order does not count.
		if len(del) != 1 || del[0] != `"size": 1,` || len(add) != 1 || add[0] != `"size": 2,` {
			t.Errorf("%s: removed %q, added %q; want size 1 -> 2 only", tt.name, del, add)
		}
		split := strings.Contains(body, `<table class="diff split">`)
		if split != strings.Contains(tt.query, "split") || strings.Contains(body, `<table class="diff unified">`) == split {
			t.Errorf("%s: split view %v", tt.name, split)
		}
		if !strings.Contains(body, `<option value="1" selected>1</option>`) || !strings.Contains(body, `<option value="2" selected>2</option>`) {
			t.Errorf("%s: the form does not show the generations compared", tt.name)
		}
		if strings.Contains(body, `http-equiv="refresh"`) {
			t.Errorf("%s: a diff page reloads itself", tt.name)
		}
	}

	// The same generation twice; generations not kept; nonsense.
	for query, want := range map[string]string{
		"?diff=2..2":   "The two specs are the same.",
		"?diff=1..9":   "The spec of generation 9 is not kept",
		"?diff=banana": `diff="banana": want two generations`,
		"?from=0&to=2": "want two positive numbers",
	} {
		code, body, _ := get(t, x.h, fmt.Sprintf("/resources/%d%s", x.id, query))
		if code != http.StatusOK || !strings.Contains(text(body), want) {
			t.Errorf("%s: status %d, no %q in\n%s", query, code, want, text(body))
		}
	}
	// Without a diff asked for, the page offers the form and links the
	// update in the history to what changed.
	_, body, _ := get(t, x.h, fmt.Sprintf("/resources/%d", x.id))
	if !strings.Contains(body, `<form class="diff-form" method="get" action="#diff">`) || strings.Contains(body, `<table class="diff`) {
		t.Error("the resource page does not offer the diff form alone")
	}
	if !strings.Contains(body, `href="?diff=1..2#diff">what changed</a>`) {
		t.Error("the update in the history does not link to what changed")
	}
}

// TestResourceExplainedSafely shows markup in specs and labels as text,
// links only http and https URLs, and masks secrets everywhere.
func TestResourceExplainedSafely(t *testing.T) {
	t.Parallel()
	x := newExplained(t)
	for _, path := range []string{"", "?diff=1..2", "?diff=1..2&view=split"} {
		_, body, hdr := get(t, x.h, fmt.Sprintf("/resources/%d%s", x.id, path))
		// The page's own script, and no other, carries its nonce.
		body = withoutOwnScript(t, body, hdr)
		if strings.Contains(body, "<script") {
			t.Errorf("%q: markup from the data is markup:\n%s", path, body)
		}
		for _, want := range []string{"<script>alert('label')</script>"} {
			if !strings.Contains(text(body), want) {
				t.Errorf("%q: %s is not shown as text", path, want)
			}
		}
		if strings.Contains(body, testSecret) {
			t.Errorf("%q: the secret is shown", path)
		}
		if path != "" {
			continue
		}
		if !strings.Contains(text(body), `"name": "<script>alert('spec')</script>"`) {
			t.Error("the spec's markup is not shown as text")
		}
		if strings.Contains(strings.ToLower(body), `href="javascript`) || strings.Contains(body, "#ZgotmplZ") {
			t.Error("a javascript: URL became a link")
		}
		for _, want := range []string{
			// The condition's run, inline and among the links; the output's.
			`run <a href="https://github.com/acme/infra/actions/runs/42" rel="noopener noreferrer nofollow">https://github.com/acme/infra/actions/runs/42</a> succeeded; see javascript:alert(&#39;cond&#39;) too`,
			`<dt>Output <code>/run_url</code></dt><dd><a class="url" href="https://github.com/acme/infra/actions/runs/42"`,
			`&#34;password&#34;: &#34;***&#34;`, `&#34;token&#34;: &#34;***&#34;`, `token = &#34;***&#34;`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the resource page lacks %s", want)
			}
		}
		if !strings.Contains(text(body), `"evil": "javascript:alert('out')"`) {
			t.Error("the output's javascript: URL is not shown as text")
		}
	}
}

// TestResourceHistoryCauses says what started each attempt and who, and
// keeps plans in collapsed details.
func TestResourceHistoryCauses(t *testing.T) {
	t.Parallel()
	x := newExplained(t)
	_, body, _ := get(t, x.h, fmt.Sprintf("/resources/%d", x.id))
	page := text(body)
	for _, want := range []string{
		"update new generation written through the API by deployer-token",
		"create new resource written through the API by deployer-token",
		"drift scheduled check of the world against the spec",
		"Last plan: drift, generation 2",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the history lacks %q", want)
		}
	}
	if n := strings.Count(body, `<details class="plan"`); n != 2 {
		t.Errorf("%d plans in details, want the last plan and the attempt's", n)
	}
	if strings.Contains(body, "<details class=\"plan\" open") {
		t.Error("a plan is open by default")
	}
}

func TestSourceCommitLinks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	const sha = "89abcdef0123456789abcdef0123456789abcdef"
	rev := manifest.Revision("main@sha1:" + sha)
	sources := []struct {
		name, url string
		links     SourceLinks
		want      string
	}{
		{"gh", "https://github.com/acme/infra.git", SourceLinks{}, "https://github.com/acme/infra/commit/" + sha},
		{"gl", "ssh://git@gitlab.com/acme/platform/team/infra.git", SourceLinks{}, "https://gitlab.com/acme/platform/team/infra/-/commit/" + sha},
		{"gl-self", "git@git.acme.test:ops/infra.git", SourceLinks{Provider: "gitlab"}, "https://git.acme.test/ops/infra/-/commit/" + sha},
		{"tpl", "ssh://git@git.example.com/infra.git", SourceLinks{CommitURL: "https://git.example.com/infra/commit/{sha}"},
			"https://git.example.com/infra/commit/" + sha},
		{"unknown", "https://git.example.com/acme/infra.git", SourceLinks{}, ""},
	}
	links := map[string]SourceLinks{}
	for _, s := range sources {
		links[s.name] = s.links
		now := time.Now()
		if _, err := st.PutSource(ctx, &store.Source{Name: s.name, Kind: store.SourceGit, URL: s.url, Phase: store.SourceReady,
			LastAppliedRevision: rev, LastAttemptedRevision: rev, LastSyncTime: &now, LastAppliedTime: &now,
			LastCommit: manifest.Commit{Author: "Ann <ann@acme.test>", Message: "Add <script>alert('commit')</script>\n\nbody"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddSyncRecord(ctx, &store.SyncRecord{Source: s.name, Revision: rev, Success: true, Created: 2,
			Commit: manifest.Commit{Author: "Ann", Message: "Add <script>alert('commit')</script>"}, StartedAt: now, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	h := newHandler(st, Options{Refresh: -1, SourceLinks: func(name string) SourceLinks { return links[name] }})
	for _, s := range sources {
		code, body, hdr := get(t, h, "/sources/"+s.name)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", s.name, code)
		}
		body = withoutOwnScript(t, body, hdr)
		if strings.Contains(body, "<script") || !strings.Contains(text(body), "Add <script>alert('commit')</script>") {
			t.Errorf("%s: the commit message is not shown as text", s.name)
		}
		hrefs := regexp.MustCompile(`<a class="rev" href="([^"]*)"`).FindAllStringSubmatch(body, -1)
		if s.want == "" {
			if len(hrefs) != 0 {
				t.Errorf("%s: a commit on an unknown host is linked: %q", s.name, hrefs)
			}
			continue
		}
		// The applied and attempted revisions, and the revision's row.
		if len(hrefs) != 3 {
			t.Errorf("%s: %d commit links, want 3", s.name, len(hrefs))
		}
		for _, m := range hrefs {
			if m[1] != s.want {
				t.Errorf("%s: commit link %q, want %q", s.name, m[1], s.want)
			}
		}
	}
}

// TestSourceRefusedRevision shows the revision a source is stalled on,
// what it would change, and the commit statuses told of it.
func TestSourceRefusedRevision(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	applied := manifest.Revision("main@sha1:" + strings.Repeat("a", 40))
	refused := manifest.Revision("main@sha1:" + strings.Repeat("b", 40))
	now := time.Now()
	src := &store.Source{Name: "infra", Kind: store.SourceGit, URL: "https://github.com/acme/infra.git", Phase: store.SourceReady,
		LastAppliedRevision: applied, LastAttemptedRevision: applied, LastSyncTime: &now, LastAppliedTime: &now}
	if _, err := st.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddSyncRecord(ctx, &store.SyncRecord{Source: "infra", Revision: applied, Success: true, Created: 14,
		Commit: manifest.Commit{Message: "Add the fleet"}, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	msg := "PruneLimitExceeded: the revision deletes 12 of 14 resources, more than the limit of 10"
	if _, err := st.AddSyncRecord(ctx, &store.SyncRecord{Source: "infra", Revision: refused, Deleted: 12, Unchanged: 2, Message: msg,
		Commit: manifest.Commit{Author: "Bob", Message: "Remove the fleet"}, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	src.Phase, src.Message, src.LastAttemptedRevision = store.SourceStalled, msg, refused
	src.LastCommit = manifest.Commit{Author: "Bob", Message: "Remove the fleet"}
	if _, err := st.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	// The notifications the store recorded, delivered to a commit status.
	if _, err := st.RouteNotices(ctx, 10, func(*store.Notice) []string { return []string{"github-status"} }); err != nil {
		t.Fatal(err)
	}
	ns, err := st.ClaimNotices(ctx, "test", 10, time.Minute)
	if err != nil || len(ns) == 0 {
		t.Fatalf("claim notices: %d, %v", len(ns), err)
	}
	for _, n := range ns {
		if err := st.CompleteNotice(ctx, n, store.NoticeCompletion{Results: map[string]store.Delivery{
			"github-status": {Result: store.DeliveryDelivered, Attempts: 1, At: now}}}); err != nil {
			t.Fatal(err)
		}
	}

	h := newHandler(st, Options{Refresh: -1})
	_, body, _ := get(t, h, "/sources/infra")
	i := strings.Index(body, `id="refused"`)
	if i < 0 {
		t.Fatalf("no refused revision on the page:\n%s", text(body))
	}
	refusal := text(body[i : strings.Index(body[i:], "</section>")+i])
	for _, want := range []string{"bbbbbbb", "Remove the fleet", "by Bob", "is not applied: " + msg,
		"It would create 0, update 0 and delete 12 resources.", "RevisionRefused github-status delivered"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, refusal)
		}
	}
	if !strings.Contains(body, `href="https://github.com/acme/infra/commit/`+strings.Repeat("b", 40)+`"`) {
		t.Error("the refused revision is not linked to its commit")
	}
	page := text(body)
	for _, want := range []string{"refused PruneLimitExceeded", "would create 0, update 0, delete 12", "applied", "14 created"} {
		if !strings.Contains(page, want) {
			t.Errorf("the revisions lack %q", want)
		}
	}
}
