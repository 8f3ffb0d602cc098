// Package preview previews pull requests (merge requests on GitLab): for
// each open pull request against a Git source's branch, it fetches the pull
// request's head, runs the sync's validation, planning and prune guard
// without applying anything, asks the actions that can plan what they would
// change, and reports on the Git host: a commit status no8s/plan on the head
// commit and one comment per pull request, found again by a hidden marker
// and edited in place on every push.
//
// Previews run beside syncing and never hold it up: they read the store,
// never write it, and a Git host that fails is retried later. What differs
// between GitHub and GitLab stands behind Host.
package preview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	gosync "sync"
	"time"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// StatusContext is the commit status previews set.
const StatusContext = "no8s/plan"

// Limits of what one preview does and says.
const (
	// maxActionPlans bounds the plans asked of actions per preview.
	maxActionPlans = 20
	// planTimeout bounds one action's Plan.
	planTimeout = 2 * time.Minute
	// maxDescription is GitHub's limit on a status description; GitLab's
	// is larger, but a status line is read at a glance.
	maxDescription = 140
)

// Commit states a preview reports, in GitHub's words; a Host maps them to
// its own.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// Host is the Git host of a source's pull requests: it lists them and takes
// the preview's commit status and comment. Its calls retry what is worth
// retrying; an error they return fails the attempt.
type Host interface {
	// Open lists the pull requests open against branch.
	Open(ctx context.Context, branch string) ([]Pull, error)
	// SetStatus sets the commit status StatusContext on sha to state (one
	// of the State constants) with desc.
	SetStatus(ctx context.Context, sha, state, desc string) error
	// Comment makes body the text of the pull request's one comment that
	// starts with marker, creating it the first time.
	Comment(ctx context.Context, number int, marker, body string) error
	// MaxComment is the longest comment the host takes, in bytes.
	MaxComment() int
	// Name names a pull request as the host's users do: "pull request #7",
	// "merge request !7".
	Name(number int) string
}

// Pull is an open pull request.
type Pull struct {
	Number  int
	HeadSHA string
	BaseRef string
}

// Source is a Git source whose pull requests are previewed.
type Source struct {
	// Target is the source as synced.
	Target sync.Target
	// Branch is the branch the source follows: pull requests against it
	// are previewed.
	Branch string
	// Host is where the pull requests live and the preview is reported.
	Host Host
	// DashboardURL is the agent's dashboard as people reach it: a comment
	// cut to the host's limit points to the source's page there.
	DashboardURL string
	// Fetch returns the snapshot of a pull request's head.
	Fetch func(ctx context.Context, number int) (*source.Snapshot, error)
	// Interval is how often open pull requests are listed, in case a
	// webhook was missed; zero lists them only at start.
	Interval time.Duration
}

// Actions finds action instances by name.
type Actions interface {
	Get(name string) (action.Instance, bool)
}

// Options configure a Previewer.
type Options struct {
	// Store is read to wait for a source's first sync: a preview against
	// a store that holds nothing of the source yet would show everything
	// as new.
	Store   store.Store
	Syncer  *sync.Syncer
	Actions Actions
	Sources []*Source
	Logger  *slog.Logger
	// Masker masks secret values in every comment and commit status: the
	// plan, the refusal and the actions' plans are masked before they are
	// rendered (plans quote what actions answered, specs may quote a
	// secret), so that no escaping or cutting of the comment leaves a form
	// or a piece of a secret the Masker does not know; the rendered text is
	// masked again before it is sent. Nil masks nothing.
	Masker *redact.Masker
	// Attempts is how many times a pull request's head is tried before its
	// preview ends in an error status that says why; zero means
	// DefaultAttempts. The slow poll (Source.Interval) tries it again, and
	// a later success replaces the error.
	Attempts int
	// Backoff is the wait after a failed attempt, times the failures in a
	// row, up to a minute; zero means 5s.
	Backoff time.Duration
}

// DefaultAttempts is how many times a preview is tried before it ends in
// an error status.
const DefaultAttempts = 5

// Previewer previews the pull requests of its sources. It is safe for
// concurrent use; Run must be running for requests to be served.
type Previewer struct {
	opts    Options
	log     *slog.Logger
	sources map[string]*worker
}

// worker previews one source's pull requests, one at a time.
type worker struct {
	src  *Source
	wake chan struct{}

	mu gosync.Mutex
	// pending are the pull requests to preview, by number.
	pending map[int]Pull
	// done is the head commit each open pull request was last previewed at.
	done map[int]string
	// tries are, by pull request, the attempts at its head commit.
	tries map[int]*tries
}

