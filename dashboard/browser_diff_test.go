package dashboard

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/no8s/no8s-agent/store"
)

// TestBrowserDiff compares generations in headless Chromium, unified and
// side by side, through the links and the form, at a desktop's and a
// phone's width: on the phone the page never scrolls sideways, and a wide
// diff scrolls inside its own box. It keeps screenshots in the folder
// NO8S_SCREENSHOTS names.
func TestBrowserDiff(t *testing.T) {
	t.Parallel()
	x := newExplained(t)
	// A third generation with a line wider than a phone.
	long := strings.Repeat("0123456789", 12)
	r3 := widget("web", `{"size": 2, "name": "<script>alert('spec')</script>", "zone": "eu-west",
		"token": "`+testSecret+`", "motd": "`+long+`", "replicas": [1, 2, 3]}`, map[string]string{"team": "web"})
	if _, _, err := x.st.ApplyResource(t.Context(), r3, store.SourceRef{Name: store.APISource, Revision: "api@sha256:3"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.h)
	defer srv.Close()
	save := screenshots(t)
	bctx := browser(t, browserTimeout)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doSteps(t, bctx, what, steps...)
	}
	lines := func(what, class string) string {
		t.Helper()
		return run(bctx, t, what, chromedp.Evaluate[string](fmt.Sprintf(
			`Array.from(document.querySelectorAll("table.diff td.code.%s")).map(e => e.textContent).join("\n")`, class)))
	}
	page := fmt.Sprintf("%s/resources/%d", srv.URL, x.id)

	do("open the diff of generations 1 and 2",
		chromedp.Navigate(page+"?diff=1..2#diff"),
		chromedp.WaitVisible(chromedp.CSS("table.diff.unified")),
	)
	if del, add := lines("read the removed lines", "del"), lines("read the added lines", "add"); del != `-  "size": 1,` || add != `+  "size": 2,` {
		t.Errorf("unified: removed %q, added %q", del, add)
	}
	save("diff-unified-desktop.png", run(bctx, t, "screenshot the unified diff", chromedp.FullScreenshot(100)))

	do("show it side by side",
		chromedp.Click(chromedp.CSS(`#diff a[href$="view=split#diff"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.diff.split")),
	)
	if del, add := lines("read the removed lines", "del"), lines("read the added lines", "add"); del != `-  "size": 1,` || add != `+  "size": 2,` {
		t.Errorf("split: removed %q, added %q", del, add)
	}
	save("diff-split-desktop.png", run(bctx, t, "screenshot the split diff", chromedp.FullScreenshot(100)))

	// The form: generation 1 against 3, side by side.
	do("compare generations 1 and 3 with the form",
		chromedp.SetValue(chromedp.CSS(`form.diff-form select[name="from"]`), "1"),
		chromedp.SetValue(chromedp.CSS(`form.diff-form select[name="to"]`), "3"),
		chromedp.SetValue(chromedp.CSS(`form.diff-form select[name="view"]`), "split"),
		chromedp.Click(chromedp.CSS(`form.diff-form button`)),
		chromedp.WaitVisible(chromedp.CSS(`table.diff.split th[colspan="2"]:nth-child(2)`)),
	)
	if loc := run(bctx, t, "read the location", chromedp.Location()); !strings.HasSuffix(loc, "?from=1&to=3&view=split#diff") {
		t.Errorf("the form led to %s", loc)
	}
	if head := run(bctx, t, "read the heading", chromedp.Text(chromedp.CSS("table.diff.split thead"))); !strings.Contains(strings.ToLower(head), "generation 3") {
		t.Errorf("the diff compares %q", head)
	}
	if add := lines("read the added lines", "add"); !strings.Contains(add, long) {
		t.Errorf("generation 3's lines: %q", add)
	}
	if same := lines("read the lines unchanged", "same"); !strings.Contains(same, `"token": "***"`) || strings.Contains(same, testSecret) {
		t.Errorf("the token is not masked: %q", same)
	}

	// On a phone the page stays put and the diff scrolls in its box.
	do("emulate a phone", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, view := range []struct{ name, query, table string }{
		{"diff-unified", "?diff=1..3", "table.diff.unified"},
		{"diff-split", "?diff=1..3&view=split", "table.diff.split"},
	} {
		do("open the "+view.name+" on a phone",
			chromedp.Navigate(page+view.query+"#diff"),
			chromedp.WaitVisible(chromedp.CSS(view.table)),
		)
		img := fitsPhone(t, bctx, view.name)
		box := run(bctx, t, "measure the diff's box", chromedp.Evaluate[[]int](
			`(b => [b.scrollWidth, b.clientWidth, Math.ceil(b.getBoundingClientRect().right)])(document.querySelector(".diff-scroll"))`))
		if box[0] <= box[1] {
			t.Errorf("%s on a phone: the diff is %dpx wide in a %dpx box: the long line wraps or is cut", view.name, box[0], box[1])
		}
		if box[2] > phoneWidth {
			t.Errorf("%s on a phone: the diff's box ends at %dpx, past the %dpx screen", view.name, box[2], phoneWidth)
		}
		save(view.name+"-phone.png", img)
	}
}
