package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRemoteFaults takes a Git remote away from a running agent in the two
// ways networks fail: connections refused for a while, then connections
// accepted and never answered, which only the fetch timeout ends. Each time
// the last applied state must stay, untouched; the source's status must say
// why; and the agent must apply a new commit by itself once the remote is
// back.
func TestRemoteFaults(t *testing.T) {
	t.Parallel()
	remote := newGitRemote(t)
	files := sites("sites", siteCount, 1)
	files["types/site.yaml"] = siteType
	head := remote.Commit(t, files, "ten sites")
	srv := serveGitHTTP(t, remote)
	f := startFleet(t, fmt.Sprintf(`  - name: sites
    git: {url: %q, branch: main, interval: 1s, timeout: 2s}`, srv.URL()))
	f.waitApplied(t, "sites", head, siteCount)
	applies := countCalls(t, f.world, "apply")

	// untouched fails the test when anything was applied or destroyed
	// since the last commit was applied.
	untouched := func(t *testing.T) {
		t.Helper()
		f.assertIntact(t, siteCount)
		if n := countCalls(t, f.world, "apply"); n != applies {
			t.Fatalf("%d apply call(s) while the remote was away, want %d", n, applies)
		}
	}
	// resume commits a change while the remote is away, brings it back, and
	// waits until the change is applied.
	resume := func(t *testing.T, replicas int) {
		t.Helper()
		head = remote.Commit(t, sites("sites", siteCount, replicas), fmt.Sprintf("%d replicas", replicas))
		srv.Up()
		f.waitApplied(t, "sites", head, siteCount)
		waitUntil(t, 60*time.Second, "every site resized", func() (bool, string) {
			w := readWorld(t, f.world)
			for name, spec := range w {
				if want := fmt.Sprintf(`{"replicas":%d}`, replicas); spec != want {
					return false, fmt.Sprintf("%s has %s, want %s", name, spec, want)
				}
			}
			return true, ""
		})
		if n := countCalls(t, f.world, "destroy"); n != 0 {
			t.Fatalf("%d destroy call(s), want none", n)
		}
		applies = countCalls(t, f.world, "apply")
	}

	t.Run("down", func(t *testing.T) {
		srv.Down()
		down := time.Now()
		src := f.waitSource(t, "sites", "the source to report the remote down", failedWith("failed", "FetchFailed", "connection refused"))
		if !strings.HasSuffix(src.LastAppliedRevision, head) {
			t.Fatalf("applied revision %s, want the last commit %s", src.LastAppliedRevision, head)
		}
		// Stay down a while: every retry must fail the same way and
		// change nothing.
		waitUntil(t, time.Minute, "the remote to stay down for 15s", func() (bool, string) {
			src := f.waitSource(t, "sites", "the source to still report the remote down", failedWith("failed", "FetchFailed"))
			if !strings.HasSuffix(src.LastAppliedRevision, head) {
				t.Fatalf("applied revision %s while the remote was down", src.LastAppliedRevision)
			}
			untouched(t)
			return time.Since(down) > 15*time.Second, "down for " + time.Since(down).Round(time.Second).String()
		})
		resume(t, 2)
	})

	t.Run("hang", func(t *testing.T) {
		srv.Hang()
		start := time.Now()
		src := f.waitSource(t, "sites", "the fetch timeout to fire", failedWith("failed", "FetchFailed", "deadline exceeded"))
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the hang was reported after %s, with a 2s fetch timeout", took)
		}
		if !strings.HasSuffix(src.LastAppliedRevision, head) {
			t.Fatalf("applied revision %s, want the last commit %s", src.LastAppliedRevision, head)
		}
		untouched(t)
		resume(t, 3)
	})
}
