// Package gitlabtest fakes GitLab's REST API (v4) for the agent's GitLab
// clients: projects, pipelines created by API or trigger token and played by
// a script (jobs, logs, artifacts, child pipelines through bridges),
// cancelling, commit statuses with GitLab's state machine, merge requests
// and their notes. It answers with GitLab's JSON shapes, headers
// (pagination, RateLimit-*) and errors, checks tokens and roles, injects
// failures on demand, and records every request so that tests can prove
// what a client asked.
//
// The server answers under /api/v4/, like every GitLab instance; give
// Server.URL to gitlabapi.NewClient. Projects are addressed by numeric id or
// by URL-encoded path (g%2Fsub%2Fp%2Ex, as client-go sends it).
package gitlabtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults and limits.
const (
	// DefaultToken is the private token accepted when Options.Token is
	// empty; it has the Maintainer role in every project.
	DefaultToken = "glpat-gitlabtest"
	// DefaultUser is the user name of Options.Token.
	DefaultUser = "no8s-bot"
	// DefaultBranch is a project's default branch when
	// ProjectOptions.DefaultBranch is empty.
	DefaultBranch = "main"
	// RateLimit is the per-minute request budget the RateLimit-* headers
	// show (gitlab.com's authenticated API limit).
	RateLimit = 2000
	// MaxNoteLength is the longest note body GitLab takes, in characters.
	MaxNoteLength = 1_000_000
	// DefaultPerPage and MaxPerPage are GitLab's page sizes.
	DefaultPerPage, MaxPerPage = 20, 100
)

// Role is a member's access level in a project, as GitLab numbers them.
type Role int

// Roles that matter to the agent: Reporter reads and comments, Developer
// also runs and cancels pipelines and sets commit statuses.
const (
	Reporter   Role = 20
	Developer  Role = 30
	Maintainer Role = 40
)

// Options configure a Server. Zero fields take the defaults.
type Options struct {
	// Token is the private token accepted for every project, with the
	// Maintainer role, as user DefaultUser; DefaultToken by default.
	// ProjectOptions.Tokens add tokens for one project.
	Token string
	// Script tells how a pipeline created by API or trigger plays; by
	// default DefaultScript. It runs outside the server's lock, so it may
	// call the server.
	Script func(c Creation) Script
	// Now is the server's clock for timestamps; by default time.Now.
	Now func() time.Time
	// CancelPolls is how many reads a cancelled pipeline that was running
	// shows "canceling" (its runners stop their jobs) before "canceled";
	// 0 cancels at once.
	CancelPolls int
}

// Match selects requests; empty fields match anything.
type Match struct {
	// Method is the HTTP method, e.g. "POST".
	Method string
	// PathSuffix is how the request's decoded path ends, e.g. "/pipeline"
	// or "/cancel".
	PathSuffix string
}

func (m Match) matches(r *http.Request) bool {
	return (m.Method == "" || strings.EqualFold(m.Method, r.Method)) && strings.HasSuffix(r.URL.Path, m.PathSuffix)
}

// Fault is an answer served instead of the real one. A fault with a
// Status changes nothing on the server.
type Fault struct {
	// Status is the HTTP status code; 0 serves the real answer after
	// Delay (a slow answer).
	Status int
	// Headers are set on the answer, over the server's usual headers; an
	// empty value removes the usual header (a 429 without RateLimit-Reset).
	Headers map[string]string
	// Body is the answer's body.
	Body string
	// Delay holds the answer back this long, or until the request's
	// context ends (then nothing is answered).
	Delay time.Duration
	// Hang holds the answer back until the request's context ends: a
	// server that accepted the request and never answers.
	Hang bool
	// Through lets the request reach GitLab and take effect before the
	// fault's Status replaces GitLab's answer: a gateway that timed out
	// while Puma created the pipeline all the same. With Hang or Delay,
	// the request takes effect at once and the answer is held back (with
	// Hang, a pipeline created whose answer never comes).
	Through bool
}

// Through returns f with Through set: the request takes effect, and f is
// answered instead of GitLab's answer.
func Through(f Fault) Fault {
	f.Through = true
	return f
}

