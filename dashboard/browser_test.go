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
	stepTimeout    = 15 * time.Second
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
// take none when it is not set.
const screenshotsEnv = "NO8S_SCREENSHOTS"

// screenshots returns a function that keeps a screenshot under its name in
// the folder screenshotsEnv names, or drops it when the variable is unset.
func screenshots(t *testing.T) func(name string, img []byte) {
	t.Helper()
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

// TestBrowser drives the dashboard over the synced and reconciled example
// repository in headless Chromium: the overview lists the example sources
// and resources, a click leads to a resource and its history, and the pages
// fit a phone's width. It keeps screenshots in the folder NO8S_SCREENSHOTS
// names, when set.
func TestBrowser(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	f := newFixture(t)
	// Refresh on, but slower than the test, so that no reload interrupts it.
	srv := httptest.NewServer(New(f.st, Options{Refresh: time.Hour, Version: "browser-test"}))
	defer srv.Close()

	save := screenshots(t)

	ctx, cancel := context.WithTimeout(t.Context(), browserTimeout)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // tests often run as root, where the sandbox cannot start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	// Close the browser before t.TempDir removes its profile.
	defer func() {
		if err := chromedp.Cancel(bctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancelBrowser()
	}()

	// The first run starts the browser and ties it to bctx; the steps
	// after it each have their own deadline.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, stepTimeout)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(what string, sel chromedp.CSS) string {
		t.Helper()
		return run(bctx, t, what, chromedp.Text(sel))
	}
	count := func(what, sel string) int {
		t.Helper()
		return run(bctx, t, what, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
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
	save("overview-desktop.png", run(bctx, t, "screenshot the overview", chromedp.FullScreenshot(100)))

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
	save("resource-desktop.png", run(bctx, t, "screenshot the resource", chromedp.FullScreenshot(100)))

	// At a phone's width no page scrolls sideways.
	do("emulate a phone", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, page := range []struct{ name, path, ready string }{
		{"overview", "/", "#resources tr.resource"},
		{"resource", fmt.Sprintf("/resources/%d", id), "#history tr.attempt"},
		{"source", "/sources/" + sourceName, "#resources tr.resource"},
	} {
		do("open the "+page.name+" on a phone",
			chromedp.Navigate(srv.URL+page.path),
			chromedp.WaitVisible(chromedp.CSS(page.ready)),
		)
		widths := run(bctx, t, "measure the "+page.name, chromedp.Evaluate[[]int](
			`[document.documentElement.scrollWidth, window.innerWidth]`))
		scrollWidth, innerWidth := widths[0], widths[1]
		// A phone lays out a page without a viewport meta tag 980 pixels
		// wide, and zooms out of a page wider than the screen: either way
		// the window is wider than the phone.
		if innerWidth != phoneWidth {
			t.Errorf("%s on a phone: the window is %dpx wide, want %d: the page lacks the viewport meta tag or is too wide",
				page.name, innerWidth, phoneWidth)
		}
		if scrollWidth > innerWidth {
			t.Errorf("%s on a phone: the page is %dpx wide in a %dpx window: it scrolls sideways",
				page.name, scrollWidth, innerWidth)
		}
		// Nor do the tables within the page: they become cards.
		wide := run(bctx, t, "measure the tables of the "+page.name, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll(".table-wrap")).filter(e => e.scrollWidth > e.clientWidth)
				.map(e => e.querySelector("table").id || e.closest("section").id || "table")`))
		if len(wide) > 0 {
			t.Errorf("%s on a phone: these tables scroll sideways: %v", page.name, wide)
		}
		img := run(bctx, t, "screenshot the "+page.name+" on a phone", chromedp.FullScreenshot(100))
		cfg, err := png.DecodeConfig(bytes.NewReader(img))
		if err != nil {
			t.Fatalf("decode the screenshot: %v", err)
		}
		if cfg.Width != phoneWidth {
			t.Errorf("%s on a phone: the full-page screenshot is %dpx wide, want %d", page.name, cfg.Width, phoneWidth)
		}
		save(page.name+"-phone.png", img)
	}
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
