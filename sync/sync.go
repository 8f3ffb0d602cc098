// Package sync applies snapshots of sources to the store: the desired-state
// half of no8s-agent. For one snapshot of one source it validates every
// manifest, plans the change against what the store holds for that source,
// guards against mass deletion, and applies the plan in one transaction with
// the source's new state, a sync history row and a wake-up notification. A
// snapshot that fails any step changes nothing but the source's status.
//
// Every desired-state change goes through here, the HTTP API's included.
package sync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/priority"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// Reasons a sync fails, as shown in the source's status message.
const (
	ReasonValidationFailed   = "ValidationFailed"
	ReasonConflict           = "OwnershipConflict"
	ReasonPruneLimitExceeded = "PruneLimitExceeded"
	ReasonEmptySnapshot      = "EmptySnapshotRefused"
	ReasonTypeInUse          = "TypeInUse"
	ReasonScopeChange        = "ScopeChangeRefused"
	ReasonDefaultNamespace   = "DefaultNamespaceMismatch"
	ReasonFetchFailed        = "FetchFailed"
	// ReasonSignatureRejected: the source's signature policy refused a
	// commit (unsigned, signed by a key that is not trusted, a bad
	// signature); the problems name each commit and why.
	ReasonSignatureRejected = "SignatureRejected"
)

// Error is a sync that was refused. Nothing in the store changed but the
// source's status.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message says what happened and what to do.
	Message string
	// Problems are the individual errors, each with file, line and pointer
	// where they have one.
	Problems []manifest.Problem
}

// Error implements error.
func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// MaxDeletes limits how many resources one sync may delete: Value resources,
// or Value percent of those the source owns.
type MaxDeletes struct {
	Value   int
	Percent bool
}

// Allows reports whether deleting deletes of owned resources is within the limit.
func (m MaxDeletes) Allows(deletes, owned int) bool {
	if m.Percent {
		// deletes/owned <= Value/100, in integers.
		return deletes*100 <= m.Value*owned
	}
	return deletes <= m.Value
}

// String writes the limit as configured.
func (m MaxDeletes) String() string {
	if m.Percent {
		return fmt.Sprintf("%d%%", m.Value)
	}
	return fmt.Sprintf("%d", m.Value)
}

// The default prune limit, used when Prune.MaxDeletes is nil: one sync may
// delete DefaultMaxDeletes resources, or DefaultMaxDeletesPercent percent of
// those the source owns, whichever is larger. A small source can drop a
// handful of resources in one commit and a large one a quarter of them,
// which covers everyday refactors, while a wrong path, a bad merge or a
// half-wiped repository that would delete most of a source waits for an
// approval. A source that needs more says so with MaxDeletes.
const (
	DefaultMaxDeletes        = 10
	DefaultMaxDeletesPercent = 25
)

// Prune says what a sync does with resources that left the source.
type Prune struct {
	// Enabled destroys them; otherwise they are forgotten (their rows removed
	// without running their action's Destroy).
	Enabled bool
	// MaxDeletes refuses syncs that would delete more, until the revision is
	// approved; nil means the default limit (DefaultMaxDeletes or
	// DefaultMaxDeletesPercent, whichever is larger), never no limit. Use
	// 100% for no limit.
	MaxDeletes *MaxDeletes
	// AllowEmpty lets a snapshot without resources delete everything the
	// source owns. Otherwise such a snapshot is refused (a wrong path or an
	// emptied repository must not destroy everything).
	AllowEmpty bool
}

// allows reports whether a sync may delete deletes of the owned resources,
// and describes the limit for the refusal.
func (p Prune) allows(deletes, owned int) (bool, string) {
	if m := p.MaxDeletes; m != nil {
		return m.Allows(deletes, owned), "maxDeletes " + m.String()
	}
	limit := max(DefaultMaxDeletes, owned*DefaultMaxDeletesPercent/100)
	return deletes <= limit, fmt.Sprintf("the default limit of %d (%d or %d%% of the resources owned, whichever is larger; set prune.maxDeletes to allow more)",
		limit, DefaultMaxDeletes, DefaultMaxDeletesPercent)
}

// Target is the source a snapshot comes from, as the store records it.
type Target struct {
	Name string
	Kind store.SourceKind
	// URL is the Git remote; Path is the folder (dir) or the path within the repository (git).
	URL   string
	Path  string
	Prune Prune
	// MaxFileSize is the largest file the source reads, and so what a
	// document of it may expand to through YAML aliases; zero means
	// manifest.DefaultMaxFileSize.
	MaxFileSize int64
	// UnknownFields says what a sync does with the fields of a spec that
	// its schema does not declare; zero refuses them (strict).
	UnknownFields manifest.UnknownFields
}

