// Package githubtest fakes the GitHub REST API for GitHub Actions workflow
// runs: dispatching a workflow, listing and reading its runs, their jobs and
// artifacts, downloading an artifact and cancelling a run. It answers with
// GitHub's JSON shapes, headers and status codes, plays each dispatched run
// by a script, injects GitHub's failures on demand and records every request
// so that tests can prove what a client asked.
//
// The server answers both at the root, like api.github.com, and under
// /api/v3/, like GitHub Enterprise Server.
package githubtest

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of Options.
const (
	// DefaultToken is the token accepted when Options.Token is empty.
	DefaultToken = "ghp_githubtest"
	// DefaultOwner is the repository owner when Options.Owner is empty.
	DefaultOwner = "no8s"
	// DefaultRepo is the repository when Options.Repo is empty.
	DefaultRepo = "infra"
	// DefaultWorkflow is the workflow file when Options.Workflow is empty.
	DefaultWorkflow = "no8s-apply.yml"
	// DefaultWorkflowID is the workflow id when Options.WorkflowID is 0.
	DefaultWorkflowID = 87654321
)

// Limits GitHub applies that the server applies too.
const (
	// MaxInputs is how many inputs a workflow_dispatch event may carry.
	MaxInputs = 25
	// RateLimit is the hourly request budget the rate limit headers show.
	RateLimit = 5000
)

// Options configure a Server. Zero fields take the defaults above.
type Options struct {
	// Token is the one token the server accepts, as "Bearer <token>" or
	// "token <token>".
	Token string
	// Owner is the owner of the one repository the server knows; it
	// matches case-insensitively, like GitHub's.
	Owner string
	// Repo is the repository's name; it matches case-insensitively.
	Repo string
	// Workflow is the workflow's file name; requests may address the
	// workflow by it or by WorkflowID.
	Workflow string
	// WorkflowID is the workflow's numeric id.
	WorkflowID int64
	// ReturnRunDetails says whether the dispatch endpoint knows the
	// return_run_details parameter (api.github.com does); false plays an
	// older GitHub Enterprise Server, which refuses it with 422.
	ReturnRunDetails bool
	// ListDelay is how many answered listings of the workflow's runs
	// leave out a run after its dispatch: GitHub shows a dispatched run in
	// the listing only after a few seconds. Zero shows it at once.
	ListDelay int
	// RunName gives a run its name (the workflow's run-name) from the
	// dispatch inputs; by default "no8s " + inputs["correlation_id"].
	RunName func(inputs map[string]string) string
	// Script tells how a dispatched run plays; by default DefaultScript.
	Script func(d Dispatch) Script
	// Now is the server's clock, for run times and the created filter; by
	// default time.Now.
	Now func() time.Time
	// CancelPolls is how many reads of a run object after a cancel request
	// still see the run as it was, not completed: GitHub answers the cancel
	// with 202 and completes the run only once its jobs have stopped. Zero
	// completes it at once.
	CancelPolls int
}

// Dispatch is a workflow_dispatch event the server accepted.
type Dispatch struct {
	// Ref is the ref as the request gave it.
	Ref string
	// Inputs are the dispatch inputs, never nil.
	Inputs map[string]string
	// RunID is the id of the run the dispatch created.
	RunID int64
	// At is when the server took the dispatch, by its clock.
	At time.Time
}

// Script tells how a run plays out.
type Script struct {
	// Conclusion is the run's conclusion once completed: success, failure,
	// cancelled, timed_out...; empty means success.
	Conclusion string
	// Polls is how many reads of the run object (GET .../runs/{id}) see
	// it not completed: the first read sees it queued, the later ones in
	// progress, and read Polls+1 sees it completed.
	Polls int
	// Jobs are the run's jobs, in order.
	Jobs []Job
	// Artifacts are uploaded by the run; they are listed once the run
	// completed by its script (not when it was cancelled).
	Artifacts []Artifact
	// Never keeps the run in progress until it is cancelled or Finish ends
	// it; Polls and Conclusion are then ignored.
	Never bool
}

// Job is a job of a scripted run.
type Job struct {
	// Name is the job's name.
	Name string
	// Conclusion is the job's conclusion once the run completed; empty
	// means the run's. A conclusion other than success goes to the last
	// step, the earlier steps succeed.
	Conclusion string
	// Steps are the names of the job's steps, in order.
	Steps []string
}

// Artifact is an artifact of a scripted run.
type Artifact struct {
	// Name is the artifact's name.
	Name string
	// Files are the archive's files: path -> content.
	Files map[string][]byte
}

// DefaultScript is the script of runs when Options.Script is nil: success
// after two polls, with one job "apply" of two steps and no artifact.
func DefaultScript(Dispatch) Script {
	return Script{Conclusion: "success", Polls: 2, Jobs: []Job{{Name: "apply", Steps: []string{"Set up job", "Run no8s apply"}}}}
}

// DefaultRunName is the run name when Options.RunName is nil.
func DefaultRunName(inputs map[string]string) string { return "no8s " + inputs["correlation_id"] }

// Match selects requests; empty fields match anything.
type Match struct {
	// Method is the HTTP method, e.g. "GET".
	Method string
	// PathSuffix is how the request's path ends, e.g. "/jobs".
	PathSuffix string
}

func (m Match) matches(r *http.Request) bool {
	return (m.Method == "" || strings.EqualFold(m.Method, r.Method)) && strings.HasSuffix(r.URL.Path, m.PathSuffix)
}

