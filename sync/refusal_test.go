package sync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/sync"
)

// TestSyncDefaultPruneLimit shows that a source without maxDeletes may
// delete sync.DefaultMaxDeletes resources or sync.DefaultMaxDeletesPercent
// of those it owns, whichever is larger, and no more without approval.
func TestSyncDefaultPruneLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		owned, deletes  int
		refused         bool
		limitInMessage  string
		approveRefusals bool
	}{
		{name: "ten of twelve: the count", owned: 12, deletes: 10},
		{name: "eleven of twelve", owned: 12, deletes: 11, refused: true, limitInMessage: "the default limit of 10 (10 or 25%"},
		{name: "fifteen of sixty: the percentage", owned: 60, deletes: 15},
		{name: "sixteen of sixty", owned: 60, deletes: 16, refused: true, limitInMessage: "the default limit of 15 (10 or 25%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			s := sync.New(st, nil)
			tg := target("infra") // prune enabled, maxDeletes unset
			files := map[string]string{"types.yaml": widgetType}
			for i := range tc.owned {
				files[fmt.Sprintf("w%02d.yaml", i)] = widget(fmt.Sprintf("w%02d", i), "{size: 1}")
			}
			mustSync(t, s, tg, snapshot(files))
			for i := range tc.deletes {
				delete(files, fmt.Sprintf("w%02d.yaml", i))
			}
			res, err := s.Sync(t.Context(), tg, snapshot(files), false)
			if !tc.refused {
				if err != nil || len(res.Plan.Deletes) != tc.deletes {
					t.Fatalf("deleting %d of %d: %v %+v", tc.deletes, tc.owned, err, res)
				}
				return
			}
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded {
				t.Fatalf("deleting %d of %d: %v, want %s", tc.deletes, tc.owned, err, sync.ReasonPruneLimitExceeded)
			}
			if !strings.Contains(serr.Message, tc.limitInMessage) || !strings.Contains(serr.Message, "prune.maxDeletes") {
				t.Errorf("message %q, want it to name %q and prune.maxDeletes", serr.Message, tc.limitInMessage)
			}
			src, err := st.GetSource(t.Context(), "infra")
			if err != nil {
				t.Fatal(err)
			}
			if src.Phase != store.SourceStalled {
				t.Errorf("phase %s, want stalled", src.Phase)
			}
			marked, err := st.ListResources(t.Context(), store.ResourceFilter{Source: "infra", Phase: "deleting"})
			if err != nil || len(marked) != 0 {
				t.Errorf("a refused sync marked %d resource(s) for deletion (%v)", len(marked), err)
			}
		})
	}
}