// Result is what one Sync did.
type Result struct {
	Source   string
	Revision manifest.Revision
	// Skipped is true when the revision was already applied: nothing was done.
	Skipped bool
	// Refused is set with Skipped when the revision is one refused before
	// and nothing it was judged against has changed since (approval, the
	// other sources, the resources in the store): judging it again would
	// give the same refusal, which the source's status still shows.
	Refused bool
	// Suspended is set with Skipped when the source is suspended: it was
	// neither fetched nor synced.
	Suspended bool
	// Plan is what was applied; nil when skipped.
	Plan     *Plan
	Duration time.Duration
}

// Syncer syncs snapshots into a store. It is safe for concurrent use; syncs
// of one source are serialized by the store's source lock, across agents too.
type Syncer struct {
	store store.Store
	log   *slog.Logger
	now   func() time.Time

	mu         gosync.Mutex
	validators map[string]*manifest.Validator
	compiled   map[string]*manifest.ResourceType
	// admission reviews changes before they are accepted; nil admits all.
	admission *admission.Chain
	// apiUnknownFields is what the API's writes do with the fields of a
	// spec that its schema does not declare.
	apiUnknownFields manifest.UnknownFields
	// defaultNS is the namespace of resources of namespaced kinds declared
	// without one; empty is manifest.DefaultNamespace.
	defaultNS string
	// refusals are the last refusal of each source, with what it was
	// judged against, so that a refused revision is judged again only
	// when something that could change the outcome changed.
	refusals map[string]refusal
	// owned are, by source, the digests of its resources as the last sync
	// this Syncer applied left them (see ownedCache).
	owned map[string]*ownedCache
	// work counts the syncs in flight that have something to apply.
	work *priority.Work
	// checkEvery is how often, at most, a check that found nothing new
	// is recorded per source (see RecordChecksEvery); checked is, by
	// source, when one was last recorded.
	checkEvery time.Duration
	checked    map[string]time.Time
}

// DefaultCheckEvery is how often, at most, a Syncer records per source
// that it was checked and found as recorded: a source polled every 2s
// is not written every 2s, and its last check time is never older than
// this plus its interval.
const DefaultCheckEvery = 15 * time.Second

// RecordChecksEvery sets how often, at most, a check of a source that
// found nothing new (its revision applied, or its refusal standing) is
// recorded as its last check time; zero or less records every one. A
// sync that applies or refuses a revision records it at once. Call it
// before the first sync.
func (s *Syncer) RecordChecksEvery(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkEvery = d
}

// markChecked records that the source was checked at now and found as
// recorded, unless a check was recorded less than checkEvery ago. A
// failure to record it is logged, not returned: it fails nothing.
func (s *Syncer) markChecked(ctx context.Context, name string) {
	now := s.now()
	s.mu.Lock()
	last, ok := s.checked[name]
	due := !ok || now.Sub(last) >= s.checkEvery || now.Before(last)
	if due {
		s.checked[name] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	if err := s.store.MarkSourceChecked(ctx, name, now); err != nil && ctx.Err() == nil {
		s.log.Warn("cannot record the source's last check", "source", name, "error", err)
		s.mu.Lock()
		delete(s.checked, name)
		s.mu.Unlock()
	}
}

// checkedNow notes that a sync recorded now as the source's last check.
func (s *Syncer) checkedNow(name string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked[name] = now
}

// CountWork makes the Syncer count, in w, each sync in flight that has
// more to do than find its revision applied, and its Runners each fetch,
// so that the API's reads give way to them (see package priority). Call
// it before the first Sync.
func (s *Syncer) CountWork(w *priority.Work) { s.work = w }

// refusal is a refused revision and the state of the store it was refused in.
type refusal struct {
	revision manifest.Revision
	message  string
	against  string
}

// New returns a Syncer writing to st.
func New(st store.Store, log *slog.Logger) *Syncer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{store: st, log: log, now: time.Now, validators: map[string]*manifest.Validator{},
		compiled: map[string]*manifest.ResourceType{}, refusals: map[string]refusal{}, owned: map[string]*ownedCache{},
		checkEvery: DefaultCheckEvery, checked: map[string]time.Time{}}
}

// UseDefaultNamespace sets the namespace of resources of namespaced kinds
// declared without one, by sources and the API alike; the default, empty,
// is manifest.DefaultNamespace. Call it before the first sync.
func (s *Syncer) UseDefaultNamespace(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaultNS = ns
}

// DefaultNamespace returns the namespace of resources of namespaced kinds
// declared without one.
func (s *Syncer) DefaultNamespace() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defaultNSLocked()
}

func (s *Syncer) defaultNSLocked() string {
	if s.defaultNS == "" {
		return manifest.DefaultNamespace
	}
	return s.defaultNS
}