// Fault is an answer served instead of the real one. A fault changes
// nothing on the server unless it is Through.
type Fault struct {
	// Status is the HTTP status code; 0 serves the real answer after
	// Delay (a slow answer).
	Status int
	// Headers are set on the answer, over the server's usual headers.
	Headers map[string]string
	// Body is the answer's body.
	Body string
	// Delay holds the answer back this long, or until the request's
	// context ends (then nothing is answered).
	Delay time.Duration
	// Hang holds the answer back until the request's context ends: a
	// server that accepted the request and never answers.
	Hang bool
	// Through lets the request reach GitHub and take effect before the
	// fault's Status replaces GitHub's answer: a gateway that timed out
	// while GitHub dispatched the workflow all the same. With Hang or
	// Delay, the request takes effect at once and the answer is held back
	// (with Hang, a run started whose answer never comes).
	Through bool
}

// Through returns f with Through set: the request takes effect, and f is
// answered instead of GitHub's answer.
func Through(f Fault) Fault {
	f.Through = true
	return f
}

// Hang is an answer that never comes: the request waits until its context
// ends.
func Hang() Fault { return Fault{Hang: true} }

// Slow is the real answer, held back d.
func Slow(d time.Duration) Fault { return Fault{Delay: d} }

// Documentation URLs GitHub puts in its error bodies.
const (
	docsREST           = "https://docs.github.com/rest"
	docsSecondaryLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	docsPrimaryLimit   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit"
	docsDispatch       = "https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event"
	docsDispatchGHES   = "https://docs.github.com/enterprise-server@3.19/rest/actions/workflows#create-a-workflow-dispatch-event"
	docsCancel         = "https://docs.github.com/rest/actions/workflow-runs#cancel-a-workflow-run"
	docsRuns           = "https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-workflow"
)

// secondaryMessage is GitHub's message for a secondary rate limit.
const secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."

// SecondaryRateLimit is GitHub's 403 for a secondary rate limit, with
// Retry-After in whole seconds (rounded up). go-github reports it as a
// *github.AbuseRateLimitError, by its documentation URL.
func SecondaryRateLimit(retryAfter time.Duration) Fault {
	return Fault{Status: http.StatusForbidden, Headers: map[string]string{"Retry-After": retrySeconds(retryAfter)},
		Body: errorBody(secondaryMessage, docsSecondaryLimit, http.StatusForbidden)}
}

// TooManyRequests is GitHub's 429 for a secondary rate limit, with
// Retry-After in whole seconds (rounded up).
func TooManyRequests(retryAfter time.Duration) Fault {
	return Fault{Status: http.StatusTooManyRequests, Headers: map[string]string{"Retry-After": retrySeconds(retryAfter)},
		Body: errorBody(secondaryMessage, docsSecondaryLimit, http.StatusTooManyRequests)}
}

// PrimaryRateLimit is GitHub's 403 for an exhausted hourly budget that
// resets at reset. go-github reports it as a *github.RateLimitError, by
// X-RateLimit-Remaining: 0.
func PrimaryRateLimit(reset time.Time) Fault {
	return Fault{Status: http.StatusForbidden,
		Headers: map[string]string{
			"X-RateLimit-Remaining": "0",
			"X-RateLimit-Used":      strconv.Itoa(RateLimit),
			"X-RateLimit-Reset":     strconv.FormatInt(reset.Unix(), 10),
		},
		Body: errorBody("API rate limit exceeded for user ID 1.", docsPrimaryLimit, http.StatusForbidden)}
}

// BadGateway is the 502 page GitHub's front ends answer when the API
// behind them fails: HTML, not JSON.
func BadGateway() Fault {
	return Fault{Status: http.StatusBadGateway, Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"},
		Body: `<!DOCTYPE html>
<html>
  <head>
    <meta http-equiv="Content-Type" content="text/html; charset=utf-8">
    <title>Unicorn! &middot; GitHub</title>
  </head>
  <body>
    <div class="container">
      <p><strong>We had issues producing the response to your request.</strong></p>
      <p>Sorry about that. Please try refreshing and contact us if the problem persists.</p>
    </div>
  </body>
</html>
`}
}

// BadCredentials is GitHub's 401 for a token it does not accept.
func BadCredentials() Fault {
	return Fault{Status: http.StatusUnauthorized, Body: errorBody("Bad credentials", docsREST, http.StatusUnauthorized)}
}

func retrySeconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(max(d, 0).Seconds())), 10)
}

// Request is a request the server received, API call or download.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the path as received, with /api/v3 when the client sent it.
	Path string
	// Query is the parsed query string.
	Query url.Values
	// Body is the request body (its first MiB).
	Body string
	// Authorization is the Authorization header.
	Authorization string
	// Status is the status code the server answered; 0 when the request's
	// context ended before an answer (a Hang or Slow fault).
	Status int
}

// RunState is the state of a run.
type RunState struct {
	// ID is the run's id.
	ID int64
	// RunNumber counts the workflow's runs from 1.
	RunNumber int64
	// Name is the run's name and display title.
	Name string
	// Ref is the ref the dispatch gave.
	Ref string
	// Inputs are the dispatch inputs.
	Inputs map[string]string
	// Status is queued, in_progress or completed.
	Status string
	// Conclusion is empty until the run completed.
	Conclusion string
	// Cancelled says the run was cancelled through the API.
	Cancelled bool
	// Polls is how many times the run object was read.
	Polls int
}

// Server is the fake API, an httptest.Server.
type Server struct {
	*httptest.Server
	opts    Options
	started time.Time
	done    chan struct{} // closed when the server stops: faults hold nothing back

	changed chan struct{} // closed and replaced on every change, under mu

	mu         sync.Mutex
	requests   []Request
	dispatches []Dispatch
	runs       map[int64]*run
	order      []int64 // run ids in dispatch order
	artifacts  map[int64]*artifact
	cancelled  []int64
	faults     []*faultRule
	lists      int // answered listings of the workflow's runs
	used       int // requests counted against the rate limit
	nextRun    int64
	nextJob    int64
	nextArt    int64
	runNumber  int64
	pr         prState // pull requests, statuses and comments: pulls.go
}