// history returns the source's sync history, newest first.
func history(t *testing.T, st store.Store, name string) []*store.SyncRecord {
	t.Helper()
	rows, err := st.ListSyncRecords(t.Context(), name, 100)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSyncRefusedRevisionRecordedOnce shows that a refused revision is
// judged again only when something it was judged against changes, and that
// judging it again to the same refusal adds no history row.
func TestSyncRefusedRevisionRecordedOnce(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	team := target("team")
	// The Widget type is declared by no source yet: invalid.
	snap := snapshot(map[string]string{"w.yaml": widget("a", "{size: 1}")})
	var serr *sync.Error
	if _, err := s.Sync(t.Context(), team, snap, false); !errors.As(err, &serr) || serr.Reason != sync.ReasonValidationFailed {
		t.Fatalf("first sync: %v, want %s", err, sync.ReasonValidationFailed)
	}
	for range 3 {
		res, err := s.Sync(t.Context(), team, snap, false)
		if err != nil || !res.Skipped || !res.Refused {
			t.Fatalf("the same refused revision again: %+v %v, want it skipped as refused", res, err)
		}
	}
	// Forced: judged again, refused again, recorded once all the same.
	if _, err := s.Sync(t.Context(), team, snap, true); !errors.As(err, &serr) {
		t.Fatalf("forced sync: %v", err)
	}
	// A new process knows nothing of the refusal: it judges once more.
	if _, err := sync.New(st, nil).Sync(t.Context(), team, snap, false); !errors.As(err, &serr) {
		t.Fatalf("sync by a new syncer: %v", err)
	}
	if rows := history(t, st, "team"); len(rows) != 1 || rows[0].Success {
		t.Fatalf("history has %d row(s), want one refusal", len(rows))
	}

	// Another source declares the type: the refused revision goes through
	// without being forced.
	mustSync(t, s, target("platform"), snapshot(map[string]string{"types.yaml": widgetType}))
	res, err := s.Sync(t.Context(), team, snap, false)
	if err != nil || res.Skipped || len(res.Plan.Creates) != 1 {
		t.Fatalf("after the type appeared: %+v %v", res, err)
	}
	if rows := history(t, st, "team"); len(rows) != 2 || !rows[0].Success {
		t.Fatalf("history has %d row(s), want the refusal and the success", len(rows))
	}
}

// TestSyncApprovalRetriesRefusal shows that approving a revision stalled on
// the prune limit lets it through on the next plain sync, which no timer
// forces any more.
func TestSyncApprovalRetriesRefusal(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	tg.Prune.MaxDeletes = &sync.MaxDeletes{Value: 1}
	files := map[string]string{"types.yaml": widgetType, "a.yaml": widget("a", "{size: 1}"), "b.yaml": widget("b", "{size: 1}")}
	mustSync(t, s, tg, snapshot(files))
	delete(files, "a.yaml")
	delete(files, "b.yaml")
	files["c.yaml"] = widget("c", "{size: 1}")
	snap := snapshot(files)
	var serr *sync.Error
	if _, err := s.Sync(t.Context(), tg, snap, false); !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded {
		t.Fatalf("over the limit: %v", err)
	}
	if res, err := s.Sync(t.Context(), tg, snap, false); err != nil || !res.Refused {
		t.Fatalf("again without approval: %+v %v", res, err)
	}
	if err := s.Approve(t.Context(), "infra", snap.Revision); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(t.Context(), tg, snap, false)
	if err != nil || len(res.Plan.Deletes) != 2 {
		t.Fatalf("after approval: %+v %v", res, err)
	}
}

// TestRunnerDoesNotRetryRefusal shows that the runner neither retries a
// refused revision on a timer nor forces it on its next attempt, and that a
// change another source applies wakes it at once: the interval is an hour
// and the backoff a few milliseconds, so only the wake-up can apply it.
func TestRunnerDoesNotRetryRefusal(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	teamDir, platformDir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(teamDir, "w.yaml"), widget("a", "{size: 1}"))
	write(t, filepath.Join(platformDir, "README.yaml"), "# types come here\n")
	var jobs []sync.Job
	for name, path := range map[string]string{"team": teamDir, "platform": platformDir} {
		src, err := dir.New(dir.Config{Name: name, Path: path})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, sync.Job{Source: src, Target: sync.Target{Name: name, Kind: store.SourceDir, Path: path,
			Prune: sync.Prune{Enabled: true}}, Interval: time.Hour})
	}
	s := sync.New(st, nil)
	// The platform source is applied first, so that the only change after
	// team's refusal is the one the test makes.
	for _, j := range jobs {
		if j.Target.Name == "platform" {
			snap, err := j.Source.Fetch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			mustSync(t, s, j.Target, snap)
		}
	}
	r := sync.NewRunner(s, jobs, nil)
	r.MinBackoff, r.MaxBackoff = time.Millisecond, 2*time.Millisecond
	attempts := map[string]chan attempt{"team": make(chan attempt, 100), "platform": make(chan attempt, 100)}
	r.OnSync = func(name string, res *sync.Result, err error, _ time.Duration) { attempts[name] <- attempt{res, err} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var serr *sync.Error
	if a := next(t, attempts["team"], 10*time.Second); !errors.As(a.err, &serr) || serr.Reason != sync.ReasonValidationFailed {
		t.Fatalf("team's first sync: %+v, want %s", a, sync.ReasonValidationFailed)
	}
	if a := next(t, attempts["platform"], 10*time.Second); a.err != nil || !a.res.Skipped {
		t.Fatalf("platform's first sync: %+v, want it skipped", a)
	}
	// A plain trigger finds the same refused revision and leaves it.
	r.Trigger("team", false)
	if a := next(t, attempts["team"], 10*time.Second); a.err != nil || !a.res.Refused {
		t.Fatalf("team after a plain trigger: %+v, want it skipped as refused", a)
	}
	if rows := history(t, st, "team"); len(rows) != 1 {
		t.Fatalf("team's history has %d rows, want the one refusal", len(rows))
	}

	// The platform source declares the type: team goes through at once.
	write(t, filepath.Join(platformDir, "types.yaml"), widgetType)
	if a := next(t, attempts["platform"], 10*time.Second); a.err != nil || a.res.Plan == nil || len(a.res.Plan.Types) != 1 {
		t.Fatalf("platform with the type: %+v", a)
	}
	if a := next(t, attempts["team"], 10*time.Second); a.err != nil || a.res.Plan == nil || len(a.res.Plan.Creates) != 1 {
		t.Fatalf("team after the type appeared: %+v", a)
	}
	if rows := history(t, st, "team"); len(rows) != 2 || !rows[0].Success {
		t.Errorf("team's history has %d rows, want the refusal and the success", len(rows))
	}
}

