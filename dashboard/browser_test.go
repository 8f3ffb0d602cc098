package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumEnv names a Chrome or Chromium binary to use instead of the one on PATH.
const chromiumEnv = "NO8S_CHROMIUM"

// browserTimeout bounds the whole browser test, start-up included, and
// stepTimeout each step, so that a missing element fails the test quickly.
const (
	browserTimeout = 60 * time.Second
	stepTimeout    = 30 * time.Second
)

// phone is the viewport of a small phone, in CSS pixels.
const phoneWidth, phoneHeight = 390, 844

// chromium returns the browser to drive, failing the test when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("%s=%s: %v", chromiumEnv, p, err)
		}
		return path
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatalf("no Chromium to run the dashboard's browser test: install Debian's chromium package "+
		"(apt-get install chromium; `make test` does it when run as root), or set %s to a Chrome or Chromium binary", chromiumEnv)
	return ""
}

// screenshotsEnv names a folder for the browser tests' screenshots; they
// keep none when it is not set.
const screenshotsEnv = "NO8S_SCREENSHOTS"

// screenshots returns a function that keeps a screenshot under name in the
// folder NO8S_SCREENSHOTS names, and does nothing when it is not set.
func screenshots(t *testing.T) func(name string, img []byte) {
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return func(string, []byte) {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return func(name string, img []byte) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// browser starts headless Chromium at a desktop's size and returns its
// context, which the test's end closes; timeout bounds the whole test.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe := chromium(t)
	// Not t.Context(): that ends before the cleanups, which need the
	// browser to close it.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // tests often run as root, where the sandbox cannot start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	// Close the browser before t.TempDir removes its profile: cleanups
	// run last registered first.
	t.Cleanup(func() {
		if err := chromedp.Cancel(bctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancelBrowser()
	})
	// The first run starts the browser and ties it to bctx; the steps
	// after it each have their own deadline.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return bctx
}

// doSteps runs browser steps with a step's deadline.
func doSteps(t *testing.T, bctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(bctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// fitsPhone checks that the page in the browser, emulating a phone, does
// not scroll sideways, nor do its tables, and returns a full screenshot.
func fitsPhone(t *testing.T, bctx context.Context, name string) []byte {
	t.Helper()
	widths := run(bctx, t, "measure the "+name, chromedp.Evaluate[[]int](
		`[document.scrollingElement.scrollWidth, window.innerWidth]`))
	scrollWidth, innerWidth := widths[0], widths[1]
	// A phone lays out a page without a viewport meta tag 980 pixels
	// wide, and zooms out of a page wider than the screen: either way
	// the window is wider than the phone.
	if innerWidth != phoneWidth {
		t.Errorf("%s on a phone: the window is %dpx wide, want %d: the page lacks the viewport meta tag or is too wide",
			name, innerWidth, phoneWidth)
	}
	if scrollWidth > innerWidth {
		t.Errorf("%s on a phone: the page is %dpx wide in a %dpx window: it scrolls sideways",
			name, scrollWidth, innerWidth)
	}
	// Nor do the tables within the page: they become cards.
	wide := run(bctx, t, "measure the tables of the "+name, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll(".table-wrap")).filter(e => e.scrollWidth > e.clientWidth)
			.map(e => e.querySelector("table").id || e.closest("section").id || "table")`))
	if len(wide) > 0 {
		t.Errorf("%s on a phone: these tables scroll sideways: %v", name, wide)
	}
	img := run(bctx, t, "screenshot the "+name+" on a phone", chromedp.FullScreenshot(100))
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}
	if cfg.Width != phoneWidth {
		t.Errorf("%s on a phone: the full-page screenshot is %dpx wide, want %d", name, cfg.Width, phoneWidth)
	}
	return img
}

// TestBrowser drives the dashboard over the synced and reconciled example
// repository in headless Chromium: the overview lists the example sources
// and resources, a click leads to a resource and its history, the graph
// draws the dependencies and selects one, and the pages fit a phone's
// width. It keeps screenshots in the folder NO8S_SCREENSHOTS names.
func TestBrowser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Refresh on, but slower than the test, so that no reload interrupts it.
	srv := httptest.NewServer(New(f.st, Options{Refresh: time.Hour, Version: "browser-test"}))
	defer srv.Close()
	save := screenshots(t)
	bctx := browser(t, browserTimeout)
	text := func(what string, sel chromedp.CSS) string {
		t.Helper()
		return run(bctx, t, what, chromedp.Text(sel))
	}
	count := func(what, sel string) int {
		t.Helper()
		return run(bctx, t, what, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doSteps(t, bctx, what, steps...)
	}

	// The overview shows the example source and every example resource.
	do("open the overview",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#sources tr.source")),
		chromedp.WaitVisible(chromedp.CSS("#resources tr.resource")),
	)
	main := text("read the overview", "main")
	for _, want := range []string{sourceName, "ready", f.dir} {
		if !strings.Contains(main, want) {
			t.Errorf("the overview does not show %q", want)
		}
	}
	for name, kind := range exampleResources {
		if !strings.Contains(main, kind+"/"+name) {
			t.Errorf("the overview does not show %s/%s", kind, name)
		}
	}
	if n := count("count resources", "#resources tr.resource"); n != len(exampleResources) {
		t.Errorf("the overview lists %d resources, want %d", n, len(exampleResources))
	}
	save("overview-desktop.png", screenshot(bctx, t, "screenshot the overview"))

	// Click a resource and land on its page.
	id := f.ids["production-pg"]
	do("click production-pg",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#resources a.ref[href="/resources/%d"]`, id))),
		chromedp.WaitVisible(chromedp.CSS("h1.resource-title")),
	)
	if loc, want := run(bctx, t, "read the location", chromedp.Location()), fmt.Sprintf("%s/resources/%d", srv.URL, id); loc != want {
		t.Fatalf("after the click the browser is at %s, want %s", loc, want)
	}
	if title := text("read the title", "h1.resource-title"); !strings.Contains(title, "DatabaseCluster/production-pg") ||
		!strings.Contains(title, "ready") {
		t.Errorf("the resource page's heading is %q", title)
	}

	// Follow the link to the history, which has the attempt that made it ready.
	do("open the history",
		chromedp.Click(chromedp.CSS(`nav.jump a[href="#history"]`)),
		chromedp.WaitVisible(chromedp.CSS("#history tr.attempt")),
	)
	if loc := run(bctx, t, "read the location", chromedp.Location()); !strings.HasSuffix(loc, "#history") {
		t.Errorf("after following the history link the browser is at %s", loc)
	}
	if n := count("count attempts", "#history tr.attempt"); n < 1 {
		t.Errorf("the history shows %d attempts, want at least one", n)
	}
	history := text("read the history", "#history")
	for _, want := range []string{"succeeded", testAgentID} {
		if !strings.Contains(history, want) {
			t.Errorf("the history does not show %q:\n%s", want, history)
		}
	}
	save("resource-desktop.png", screenshot(bctx, t, "screenshot the resource"))

	// The graph draws the four resources and the two dependencies; a
	// click selects the database: the network and the DNS record stand
	// out, the staging database is dimmed.
	do("open the graph",
		chromedp.Navigate(srv.URL+"/graph"),
		chromedp.WaitVisible(chromedp.CSS("svg.graph g.node")),
	)
	if n := count("count the nodes", "svg.graph g.node"); n != len(exampleResources) {
		t.Errorf("the graph draws %d resources, want %d", n, len(exampleResources))
	}
	if n := count("count the edges", "svg.graph path.edge"); n != 2 {
		t.Errorf("the graph draws %d dependencies, want 2", n)
	}
	// The SVG fits the page, scaled by its viewBox.
	if w := run(bctx, t, "measure the graph", chromedp.Evaluate[[]float64](
		`[document.querySelector("svg.graph").getBoundingClientRect().width, document.querySelector(".graph-wrap").clientWidth]`)); w[0] > w[1]+1 {
		t.Errorf("the graph is %.0fpx wide in a %.0fpx box", w[0], w[1])
	}
	save("graph-desktop.png", screenshot(bctx, t, "screenshot the graph"))
	do("select production-pg",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`svg.graph a[href="/graph?focus=%d"] rect`, id))),
		chromedp.WaitVisible(chromedp.CSS("svg.graph g.node.focus")),
	)
	if n := count("count the dimmed", "svg.graph g.node.dim"); n != 1 {
		t.Errorf("%d resources dimmed, want 1 (staging-pg)", n)
	}
	if n := count("count the highlighted", "svg.graph g.node.up, svg.graph g.node.down"); n != 2 {
		t.Errorf("%d resources highlighted, want 2 (the network and the DNS record)", n)
	}
	if panel := text("read the selection", ".focus-panel"); !strings.Contains(panel, "DatabaseCluster/production-pg") {
		t.Errorf("the selection panel says %q", panel)
	}
	save("graph-focus-desktop.png", screenshot(bctx, t, "screenshot the focused graph"))

	// At a phone's width no page scrolls sideways.
	do("emulate a phone", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, page := range []struct{ name, path, ready string }{
		{"overview", "/", "#resources tr.resource"},
		{"resource", fmt.Sprintf("/resources/%d", id), "#history tr.attempt"},
		{"source", "/sources/" + sourceName, "#resources tr.resource"},
		{"graph", "/graph", "svg.graph g.node"},
		{"graph-focus", fmt.Sprintf("/graph?focus=%d", id), "svg.graph g.node.focus"},
	} {
		do("open the "+page.name+" on a phone",
			chromedp.Navigate(srv.URL+page.path),
			chromedp.WaitVisible(chromedp.CSS(page.ready)),
		)
		save(page.name+"-phone.png", fitsPhone(t, bctx, page.name))
	}
}