type faultRule struct {
	match Match
	left  int
	fault Fault
}

type run struct {
	id, number  int64
	ref, name   string
	inputs      map[string]string
	script      Script
	createdAt   time.Time
	updatedAt   time.Time
	startedAt   time.Time // in progress since
	completedAt time.Time
	listSeq     int // s.lists at dispatch
	polls       int
	status      string
	conclusion  string
	cancelled   bool
	cancelling  int // reads left before a requested cancel completes the run
	jobIDs      []int64
	artifacts   []*artifact
}

type artifact struct {
	id, runID int64
	name      string
	zip       []byte
	token     string
}

// New starts a server; it stops when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner
	}
	if opts.Repo == "" {
		opts.Repo = DefaultRepo
	}
	if opts.Workflow == "" {
		opts.Workflow = DefaultWorkflow
	}
	if opts.WorkflowID == 0 {
		opts.WorkflowID = DefaultWorkflowID
	}
	if opts.RunName == nil {
		opts.RunName = DefaultRunName
	}
	if opts.Script == nil {
		opts.Script = DefaultScript
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, started: opts.Now(), done: make(chan struct{}), changed: make(chan struct{}), runs: map[int64]*run{}, artifacts: map[int64]*artifact{},
		nextRun: 10_000_000_000, nextJob: 30_000_000_000, nextArt: 1_500_000_000}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		// A request a fault holds back would keep Close waiting.
		close(s.done)
		s.Close()
	})
	return s
}

// Options returns the options in effect, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// BaseURL is the API's base URL as on api.github.com, with a trailing slash.
func (s *Server) BaseURL() string { return s.URL + "/" }

// EnterpriseURL is the API's base URL as on GitHub Enterprise Server:
// the server's URL with /api/v3/.
func (s *Server) EnterpriseURL() string { return s.URL + "/api/v3/" }

// FailNext answers the next n requests that match with fault instead of
// the real answer, before authentication; faulted requests change nothing
// and do not count towards ListDelay. Artifact downloads from the signed
// URLs are requests too: an empty Match catches them. Rules are tried in
// the order they were added.
func (s *Server) FailNext(match Match, n int, fault Fault) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{match: match, left: n, fault: fault})
}

// WaitFor waits until cond holds, or ctx ends. cond is checked now and
// again whenever a workflow is dispatched or a request is answered (or
// given up on), so a test waits for an event without sleeping; it may call
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

// Dispatches returns the dispatches accepted so far, in order.
func (s *Server) Dispatches() []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Dispatch, len(s.dispatches))
	for i, d := range s.dispatches {
		d.Inputs = cloneMap(d.Inputs)
		out[i] = d
	}
	return out
}

// Run returns the state of the run id, and whether there is such a run.
func (s *Server) Run(id int64) (RunState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return RunState{}, false
	}
	return RunState{ID: r.id, RunNumber: r.number, Name: r.name, Ref: r.ref, Inputs: cloneMap(r.inputs),
		Status: r.status, Conclusion: r.conclusion, Cancelled: r.cancelled, Polls: r.polls}, true
}

// Cancelled returns the ids of the runs cancelled through the API, in order.
func (s *Server) Cancelled() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cancelled)
}

// Finish completes the run id now with conclusion, as if its jobs ended;
// it is how a run scripted with Never ends without being cancelled. It
// returns false when there is no such run or it already completed.
func (s *Server) Finish(id int64, conclusion string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.status == "completed" {
		return false
	}
	if r.startedAt.IsZero() {
		r.startedAt = s.opts.Now()
	}
	r.complete(s.opts.Now(), conclusion)
	return true
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
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
}

func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return reply{status: status, body: b}
}

// errorBody is GitHub's error shape.
func errorBody(message, docs string, status int) string {
	b, _ := json.Marshal(struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
		Status           string `json:"status"`
	}{message, docs, strconv.Itoa(status)})
	return string(b)
}

func errorReply(status int, message, docs string) reply {
	return reply{status: status, body: []byte(errorBody(message, docs, status))}
}

func notFound() reply { return errorReply(http.StatusNotFound, "Not Found", docsREST) }

