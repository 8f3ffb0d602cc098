package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/priority"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// BodyMargin is what the request-body limit adds to the largest manifest
// file: a resource or type written through the API is a manifest as JSON,
// and the room covers JSON's quoting of every key and string and the
// request's own fields. 64 KiB is more than those take in the large
// manifests projects publish.
const BodyMargin = 64 << 10

// BodyLimit is the request-body limit for manifests of at most
// maxFileSize bytes.
func BodyLimit(maxFileSize int64) int64 { return maxFileSize + BodyMargin }

// DefaultMaxBodyBytes caps request bodies unless Options say otherwise:
// BodyLimit of manifest.DefaultMaxFileSize.
const DefaultMaxBodyBytes = manifest.DefaultMaxFileSize + BodyMargin

// DefaultResponseWriteTimeout bounds how long a read's answer may take to
// reach a client that reads it slowly: 6 MB at 200 kB/s.
const DefaultResponseWriteTimeout = 30 * time.Second

// DefaultBodyReadTimeout bounds how long a client may take to send a
// request body unless Options say otherwise.
const DefaultBodyReadTimeout = 10 * time.Second

// DefaultReadsWhileWorking is the pace of the read model's reads while the
// agent's own work is in flight. On two cores, 200 clients that never back
// off, reading by id at 2,000 a second, made a commit take half as long
// again to reconcile, and at 1,000 a quarter as long again; at this pace
// about a sixth (the agent's share and the clients').
const DefaultReadsWhileWorking = 500

// Triggerer asks for a sync of a source now (the agent's sync runner).
type Triggerer interface {
	// Trigger reports whether the source is one the agent syncs.
	Trigger(name string, force bool) bool
	// Sources names the sources the agent syncs.
	Sources() []string
}