// checkDefaultNamespace refuses a sync by an agent whose default
// namespace is not the one the store records: another agent on the store
// was started with another, while no resource was in the recorded one.
// Both syncing would each destroy the resources declared without a
// namespace that the other placed in its default namespace, and create
// them again in its own.
func (s *Syncer) checkDefaultNamespace(ctx context.Context, tx store.Store) error {
	recorded, err := tx.DefaultNamespace(ctx)
	if err != nil {
		return fmt.Errorf("read the recorded default namespace: %w", err)
	}
	if mine := s.DefaultNamespace(); recorded != mine {
		return &Error{Reason: ReasonDefaultNamespace, Message: fmt.Sprintf(
			"this agent places resources declared without a namespace in %q, but the store records %q, which an agent started since "+
				"is configured with: syncing would destroy them and create them again in the other; give every agent "+
				"on this store the same defaultNamespace and restart this one", mine, recorded)}
	}
	return nil
}

// errSkip ends the apply transaction when another agent applied the
// revision first.
var errSkip = errors.New("revision already applied")

// Sync applies snap to the store as the state of source t. With force, a
// revision already applied is synced again. A refused sync returns an *Error
// after recording it in the source's status, once: the same refusal of the
// same revision adds no history row. Without force, a revision this Syncer
// refused is not judged again until something it was judged against changes
// (an approval, another source's applied revision or types, the resources in
// the store); the result is then Skipped and Refused. Other errors (the store
// failing) leave the store as it was.
func (s *Syncer) Sync(ctx context.Context, t Target, snap *source.Snapshot, force bool) (*Result, error) {
	return s.SyncJudged(ctx, t, snap, force, nil)
}

// SyncJudged is Sync with what it is judged against read ahead, by Judge
// before the snapshot was fetched; nil reads it now.
func (s *Syncer) SyncJudged(ctx context.Context, t Target, snap *source.Snapshot, force bool, pre *Judgement) (*Result, error) {
	start := s.now()
	res := &Result{Source: t.Name, Revision: snap.Revision}
	cur, err := s.sourceState(ctx, s.store, t)
	if err != nil {
		return nil, err
	}
	// The common case, nothing new, costs one query.
	if !force && alreadyApplied(cur, snap.Revision) {
		res.Skipped = true
		if fetchFailed(cur) {
			return res, s.recordFetchRecovered(ctx, t, snap.Revision)
		}
		s.markChecked(ctx, t.Name)
		return res, nil
	}
	// What the sync is judged against is read before anything the sync
	// decides on (the types validation resolves, the resources planning
	// counts): a refusal remembered against a state newer than the one it
	// was decided on would never be judged again when that newer state is
	// what clears it. Read ahead, during the fetch, it is older, which is
	// safe; read now, it is waited for before validation.
	defer s.work.Begin()()
	// A revision refused before is judged on a fresh reading: one read
	// ahead may predate what would now clear it, and skip it once more.
	var against *judgement
	if pre != nil && (force || !s.mayHaveRefused(t.Name, snap.Revision, cur)) {
		against = pre.j
	} else {
		against = s.judge(ctx, t.Name, cur)
	}
	against.withSnapshot(t, snap)
	if !force && s.mayHaveRefused(t.Name, snap.Revision, cur) {
		a, err := against.wait(ctx)
		if err != nil {
			return nil, err
		}
		if s.refusedAlready(t.Name, snap.Revision, cur, a) {
			res.Skipped, res.Refused = true, true
			s.markChecked(ctx, t.Name)
			return res, nil
		}
	}
	if err := checkLineage(t, snap, cur); err != nil {
		return nil, s.fail(ctx, t, snap, start, against, err)
	}
	if _, err := against.wait(ctx); err != nil && ctx.Err() != nil {
		return nil, err
	}
	set, err := s.validate(ctx, t, snap)
	if err != nil {
		return nil, s.fail(ctx, t, snap, start, against, err)
	}
	chain := s.admissionChain()
	err = reviewed(func() error {
		// The hooks judge the plan before the source's lock and the
		// transaction are taken; the transaction applies it only if it
		// still holds.
		var rv *review
		if chain != nil {
			var err error
			if rv, err = s.reviewSync(ctx, chain, t, snap, set, force); err != nil {
				return err
			}
		}
		return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if err := tx.LockSource(ctx, t.Name); err != nil {
				return err
			}
			cur, err := s.sourceState(ctx, tx, t)
			if err != nil {
				return err
			}
			if !force && alreadyApplied(cur, snap.Revision) {
				return errSkip
			}
			if err := checkLineage(t, snap, cur); err != nil {
				return err
			}
			if err := s.checkDefaultNamespace(ctx, tx); err != nil {
				return err
			}
			declared := set
			if rv != nil {
				declared = rv.set
			}
			plan, err := makePlan(ctx, tx, t, snap, declared, cur, false, s.cachedOwned(t.Name, cur))
			if err != nil {
				return err
			}
			switch {
			case chain == nil:
				// No hooks: nothing to ask, everything allowed.
				if rv, err = s.admit(ctx, tx, nil, t, snap, declared, plan, false); err != nil {
					return err
				}
			case rv == nil || rv.basis != plan.stateBasis():
				return errPlanMoved
			}
			if err := s.checkTransitions(ctx, tx, t, declared, plan.Updates, snap.Files); err != nil {
				return err
			}
			plan.Warnings = append(plan.Warnings, rv.warnings...)
			if err := apply(ctx, tx, t, snap, plan, rv); err != nil {
				return err
			}
			res.Plan = plan
			res.Duration = s.now().Sub(start)
			return s.recordSuccess(ctx, tx, t, snap, cur, plan, start)
		})
	})
	// What the source owns now is known without reading it back, unless
	// the sync did not apply.
	s.keepOwned(t.Name, res.Plan, err)
	switch {
	case errors.Is(err, errSkip):
		res.Skipped = true
		s.markChecked(ctx, t.Name)
		return res, nil
	case err != nil:
		var serr *Error
		var oc *store.OwnerConflictError
		switch {
		case errors.As(err, &serr):
		case errors.As(err, &oc):
			// Another source took a resource between planning and applying.
			err = &Error{Reason: ReasonConflict, Message: oc.Error()}
		default:
			return nil, fmt.Errorf("sync %s at %s: %w", t.Name, snap.Revision, err)
		}
		return nil, s.fail(ctx, t, snap, start, against, err)
	}
	s.mu.Lock()
	delete(s.refusals, t.Name)
	s.mu.Unlock()
	p := res.Plan
	s.log.Info("synced", "source", t.Name, "revision", string(snap.Revision),
		"created", len(p.Creates), "updated", len(p.Updates), "deleted", len(p.Deletes)+len(p.Forgets),
		"unchanged", p.Unchanged, "duration", res.Duration.Round(time.Microsecond))
	return res, nil
}