// TestBrowserLarge renders the overview and the graph of 1,000 resources
// at a desktop's and a phone's width: the graph groups itself, draws
// every resource when asked, and nothing scrolls sideways on the phone.
// It logs how long each page took to load and paint.
func TestBrowserLarge(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	seedMany(t, st, 1000)
	srv := httptest.NewServer(New(st, Options{Refresh: -1}))
	defer srv.Close()
	save := screenshots(t)
	bctx := browser(t, 3*browserTimeout)
	pages := []struct{ name, path, ready string }{
		{"overview", "/", "#resources tr.resource"},
		{"graph", "/graph", "svg.graph g.node.group"},
		{"graph-all", "/graph?group=none", "svg.graph g.node"},
	}
	for _, size := range []struct {
		name  string
		phone bool
	}{{"desktop", false}, {"phone", true}} {
		if size.phone {
			doSteps(t, bctx, "emulate a phone", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		}
		for _, page := range pages {
			doSteps(t, bctx, "open the "+page.name+" of 1,000 resources",
				chromedp.Navigate(srv.URL+page.path),
				chromedp.WaitVisible(chromedp.CSS(page.ready)),
			)
			// The first paint may be recorded after the page is
			// visible to the test: wait for it, for five seconds at most.
			timing := run(bctx, t, "read the timing of the "+page.name, chromedp.Evaluate[map[string]float64](`new Promise(resolve => {
				const read = () => {
					const n = performance.getEntriesByType("navigation")[0];
					const p = performance.getEntriesByType("paint").find(e => e.name === "first-contentful-paint");
					return {response: n.responseEnd - n.startTime, dom: n.domContentLoadedEventEnd - n.startTime,
						load: n.loadEventEnd - n.startTime, paint: p ? p.startTime : -1, bytes: n.transferSize};
				};
				const check = () => { const t = read(); if (t.paint >= 0 && t.load > 0) resolve(t); };
				new PerformanceObserver(check).observe({type: "paint", buffered: true});
				addEventListener("load", () => setTimeout(check, 0));
				check();
				setTimeout(() => resolve(read()), 5000);
			})`, chromedp.EvalAwaitPromise))
			t.Logf("%s of 1,000 resources on a %s: response %.0fms, DOM ready %.0fms, load %.0fms, first contentful paint %.0fms, %.0f KiB",
				page.name, size.name, timing["response"], timing["dom"], timing["load"], timing["paint"], timing["bytes"]/1024)
			switch page.name {
			case "graph":
				if n := run(bctx, t, "count the groups", chromedp.Evaluate[int](`document.querySelectorAll("svg.graph g.node.group").length`)); n != 13 {
					t.Errorf("the grouped graph draws %d groups, want 13 kinds", n)
				}
				if note := run(bctx, t, "read the note", chromedp.Text(chromedp.CSS(".graph-summary"))); !strings.Contains(note, "as there are more than 200") {
					t.Errorf("the grouped graph does not say why it grouped: %q", note)
				}
			case "graph-all":
				if n := run(bctx, t, "count the nodes", chromedp.Evaluate[int](`document.querySelectorAll("svg.graph g.node").length`)); n != 1000 {
					t.Errorf("the whole graph draws %d resources, want 1000", n)
				}
			}
			var img []byte
			if size.phone {
				img = fitsPhone(t, bctx, page.name+" of 1,000")
			} else {
				img = screenshot(bctx, t, "screenshot the "+page.name)
			}
			save("large-"+page.name+"-"+size.name+".png", img)
		}
	}
}

// screenshot captures the whole page when screenshots are kept (see
// screenshotsEnv), and nothing otherwise: capturing a long page costs
// seconds that a test run need not spend.
func screenshot(bctx context.Context, t *testing.T, what string) []byte {
	t.Helper()
	if os.Getenv(screenshotsEnv) == "" {
		return nil
	}
	return run(bctx, t, what, chromedp.FullScreenshot(100))
}

// run runs one browser action with a step's deadline and returns its value.
func run[T any](bctx context.Context, t *testing.T, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}
