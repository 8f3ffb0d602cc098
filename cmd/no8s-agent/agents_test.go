package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// agentIDRE finds the agent's id in its start line.
var agentIDRE = regexp.MustCompile(`msg="agent started" agent=(\S+)`)

// id waits for the agent's start line and returns its id.
func (p *process) id() string {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := agentIDRE.FindStringSubmatch(p.log.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-p.done:
			p.done <- err
			p.t.Fatalf("the agent exited before starting: %v", err)
		case <-deadline:
			p.t.Fatal("the agent did not start within 60s")
		case <-tick.C:
		}
	}
}

// readURL reads url and returns its body; anything but 200 fails the test.
func readURL(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", url, resp.StatusCode, body, err)
	}
	return body
}

// apiAgents lists the agents through GET /api/v1/agents, by id.
func apiAgents(t *testing.T, base string) map[string]api.Agent {
	t.Helper()
	var list []api.Agent
	if err := json.Unmarshal(readURL(t, base+"/api/v1/agents"), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Agent{}
	for _, a := range list {
		out[a.ID] = a
	}
	return out
}

// TestAgentsStoppedOrGone runs three built agents on one PostgreSQL
// database: one stopped with SIGTERM is listed as stopped (API, get agents,
// no8s_agents) at once and for good, not gone; one killed with SIGKILL is
// listed as alive until it missed its heartbeats, and then as gone, which
// is what the No8sAgentGone alert counts.
func TestAgentsStoppedOrGone(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	bin := binary(t)
	dir := t.TempDir()
	args := []string{"run", "--database", url, "--listen", "127.0.0.1:0", "--source", t.TempDir()}
	watcher := startBinary(t, bin, dir, args...)
	base := watcher.addr()
	clean := startBinary(t, bin, dir, args...)
	killed := startBinary(t, bin, dir, args...)
	cleanID, killedID := clean.id(), killed.id()
	waitAgents := func(what string, ok func(map[string]api.Agent) bool) map[string]api.Agent {
		t.Helper()
		var as map[string]api.Agent
		waitFor(t, 2*store.AgentGoneAfter+30*time.Second, nil, what, func() (bool, string) {
			as = apiAgents(t, base)
			return ok(as), fmt.Sprintf("%+v", as)
		})
		return as
	}
	waitAgents("three agents alive", func(as map[string]api.Agent) bool {
		n := 0
		for _, a := range as {
			if a.State == store.AgentAlive && a.Alive {
				n++
			}
		}
		return n == 3
	})
	metric := func(state string) string {
		t.Helper()
		re := regexp.MustCompile(`(?m)^no8s_agents\{state="` + state + `"\} (\S+)$`)
		m := re.FindSubmatch(readURL(t, base+"/metrics"))
		if m == nil {
			t.Fatalf("no no8s_agents{state=%q} in /metrics", state)
		}
		return string(m[1])
	}
	getAgents := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{"get", "agents", "--database", url}, &out, &errOut); code != 0 {
			t.Fatalf("get agents: exit %d: %s", code, errOut.String())
		}
		return out.String()
	}
	row := func(table, id string) string {
		for _, line := range strings.Split(table, "\n") {
			if strings.HasPrefix(line, id+" ") {
				return line
			}
		}
		t.Fatalf("get agents lists no %s:\n%s", id, table)
		return ""
	}

	clean.stop()
	if !strings.Contains(clean.log.String(), `msg="agent stopped"`) {
		t.Fatalf("no clean stop in the log:\n%s", clean.log)
	}
	// Stopped at once: no waiting for missed heartbeats.
	as := apiAgents(t, base)
	if a := as[cleanID]; a.State != store.AgentStopped || a.Alive || a.StoppedAt == nil {
		t.Errorf("after SIGTERM: %+v, want stopped with its stop time", a)
	}
	if got := row(getAgents(), cleanID); !strings.Contains(got, " stopped ") {
		t.Errorf("get agents after SIGTERM: %q, want stopped", got)
	}
	if s, g := metric("stopped"), metric("gone"); s != "1" || g != "0" {
		t.Errorf("after SIGTERM: no8s_agents stopped %s, gone %s; want 1, 0", s, g)
	}

	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	killed.done <- nil
	as = waitAgents("the killed agent gone", func(as map[string]api.Agent) bool {
		return as[killedID].State == store.AgentGone
	})
	// Long after its last heartbeat, the cleanly stopped one is still
	// stopped, not gone.
	if a := as[cleanID]; a.State != store.AgentStopped || a.Alive {
		t.Errorf("%s after the kill: %+v, want still stopped", cleanID, a)
	}
	if a := as[killedID]; a.Alive || a.StoppedAt != nil {
		t.Errorf("killed agent: %+v", a)
	}
	table := getAgents()
	if got := row(table, killedID); !strings.Contains(got, " gone ") {
		t.Errorf("get agents after SIGKILL: %q, want gone", got)
	}
	if got := row(table, cleanID); !strings.Contains(got, " stopped ") {
		t.Errorf("get agents after SIGKILL: %q, want still stopped", got)
	}
	if a, s, g := metric("alive"), metric("stopped"), metric("gone"); a != "1" || s != "1" || g != "1" {
		t.Errorf("no8s_agents alive %s, stopped %s, gone %s; want 1 each", a, s, g)
	}
	watcher.stop()
}
