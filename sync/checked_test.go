package sync_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestLastCheckRecorded polls a folder that does not change: each poll
// that finds it as applied is recorded as the source's last check, its
// last sync time staying that of the one sync; with a longer spacing of
// the records, the polls between them write nothing.
func TestLastCheckRecorded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		every time.Duration
	}{{"every check", 0}, {"an hour apart", time.Hour}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			root := t.TempDir()
			write(t, filepath.Join(root, "types.yaml"), widgetType)
			write(t, filepath.Join(root, "w.yaml"), widget("a", "{size: 1}"))
			src, err := dir.New(dir.Config{Name: "local", Path: root})
			if err != nil {
				t.Fatal(err)
			}
			s := sync.New(st, nil)
			s.RecordChecksEvery(c.every)
			tg := sync.Target{Name: "local", Kind: store.SourceDir, Path: root, Prune: sync.Prune{Enabled: true}}
			attempts := startRunner(t, sync.NewRunner(s, []sync.Job{{Source: src, Target: tg, Interval: 10 * time.Millisecond}}, nil))
			if a := next(t, attempts, 10*time.Second); a.err != nil || a.res.Skipped {
				t.Fatalf("first sync: %+v", a)
			}
			first, err := st.GetSource(t.Context(), "local")
			if err != nil {
				t.Fatal(err)
			}
			if first.LastCheckTime == nil || !first.LastCheckTime.Equal(*first.LastSyncTime) {
				t.Fatalf("after the first sync: checked %v, synced %v; want the same", first.LastCheckTime, first.LastSyncTime)
			}
			for range 5 {
				if a := next(t, attempts, 10*time.Second); a.err != nil || !a.res.Skipped {
					t.Fatalf("a poll of the unchanged folder: %+v", a)
				}
			}
			got, err := st.GetSource(t.Context(), "local")
			if err != nil {
				t.Fatal(err)
			}
			if !got.LastSyncTime.Equal(*first.LastSyncTime) {
				t.Errorf("last sync moved from %v to %v without a change", first.LastSyncTime, got.LastSyncTime)
			}
			moved := got.LastCheckTime.After(*first.LastCheckTime)
			if moved != (c.every == 0) {
				t.Errorf("after five polls the last check is %v, the first sync's %v: moved %t, want %t",
					got.LastCheckTime, first.LastCheckTime, moved, c.every == 0)
			}
		})
	}
}