// maxBody bounds the request bodies read.
const maxBody = 1 << 20

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, maxBody))
	rep, api, ok := s.answer(req, body)
	if !ok {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(),
			Body: string(body), Authorization: req.Header.Get("Authorization")})
		s.notify()
		s.mu.Unlock()
		return
	}

	h := w.Header()
	if api {
		s.mu.Lock()
		s.used++
		used := s.used
		s.mu.Unlock()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-GitHub-Media-Type", "github.v3; format=json")
		h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
		h.Set("X-GitHub-Request-Id", fmt.Sprintf("0000:%04X:%06X", used%0x10000, used))
		h.Set("X-RateLimit-Limit", strconv.Itoa(RateLimit))
		// Never 0 on a good answer: go-github would refuse every further
		// request until the reset.
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(RateLimit-used, 1)))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(s.started.Add(time.Hour).Unix(), 10))
		h.Set("X-RateLimit-Used", strconv.Itoa(min(used, RateLimit)))
		h.Set("X-RateLimit-Resource", "core")
	}
	for k, v := range rep.headers {
		h.Set(k, v)
	}

	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(),
		Body: string(body), Authorization: req.Header.Get("Authorization"), Status: rep.status})
	s.notify()
	s.mu.Unlock()

	if rep.status == http.StatusNoContent {
		h.Del("Content-Type")
		w.WriteHeader(rep.status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// answer builds the answer to req; api says whether it is an API answer
// (which carries the API's headers) rather than a download; ok is false
// when there is none to give (the request's context ended while a fault
// held it back).
func (s *Server) answer(req *http.Request, body []byte) (rep reply, api, ok bool) {
	isDownload := strings.HasPrefix(req.URL.Path, downloadPrefix)
	f, faulted := s.takeFault(req)
	if !faulted {
		rep, api = s.real(req, body)
		return rep, api, true
	}
	routed := false
	if f.Through {
		// The request takes effect now; its answer may wait.
		rep, api = s.real(req, body)
		routed = true
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
			return reply{}, false, false
		case <-s.done:
			return reply{}, false, false
		case <-timeout:
		}
	}
	switch {
	case f.Status != 0:
		return reply{status: f.Status, headers: f.Headers, body: []byte(f.Body)}, !isDownload, true
	case routed:
		return rep, api, true
	}
	rep, api = s.real(req, body)
	return rep, api, true
}

// real is the server's own answer to req.
func (s *Server) real(req *http.Request, body []byte) (reply, bool) {
	if strings.HasPrefix(req.URL.Path, downloadPrefix) {
		return s.download(req), false
	}
	if !s.authorized(req.Header.Get("Authorization")) {
		return errorReply(http.StatusUnauthorized, "Bad credentials", docsREST), true
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

func (s *Server) authorized(h string) bool {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "token")) {
		return false
	}
	return strings.TrimSpace(tok) == s.opts.Token
}

// base is the API's base URL as the client addresses it, without a
// trailing slash.
func (s *Server) base(enterprise bool) string {
	if enterprise {
		return s.URL + "/api/v3"
	}
	return s.URL
}

const htmlBase = "https://github.com"

// route dispatches an authenticated API request.
func (s *Server) route(req *http.Request, body []byte) reply {
	p := req.URL.Path
	enterprise := false
	if rest, ok := strings.CutPrefix(p, "/api/v3/"); ok {
		p, enterprise = "/"+rest, true
	}
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if len(seg) >= 4 && seg[0] == "repos" && seg[3] != "actions" {
		return s.routePulls(req, body, enterprise, seg)
	}
	// repos/{owner}/{repo}/actions/...
	if len(seg) < 5 || seg[0] != "repos" || seg[3] != "actions" {
		return notFound()
	}
	if !strings.EqualFold(seg[1], s.opts.Owner) || !strings.EqualFold(seg[2], s.opts.Repo) {
		return notFound()
	}
	seg = seg[4:]
	base := s.base(enterprise)
	get, post := req.Method == http.MethodGet, req.Method == http.MethodPost
	switch {
	case seg[0] == "workflows" && len(seg) >= 2:
		if seg[1] != s.opts.Workflow && seg[1] != strconv.FormatInt(s.opts.WorkflowID, 10) {
			return notFound()
		}
		switch {
		case len(seg) == 2 && get:
			return s.workflow(base)
		case len(seg) == 3 && seg[2] == "dispatches" && post:
			return s.dispatch(base, body)
		case len(seg) == 3 && seg[2] == "runs" && get:
			return s.listRuns(req, base)
		}
	case seg[0] == "runs" && len(seg) >= 2:
		id, err := strconv.ParseInt(seg[1], 10, 64)
		if err != nil {
			return notFound()
		}
		switch {
		case len(seg) == 2 && get:
			return s.getRun(base, id)
		case len(seg) == 3 && seg[2] == "jobs" && get:
			return s.listJobs(req, base, id)
		case len(seg) == 3 && seg[2] == "artifacts" && get:
			return s.listArtifacts(req, base, id)
		case len(seg) == 3 && seg[2] == "cancel" && post:
			return s.cancel(id)
		}
	case seg[0] == "artifacts" && len(seg) == 3 && seg[2] == "zip" && get:
		id, err := strconv.ParseInt(seg[1], 10, 64)
		if err != nil {
			return notFound()
		}
		return s.artifactZip(id)
	}
	return notFound()
}

func (s *Server) repoPath() string { return "/repos/" + s.opts.Owner + "/" + s.opts.Repo }

func (s *Server) workflow(base string) reply {
	id := s.opts.WorkflowID
	ts := formatTime(s.started.Add(-30 * 24 * time.Hour))
	return jsonReply(http.StatusOK, map[string]any{
		"id":         id,
		"node_id":    nodeID("W_", id),
		"name":       strings.TrimSuffix(strings.TrimSuffix(s.opts.Workflow, ".yml"), ".yaml"),
		"path":       ".github/workflows/" + s.opts.Workflow,
		"state":      "active",
		"created_at": ts,
		"updated_at": ts,
		"url":        fmt.Sprintf("%s%s/actions/workflows/%d", base, s.repoPath(), id),
		"html_url":   fmt.Sprintf("%s/%s/%s/blob/main/.github/workflows/%s", htmlBase, s.opts.Owner, s.opts.Repo, s.opts.Workflow),
		"badge_url":  fmt.Sprintf("%s/%s/%s/workflows/%s/badge.svg", htmlBase, s.opts.Owner, s.opts.Repo, s.opts.Workflow),
	})
}

// dispatch creates a workflow_dispatch event, and its run.
func (s *Server) dispatch(base string, body []byte) reply {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return errorReply(http.StatusBadRequest, "Problems parsing JSON", docsDispatch)
	}
	invalid := func(detail string) reply {
		return errorReply(http.StatusUnprocessableEntity, "Invalid request.\n\n"+detail, docsDispatch)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "ref", "inputs":
		case "return_run_details":
			if !s.opts.ReturnRunDetails {
				return errorReply(http.StatusUnprocessableEntity,
					"Invalid request.\n\n\"return_run_details\" is not a permitted key.", docsDispatchGHES)
			}
		default:
			return invalid(fmt.Sprintf("%q is not a permitted key.", k))
		}
	}
	var ref string
	if r, ok := raw["ref"]; !ok || string(r) == "null" {
		return invalid(`"ref" wasn't supplied.`)
	} else if err := json.Unmarshal(r, &ref); err != nil {
		return invalid(fmt.Sprintf("For 'properties/ref', %s is not a string.", r))
	}
	if ref == "" {
		return errorReply(http.StatusUnprocessableEntity, "No ref found for: ", docsDispatch)
	}
	inputs := map[string]string{}
	if in, ok := raw["inputs"]; ok && string(in) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in, &obj); err != nil {
			return invalid(fmt.Sprintf("For 'properties/inputs', %s is not an object.", in))
		}
		if len(obj) > MaxInputs {
			return invalid(fmt.Sprintf("For 'properties/inputs', No more than %d properties are allowed; %d were supplied.", MaxInputs, len(obj)))
		}
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			var v string
			if err := json.Unmarshal(obj[k], &v); err != nil || string(obj[k]) == "null" {
				return invalid(fmt.Sprintf("For 'properties/%s', %s is not a string.", k, obj[k]))
			}
			inputs[k] = v
		}
	}
	details := false
	if d, ok := raw["return_run_details"]; ok {
		if err := json.Unmarshal(d, &details); err != nil {
			return invalid(fmt.Sprintf("For 'properties/return_run_details', %s is not a boolean.", d))
		}
	}

	s.mu.Lock()
	s.nextRun++
	s.runNumber++
	id, number := s.nextRun, s.runNumber
	s.mu.Unlock()
	at := s.opts.Now().UTC().Truncate(time.Second)
	d := Dispatch{Ref: ref, Inputs: cloneMap(inputs), RunID: id, At: at}
	// The options' functions run outside the lock, so that they may call
	// the server.
	script := s.opts.Script(d)
	if script.Conclusion == "" {
		script.Conclusion = "success"
	}
	name := s.opts.RunName(cloneMap(inputs))
	zips := make([][]byte, len(script.Artifacts))
	for i, a := range script.Artifacts {
		zips[i] = zipOf(a.Files)
	}

	s.mu.Lock()
	r := &run{id: id, number: number, ref: ref, name: name, inputs: inputs, script: script,
		createdAt: at, updatedAt: at, listSeq: s.lists, status: "queued"}
	for range script.Jobs {
		s.nextJob++
		r.jobIDs = append(r.jobIDs, s.nextJob)
	}
	for i, a := range script.Artifacts {
		s.nextArt++
		art := &artifact{id: s.nextArt, runID: id, name: a.Name, zip: zips[i], token: randomToken()}
		r.artifacts = append(r.artifacts, art)
		s.artifacts[art.id] = art
	}
	s.runs[id] = r
	s.order = append(s.order, id)
	s.dispatches = append(s.dispatches, d)
	s.notify()
	s.mu.Unlock()

	if !details {
		return reply{status: http.StatusNoContent}
	}
	return jsonReply(http.StatusOK, map[string]any{
		"workflow_run_id": id,
		"run_url":         fmt.Sprintf("%s%s/actions/runs/%d", base, s.repoPath(), id),
		"html_url":        s.runHTML(id),
	})
}

func randomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// zipOf archives files, in name order.
func zipOf(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.Create(n)
		if err == nil {
			_, err = w.Write(files[n])
		}
		if err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func (s *Server) runHTML(id int64) string {
	return fmt.Sprintf("%s/%s/%s/actions/runs/%d", htmlBase, s.opts.Owner, s.opts.Repo, id)
}

// advance moves the run on by one read of the run object.
func (s *Server) advance(r *run) {
	r.polls++
	if r.status == "completed" {
		return
	}
	now := s.opts.Now().UTC().Truncate(time.Second)
	if r.cancelling > 0 {
		// A cancel was requested: the run stands still until it completes.
		if r.cancelling--; r.cancelling == 0 {
			r.cancelNow(now)
		}
		return
	}
	if !r.script.Never && r.polls > r.script.Polls {
		if r.startedAt.IsZero() {
			r.startedAt = now
		}
		r.complete(now, r.script.Conclusion)
		return
	}
	if r.polls >= 2 && r.status == "queued" {
		r.status, r.startedAt, r.updatedAt = "in_progress", now, now
	}
}

// complete ends the run with conclusion, by its jobs.
func (r *run) complete(now time.Time, conclusion string) {
	r.status, r.conclusion, r.completedAt, r.updatedAt = "completed", conclusion, now, now
}

// cancelNow ends the run as cancelled through the API.
func (r *run) cancelNow(now time.Time) {
	r.status, r.conclusion, r.cancelled, r.completedAt, r.updatedAt = "completed", "cancelled", true, now, now
}

func (s *Server) getRun(base string, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return notFound()
	}
	s.advance(r)
	return jsonReply(http.StatusOK, s.runJSON(base, r))
}

type userJSON struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type repoJSON struct {
	ID       int64    `json:"id"`
	NodeID   string   `json:"node_id"`
	Name     string   `json:"name"`
	FullName string   `json:"full_name"`
	Private  bool     `json:"private"`
	Owner    userJSON `json:"owner"`
	HTMLURL  string   `json:"html_url"`
	URL      string   `json:"url"`
}

