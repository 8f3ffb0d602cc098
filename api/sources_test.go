package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

const subnetType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Subnet}
spec:
  group: infra.example.com
  versions:
    - name: v1
      schema: {type: object}
`

// addOldSource syncs a source named name that declares a type of its own
// and two resources, as an agent that served it did.
func (e *env) addOldSource(name string) {
	e.t.Helper()
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{
		file("types/subnet.yaml", strings.ReplaceAll(subnetType, "Subnet", "Subnet"+name)),
		file("net/a.yaml", "apiVersion: infra.example.com/v1\nkind: Subnet"+name+"\nmetadata: {name: a}\nspec: {}\n"),
		file("net/b.yaml", "apiVersion: infra.example.com/v1\nkind: Subnet"+name+"\nmetadata: {name: b}\nspec: {}\n"),
	}}
	if _, err := e.syncer.Sync(e.t.Context(), sync.Target{Name: name, Kind: store.SourceGit, URL: "https://git.example.com/" + name + ".git"}, snap, false); err != nil {
		e.t.Fatal(err)
	}
}

func TestDeleteSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	e.addOldSource("old")
	e.addOldSource("older")
	e.addOldSource("elsewhere")
	// This agent serves infra; another agent would serve elsewhere.
	if marked, err := e.syncer.MarkOrphans(ctx, []string{"infra", "elsewhere"}); err != nil || len(marked) != 2 {
		t.Fatalf("MarkOrphans = %v, %v; want old and older", marked, err)
	}
	var sources []api.Source
	e.must("GET", "/api/v1/sources", "", "", http.StatusOK, &sources)
	phases := map[string]string{}
	for _, s := range sources {
		phases[s.Name] = string(s.Phase)
	}
	if phases["old"] != "orphaned" || phases["older"] != "orphaned" || phases["infra"] != "ready" || phases["elsewhere"] != "ready" {
		t.Fatalf("source phases = %v", phases)
	}

	tests := []struct {
		name, path, token string
		status            int
		contains          string
	}{
		{"no token", "/api/v1/sources/old?mode=forget", "", http.StatusUnauthorized, "token"},
		{"no mode", "/api/v1/sources/old", writeToken, http.StatusBadRequest, "mode"},
		{"bad mode", "/api/v1/sources/old?mode=destroy", writeToken, http.StatusBadRequest, "mode=forget"},
		{"bad approve", "/api/v1/sources/old?mode=prune&approve=maybe", writeToken, http.StatusBadRequest, "approve"},
		{"unknown", "/api/v1/sources/nope?mode=forget", writeToken, http.StatusNotFound, "nope"},
		{"configured here", "/api/v1/sources/infra?mode=forget", writeToken, http.StatusConflict, "configured on this agent"},
		{"configured elsewhere", "/api/v1/sources/elsewhere?mode=prune&approve=true", writeToken, http.StatusConflict, "not orphaned"},
		{"api", "/api/v1/sources/api?mode=forget", writeToken, http.StatusBadRequest, "pseudo-source"},
		{"prune unapproved", "/api/v1/sources/old?mode=prune", writeToken, http.StatusConflict, "approve=true"},
	}
	for _, tt := range tests {
		status, body, _ := e.call("DELETE", tt.path, tt.token, "")
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: DELETE %s = %d %s, want %d with %q", tt.name, tt.path, status, body, tt.status, tt.contains)
		}
	}
	// The refusals changed nothing.
	for _, name := range []string{"old", "older", "elsewhere"} {
		rows, err := e.store.ListResources(ctx, store.ResourceFilter{Source: name})
		if err != nil || len(rows) != 2 {
			t.Fatalf("resources of %s after refusals: %d, %v", name, len(rows), err)
		}
		for _, r := range rows {
			if r.DeletionRequestedAt != nil {
				t.Fatalf("%s was marked for deletion by a refused request", r.Ref())
			}
		}
	}

	// Forget: the rows go, nothing is destroyed, history stays.
	var removal sync.Removal
	e.must("DELETE", "/api/v1/sources/old?mode=forget", writeToken, "", http.StatusOK, &removal)
	if removal.Forgotten != 2 || removal.Destroying != 0 || !removal.Removed {
		t.Fatalf("forget = %+v", removal)
	}
	if rows, err := e.store.ListResources(ctx, store.ResourceFilter{Source: "old"}); err != nil || len(rows) != 0 {
		t.Fatalf("resources of a forgotten source: %d, %v", len(rows), err)
	}
	if types, err := e.store.ListResourceTypes(ctx, store.TypeFilter{Source: "old"}); err != nil || len(types) != 0 {
		t.Fatalf("types of a forgotten source: %d, %v", len(types), err)
	}
	if _, err := e.store.GetSource(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("forgotten source: %v", err)
	}
	if hist, err := e.store.ListSyncRecords(ctx, "old", 10); err != nil || len(hist) != 1 {
		t.Fatalf("sync history of a forgotten source: %d, %v; want it kept", len(hist), err)
	}

	// Prune, approved: destruction is requested, the source is pruning.
	e.must("DELETE", "/api/v1/sources/older?mode=prune&approve=true", writeToken, "", http.StatusAccepted, &removal)
	if removal.Destroying != 2 || removal.Removed {
		t.Fatalf("prune = %+v", removal)
	}
	rows, err := e.store.ListResources(ctx, store.ResourceFilter{Source: "older"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("resources of a pruning source: %d, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Phase != manifest.PhaseDeleting {
			t.Fatalf("%s is %s, want deleting", r.Ref(), r.Phase)
		}
	}
	var src api.Source
	e.must("GET", "/api/v1/sources/older", "", "", http.StatusOK, &src)
	if src.Phase != string(store.SourcePruning) {
		t.Fatalf("pruned source phase %s, want pruning", src.Phase)
	}
}
