package storetest

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// testGenerationSpecs keeps the spec of every generation, however it is
// written (one resource, a bulk apply, a revival), once per generation,
// and after the resource is gone.
func testGenerationSpecs(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	r := resource("a", `{"size": 1, "name": "first"}`)
	created, err := s.CreateResource(ctx, r, src)
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	// The same spec again is no generation; a new one is.
	if _, _, err := s.ApplyResource(ctx, r, src); err != nil {
		t.Fatal(err)
	}
	r2 := withSpec(r, `{"size": 2, "name": "second"}`)
	r2.Action = "custom"
	if _, out, err := s.ApplyResource(ctx, r2, src); err != nil || out != store.Updated {
		t.Fatalf("ApplyResource: %s, %v", out, err)
	}
	// A bulk apply: a new resource, and the third generation of a (in
	// compact JSON, which bulk writes may make of it).
	r3 := withSpec(r2, `{"size":3}`)
	b := resource("b", `{"only":true}`)
	applied, err := s.ApplyResources(ctx, []*manifest.Resource{r3, b}, src)
	if err != nil {
		t.Fatal(err)
	}
	if applied[0].Generation != 3 || applied[1].Outcome != store.Created {
		t.Fatalf("ApplyResources: %+v", applied)
	}
	// A status write is no generation.
	if _, err := s.SetResourceStatus(ctx, id, store.StatusUpdate{Phase: "ready", ObservedGeneration: 3}); err != nil {
		t.Fatal(err)
	}

	gs, err := s.ListGenerationSpecs(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"size":3}`, `{"size": 2, "name": "second"}`, `{"size": 1, "name": "first"}`}
	if len(gs) != len(want) {
		t.Fatalf("ListGenerationSpecs = %d specs, want %d", len(gs), len(want))
	}
	for i, g := range gs {
		if g.Generation != int64(3-i) || string(g.Spec) != want[i] || g.ResourceID != id || g.Kind != "Widget" || g.Name != "a" {
			t.Errorf("spec %d = generation %d %s of %d %s/%s, want generation %d %s", i, g.Generation, g.Spec, g.ResourceID,
				g.Kind, g.Name, 3-i, want[i])
		}
		if g.SourceRevision != src.Revision {
			t.Errorf("generation %d: revision %q, want %q", g.Generation, g.SourceRevision, src.Revision)
		}
		checkUTC(t, "CreatedAt", g.CreatedAt)
	}
	if gs[1].Action != "custom" || gs[2].Action != "" {
		t.Errorf("actions %q, %q; want custom, none", gs[1].Action, gs[2].Action)
	}
	if top, err := s.ListGenerationSpecs(ctx, id, 1); err != nil || len(top) != 1 || top[0].Generation != 3 {
		t.Errorf("ListGenerationSpecs with limit 1: %v", err)
	}
	if _, err := s.ListGenerationSpecs(ctx, id, -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("negative limit: %v", err)
	}
	g2, err := s.GetGenerationSpec(ctx, id, 2)
	if err != nil || string(g2.Spec) != want[1] {
		t.Fatalf("GetGenerationSpec(2) = %+v, %v", g2, err)
	}
	if _, err := s.GetGenerationSpec(ctx, id, 4); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetGenerationSpec of a generation to come: %v", err)
	}
	if bs, err := s.ListGenerationSpecs(ctx, applied[1].ID, 0); err != nil || len(bs) != 1 || string(bs[0].Spec) != `{"only":true}` {
		t.Errorf("the bulk-created resource's specs: %d, %v", len(bs), err)
	}

	// A deletion requested and revived is a new generation; the specs
	// outlive the row.
	if _, err := s.RequestDeletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.ApplyResource(ctx, r3, src); err != nil || got.Generation != 4 {
		t.Fatalf("revival: %v", err)
	}
	if err := s.DeleteResource(ctx, id); err != nil {
		t.Fatal(err)
	}
	if gs, err := s.ListGenerationSpecs(ctx, id, 0); err != nil || len(gs) != 4 || string(gs[0].Spec) != `{"size":3}` {
		t.Errorf("after the deletion: %d specs, %v", len(gs), err)
	}
}

// testTrimGenerationSpecs trims the specs of generations by count per
// resource and by age, never the current generation of a resource.
func testTrimGenerationSpecs(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets.yaml")
	many := resource("many", `{"v": 1}`)
	for _, spec := range []string{`{"v": 1}`, `{"v": 2}`, `{"v": 3}`, `{"v": 4}`} {
		if _, _, err := s.ApplyResource(ctx, withSpec(many, spec), src); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := s.CreateResource(ctx, resource("gone", `{"v": 1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ApplyResource(ctx, withSpec(resource("gone", ""), `{"v": 2}`), src); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteResource(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetResourceByName(ctx, many.Ref())
	if err != nil {
		t.Fatal(err)
	}

	// By count: the newest two of each resource stay.
	if n, err := s.TrimHistory(ctx, store.HistoryLimits{MaxPerResource: 2}, 100); err != nil || n != 2 {
		t.Fatalf("TrimHistory by count: %d, %v; want 2", n, err)
	}
	if gs, _ := s.ListGenerationSpecs(ctx, m.ID, 0); len(gs) != 2 || gs[0].Generation != 4 || gs[1].Generation != 3 {
		t.Errorf("after a trim by count, %d specs stay; want generations 4 and 3", len(gs))
	}

	// By age: everything written before now goes, but for the current
	// generation of a resource that exists. Wait for the clock to pass
	// what was written, at the millisecond precision of the stores.
	latest := time.Time{}
	for _, rid := range []int64{m.ID, gone.ID} {
		gs, _ := s.ListGenerationSpecs(ctx, rid, 1)
		if len(gs) == 1 && gs[0].CreatedAt.After(latest) {
			latest = gs[0].CreatedAt
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !now().After(latest.Add(time.Millisecond)) {
		if time.Now().After(deadline) {
			t.Fatalf("the clock stays before %s", latest)
		}
		runtime.Gosched()
	}
	if n, err := s.TrimHistory(ctx, store.HistoryLimits{MaxAge: time.Millisecond}, 100); err != nil || n != 3 {
		t.Fatalf("TrimHistory by age: %d, %v; want 3 (generation 3 of many, both of gone)", n, err)
	}
	if gs, _ := s.ListGenerationSpecs(ctx, m.ID, 0); len(gs) != 1 || gs[0].Generation != 4 {
		t.Errorf("after a trim by age, %d specs of many stay; want its current generation", len(gs))
	}
	if gs, _ := s.ListGenerationSpecs(ctx, gone.ID, 0); len(gs) != 0 {
		t.Errorf("after a trim by age, %d specs of a deleted resource stay", len(gs))
	}
}
