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

// browserTimeout bounds the whole browser test, start-up included.
const browserTimeout = 60 * time.Second

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

// TestBrowser drives the dashboard over the synced and reconciled example
// repository in headless Chromium: the overview lists the example sources
// and resources, a click leads to a resource and its history, and the pages
// fit a phone's width. It keeps screenshots in a temporary folder.
func TestBrowser(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	f := newFixture(t)
	// Refresh on, but slower than the test, so that no reload interrupts it.
	srv := httptest.NewServer(New(f.st, Options{Refresh: time.Hour, Version: "browser-test"}))
	defer srv.Close()

	shots, err := os.MkdirTemp("", "no8s-dashboard-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	save := func(name string, img []byte) {
		t.Helper()
		path := filepath.Join(shots, name)
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}

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

	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The overview shows the example source and every example resource.
	step("open the overview", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#sources tr.source")),
		chromedp.WaitVisible(chromedp.CSS("#resources tr.resource")),
	))
	main, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	step("read the overview", err)
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
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#resources tr.resource").length`))
	step("count resources", err)
	if rows != len(exampleResources) {
		t.Errorf("the overview lists %d resources, want %d", rows, len(exampleResources))
	}
	img, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("screenshot the overview", err)
	save("overview-desktop.png", img)

	// Click a resource and land on its page.
	id := f.ids["production-pg"]
	link := fmt.Sprintf(`#resources a.ref[href="/resources/%d"]`, id)
	step("click production-pg", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(link)),
		chromedp.WaitVisible(chromedp.CSS("h1.resource-title")),
	))
	loc, err := chromedp.Run(bctx, chromedp.Location())
	step("read the location", err)
	if want := fmt.Sprintf("%s/resources/%d", srv.URL, id); loc != want {
		t.Fatalf("after the click the browser is at %s, want %s", loc, want)
	}
	title, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("h1.resource-title")))
	step("read the title", err)
	if !strings.Contains(title, "DatabaseCluster/production-pg") || !strings.Contains(title, "ready") {
		t.Errorf("the resource page's heading is %q", title)
	}

	// Follow the link to the history, which has the attempt that made it ready.
	step("open the history", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`nav.jump a[href="#history"]`)),
		chromedp.WaitVisible(chromedp.CSS("#history tr.attempt")),
	))
	loc, err = chromedp.Run(bctx, chromedp.Location())
	step("read the location", err)
	if !strings.HasSuffix(loc, "#history") {
		t.Errorf("after following the history link the browser is at %s", loc)
	}
	attempts, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#history tr.attempt").length`))
	step("count attempts", err)
	if attempts < 1 {
		t.Errorf("the history shows %d attempts, want at least one", attempts)
	}
	history, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#history")))
	step("read the history", err)
	for _, want := range []string{"succeeded", testAgentID} {
		if !strings.Contains(history, want) {
			t.Errorf("the history does not show %q:\n%s", want, history)
		}
	}
	img, err = chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("screenshot the resource", err)
	save("resource-desktop.png", img)

	// At a phone's width no page scrolls sideways.
	step("emulate a phone", chromedp.Do(bctx,
		chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait)))
	for _, page := range []struct{ name, path, ready string }{
		{"overview", "/", "#resources tr.resource"},
		{"resource", fmt.Sprintf("/resources/%d", id), "#history tr.attempt"},
		{"source", "/sources/" + sourceName, "#resources tr.resource"},
	} {
		step("open the "+page.name+" on a phone", chromedp.Do(bctx,
			chromedp.Navigate(srv.URL+page.path),
			chromedp.WaitVisible(chromedp.CSS(page.ready)),
		))
		widths, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](
			`[document.documentElement.scrollWidth, window.innerWidth]`))
		step("measure the "+page.name, err)
		scrollWidth, innerWidth := widths[0], widths[1]
		// Without a viewport meta tag a phone lays the page out 980 pixels wide.
		if innerWidth != phoneWidth {
			t.Errorf("%s on a phone: the window is %dpx wide, want %d (is the viewport meta tag there?)",
				page.name, innerWidth, phoneWidth)
		}
		if scrollWidth > innerWidth {
			t.Errorf("%s on a phone: the page is %dpx wide in a %dpx window: it scrolls sideways",
				page.name, scrollWidth, innerWidth)
		}
		img, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		step("screenshot the "+page.name+" on a phone", err)
		cfg, err := png.DecodeConfig(bytes.NewReader(img))
		step("decode the screenshot", err)
		if cfg.Width != phoneWidth {
			t.Errorf("%s on a phone: the full-page screenshot is %dpx wide, want %d", page.name, cfg.Width, phoneWidth)
		}
		save(page.name+"-phone.png", img)
	}
}