// Options configure a Server. Store and Syncer are required.
type Options struct {
	Store  store.Store
	Syncer *sync.Syncer
	// Actions are the agent's action instances: writes naming another are
	// refused at once, and GET /api/v1/plugins/actions lists them. Nil
	// accepts any name, and lists none.
	Actions Actions
	// Sources triggers syncs; nil answers the sync and approve endpoints 503.
	Sources Triggerer
	// ReadToken, when set, is required (as a bearer token, or as the
	// password of basic auth for browsers) for every read. WriteToken is
	// required for writes, and also allows reads; without one, writes are
	// refused with 403.
	ReadToken, WriteToken string
	// Tokens are scoped tokens: each may do the verbs its grants list, to
	// the kinds and sources they name. With any of them, reads need a
	// token too.
	Tokens []Token
	// OIDC, when set, takes bearer tokens that are OpenID Connect ID
	// tokens: the claim it reads names the token whose grants apply.
	OIDC IdentityProvider
	// Login, when set, signs people in to the dashboard with OpenID
	// Connect: a session cookie is then a credential like a token.
	Login *Login
	// MaxBodyBytes caps request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyReadTimeout bounds how long a client may take to send a request
	// body, which is answered 408 when late; zero means
	// DefaultBodyReadTimeout. Requests without a body (event streams, long
	// reads) are not bounded by it.
	BodyReadTimeout time.Duration
	// Dashboard, Metrics, GitHubWebhook and GitLabWebhook are mounted at
	// /, /metrics, /hooks/github and /hooks/gitlab when set.
	Dashboard, Metrics, GitHubWebhook, GitLabWebhook http.Handler
	// Instrument, when set, wraps every route's handler; route is its pattern.
	Instrument func(route string, h http.Handler) http.Handler
	// Heartbeat is how often an idle event stream sends a comment, so that
	// proxies keep it open and clients notice a dead agent; default 15s.
	Heartbeat time.Duration
	// ResponseWriteTimeout bounds how long a limited read's answer may
	// take to reach the client once it is ready; zero means
	// DefaultResponseWriteTimeout. Event streams keep their own pace.
	ResponseWriteTimeout time.Duration
	// MaxConcurrentReads caps the API reads served at once; more wait
	// briefly, then are answered 503 with Retry-After. Zero means a quarter
	// of the store's connection pool, at most one per two cores.
	MaxConcurrentReads int
	// Released, when set, is called when the read model let go of a good
	// deal of memory without allocating it anew (it packed what it holds):
	// an agent that hands idle memory back to the system may do it now.
	Released func()
	// ReadWait bounds how long a read of resources, sources or types waits
	// for the read model to be built, or to reach the store version it
	// asks for, before it is answered 503; zero means DefaultReadWait.
	ReadWait time.Duration
	// Work is the agent's own work in flight (syncs, reconciles): while
	// there is any, reads of resources, sources and types are paced to
	// ReadsWhileWorking per second, a page of resources counting as many
	// reads as it holds tenths of its limit, so that readers that never
	// back off take a bounded share of the machine from it. They wait
	// their turn; none is refused for it. Nil paces nothing.
	Work *priority.Work
	// ReadsWhileWorking is the pace above; zero means
	// DefaultReadsWhileWorking, a negative value paces nothing.
	ReadsWhileWorking float64
	Logger            *slog.Logger
	// Wrap, when set, wraps the whole handler, outside everything else: the
	// agent masks secret values in every response with it. The event stream
	// is left out: its events are masked once each by MaskEvent, rather than
	// once per stream.
	Wrap func(http.Handler) http.Handler
	// MaskEvent, when set, is applied to the JSON of each event once, as the
	// hub encodes it for every stream.
	MaskEvent func(json.RawMessage) json.RawMessage
	// MaskCutTail, when set, is applied to a status event's message that
	// the store cut to store.MaxStatusMessage characters, before MaskEvent:
	// a secret the cut went through left only its start, which masking
	// whole values cannot recognise (redact.Masker.MaskCut with tail set).
	MaskCutTail func(string) string
	// AllowedHosts are the host names (or addresses), each with a port or
	// not, whose requests Serve answers besides loopback ones: on a
	// loopback address it answers only those (against DNS rebinding), and
	// elsewhere it checks the Host header only when they are set.
	AllowedHosts []string
	// Profiling serves the Go runtime's profiles (net/http/pprof) under
	// /debug/pprof/, as reads: behind the read token when one is set, since
	// a profile shows the agent's internals.
	Profiling bool
}

// Server is the agent's HTTP interface: the JSON API, its event stream, and
// the dashboard, metrics, health and webhook endpoints, on one listener.
type Server struct {
	opts   Options
	store  store.Store
	syncer *sync.Syncer
	log    *slog.Logger
	events *hub
	model  *readModel
	// pageTurns are the turns to prepare a page of resources.
	pageTurns chan struct{}
	// pages are the pages of resources prepared lately.
	pages pageCache
	// pacer paces the reads of the read model while the agent's own work
	// is in flight.
	pacer *priority.Pacer
	// lastWrite is the store version of the latest write through this
	// server: reads wait for the read model to have it.
	lastWrite atomic.Int64
	reads     *readLimiter
	handler   http.Handler
	// tokens are every token the server accepts; readsOpen is true when
	// reads need none, and writable when some token may write.
	tokens    []*Token
	readsOpen bool
	writable  bool
	// login is the dashboard's sign-in, nil without one.
	login *loginState
}