// reviewSync plans set against the store as it is, outside any
// transaction, and puts the plan to the hooks of chain. A plan refused
// before the hooks are asked (a conflict, the prune guard) gives no review
// and no error: the refusal is judged under the source's lock.
func (s *Syncer) reviewSync(ctx context.Context, chain *admission.Chain, t Target, snap *source.Snapshot, set *manifest.Set, force bool) (*review, error) {
	cur, err := s.sourceState(ctx, s.store, t)
	if err != nil {
		return nil, err
	}
	if !force && alreadyApplied(cur, snap.Revision) {
		return nil, errSkip
	}
	p, err := makePlan(ctx, s.store, t, snap, set, cur, false, nil)
	var serr *Error
	switch {
	case errors.As(err, &serr):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return s.admit(ctx, s.store, chain, t, snap, set, p, false)
}

// Plan validates snap and plans it against the store without changing
// anything: what Sync would do. It serves diff and pull-request previews.
// A refused plan is an *Error; the plan is returned with it when planning got
// that far (e.g. a prune limit), so that previews can show it.
func (s *Syncer) Plan(ctx context.Context, t Target, snap *source.Snapshot) (*Plan, error) {
	set, err := s.validate(ctx, t, snap)
	if err != nil {
		return nil, err
	}
	cur, err := s.sourceState(ctx, s.store, t)
	if err != nil {
		return nil, err
	}
	return s.planChecked(ctx, s.store, t, snap, set, cur, true)
}

// Approve lets a revision refused by the prune guard, or as a rollback,
// through on its next sync. Only the revision the source is stalled on can
// be approved; any other is an *Error with reason ReasonNotApprovable, and
// nothing changes. The approval ends when another revision is applied.
func (s *Syncer) Approve(ctx context.Context, sourceName string, rev manifest.Revision) error {
	if rev == "" {
		return fmt.Errorf("approve: %w: a revision is required", store.ErrInvalid)
	}
	return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, sourceName); err != nil {
			return err
		}
		cur, err := tx.GetSource(ctx, sourceName)
		if err != nil {
			return fmt.Errorf("approve %s: %w", sourceName, err)
		}
		if err := approvable(cur, rev); err != nil {
			return err
		}
		cur.ApprovedRevision = rev
		if _, err := tx.PutSource(ctx, cur); err != nil {
			return err
		}
		return tx.Notify(ctx, store.TopicSources, sourceName)
	})
}

// RecordFetchFailure records that the source could not be fetched: its
// status says why, and everything it declared stays as it was.
func (s *Syncer) RecordFetchFailure(ctx context.Context, t Target, fetchErr error) error {
	return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, t.Name); err != nil {
			return err
		}
		cur, err := s.sourceState(ctx, tx, t)
		if err != nil {
			return err
		}
		cur.Phase = store.SourceFailed
		cur.Message = ReasonFetchFailed + ": " + fetchErr.Error()
		if _, err := tx.PutSource(ctx, cur); err != nil {
			return err
		}
		return tx.Notify(ctx, store.TopicSources, t.Name)
	})
}

