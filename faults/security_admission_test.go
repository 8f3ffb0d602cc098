package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	gosync "sync"
	"testing"
	"time"
)

// freezeHook is an admission hook served on loopback that refuses every
// deletion while frozen, and records what it was asked.
type freezeHook struct {
	*httptest.Server
	mu     gosync.Mutex
	frozen bool
	asked  []freezeRequest
}

type freezeRequest struct {
	UID       string          `json:"uid"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Operation string          `json:"operation"`
	Source    string          `json:"source"`
	OldObject json.RawMessage `json:"oldObject"`
}

// freezeMessage is the reason the hook gives for its refusals.
const freezeMessage = "deletions need a change ticket during the freeze"

func newFreezeHook(t *testing.T) *freezeHook {
	t.Helper()
	h := &freezeHook{frozen: true}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request freezeRequest `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.asked = append(h.asked, review.Request)
		frozen := h.frozen
		h.mu.Unlock()
		resp := map[string]any{"uid": review.Request.UID, "allowed": true}
		if frozen && review.Request.Operation == "delete" {
			resp = map[string]any{"uid": review.Request.UID, "allowed": false, "status": map[string]any{"message": freezeMessage}}
		}
		json.NewEncoder(w).Encode(map[string]any{"apiVersion": "no8s.io/v1", "kind": "AdmissionReview", "response": resp})
	}))
	t.Cleanup(h.Close)
	return h
}

// deletions returns the names of the resources of source whose deletion
// the hook was asked about, in order.
func (h *freezeHook) deletions(source string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.asked {
		if r.Operation == "delete" && r.Source == source && strings.Contains(string(r.OldObject), `"name":"`+r.Name+`"`) {
			out = append(out, r.Name)
		}
	}
	return out
}

func (h *freezeHook) thaw() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = false
}

// admissionOrphanSetup runs an agent with sources alpha (the Site type and
// a1) and beta (b1, b2) until everything is ready, then restarts it with a
// configuration that lists alpha only and has the admission hook hookURL,
// and waits until beta is orphaned. It returns the second agent's base
// URL, its configuration file and the world folder.
func admissionOrphanSetup(t *testing.T, hookURL string) (string, string, string) {
	t.Helper()
	f := newOrphanFixture(t)

	cfg := writeConfig(t, f.work, f.config("alpha")+fmt.Sprintf(`admission:
  - {name: change-freeze, url: %q, type: validating, operations: [delete], failurePolicy: Fail, timeout: 5s}
`, hookURL))
	second := startAgent(t, f.work, "run", "--config", cfg)
	base := second.URL()
	waitUntil(t, 30*time.Second, "beta to be orphaned", func() (bool, string) {
		var beta apiSource
		status := apiGet(t, base+"/api/v1/sources/beta", &beta)
		return status == http.StatusOK && beta.Phase == "orphaned", fmt.Sprintf("%d %+v", status, beta)
	})
	return base, cfg, f.world
}

// assertNothingDestroyed checks that beta's resources are kept, not marked
// for destruction, and that no destroy ran: a manual reconcile of a1 is
// served first, so that the reconcilers had their chance at anything due.
func assertNothingDestroyed(t *testing.T, base, world string) {
	t.Helper()
	var beta apiSource
	if status := apiGet(t, base+"/api/v1/sources/beta", &beta); status != http.StatusOK || beta.Phase != "orphaned" {
		t.Fatalf("source beta after the refused prune: %d %+v; want it still orphaned", status, beta)
	}
	for _, name := range []string{"b1", "b2"} {
		var r struct {
			Status              string     `json:"status"`
			DeletionRequestedAt *time.Time `json:"deletion_requested_at"`
		}
		if status := apiGet(t, fmt.Sprintf("%s/api/v1/resources/%d", base, orphanResourceID(t, base, name)), &r); status != http.StatusOK ||
			r.DeletionRequestedAt != nil || r.Status == "deleting" {
			t.Fatalf("%s after the refused prune: %d %+v; want it kept as it was", name, status, r)
		}
	}
	applies := countCalls(t, world, "apply")
	orphanCall(t, "POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", base, orphanResourceID(t, base, "a1")), http.StatusAccepted)
	waitUntil(t, 60*time.Second, "the manual reconcile of a1", func() (bool, string) {
		c := countCalls(t, world, "apply")
		return c > applies, fmt.Sprintf("%d applies", c)
	})
	if got := countCalls(t, world, "destroy"); got != 0 {
		t.Fatalf("%d destroys after the refused prune, want 0", got)
	}
	if w := readWorld(t, world); w["b1"] == "" || w["b2"] == "" {
		t.Fatalf("world after the refused prune: %v; want b1 and b2 still there", w)
	}
}

// TestSecurityAdmissionOrphanPrune prunes an orphaned source, through the
// API and through the CLI, under an admission hook that refuses deletions:
// the hook is asked about each resource, the refusal is reported (403 with
// the hook's name and message; the CLI fails saying so), and nothing is
// destroyed. Once the hook allows deletions, the same prune destroys them.
func TestSecurityAdmissionOrphanPrune(t *testing.T) {
	t.Parallel()
	hook := newFreezeHook(t)
	base, cfg, world := admissionOrphanSetup(t, hook.URL)

	// Through the API.
	body := orphanCall(t, "DELETE", base+"/api/v1/sources/beta?mode=prune&approve=true", http.StatusForbidden)
	if !strings.Contains(body, freezeMessage) || !strings.Contains(body, "change-freeze") {
		t.Errorf("the refused prune answered %s; want the hook's name and message", body)
	}
	if asked := hook.deletions("beta"); len(asked) != 2 {
		t.Errorf("the hook was asked about the deletions of %v; want b1 and b2", asked)
	}
	assertNothingDestroyed(t, base, world)

	// Through the CLI, on the store directly.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentBinary(t), "delete", "--config", cfg, "--mode", "prune", "--approve", "source", "beta")
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), freezeMessage) ||
		!strings.Contains(string(out), "change-freeze") {
		t.Errorf("delete source beta --mode prune --approve: %v\n%s\nwant exit status 1 with the hook's refusal", err, out)
	}
	if asked := hook.deletions("beta"); len(asked) != 4 {
		t.Errorf("the hook was asked about the deletions of %v; want b1 and b2 twice", asked)
	}
	assertNothingDestroyed(t, base, world)

	// The refusals were the hook's: once it allows deletions, the prune
	// destroys both resources and the source goes.
	hook.thaw()
	orphanCall(t, "DELETE", base+"/api/v1/sources/beta?mode=prune&approve=true", http.StatusAccepted)
	waitUntil(t, 60*time.Second, "beta's resources to be destroyed and the source to go", func() (bool, string) {
		rs := listResources(t, base)
		status := apiGet(t, base+"/api/v1/sources/beta", nil)
		return len(rs) == 1 && status == http.StatusNotFound, fmt.Sprintf("%d resources, source %d", len(rs), status)
	})
	if got := countCalls(t, world, "destroy"); got != 2 {
		t.Errorf("%d destroys once the hook allowed the prune, want 2", got)
	}
}