// New returns a Server. Its event stream needs Run (or Serve) to be fed.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.ResponseWriteTimeout <= 0 {
		opts.ResponseWriteTimeout = DefaultResponseWriteTimeout
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, store: opts.Store, syncer: opts.Syncer, log: opts.Logger,
		tokens: tokens(opts), readsOpen: opts.ReadToken == "" && len(opts.Tokens) == 0}
	for _, t := range s.tokens {
		for _, g := range t.Grants {
			s.writable = s.writable || slices.ContainsFunc(g.Verbs, func(v string) bool { return v != VerbGet && v != VerbList })
		}
	}
	if opts.Login != nil {
		s.login = newLoginState(*opts.Login, opts.Logger)
	}
	s.events = newHub(opts.Store, opts.Logger, opts.MaskEvent)
	s.events.maskCutTail = opts.MaskCutTail
	s.reads = newReadLimiter(opts.MaxConcurrentReads, opts.Store)
	s.model = newReadModel(opts.Store, opts.Logger, opts.ReadWait)
	rate := opts.ReadsWhileWorking
	if rate == 0 {
		rate = DefaultReadsWhileWorking
	}
	s.pacer = priority.NewPacer(opts.Work, rate)
	s.model.released = opts.Released
	s.pageTurns = make(chan struct{}, max(1, runtime.NumCPU()/2))
	s.handler = s.routes()
	if opts.Wrap != nil {
		s.handler = wrapAllButEvents(s.handler, opts.Wrap)
	}
	return s
}

// isEventStream reports whether path is one of the event streams.
func isEventStream(path string) bool {
	if path == eventsPath {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/api/v1/resources/")
	return ok && strings.HasSuffix(rest, "/events") && strings.Count(rest, "/") == 1
}

// wrapAllButEvents wraps every request to h with wrap, but for the event
// stream's, which pass straight to h.
func wrapAllButEvents(h http.Handler, wrap func(http.Handler) http.Handler) http.Handler {
	wrapped := wrap(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && isEventStream(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		wrapped.ServeHTTP(w, r)
	})
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler { return s.handler }

// Run feeds the event stream and the read model from the store's
// notifications until ctx is done. Every agent on one database hears every
// change, so each agent's stream and reads show all of them.
func (s *Server) Run(ctx context.Context) error {
	modelDone := make(chan error, 1)
	go func() { modelDone <- s.model.run(ctx) }()
	err := s.events.run(ctx)
	return errors.Join(err, <-modelDone)
}

// Serve serves on ln until ctx is done, then stops accepting, ends the
// event streams, and waits up to five seconds for requests in flight. It
// refuses requests for hosts it does not answer to (see AllowedHosts).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.hostGuard(ln.Addr(), s.handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Requests in flight finish after ctx is done (Shutdown waits for
		// them); event streams end when the hub stops.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		if err := s.Run(ctx); err != nil {
			s.log.Error("event stream stopped", "error", err)
		}
	}()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveDone:
		serveDone = nil
	}
	// Stopping the hub ends the event streams, which Shutdown would
	// otherwise wait for.
	cancel()
	<-hubDone
	shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelShutdown()
	if shutErr := srv.Shutdown(shutdownCtx); shutErr != nil && err == nil {
		err = shutErr
	}
	if serveDone != nil {
		<-serveDone
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// queryParams are the query parameters each route reads; any other is a
// 400, so that a misspelt or unsupported filter (?action=) is not silently
// ignored, answering everything. Routes not listed take none.
var queryParams = map[string][]string{
	"GET /api/v1/resource-types":                            {"name", "source", "status", "limit"},
	"GET /api/v1/resources":                                 {"kind", "status", "source", "label", "action_plugin", "limit", "after", "continue", "namespace"},
	"GET /api/v1/resources/by-name/{kind}/{version}/{name}": {"namespace"},
	"GET /api/v1/resources/{id}/history":                    {"limit"},
	"GET /api/v1/sources/{name}/history":                    {"limit"},
	"POST /api/v1/sources/{name}/approve":                   {"revision"},
	"DELETE /api/v1/sources/{name}":                         {"mode", "approve"},
}

// knownParams refuses a request with a query parameter h does not read.
func knownParams(known []string, h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		for name := range r.URL.Query() {
			// Every read takes a store version to wait for; those the
			// read model does not answer read the store itself, which has
			// every committed write.
			if name == minVersionParam && r.Method == http.MethodGet {
				if _, err := minVersion(r); err != nil {
					return err
				}
				continue
			}
			if !slices.Contains(known, name) {
				if len(known) == 0 {
					return errorf(http.StatusBadRequest, "unknown query parameter %q: this route takes none", name)
				}
				return errorf(http.StatusBadRequest, "unknown query parameter %q (known: %s)", name, strings.Join(known, ", "))
			}
		}
		return h(w, r)
	}
}

