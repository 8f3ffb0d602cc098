// Package dashboard is no8s-agent's web dashboard: server-rendered HTML
// pages of what needs attention, the sources, the resources with their
// status, conditions and outputs, the reconcile and sync history, and the
// graph of the resources' dependencies, read from the store on every
// request.
//
// It needs no JavaScript and loads nothing from elsewhere: the templates,
// the stylesheet and one small script are embedded. Without JavaScript the
// pages refresh themselves with a meta refresh and show state only. With
// it, the script updates a page from the API's event stream when what it
// shows changes, and offers the actions (sync, approve, reconcile, suspend,
// resume) the caller's grants allow, which it sends to the JSON API. The
// caller mounts the handler at "/" and decides who may see it.
package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
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
	"github.com/no8s/no8s-agent/why"
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

// cssPath and jsPath are where the stylesheet and the script are served.
const (
	cssPath = "/static/dashboard.css"
	jsPath  = "/static/live.js"
)

// contentSecurityPolicy allows a page its own stylesheet, and the one
// script tag that carries the page's nonce, which is new in every response:
// markup that slipped through escaping could run no script, inline or
// loaded, nor style anything. connect-src lets the script read the event
// stream and send actions to this origin alone.
func contentSecurityPolicy(nonce string) string {
	script := "'none'"
	if nonce != "" {
		script = "'nonce-" + nonce + "'"
	}
	return "default-src 'none'; script-src " + script + "; connect-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
}

// newNonce returns a fresh random nonce for a page's Content-Security-Policy.
func newNonce() string {
	var b [16]byte
	// crypto/rand.Read does not fail (it panics if the system's source
	// does, which no page could survive anyway).
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

//go:embed templates/*.html static/dashboard.css static/live.js
var files embed.FS

// The verbs of the actions, as the API's grants name them.
const (
	VerbSync      = "sync"
	VerbApprove   = "approve"
	VerbReconcile = "reconcile"
	// VerbSuspend covers suspend and resume.
	VerbSuspend = "suspend"
)

// Object is what an action is done to: a source when Kind is empty, else a
// resource.
type Object struct {
	Kind, Namespace, Source string
	// Action is the resource's action instance as stored, which grants
	// limited to instances are checked against.
	Action string
}

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
	// EventsURL is the path of the API's event stream (Server-Sent Events
	// of status changes), with which pages update themselves where
	// JavaScript runs; the meta refresh is then for browsers without it.
	// Empty: pages only reload. A negative Refresh turns both off.
	EventsURL string
	// Allows reports whether the caller of a request may do verb (one of
	// the Verb constants) to the object: the page offers the action only
	// then. The API answers it from the token the request was authorized
	// with; nil offers no action.
	Allows func(r *http.Request, verb string, o Object) bool
	// Why, when set, explains why the resource of that id is not ready,
	// for the request's caller (the API's read model answers it: see
	// api.Server.ResourceWhy); nil when it is ready. Unset, the dashboard
	// works it out from the store.
	Why func(r *http.Request, id int64) (*why.Why, error)
	// Caller, when set, names who makes a request, which the pages show,
	// and says whether it is a session that signs out with POST
	// /auth/logout (api.Caller).
	Caller func(ctx context.Context) (name string, session bool)
}

// handler serves the dashboard.
type handler struct {
	store       store.Store
	masker      *redact.Masker
	sourceLinks func(name string) SourceLinks
	log         *slog.Logger
	version     string
	caller      func(ctx context.Context) (string, bool)
	// refresh is the reload period in whole seconds; zero is off.
	refresh int
	// events is the event stream's path; empty when pages do not listen.
	events string
	allows func(r *http.Request, verb string, o Object) bool
	// why explains a resource; see Options.Why.
	why func(r *http.Request, id int64) (*why.Why, error)
	// pageSize is how many resources a list shows; tests make it small.
	pageSize int
	now      func() time.Time
	pages    map[string]*template.Template
	css, js  asset
	mux      *http.ServeMux
}

// asset is an embedded file served with an ETag; its URL carries a hash of
// the content, so browsers may keep it as long as they like.
type asset struct {
	name, contentType string
	data              []byte
	etag, url         string
}

