package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/sync"
)

// sse is a client of the event stream.
type sse struct {
	t     *testing.T
	lines chan string
}

type sseEvent struct {
	name, data string
}

// stream opens /api/v1/events with query and returns once subscribed.
func stream(t *testing.T, base, query string) *sse {
	t.Helper()
	return streamAt(t, base+"/api/v1/events"+query)
}

// streamAt opens the event stream at url and returns once subscribed.
func streamAt(t *testing.T, url string) *sse {
	t.Helper()
	return streamWith(t, url, "")
}

// streamWith is streamAt with a bearer token, when not empty.
func streamWith(t *testing.T, url, token string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events = %d %v", resp.StatusCode, resp.Header)
	}
	s := &sse{t: t, lines: make(chan string, 1024)}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	s.waitLine(": subscribed")
	return s
}

func (s *sse) waitLine(want string) {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stream ended before %q", want)
			}
			if l == want {
				return
			}
		case <-deadline:
			s.t.Fatalf("no %q within 10s", want)
		}
	}
}

// next returns the next event, skipping comments.
func (s *sse) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			switch {
			case !ok:
				s.t.Fatal("stream ended")
			case strings.HasPrefix(l, "event: "):
				ev.name = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				ev.data = strings.TrimPrefix(l, "data: ")
			case l == "" && ev.name != "":
				return ev
			}
		case <-deadline:
			s.t.Fatal("no event within 10s")
		}
	}
}

func (s *sse) nextResource() store.StatusEvent {
	s.t.Helper()
	ev := s.next()
	for ev.name == api.EventSource {
		ev = s.next()
	}
	if ev.name != api.EventResource {
		s.t.Fatalf("event %s %s, want a resource event", ev.name, ev.data)
	}
	var st store.StatusEvent
	if err := json.Unmarshal([]byte(ev.data), &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// TestEvents follows a resource through the stream: creation, claim,
// completion, deletion, with filters.
func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	all := stream(t, e.http.URL, "")
	dbs := stream(t, e.http.URL, "?kind=DatabaseCluster")
	infra := stream(t, e.http.URL, "?source=infra")

	var res api.Resource
	e.must("POST", "/api/v1/resources", writeToken, dbResource, 201, &res)
	for _, s := range []*sse{all, dbs} {
		if ev := s.nextResource(); ev.ID != res.ID || ev.Phase != manifest.PhasePending || ev.Source != "api" || ev.Generation != 1 {
			t.Errorf("create event = %+v", ev)
		}
	}
	// Both resources are due; the Git one is claimed too.
	cs, err := e.store.ClaimResources(t.Context(), store.ClaimParams{Owner: "agent-x", Limit: 2, Duration: time.Minute})
	if err != nil || len(cs) != 2 || cs[1].ID != res.ID {
		t.Fatalf("claim: %v %d", err, len(cs))
	}
	if ev := dbs.nextResource(); ev.Phase != manifest.PhaseReconciling {
		t.Errorf("claim event = %+v", ev)
	}
	// A change of the Git source reaches the infra stream, as a source
	// event and a resource event, and not the DatabaseCluster stream.
	snap := &source.Snapshot{Revision: "main@sha1:" + manifest.Revision(strings.Repeat("cd", 20)), Files: []manifest.File{
		file("net/network.yaml", strings.Replace(gitResources, "10.0.0.0/16", "10.2.0.0/16", 1)), file("types/network.yaml", gitTypes)}}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git"}, snap, false); err != nil {
		t.Fatal(err)
	}
	gotRes, gotSrc := false, false
	for !gotRes || !gotSrc {
		ev := infra.next()
		switch ev.name {
		case api.EventResource:
			// The filter holds: the API's resource never shows here.
			if !strings.Contains(ev.data, `"source":"infra"`) {
				t.Errorf("the infra stream got %s", ev.data)
			}
			gotRes = strings.Contains(ev.data, `"name":"prod-vpc"`) && strings.Contains(ev.data, `"generation":2`)
		case api.EventSource:
			var src api.Source
			if err := json.Unmarshal([]byte(ev.data), &src); err != nil {
				t.Fatal(err)
			}
			gotSrc = src.Name == "infra" && src.LastAppliedRevision == string(snap.Revision)
		}
	}
	if _, err := e.store.CompleteReconcile(t.Context(), cs[1], store.Completion{Status: store.StatusUpdate{
		Phase: manifest.PhaseReady, Message: "done", ObservedGeneration: 1}}); err != nil {
		t.Fatal(err)
	}
	if ev := dbs.nextResource(); ev.Phase != manifest.PhaseReady || ev.ObservedGeneration != 1 || ev.Message != "done" {
		t.Errorf("completion event = %+v", ev)
	}
	var deleted api.ResourceAction
	e.must("DELETE", "/api/v1/resources/"+itoa(res.ID), writeToken, "", 202, &deleted)
	if deleted.Message != "Resource deletion initiated" || deleted.ResourceID != res.ID || deleted.ID != res.ID || deleted.Status != manifest.PhaseDeleting {
		t.Errorf("DELETE answered %+v", deleted)
	}
	if ev := dbs.nextResource(); ev.Phase != manifest.PhaseDeleting {
		t.Errorf("deletion event = %+v", ev)
	}
	// The unfiltered stream saw the Git change too; the filtered one did
	// not: its events so far were all DatabaseCluster ones.
	for {
		ev := all.nextResource()
		if ev.Kind == "Network" {
			break
		}
	}
}