// modelRoutes are the reads the read model answers.
var modelRoutes = map[string]bool{
	"GET /api/v1/resource-types":                            true,
	"GET /api/v1/resource-types/{id}":                       true,
	"GET /api/v1/resource-types/{name}/{version}":           true,
	"GET /api/v1/resources":                                 true,
	getResourcePattern:                                      true,
	"GET /api/v1/resources/by-name/{kind}/{version}/{name}": true,
	"GET /api/v1/sources":                                   true,
	"GET /api/v1/sources/{name}":                            true,
	"GET /api/v1/resources/{id}/why":                        true,
	"GET /api/v1/sources/{name}/why":                        true,
}

// resourceEventsPattern is the route of one resource's event stream.
const resourceEventsPattern = "GET /api/v1/resources/{id}/events"

// getResourcePattern is the route of reads by id.
const getResourcePattern = "GET /api/v1/resources/{id}"

// access is what a route requires.
type access int

const (
	open access = iota
	read
	write
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, need access, h http.Handler) {
		// Reads the read model answers touch no database: only the others
		// are limited.
		if need == read && strings.HasPrefix(pattern, "GET /api/") && pattern != "GET "+eventsPath && pattern != resourceEventsPattern &&
			!modelRoutes[pattern] {
			h = s.limit(h)
		}
		if need == write {
			h = s.versioned(h)
		}
		if strings.HasPrefix(pattern, "GET /api/") && pattern != "GET "+eventsPath && pattern != resourceEventsPattern {
			h = s.writeDeadline(h)
		}
		h = s.bodyDeadline(s.authorize(pattern, need, h))
		if s.opts.Instrument != nil {
			h = s.opts.Instrument(pattern, h)
		}
		mux.Handle(pattern, h)
	}
	fn := func(pattern string, need access, h func(http.ResponseWriter, *http.Request) error) {
		handle(pattern, need, s.json(knownParams(queryParams[pattern], h)))
	}
	fn("GET /api/v1/resource-types", read, s.listTypes)
	fn("POST /api/v1/resource-types", write, s.createType)
	fn("GET /api/v1/resource-types/{id}", read, s.getType)
	fn("GET /api/v1/resource-types/{name}/{version}", read, s.getTypeByName)
	fn("PUT /api/v1/resource-types/{id}", write, s.updateType)
	fn("DELETE /api/v1/resource-types/{id}", write, s.deleteType)

	fn("GET /api/v1/resources", read, s.listResources)
	fn("POST /api/v1/resources", write, s.createResource)
	fn(getResourcePattern, read, s.getResource)
	fn("PUT /api/v1/resources/{id}", write, s.updateResource)
	fn("DELETE /api/v1/resources/{id}", write, s.deleteResource)
	fn("GET /api/v1/resources/by-name/{kind}/{version}/{name}", read, s.getResourceByName)
	fn("GET /api/v1/resources/{id}/history", read, s.resourceHistory)
	fn("GET /api/v1/resources/{id}/outputs", read, s.resourceOutputs)
	fn("GET /api/v1/resources/{id}/why", read, s.getResourceWhy)
	fn("POST /api/v1/resources/{id}/reconcile", write, s.reconcileResource)
	fn("POST /api/v1/resources/{id}/suspend", write, s.suspendResource)
	fn("POST /api/v1/resources/{id}/resume", write, s.resumeResource)

	fn("GET /api/v1/sources", read, s.listSources)
	fn("GET /api/v1/sources/{name}", read, s.getSource)
	fn("GET /api/v1/sources/{name}/history", read, s.sourceHistory)
	fn("GET /api/v1/sources/{name}/why", read, s.getSourceWhy)
	fn("POST /api/v1/sources/{name}/sync", write, s.syncSource)
	fn("POST /api/v1/sources/{name}/approve", write, s.approveSource)
	fn("POST /api/v1/sources/{name}/suspend", write, s.suspendSource)
	fn("POST /api/v1/sources/{name}/resume", write, s.resumeSource)
	fn("DELETE /api/v1/sources/{name}", write, s.deleteSource)

	fn("GET /api/v1/agents", read, s.listAgents)
	fn("GET /api/v1/plugins/actions", read, s.listActions)

	handle("GET "+eventsPath, read, http.HandlerFunc(s.serveEvents))
	handle(resourceEventsPattern, read, http.HandlerFunc(s.serveResourceEvents))
	// Any other read under /api is a JSON 404, not the dashboard's page.
	fn("GET /api/", open, func(http.ResponseWriter, *http.Request) error {
		return errorf(http.StatusNotFound, "no such endpoint")
	})

	handle("GET /healthz", open, http.HandlerFunc(s.healthz))
	handle("GET /readyz", open, http.HandlerFunc(s.readyz))
	handle("GET /health", open, http.HandlerFunc(s.readyz))
	if s.opts.Metrics != nil {
		handle("GET /metrics", read, s.opts.Metrics)
	}
	if s.opts.GitHubWebhook != nil {
		// Authenticated by its signature, not by a token.
		handle("POST /hooks/github", open, s.opts.GitHubWebhook)
	}
	if s.opts.GitLabWebhook != nil {
		// Authenticated by its token or signature, not by an API token.
		handle("POST /hooks/gitlab", open, s.opts.GitLabWebhook)
	}
	if s.opts.Profiling {
		handle("GET /debug/pprof/", read, http.HandlerFunc(pprof.Index))
		handle("GET /debug/pprof/cmdline", read, http.HandlerFunc(pprof.Cmdline))
		handle("GET /debug/pprof/profile", read, http.HandlerFunc(pprof.Profile))
		handle("GET /debug/pprof/symbol", read, http.HandlerFunc(pprof.Symbol))
		handle("POST /debug/pprof/symbol", read, http.HandlerFunc(pprof.Symbol))
		handle("GET /debug/pprof/trace", read, http.HandlerFunc(pprof.Trace))
	} else {
		// Not the dashboard's page either: a plain 404 says profiling is off.
		handle("GET /debug/pprof/", open, http.NotFoundHandler())
	}
	if s.login != nil {
		// The sign-in's routes need no credential: they make one.
		handle("GET "+loginPath, open, http.HandlerFunc(s.startLogin))
		handle("GET "+callbackPath, open, http.HandlerFunc(s.finishLogin))
		handle("POST "+logoutPath, open, http.HandlerFunc(s.logout))
		// Not the dashboard's 404: a link or an image elsewhere must not
		// look as if it could sign anyone out.
		handle("GET "+logoutPath, open, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "POST")
			http.Error(w, "sign out with POST, from the dashboard's button", http.StatusMethodNotAllowed)
		}))
		handle("GET "+tokenPath, read, http.HandlerFunc(s.tokenLogin))
		if s.opts.Dashboard != nil {
			// The sign-in pages use the stylesheet, which tells nothing.
			handle("GET "+dashboardStylesheet, open, s.opts.Dashboard)
		}
	}
	if s.opts.Dashboard != nil {
		handle("GET /", read, s.opts.Dashboard)
	}
	return jsonMethodErrors(mux)
}