// Suspended writes the source's suspend setting from the configuration
// (declared) to the store, and reports whether the source is suspended, by
// the configuration or through the API. A source the store does not know
// yet is recorded, pending, only when the configuration suspends it.
func (s *Syncer) Suspended(ctx context.Context, t Target, declared bool) (bool, error) {
	// Most of the time there is nothing to write: one read, no lock.
	cur, err := s.store.GetSource(ctx, t.Name)
	switch {
	case errors.Is(err, store.ErrNotFound) && !declared:
		return false, nil
	case err == nil && declared == (cur.SuspendedBy == store.SuspendedByConfig):
		return cur.SuspendedBy != "", nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return false, fmt.Errorf("suspension of source %s: %w", t.Name, err)
	}
	var suspended bool
	err = s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, t.Name); err != nil {
			return err
		}
		cur, err := tx.GetSource(ctx, t.Name)
		switch {
		case errors.Is(err, store.ErrNotFound) && !declared:
			return nil
		case errors.Is(err, store.ErrNotFound):
			if cur, err = tx.PutSource(ctx, &store.Source{Name: t.Name, Kind: t.Kind, URL: t.URL, Path: t.Path,
				Phase: store.SourcePending}); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if declared != (cur.SuspendedBy == store.SuspendedByConfig) {
			if cur, err = tx.SuspendSource(ctx, t.Name, store.SuspendedByConfig, declared, store.Suspension{}); err != nil {
				return err
			}
		}
		suspended = cur.SuspendedBy != ""
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("suspension of source %s: %w", t.Name, err)
	}
	return suspended, nil
}

// judgedAgainst digests what the outcome of a sync of the named source
// depends on besides its snapshot: its approved revision, the other
// sources' applied revisions (their resources and types, the API's writes
// included) and whether they are retired (which a conflict's advice
// depends on), the resource types in the store, and how many resources it
// holds (a resource another source gave up is gone once destroyed). Any
// change of these may turn a refusal into a success.
func (s *Syncer) judgedAgainst(ctx context.Context, name string, cur *store.Source) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "approved %s\n", cur.ApprovedRevision)
	sources, err := s.store.ListSources(ctx)
	if err != nil {
		return "", fmt.Errorf("list sources: %w", err)
	}
	for _, o := range sources {
		if o.Name != name {
			fmt.Fprintf(&b, "source %s %s retired=%t\n", o.Name, o.LastAppliedRevision, o.Phase.Retired())
		}
	}
	types, err := s.store.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		return "", fmt.Errorf("list resource types: %w", err)
	}
	for _, ty := range types {
		fmt.Fprintf(&b, "type %s %s %s %s\n", ty.Name, ty.Version, ty.Source.Name, manifest.HashJSON(ty.Schema))
	}
	total, err := s.store.CountResources(ctx)
	if err != nil {
		return "", fmt.Errorf("count resources: %w", err)
	}
	fmt.Fprintf(&b, "resources %d\n", total)
	return b.String(), nil
}

// judgement is what a sync is judged against: judgedAgainst, read from
// the store in the background, and what the source found wrong with the
// snapshot. It is read no later than anything the sync decides on; when
// read earlier (during the fetch, see Judge), a refusal remembered against
// it is only judged again sooner than it needs to be.
type judgement struct {
	done    chan struct{}
	against string
	err     error
	// snap is the snapshot's part, set before the first wait.
	snap string
}

// Judgement is what the next sync of a source is judged against, read
// ahead of it (see Judge).
type Judgement struct{ j *judgement }

// Judge starts reading what the next sync of t is judged against, as the
// store is now: a Runner starts it with the fetch, which takes longer, so
// that the sync finds it read (see SyncJudged).
func (s *Syncer) Judge(ctx context.Context, t Target) *Judgement {
	j := &judgement{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		cur, err := s.sourceState(ctx, s.store, t)
		if err != nil {
			j.err = err
			return
		}
		j.against, j.err = s.judgedAgainst(ctx, t.Name, cur)
	}()
	return &Judgement{j: j}
}

// judge starts reading what a sync of snap is judged against, as the store
// is now.
func (s *Syncer) judge(ctx context.Context, name string, cur *store.Source) *judgement {
	j := &judgement{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		j.against, j.err = s.judgedAgainst(ctx, name, cur)
	}()
	return j
}

