package preview_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// statesOf lists the states of the statuses on sha, oldest first.
func (f *fixture) statesOf(sha string) string {
	var out []string
	for _, s := range f.gh.Statuses(sha) {
		out = append(out, s.State)
	}
	return strings.Join(out, " ")
}

// waitFor waits up to 30s for cond, failing with what state says.
func waitFor(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("waiting for %s: %s", what, state())
		case <-tick.C:
		}
	}
}

// run runs f's Previewer until the test ends.
func (f *fixture) run() {
	ctx, cancel := context.WithCancel(f.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.p.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// TestPreviewThatCannotBeMade: a pull request whose head cannot be
// cloned gets no8s/plan pending once, however many attempts; after the
// last one, error saying why; the slow poll tries again without posting
// pending again, and once the clone works the preview's success replaces
// the error.
func TestPreviewThatCannotBeMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	var broken atomic.Bool
	var fetches atomic.Int64
	broken.Store(true)
	pullCache := t.TempDir()
	missing := "file://" + filepath.Join(t.TempDir(), "no-such-repo")
	f.src.Fetch = func(ctx context.Context, n int) (*source.Snapshot, error) {
		fetches.Add(1)
		url := f.repo.URL()
		if broken.Load() {
			url = missing
		}
		s, err := git.New(git.Config{Name: "infra", URL: url, CacheDir: pullCache, Ref: git.Ref{PullRequest: n}})
		if err != nil {
			return nil, err
		}
		return s.Fetch(ctx)
	}
	f.src.Interval = 50 * time.Millisecond
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{f.src},
		Attempts: 3, Backoff: time.Millisecond})
	sha := f.push(6, map[string]string{"dbs/a.yaml": db("a", 150)})
	f.run()

	waitFor(t, "the error status", func() bool { return strings.Contains(f.statesOf(sha), "error") },
		func() string { return fmt.Sprintf("statuses %q after %d fetches", f.statesOf(sha), fetches.Load()) })
	if got := f.statesOf(sha); got != "pending error" {
		t.Errorf("statuses after three failed attempts: %q, want pending once then error", got)
	}
	ss := f.gh.Statuses(sha)
	if d := ss[len(ss)-1].Description; !strings.HasPrefix(d, "preview failed after 3 attempts: fetch pull request #6: ") || len([]rune(d)) > 140 {
		t.Errorf("error description %q: want the attempts and the reason, at most 140 characters", d)
	}
	// The slow poll tries again, quietly.
	seen := fetches.Load()
	waitFor(t, "two more attempts by the slow poll", func() bool { return fetches.Load() >= seen+2 },
		func() string { return fmt.Sprintf("%d fetches", fetches.Load()) })
	if got := f.statesOf(sha); got != "pending error" {
		t.Errorf("statuses after the slow poll's attempts: %q, want pending error", got)
	}

	broken.Store(false)
	waitFor(t, "the success status", func() bool { return strings.HasSuffix(f.statesOf(sha), "success") },
		func() string { return fmt.Sprintf("statuses %q", f.statesOf(sha)) })
	if got := f.statesOf(sha); got != "pending error success" {
		t.Errorf("statuses: %q, want pending error success", got)
	}
	f.only(6)

	// A new push starts over: pending once, then its outcome.
	sha2 := f.push(6, map[string]string{"dbs/a.yaml": db("a", 160)})
	waitFor(t, "the new head's success", func() bool { return strings.HasSuffix(f.statesOf(sha2), "success") },
		func() string { return fmt.Sprintf("statuses %q", f.statesOf(sha2)) })
	if got := f.statesOf(sha2); got != "pending success" {
		t.Errorf("statuses of the new head: %q", got)
	}
}

// TestPreviewPlanFails: a plan that fails for want of the store (not a
// refusal of the change) ends in error after the attempts, with pending
// posted once.
func TestPreviewPlanFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	down, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	down.Close()
	f.p = preview.New(preview.Options{Store: f.st, Syncer: sync.New(down, nil), Actions: actions{}, Sources: []*preview.Source{f.src},
		Attempts: 2, Backoff: time.Millisecond})
	sha := f.push(7, map[string]string{"dbs/b.yaml": db("b", 250)})
	f.run()
	waitFor(t, "the error status", func() bool { return strings.Contains(f.statesOf(sha), "error") },
		func() string { return fmt.Sprintf("statuses %q", f.statesOf(sha)) })
	ss := f.gh.Statuses(sha)
	if got := f.statesOf(sha); got != "pending error" ||
		!strings.HasPrefix(ss[len(ss)-1].Description, "preview failed after 2 attempts: plan pull request #7: ") {
		t.Errorf("statuses %q, last %+v", got, ss[len(ss)-1])
	}
}