// errBodyTimeout is a request body that did not arrive in time (408).
var errBodyTimeout = errors.New("request timeout")

// bodyDeadline bounds how long a client may take to send its request body,
// so that slow or stalled senders cannot hold the server's goroutines. The
// deadline is lifted once the body is in, and requests without a body get
// none: a connection-wide read timeout would cut event streams and long
// reads, whose connection the server watches with a read.
func (s *Server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: s.opts.BodyReadTimeout}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline at the end of the body and turns
// the deadline's error into errBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		return n, fmt.Errorf("%w: the request body did not arrive within %s", errBodyTimeout, b.timeout)
	}
	return n, err
}

// jsonMethodErrors answers a wrong method under /api/ with a JSON error,
// like every other API error, instead of the mux's plain text.
func jsonMethodErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			w = &methodErrorWriter{ResponseWriter: w, method: r.Method}
		}
		mux.ServeHTTP(w, r)
	})
}

// methodErrorWriter replaces a 405's plain-text body with JSON.
type methodErrorWriter struct {
	http.ResponseWriter
	method  string
	swallow bool
}

func (m *methodErrorWriter) WriteHeader(code int) {
	if code != http.StatusMethodNotAllowed {
		m.ResponseWriter.WriteHeader(code)
		return
	}
	m.swallow = true
	writeJSON(m.ResponseWriter, code, newErrorBody(fmt.Sprintf("method %s is not allowed here (allowed: %s)",
		m.method, m.Header().Get("Allow")), nil))
}