// withSnapshot adds what the source found wrong with snap (an untrusted
// commit signature, say: rotated keys may clear it), its lineage, and
// the source's setting for unknown fields (prune accepts what strict
// refused) to what j judges.
func (j *judgement) withSnapshot(t Target, snap *source.Snapshot) *judgement {
	var b strings.Builder
	b.WriteString("\nunknownFields " + string(t.UnknownFields))
	for _, p := range snap.Problems {
		b.WriteString("\nsnapshot " + p.String())
	}
	b.WriteString(lineageJudged(snap))
	j.snap = b.String()
	return j
}

// wait returns what the sync is judged against, once read.
func (j *judgement) wait(ctx context.Context) (string, error) {
	select {
	case <-j.done:
		if j.err != nil {
			return "", j.err
		}
		return j.against + j.snap, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// mayHaveRefused reports whether rev is the revision this Syncer last
// refused for the source and the source's status still shows that refusal:
// whether refusedAlready needs what the sync is judged against.
func (s *Syncer) mayHaveRefused(name string, rev manifest.Revision, cur *store.Source) bool {
	s.mu.Lock()
	r, ok := s.refusals[name]
	s.mu.Unlock()
	return ok && r.revision == rev && cur.LastAttemptedRevision == rev && cur.LastAppliedRevision != rev && cur.Message == r.message
}

// refusedAlready reports whether rev is the revision this Syncer last
// refused for the source, the source's status still shows that refusal,
// and nothing it was judged against changed since.
func (s *Syncer) refusedAlready(name string, rev manifest.Revision, cur *store.Source, against string) bool {
	s.mu.Lock()
	r, ok := s.refusals[name]
	s.mu.Unlock()
	return ok && r.revision == rev && r.against == against &&
		cur.LastAttemptedRevision == rev && cur.LastAppliedRevision != rev && cur.Message == r.message
}

// fetchFailed reports whether the source's status is a fetch failure.
func fetchFailed(cur *store.Source) bool {
	return cur.Phase == store.SourceFailed && strings.HasPrefix(cur.Message, ReasonFetchFailed+":")
}

// recordFetchRecovered clears a fetch failure from the status of a source
// fetched again at the revision it has applied: nothing is synced, so no
// history row is written, but the status must no longer say it fails.
func (s *Syncer) recordFetchRecovered(ctx context.Context, t Target, rev manifest.Revision) error {
	recovered := false
	err := s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, t.Name); err != nil {
			return err
		}
		cur, err := s.sourceState(ctx, tx, t)
		if err != nil {
			return err
		}
		if !fetchFailed(cur) || !alreadyApplied(cur, rev) {
			return nil // another agent got there first
		}
		now := s.now()
		cur.Phase = store.SourceReady
		cur.Message = fmt.Sprintf("fetched again: %s is applied", rev)
		cur.Errors = nil
		cur.LastSyncTime = &now
		cur.LastCheckTime = &now
		if _, err := tx.PutSource(ctx, cur); err != nil {
			return err
		}
		s.checkedNow(t.Name, now)
		recovered = true
		return tx.Notify(ctx, store.TopicSources, t.Name)
	})
	if err != nil {
		return fmt.Errorf("record the recovery of %s: %w", t.Name, err)
	}
	if recovered {
		s.log.Info("source fetched again", "source", t.Name, "revision", string(rev))
	}
	return nil
}

// alreadyApplied reports whether rev is the source's applied revision and
// nothing was attempted since.
// A retired source is never up to date: its sync makes it normal again.
func alreadyApplied(cur *store.Source, rev manifest.Revision) bool {
	return cur.LastAppliedRevision == rev && cur.LastAttemptedRevision == rev && !cur.Phase.Retired()
}

// sourceState returns the stored state of t, or a new pending one.
func (s *Syncer) sourceState(ctx context.Context, st store.Store, t Target) (*store.Source, error) {
	cur, err := st.GetSource(ctx, t.Name)
	if errors.Is(err, store.ErrNotFound) {
		return &store.Source{Name: t.Name, Kind: t.Kind, URL: t.URL, Path: t.Path, Phase: store.SourcePending}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read source %s: %w", t.Name, err)
	}
	cur.Kind, cur.URL, cur.Path = t.Kind, t.URL, t.Path
	return cur, nil
}