// TooManyRequests is GitLab's 429 from its rate limiter (Rack::Attack):
// plain text "Retry later", Retry-After in whole seconds (rounded up) and
// the RateLimit-* headers with nothing remaining.
func TooManyRequests(retryAfter time.Duration) Fault {
	secs := int64(math.Ceil(max(retryAfter, 0).Seconds()))
	reset := time.Now().Add(time.Duration(secs) * time.Second)
	return Fault{Status: http.StatusTooManyRequests, Body: "Retry later\n", Headers: map[string]string{
		"Content-Type":        "text/plain",
		"Retry-After":         strconv.FormatInt(secs, 10),
		"RateLimit-Name":      "throttle_authenticated_api",
		"RateLimit-Limit":     strconv.Itoa(RateLimit),
		"RateLimit-Observed":  strconv.Itoa(RateLimit + 1),
		"RateLimit-Remaining": "0",
		"RateLimit-Reset":     strconv.FormatInt(reset.Unix(), 10),
		"RateLimit-ResetTime": reset.UTC().Format(http.TimeFormat),
	}}
}

// BadGateway is the 502 page GitLab's front end answers when Puma behind it
// fails: HTML, not JSON.
func BadGateway() Fault {
	return Fault{Status: http.StatusBadGateway, Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"},
		Body: `<!DOCTYPE html>
<html>
<head>
  <meta content="width=device-width, initial-scale=1, maximum-scale=1" name="viewport">
  <title>GitLab is not responding (502)</title>
</head>
<body>
  <h1>502</h1>
  <h3>Whoops, GitLab is taking too much time to respond.</h3>
  <p>Try refreshing the page, or going back and attempting the action again.</p>
</body>
</html>
`}
}

// Unauthorized is GitLab's 401 for a token it does not accept.
func Unauthorized() Fault {
	return Fault{Status: http.StatusUnauthorized, Body: `{"message":"401 Unauthorized"}`}
}

// Hang is an answer that never comes: the request waits until its context
// ends.
func Hang() Fault { return Fault{Hang: true} }

// Slow serves the real answer after d (or nothing if the request's context
// ends first).
func Slow(d time.Duration) Fault { return Fault{Delay: d} }

// Request is a request the server received.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the path as received, escaped (/api/v4/projects/g%2Fp/...).
	Path string
	// Query is the parsed query string.
	Query url.Values
	// Body is the request body (its first 4 MiB).
	Body string
	// PrivateToken is the Private-Token header.
	PrivateToken string
	// Authorization is the Authorization header.
	Authorization string
	// Status is the status code the server answered; 0 when the request
	// ended before an answer (a Hang fault).
	Status int
}

// Server is the fake API, an httptest.Server.
type Server struct {
	*httptest.Server
	opts    Options
	started time.Time
	done    chan struct{} // closed when the test ends: hanging answers end

	mu        sync.Mutex
	requests  []Request
	faults    []*faultRule
	projects  []*project
	pipelines map[int64]*pipeline
	creations []Creation
	cancels   []int64
	jobs      map[int64]*job
	nextID    map[string]int64 // per kind of object
	window    int64            // minute of the rate-limit window
	used      int              // requests in the window
	inFlight  int              // requests received and not yet answered
	changed   chan struct{}    // closed and replaced on every change
}

type faultRule struct {
	match Match
	left  int
	fault Fault
}

// New starts a server; it stops when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.Script == nil {
		opts.Script = DefaultScript
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, started: opts.Now(), done: make(chan struct{}), changed: make(chan struct{}),
		pipelines: map[int64]*pipeline{}, jobs: map[int64]*job{},
		nextID: map[string]int64{"project": 1000, "pipeline": 500_000_000, "job": 9_000_000_000, "status": 70_000_000,
			"note": 2_000_000_000, "mr": 300_000_000}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.Close()
	})
	return s
}

// Options returns the options in effect, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// FailNext answers the next n requests that match with fault instead of
// the real answer, before authentication. Rules are tried in the order
// they were added.
func (s *Server) FailNext(match Match, n int, fault Fault) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{match: match, left: n, fault: fault})
}

// Requests returns the requests received so far, in the order answered.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Query = cloneValues(r.Query)
		out[i] = r
	}
	return out
}

// InFlight returns how many requests the server received and has not
// answered yet: a test waits with WaitFor for a request a Hang or Slow
// fault holds.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// WaitFor waits until cond holds, or ctx ends. cond is checked now and
// again whenever a request arrives or is answered, so a test waits for an
// event (a pipeline created, a status posted) without sleeping; it may call
// the server's accessors.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

