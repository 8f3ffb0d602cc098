package sync_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/sync"
)

// TestSyncUnknownFields syncs a revision with a misspelt field under each
// setting of the source: strict refuses it and stores nothing, warn keeps
// the field and says so in the revision's status and history row, prune
// drops it and says so. The warning comes once per revision: a revision
// already applied adds nothing, the next one warns again.
func TestSyncUnknownFields(t *testing.T) {
	t.Parallel()
	files := map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1, colr: red}") + widget("b", "{size: 2}")}
	const field = `w.yaml:6: unknown field "spec.colr"`
	tests := []struct {
		mode manifest.UnknownFields
		// spec is a's stored spec; empty when the sync is refused.
		spec, want string
	}{
		{manifest.UnknownFieldsStrict, "", field + `, did you mean "color"? (unknownFields: strict refuses it; warn keeps it, prune drops it)`},
		{manifest.UnknownFieldsWarn, `{"color":"grey","colr":"red","size":1}`,
			`warning: 1 field(s) the schemas do not declare (unknownFields: warn): ` + field + ` kept, did you mean "color"?`},
		{manifest.UnknownFieldsPrune, `{"color":"grey","size":1}`,
			`warning: 1 field(s) the schemas do not declare (unknownFields: prune): ` + field + ` dropped, did you mean "color"?`},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			s := sync.New(st, nil)
			tg := target("infra")
			tg.UnknownFields = tt.mode
			res, err := s.Sync(t.Context(), tg, snapshot(files), false)
			if tt.spec == "" {
				var serr *sync.Error
				if !errors.As(err, &serr) || serr.Reason != sync.ReasonValidationFailed || len(serr.Problems) != 1 || serr.Problems[0].String() != tt.want {
					t.Fatalf("sync: %v, want a refusal with %s", err, tt.want)
				}
				if n, err := st.CountResources(t.Context()); err != nil || n != 0 {
					t.Errorf("resources stored: %d %v", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Plan.Creates) != 2 || !strings.Contains(res.Plan.Summary(), tt.want) {
				t.Errorf("plan %s; want two creates and %q", res.Plan.Summary(), tt.want)
			}
			if a := get(t, st, "Widget", "a"); string(a.Spec) != tt.spec {
				t.Errorf("stored spec %s, want %s", a.Spec, tt.spec)
			}
			src, err := st.GetSource(t.Context(), "infra")
			if err != nil || !strings.Contains(src.Message, tt.want) {
				t.Errorf("source status %q %v", src.Message, err)
			}
			// The same revision again: nothing new to say.
			if res := mustSync(t, s, tg, snapshot(files)); !res.Skipped {
				t.Errorf("the same revision was synced again: %+v", res)
			}
			recs, err := st.ListSyncRecords(t.Context(), "infra", 10)
			if err != nil || len(recs) != 1 || !strings.Contains(recs[0].Message, tt.want) {
				t.Fatalf("sync records: %+v %v", recs, err)
			}
			// The next revision warns again, in its own record.
			files := map[string]string{"types.yaml": widgetType, "w.yaml": files["w.yaml"] + widget("c", "{size: 3}")}
			if res := mustSync(t, s, tg, snapshot(files)); len(res.Plan.Creates) != 1 || !strings.Contains(res.Plan.Summary(), tt.want) {
				t.Errorf("next revision: %s", res.Plan.Summary())
			}
			if recs, err := st.ListSyncRecords(t.Context(), "infra", 10); err != nil || len(recs) != 2 || !strings.Contains(recs[0].Message, tt.want) {
				t.Errorf("sync records: %+v %v", recs, err)
			}
		})
	}
}

// TestSyncSwitchToPrune: a source whose resources were stored with a
// misspelt field (kept under warn, or by an agent that kept them all)
// switches to prune. Only the resource that carried the field gets a new
// generation: the stored spec of the others does not change. A strict
// source refuses the next revision until then, naming the field.
func TestSyncSwitchToPrune(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	tg.UnknownFields = manifest.UnknownFieldsWarn
	files := map[string]string{"types.yaml": widgetType,
		"w.yaml": widget("a", "{size: 1, colr: red}") + widget("b", "{size: 2}") + widget("c", "{size: 3, color: blue}")}
	mustSync(t, s, tg, snapshot(files))
	for _, n := range []string{"a", "b", "c"} {
		if r := get(t, st, "Widget", n); r.Generation != 1 {
			t.Fatalf("%s: generation %d", n, r.Generation)
		}
	}

	// Strict now, and a new revision that changes nothing else: refused,
	// with nothing changed.
	tg.UnknownFields = manifest.UnknownFieldsStrict
	files["x.yaml"] = widget("d", "{size: 4}")
	_, err := s.Sync(t.Context(), tg, snapshot(files), false)
	var serr *sync.Error
	if !errors.As(err, &serr) || len(serr.Problems) != 1 || !strings.HasPrefix(serr.Problems[0].String(), `w.yaml:6: unknown field "spec.colr", did you mean "color"?`) {
		t.Fatalf("strict: %v", err)
	}
	if n, err := st.CountResources(t.Context()); err != nil || n != 3 {
		t.Fatalf("resources after the refusal: %d %v", n, err)
	}

	// Prune: the refused revision applies, and only a is updated.
	tg.UnknownFields = manifest.UnknownFieldsPrune
	res := mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Updates) != 1 || res.Plan.Updates[0].Name != "a" || res.Plan.Unchanged != 2 || len(res.Plan.Creates) != 1 {
		t.Fatalf("prune: %s %+v", res.Plan.Summary(), res.Plan.Updates)
	}
	want := map[string]struct {
		gen  int64
		spec string
	}{
		"a": {2, `{"color":"grey","size":1}`},
		"b": {1, `{"color":"grey","size":2}`},
		"c": {1, `{"color":"blue","size":3}`},
		"d": {1, `{"color":"grey","size":4}`},
	}
	for n, w := range want {
		if r := get(t, st, "Widget", n); r.Generation != w.gen || string(r.Spec) != w.spec {
			t.Errorf("%s: generation %d spec %s, want %d %s", n, r.Generation, r.Spec, w.gen, w.spec)
		}
	}

	// A source already applied under warn that switches to prune: the
	// revision applied is not synced again unless forced; forced, only
	// the carrier of the field is bumped.
	st2, _ := newStore(t)
	s2 := sync.New(st2, nil)
	tg.UnknownFields = manifest.UnknownFieldsWarn
	snap := snapshot(files)
	mustSync(t, s2, tg, snap)
	tg.UnknownFields = manifest.UnknownFieldsPrune
	if res := mustSync(t, s2, tg, snap); !res.Skipped {
		t.Errorf("the applied revision was synced again unforced: %+v", res)
	}
	res, err = s2.Sync(t.Context(), tg, snap, true)
	if err != nil || len(res.Plan.Updates) != 1 || res.Plan.Updates[0].Name != "a" || res.Plan.Updates[0].Generation != 2 || res.Plan.Unchanged != 3 {
		t.Fatalf("forced under prune: %v %+v", err, res)
	}
}
