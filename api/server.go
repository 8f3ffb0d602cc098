package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// DefaultMaxBodyBytes caps request bodies unless Options say otherwise.
const DefaultMaxBodyBytes = 1 << 20

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
	// Sources triggers syncs; nil answers the sync and approve endpoints 503.
	Sources Triggerer
	// ReadToken, when set, is required (as a bearer token, or as the
	// password of basic auth for browsers) for every read. WriteToken is
	// required for writes, and also allows reads; without one, writes are
	// refused with 403.
	ReadToken, WriteToken string
	// MaxBodyBytes caps request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Dashboard, Metrics and GitHubWebhook are mounted at /, /metrics and
	// /hooks/github when set.
	Dashboard, Metrics, GitHubWebhook http.Handler
	// Instrument, when set, wraps every route's handler; route is its pattern.
	Instrument func(route string, h http.Handler) http.Handler
	// Heartbeat is how often an idle event stream sends a comment, so that
	// proxies keep it open and clients notice a dead agent; default 15s.
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Server is the agent's HTTP interface: the JSON API, its event stream, and
// the dashboard, metrics, health and webhook endpoints, on one listener.
type Server struct {
	opts    Options
	store   store.Store
	syncer  *sync.Syncer
	log     *slog.Logger
	events  *hub
	loader  *loader
	handler http.Handler
}

// New returns a Server. Its event stream needs Run (or Serve) to be fed.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, store: opts.Store, syncer: opts.Syncer, log: opts.Logger}
	s.events = newHub(opts.Store, opts.Logger)
	s.loader = newLoader(opts.Store)
	s.handler = s.routes()
	return s
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler { return s.handler }

// Run feeds the event stream from the store's notifications until ctx is
// done. Every agent on one database hears every change, so each agent's
// stream shows all of them.
func (s *Server) Run(ctx context.Context) error { return s.events.run(ctx) }

// Serve serves on ln until ctx is done, then stops accepting, ends the
// event streams, and waits up to five seconds for requests in flight.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
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
		h = s.authorize(need, h)
		if pattern != "GET /api/v1/events" {
			h = readDeadline(h)
		}
		if s.opts.Instrument != nil {
			h = s.opts.Instrument(pattern, h)
		}
		mux.Handle(pattern, h)
	}
	fn := func(pattern string, need access, h func(http.ResponseWriter, *http.Request) error) {
		handle(pattern, need, s.json(h))
	}
	fn("GET /api/v1/resource-types", read, s.listTypes)
	fn("POST /api/v1/resource-types", write, s.createType)
	fn("GET /api/v1/resource-types/{id}", read, s.getType)
	fn("GET /api/v1/resource-types/{name}/{version}", read, s.getTypeByName)

	fn("GET /api/v1/resources", read, s.listResources)
	fn("POST /api/v1/resources", write, s.createResource)
	fn("GET /api/v1/resources/{id}", read, s.getResource)
	fn("PUT /api/v1/resources/{id}", write, s.updateResource)
	fn("DELETE /api/v1/resources/{id}", write, s.deleteResource)
	fn("GET /api/v1/resources/by-name/{kind}/{version}/{name}", read, s.getResourceByName)
	fn("GET /api/v1/resources/{id}/history", read, s.resourceHistory)
	fn("GET /api/v1/resources/{id}/outputs", read, s.resourceOutputs)
	fn("POST /api/v1/resources/{id}/reconcile", write, s.reconcileResource)

	fn("GET /api/v1/sources", read, s.listSources)
	fn("GET /api/v1/sources/{name}", read, s.getSource)
	fn("GET /api/v1/sources/{name}/history", read, s.sourceHistory)
	fn("POST /api/v1/sources/{name}/sync", write, s.syncSource)
	fn("POST /api/v1/sources/{name}/approve", write, s.approveSource)
	fn("DELETE /api/v1/sources/{name}", write, s.deleteSource)

	handle("GET /api/v1/events", read, http.HandlerFunc(s.serveEvents))
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
	if s.opts.Dashboard != nil {
		handle("GET /", read, s.opts.Dashboard)
	}
	return jsonMethodErrors(mux)
}

// bodyReadTimeout bounds how long a client may take to send its request,
// so that slow senders cannot hold the server's goroutines. The event
// stream is exempt: a server-wide read timeout would cut it.
const bodyReadTimeout = 30 * time.Second

func readDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
		h.ServeHTTP(w, r)
	})
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
	writeJSON(m.ResponseWriter, code, ErrorBody{Error: fmt.Sprintf("method %s is not allowed here (allowed: %s)",
		m.method, m.Header().Get("Allow")), Details: []Detail{}})
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

// json adapts a handler that returns an error, capping the request body.
func (s *Server) json(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
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
func (s *Server) authorize(need access, h http.Handler) http.Handler {
	if need == open {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.check(need, r); err != nil {
			if err.Status == http.StatusUnauthorized && need == read && !strings.HasPrefix(r.URL.Path, "/api/") {
				// Browsers cannot send bearer tokens: let them log in with
				// the token as a basic-auth password.
				w.Header().Set("WWW-Authenticate", `Basic realm="no8s", charset="UTF-8"`)
			}
			s.writeError(w, r, err, nil)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) check(need access, r *http.Request) *Error {
	readTok, writeTok := s.opts.ReadToken, s.opts.WriteToken
	if need == write && writeTok == "" {
		return errorf(http.StatusForbidden, "writes are disabled: the agent has no write token (set api.writeTokenEnv)")
	}
	if need == read && readTok == "" {
		return nil
	}
	got, ok := presentedToken(r)
	switch {
	case !ok:
		return errorf(http.StatusUnauthorized, "a token is required: send Authorization: Bearer <token>")
	case writeTok != "" && equal(got, writeTok):
		return nil
	case need == read && equal(got, readTok):
		return nil
	case need == write && readTok != "" && equal(got, readTok):
		return errorf(http.StatusForbidden, "the read token cannot write: use the write token")
	}
	return errorf(http.StatusUnauthorized, "the token is not valid")
}

// presentedToken returns the bearer token, or a basic-auth password.
func presentedToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(tok)
		return tok, tok != ""
	}
	if _, pass, ok := r.BasicAuth(); ok && pass != "" {
		return pass, true
	}
	return "", false
}

// equal compares tokens in constant time. Comparing digests, which have one
// length, keeps the time from telling even the token's length.
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