// notify wakes WaitFor. Call with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Count returns how many requests that match were answered with status
// (any status when 0).
func (s *Server) Count(m Match, status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		u := &url.URL{Path: r.Path}
		if p, err := url.PathUnescape(r.Path); err == nil {
			u.Path = p
		}
		if m.matches(&http.Request{Method: r.Method, URL: u}) && (status == 0 || r.Status == status) {
			n++
		}
	}
	return n
}

func (s *Server) newID(kind string) int64 {
	s.nextID[kind]++
	return s.nextID[kind]
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// reply is an answer, built whole before it is recorded and written.
type reply struct {
	status  int
	headers map[string]string
	body    []byte
	// drop are usual headers a fault removes.
	drop []string
}

func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return reply{status: status, body: b}
}

// message is GitLab's error shape {"message": ...}.
func message(status int, msg any) reply {
	return jsonReply(status, map[string]any{"message": msg})
}

// paramError is Grape's shape for a missing or invalid parameter.
func paramError(msg string) reply {
	return jsonReply(http.StatusBadRequest, map[string]string{"error": msg})
}

// baseError is GitLab's shape for a model's validation errors on base.
func baseError(msgs ...string) reply {
	return message(http.StatusBadRequest, map[string][]string{"base": msgs})
}

// notFound is GitLab's 404, naming what was not found ("Project", "Job")
// or, for "", nothing: {"message":"404 Not Found"}.
func notFound(what string) reply {
	if what == "" {
		return message(http.StatusNotFound, "404 Not Found")
	}
	return message(http.StatusNotFound, "404 "+what+" Not Found")
}

func forbidden() reply { return message(http.StatusForbidden, "403 Forbidden") }

func unauthorized() reply { return message(http.StatusUnauthorized, "401 Unauthorized") }

// maxBody bounds the request bodies read; a note may be 1,000,000
// characters of up to 4 bytes.
const maxBody = 4 << 20

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	s.inFlight++
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.notify()
		s.mu.Unlock()
	}()
	body, _ := io.ReadAll(io.LimitReader(req.Body, maxBody))
	rep, ok := s.answer(req, body)
	record := Request{Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.Query(), Body: string(body),
		PrivateToken: req.Header.Get("Private-Token"), Authorization: req.Header.Get("Authorization")}
	if !ok {
		s.mu.Lock()
		s.requests = append(s.requests, record)
		s.mu.Unlock()
		return
	}
	record.Status = rep.status

	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "max-age=0, private, must-revalidate")
	h.Set("X-Gitlab-Meta", `{"correlation_id":"01HXGITLABTEST","version":"1"}`)
	s.mu.Lock()
	now := s.opts.Now()
	if w := now.Unix() / 60; w != s.window {
		s.window, s.used = w, 0
	}
	s.used++
	reset := time.Unix((s.window+1)*60, 0)
	h.Set("RateLimit-Name", "throttle_authenticated_api")
	h.Set("RateLimit-Limit", strconv.Itoa(RateLimit))
	h.Set("RateLimit-Observed", strconv.Itoa(s.used))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(RateLimit-s.used, 0)))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("RateLimit-ResetTime", reset.UTC().Format(http.TimeFormat))
	s.requests = append(s.requests, record)
	s.mu.Unlock()
	for k, v := range rep.headers {
		h.Set(k, v)
	}
	for _, k := range rep.drop {
		h.Del(k)
	}
	if rep.status == http.StatusNoContent {
		h.Del("Content-Type")
		w.WriteHeader(rep.status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// answer builds the answer to req; ok is false when there is none to give
// (the request's context ended while a fault held it back).
func (s *Server) answer(req *http.Request, body []byte) (reply, bool) {
	if f, ok := s.takeFault(req); ok {
		var real reply
		routed := false
		if f.Through && (f.Hang || f.Delay > 0) {
			// The request takes effect now; its answer waits.
			real, routed = s.route(req, body), true
		}
		if f.Hang || f.Delay > 0 {
			var timeout <-chan time.Time
			if !f.Hang {
				t := time.NewTimer(f.Delay)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-req.Context().Done():
				return reply{}, false
			case <-s.done:
				return reply{}, false
			case <-timeout:
			}
		}
		if f.Status != 0 {
			if f.Through && !routed {
				s.route(req, body)
			}
			rep := reply{status: f.Status, headers: map[string]string{}, body: []byte(f.Body)}
			for k, v := range f.Headers {
				if v == "" {
					rep.drop = append(rep.drop, k)
				} else {
					rep.headers[k] = v
				}
			}
			return rep, true
		}
		if routed {
			return real, true
		}
	}
	return s.route(req, body), true
}

func (s *Server) takeFault(req *http.Request) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.match.matches(req) {
			f.left--
			if f.left == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			return f.fault, true
		}
	}
	return Fault{}, false
}

