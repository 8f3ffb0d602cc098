package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Every secret value the agent knows is masked in what it writes and
// serves, at three doors that nothing passes around:
//   - the store (maskedStore): every text a write carries — status
//     messages, conditions, outputs, reconcile and sync history, source
//     messages and errors, progress — is masked before it is kept, so the
//     API, the dashboard, the event stream, `get` and every other agent on
//     the database only ever read masked text;
//   - the HTTP server (api.Options.Wrap): every response is masked as it
//     is written, error bodies and rows kept before masking included;
//   - the logger (redact.Masker.Handler): every record.
//
// Pull-request comments and statuses are masked by the previewer before
// they are sent.

// maskSecrets returns a masker of every secret value the configuration
// names, and log wrapped to mask them. A value too short to be masked
// safely is only warned about, naming its setting.
func maskSecrets(cfg *config.Config, log *slog.Logger) (*redact.Masker, *slog.Logger) {
	m := redact.New()
	log = slog.New(m.Handler(log.Handler()))
	for _, s := range cfg.Secrets() {
		if redact.TooShort(s.Value()) {
			warnShortSecret(log, s.Setting, s.Env)
			continue
		}
		m.Add(s.Value())
	}
	return m, log
}

// addActionSecrets adds the secret values the action instances read.
func addActionSecrets(m *redact.Masker, instances *action.Instances, log *slog.Logger) {
	secrets := instances.Secrets()
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		for _, v := range secrets[name] {
			if v == "" {
				continue // nothing to hide, nothing to warn about
			}
			if redact.TooShort(v) {
				warnShortSecret(log, "actions."+name, "")
				continue
			}
			m.Add(v)
		}
	}
}

func warnShortSecret(log *slog.Logger, setting, env string) {
	args := []any{"setting", setting, "min_length", redact.MinLength}
	if env != "" {
		args = append(args, "env", env)
	}
	log.Warn("a secret value is too short to be masked: it may show in status, history and logs; use a longer one", args...)
}

// maskedAgentStore is an agentStore whose writes mask secret values.
type maskedAgentStore struct {
	*maskedStore
	migrate func(context.Context) error
}

// maskStore wraps st so that every text written through it is masked.
func maskStore(st agentStore, m *redact.Masker) agentStore {
	return maskedAgentStore{maskedStore: &maskedStore{Store: st, m: m}, migrate: st.Migrate}
}

// Migrate migrates the wrapped store.
func (s maskedAgentStore) Migrate(ctx context.Context) error { return s.migrate(ctx) }

// maskedStore masks the text of every write that carries any; reads pass
// through. Desired state (types, resources and their specs) is kept as
// declared: actions must get the spec as written, and the HTTP server
// masks it when shown.
type maskedStore struct {
	store.Store
	m *redact.Masker
}

// InTx wraps the transaction's store too.
func (s *maskedStore) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		return fn(ctx, &maskedStore{Store: tx, m: s.m})
	})
}

func (s *maskedStore) SetResourceStatus(ctx context.Context, id int64, u store.StatusUpdate) (*store.Resource, error) {
	return s.Store.SetResourceStatus(ctx, id, s.status(u))
}

func (s *maskedStore) Heartbeat(ctx context.Context, c *store.Claim, d time.Duration, p *store.Progress) error {
	if p != nil {
		p = &store.Progress{Message: s.m.Mask(p.Message), Conditions: s.conditions(p.Conditions)}
	}
	return s.Store.Heartbeat(ctx, c, d, p)
}

func (s *maskedStore) CompleteReconcile(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, error) {
	done.Status = s.status(done.Status)
	if done.Record != nil {
		done.Record = s.record(*done.Record)
	}
	return s.Store.CompleteReconcile(ctx, c, done)
}

func (s *maskedStore) AddReconcileRecord(ctx context.Context, h *store.ReconcileRecord) (int64, error) {
	return s.Store.AddReconcileRecord(ctx, s.record(*h))
}

func (s *maskedStore) PutSource(ctx context.Context, src *store.Source) (*store.Source, error) {
	c := *src
	c.Message = s.m.Mask(c.Message)
	c.LastCommit.Message = s.m.Mask(c.LastCommit.Message)
	c.Errors = s.problems(c.Errors)
	return s.Store.PutSource(ctx, &c)
}

func (s *maskedStore) AddSyncRecord(ctx context.Context, r *store.SyncRecord) (int64, error) {
	c := *r
	c.Message = s.m.Mask(c.Message)
	c.Commit.Message = s.m.Mask(c.Commit.Message)
	c.Errors = s.problems(c.Errors)
	return s.Store.AddSyncRecord(ctx, &c)
}

func (s *maskedStore) status(u store.StatusUpdate) store.StatusUpdate {
	u.Message = s.m.Mask(u.Message)
	u.Conditions = s.conditions(u.Conditions)
	u.Outputs = s.m.MaskJSON(u.Outputs)
	return u
}

func (s *maskedStore) record(h store.ReconcileRecord) *store.ReconcileRecord {
	h.Error = s.m.Mask(h.Error)
	h.PlanOutput = s.m.Mask(h.PlanOutput)
	h.Outputs = s.m.MaskJSON(h.Outputs)
	return &h
}

// conditions returns conds masked, copied so that the caller's stay as
// they are.
func (s *maskedStore) conditions(conds []manifest.Condition) []manifest.Condition {
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

func (s *maskedStore) problems(ps []manifest.Problem) []manifest.Problem {
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
