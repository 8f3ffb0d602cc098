package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestPackedResourcesReadBack packs resources of two kinds, the way an idle
// agent's read model does, and checks that each reads back byte for byte,
// alone and in a page, and takes less room than its JSON.
func TestPackedResourcesReadBack(t *testing.T) {
	t.Parallel()
	m := newReadModel(nil, slog.New(slog.DiscardHandler), 0)
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	var want [][]byte
	for i := range 300 {
		kind := []string{"Service", "Database"}[i%2]
		r := &store.Resource{ID: int64(i + 1), Resource: manifest.Resource{Kind: kind, Group: "bench.no8s.io", Version: "v1",
			Name: fmt.Sprintf("r-%04d", i), Labels: map[string]string{"team": fmt.Sprintf("team-%d", i%7)},
			Spec:     json.RawMessage(fmt.Sprintf(`{"image":"registry.example.com/app:%d","replicas":%d,"tier":"gold"}`, i, i%5)),
			SpecHash: fmt.Sprintf("sha256:%064x", i), Action: "noop"},
			Source: store.SourceRef{Name: "bench", Path: fmt.Sprintf("r-%04d.yaml", i)}, Generation: 1, ObservedGeneration: 1,
			Phase: manifest.PhaseReady, StatusMessage: "applied generation 1 with action noop",
			Conditions: []manifest.Condition{{Type: "Ready", Status: "True", Reason: "ReconcileSucceeded", LastTransitionTime: at}},
			CreatedAt:  at, UpdatedAt: at.Add(time.Duration(i) * time.Millisecond)}
		e := newModelResource(r)
		want = append(want, bytes.Clone(e.json))
		m.putLocked(e)
	}
	p := &packer{dicts: map[string]*[]byte{}}
	// Twice: the first pass chooses each kind's dictionary.
	m.pack(t.Context(), p, time.Now().Add(time.Hour))
	m.pack(t.Context(), p, time.Now().Add(time.Hour))
	var raw, packed int
	for i, id := range m.ids {
		e := m.byID[id]
		if !e.packed() {
			t.Fatalf("resource %d not packed", id)
		}
		raw += len(want[i])
		packed += len(e.json)
		var b writeCounter
		if err := e.writeTo(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want[i]) || e.size() != len(want[i]) {
			t.Fatalf("resource %d reads back as\n%s\nnot\n%s", id, b.Bytes(), want[i])
		}
		// Whole, so that masking sees every secret uncut.
		if b.writes != 1 {
			t.Fatalf("resource %d written in %d pieces", id, b.writes)
		}
	}
	if packed*4 > raw {
		t.Errorf("packed resources take %d bytes of %d: less than a quarter saved", packed, raw)
	}
	t.Logf("%d resources: %d bytes of JSON packed into %d", len(want), raw, packed)

	// A page mixes packed and unpacked ones.
	changed := *m.byID[7]
	changed.dict, changed.n, changed.json = nil, 0, want[6]
	m.putLocked(&changed)
	m.ready = true
	s := &Server{model: m, pageTurns: make(chan struct{}, 1)}
	got, err := s.listPage(httptest.NewRequest("GET", "/api/v1/resources", nil), &store.ResourceFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	page := append([]byte("["), bytes.Join(want, []byte(","))...)
	page = append(page, "]\n"...)
	if !bytes.Equal(got.body, page) || got.rows != len(want) || got.last != int64(len(want)) {
		t.Fatal("the page of packed resources differs from their JSON")
	}
}

// writeCounter is a buffer that counts the writes it takes.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestSettlingResourcesPackedLater checks that a resource that is due or
// being reconciled is left unpacked while settled ones are packed, and is
// packed once it has waited long.
func TestSettlingResourcesPackedLater(t *testing.T) {
	t.Parallel()
	m := newReadModel(nil, slog.New(slog.DiscardHandler), 0)
	at := time.Now()
	var settling []int64
	for i := range 60 {
		r := &store.Resource{ID: int64(i + 1), Resource: manifest.Resource{Kind: "Service", Group: "bench.no8s.io", Version: "v1",
			Name: fmt.Sprintf("r-%04d", i), Spec: json.RawMessage(fmt.Sprintf(`{"replicas":%d,"tier":"gold"}`, i%5)), Action: "noop"},
			Source: store.SourceRef{Name: "bench"}, Generation: 2, ObservedGeneration: 2, Phase: manifest.PhaseReady,
			CreatedAt: at, UpdatedAt: at}
		switch i % 6 {
		case 1:
			r.LeaseOwner, r.Phase = "agent-1", manifest.PhaseReconciling
		case 2:
			r.ObservedGeneration, r.Phase = 1, manifest.PhasePending
		case 3:
			r.DeletionRequestedAt = &at
		case 4:
			r.ReconcileRequestedAt = &at
		}
		e := newModelResource(r)
		if i%6 >= 1 && i%6 <= 4 {
			settling = append(settling, e.id)
		}
		m.putLocked(e)
	}
	p := &packer{dicts: map[string]*[]byte{}}
	// Made packAfter ago: settled ones are packed, settling ones not.
	cutoff := time.Now().Add(time.Millisecond)
	m.pack(t.Context(), p, cutoff)
	for _, id := range m.ids {
		e := m.byID[id]
		isSettling := slices.Contains(settling, id)
		if isSettling && e.packed() {
			t.Fatalf("resource %d is due or being reconciled, but was packed", id)
		}
		if !isSettling && !e.packed() && id != 1 {
			t.Fatalf("settled resource %d was not packed", id)
		}
	}
	// Made packSettlingAfter ago: all are packed.
	m.pack(t.Context(), p, cutoff.Add(packSettlingAfter-packAfter))
	for _, id := range settling {
		if !m.byID[id].packed() {
			t.Fatalf("resource %d waited long, but was not packed", id)
		}
	}
}

// TestPackingWaitsForBurstsToSettle checks that the packer leaves settled
// resources alone while bursts of changes go on, and packs them once the
// last burst is packQuietFor old, or at once when too much waits.
func TestPackingWaitsForBurstsToSettle(t *testing.T) {
	t.Parallel()
	at := time.Now()
	model := func() *readModel {
		m := newReadModel(nil, slog.New(slog.DiscardHandler), 0)
		for i := range 20 {
			m.putLocked(newModelResource(&store.Resource{ID: int64(i + 1), Resource: manifest.Resource{Kind: "Service",
				Group: "bench.no8s.io", Version: "v1", Name: fmt.Sprintf("r-%04d", i),
				Spec: json.RawMessage(fmt.Sprintf(`{"replicas":%d,"tier":"gold"}`, i%5)), Action: "noop"},
				Source: store.SourceRef{Name: "bench"}, Generation: 1, ObservedGeneration: 1, Phase: manifest.PhaseReady,
				CreatedAt: at, UpdatedAt: at}))
		}
		return m
	}
	packedCount := func(m *readModel) int {
		n := 0
		for _, id := range m.ids {
			if m.byID[id].packed() {
				n++
			}
		}
		return n
	}
	// Every resource is made before the cutoff, so each is due to be
	// packed; only the time of the last burst differs.
	tests := []struct {
		name string
		// burst is how long ago the last burst was; none when 0.
		burst  time.Duration
		budget int
		packed bool
	}{
		{"no burst yet", 0, packBusyBudget, true},
		{"the last burst is packQuietFor old", packQuietFor + time.Millisecond, packBusyBudget, true},
		{"a burst within packQuietFor", time.Millisecond, packBusyBudget, false},
		{"a burst, but more than the budget waits", time.Millisecond, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := model()
			cutoff := time.Now().Add(time.Millisecond)
			m.packBudget = tt.budget
			if tt.burst != 0 {
				m.burstAt.Store(time.Now().Add(-tt.burst).UnixNano())
			}
			m.pack(t.Context(), &packer{dicts: map[string]*[]byte{}}, cutoff)
			// The first of a kind is its dictionary and stays unpacked.
			if got := packedCount(m); (got == len(m.ids)-1) != tt.packed || (got != 0 && !tt.packed) {
				t.Fatalf("%d of %d resources packed; want them packed: %v", got, len(m.ids), tt.packed)
			}
		})
	}
}