// tries are the attempts at previewing one head commit.
type tries struct {
	head string
	// pending is set once the pending status is posted on head: it is
	// posted once per head commit, not at every attempt.
	pending bool
	// failures counts the failed attempts in a row.
	failures int
	// failed is set once the preview ended in an error status; the slow
	// poll tries it again, quietly, until it succeeds.
	failed bool
}

// New returns a Previewer.
func New(opts Options) *Previewer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Attempts <= 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 5 * time.Second
	}
	p := &Previewer{opts: opts, log: opts.Logger, sources: map[string]*worker{}}
	for _, s := range opts.Sources {
		p.sources[s.Target.Name] = &worker{src: s, wake: make(chan struct{}, 1), pending: map[int]Pull{}, done: map[int]string{},
			tries: map[int]*tries{}}
	}
	return p
}

// Run previews until ctx is done: a worker per source serves requests and
// lists the open pull requests every Interval.
func (p *Previewer) Run(ctx context.Context) {
	var wg gosync.WaitGroup
	for _, w := range p.sources {
		wg.Go(func() { p.serve(ctx, w) })
	}
	wg.Wait()
}

// Request asks for a preview of a pull request of the named source. It
// reports whether the source has previews.
func (p *Previewer) Request(sourceName string, pull Pull) bool {
	w := p.sources[sourceName]
	if w == nil {
		return false
	}
	w.mu.Lock()
	w.pending[pull.Number] = pull
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// Forget stops previewing a closed pull request.
func (p *Previewer) Forget(sourceName string, number int) {
	if w := p.sources[sourceName]; w != nil {
		w.mu.Lock()
		delete(w.pending, number)
		delete(w.done, number)
		delete(w.tries, number)
		w.mu.Unlock()
	}
}

// serve previews one source's pull requests as they are asked for, and
// lists the open ones at start and every Interval.
func (p *Previewer) serve(ctx context.Context, w *worker) {
	log := p.log.With("source", w.src.Target.Name)
	poll := time.NewTimer(0)
	defer poll.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if err := p.listOpen(ctx, w); err != nil && ctx.Err() == nil {
				log.Warn("listing open pull requests failed", "error", err)
			}
			if w.src.Interval > 0 {
				poll.Reset(w.src.Interval)
			}
		case <-w.wake:
		}
		for ctx.Err() == nil {
			pull, ok := w.next()
			if !ok {
				break
			}
			tr := w.triesOf(pull)
			posted, err := p.preview(ctx, w.src, pull, !tr.pending)
			if posted {
				w.update(func() { tr.pending = true })
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, ErrNotSynced) {
					w.retry(pull)
					if githubapi.Sleep(ctx, time.Second) != nil {
						return
					}
					continue
				}
				failures++
				if p.failed(ctx, log, w, tr, pull, err) {
					continue
				}
				w.retry(pull)
				// Back off before the next attempt; a webhook may wake us sooner.
				if githubapi.Sleep(ctx, min(time.Duration(failures)*p.opts.Backoff, time.Minute)) != nil {
					return
				}
				continue
			}
			failures = 0
			w.update(func() { delete(w.tries, pull.Number) })
			w.finished(pull)
		}
	}
}

// failed counts a failed attempt at pull's head and reports whether the
// preview is over for now: after Attempts failures in a row it posts the
// error status, with the reason, and leaves the head to the slow poll;
// once it has, a failed attempt of the slow poll changes nothing on the
// host and waits for the next poll too.
func (p *Previewer) failed(ctx context.Context, log *slog.Logger, w *worker, tr *tries, pull Pull, err error) bool {
	var failures int
	var failed bool
	w.update(func() {
		tr.failures++
		failures, failed = tr.failures, tr.failed
	})
	switch {
	case failed:
		log.Warn("preview failed again; trying at the next poll", "pull", pull.Number, "error", err)
		w.finished(pull)
		return true
	case failures < p.opts.Attempts:
		log.Warn("preview failed; will retry", "pull", pull.Number, "error", err, "attempt", failures, "attempts", p.opts.Attempts)
		return false
	}
	desc := fmt.Sprintf("preview failed after %d attempts: %v", failures, err)
	if serr := p.status(ctx, w.src, pull.HeadSHA, StateError, desc); serr != nil {
		// The host itself fails: the error status is tried again with
		// the next attempt.
		log.Warn("preview failed; cannot post its error status either", "pull", pull.Number, "error", err, "status_error", serr)
		return false
	}
	log.Error("preview failed; gave up until the next poll", "pull", pull.Number, "error", err, "attempts", failures)
	w.update(func() { tr.failed = true })
	w.finished(pull)
	return true
}