// TestRunnerClearsFetchFailure shows that a source whose remote comes back
// at the revision already applied is ready again, though nothing is synced
// and no history row is written.
func TestRunnerClearsFetchFailure(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := sync.Target{Name: "flaky", Kind: store.SourceGit, URL: "https://git.example.com/flaky.git", Prune: sync.Prune{Enabled: true}}
	first := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
	mustSync(t, s, tg, first)

	r := sync.NewRunner(s, []sync.Job{{Source: &failingSource{fails: 1, snap: first}, Target: tg, Interval: time.Hour}}, nil)
	r.MinBackoff, r.MaxBackoff = 10*time.Millisecond, 20*time.Millisecond
	attempts := startRunner(t, r)
	if a := next(t, attempts, 5*time.Second); a.err == nil {
		t.Fatal("first fetch should fail")
	}
	if a := next(t, attempts, 5*time.Second); a.err != nil || !a.res.Skipped {
		t.Fatalf("after the remote came back: %+v", a)
	}
	got, err := st.GetSource(t.Context(), "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != store.SourceReady || strings.Contains(got.Message, sync.ReasonFetchFailed) {
		t.Errorf("status after the remote came back: phase %s message %q", got.Phase, got.Message)
	}
	if rows := history(t, st, "flaky"); len(rows) != 1 {
		t.Errorf("history has %d rows, want the first sync only", len(rows))
	}
}

// TestRunnerFolderAppearsLater shows that a folder source whose folder is
// missing at start is synced as soon as the folder appears: the interval is
// an hour, so only the watch on its parent can do it.
func TestRunnerFolderAppearsLater(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	root := filepath.Join(t.TempDir(), "later", "manifests")
	src, err := dir.New(dir.Config{Name: "local", Path: root})
	if err != nil {
		t.Fatal(err)
	}
	tg := sync.Target{Name: "local", Kind: store.SourceDir, Path: root, Prune: sync.Prune{Enabled: true}}
	r := sync.NewRunner(sync.New(st, nil), []sync.Job{{Source: src, Target: tg, Interval: time.Hour}}, nil)
	r.MinBackoff, r.MaxBackoff = time.Hour, time.Hour
	attempts := startRunner(t, r)
	if a := next(t, attempts, 10*time.Second); a.err == nil {
		t.Fatalf("sync of a missing folder: %+v, want a fetch failure", a)
	}
	write(t, filepath.Join(root, "w.yaml"), widgetType+widget("a", "{size: 1}"))
	for {
		a := next(t, attempts, 10*time.Second)
		if a.err == nil && a.res.Plan != nil && len(a.res.Plan.Creates) == 1 {
			break
		}
	}
}

// TestRunnerReportsFolderLinkOutOfRoot shows that a link out of a folder
// source's root, added while it is watched, fails the source with a
// message naming the file and why.
func TestRunnerReportsFolderLinkOutOfRoot(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	root, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(root, "w.yaml"), widgetType+widget("a", "{size: 1}"))
	write(t, filepath.Join(outside, "more.yaml"), widget("b", "{size: 1}"))
	src, err := dir.New(dir.Config{Name: "local", Path: root})
	if err != nil {
		t.Fatal(err)
	}
	tg := sync.Target{Name: "local", Kind: store.SourceDir, Path: root, Prune: sync.Prune{Enabled: true}}
	r := sync.NewRunner(sync.New(st, nil), []sync.Job{{Source: src, Target: tg, Interval: time.Hour}}, nil)
	attempts := startRunner(t, r)
	if a := next(t, attempts, 10*time.Second); a.err != nil {
		t.Fatalf("first sync: %v", a.err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "team")); err != nil {
		t.Fatal(err)
	}
	var serr *sync.Error
	if a := next(t, attempts, 10*time.Second); !errors.As(a.err, &serr) || serr.Reason != sync.ReasonValidationFailed {
		t.Fatalf("sync after the link: %+v, want %s", a, sync.ReasonValidationFailed)
	}
	got, err := st.GetSource(t.Context(), "local")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != store.SourceFailed || len(got.Errors) != 1 || got.Errors[0].File != "team" ||
		!strings.Contains(got.Message, "team: symlink points outside the source root") {
		t.Errorf("status: phase %s message %q errors %+v", got.Phase, got.Message, got.Errors)
	}
}

