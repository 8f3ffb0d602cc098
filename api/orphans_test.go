package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
)

// TestOrphanedResources: the resources of a source no configuration lists
// read as orphaned, one by one and in lists, as soon as the source is
// orphaned and no longer once it is served again; a reconcile request for
// one is refused with 409 saying why, rather than accepted and never run.
func TestOrphanedResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	e.addOldSource("old")
	var list []api.Resource
	e.must("GET", "/api/v1/resources?source=old", "", "", http.StatusOK, &list)
	if len(list) != 2 || list[0].Orphaned {
		t.Fatalf("resources of a served source: %+v", list)
	}
	id := list[0].ID
	path := fmt.Sprintf("/api/v1/resources/%d", id)
	e.must("POST", path+"/reconcile", writeToken, "", http.StatusAccepted, nil)

	// wait polls the API until every resource of source old reads as want.
	wait := func(want bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var one api.Resource
			var all []api.Resource
			e.must("GET", path, "", "", http.StatusOK, &one)
			e.must("GET", "/api/v1/resources?source=old", "", "", http.StatusOK, &all)
			if one.Orphaned == want && len(all) == 2 && all[0].Orphaned == want && all[1].Orphaned == want {
				return
			}
			select {
			case <-deadline:
				t.Fatalf("resources of source old: not orphaned=%v after 10s: %+v %+v", want, one, all)
			case <-tick.C:
			}
		}
	}
	if _, err := e.syncer.MarkOrphans(ctx, []string{"infra"}); err != nil {
		t.Fatal(err)
	}
	wait(true)
	status, body, _ := e.call("POST", path+"/reconcile", writeToken, "")
	var apiErr struct {
		Error string `json:"error"`
	}
	if status != http.StatusConflict || json.Unmarshal(body, &apiErr) != nil ||
		!strings.Contains(apiErr.Error, "source old is orphaned") || !strings.Contains(apiErr.Error, "delete source old") {
		t.Errorf("reconcile of an orphaned source's resource = %d %s; want 409 saying why", status, body)
	}
	// The resource of a served source is untouched.
	var served api.Resource
	e.must("GET", fmt.Sprintf("/api/v1/resources/%d", e.gitRes.ID), "", "", http.StatusOK, &served)
	if served.Orphaned {
		t.Errorf("a served source's resource reads as orphaned: %+v", served)
	}

	// Served again: no longer orphaned, and reconciled on request.
	e.addOldSource("old")
	wait(false)
	e.must("POST", path+"/reconcile", writeToken, "", http.StatusAccepted, nil)
}
