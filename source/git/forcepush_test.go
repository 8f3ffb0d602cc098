package git

import (
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// TestForcePushToAncestor moves a branch back to an older commit of its
// history, as a force-push of it does, under a source that keeps a shallow
// clone: the clone lacks that commit, though it has what came after it,
// and must follow all the same, with every engine.
func TestForcePushToAncestor(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"a.yaml": "a: 0\n"})
			zero := r.Commit("zero")
			r.Write(map[string]string{"a.yaml": "a: 1\n"})
			r.Commit("one")
			r.Write(map[string]string{"a.yaml": "a: 2\n"})
			r.Commit("two")
			s := newEngineSource(t, r.URL(), e, nil)
			fetch(t, s)
			r.Git("reset", "-q", "--hard", zero)
			snap := fetch(t, s)
			if snap.Revision != manifest.Revision("main@sha1:"+zero) {
				t.Fatalf("revision %s, want %s", snap.Revision, zero)
			}
			assertContents(t, snap, map[string]string{"a.yaml": "a: 0\n"})
		})
	}
}