// typesLandingStore lets another source's types land in the store while a
// sync of team reads what it is judged against: the moment the judgement
// lists the sources, it waits for validation to list the types (which must
// not come) and then applies the platform source.
type typesLandingStore struct {
	*postgres.Store
	armed       atomic.Bool
	typesListed chan struct{}
	land        func(context.Context) error
}

func (s *typesLandingStore) ListResourceTypes(ctx context.Context, f store.TypeFilter) ([]*store.ResourceType, error) {
	if s.armed.Load() {
		select {
		case s.typesListed <- struct{}{}:
		default:
		}
	}
	return s.Store.ListResourceTypes(ctx, f)
}

func (s *typesLandingStore) ListSources(ctx context.Context) ([]*store.Source, error) {
	if s.armed.CompareAndSwap(true, false) {
		// Validation listing the types now would decide on a store older
		// than the judgement: give it the chance, then land the types.
		select {
		case <-s.typesListed:
		case <-time.After(300 * time.Millisecond):
		}
		if err := s.land(ctx); err != nil {
			return nil, err
		}
	}
	return s.Store.ListSources(ctx)
}

// TestSyncRefusalJudgedBeforeItIsDecided shows that a sync refused for an
// unknown kind is judged again once the type lands, even when the type
// lands while the sync is running: what a refusal is remembered against is
// never newer than what it was decided on.
func TestSyncRefusalJudgedBeforeItIsDecided(t *testing.T) {
	t.Parallel()
	raw, _ := newStore(t)
	st := &typesLandingStore{Store: raw, typesListed: make(chan struct{}, 1)}
	st.land = func(ctx context.Context) error {
		_, err := sync.New(raw, nil).Sync(ctx, target("platform"), snapshot(map[string]string{"types.yaml": widgetType}), false)
		return err
	}
	s := sync.New(st, nil)
	team := target("team")
	snap := snapshot(map[string]string{"w.yaml": widget("a", "{size: 1}")})
	st.armed.Store(true)
	if _, err := s.Sync(t.Context(), team, snap, false); err != nil {
		var serr *sync.Error
		if !errors.As(err, &serr) {
			t.Fatalf("first sync: %v", err)
		}
	}
	if st.armed.Load() {
		t.Fatal("the sync never read what it is judged against")
	}
	// Whatever the first sync decided, the type is there now: the widget
	// must be created, by the first sync or by this one.
	res, err := s.Sync(t.Context(), team, snap, false)
	if err != nil || res.Refused {
		t.Fatalf("after the type landed: %+v %v, want the revision applied", res, err)
	}
	if get(t, raw, "Widget", "a") == nil {
		t.Fatal("widget a was not created")
	}
}

// TestSyncJudgedAheadNeverSticks reads what the syncs of a source are
// judged against ahead of them, as a runner does during its fetch: a
// refusal remembered against a judgement read before the types landed is
// judged again once they have, whether the next judgement is read before
// or after they landed.
func TestSyncJudgedAheadNeverSticks(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	team := target("team")
	snap := snapshot(map[string]string{"w.yaml": widget("a", "{size: 1}")})
	var serr *sync.Error
	if _, err := s.SyncJudged(t.Context(), team, snap, false, s.Judge(t.Context(), team)); !errors.As(err, &serr) {
		t.Fatalf("first sync: %v, want a refusal", err)
	}
	// Read ahead, then the types land before the sync decides.
	stale := s.Judge(t.Context(), team)
	mustSync(t, s, target("platform"), snapshot(map[string]string{"types.yaml": widgetType}))
	res, err := s.SyncJudged(t.Context(), team, snap, false, stale)
	if err != nil || res.Refused || res.Skipped {
		t.Fatalf("after the type landed, judged ahead of it: %+v %v, want the revision applied", res, err)
	}
	if get(t, st, "Widget", "a") == nil {
		t.Fatal("widget a was not created")
	}
}