// validate checks the snapshot as a whole: its own types first, then the
// types of other sources for kinds it does not declare.
func (s *Syncer) validate(ctx context.Context, t Target, snap *source.Snapshot) (*manifest.Set, error) {
	known, err := s.otherTypes(ctx, s.store, t.Name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	v := s.validators[t.Name]
	if v == nil || v.Decode.MaxExpandedSize != t.MaxFileSize || v.UnknownFields != t.UnknownFields || v.DefaultNamespace != s.defaultNSLocked() {
		// A Validator's settings never change once it is in use: a
		// preview may be validating with it meanwhile.
		v = &manifest.Validator{Decode: manifest.DecodeOptions{MaxExpandedSize: t.MaxFileSize}, UnknownFields: t.UnknownFields,
			DefaultNamespace: s.defaultNSLocked()}
		s.validators[t.Name] = v
	}
	s.mu.Unlock()
	set, err := v.ValidateFiles(snap.Files, known)
	problems := append([]manifest.Problem(nil), snap.Problems...)
	var verr *manifest.ValidationError
	switch {
	case errors.As(err, &verr):
		problems = append(problems, verr.Problems...)
	case err != nil:
		return nil, err
	}
	if len(problems) > 0 {
		manifest.SortProblems(problems)
		if len(snap.Unverified) > 0 {
			return nil, signatureRejected(snap, problems)
		}
		return nil, &Error{Reason: ReasonValidationFailed, Problems: problems,
			Message: fmt.Sprintf("%d invalid manifest(s); first: %s", len(problems), problems[0])}
	}
	return set, nil
}

// signatureRejected is the refusal of a snapshot whose commits the
// source's signature policy refused: it names the commit and why (not
// signed, a key that is not trusted, a bad signature), and counts the
// invalid manifests besides, all of which are among problems.
func signatureRejected(snap *source.Snapshot, problems []manifest.Problem) *Error {
	// The revision refused is the source's last attempted one; the
	// message names the commit at fault, which in verify mode all may lie
	// below it.
	first := strings.TrimPrefix(snap.Unverified[0].Message, "signature policy: ")
	msg := "refused by the source's signature policy: " + first
	if n := len(snap.Unverified); n > 1 {
		msg += fmt.Sprintf(" (and %d more commit(s))", n-1)
	}
	if n := len(problems) - len(snap.Unverified); n > 0 {
		msg += fmt.Sprintf("; besides, %d invalid manifest(s)", n)
	}
	return &Error{Reason: ReasonSignatureRejected, Problems: problems, Message: msg}
}

// otherTypes returns a resolver of the types other sources own, compiled on
// first use and remembered while their schemas stay the same.
func (s *Syncer) otherTypes(ctx context.Context, st store.Store, self string) (manifest.TypeResolver, error) {
	rows, err := st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		return nil, fmt.Errorf("list resource types: %w", err)
	}
	byName := map[string][]*store.ResourceType{}
	for _, r := range rows {
		if r.Source.Name != self {
			byName[r.Name] = append(byName[r.Name], r)
		}
	}
	return func(name string) *manifest.ResourceType {
		versions := byName[name]
		if len(versions) == 0 {
			return nil
		}
		t := &manifest.ResourceType{Name: name, Group: versions[0].Group, Action: versions[0].Action,
			Description: versions[0].Description, DriftInterval: versions[0].DriftInterval,
			Annotations: versions[0].Annotations, NameFormat: manifest.NameFormatOf(versions[0].Annotations),
			Scope: versions[0].ScopeOf()}
		for _, v := range versions {
			t.Versions = append(t.Versions, manifest.TypeVersion{Name: v.Version, Schema: v.Schema})
			// The API stores each version's metadata apart: one version
			// that asks for labels holds the whole type to them, whichever
			// version sorts first.
			if manifest.NameFormatOf(v.Annotations) == manifest.NameLabel {
				t.NameFormat = manifest.NameLabel
			}
		}
		key := t.Fingerprint()
		s.mu.Lock()
		defer s.mu.Unlock()
		if c := s.compiled[key]; c != nil {
			return c
		}
		if err := t.Compile(); err != nil {
			s.log.Warn("stored resource type does not compile", "type", name, "error", err)
			return nil
		}
		s.compiled[key] = t
		return t
	}, nil
}