// caller is who a request authenticated as.
type caller struct {
	token string
	user  user
	// role is the caller's role in the project; 0 for a token of another
	// project, which cannot see it.
	role Role
	// anonymous requests carry no token (trigger-token calls).
	anonymous bool
}

// requestToken reads the token a request carries: Private-Token, or an
// OAuth or personal token as Authorization: Bearer.
func requestToken(req *http.Request) (string, bool) {
	if t := req.Header.Get("Private-Token"); t != "" {
		return t, true
	}
	if scheme, t, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(t), true
	}
	return "", false
}

// authenticate finds the caller of req; ok is false for a token the server
// does not know. Call with s.mu held.
func (s *Server) authenticate(req *http.Request) (caller, bool) {
	tok, has := requestToken(req)
	if !has {
		return caller{anonymous: true}, true
	}
	if tok == s.opts.Token {
		return caller{token: tok, user: bot}, true
	}
	for _, p := range s.projects {
		if _, ok := p.opts.Tokens[tok]; ok {
			return caller{token: tok, user: p.tokenUser(tok)}, true
		}
	}
	return caller{}, false
}

// roleIn is the caller's role in p. Call with s.mu held.
func (s *Server) roleIn(c caller, p *project) Role {
	switch {
	case c.anonymous:
		return 0
	case c.token == s.opts.Token:
		return Maintainer
	}
	return p.opts.Tokens[c.token]
}

// route dispatches a request under /api/v4/.
func (s *Server) route(req *http.Request, body []byte) reply {
	rest, ok := strings.CutPrefix(req.URL.EscapedPath(), "/api/v4/")
	if !ok {
		return reply{status: http.StatusNotFound, headers: map[string]string{"Content-Type": "text/html; charset=utf-8"},
			body: []byte("<!DOCTYPE html><html><body><h1>404</h1><p>The page could not be found or you don't have permission to view it.</p></body></html>\n")}
	}
	seg := strings.Split(rest, "/")
	s.mu.Lock()
	c, known := s.authenticate(req)
	s.mu.Unlock()
	if !known {
		return unauthorized()
	}
	if len(seg) == 1 && seg[0] == "user" && req.Method == http.MethodGet && !c.anonymous {
		// The token's own user, as GET /user answers for personal and
		// project (bot) tokens alike.
		return jsonReply(http.StatusOK, c.user)
	}
	if seg[0] != "projects" || len(seg) < 2 {
		if c.anonymous {
			return unauthorized()
		}
		return notFound("")
	}
	id, err := url.PathUnescape(seg[1])
	if err != nil {
		return notFound("Project")
	}
	s.mu.Lock()
	p := s.findProject(id)
	var role Role
	if p != nil {
		role = s.roleIn(c, p)
	}
	s.mu.Unlock()
	c.role = role
	seg = seg[2:]
	get, post, put := req.Method == http.MethodGet, req.Method == http.MethodPost, req.Method == http.MethodPut
	// Trigger-token calls authenticate by the token in the body.
	if len(seg) == 2 && seg[0] == "trigger" && seg[1] == "pipeline" && post {
		if p == nil || !c.anonymous && role == 0 {
			return notFound("Project")
		}
		return s.trigger(req, p, body)
	}
	if c.anonymous {
		return unauthorized()
	}
	if p == nil || role == 0 {
		// GitLab does not tell a project the token cannot see from one
		// that does not exist.
		return notFound("Project")
	}
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	switch {
	case len(seg) == 0 && get:
		return s.projectReply(p)
	case len(seg) == 1 && seg[0] == "pipelines" && get:
		return s.listPipelines(req, p)
	case len(seg) == 1 && seg[0] == "pipeline" && post:
		if role < Developer {
			return forbidden()
		}
		return s.createPipeline(req, p, c, body)
	case len(seg) >= 2 && seg[0] == "pipelines":
		pid, err := strconv.ParseInt(seg[1], 10, 64)
		if err != nil {
			return notFound("")
		}
		if write && role < Developer {
			return forbidden()
		}
		switch {
		case len(seg) == 2 && get:
			return s.getPipeline(p, pid)
		case len(seg) == 3 && seg[2] == "cancel" && post:
			return s.cancel(p, pid)
		case len(seg) == 3 && seg[2] == "jobs" && get:
			return s.listJobs(req, p, pid)
		case len(seg) == 3 && seg[2] == "bridges" && get:
			return s.listBridges(req, p, pid)
		}
	case len(seg) >= 3 && seg[0] == "jobs":
		jid, err := strconv.ParseInt(seg[1], 10, 64)
		if err != nil {
			return notFound("")
		}
		switch {
		case len(seg) == 3 && seg[2] == "trace" && get:
			return s.trace(p, jid)
		case len(seg) >= 4 && seg[2] == "artifacts" && get:
			path, err := url.PathUnescape(strings.Join(seg[3:], "/"))
			if err != nil {
				return notFound("")
			}
			return s.artifact(p, jid, path)
		}
	case len(seg) == 2 && seg[0] == "statuses" && post:
		if role < Developer {
			return forbidden()
		}
		sha, _ := url.PathUnescape(seg[1])
		return s.setStatus(req, p, c, sha, body)
	case len(seg) == 4 && seg[0] == "repository" && seg[1] == "commits" && seg[3] == "statuses" && get:
		sha, _ := url.PathUnescape(seg[2])
		return s.listStatuses(req, p, sha)
	case len(seg) >= 1 && seg[0] == "merge_requests":
		return s.routeMergeRequests(req, p, c, seg[1:], body, get, post, put)
	}
	return notFound("")
}