func newAsset(path, name, contentType string) asset {
	data, err := files.ReadFile("static/" + name)
	if err != nil {
		panic(fmt.Sprintf("dashboard: embedded %s: %v", name, err))
	}
	sum := sha256.Sum256(data)
	return asset{name: name, contentType: contentType, data: data,
		etag: `"` + hex.EncodeToString(sum[:8]) + `"`, url: path + "?v=" + hex.EncodeToString(sum[:4])}
}

func (a asset) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "private, max-age=86400")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.data))
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
		allows:   opts.Allows,
		why:      opts.Why,
		caller:   opts.Caller,
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
	if h.refresh > 0 {
		h.events = opts.EventsURL
	}
	h.css = newAsset(cssPath, "dashboard.css", "text/css; charset=utf-8")
	h.js = newAsset(jsPath, "live.js", "text/javascript; charset=utf-8")
	h.pages = make(map[string]*template.Template)
	for _, name := range []string{"overview", "resource", "source", "graph", "error", "signin"} {
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
	mux.HandleFunc("GET "+cssPath, h.css.serve)
	mux.HandleFunc("GET "+jsPath, h.js.serve)
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

// base is what every page's layout needs.
type base struct {
	Title string
	// Refresh is the reload period in seconds; zero is off.
	Refresh int
	// Events is the event stream the page listens to where JavaScript
	// runs; empty when it does not. WatchIDs, when set, are the resources
	// (space-separated ids) whose events concern the page; otherwise every
	// event of the stream does.
	Events   string
	WatchIDs string
	Version  string
	CSSURL   string
	JSURL    string
	// Nonce is the page's script nonce, new for every response.
	Nonce string
	Now   time.Time
	// Caller is who makes the request, "" when unknown; Session is true
	// when it is a session, which the page offers to end.
	Caller  string
	Session bool
}

func (h *handler) base(r *http.Request, title string) base {
	b := base{Title: title, Refresh: h.refresh, Events: h.events, Version: h.version, CSSURL: h.css.url, JSURL: h.js.url,
		Nonce: newNonce(), Now: h.now()}
	if h.caller != nil {
		b.Caller, b.Session = h.caller(r.Context())
	}
	return b
}

// nonce is the script nonce of the page.
func (b base) nonce() string { return b.Nonce }

// pageData is the data of every page: its layout's.
type pageData interface{ nonce() string }

// may reports whether the caller of r may do verb to o.
func (h *handler) may(r *http.Request, verb string, o Object) bool {
	return h.allows != nil && h.allows(r, verb, o)
}

// render writes a page. It renders into a buffer first, so that a template
// failure becomes a clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data pageData) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		h.log.Error("dashboard: rendering a page failed", "page", name, "path", r.URL.Path, "error", err)
		http.Error(w, "the dashboard could not render this page", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", contentSecurityPolicy(data.nonce()))
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
	p := errorPage{base: h.base(r, http.StatusText(code)), Code: code, Message: message}
	if code < http.StatusInternalServerError {
		// Reloading will not make a missing page appear; a failing store
		// may come back, so 5xx pages keep refreshing.
		p.Refresh, p.Events = 0, ""
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

// SignIn is a page asking people to sign in, or telling why signing in
// failed.
type SignIn struct {
	Status  int
	Message string
	// SignInURL starts signing in with the identity provider, TokenURL
	// signs in with a token; "" shows no such way.
	SignInURL, TokenURL string
}

// signInPage is the page of a SignIn.
type signInPage struct {
	base
	Code                int
	Message             string
	SignInURL, TokenURL string
}

// SignInPages returns what writes the sign-in pages, in the dashboard's
// look: the answer to a page requested without a credential, and a failed
// sign-in's. They show no one as signed in, and do not refresh.
func SignInPages(opts Options) func(http.ResponseWriter, *http.Request, SignIn) {
	opts.Caller = nil
	h := newHandler(nil, opts)
	return func(w http.ResponseWriter, r *http.Request, s SignIn) {
		title := "Signing in failed"
		if s.Status == http.StatusUnauthorized && s.SignInURL != "" && s.TokenURL != "" {
			title = "Sign in"
		}
		p := signInPage{base: h.base(r, title), Code: s.Status, Message: s.Message, SignInURL: s.SignInURL, TokenURL: s.TokenURL}
		p.Refresh = 0
		h.render(w, r, s.Status, "signin", p)
	}
}
