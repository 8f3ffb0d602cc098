package sync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// widgetTypeV2 is widgetType with a second version of the same schema.
const widgetTypeV2 = widgetType + `    - name: v2
      schema:
        type: object
        required: [size]
        properties:
          size: {type: integer, minimum: 1}
          color: {type: string, default: grey}
`

// TestAdmissionAPIWriteOfMetadataIsReviewed writes, through the API, a
// resource the API owns with only what the hooks are shown besides its
// spec, action, labels and annotations changed: its dependencies, or the
// version of its type. Each is an update the hooks judge, as a sync's
// would be: a hook that refuses updates stops it and nothing is stored.
func TestAdmissionAPIWriteOfMetadataIsReviewed(t *testing.T) {
	t.Parallel()
	const base = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\nspec: {size: 1}\n"
	tests := []struct{ name, doc string }{
		{"dependsOn", base + "dependsOn: [{kind: Widget, name: y}]\n"},
		{"type version", strings.Replace(base, "example.com/v1", "example.com/v2", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			ctx := t.Context()
			hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
				if r.Operation == "update" {
					return map[string]any{"allowed": false, "status": map[string]any{"message": "widgets are frozen"}}
				}
				return map[string]any{"allowed": true}
			})
			c, _ := chain(t, admission.Hook{Name: "freeze", URL: hook.URL, Type: admission.Validating})
			s := sync.New(st, nil)
			s.UseAdmission(c)
			mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetTypeV2}))
			before := mustAPIWidget(t, s, "x", 1)
			mustAPIWidget(t, s, "y", 1)
			beforeObj := mustObject(t, before)

			_, err := s.ApplyDocument(ctx, func(context.Context, store.Store) ([]byte, error) { return []byte(tt.doc), nil })
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied {
				t.Errorf("API write changing only its %s under a hook that refuses updates: %v; want AdmissionDenied", tt.name, err)
			}
			if after := mustObject(t, get(t, st, "Widget", "x")); string(after) != string(beforeObj) {
				t.Errorf("x after the write: %s; want it unchanged, %s", after, beforeObj)
			}
		})
	}
}

// TestAdmissionSyncReviewSeesLabelsMoved labels a resource, with no new
// generation, while a sync's update of it is reviewed: the update was
// judged on the unlabeled resource, so it is reviewed again, and refused
// by a hook that keeps locked resources as they are.
func TestAdmissionSyncReviewSeesLabelsMoved(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			ctx := t.Context()
			g := newGate(func(r hookRequest) bool { return r.Operation == "update" && objectSize(r.Object) == 2 })
			hook := newHook(t, "hook-secret-1", func(r hookRequest) map[string]any {
				g.hold(r)
				if r.Operation == "update" && strings.Contains(string(r.OldObject), `"locked":"true"`) {
					return map[string]any{"allowed": false, "status": map[string]any{"message": "w is locked"}}
				}
				return map[string]any{"allowed": true}
			})
			g.letGoAtEnd(t)
			c, _ := chain(t, admission.Hook{Name: "lock", URL: hook.URL, Type: admission.Validating})
			agent1, agent2 := admittedPair(st, c)
			mustSync(t, agent1, target("infra"), snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("w", "{size: 1}")}))

			grow := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("w", "{size: 2}")})
			growing := inBackground(func() error { _, err := agent1.Sync(ctx, target("infra"), grow, false); return err })
			g.waitHeld(t)
			locked := "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  labels: {locked: \"true\"}\nspec: {size: 1}\n"
			lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := agent2.Sync(lockCtx, target("infra"), snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": locked}), false)
			cancel()
			if err != nil {
				t.Fatalf("labelling w while its update is reviewed: %v", err)
			}
			if w := get(t, st, "Widget", "w"); w.Generation != 1 || w.Labels["locked"] != "true" {
				t.Fatalf("w after labelling: generation %d labels %v", w.Generation, w.Labels)
			}
			close(g.release)
			err = growing.wait(t, "the sync that grows w")
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonAdmissionDenied || !strings.Contains(err.Error(), "w is locked") {
				t.Fatalf("the update of w, labelled locked since its review: %v; want it reviewed again and refused", err)
			}
			if w := get(t, st, "Widget", "w"); objectSize(mustObject(t, w)) != 1 {
				t.Errorf("w after the refusal: %s; want size 1", w.Spec)
			}
		})
	}
}