// TestEventsAcrossAgents checks that a change made through one agent shows
// in the stream of another agent on the same database.
func TestEventsAcrossAgents(t *testing.T) {
	t.Parallel()
	a := newEnv(t, nil)
	st, err := postgres.Open(t.Context(), a.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	_, b := serve(t, api.Options{Store: st, Syncer: sync.New(st, nil), Heartbeat: 20 * time.Millisecond})
	s := stream(t, b.URL, "?kind=DatabaseCluster")
	s.waitLine(": heartbeat")
	a.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	var res api.Resource
	a.must("POST", "/api/v1/resources", writeToken, dbResource, 201, &res)
	if ev := s.nextResource(); ev.ID != res.ID || ev.Name != "production-pg" {
		t.Errorf("event on agent b = %+v", ev)
	}
}

// TestEventsEndWithServer checks that streams end when the server stops,
// so that shutdown does not wait on them.
func TestEventsEndWithServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	st, err := postgres.Open(t.Context(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	srv := api.New(api.Options{Store: st, Syncer: sync.New(st, nil)})
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	s := stream(t, "http://"+ln.Addr().String(), "")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return within 4s of cancel with a stream open")
	}
	for range s.lines {
	}
}

// TestResourceEvents streams one resource's events: its own, not its
// neighbours'; an unknown resource is a 404.
func TestResourceEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	var res, other api.Resource
	e.must("POST", "/api/v1/resources", writeToken, dbResource, 201, &res)
	e.must("POST", "/api/v1/resources", writeToken, strings.Replace(dbResource, "production-pg", "staging-pg", 1), 201, &other)
	if status, body, _ := e.call("GET", "/api/v1/resources/999999/events", "", ""); status != http.StatusNotFound {
		t.Errorf("events of an unknown resource = %d %s", status, body)
	}
	s := streamAt(t, e.http.URL+"/api/v1/resources/"+itoa(res.ID)+"/events")
	e.must("POST", "/api/v1/resources/"+itoa(other.ID)+"/reconcile", writeToken, "", 202, nil)
	if _, err := e.store.SetResourceStatus(t.Context(), other.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetResourceStatus(t.Context(), res.ID, store.StatusUpdate{Phase: manifest.PhaseReady, Message: "mine"}); err != nil {
		t.Fatal(err)
	}
	// The stream may still carry the resource's creation, committed before
	// it subscribed; it must never carry the other's changes.
	for {
		ev := s.nextResource()
		if ev.ID != res.ID {
			t.Fatalf("the resource's stream carried %+v, another resource's event", ev)
		}
		if ev.Message == "mine" {
			break
		}
	}
}