func (m *methodErrorWriter) Write(p []byte) (int, error) {
	if m.swallow {
		return len(p), nil
	}
	return m.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (m *methodErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// Flush keeps event streams working through the wrapper.
func (m *methodErrorWriter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// json adapts a handler that returns an error. It reads the request body
// first, capped, so that a body too large or too slow is refused (413,
// 408) before the handler acts, even a handler that ignores bodies.
func (s *Server) json(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
			if err != nil {
				var maxErr *http.MaxBytesError
				if !errors.Is(err, errBodyTimeout) && !errors.As(err, &maxErr) {
					if r.Context().Err() != nil {
						return // the client went away
					}
					err = errorf(http.StatusBadRequest, "reading the request body: %v", err)
				}
				// A failed read cancels the request's context, but the
				// client still waits for an answer.
				s.writeError(w, r, err, nil)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data)) // known now, chunked or not
		}
		if err := h(w, r); err != nil {
			if r.Context().Err() != nil {
				return // the client went away: no one to answer, nothing wrong here
			}
			var fe *fieldError
			if errors.As(err, &fe) {
				s.writeError(w, r, fe.err, fe.fields)
				return
			}
			s.writeError(w, r, err, nil)
		}
	})
}

// fieldError carries the field mapping of the request an error is about.
type fieldError struct {
	err    error
	fields fieldMapper
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// authorize enforces the tokens: reads are open unless a read token is set;
// writes need the write token and are refused when none is set.
func (s *Server) authorize(pattern string, need access, h http.Handler) http.Handler {
	if need == open {
		return h
	}
	verb := routeVerb(pattern, need)
	whole := !strings.HasPrefix(pattern, "GET /api/") && !strings.HasPrefix(pattern, "POST /api/") &&
		!strings.HasPrefix(pattern, "PUT /api/") && !strings.HasPrefix(pattern, "DELETE /api/") ||
		slices.Contains(everythingRoutes, pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, browser, err := s.check(need, verb, r)
		if err == nil && whole && t != nil && !t.allows(VerbList, "", "") {
			// The dashboard, the metrics, the profiles, the agents and the
			// action instances are about every kind and source.
			err = errorf(http.StatusForbidden, "token %q may not read everything, which %s shows (missing permission list on every kind and source)",
				t.Name, r.URL.Path)
		}
		if err == nil && need == write && browser {
			err = crossSite(r)
		}
		if err != nil {
			if err.Status == http.StatusUnauthorized && pattern == "GET /" && s.login != nil {
				// The dashboard's pages: sign in with the identity
				// provider, or with a token.
				s.signInPage(w, r, err)
				return
			}
			if err.Status == http.StatusUnauthorized && (need == read && !strings.HasPrefix(r.URL.Path, "/api/") ||
				r.Header.Get("Sec-Fetch-Site") == "same-origin") {
				// Browsers cannot send bearer tokens: let them log in with
				// the token as a basic-auth password. The dashboard's own
				// scripts (its event stream and actions, from this origin)
				// are challenged too: a browser sends the login it holds
				// for the pages again only when asked, to paths outside
				// the folder of the page it first logged in on.
				w.Header().Set("WWW-Authenticate", `Basic realm="no8s", charset="UTF-8"`)
			}
			s.writeError(w, r, err, nil)
			return
		}
		if t != nil {
			// The token's name is the author of its writes in the sync history.
			ctx := sync.WithActor(context.WithValue(r.Context(), tokenKey{}, t), t.actor())
			r = r.WithContext(ctx)
			// The audit trail: writes at info, reads at debug.
			level := slog.LevelDebug
			if need == write {
				level = slog.LevelInfo
			}
			attrs := []any{"token", t.Name, "method", r.Method, "path", r.URL.Path}
			if t.session {
				// Who signed in, as the identity provider has it.
				attrs = append(attrs, "session", true, "subject", t.subject, "email", t.email)
			}
			s.log.Log(ctx, level, "api request", attrs...)
		}
		h.ServeHTTP(w, r)
	})
}

