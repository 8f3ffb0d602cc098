package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// TestHistoryOfDeletedResource reads the reconcile history of a resource
// that was deleted, by kind and name and by its ID, on both stores, as an
// audit trail is read; a resource never declared is still not found.
func TestHistoryOfDeletedResource(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			var (
				st       store.Store
				database string
			)
			if backend == "sqlite" {
				database = filepath.Join(t.TempDir(), "state.db")
				s, err := sqlite.Open(ctx, database, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				st = s
			} else {
				database = pgtest.URL(t)
				s, err := postgres.Open(ctx, database)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				st = s
			}
			defer st.Close()
			ns, err := st.DefaultNamespace(ctx)
			if err != nil {
				t.Fatal(err)
			}
			src := store.SourceRef{Name: "infra", Path: "g.yaml", Revision: manifest.Revision("main@sha1:" + strings.Repeat("a", 40))}
			var ids []string
			for _, name := range []string{"w10", "w11"} {
				r, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Gadget", Group: "example.com", Version: "v1",
					Namespace: ns, Name: name, Spec: json.RawMessage(`{}`), SpecHash: "sha256:0"}, src)
				if err != nil {
					t.Fatal(err)
				}
				at := time.Now().Add(-time.Minute)
				for _, trig := range []store.Trigger{store.TriggerCreate, store.TriggerDelete} {
					if _, err := st.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: r.ID, Kind: r.Kind, Namespace: ns,
						Name: name, Generation: 1, Trigger: trig, Phase: "completed", Success: true, StartedAt: at, FinishedAt: at}); err != nil {
						t.Fatal(err)
					}
				}
				if name == "w10" {
					if err := st.DeleteResource(ctx, r.ID); err != nil {
						t.Fatal(err)
					}
				}
				ids = append(ids, strconv.FormatInt(r.ID, 10))
			}
			for _, ref := range []string{"Gadget/w10", "Gadget/" + ns + "/w10", ids[0], "Gadget/w11"} {
				code, out, errOut := runCLI(t, "get", "history", "--resource", ref, "--database", database, "-o", "json")
				var recs []api.ReconcileRecord
				if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 2 ||
					recs[0].Trigger != string(store.TriggerDelete) || recs[1].Trigger != string(store.TriggerCreate) {
					t.Errorf("get history --resource %s: exit %d, %s %s; want its 2 attempts, newest first", ref, code, out, errOut)
				}
			}
			code, out, errOut := runCLI(t, "get", "history", "--resource", "Gadget/w10", "--database", database)
			if code != 0 || !strings.Contains(out, "delete") || !strings.Contains(out, "create") {
				t.Errorf("get history table of a deleted resource: exit %d, %s %s", code, out, errOut)
			}
			for _, ref := range []string{"Gadget/never", "999999", "Gadget/other-ns/w10"} {
				if code, out, errOut := runCLI(t, "get", "history", "--resource", ref, "--database", database); code == 0 ||
					!strings.Contains(errOut, "not found") {
					t.Errorf("get history --resource %s: exit %d, %s %s; want not found", ref, code, out, errOut)
				}
			}
		})
	}
}