// page is the window of a listing a request asks for.
type page struct {
	from, to int
	headers  map[string]string
}

// paginate reads page (default 1) and per_page (default 20, at most 100),
// and returns the window of n items and GitLab's offset pagination
// headers: X-Page, X-Per-Page, X-Total, X-Total-Pages, X-Next-Page,
// X-Prev-Page (empty when there is none) and Link.
func (s *Server) paginate(req *http.Request, n int) page {
	q := req.URL.Query()
	per := DefaultPerPage
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, MaxPerPage)
	}
	cur := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		cur = v
	}
	last := max((n+per-1)/per, 1)
	from := min((cur-1)*per, n)
	to := min(from+per, n)
	h := map[string]string{"X-Page": strconv.Itoa(cur), "X-Per-Page": strconv.Itoa(per),
		"X-Total": strconv.Itoa(n), "X-Total-Pages": strconv.Itoa(last), "X-Next-Page": "", "X-Prev-Page": ""}
	link := func(p int, rel string) string {
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		return fmt.Sprintf("<%s%s?%s>; rel=%q", s.URL, req.URL.EscapedPath(), q.Encode(), rel)
	}
	var links []string
	if cur > 1 {
		h["X-Prev-Page"] = strconv.Itoa(min(cur-1, last))
		links = append(links, link(min(cur-1, last), "prev"))
	}
	if cur < last {
		h["X-Next-Page"] = strconv.Itoa(cur + 1)
		links = append(links, link(cur+1, "next"))
	}
	links = append(links, link(1, "first"), link(last, "last"))
	h["Link"] = strings.Join(links, ", ")
	return page{from: from, to: to, headers: h}
}

func listReply[T any](pg page, items []T) reply {
	out := items[pg.from:pg.to]
	if out == nil {
		out = []T{}
	}
	r := jsonReply(http.StatusOK, out)
	r.headers = pg.headers
	return r
}

// timeFormat is how GitLab writes times: UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) now() time.Time { return s.opts.Now().UTC().Truncate(time.Millisecond) }

// decodeBody reads a JSON body, or a form body, or else the query string,
// into a map of raw JSON values, as GitLab takes parameters from any.
func decodeBody(req *http.Request, body []byte) (map[string]json.RawMessage, bool) {
	out := map[string]json.RawMessage{}
	ct := req.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") && len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &out); err != nil || out == nil {
			return nil, false
		}
	} else if strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, false
		}
		for k := range vals {
			b, _ := json.Marshal(vals.Get(k))
			out[k] = b
		}
	}
	for k := range req.URL.Query() {
		if _, ok := out[k]; !ok {
			b, _ := json.Marshal(req.URL.Query().Get(k))
			out[k] = b
		}
	}
	return out, true
}

// str reads a string parameter; numbers and booleans count, as Grape
// coerces them.
func str(params map[string]json.RawMessage, k string) (string, bool) {
	raw, ok := params[k]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) == nil {
		return v, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true
	}
	return strings.Trim(string(raw), `"`), true
}
