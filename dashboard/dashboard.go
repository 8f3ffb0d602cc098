// Package dashboard is no8s-agent's read-only web dashboard: server-rendered
// HTML pages of what needs attention, the sources, the resources with their
// status, conditions and outputs, the reconcile and sync history, and the
// graph of the resources' dependencies, read from the store on every
// request.
//
// It needs no JavaScript and loads nothing from elsewhere: the templates and
// the stylesheet are embedded, and the pages refresh themselves with a meta
// refresh. The caller mounts the handler at "/" and decides who may see it.
package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// DefaultRefresh is how often the pages refresh themselves when
// Options.Refresh is zero.
const DefaultRefresh = 5 * time.Second

// Limits of what one page shows.
const (
	// pageSize is how many resources a list shows before linking to the next page.
	pageSize = 100
	// historyLimit is how many reconcile attempts a resource page shows.
	historyLimit = 50
	// syncHistoryLimit is how many sync attempts a source page shows.
	syncHistoryLimit = 20
	// overviewErrors is how many errors of a source the overview lists; the
	// source page lists all of them.
	overviewErrors = 5
	// dependentsLimit is how many dependents a resource page lists.
	dependentsLimit = 100
)

// cssPath is where the stylesheet is served.
const cssPath = "/static/dashboard.css"

// contentSecurityPolicy allows the page nothing but its own stylesheet:
// the dashboard runs no script, and data that slipped through escaping could
// not run one either.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

//go:embed templates/*.html static/dashboard.css
var files embed.FS

// Options configure the dashboard.
type Options struct {
	// Masker masks the secret values the agent knows in the specs, outputs,
	// plans and messages the pages show, before they are rendered; nil
	// masks nothing (the store masks what it keeps but for specs).
	Masker *redact.Masker
	// SourceLinks returns what the configuration says of the named
	// source's Git host, for links to its commits; nil links only the
	// commits of remotes on github.com and gitlab.com.
	SourceLinks func(name string) SourceLinks
	// Logger receives the errors of the store; nil discards them.
	Logger *slog.Logger
	// Refresh is how often the pages reload themselves: zero means
	// DefaultRefresh, a negative value turns the reload off.
	Refresh time.Duration
	// Version is the agent's version, shown in the footer.
	Version string
}

// handler serves the dashboard.
type handler struct {
	store       store.Store
	masker      *redact.Masker
	sourceLinks func(name string) SourceLinks
	log         *slog.Logger
	version     string
	// refresh is the reload period in whole seconds; zero is off.
	refresh int
	// pageSize is how many resources a list shows; tests make it small.
	pageSize int
	now      func() time.Time
	pages    map[string]*template.Template
	css      []byte
	cssETag  string
	cssURL   string
	mux      *http.ServeMux
}

// New returns the dashboard's handler, reading from st. It serves GET / (the
// overview), /resources/{id}, /sources/{name}, /graph (the dependency
// graph) and its stylesheet, and a 404
// page for anything else. It panics when its embedded templates do not
// parse, which the package's tests rule out.
func New(st store.Store, opts Options) http.Handler {
	return newHandler(st, opts)
}

func newHandler(st store.Store, opts Options) *handler {
	h := &handler{
		store:    st,
		log:      opts.Logger,
		version:  opts.Version,
		pageSize: pageSize,
		now:      time.Now,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.masker, h.sourceLinks = opts.Masker, opts.SourceLinks
	switch {
	case opts.Refresh == 0:
		h.refresh = int(DefaultRefresh / time.Second)
	case opts.Refresh > 0:
		// A meta refresh counts whole seconds; round up so that a short
		// period never becomes zero (which would reload without pause).
		h.refresh = int(math.Ceil(opts.Refresh.Seconds()))
	}
	css, err := files.ReadFile("static/dashboard.css")
	if err != nil {
		panic(fmt.Sprintf("dashboard: embedded stylesheet: %v", err))
	}
	sum := sha256.Sum256(css)
	h.css = css
	h.cssETag = `"` + hex.EncodeToString(sum[:8]) + `"`
	h.cssURL = cssPath + "?v=" + hex.EncodeToString(sum[:4])
	h.pages = make(map[string]*template.Template)
	for _, name := range []string{"overview", "resource", "source", "graph", "error"} {
		t := template.New(name).Funcs(h.funcs())
		t = template.Must(t.ParseFS(files, "templates/layout.html", "templates/parts.html", "templates/diff.html",
			"templates/history.html", "templates/sourcelinks.html", "templates/"+name+".html"))
		h.pages[name] = t
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /resources/{id}", h.resource)
	mux.HandleFunc("GET /sources/{name}", h.source)
	mux.HandleFunc("GET /graph", h.graph)
	mux.HandleFunc("GET "+cssPath, h.stylesheet)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "There is no page at this address.")
	})
	h.mux = mux
	return h
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, r, http.StatusMethodNotAllowed, "The dashboard is read-only: it answers GET and HEAD only.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// stylesheet serves the embedded CSS; its URL carries a hash of the
// content, so browsers may keep it as long as they like.
func (h *handler) stylesheet(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("ETag", h.cssETag)
	w.Header().Set("Cache-Control", "private, max-age=86400")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "dashboard.css", time.Time{}, bytes.NewReader(h.css))
}

// base is what every page's layout needs.
type base struct {
	Title string
	// Refresh is the reload period in seconds; zero is off.
	Refresh int
	Version string
	CSSURL  string
	Now     time.Time
}

func (h *handler) base(title string) base {
	return base{Title: title, Refresh: h.refresh, Version: h.version, CSSURL: h.cssURL, Now: h.now()}
}

// render writes a page. It renders into a buffer first, so that a template
// failure becomes a clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	var buf bytes.Buffer
	if err := h.pages[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		h.log.Error("dashboard: rendering a page failed", "page", page, "path", r.URL.Path, "error", err)
		http.Error(w, "the dashboard could not render this page", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the page of a failed request.
type errorPage struct {
	base
	Code    int
	Message string
}

// fail writes the error page with status code and a message for people.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, code int, message string) {
	p := errorPage{base: h.base(http.StatusText(code)), Code: code, Message: message}
	if code < http.StatusInternalServerError {
		// Reloading will not make a missing page appear; a failing store
		// may come back, so 5xx pages keep refreshing.
		p.Refresh = 0
	}
	h.render(w, r, code, "error", p)
}

// storeFailed answers a request whose store read failed: 400 for a request
// the store calls invalid, nothing when the client went away, 503 while the
// store cannot be reached, 500 otherwise. The details go to the log, not to
// the page.
func (h *handler) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return
	case errors.Is(err, store.ErrInvalid):
		h.fail(w, r, http.StatusBadRequest, "The store refused this request: "+strings.TrimSpace(err.Error()))
		return
	case errors.Is(err, store.ErrUnavailable):
		h.log.Warn("dashboard: the store is unavailable", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", "5")
		h.fail(w, r, http.StatusServiceUnavailable, "The store cannot be reached right now; this page retries.")
		return
	}
	h.log.Error("dashboard: reading the store failed", "path", r.URL.Path, "error", err)
	h.fail(w, r, http.StatusInternalServerError, "The store could not be read. The agent's log has the details.")
}
