package dashboard

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// liveBrowserTimeout bounds the whole live browser test.
const liveBrowserTimeout = 3 * time.Minute

// hostile is markup that must show as text wherever data carries it: were
// it run, it would mark the window.
const hostile = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`

// watchCSP reports the page's Content-Security-Policy violations in
// window.__csp. DevTools adds it to every document before the page's own
// script, and the page's policy does not apply to it.
const watchCSP = `window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`

// browserConsole collects what the browser's console says about the
// Content-Security-Policy, and the page's uncaught exceptions.
type browserConsole struct {
	mu   gosync.Mutex
	msgs []string
}

func (c *browserConsole) watch(ctx context.Context) {
	for m, err := range chromedp.Console(ctx) {
		if err != nil {
			return
		}
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy") {
			c.mu.Lock()
			c.msgs = append(c.msgs, string(m.Type)+": "+m.Text)
			c.mu.Unlock()
		}
	}
}

func (c *browserConsole) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.msgs
	c.msgs = nil
	return out
}

// TestBrowserLive drives the live dashboard, mounted in the agent's API as
// the agent mounts it, in headless Chromium: a change shows without a
// reload, the actions a grant allows work through their buttons and are
// audited, those it does not are absent and refused, the stream comes back
// after it drops, hostile data stays text, the page's policy is never
// violated by its own script, every page renders without JavaScript and
// reloads itself then, and a phone's width is never exceeded.
func TestBrowserLive(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	f := newFixture(t)
	ctx := t.Context()
	save := screenshots(t)

	// Hostile data: a label, a spec string, a status message and a commit.
	spec := json.RawMessage(`{"note":` + mustJSON(t, hostile) + `}`)
	bad, err := f.st.CreateResource(ctx, &manifest.Resource{
		Kind: "Widget", Group: "example.com", Version: "v1", Name: "hostile",
		Labels: map[string]string{"note": hostile}, Spec: spec, SpecHash: manifest.HashJSON(spec),
	}, store.SourceRef{Name: store.APISource})
	if err != nil {
		t.Fatal(err)
	}
	src, err := f.st.GetSource(ctx, sourceName)
	if err != nil {
		t.Fatal(err)
	}
	src.LastCommit = manifest.Commit{Author: "mallory", Message: "Fix it " + hostile + "\n\nbody " + hostile}
	if _, err := f.st.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}

	// Pages reload every second where no script runs: with one, a reload
	// would lose the marker the test leaves in the window.
	ls := newLiveServer(t, f.st, time.Second)
	pg := f.ids["production-pg"]
	pgPage := fmt.Sprintf("/resources/%d", pg)

	tctx, cancel := context.WithTimeout(ctx, liveBrowserTimeout)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(tctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	defer func() {
		if err := chromedp.Cancel(bctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancelBrowser()
	}()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	var console browserConsole
	go console.watch(bctx)

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, stepTimeout)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, expr string) string {
		t.Helper()
		return run(bctx, t, what, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	}
	// until waits for expr to be true in the page.
	until := func(what, expr string) {
		t.Helper()
		run(bctx, t, what, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(stepTimeout)))
	}
	// press clicks an action button of the page. The page swaps its
	// content whenever it changes, so the click is made in the page, at
	// once: between finding a button and clicking it from here, the page
	// may have replaced it with its copy.
	press := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			ok, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const b = document.querySelector(%q);
				if (!b || b.closest("[hidden]")) { return false; } b.click(); return true; })()`, sel), chromedp.WithPollingTimeout(stepTimeout)))
			if err == nil && !ok {
				err = fmt.Errorf("no button %s", sel)
			}
			return err
		})
	}
	login := func(secret string) {
		t.Helper()
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("someone:"+secret))
		do("log in", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
				Headers: network.Headers{"Authorization": auth}})
			return err
		}))
	}
	// clean checks that nothing violated the page's policy, nor threw.
	clean := func(where string) {
		t.Helper()
		if v := eval("read the violations", `JSON.stringify(window.__csp || [])`); v != "[]" {
			t.Errorf("%s: Content-Security-Policy violations: %s", where, v)
		}
		if m := console.take(); len(m) > 0 {
			t.Errorf("%s: the console says %q", where, m)
		}
	}
	do("watch for policy violations", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchCSP})
		return err
	}))

	// A status change shows without a reload.
	login(writeSecret)
	do("open production-pg", chromedp.Navigate(ls.url+pgPage),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-actions] button[data-url$="/reconcile"]`)))
	eval("mark the window", `window.__marker = "kept"`)
	if _, err := f.st.SuspendResource(ctx, pg, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	until("see the suspension", `!!document.querySelector("h1.resource-title .tag.warn")`)
	// The swapped-in buttons are shown too: resume now, no reconcile.
	until("see resume offered", `!!document.querySelector('[data-actions]:not([hidden]) button[data-url$="/resume"]')`)
	notReloaded := func(when string) {
		t.Helper()
		if got := eval("read the marker", `window.__marker + " " + performance.getEntriesByType("navigation").length`); got != "kept 1" {
			t.Errorf("%s: the page was reloaded (marker and navigations: %q)", when, got)
		}
	}
	notReloaded("after the suspension")
	if _, err := f.st.SuspendResource(ctx, pg, false, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	until("see the resume", `!document.querySelector("h1.resource-title .tag.warn")`)
	clean("live update")
	save("live-resource-desktop.png", screenshot(bctx, t, "screenshot"))

	// Reconcile through its button, confirmed in the dialog.
	reconcile := fmt.Sprintf("/api/v1/resources/%d/reconcile", pg)
	do("reconcile", press(`button[data-url$="/reconcile"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] .confirm-ok`)))
	if q := run(bctx, t, "read the question", chromedp.Text(chromedp.CSS(`dialog#confirm-action .question`))); !strings.Contains(q, "Reconcile DatabaseCluster/production-pg now?") {
		t.Errorf("the dialog asks %q", q)
	}
	do("confirm", chromedp.Click(chromedp.CSS(`dialog#confirm-action .confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#action-result[data-state="ok"]`)))
	if got := ls.written(reconcile); len(got) != 1 || got[0] != `{}` {
		t.Errorf("the reconcile button sent %q", got)
	}

	// Suspend with a reason; cancelling first sends nothing.
	suspend := fmt.Sprintf("/api/v1/resources/%d/suspend", pg)
	do("suspend, then cancel", press(`button[data-url$="/suspend"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] input[name=reason]`)),
		chromedp.Click(chromedp.CSS(`dialog#confirm-action button[value=cancel]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`dialog#confirm-action`)))
	if got := ls.written(suspend); len(got) != 0 {
		t.Errorf("a cancelled suspend sent %q", got)
	}
	do("suspend with a reason", press(`button[data-url$="/suspend"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] input[name=reason]`)),
		chromedp.SendKeys(chromedp.CSS(`dialog#confirm-action input[name=reason]`), "maintenance window"),
		chromedp.Click(chromedp.CSS(`dialog#confirm-action .confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#action-result[data-state="ok"]`)))
	until("see the suspension", `!!document.querySelector("h1.resource-title .tag.warn")`)
	if got := ls.written(suspend); len(got) != 1 || got[0] != `{"reason":"maintenance window"}` {
		t.Errorf("the suspend button sent %q", got)
	}
	if r, err := f.st.GetResource(ctx, pg); err != nil || r.SuspendedBy() != store.SuspendedByAPI {
		t.Errorf("after the suspend button: %v %v", r, err)
	}
	logs := ls.logs.String()
	for _, path := range []string{reconcile, suspend} {
		if want := `level=INFO msg="api request" token=write method=POST path=` + path; !strings.Contains(logs, want) {
			t.Errorf("the write is not audited as %s:\n%s", want, logs)
		}
	}
	notReloaded("after the actions")
	clean("actions")

	// The stream drops; what changes meanwhile shows once it is back. An
	// action the page still offers but the API refuses tells why.
	do("resume", press(`button[data-url$="/resume"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] .confirm-ok`)),
		chromedp.Click(chromedp.CSS(`dialog#confirm-action .confirm-ok`)))
	until("see the resume", `!document.querySelector("h1.resource-title .tag.warn") && !!document.querySelector('button[data-url$="/reconcile"]')`)
	ls.cutStreams(true)
	do("see the stream drop", chromedp.WaitVisible(chromedp.CSS(`#live[data-state="reconnecting"]`)))
	if _, err := f.st.SuspendResource(ctx, pg, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	do("reconcile a suspended resource", press(`button[data-url$="/reconcile"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] .confirm-ok`)),
		chromedp.Click(chromedp.CSS(`dialog#confirm-action .confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#action-result[data-state="error"]`)))
	if msg := run(bctx, t, "read the error", chromedp.Text(chromedp.CSS(`#action-result`))); !strings.Contains(msg, "Reconcile failed") ||
		!strings.Contains(msg, "is suspended") {
		t.Errorf("the refused reconcile says %q", msg)
	}
	ls.cutStreams(false)
	do("see the stream back", chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	until("see the suspension made while the stream was down", `!!document.querySelector("h1.resource-title .tag.warn")`)
	notReloaded("after the stream came back")
	if _, err := f.st.SuspendResource(ctx, pg, false, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	until("see the resume", `!document.querySelector("h1.resource-title .tag.warn")`)
	// Refused requests log errors of the network to the console, not of the policy.
	clean("reconnection")

	// Hostile data is text, in the page as served and as swapped in.
	for _, p := range []string{fmt.Sprintf("/resources/%d", bad.ID), "/sources/" + sourceName} {
		do("open "+p, chromedp.Navigate(ls.url+p), chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
		hostileIsText(t, bctx, p, eval)
		clean(p)
	}
	if _, err := f.st.SetResourceStatus(ctx, bad.ID, store.StatusUpdate{Phase: manifest.PhaseFailed,
		Message: "swapped " + hostile, ObservedGeneration: bad.Generation}); err != nil {
		t.Fatal(err)
	}
	do("open the hostile resource", chromedp.Navigate(ls.url+fmt.Sprintf("/resources/%d", bad.ID)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	eval("mark the window", `window.__marker = "kept"`)
	if _, err := f.st.SetResourceStatus(ctx, bad.ID, store.StatusUpdate{Phase: manifest.PhaseFailed,
		Message: "swapped again " + hostile, ObservedGeneration: bad.Generation}); err != nil {
		t.Fatal(err)
	}
	until("see the new message", `document.querySelector("main").textContent.includes("swapped again <script>")`)
	hostileIsText(t, bctx, "the swapped hostile resource", eval)
	notReloaded("after the hostile swap")
	clean("hostile data")

	// Without a grant there are no buttons, and the API refuses the write
	// all the same.
	login(readSecret)
	do("open production-pg as a reader", chromedp.Navigate(ls.url+pgPage),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	if n := eval("count buttons", `String(document.querySelectorAll("button[data-url], [data-actions]").length)`); n != "0" {
		t.Errorf("a reader is offered %s actions", n)
	}
	status := eval("reconcile directly", fmt.Sprintf(`fetch(%q, {method: "POST", credentials: "same-origin",
		headers: {"Content-Type": "application/json"}, body: "{}"}).then((r) => String(r.status))`, reconcile))
	if status != "403" {
		t.Errorf("a reader's reconcile: %s, want 403", status)
	}
	if got := ls.written(reconcile); len(got) != 3 {
		t.Errorf("reconcile requests reaching the API: %q, want the writer's two and the reader's", got)
	}
	console.take() // the refused fetch is logged as a failed request

	// At a phone's width nothing scrolls sideways, the dialog included.
	login(writeSecret)
	do("emulate a phone", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, p := range []string{"/", pgPage, "/sources/" + sourceName, fmt.Sprintf("/resources/%d", bad.ID)} {
		do("open "+p+" on a phone", chromedp.Navigate(ls.url+p), chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
		// The pages left behind closed their streams: browsers open few
		// connections to one host, and would have none left.
		waitFor(t, "the streams of the pages left to close", func() bool { return ls.openStreams() == 1 })
		fitsPhone(t, bctx, p)
		if p == pgPage {
			do("ask to suspend on a phone", press(`button[data-url$="/suspend"]`),
				chromedp.WaitVisible(chromedp.CSS(`dialog#confirm-action[open] input[name=reason]`)))
			fitsPhone(t, bctx, p+" with the dialog")
			save("live-dialog-phone.png", screenshot(bctx, t, "screenshot"))
			do("cancel", chromedp.Click(chromedp.CSS(`dialog#confirm-action button[value=cancel]`)))
		}
		save("live-"+strings.NewReplacer("/", "-").Replace(strings.Trim(p, "/"))+"-phone.png",
			screenshot(bctx, t, "screenshot"))
		clean(p + " on a phone")
	}
	do("leave the phone", chromedp.EmulateReset())

	// The watch itself works: a script without the nonce is refused.
	eval("add a script without the nonce", `const s = document.createElement("script"); s.textContent = "window.__pwned = 3"; document.body.append(s); ""`)
	until("see the violation", `window.__csp.length === 1`)
	if v := eval("read the violation", `window.__csp[0] + " " + String(window.__pwned)`); !strings.HasPrefix(v, "script-src") || !strings.HasSuffix(v, "undefined") {
		t.Errorf("the refused script: %q", v)
	}

	// Without JavaScript every page renders, shows no action, and reloads
	// itself.
	do("turn JavaScript off", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	for _, p := range []struct{ path, ready string }{
		{"/", "#resources tr.resource"},
		{pgPage, "#history tr.attempt"},
		{"/sources/" + sourceName, "#resources tr.resource"},
		{"/nope", "section.error"},
	} {
		before := ls.hits(p.path)
		do("open "+p.path+" without JavaScript", chromedp.Navigate(ls.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		for _, sel := range []string{"[data-actions]", "#live", ".live-note", "dialog"} {
			do("check "+sel+" is hidden", chromedp.WaitNotVisible(chromedp.CSS(sel), chromedp.AtLeast(0)))
		}
		if p.path == "/nope" {
			continue // a missing page does not come back by reloading
		}
		save("nojs-"+strings.NewReplacer("/", "-").Replace(strings.Trim(p.path, "/"))+".png",
			screenshot(bctx, t, "screenshot"))
		waitFor(t, "the reloads of "+p.path+" without JavaScript", func() bool { return ls.hits(p.path) >= before+3 })
	}
}

// hostileIsText checks that the page shows the hostile markup as text and
// ran none of it.
func hostileIsText(t *testing.T, bctx context.Context, where string, eval func(what, expr string) string) {
	t.Helper()
	got := eval("inspect "+where, `[String(window.__pwned), String(document.scripts.length),
		String(document.querySelectorAll("main img, main script").length),
		String(document.querySelector("main").textContent.includes("<script>window.__pwned = 1</script>"))].join(" ")`)
	if got != "undefined 1 0 true" {
		t.Errorf("%s: pwned, scripts, markup in main, markup shown as text = %q, want \"undefined 1 0 true\"", where, got)
	}
}

// waitFor waits for cond with a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(stepTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, stepTimeout)
		case <-tick.C:
		}
	}
}

// mustJSON encodes v as JSON, leaving <, > and & as they are.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}