// everythingRoutes are the API's routes about no kind or source, which only
// a token that may list every kind and source may read, as the dashboard.
var everythingRoutes = []string{"GET /api/v1/agents", "GET /api/v1/plugins/actions"}

// check finds the request's token and checks that it may do verb at all;
// what it is done to is checked by the handler (may, maySource). Reads
// need no token while no read token and no scoped token is configured.
// browser is true when the credential is one browsers send on their own
// (basic auth, the dashboard's session cookie), which crossSite checks.
func (s *Server) check(need access, verb string, r *http.Request) (t *Token, browser bool, err *Error) {
	if need == write && !s.writable {
		return nil, false, errorf(http.StatusForbidden, "writes are disabled: the agent has no write token (set api.writeTokenEnv or api.tokens)")
	}
	if need == read && s.readsOpen {
		// Reads need no token; one presented, or a signed-in session, is
		// still who the caller is, by which the dashboard offers the
		// actions it may take. A wrong one is no login, and no harm.
		if got, basic, ok := presentedToken(r); ok {
			for _, c := range s.tokens {
				if c.Value != "" && equal(got, c.Value) && c.allowsVerb(verb) {
					return c, basic, nil
				}
			}
			return nil, false, nil
		}
		if t, err := s.sessionToken(r); err == nil && t != nil && t.allowsVerb(verb) {
			return t, true, nil
		}
		return nil, false, nil
	}
	if t, browser, err = s.credential(r); err != nil {
		return nil, browser, err
	}
	switch {
	case t.allowsVerb(verb):
		return t, browser, nil
	case t.Name == ReadTokenName && need == write:
		return nil, browser, errorf(http.StatusForbidden, "the read token cannot write: use the write token")
	}
	return nil, browser, errorf(http.StatusForbidden, "token %q may not %s (missing permission %s; it may %s)", t.Name, verb, verb, describeGrants(t))
}

