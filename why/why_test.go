package why_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a World of a few resources, sources and agents.
type world struct {
	resources map[manifest.ObjectRef]*why.Resource
	sources   map[string]*store.Source
	agents    map[string]*store.Agent
}

func (w *world) Resource(ref manifest.ObjectRef) *why.Resource { return w.resources[ref] }
func (w *world) Source(name string) *store.Source              { return w.sources[name] }
func (w *world) Agent(id string) *store.Agent                  { return w.agents[id] }

func ref(name string) manifest.ObjectRef {
	return manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: name}
}

// res returns a resource named name, pending unless changed by fn.
func res(id int64, name string, fn func(r *why.Resource), deps ...string) *why.Resource {
	r := &why.Resource{ID: id, Ref: ref(name), Source: "infra", Path: "widgets/" + name + ".yaml", Phase: manifest.PhasePending,
		Generation: 1}
	for _, d := range deps {
		r.DependsOn = append(r.DependsOn, ref(d))
	}
	if fn != nil {
		fn(r)
	}
	return r
}

func ready(r *why.Resource) { r.Phase, r.Ready = manifest.PhaseReady, true }

func newWorld(rs ...*why.Resource) *world {
	w := &world{resources: map[manifest.ObjectRef]*why.Resource{}, agents: map[string]*store.Agent{},
		sources: map[string]*store.Source{"infra": {Name: "infra", Phase: store.SourceReady}}}
	for _, r := range rs {
		w.resources[r.Ref] = r
	}
	return w
}

func at(d time.Duration) *time.Time { t := now.Add(d); return &t }

