package api_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestApproveRollback refuses a revision of infra as a rollback, as a Git
// source with a signature policy reports it, and approves it through the
// API the way the prune guard's refusals are: only that revision, and the
// source is synced at once.
func TestApproveRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git"}
	rev := manifest.Revision("main@sha1:" + strings.Repeat("0f", 20))
	snap := &source.Snapshot{Revision: rev, Files: []manifest.File{file("types/network.yaml", gitTypes)},
		Lineage: &source.Lineage{Applied: manifest.Revision("main@sha1:" + strings.Repeat("ab", 20)),
			Rollback: "commit 0f0f0f0f0f0f is an ancestor of abababababab, the commit last applied"}}
	_, err := e.syncer.Sync(t.Context(), tg, snap, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonRollbackRefused {
		t.Fatalf("want the rollback refused, got %v", err)
	}
	var src api.Source
	e.must("GET", "/api/v1/sources/infra", writeToken, "", 200, &src)
	if src.Phase != "stalled" || !strings.HasPrefix(src.Message, "RollbackRefused: ") || src.LastAttemptedRevision != string(rev) {
		t.Fatalf("source: %+v", src)
	}
	// The applied revision is not the one stalled on.
	if st, body, _ := e.call("POST", "/api/v1/sources/infra/approve?revision="+url.QueryEscape(src.LastAppliedRevision), writeToken, ""); st != 409 ||
		!strings.Contains(string(body), "stalled on revision "+string(rev)) {
		t.Fatalf("approving the applied revision = %d %s", st, body)
	}
	e.must("POST", "/api/v1/sources/infra/approve", writeToken, "", 202, nil)
	if calls := e.runner.calls(); len(calls) != 1 || calls[0] != "infra" {
		t.Fatalf("approval triggered %v", calls)
	}
	res, err := e.syncer.Sync(t.Context(), tg, snap, false)
	if err != nil || res.Revision != rev {
		t.Fatalf("after the approval: %+v %v", res, err)
	}
}