// TestSyncPruneGuardNamesResources shows that a refusal by the prune guard
// names, in the source's errors and its history, each resource it would
// delete (or forget) with the file it was declared in, the first twenty and
// a count of the rest, while its message still only counts them.
func TestSyncPruneGuardNamesResources(t *testing.T) {
	t.Parallel()
	seq := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name    string
		owned   int
		keep    []int // the resources the refused revision still declares
		noPrune []int // resources annotated no8s.io/prune: disabled
		reason  string
		message string
		named   []int // the resources named, in order
		verb    map[int]string
		andMore int
	}{
		{name: "over the limit", owned: 4, keep: []int{3}, reason: sync.ReasonPruneLimitExceeded,
			message: "would delete 3 of 4 resources, over maxDeletes 1", named: []int{0, 1, 2}},
		{name: "over the limit, prune-disabled ones kept out", owned: 5, keep: []int{4}, noPrune: []int{1},
			reason: sync.ReasonPruneLimitExceeded, message: "would delete 3 of 5 resources", named: []int{0, 2, 3}},
		{name: "more than twenty", owned: 25, keep: []int{24}, reason: sync.ReasonPruneLimitExceeded,
			message: "would delete 24 of 25 resources", named: seq(0, 20), andMore: 4},
		{name: "empty snapshot", owned: 3, noPrune: []int{2}, reason: sync.ReasonEmptySnapshot,
			message: "declares no resources but the source owns 3", named: []int{0, 1, 2}, verb: map[int]string{2: "forget"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			s := sync.New(st, nil)
			tg := target("infra")
			tg.Prune.MaxDeletes = &sync.MaxDeletes{Value: 1}
			files := map[string]string{"types.yaml": widgetType}
			for i := range tc.owned {
				w := widget(fmt.Sprintf("w%02d", i), "{size: 1}")
				if slices.Contains(tc.noPrune, i) {
					w = strings.Replace(w, "\nspec:", "\n  annotations: {no8s.io/prune: disabled}\nspec:", 1)
				}
				files[fmt.Sprintf("dir%d/w%02d.yaml", i%3, i)] = w
			}
			mustSync(t, s, tg, snapshot(files))
			for i := range tc.owned {
				if !slices.Contains(tc.keep, i) {
					delete(files, fmt.Sprintf("dir%d/w%02d.yaml", i%3, i))
				}
			}
			_, err := s.Sync(t.Context(), tg, snapshot(files), false)
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != tc.reason {
				t.Fatalf("sync: %v, want %s", err, tc.reason)
			}
			if !strings.Contains(serr.Message, tc.message) || strings.Contains(serr.Message, "\n") || strings.Contains(serr.Message, "w00") {
				t.Errorf("message %q, want one line that counts (%q) and names none", serr.Message, tc.message)
			}
			var want []manifest.Problem
			for _, i := range tc.named {
				verb := "delete"
				if v := tc.verb[i]; v != "" {
					verb = v
				}
				want = append(want, manifest.Problem{File: fmt.Sprintf("dir%d/w%02d.yaml", i%3, i), Message: fmt.Sprintf("would %s Widget/w%02d", verb, i)})
			}
			if tc.andMore > 0 {
				want = append(want, manifest.Problem{Message: fmt.Sprintf("and %d more", tc.andMore)})
			}
			src, err := st.GetSource(t.Context(), "infra")
			if err != nil {
				t.Fatal(err)
			}
			if src.Phase != store.SourceStalled || src.Message != serr.Error() {
				t.Errorf("source %s %q, want stalled with %q", src.Phase, src.Message, serr.Error())
			}
			if !slices.Equal(src.Errors, want) {
				t.Errorf("source errors:\n got %+v\nwant %+v", src.Errors, want)
			}
			if rows := history(t, st, "infra"); len(rows) != 2 || rows[0].Success || !slices.Equal(rows[0].Errors, want) {
				t.Errorf("history: %d row(s), newest %+v, want the refusal with %+v", len(rows), rows[0], want)
			}
		})
	}
}