func TestForResource(t *testing.T) {
	failedQuota := func(r *why.Resource) {
		r.Phase, r.Message, r.RetryCount, r.NextReconcileAt = manifest.PhaseFailed, "quota exceeded", 3, at(4*time.Minute)
	}
	waiting := func(r *why.Resource) { r.Message = "waiting for dependencies" }
	tests := []struct {
		name string
		of   string
		w    *world
		edit func(w *world)
		// reason is the reason wanted, chain the names of its chain, and
		// says what its message must hold.
		reason string
		chain  []string
		says   []string
		check  func(t *testing.T, got *why.Why)
	}{
		{name: "ready", of: "a", w: newWorld(res(1, "a", ready))},
		{
			name: "three levels deep", of: "a",
			w:      newWorld(res(1, "a", waiting, "b"), res(2, "b", waiting, "c"), res(3, "c", failedQuota)),
			reason: why.DependencyNotReady, chain: []string{"b", "c"},
			says: []string{"Widget/b", "Widget/c", "quota exceeded", "attempt 3", "next try at 2025-03-01T12:04:00Z"},
			check: func(t *testing.T, got *why.Why) {
				if got.Cause == nil || got.Cause.Reason != why.BackingOff || got.Cause.Attempt != 3 {
					t.Errorf("cause = %+v, want backing off at attempt 3", got.Cause)
				}
				if last := got.Chain[len(got.Chain)-1]; last.Message != "quota exceeded" || last.Phase != "failed" || last.ID != 3 {
					t.Errorf("root link = %+v", last)
				}
			},
		},
		{
			name: "ready dependencies are skipped", of: "a",
			w:      newWorld(res(1, "a", waiting, "ok", "b"), res(2, "ok", ready), res(3, "b", failedQuota)),
			reason: why.DependencyNotReady, chain: []string{"b"}, says: []string{"quota exceeded"},
		},
		{
			name: "more dependencies not ready", of: "a",
			w:      newWorld(res(1, "a", waiting, "b", "c"), res(2, "b", failedQuota), res(3, "c", nil)),
			reason: why.DependencyNotReady, chain: []string{"b"}, says: []string{"and 1 more"},
		},
		{
			name: "missing dependency", of: "a",
			w:      newWorld(res(1, "a", waiting, "b"), res(2, "b", waiting, "gone")),
			reason: why.DependencyMissing, chain: []string{"b", "gone"}, says: []string{"Widget/gone does not exist"},
			check: func(t *testing.T, got *why.Why) {
				if !got.Chain[1].Missing {
					t.Errorf("the missing link is not marked: %+v", got.Chain[1])
				}
			},
		},
		{
			name: "cycle", of: "a",
			w:      newWorld(res(1, "a", waiting, "b"), res(2, "b", waiting, "c"), res(3, "c", waiting, "a")),
			reason: why.DependencyCycle, chain: []string{"b", "c", "a"}, says: []string{"dependency cycle: Widget/a -> Widget/b"},
		},
		{
			name: "cycle below", of: "a",
			w:      newWorld(res(1, "a", waiting, "b"), res(2, "b", waiting, "c"), res(3, "c", waiting, "b")),
			reason: why.DependencyCycle, chain: []string{"b", "c", "b"},
		},
		{
			name: "suspended through the API", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.SuspendedBy, r.SuspendedIdentity, r.SuspendedReason, r.SuspendedAt = store.SuspendedByAPI, "ops", "db migration", at(-time.Hour)
			}, "b")),
			reason: why.Suspended, says: []string{"through the API by ops: db migration"},
			check: func(t *testing.T, got *why.Why) {
				if got.Suspension == nil || got.Suspension.Identity != "ops" || got.Since == nil || len(got.Actions) != 1 ||
					got.Actions[0].CLI != "no8s-agent resume resource Widget/default/a" {
					t.Errorf("suspension = %+v, actions %+v", got.Suspension, got.Actions)
				}
			},
		},
		{
			name: "suspended while ready", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				ready(r)
				r.SuspendedBy, r.SuspendedReason = store.SuspendedByAnnotation, "line one\nline two <script>"
			})),
			reason: why.Suspended, says: []string{"annotation no8s.io/suspend", "widgets/a.yaml", "line one line two <script>"},
		},
		{
			name: "hostile annotation reason is cut", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.SuspendedBy, r.SuspendedReason = store.SuspendedByAnnotation, strings.Repeat("x", 10<<10)
			})),
			reason: why.Suspended,
			check: func(t *testing.T, got *why.Why) {
				if n := len(got.Suspension.Reason); n > store.MaxSuspendReason+4 {
					t.Errorf("reason of %d bytes", n)
				}
			},
		},
		{
			name: "backing off", of: "a", w: newWorld(res(1, "a", failedQuota)),
			reason: why.BackingOff, says: []string{"attempt 3 failed: quota exceeded", "in 4m0s"},
			check: func(t *testing.T, got *why.Why) {
				if got.Until == nil || !got.Until.Equal(now.Add(4*time.Minute)) || got.Attempt != 3 {
					t.Errorf("until %v attempt %d", got.Until, got.Attempt)
				}
			},
		},
		{
			name: "failed, retry due", of: "a",
			w:      newWorld(res(1, "a", func(r *why.Resource) { r.Phase, r.Message, r.RetryCount = manifest.PhaseFailed, "boom", 1 })),
			reason: why.Failed, says: []string{"attempt 1 failed: boom", "due now"},
		},
		{
			name: "leased by a live agent", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.Phase, r.LeaseOwner, r.LeaseExpiresAt, r.Message = manifest.PhaseReconciling, "agent-1", at(30*time.Second), "applying"
			})),
			edit: func(w *world) {
				w.agents["agent-1"] = &store.Agent{ID: "agent-1", LastSeenAt: now.Add(-time.Second)}
			},
			reason: why.Reconciling, says: []string{"agent agent-1 is reconciling it", "applying"},
			check: func(t *testing.T, got *why.Why) {
				if got.Lease == nil || !got.Lease.Alive || got.Lease.State != "alive" {
					t.Errorf("lease = %+v", got.Lease)
				}
			},
		},
		{
			name: "leased by a gone agent", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.Phase, r.LeaseOwner, r.LeaseExpiresAt = manifest.PhaseReconciling, "agent-2", at(20*time.Second)
			})),
			edit: func(w *world) {
				w.agents["agent-2"] = &store.Agent{ID: "agent-2", LastSeenAt: now.Add(-time.Hour)}
			},
			reason: why.Reconciling, says: []string{"agent agent-2 holds it but is gone", "takes it over"},
		},
		{
			name: "lease of an unknown agent ran out", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.Phase, r.LeaseOwner, r.LeaseExpiresAt = manifest.PhaseReconciling, "agent-3", at(-time.Second)
			})),
			reason: why.Reconciling, says: []string{"lease of agent agent-3 ended"},
			check: func(t *testing.T, got *why.Why) {
				if got.Lease.State != "unknown" || got.Lease.Alive {
					t.Errorf("lease = %+v", got.Lease)
				}
			},
		},
		{
			name: "orphaned source", of: "a", w: newWorld(res(1, "a", func(r *why.Resource) { r.Orphaned = true }, "b")),
			reason: why.SourceOrphaned, says: []string{`source "infra" is orphaned`},
		},
		{
			name: "failing source", of: "a", w: newWorld(res(1, "a", nil)),
			edit: func(w *world) {
				w.sources["infra"] = &store.Source{Name: "infra", Phase: store.SourceFailed, Message: "ValidationFailed: bad"}
			},
			reason: why.Pending, says: []string{`its source "infra" is failed`},
			check: func(t *testing.T, got *why.Why) {
				if got.Source == nil || got.Source.Phase != "failed" || got.Source.Message != "ValidationFailed: bad" {
					t.Errorf("source = %+v", got.Source)
				}
			},
		},
		{
			name: "suspended source", of: "a", w: newWorld(res(1, "a", nil)),
			edit: func(w *world) {
				w.sources["infra"] = &store.Source{Name: "infra", Phase: store.SourceReady, SuspendedBy: store.SuspendedByAPI}
			},
			reason: why.Pending, says: []string{`its source "infra" is suspended`},
		},
		{
			name: "deleting", of: "a",
			w: newWorld(res(1, "a", func(r *why.Resource) {
				r.Phase, r.DeletionRequested, r.Message = manifest.PhaseDeleting, true, "waiting for dependents to be destroyed first: Widget/z"
			}, "gone")),
			reason: why.Deleting, says: []string{"dependents"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				tc.edit(tc.w)
			}
			got := why.ForResource(tc.w.resources[ref(tc.of)], tc.w, now)
			if tc.reason == "" {
				if got != nil {
					t.Fatalf("why = %+v, want none", got)
				}
				return
			}
			if got == nil || got.Reason != tc.reason {
				t.Fatalf("why = %+v, want reason %s", got, tc.reason)
			}
			var chain []string
			for _, l := range got.Chain {
				chain = append(chain, l.Name)
			}
			if strings.Join(chain, ",") != strings.Join(tc.chain, ",") {
				t.Errorf("chain = %v, want %v", chain, tc.chain)
			}
			for _, s := range tc.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
			if strings.ContainsAny(got.Message, "\n\r") {
				t.Errorf("message on several lines: %q", got.Message)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLongChainEnds follows a chain longer than it shows, and a
// dependency on itself, without looping.
func TestLongChainEnds(t *testing.T) {
	w := newWorld()
	for i := range 500 {
		name := "r" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		next := "r" + string(rune('a'+(i+1)%26)) + strings.Repeat("x", (i+1)/26)
		w.resources[ref(name)] = res(int64(i+1), name, nil, next)
	}
	if got := why.ForResource(w.resources[ref("ra")], w, now); got == nil || len(got.Chain) == 0 || len(got.Chain) > 64 {
		t.Fatalf("why = %+v", got)
	}
	self := newWorld(res(1, "a", nil, "a"))
	if got := why.ForResource(self.resources[ref("a")], self, now); got == nil || got.Reason != why.DependencyCycle {
		t.Fatalf("self dependency: %+v", got)
	}
}

func TestForSource(t *testing.T) {
	rev := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name   string
		src    store.Source
		reason string
		says   []string
		check  func(t *testing.T, got *why.Why)
	}{
		{name: "ready", src: store.Source{Name: "infra", Phase: store.SourceReady}},
		{
			name: "prune guard", reason: "PruneLimitExceeded",
			src: store.Source{Name: "infra", Phase: store.SourceStalled, LastAttemptedRevision: manifest.Revision(rev),
				Message: "PruneLimitExceeded: revision " + rev + " would delete 3 of 4 resources, over 25%",
				Errors:  []manifest.Problem{{File: "widgets/a.yaml", Message: "would delete Widget/a"}}},
			says: []string{"would delete 3 of 4"},
			check: func(t *testing.T, got *why.Why) {
				if len(got.Actions) != 1 || got.Actions[0].API != "POST /api/v1/sources/infra/approve?revision="+rev ||
					got.Actions[0].CLI != "no8s-agent approve source infra --revision "+rev || got.Revision != rev {
					t.Errorf("actions = %+v, revision %q", got.Actions, got.Revision)
				}
				if len(got.Problems) != 1 || got.Problems[0] != "widgets/a.yaml: would delete Widget/a" {
					t.Errorf("problems = %q", got.Problems)
				}
			},
		},
		{
			name: "prune guard naming what it would delete", reason: "PruneLimitExceeded",
			src: store.Source{Name: "infra", Phase: store.SourceStalled, LastAttemptedRevision: manifest.Revision(rev),
				Message: "PruneLimitExceeded: revision " + rev + " would delete 7 of 8 resources, over maxDeletes 1: approve the revision to go ahead",
				Errors: []manifest.Problem{
					{File: "dir0/w0.yaml", Message: "would delete Widget/w0"}, {File: "dir1/w1.yaml", Message: "would delete Widget/prod/w1"},
					{File: "dir2/w2.yaml", Message: "would delete Widget/w2"}, {File: "dir0/w3.yaml", Message: "would delete Widget/w3"},
					{File: "dir1/w4.yaml", Message: "would delete Widget/w4"}, {File: "dir2/w5.yaml", Message: "would delete Widget/w5"},
					{File: "dir0/w6.yaml", Message: "would delete Widget/w6"}}},
			says: []string{"would delete 7 of 8 resources"},
			check: func(t *testing.T, got *why.Why) {
				want := []string{"dir0/w0.yaml: would delete Widget/w0", "dir1/w1.yaml: would delete Widget/prod/w1",
					"dir2/w2.yaml: would delete Widget/w2", "dir0/w3.yaml: would delete Widget/w3", "dir1/w4.yaml: would delete Widget/w4", "and 2 more"}
				if strings.Join(got.Problems, "|") != strings.Join(want, "|") {
					t.Errorf("problems = %q, want %q", got.Problems, want)
				}
				if strings.Contains(got.Message, "Widget/") {
					t.Errorf("message %q names resources; the problems do", got.Message)
				}
			},
		},
		{
			name: "empty snapshot naming what it would delete or forget", reason: "EmptySnapshotRefused",
			src: store.Source{Name: "infra", Phase: store.SourceStalled, LastAttemptedRevision: manifest.Revision(rev),
				Message: "EmptySnapshotRefused: revision " + rev + " declares no resources but the source owns 2; if that is intended, set prune.allowEmpty or approve the revision",
				Errors:  []manifest.Problem{{File: "w.yaml", Message: "would delete Widget/a"}, {File: "w.yaml", Message: "would forget Widget/b"}}},
			says: []string{"declares no resources but the source owns 2"},
			check: func(t *testing.T, got *why.Why) {
				want := []string{"w.yaml: would delete Widget/a", "w.yaml: would forget Widget/b"}
				if strings.Join(got.Problems, "|") != strings.Join(want, "|") {
					t.Errorf("problems = %q, want %q", got.Problems, want)
				}
				if len(got.Actions) != 1 || got.Actions[0].Name != "approve" {
					t.Errorf("actions = %+v, want approve", got.Actions)
				}
			},
		},
		{
			name: "admission refusal", reason: "AdmissionDenied",
			src:  store.Source{Name: "infra", Phase: store.SourceFailed, Message: "AdmissionDenied: hook policy: replicas must be odd"},
			says: []string{"hook policy: replicas must be odd"},
		},
		{
			name: "signature refusal", reason: "SignatureRejected",
			src:  store.Source{Name: "infra", Phase: store.SourceFailed, Message: "SignatureRejected: commit abc is not signed by a trusted key"},
			says: []string{"not signed by a trusted key"},
		},
		{
			name: "invalid manifests", reason: "ValidationFailed",
			src: store.Source{Name: "infra", Phase: store.SourceFailed, Message: "ValidationFailed: 7 problems",
				Errors: []manifest.Problem{{File: "a.yaml", Line: 3, Message: "spec.size: must be >= 1"}, {File: "b.yaml", Line: 1, Message: "x"},
					{Message: "no file"}, {File: "c.yaml"}, {File: "d.yaml"}, {File: "e.yaml"}, {File: "f.yaml"}}},
			check: func(t *testing.T, got *why.Why) {
				want := []string{"a.yaml:3: spec.size: must be >= 1", "b.yaml:1: x", "-: no file", "c.yaml: ", "d.yaml: ", "and 2 more"}
				if strings.Join(got.Problems, "|") != strings.Join(want, "|") {
					t.Errorf("problems = %q, want %q", got.Problems, want)
				}
			},
		},
		{
			name: "message without a reason", reason: "failed",
			src:  store.Source{Name: "infra", Phase: store.SourceFailed, Message: "something: broke"},
			says: []string{"something: broke"},
		},
		{
			name: "suspended by a token", reason: why.Suspended,
			src: store.Source{Name: "infra", Phase: store.SourceReady, SuspendedBy: store.SuspendedByAPI, SuspendedIdentity: "oidc:alice",
				SuspendedReason: "freeze"},
			says: []string{"by oidc:alice: freeze"},
		},
		{
			name: "suspended by the configuration", reason: why.Suspended,
			src:  store.Source{Name: "infra", Phase: store.SourceFailed, SuspendedBy: store.SuspendedByConfig},
			says: []string{"configuration"},
			check: func(t *testing.T, got *why.Why) {
				if len(got.Actions) != 0 {
					t.Errorf("the API cannot resume it, yet actions = %+v", got.Actions)
				}
			},
		},
		{
			name: "orphaned", reason: why.Orphaned, src: store.Source{Name: "old", Phase: store.SourceOrphaned},
			check: func(t *testing.T, got *why.Why) {
				if len(got.Actions) != 2 || got.Actions[0].CLI != "no8s-agent delete source old --mode forget" {
					t.Errorf("actions = %+v", got.Actions)
				}
			},
		},
		{name: "pruning", reason: why.Pruning, src: store.Source{Name: "old", Phase: store.SourcePruning}},
		{name: "never synced", reason: why.NotSynced, src: store.Source{Name: "new", Phase: store.SourcePending}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := why.ForSource(&tc.src)
			if tc.reason == "" {
				if got != nil {
					t.Fatalf("why = %+v, want none", got)
				}
				return
			}
			if got == nil || got.Reason != tc.reason {
				t.Fatalf("why = %+v, want reason %s", got, tc.reason)
			}
			for _, s := range tc.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestFromStore reads readiness as the reconciler judges dependencies.
func TestFromStore(t *testing.T) {
	cond := []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionTrue}}
	r := &store.Resource{Resource: manifest.Resource{Kind: "Widget", Name: "a"}, Generation: 2, ObservedGeneration: 2,
		Phase: manifest.PhaseReady, Conditions: cond}
	if !why.FromStore(r).Ready || why.Explained(r) {
		t.Fatal("a ready resource is not ready")
	}
	r.Generation = 3
	if why.FromStore(r).Ready || !why.Explained(r) {
		t.Fatal("a resource with a new generation is ready")
	}
	r.Generation = 2
	r.Annotations = map[string]string{manifest.AnnotationSuspend: "true", manifest.AnnotationSuspendReason: "audit"}
	if f := why.FromStore(r); !f.Ready || f.SuspendedBy != store.SuspendedByAnnotation || f.SuspendedReason != "audit" || !why.Explained(r) {
		t.Fatalf("suspended by annotation: %+v", f)
	}
}