// fail records a refused sync in the source's status and history and
// returns the refusal. Nothing else changes. The same refusal of the same
// revision as the last history row is not written again, nor logged as a
// warning: it was judged again (forced, or something changed, or by a new
// process) and nothing came of it. against is what it was judged against;
// when it cannot be read, the refusal is not remembered, and the revision
// is judged again at its next sync.
func (s *Syncer) fail(ctx context.Context, t Target, snap *source.Snapshot, start time.Time, against *judgement, cause error) error {
	var serr *Error
	if !errors.As(cause, &serr) {
		return cause
	}
	repeated := false
	phase := store.SourceFailed
	if serr.Reason == ReasonPruneLimitExceeded || serr.Reason == ReasonEmptySnapshot || serr.Reason == ReasonRollbackRefused {
		phase = store.SourceStalled
	}
	err := s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, t.Name); err != nil {
			return err
		}
		cur, err := s.sourceState(ctx, tx, t)
		if err != nil {
			return err
		}
		now := s.now()
		cur.Phase = phase
		cur.Message = serr.Error()
		cur.LastAttemptedRevision = snap.Revision
		cur.LastCommit = snap.Commit
		cur.Errors = serr.Problems
		cur.LastSyncTime = &now
		cur.LastCheckTime = &now
		if _, err := tx.PutSource(ctx, cur); err != nil {
			return err
		}
		s.checkedNow(t.Name, now)
		last, err := tx.ListSyncRecords(ctx, t.Name, 1)
		if err != nil {
			return fmt.Errorf("read sync history: %w", err)
		}
		repeated = len(last) == 1 && !last[0].Success && last[0].Revision == snap.Revision && last[0].Message == serr.Error() &&
			slices.Equal(last[0].Errors, serr.Problems)
		if !repeated {
			if _, err := tx.AddSyncRecord(ctx, &store.SyncRecord{Source: t.Name, Revision: snap.Revision,
				Commit: snap.Commit, Success: false, Errors: serr.Problems, Message: serr.Error(),
				Duration: now.Sub(start), StartedAt: start, FinishedAt: now}); err != nil {
				return err
			}
		}
		return tx.Notify(ctx, store.TopicSources, t.Name)
	})
	if err != nil {
		return fmt.Errorf("record failed sync of %s: %w (the sync failed: %v)", t.Name, err, serr)
	}
	// Admission hooks answer for themselves each time: their policy, or
	// their health, may have changed without anything here changing.
	if serr.Reason != ReasonAdmissionDenied && serr.Reason != ReasonAdmissionFailed {
		if a, err := against.wait(ctx); err == nil {
			s.mu.Lock()
			s.refusals[t.Name] = refusal{revision: snap.Revision, message: serr.Error(), against: a}
			s.mu.Unlock()
		} else {
			s.log.Debug("refusal not remembered: what it was judged against could not be read", "source", t.Name, "error", err)
		}
	}
	if repeated {
		s.log.Debug("sync refused again, as before", "source", t.Name, "revision", string(snap.Revision), "reason", serr.Reason)
		return serr
	}
	s.log.Warn("sync refused", "source", t.Name, "revision", string(snap.Revision), "reason", serr.Reason,
		"problems", len(serr.Problems), "message", serr.Message)
	return serr
}

// recordSuccess writes the source's new state, the history row and the
// notifications, inside the apply transaction.
func (s *Syncer) recordSuccess(ctx context.Context, tx store.Store, t Target, snap *source.Snapshot, cur *store.Source, p *Plan, start time.Time) error {
	now := s.now()
	cur.Phase = store.SourceReady
	cur.Message = p.Summary()
	cur.LastAppliedRevision = snap.Revision
	cur.LastAttemptedRevision = snap.Revision
	cur.LastCommit = snap.Commit
	cur.Errors = nil
	cur.LastSyncTime = &now
	cur.LastAppliedTime = &now
	cur.LastCheckTime = &now
	if cur.ApprovedRevision != snap.Revision {
		// An approval lets one revision through, not that revision again
		// after the source has moved on (a rollback to it, say).
		cur.ApprovedRevision = ""
	}
	recorded, err := tx.PutSource(ctx, cur)
	if err != nil {
		return err
	}
	s.checkedNow(t.Name, now)
	p.recorded = recorded
	if _, err := tx.AddSyncRecord(ctx, &store.SyncRecord{Source: t.Name, Revision: snap.Revision, Commit: snap.Commit,
		Success: true, Created: len(p.Creates), Updated: len(p.Updates), Deleted: len(p.Deletes) + len(p.Forgets),
		Unchanged: p.Unchanged, Message: p.Summary(), Duration: now.Sub(start), StartedAt: start, FinishedAt: now}); err != nil {
		return err
	}
	if p.Changes() > 0 {
		if err := tx.Notify(ctx, store.TopicResources, t.Name); err != nil {
			return err
		}
	}
	return tx.Notify(ctx, store.TopicSources, t.Name)
}

// conflictProblem points at the declaration that collides with another
// owner; hint, from retiredHint, says what to do when that owner is retired.
func conflictProblem(r *manifest.Resource, owner store.SourceRef, hint string) manifest.Problem {
	where := owner.Name
	if owner.Path != "" {
		where += " (" + owner.Path + ")"
	}
	if hint == "" {
		hint = "; remove it there first"
	}
	return manifest.Problem{File: r.Origin.File, Line: r.Origin.Line, Document: r.Origin.Document, Pointer: "/metadata/name",
		Message: fmt.Sprintf("metadata.name: %s is already declared by source %s%s", r.Ref(), where, hint)}
}

// listRefs writes up to five refs for a message.
func listRefs(refs []string) string {
	sort.Strings(refs)
	if len(refs) > 5 {
		return strings.Join(refs[:5], ", ") + fmt.Sprintf(" and %d more", len(refs)-5)
	}
	return strings.Join(refs, ", ")
}