// triesOf returns the attempts at pull's head, new ones when the pull
// request moved to another head.
func (w *worker) triesOf(pull Pull) *tries {
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := w.tries[pull.Number]
	if tr == nil || tr.head != pull.HeadSHA {
		tr = &tries{head: pull.HeadSHA}
		w.tries[pull.Number] = tr
	}
	return tr
}

// update runs f under the worker's lock.
func (w *worker) update(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

// next takes a pending pull request, in number order.
func (w *worker) next() (Pull, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := 0
	for n := range w.pending {
		if first == 0 || n < first {
			first = n
		}
	}
	if first == 0 {
		return Pull{}, false
	}
	pull := w.pending[first]
	delete(w.pending, first)
	return pull, true
}

// retry puts a failed preview back unless a newer push replaced it.
func (w *worker) retry(pull Pull) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, newer := w.pending[pull.Number]; !newer {
		w.pending[pull.Number] = pull
	}
}

func (w *worker) finished(pull Pull) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done[pull.Number] = pull.HeadSHA
}

// listOpen asks for the open pull requests against the source's branch
// and queues those whose head was not previewed yet. Pull requests no
// longer open are forgotten.
func (p *Previewer) listOpen(ctx context.Context, w *worker) error {
	open, err := w.src.Host.Open(ctx, w.src.Branch)
	if err != nil {
		return err
	}
	w.mu.Lock()
	seen := map[int]bool{}
	queued := false
	for _, pull := range open {
		n, head := pull.Number, pull.HeadSHA
		seen[n] = true
		tr := w.tries[n]
		if w.done[n] != head || (tr != nil && tr.head == head && tr.failed) {
			if _, ok := w.pending[n]; !ok {
				w.pending[n] = pull
				queued = true
			}
		}
	}
	for n := range w.done {
		if !seen[n] {
			delete(w.done, n)
		}
	}
	for n := range w.tries {
		if !seen[n] {
			delete(w.tries, n)
		}
	}
	w.mu.Unlock()
	if queued {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// ErrNotSynced is returned by Preview while the source's branch was never
// synced: the preview waits for it.
var ErrNotSynced = errors.New("the source's branch is not synced yet")

// Preview previews one pull request and reports on the host. It changes
// nothing in the store.
func (p *Previewer) Preview(ctx context.Context, src *Source, pull Pull) error {
	_, err := p.preview(ctx, src, pull, true)
	return err
}

// preview is Preview, posting the pending status first only when pending
// is set, and reporting whether it did.
func (p *Previewer) preview(ctx context.Context, src *Source, pull Pull, pending bool) (posted bool, err error) {
	if p.opts.Store != nil {
		cur, err := p.opts.Store.GetSource(ctx, src.Target.Name)
		if errors.Is(err, store.ErrNotFound) || (err == nil && cur.LastAppliedRevision == "") {
			return false, ErrNotSynced
		}
		if err != nil {
			return false, err
		}
	}
	if pending {
		if err := p.status(ctx, src, pull.HeadSHA, StatePending, "previewing"); err != nil {
			return false, err
		}
		posted = pull.HeadSHA != ""
	}
	return posted, p.report(ctx, src, pull)
}

// report fetches, plans and reports the preview of pull.
func (p *Previewer) report(ctx context.Context, src *Source, pull Pull) error {
	snap, err := src.Fetch(ctx, pull.Number)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", src.Host.Name(pull.Number), err)
	}
	plan, planErr := p.opts.Syncer.Plan(ctx, src.Target, snap)
	var refused *sync.Error
	if planErr != nil && !errors.As(planErr, &refused) {
		return fmt.Errorf("plan %s: %w", src.Host.Name(pull.Number), planErr)
	}
	plans := p.actionPlans(ctx, src, snap, plan)

	// Everything shown is masked before it is rendered: the comment escapes
	// HTML and Markdown, quotes JSON and cuts long values.
	m := p.opts.Masker
	plan, plans = redact.MaskValues(m, plan), redact.MaskValues(m, plans)
	if refused != nil {
		refused = redact.MaskValues(m, refused)
		planErr = refused
	}
	// The outcome goes on the commit planned: the pull request may have
	// moved on between the event that named its head and the fetch, and a
	// success on the commit named would vouch for manifests never planned.
	// That commit, if it was marked pending, is told it was superseded.
	head := revisionSHA(string(snap.Revision))
	if head == "" {
		head = pull.HeadSHA
	}
	if pull.HeadSHA != "" && head != pull.HeadSHA {
		if err := p.status(ctx, src, pull.HeadSHA, StateError, "superseded: "+short(head)+" was previewed instead"); err != nil {
			return err
		}
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "%s\n### no8s preview of `%s`\n\n%s at `%s`, against `%s`.\n\n",
		marker(src.Target.Name), src.Target.Name, capitalize(src.Host.Name(pull.Number)), short(head), src.Branch)
	if err := sync.WriteMarkdownIn(&body, src.Target.Path, plan, planErr, plans...); err != nil {
		return err
	}
	text := m.Mask(body.String())
	text = cutComment(text, src.Host.MaxComment(), src.DashboardURL, src.Target.Name)
	if err := src.Host.Comment(ctx, pull.Number, marker(src.Target.Name), text); err != nil {
		return err
	}
	state, desc := StateSuccess, "no changes"
	switch {
	case refused != nil:
		state, desc = StateFailure, refused.Reason+": "+refused.Message
	case plan != nil && (plan.Changes() > 0 || len(plan.Types) > 0):
		desc = plan.Summary()
	}
	if err := p.status(ctx, src, head, state, desc); err != nil {
		return err
	}
	p.log.Info("previewed "+src.Host.Name(pull.Number), "source", src.Target.Name, "pull", pull.Number, "head", short(head), "state", state)
	return nil
}

// actionPlans asks the actions that can plan what the changes would do.
func (p *Previewer) actionPlans(ctx context.Context, src *Source, snap *source.Snapshot, plan *sync.Plan) []sync.ActionPlan {
	if plan == nil || p.opts.Actions == nil {
		return nil
	}
	var out []sync.ActionPlan
	for _, c := range append(append([]sync.Change(nil), plan.Creates...), plan.Updates...) {
		name := c.Instance
		if name == "" {
			name = "noop"
		}
		inst, ok := p.opts.Actions.Get(name)
		if !ok {
			continue
		}
		planner, ok := inst.Action.(action.Planner)
		if !ok {
			continue
		}
		if len(out) == maxActionPlans {
			break
		}
		ap := sync.ActionPlan{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Instance: name}
		planCtx, cancel := context.WithTimeout(ctx, planTimeout)
		res, err := planner.Plan(planCtx, &action.Request{Operation: action.OperationPlan, Instance: name, Trigger: "preview",
			Reporter: action.NoopReporter{}, Resource: action.Resource{ID: c.ID, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Labels: c.Labels,
				Spec: c.After, PluginConfig: c.PluginConfig, Generation: c.Generation, Source: src.Target.Name,
				Revision: string(snap.Revision)}})
		cancel()
		if err != nil {
			ap.Error = err.Error()
		} else {
			ap.Changes, ap.Summary, ap.Output = res.Changes, res.Summary, res.Output
		}
		out = append(out, ap)
	}
	return out
}

// status sets the no8s/plan commit status, its description masked and cut.
func (p *Previewer) status(ctx context.Context, src *Source, sha, state, desc string) error {
	if sha == "" {
		return nil
	}
	return src.Host.SetStatus(ctx, sha, state, truncate(p.opts.Masker.Mask(desc), maxDescription))
}

// cutComment cuts text to at most limit bytes, between characters, and
// says where the rest is: the dashboard's page of the source when there is
// one, and the diff command.
func cutComment(text string, limit int, dashboardURL, sourceName string) string {
	if len(text) <= limit {
		return text
	}
	note := "\n\n*The preview is cut here: it is longer than a comment may be. `no8s-agent diff` shows all of it"
	if dashboardURL != "" {
		note += ", and so does the [dashboard](" + strings.TrimSuffix(dashboardURL, "/") + "/sources/" + url.PathEscape(sourceName) + ")"
	}
	note += ".*\n"
	cut := max(limit-len(note), 0)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + note
}

// marker starts the comment of a source's previews, so that it is found
// again; it is an HTML comment, invisible on GitHub.
func marker(sourceName string) string {
	return "<!-- no8s-preview source=" + sourceName + " -->"
}

// revisionSHA is the commit hash of a Git revision ("ref@sha1:<hex>", or
// "sha1:<hex>" for a commit fetched by no name).
func revisionSHA(rev string) string {
	if sha, ok := strings.CutPrefix(rev, "sha1:"); ok {
		return sha
	}
	_, sha, _ := strings.Cut(rev, "@sha1:")
	return sha
}

// capitalize upper-cases the first letter of an ASCII phrase.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
