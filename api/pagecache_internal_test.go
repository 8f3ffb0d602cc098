package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestPagesKeptOnlyWhileUnchanged shows that a page prepared once is
// answered again as it was while the resources stay as they were, and
// never after any of them changed, was added or went: a kept page must not
// hide a change the copy has applied.
func TestPagesKeptOnlyWhileUnchanged(t *testing.T) {
	t.Parallel()
	m := newReadModel(nil, slog.New(slog.DiscardHandler), 0)
	m.ready = true
	s := &Server{model: m, pageTurns: make(chan struct{}, 1)}
	put := func(id int64, phase manifest.Phase, team string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.putLocked(newModelResource(&store.Resource{ID: id,
			Resource: manifest.Resource{Kind: "Service", Group: "example.com", Version: "v1", Name: fmt.Sprintf("svc-%d", id),
				Labels: map[string]string{"team": team}, Spec: json.RawMessage(`{"replicas":1}`), Action: "noop"},
			Source: store.SourceRef{Name: "apps"}, Generation: 1, Phase: phase,
			CreatedAt: time.Unix(0, 0).UTC(), UpdatedAt: time.Unix(0, 0).UTC()}))
	}
	for id := int64(1); id <= 5; id++ {
		put(id, manifest.PhasePending, "a")
	}
	list := func(f store.ResourceFilter) *cachedPage {
		t.Helper()
		p, err := s.listPage(httptest.NewRequest("GET", "/api/v1/resources", nil), &f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	contains := func(p *cachedPage, s string) bool { return bytes.Contains(p.body, []byte(s)) }

	first := list(store.ResourceFilter{Limit: 3})
	if again := list(store.ResourceFilter{Limit: 3}); again != first {
		t.Fatal("an unchanged page was prepared again")
	}
	if other := list(store.ResourceFilter{Limit: 3, After: 3}); other == first || other.rows != 2 || other.last != 5 {
		t.Fatalf("the next page is %+v", other)
	}
	if byTeam := list(store.ResourceFilter{Limit: 3, Labels: map[string]string{"team": "b"}}); byTeam.rows != 0 {
		t.Fatalf("a filter that selects nothing answered %d rows", byTeam.rows)
	}

	for _, change := range []struct {
		name  string
		apply func()
		check func(p *cachedPage) bool
	}{
		{"a status changed", func() { put(2, manifest.PhaseReady, "a") }, func(p *cachedPage) bool { return contains(p, `"ready"`) }},
		{"a resource added", func() { put(6, manifest.PhasePending, "a") }, func(p *cachedPage) bool { return contains(p, `"svc-6"`) }},
		{"a resource gone", func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.removeLocked(map[int64]bool{6: true})
		}, func(p *cachedPage) bool { return !contains(p, `"svc-6"`) }},
		{"the copy built afresh", func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.resourcesSeq++
		}, func(p *cachedPage) bool { return true }},
	} {
		before := list(store.ResourceFilter{Limit: 10})
		change.apply()
		after := list(store.ResourceFilter{Limit: 10})
		if after == before || !change.check(after) {
			t.Fatalf("after %s the page answered is\n%s", change.name, after.body)
		}
	}
}

// TestPageCacheBounded shows that the kept pages stay within their count
// and bytes, the least recently used going first.
func TestPageCacheBounded(t *testing.T) {
	t.Parallel()
	var c pageCache
	for i := range 3 * maxCachedPages {
		c.put(&cachedPage{key: fmt.Sprint(i), seq: 1, body: make([]byte, maxCachedPageBytes/8)})
		if len(c.pages) > maxCachedPages || c.bytes > maxCachedPageBytes {
			t.Fatalf("after %d pages: %d kept, %d bytes", i+1, len(c.pages), c.bytes)
		}
	}
	if c.get("0", 1) != nil {
		t.Error("the oldest page is still kept")
	}
	if c.get(fmt.Sprint(3*maxCachedPages-1), 1) == nil {
		t.Error("the newest page is gone")
	}
	c.put(&cachedPage{key: "huge", seq: 1, body: make([]byte, maxCachedPageBytes/2)})
	if c.get("huge", 1) != nil {
		t.Error("a page of half the limit was kept")
	}
	if c.get(fmt.Sprint(3*maxCachedPages-1), 2) != nil || c.get(fmt.Sprint(3*maxCachedPages-1), 1) != nil {
		t.Error("a page asked for at a later state was answered, or kept after")
	}
}

// TestPagesKeptWhilePacked shows that packing the resources, which holds
// them another way but does not change them, keeps the pages prepared
// from them.
func TestPagesKeptWhilePacked(t *testing.T) {
	t.Parallel()
	m := newReadModel(nil, slog.New(slog.DiscardHandler), 0)
	m.ready = true
	s := &Server{model: m, pageTurns: make(chan struct{}, 1)}
	for id := int64(1); id <= 20; id++ {
		m.putLocked(newModelResource(&store.Resource{ID: id,
			Resource: manifest.Resource{Kind: "Service", Group: "example.com", Version: "v1", Name: fmt.Sprintf("svc-%d", id),
				Spec: json.RawMessage(fmt.Sprintf(`{"replicas":%d,"image":"registry.example.com/app:1.0"}`, id)), Action: "noop"},
			Source: store.SourceRef{Name: "apps"}, Generation: 1, Phase: manifest.PhaseReady}))
	}
	list := func() *cachedPage {
		t.Helper()
		p, err := s.listPage(httptest.NewRequest("GET", "/api/v1/resources", nil), &store.ResourceFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := list()
	p := &packer{dicts: map[string]*[]byte{}}
	m.pack(t.Context(), p, time.Now().Add(time.Hour))
	m.pack(t.Context(), p, time.Now().Add(time.Hour))
	packed := 0
	for _, e := range m.byID {
		if e.packed() {
			packed++
		}
	}
	if packed == 0 {
		t.Fatal("nothing was packed")
	}
	if after := list(); after != before {
		t.Fatalf("packing %d resources made the page be prepared again", packed)
	}
	if m.byRefLocked(manifest.ObjectRef{Kind: "Service", Name: "svc-7"}) != m.byID[7] {
		t.Fatal("by name and by id hold different copies of a packed resource")
	}
}
