package sync

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// digestReads counts the reads of every digest of a source, in and out of
// transactions.
type digestReads struct {
	store.Store
	n *int
}

func (d digestReads) ListResourceDigests(ctx context.Context, source string) ([]store.ResourceDigest, error) {
	*d.n++
	return d.Store.ListResourceDigests(ctx, source)
}

func (d digestReads) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	return d.Store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		return fn(ctx, digestReads{Store: tx, n: d.n})
	})
}

const ownedWidgetType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Widget}
spec:
  group: example.com
  action: make-widget
  versions:
    - name: v1
      schema:
        type: object
        properties:
          size: {type: integer}
`

func ownedWidget(name string, size int, extra string) string {
	return fmt.Sprintf("---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: %s\n%sspec: {size: %d}\n", name, extra, size)
}

func ownedSnapshot(files map[string]string) *source.Snapshot {
	var fs []manifest.File
	for path, data := range files {
		fs = append(fs, manifest.File{Path: path, Data: []byte(data), Hash: manifest.HashJSON([]byte(data))})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	return &source.Snapshot{Revision: source.DigestRevision(fs, nil), Files: fs}
}

// TestSyncPlansFromWhatItApplied checks that a sync plans against the
// digests the previous one left, without reading them, exactly while the
// source's row is the one that sync wrote and no resource is being
// deleted; and that those digests are the store's.
func TestSyncPlansFromWhatItApplied(t *testing.T) {
	t.Parallel()
	backends := map[string]func(t *testing.T) store.Store{
		"postgres": func(t *testing.T) store.Store {
			st, err := postgres.Open(t.Context(), pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			if err := st.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return st
		},
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			if err := st.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st := open(t)
			reads := 0
			s := New(digestReads{Store: st, n: &reads}, nil)
			other := New(st, nil) // another agent on the same store
			tg := Target{Name: "infra", Kind: store.SourceDir, Path: "/srv/infra", Prune: Prune{Enabled: true}}
			files := map[string]string{
				"types.yaml": ownedWidgetType,
				"w1.yaml":    ownedWidget("a", 1, "") + ownedWidget("b", 2, ""),
				"w2.yaml":    ownedWidget("c", 3, ""),
			}
			// check syncs files with syncer, wants reads digest reads so
			// far, and compares what the syncer keeps with the store.
			check := func(step string, syncer *Syncer, wantReads int, wantKept bool) *Plan {
				t.Helper()
				res, err := syncer.Sync(ctx, tg, ownedSnapshot(files), false)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if reads != wantReads {
					t.Errorf("%s: %d reads of the digests, want %d", step, reads, wantReads)
				}
				if syncer != s {
					return res.Plan
				}
				kept := s.owned[tg.Name]
				if (kept != nil) != wantKept {
					t.Fatalf("%s: digests kept: %v, want %v", step, kept != nil, wantKept)
				}
				if kept != nil {
					stored, err := st.ListResourceDigests(ctx, tg.Name)
					if err != nil {
						t.Fatal(err)
					}
					row, err := st.GetSource(ctx, tg.Name)
					if err != nil {
						t.Fatal(err)
					}
					// What is kept is used as the store's row stands now.
					// The cache keeps the set's order, the store id order.
					digests := slices.SortedFunc(slices.Values(s.cachedOwned(tg.Name, row)), func(a, b store.ResourceDigest) int { return cmp.Compare(a.ID, b.ID) })
					if !slices.Equal(digests, stored) {
						t.Errorf("%s: kept digests\n%+v\nwant the store's\n%+v", step, digests, stored)
					}
				}
				return res.Plan
			}
			check("first sync", s, 1, true)

			// An update, a creation, a move to another file (metadata only)
			// and an annotation: planned from what the first sync left.
			files["w1.yaml"] = ownedWidget("a", 10, "") + ownedWidget("b", 2, "  annotations: {no8s.io/prune: disabled}\n")
			delete(files, "w2.yaml")
			files["w3.yaml"] = ownedWidget("c", 3, "") + ownedWidget("d", 4, "")
			p := check("changes", s, 1, true)
			if len(p.Updates) != 1 || len(p.Creates) != 1 || p.Unchanged != 2 {
				t.Errorf("changes: plan %s, want 1 update, 1 creation, 2 unchanged", p.Summary())
			}

			// A deletion is planned from what was kept; the resource being
			// deleted may go at any time, so nothing is kept after it.
			files["w3.yaml"] = ownedWidget("c", 3, "")
			p = check("deletion", s, 1, false)
			if len(p.Deletes) != 1 || p.Deletes[0].Name != "d" {
				t.Fatalf("deletion: plan %s, want d deleted", p.Summary())
			}
			// Its destruction done, the reconciler removes it.
			d, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "d"})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.DeleteResource(ctx, d.ID); err != nil {
				t.Fatal(err)
			}
			files["w3.yaml"] = ownedWidget("c", 3, "") + ownedWidget("d", 5, "")
			p = check("declared again", s, 2, true)
			if len(p.Creates) != 1 || p.Creates[0].Name != "d" {
				t.Fatalf("declared again: plan %s, want d created", p.Summary())
			}

			// Another agent applies a revision: what this one kept is stale.
			files["w3.yaml"] = ownedWidget("c", 30, "") + ownedWidget("d", 5, "")
			check("another agent", other, 2, false)
			files["w3.yaml"] = ownedWidget("c", 30, "") + ownedWidget("d", 50, "")
			p = check("after another agent", s, 3, true)
			if len(p.Updates) != 1 || p.Updates[0].Name != "d" || p.Updates[0].Generation != 2 {
				t.Errorf("after another agent: plan %+v, want d at generation 2", p.Updates)
			}

			// A refusal writes the source's row: the next sync reads again.
			files["bad.yaml"] = ownedWidget("c", 1, "")
			if _, err := s.Sync(ctx, tg, ownedSnapshot(files), false); err == nil {
				t.Fatal("a duplicate was accepted")
			}
			delete(files, "bad.yaml")
			files["w1.yaml"] = ownedWidget("a", 11, "") + ownedWidget("b", 2, "  annotations: {no8s.io/prune: disabled}\n")
			check("after a refusal", s, 4, true)
		})
	}
}
