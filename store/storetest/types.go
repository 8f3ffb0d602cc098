package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
)

func widgetType(version, group string, src store.SourceRef) *store.ResourceType {
	return &store.ResourceType{
		Name:          "Widget",
		Version:       version,
		Group:         group,
		Description:   "A widget",
		Action:        "widget-maker",
		DriftInterval: 90 * time.Minute,
		Schema:        json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer","default":3}}}`),
		Source:        src,
	}
}

func testResourceTypes(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "types/widget.yaml")
	start := now()
	put := func(rt *store.ResourceType) *store.ResourceType {
		t.Helper()
		got, err := s.PutResourceType(ctx, rt)
		if err != nil {
			t.Fatalf("PutResourceType(%s %s): %v", rt.Name, rt.Version, err)
		}
		return got
	}
	w1 := widgetType("v1", "example.com", src)
	got := put(w1)
	if got.ID <= 0 {
		t.Errorf("ID = %d, want > 0", got.ID)
	}
	if got.Name != "Widget" || got.Version != "v1" || got.Group != "example.com" || got.Description != "A widget" ||
		got.Action != "widget-maker" || got.DriftInterval != 90*time.Minute || got.Source != src {
		t.Errorf("PutResourceType returned %+v, want the fields of %+v", got, w1)
	}
	if !bytes.Equal(got.Schema, w1.Schema) {
		t.Errorf("Schema = %s, want %s", got.Schema, w1.Schema)
	}
	checkUTC(t, "CreatedAt", got.CreatedAt)
	checkUTC(t, "UpdatedAt", got.UpdatedAt)
	if got.CreatedAt.Before(start.Add(-time.Minute)) {
		t.Errorf("CreatedAt = %v, long before the test started at %v", got.CreatedAt, start)
	}

	put(widgetType("v2", "example.com", src))
	gadget := widgetType("v1", "example.com", gitSource("other", "gadget.yaml"))
	gadget.Name = "Gadget"
	put(gadget)

	byID, err := s.GetResourceType(ctx, got.ID)
	if err != nil {
		t.Fatalf("GetResourceType: %v", err)
	}
	if byID.Name != "Widget" || byID.Version != "v1" || !bytes.Equal(byID.Schema, w1.Schema) || byID.DriftInterval != 90*time.Minute {
		t.Errorf("GetResourceType = %+v", byID)
	}
	byName, err := s.GetResourceTypeByName(ctx, "Widget", "v2")
	if err != nil {
		t.Fatalf("GetResourceTypeByName: %v", err)
	}
	if byName.Version != "v2" || byName.ID == got.ID {
		t.Errorf("GetResourceTypeByName(Widget, v2) = %+v", byName)
	}

	_, err = s.GetResourceType(ctx, got.ID+1000)
	wantErr(t, "GetResourceType(missing)", err, store.ErrNotFound)
	_, err = s.GetResourceTypeByName(ctx, "Widget", "v9")
	wantErr(t, "GetResourceTypeByName(missing)", err, store.ErrNotFound)

	for _, tc := range []struct {
		name   string
		filter store.TypeFilter
		want   []string
	}{
		{"all", store.TypeFilter{}, []string{"Gadget/v1", "Widget/v1", "Widget/v2"}},
		{"by name", store.TypeFilter{Name: "Widget"}, []string{"Widget/v1", "Widget/v2"}},
		{"by source", store.TypeFilter{Source: "other"}, []string{"Gadget/v1"}},
		{"by name and source", store.TypeFilter{Name: "Widget", Source: "other"}, nil},
		{"unknown name", store.TypeFilter{Name: "Nope"}, nil},
	} {
		list, err := s.ListResourceTypes(ctx, tc.filter)
		if err != nil {
			t.Fatalf("ListResourceTypes(%s): %v", tc.name, err)
		}
		var names []string
		for _, rt := range list {
			names = append(names, rt.Name+"/"+rt.Version)
		}
		if !equalStrings(names, tc.want) {
			t.Errorf("ListResourceTypes(%s) = %v, want %v", tc.name, names, tc.want)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testPutResourceTypeUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "types/widget.yaml")
	first, err := s.PutResourceType(ctx, widgetType("v1", "example.com", src))
	if err != nil {
		t.Fatal(err)
	}
	changed := widgetType("v1", "example.com", gitSource("infra", "types/moved.yaml"))
	changed.Description = "A better widget"
	changed.DriftInterval = 0
	changed.Schema = json.RawMessage(`{"type":"object"}`)
	second, err := s.PutResourceType(ctx, changed)
	if err != nil {
		t.Fatalf("PutResourceType(update): %v", err)
	}
	if second.ID != first.ID {
		t.Errorf("update changed the ID from %d to %d", first.ID, second.ID)
	}
	if second.Description != "A better widget" || second.DriftInterval != 0 || string(second.Schema) != `{"type":"object"}` ||
		second.Source.Path != "types/moved.yaml" {
		t.Errorf("after update: %+v", second)
	}
	if !second.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("CreatedAt changed from %v to %v", first.CreatedAt, second.CreatedAt)
	}
	if second.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("UpdatedAt went back from %v to %v", first.UpdatedAt, second.UpdatedAt)
	}
	list, err := s.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListResourceTypes = %d types, %v; want 1", len(list), err)
	}
}

func testPutResourceTypeOwnerConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	owner := gitSource("infra", "types/widget.yaml")
	if _, err := s.PutResourceType(ctx, widgetType("v1", "example.com", owner)); err != nil {
		t.Fatal(err)
	}
	intruder := widgetType("v1", "example.com", gitSource("team-b", "widget.yaml"))
	intruder.Description = "hijacked"
	_, err := s.PutResourceType(ctx, intruder)
	var oc *store.OwnerConflictError
	if !errors.As(err, &oc) {
		t.Fatalf("PutResourceType by another source: err = %v, want *store.OwnerConflictError", err)
	}
	wantErr(t, "owner conflict", err, store.ErrConflict)
	if oc.Owner != owner {
		t.Errorf("Owner = %+v, want %+v", oc.Owner, owner)
	}
	got, err := s.GetResourceTypeByName(ctx, "Widget", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "A widget" || got.Source != owner {
		t.Errorf("the conflicting put changed the row: %+v", got)
	}
	// Another version of the same name is a separate row and may have
	// another owner.
	if _, err := s.PutResourceType(ctx, widgetType("v2", "example.com", gitSource("team-b", "w.yaml"))); err != nil {
		t.Errorf("PutResourceType(v2 by another source): %v", err)
	}
}

func testPutResourceTypeGroupConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "types/widget.yaml")
	if _, err := s.PutResourceType(ctx, widgetType("v1", "example.com", src)); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutResourceType(ctx, widgetType("v2", "other.example.org", src))
	wantErr(t, "PutResourceType(v2 in another group)", err, store.ErrConflict)
	var oc *store.OwnerConflictError
	if errors.As(err, &oc) {
		t.Errorf("group conflict reported as an owner conflict: %v", err)
	}
	_, err = s.GetResourceTypeByName(ctx, "Widget", "v2")
	wantErr(t, "v2 after a refused put", err, store.ErrNotFound)

	if _, err := s.PutResourceType(ctx, widgetType("v2", "example.com", src)); err != nil {
		t.Errorf("PutResourceType(v2 in the same group): %v", err)
	}
	// Moving v1 to another group is refused while v2 stays in the old one.
	_, err = s.PutResourceType(ctx, widgetType("v1", "other.example.org", src))
	wantErr(t, "PutResourceType(v1 moved to another group)", err, store.ErrConflict)
}

func testDeleteResourceType(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "types/widget.yaml")
	for _, v := range []string{"v1", "v2"} {
		if _, err := s.PutResourceType(ctx, widgetType(v, "example.com", src)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.CreateResource(ctx, resource("a", `{"size":1}`), gitSource("infra", "widgets/a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.DeleteResourceType(ctx, "Widget", "v1")
	wantErr(t, "DeleteResourceType while a resource uses it", err, store.ErrInUse)
	if _, err := s.GetResourceTypeByName(ctx, "Widget", "v1"); err != nil {
		t.Errorf("type gone after a refused delete: %v", err)
	}
	// v2 has no resources.
	if err := s.DeleteResourceType(ctx, "Widget", "v2"); err != nil {
		t.Errorf("DeleteResourceType(v2): %v", err)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteResourceType(ctx, "Widget", "v1"); err != nil {
		t.Fatalf("DeleteResourceType after its resource went: %v", err)
	}
	_, err = s.GetResourceTypeByName(ctx, "Widget", "v1")
	wantErr(t, "GetResourceTypeByName after delete", err, store.ErrNotFound)
	err = s.DeleteResourceType(ctx, "Widget", "v1")
	wantErr(t, "DeleteResourceType twice", err, store.ErrNotFound)
}
