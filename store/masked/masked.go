// Package masked wraps a store.Store so that every text a write carries
// (status messages, conditions, outputs, reconcile and sync history, source
// messages and errors, progress) has the secret values the agent knows
// masked before it is kept. Everything that reads the store (the API, the
// dashboard, the event stream, the CLI, other agents on the database) then
// only ever reads masked text. Reads pass through, but for the specs of
// past generations, which are kept as declared and read only to be shown:
// they are masked as they are read.
package masked

import (
	"context"
	"slices"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Store masks the text of every write that carries any; reads pass
// through. Desired state (types, resources and their specs) is kept as
// declared: actions must get the spec as written, and whatever serves it
// masks it when shown. A write method added to store.Store later passes
// through unmasked until it is added here.
type Store struct {
	store.Store
	m *redact.Masker
}

// New returns st masking m's values in what is written through it.
func New(st store.Store, m *redact.Masker) *Store { return &Store{Store: st, m: m} }

// InTx wraps the transaction's store too.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		return fn(ctx, &Store{Store: tx, m: s.m})
	})
}

// SuspendResource masks the reason a suspension records.
func (s *Store) SuspendResource(ctx context.Context, id int64, suspend bool, note store.Suspension) (*store.Resource, error) {
	note.Reason = s.m.Mask(note.Reason)
	return s.Store.SuspendResource(ctx, id, suspend, note)
}

// SuspendSource masks the reason a suspension records.
func (s *Store) SuspendSource(ctx context.Context, name, by string, suspend bool, note store.Suspension) (*store.Source, error) {
	note.Reason = s.m.Mask(note.Reason)
	return s.Store.SuspendSource(ctx, name, by, suspend, note)
}

// SetResourceStatus masks the status it writes.
func (s *Store) SetResourceStatus(ctx context.Context, id int64, u store.StatusUpdate) (*store.Resource, error) {
	return s.Store.SetResourceStatus(ctx, id, s.status(u))
}

// Heartbeat masks the progress it writes.
func (s *Store) Heartbeat(ctx context.Context, c *store.Claim, d time.Duration, p *store.Progress) error {
	if p != nil {
		p = &store.Progress{Message: s.m.Mask(p.Message), Conditions: s.conditions(p.Conditions)}
	}
	return s.Store.Heartbeat(ctx, c, d, p)
}

// CompleteReconcile masks the status and the history record it writes.
func (s *Store) CompleteReconcile(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, error) {
	done.Status = s.status(done.Status)
	if done.Record != nil {
		done.Record = s.record(*done.Record)
	}
	return s.Store.CompleteReconcile(ctx, c, done)
}

// CompleteReconciles masks the status and the history record of each
// completion it writes.
func (s *Store) CompleteReconciles(ctx context.Context, batch []store.ClaimCompletion) []store.CompletionResult {
	masked := make([]store.ClaimCompletion, len(batch))
	for i, cc := range batch {
		cc.Done.Status = s.status(cc.Done.Status)
		if cc.Done.Record != nil {
			cc.Done.Record = s.record(*cc.Done.Record)
		}
		masked[i] = cc
	}
	return s.Store.CompleteReconciles(ctx, masked)
}

// AddReconcileRecord masks the record it writes.
func (s *Store) AddReconcileRecord(ctx context.Context, h *store.ReconcileRecord) (int64, error) {
	return s.Store.AddReconcileRecord(ctx, s.record(*h))
}

// PutSource masks the source's message, commit message and errors.
func (s *Store) PutSource(ctx context.Context, src *store.Source) (*store.Source, error) {
	c := *src
	c.Message = s.m.Mask(c.Message)
	c.LastCommit.Message = s.m.Mask(c.LastCommit.Message)
	c.Errors = s.problems(c.Errors)
	return s.Store.PutSource(ctx, &c)
}

// AddSyncRecord masks the record's message, commit message and errors.
func (s *Store) AddSyncRecord(ctx context.Context, r *store.SyncRecord) (int64, error) {
	c := *r
	c.Message = s.m.Mask(c.Message)
	c.Commit.Message = s.m.Mask(c.Commit.Message)
	c.Errors = s.problems(c.Errors)
	return s.Store.AddSyncRecord(ctx, &c)
}

func (s *Store) status(u store.StatusUpdate) store.StatusUpdate {
	u.Message = s.m.Mask(u.Message)
	u.Conditions = s.conditions(u.Conditions)
	u.Outputs = s.m.MaskJSON(u.Outputs)
	return u
}

func (s *Store) record(h store.ReconcileRecord) *store.ReconcileRecord {
	h.Error = s.m.Mask(h.Error)
	h.PlanOutput = s.m.Mask(h.PlanOutput)
	h.Outputs = s.m.MaskJSON(h.Outputs)
	return &h
}

// conditions returns conds masked, copied so that the caller's stay as
// they are.
func (s *Store) conditions(conds []manifest.Condition) []manifest.Condition {
	if conds == nil || s.m.Len() == 0 {
		return conds
	}
	out := slices.Clone(conds)
	for i := range out {
		out[i].Reason = s.m.Mask(out[i].Reason)
		out[i].Message = s.m.Mask(out[i].Message)
	}
	return out
}

func (s *Store) problems(ps []manifest.Problem) []manifest.Problem {
	if ps == nil || s.m.Len() == 0 {
		return ps
	}
	out := slices.Clone(ps)
	for i := range out {
		out[i].File = s.m.Mask(out[i].File)
		out[i].Pointer = s.m.Mask(out[i].Pointer)
		out[i].Message = s.m.Mask(out[i].Message)
	}
	return out
}

// NotificationsInProcess tells whether the wrapped store's notifications
// stay within the process; see store.LocalNotifications.
func (s *Store) NotificationsInProcess() bool {
	l, ok := s.Store.(store.LocalNotifications)
	return ok && l.NotificationsInProcess()
}

// ListGenerationSpecs masks the specs it reads: they are kept as
// declared, and read only to be shown.
func (s *Store) ListGenerationSpecs(ctx context.Context, resourceID int64, limit int) ([]*store.GenerationSpec, error) {
	gs, err := s.Store.ListGenerationSpecs(ctx, resourceID, limit)
	for _, g := range gs {
		g.Spec = s.m.MaskJSON(g.Spec)
	}
	return gs, err
}

// GetGenerationSpec masks the spec it reads, as ListGenerationSpecs does.
func (s *Store) GetGenerationSpec(ctx context.Context, resourceID, generation int64) (*store.GenerationSpec, error) {
	g, err := s.Store.GetGenerationSpec(ctx, resourceID, generation)
	if g != nil {
		g.Spec = s.m.MaskJSON(g.Spec)
	}
	return g, err
}