type runJSON struct {
	ID              int64    `json:"id"`
	Name            string   `json:"name"`
	NodeID          string   `json:"node_id"`
	HeadBranch      string   `json:"head_branch"`
	HeadSHA         string   `json:"head_sha"`
	Path            string   `json:"path"`
	DisplayTitle    string   `json:"display_title"`
	RunNumber       int64    `json:"run_number"`
	Event           string   `json:"event"`
	Status          string   `json:"status"`
	Conclusion      *string  `json:"conclusion"`
	WorkflowID      int64    `json:"workflow_id"`
	CheckSuiteID    int64    `json:"check_suite_id"`
	URL             string   `json:"url"`
	HTMLURL         string   `json:"html_url"`
	PullRequests    []any    `json:"pull_requests"`
	CreatedAt       string   `json:"created_at"`
	UpdatedAt       string   `json:"updated_at"`
	Actor           userJSON `json:"actor"`
	RunAttempt      int      `json:"run_attempt"`
	RunStartedAt    string   `json:"run_started_at"`
	TriggeringActor userJSON `json:"triggering_actor"`
	JobsURL         string   `json:"jobs_url"`
	LogsURL         string   `json:"logs_url"`
	CheckSuiteURL   string   `json:"check_suite_url"`
	ArtifactsURL    string   `json:"artifacts_url"`
	CancelURL       string   `json:"cancel_url"`
	RerunURL        string   `json:"rerun_url"`
	PreviousAttempt *string  `json:"previous_attempt_url"`
	WorkflowURL     string   `json:"workflow_url"`
	Repository      repoJSON `json:"repository"`
	HeadRepository  repoJSON `json:"head_repository"`
}

var actor = userJSON{Login: "no8s-bot", ID: 1, Type: "User"}

func (s *Server) repoJSON(base string) repoJSON {
	full := s.opts.Owner + "/" + s.opts.Repo
	return repoJSON{ID: 700000001, NodeID: nodeID("R_", 700000001), Name: s.opts.Repo, FullName: full,
		Private: true, Owner: userJSON{Login: s.opts.Owner, ID: 2, Type: "Organization"},
		HTMLURL: htmlBase + "/" + full, URL: base + "/repos/" + full}
}

func (s *Server) runJSON(base string, r *run) runJSON {
	u := fmt.Sprintf("%s%s/actions/runs/%d", base, s.repoPath(), r.id)
	started := r.startedAt
	if started.IsZero() {
		started = r.createdAt
	}
	checkSuite := r.id + 20_000_000_000
	return runJSON{
		ID: r.id, Name: r.name, NodeID: nodeID("WFR_", r.id), HeadBranch: headBranch(r.ref), HeadSHA: headSHA(r.ref),
		Path: ".github/workflows/" + s.opts.Workflow, DisplayTitle: r.name, RunNumber: r.number,
		Event: "workflow_dispatch", Status: r.status, Conclusion: nullable(r.conclusion), WorkflowID: s.opts.WorkflowID,
		CheckSuiteID: checkSuite, URL: u, HTMLURL: s.runHTML(r.id), PullRequests: []any{},
		CreatedAt: formatTime(r.createdAt), UpdatedAt: formatTime(r.updatedAt), Actor: actor, RunAttempt: 1,
		RunStartedAt: formatTime(started), TriggeringActor: actor, JobsURL: u + "/jobs", LogsURL: u + "/logs",
		CheckSuiteURL: fmt.Sprintf("%s%s/check-suites/%d", base, s.repoPath(), checkSuite),
		ArtifactsURL:  u + "/artifacts", CancelURL: u + "/cancel", RerunURL: u + "/rerun",
		WorkflowURL: fmt.Sprintf("%s%s/actions/workflows/%d", base, s.repoPath(), s.opts.WorkflowID),
		Repository:  s.repoJSON(base), HeadRepository: s.repoJSON(base),
	}
}

// headBranch is the branch or tag name of ref, as GitHub shows it.
func headBranch(ref string) string {
	for _, p := range []string{"refs/heads/", "refs/tags/"} {
		if rest, ok := strings.CutPrefix(ref, p); ok {
			return rest
		}
	}
	return ref
}

// headSHA is a stable commit id for ref.
func headSHA(ref string) string {
	sum := sha1.Sum([]byte(headBranch(ref)))
	return hex.EncodeToString(sum[:])
}

// nodeID is a GraphQL node id of the given kind.
func nodeID(prefix string, id int64) string {
	return prefix + strings.ToUpper(strconv.FormatInt(id, 36))
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func nullableTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return nullable(formatTime(t))
}

// listRuns lists the workflow's runs, newest first.
func (s *Server) listRuns(req *http.Request, base string) reply {
	q := req.URL.Query()
	created, ok := parseCreated(q.Get("created"))
	if !ok {
		return errorReply(http.StatusUnprocessableEntity, "Validation Failed: invalid created filter "+strconv.Quote(q.Get("created")), docsRuns)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	var out []runJSON
	for i := len(s.order) - 1; i >= 0; i-- {
		r := s.runs[s.order[i]]
		if s.lists-r.listSeq <= s.opts.ListDelay {
			continue
		}
		if e := q.Get("event"); e != "" && e != "workflow_dispatch" {
			continue
		}
		if b := q.Get("branch"); b != "" && b != headBranch(r.ref) {
			continue
		}
		if st := q.Get("status"); st != "" && st != r.status && st != r.conclusion {
			continue
		}
		if sha := q.Get("head_sha"); sha != "" && sha != headSHA(r.ref) {
			continue
		}
		if a := q.Get("actor"); a != "" && a != actor.Login {
			continue
		}
		if !created(r.createdAt) {
			continue
		}
		out = append(out, s.runJSON(base, r))
	}
	page, link := s.paginate(req, len(out))
	rep := jsonReply(http.StatusOK, map[string]any{"total_count": len(out), "workflow_runs": nonNil(out[page.from:page.to])})
	rep.headers = link
	return rep
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// parseCreated reads the created filter of GitHub's search syntax:
// >=T, >T, <=T, <T, A..B (either side may be *), or a date or time alone.
func parseCreated(v string) (func(time.Time) bool, bool) {
	if v == "" {
		return func(time.Time) bool { return true }, true
	}
	parse := func(s string) (time.Time, bool, bool) { // time, date only, ok
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t.Truncate(time.Second), false, true
		}
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			return t, true, true
		}
		return time.Time{}, false, false
	}
	for _, op := range []string{">=", "<=", ">", "<"} {
		rest, ok := strings.CutPrefix(v, op)
		if !ok {
			continue
		}
		t, dateOnly, ok := parse(rest)
		if !ok {
			return nil, false
		}
		end := t // the first instant after the day or second
		if dateOnly {
			end = t.AddDate(0, 0, 1)
		} else {
			end = t.Add(time.Second)
		}
		switch op {
		case ">=":
			return func(c time.Time) bool { return !c.Before(t) }, true
		case ">":
			return func(c time.Time) bool { return !c.Before(end) }, true
		case "<=":
			return func(c time.Time) bool { return c.Before(end) }, true
		default:
			return func(c time.Time) bool { return c.Before(t) }, true
		}
	}
	if lo, hi, ok := strings.Cut(v, ".."); ok {
		from, to := time.Time{}, time.Time{}
		if lo != "*" {
			t, _, ok := parse(lo)
			if !ok {
				return nil, false
			}
			from = t
		}
		if hi != "*" {
			t, dateOnly, ok := parse(hi)
			if !ok {
				return nil, false
			}
			if dateOnly {
				to = t.AddDate(0, 0, 1)
			} else {
				to = t.Add(time.Second)
			}
		}
		return func(c time.Time) bool { return !c.Before(from) && (to.IsZero() || c.Before(to)) }, true
	}
	t, dateOnly, ok := parse(v)
	if !ok {
		return nil, false
	}
	end := t.Add(time.Second)
	if dateOnly {
		end = t.AddDate(0, 0, 1)
	}
	return func(c time.Time) bool { return !c.Before(t) && c.Before(end) }, true
}