// credential returns the request's token: a bearer token or basic-auth
// password when there is one (it wins over a session cookie), else the
// dashboard session's. browser is as check has it.
func (s *Server) credential(r *http.Request) (*Token, bool, *Error) {
	got, basic, ok := presentedToken(r)
	if !ok {
		t, err := s.sessionToken(r)
		switch {
		case err != nil:
			return nil, true, err
		case t != nil:
			return t, true, nil
		}
		msg := "a token is required: send Authorization: Bearer <token>"
		if s.login != nil {
			msg += ", or sign in at " + loginPath
		}
		return nil, false, errorf(http.StatusUnauthorized, "%s", msg)
	}
	var t *Token
	for _, c := range s.tokens {
		// Every token is compared, so that the time taken tells nothing.
		if c.Value != "" && equal(got, c.Value) && t == nil {
			t = c
		}
	}
	if t == nil && s.opts.OIDC != nil && oidc.LooksLikeJWT(got) {
		var err *Error
		if t, err = s.oidcToken(r.Context(), got); err != nil {
			return nil, basic, err
		}
	}
	if t == nil {
		return nil, basic, errorf(http.StatusUnauthorized, "the token is not valid")
	}
	return t, basic, nil
}

// oidcToken verifies an ID token and returns the token its claim names.
func (s *Server) oidcToken(ctx context.Context, raw string) (*Token, *Error) {
	name, err := s.opts.OIDC.Name(ctx, raw)
	switch {
	case errors.Is(err, oidc.ErrUnavailable):
		s.log.Warn("cannot verify an ID token", "error", err)
		return nil, errorf(http.StatusServiceUnavailable, "the identity provider cannot be reached; retry later")
	case err != nil:
		return nil, errorf(http.StatusUnauthorized, "the ID token is not valid: %v", err)
	}
	// Only the entries declared for ID tokens: an ID token whose claim is
	// write, read or the name of a token with a secret is none of those.
	for i := range s.opts.Tokens {
		if e := &s.opts.Tokens[i]; e.Value == "" && e.Name == name {
			t := *e
			t.Name, t.idToken = IDTokenPrefix+name, true
			return &t, nil
		}
	}
	return nil, errorf(http.StatusForbidden, "the ID token names %q, which no entry of api.tokens for ID tokens (one without tokenEnv) is named: it may do nothing", name)
}

// presentedToken returns the bearer token, or a basic-auth password
// (basic is then true).
func presentedToken(r *http.Request) (tok string, basic, ok bool) {
	h := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(tok)
		return tok, false, tok != ""
	}
	if _, pass, ok := r.BasicAuth(); ok && pass != "" {
		return pass, true, true
	}
	return "", false, false
}

// crossSite refuses writes a browser may have been made to send, for
// writes whose credential browsers send on their own. Browsers replay
// basic-auth credentials (the dashboard's login) and cookies (its session;
// SameSite=Lax keeps it off other sites' POSTs, but not off a sibling
// subdomain's, which browsers count as the same site) on requests other
// pages trigger, and a form can post text/plain across sites without
// asking first; so such a write must be JSON, which a cross-site page
// cannot send without a CORS preflight this server never grants, and must
// say it comes from this origin. Bearer tokens are never sent by browsers
// on their own, so writes with one (scripts, the CLI) are not checked.
func crossSite(r *http.Request) *Error {
	const hint = "; scripts and the CLI should send Authorization: Bearer <token>"
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return errorf(http.StatusForbidden, "writes with a browser's credentials (basic auth, the dashboard's session) must send Content-Type: application/json, not %q%s",
			r.Header.Get("Content-Type"), hint)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return nil
	case "":
		// Older browsers: the Origin header says the same.
	default:
		return errorf(http.StatusForbidden, "cross-site write refused: the request comes from another site (Sec-Fetch-Site: %q)%s", site, hint)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errorf(http.StatusForbidden, "writes with a browser's credentials (basic auth, the dashboard's session) must come from this agent's own pages (the request has no Origin)%s", hint)
	}
	if u, err := url.Parse(origin); err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return errorf(http.StatusForbidden, "cross-site write refused: Origin %q is not this agent (%s)%s", origin, r.Host, hint)
	}
	return nil
}

// equal compares tokens in constant time. Comparing digests, which have one
// length, keeps the time from telling even the token's length.
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
