package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// testAgents records agents, lists them with the store's time of their
// last heartbeat, and forgets those not seen for a while.
func testAgents(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.RecordAgent(ctx, &store.Agent{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RecordAgent without id: %v", err)
	}
	started := now().Add(-time.Minute).Truncate(time.Millisecond)
	for _, a := range []*store.Agent{{ID: "b-agent", Host: "host-b", Version: "v1", StartedAt: started},
		{ID: "a-agent", Host: "host-a", Version: "v2", StartedAt: started}} {
		if err := s.RecordAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	agents, err := s.ListAgents(ctx)
	if err != nil || len(agents) != 2 {
		t.Fatalf("ListAgents: %v %v", agents, err)
	}
	a := agents[0]
	if a.ID != "a-agent" || a.Host != "host-a" || a.Version != "v2" || !a.StartedAt.Equal(started) ||
		time.Since(a.LastSeenAt) > time.Minute || time.Since(a.LastSeenAt) < -time.Minute {
		t.Errorf("first agent %+v", a)
	}
	first := a.LastSeenAt
	// A heartbeat moves LastSeenAt on and may change the version.
	waitFor(t, 5*time.Second, "a later heartbeat", func() bool {
		if err := s.RecordAgent(ctx, &store.Agent{ID: "a-agent", Host: "host-a", Version: "v3", StartedAt: started}); err != nil {
			t.Fatal(err)
		}
		agents, _ = s.ListAgents(ctx)
		return len(agents) == 2 && agents[0].LastSeenAt.After(first)
	})
	if agents[0].Version != "v3" {
		t.Errorf("after a heartbeat: %+v", agents[0])
	}
	// A clean stop is listed as stopped, however long ago the agent beat;
	// one that merely stops beating is gone once it missed several beats.
	if err := s.StopAgent(ctx, "b-agent"); err != nil {
		t.Fatalf("StopAgent: %v", err)
	}
	if err := s.StopAgent(ctx, "no-such-agent"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StopAgent of an unknown agent: %v", err)
	}
	agents, _ = s.ListAgents(ctx)
	if len(agents) != 2 || agents[1].StoppedAt == nil || agents[0].StoppedAt != nil ||
		time.Since(*agents[1].StoppedAt) > time.Minute || agents[1].StoppedAt.Location() != time.UTC {
		t.Fatalf("after StopAgent(b-agent): %+v %+v", agents[0], agents[1])
	}
	later := agents[1].StoppedAt.Add(store.AgentGoneAfter * 10)
	if st := agents[1].State(later); st != store.AgentStopped {
		t.Errorf("stopped agent long after: %s", st)
	}
	if st := agents[0].State(agents[0].LastSeenAt.Add(store.AgentGoneAfter)); st != store.AgentGone {
		t.Errorf("silent agent: %s", st)
	}
	if st := agents[0].State(agents[0].LastSeenAt); st != store.AgentAlive {
		t.Errorf("beating agent: %s", st)
	}
	// Started again under the same id, it runs again.
	if err := s.RecordAgent(ctx, &store.Agent{ID: "b-agent", Host: "host-b", Version: "v1", StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	if agents, _ = s.ListAgents(ctx); agents[1].StoppedAt != nil {
		t.Errorf("restarted agent still stopped: %+v", agents[1])
	}
	if err := s.StopAgent(ctx, "b-agent"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ForgetAgents(ctx, time.Hour); err != nil || n != 0 {
		t.Errorf("ForgetAgents(1h) = %d, %v", n, err)
	}
	if _, err := s.ForgetAgents(ctx, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ForgetAgents(0): %v", err)
	}
	// Stopped agents are forgotten like gone ones.
	forgotten := 0
	waitFor(t, 5*time.Second, "both agents to be older than 1ms", func() bool {
		n, err := s.ForgetAgents(ctx, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		forgotten += n
		return forgotten == 2
	})
	if agents, _ := s.ListAgents(ctx); len(agents) != 0 {
		t.Errorf("agents left: %v", agents)
	}
}

// testLeaseSince records when the current holder claimed a resource.
func testLeaseSince(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, _, err := s.ApplyResource(ctx, resource("held", `{}`), gitSource("infra", "h.yaml")); err != nil {
		t.Fatal(err)
	}
	before := now().Add(-time.Minute)
	cs := claim(t, s, "holder", 1)
	if len(cs) != 1 {
		t.Fatalf("claimed %d", len(cs))
	}
	after := time.Now().Add(time.Minute)
	r, err := s.GetResource(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, at := range map[string]*time.Time{"claim": cs[0].LeasedAt, "row": r.LeasedAt} {
		if at == nil || at.Before(before) || at.After(after) || at.Location() != time.UTC {
			t.Errorf("%s: leased at %v, want the claim's time in UTC", what, at)
		}
	}
	if r.LeaseOwner != "holder" {
		t.Errorf("lease owner %q", r.LeaseOwner)
	}
}