type window struct{ from, to int }

// paginate reads per_page (30 by default, at most 100) and page, and
// returns the window of n items and GitHub's Link header.
func (s *Server) paginate(req *http.Request, n int) (window, map[string]string) {
	q := req.URL.Query()
	per := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	page := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	last := max((n+per-1)/per, 1)
	from := min((page-1)*per, n)
	to := min(from+per, n)
	link := func(p int, rel string) string {
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		return fmt.Sprintf("<%s%s?%s>; rel=%q", s.URL, req.URL.Path, q.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(min(page-1, last), "prev"))
	}
	if len(links) == 0 {
		return window{from, to}, nil
	}
	return window{from, to}, map[string]string{"Link": strings.Join(links, ", ")}
}

type stepJSON struct {
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	Number      int     `json:"number"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
}

type jobJSON struct {
	ID              int64      `json:"id"`
	RunID           int64      `json:"run_id"`
	WorkflowName    string     `json:"workflow_name"`
	HeadBranch      string     `json:"head_branch"`
	RunURL          string     `json:"run_url"`
	RunAttempt      int        `json:"run_attempt"`
	NodeID          string     `json:"node_id"`
	HeadSHA         string     `json:"head_sha"`
	URL             string     `json:"url"`
	HTMLURL         string     `json:"html_url"`
	Status          string     `json:"status"`
	Conclusion      *string    `json:"conclusion"`
	CreatedAt       string     `json:"created_at"`
	StartedAt       *string    `json:"started_at"`
	CompletedAt     *string    `json:"completed_at"`
	Name            string     `json:"name"`
	Steps           []stepJSON `json:"steps"`
	CheckRunURL     string     `json:"check_run_url"`
	Labels          []string   `json:"labels"`
	RunnerID        *int64     `json:"runner_id"`
	RunnerName      *string    `json:"runner_name"`
	RunnerGroupID   *int64     `json:"runner_group_id"`
	RunnerGroupName *string    `json:"runner_group_name"`
}

// jobsOf shows the run's jobs as its state has them: while queued all are
// queued; in progress the first job runs its first step and the rest wait;
// completed, each has its conclusion; cancelled, the running job and step
// are cancelled and the rest skipped.
func (s *Server) jobsOf(base string, r *run) []jobJSON {
	runURL := fmt.Sprintf("%s%s/actions/runs/%d", base, s.repoPath(), r.id)
	var out []jobJSON
	for i, j := range r.script.Jobs {
		id := r.jobIDs[i]
		jb := jobJSON{ID: id, RunID: r.id, WorkflowName: r.name, HeadBranch: headBranch(r.ref), RunURL: runURL, RunAttempt: 1,
			NodeID: nodeID("CR_", id), HeadSHA: headSHA(r.ref), URL: fmt.Sprintf("%s%s/actions/jobs/%d", base, s.repoPath(), id),
			HTMLURL:   fmt.Sprintf("%s/job/%d", s.runHTML(r.id), id),
			CreatedAt: formatTime(r.createdAt), Name: j.Name, Steps: []stepJSON{},
			CheckRunURL: fmt.Sprintf("%s%s/check-runs/%d", base, s.repoPath(), id), Labels: []string{"ubuntu-latest"}}
		started := !r.startedAt.IsZero()
		running := started && (r.status == "in_progress" || r.cancelled) && i == 0
		switch {
		case r.status != "completed" && running:
			jb.Status = "in_progress"
		case r.status != "completed":
			jb.Status = "queued"
		case r.cancelled:
			jb.Status, jb.Conclusion = "completed", nullable("cancelled")
		default:
			jb.Status, jb.Conclusion = "completed", nullable(cmp.Or(j.Conclusion, r.conclusion))
		}
		if started && (i == 0 || r.status == "completed" && !r.cancelled) {
			jb.StartedAt, jb.RunnerName = nullableTime(r.startedAt), nullable("GitHub Actions 1")
		}
		if r.status == "completed" {
			jb.CompletedAt = nullableTime(r.completedAt)
		}
		for k, name := range j.Steps {
			st := stepJSON{Name: name, Number: k + 1, Status: "queued"}
			switch {
			case r.status != "completed":
				if jb.Status == "in_progress" && k == 0 {
					st.Status, st.StartedAt = "in_progress", nullableTime(r.startedAt)
				}
			case r.cancelled:
				st.Status, st.Conclusion = "completed", nullable("skipped")
				if running && k == 0 {
					st.Conclusion, st.StartedAt, st.CompletedAt = nullable("cancelled"), nullableTime(r.startedAt), nullableTime(r.completedAt)
				}
			default:
				c := "success"
				if k == len(j.Steps)-1 {
					c = *jb.Conclusion
				}
				st.Status, st.Conclusion = "completed", nullable(c)
				st.StartedAt, st.CompletedAt = nullableTime(r.startedAt), nullableTime(r.completedAt)
			}
			jb.Steps = append(jb.Steps, st)
		}
		out = append(out, jb)
	}
	return out
}

func (s *Server) listJobs(req *http.Request, base string, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return notFound()
	}
	jobs := s.jobsOf(base, r)
	page, link := s.paginate(req, len(jobs))
	rep := jsonReply(http.StatusOK, map[string]any{"total_count": len(jobs), "jobs": nonNil(jobs[page.from:page.to])})
	rep.headers = link
	return rep
}

type artifactJSON struct {
	ID                 int64  `json:"id"`
	NodeID             string `json:"node_id"`
	Name               string `json:"name"`
	SizeInBytes        int64  `json:"size_in_bytes"`
	URL                string `json:"url"`
	ArchiveDownloadURL string `json:"archive_download_url"`
	Expired            bool   `json:"expired"`
	CreatedAt          string `json:"created_at"`
	UpdatedAt          string `json:"updated_at"`
	ExpiresAt          string `json:"expires_at"`
	WorkflowRun        struct {
		ID               int64  `json:"id"`
		RepositoryID     int64  `json:"repository_id"`
		HeadRepositoryID int64  `json:"head_repository_id"`
		HeadBranch       string `json:"head_branch"`
		HeadSHA          string `json:"head_sha"`
	} `json:"workflow_run"`
}

func (s *Server) listArtifacts(req *http.Request, base string, id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return notFound()
	}
	var arts []artifactJSON
	if r.status == "completed" && !r.cancelled {
		for _, a := range r.artifacts {
			u := fmt.Sprintf("%s%s/actions/artifacts/%d", base, s.repoPath(), a.id)
			aj := artifactJSON{ID: a.id, NodeID: nodeID("MDg6QXJ0aWZhY3Q", a.id), Name: a.name, SizeInBytes: int64(len(a.zip)),
				URL: u, ArchiveDownloadURL: u + "/zip", CreatedAt: formatTime(r.completedAt), UpdatedAt: formatTime(r.completedAt),
				ExpiresAt: formatTime(r.completedAt.AddDate(0, 0, 90))}
			aj.WorkflowRun.ID, aj.WorkflowRun.RepositoryID, aj.WorkflowRun.HeadRepositoryID = r.id, 700000001, 700000001
			aj.WorkflowRun.HeadBranch, aj.WorkflowRun.HeadSHA = headBranch(r.ref), headSHA(r.ref)
			arts = append(arts, aj)
		}
	}
	page, link := s.paginate(req, len(arts))
	rep := jsonReply(http.StatusOK, map[string]any{"total_count": len(arts), "artifacts": nonNil(arts[page.from:page.to])})
	rep.headers = link
	return rep
}

// downloadPrefix is where artifacts download from, by a signed URL that
// needs no Authorization header, like GitHub's blob storage.
const downloadPrefix = "/_downloads/"

// artifactZip redirects to the artifact's signed download URL.
func (s *Server) artifactZip(id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.artifacts[id]
	if !ok || s.runs[a.runID].status != "completed" || s.runs[a.runID].cancelled {
		return notFound()
	}
	loc := fmt.Sprintf("%s%sartifact-%d.zip?token=%s", s.URL, downloadPrefix, a.id, a.token)
	return reply{status: http.StatusFound, headers: map[string]string{"Location": loc}}
}

// download serves an artifact's archive to a request with its token.
func (s *Server) download(req *http.Request) reply {
	name := strings.TrimPrefix(req.URL.Path, downloadPrefix)
	var id int64
	if n, err := fmt.Sscanf(name, "artifact-%d.zip", &id); n != 1 || err != nil || name != fmt.Sprintf("artifact-%d.zip", id) {
		return reply{status: http.StatusNotFound, headers: map[string]string{"Content-Type": "text/plain"}, body: []byte("not found\n")}
	}
	s.mu.Lock()
	a, ok := s.artifacts[id]
	s.mu.Unlock()
	if !ok || req.Method != http.MethodGet {
		return reply{status: http.StatusNotFound, headers: map[string]string{"Content-Type": "text/plain"}, body: []byte("not found\n")}
	}
	if req.URL.Query().Get("token") != a.token {
		return reply{status: http.StatusForbidden, headers: map[string]string{"Content-Type": "application/xml"},
			body: []byte(`<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request.</Message></Error>`)}
	}
	return reply{status: http.StatusOK, headers: map[string]string{"Content-Type": "application/zip",
		"Content-Disposition": fmt.Sprintf("attachment; filename=%s.zip", a.name)}, body: a.zip}
}

// cancel cancels a run that has not completed.
func (s *Server) cancel(id int64) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return notFound()
	}
	if r.status == "completed" {
		return errorReply(http.StatusConflict, "Cannot cancel a workflow run that is completed.", docsCancel)
	}
	if r.cancelling > 0 {
		return jsonReply(http.StatusAccepted, struct{}{})
	}
	s.cancelled = append(s.cancelled, id)
	if s.opts.CancelPolls > 0 {
		r.cancelling = s.opts.CancelPolls
		return jsonReply(http.StatusAccepted, struct{}{})
	}
	r.cancelNow(s.opts.Now().UTC().Truncate(time.Second))
	return jsonReply(http.StatusAccepted, struct{}{})
}
