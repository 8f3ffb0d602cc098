package migrations_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/migrations"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/sqlite"
	"github.com/no8s/no8s-agent/sync"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The manifests the store was synced from before namespaces: a namespaced
// type, and a CRD that says it is cluster-scoped, which the agent ignored
// then.
const (
	oldTypes = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Widget}
spec:
  group: example.com
  action: make
  versions:
    - name: v1
      schema: {type: object, properties: {size: {type: integer, default: 1}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterissuers.cert.example.com}
spec:
  group: cert.example.com
  names: {kind: ClusterIssuer, plural: clusterissuers}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`
	oldResources = `apiVersion: example.com/v1
kind: Widget
metadata: {name: a, labels: {team: x}}
spec: {size: 2}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: b}
dependsOn: [{kind: Widget, name: a}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: c}
dependsOn: [{kind: ClusterIssuer, name: ca}, {kind: Widget, name: a}]
---
apiVersion: cert.example.com/v1
kind: ClusterIssuer
metadata: {name: ca}
spec: {selfSigned: {}}
`
)

// migrating is a store that migrates its schema.
type migrating interface {
	store.Store
	Migrate(ctx context.Context) error
}

// dialect is what differs between the backends in this test.
type dialect struct {
	// fsys and dir hold the backend's migrations.
	fsys fs.FS
	dir  string
	// driver and dsn open the database with database/sql.
	driver, dsn string
	// at writes a time as the backend stores it.
	at func(time.Time) any
	// open opens the store on it.
	open func(t *testing.T) migrating
	// migrated records a migration applied by hand.
	migrated string
}

// TestNamespaceMigration builds a store at the schema before namespaces,
// with resources, dependencies, leases, queue state, history and
// notifications; migrates it; checks that every row is as it was, in the
// namespace "default"; and that a sync of the same manifests afterwards
// re-runs nothing: no new generation, nothing due that was not, leases
// held, no history written.
func TestNamespaceMigration(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "no8s.db")
		testNamespaceMigration(t, dialect{fsys: migrations.SQLite, dir: "sqlite", driver: "sqlite", dsn: path,
			at: func(tm time.Time) any { return tm.UnixMilli() },
			open: func(t *testing.T) migrating {
				st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(st.Close)
				return st
			},
			migrated: `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		testNamespaceMigration(t, dialect{fsys: migrations.Postgres, dir: "postgres", driver: "pgx", dsn: url,
			at: func(tm time.Time) any { return tm },
			open: func(t *testing.T) migrating {
				st, err := postgres.Open(t.Context(), url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(st.Close)
				return st
			},
			migrated: `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`})
	})
}

// namespaceMigration is the version of the migration under test.
const namespaceMigration = "namespaces"

func testNamespaceMigration(t *testing.T, d dialect) {
	ctx := t.Context()
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) sql.Result {
		t.Helper()
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", strings.SplitN(q, "\n", 2)[0], err)
		}
		return res
	}

	// The schema before the migration, recorded as a store records it.
	migs, err := migrations.Load(d.fsys, d.dir)
	if err != nil {
		t.Fatal(err)
	}
	// Those after it are applied with it, as an upgrade from before it would.
	at := slices.IndexFunc(migs, func(m migrations.Migration) bool { return m.Name == namespaceMigration })
	if at < 0 {
		t.Fatalf("no migration is named %s", namespaceMigration)
	}
	if d.dir == "sqlite" {
		exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	} else {
		exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	}
	for _, m := range migs[:at] {
		exec(m.SQL)
		exec(d.migrated, m.Version, m.Name)
	}

	// The store as the agent left it: every resource of the manifests,
	// written as it wrote them before namespaces.
	snap := snapshotOf(map[string]string{"types.yaml": oldTypes, "w.yaml": oldResources})
	docs, problems := manifest.DecodeFiles(snap.Files, manifest.DecodeOptions{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	set, err := manifest.Validate(docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	later := now.Add(time.Hour)
	for _, ty := range set.Types {
		for _, v := range ty.Versions {
			exec(`INSERT INTO resource_types (name, version, grp, description, action, schema, source_name, source_path,
					source_revision, created_at, updated_at, annotations)
				VALUES ($1, $2, $3, $4, $5, $6, 'infra', $7, $8, $9, $9, $10)`,
				ty.Name, v.Name, ty.Group, ty.Description, ty.Action, string(v.Schema), ty.Origin.File, string(snap.Revision),
				d.at(now), jsonText(t, ty.Annotations, "{}"))
		}
	}
	// What became of each: a is ready, b failed once and recovered, c has a
	// new generation waiting, ca is held by a worker of an agent that runs.
	type state struct {
		gen, observed int64
		phase, owner  string
		token         int64
		expires       any
	}
	states := map[string]state{
		"a":  {1, 1, "ready", "", 0, nil},
		"b":  {1, 1, "ready", "", 0, nil},
		"c":  {2, 1, "pending", "", 0, nil},
		"ca": {1, 0, "reconciling", "agent-old", 7, d.at(later)},
	}
	ids := map[string]int64{}
	insertResource := func(r *manifest.Resource, s state) int64 {
		t.Helper()
		// Dependencies and the metadata hash as they were before a
		// reference had a namespace.
		old := &manifest.Resource{Group: r.Group, Version: r.Version, Labels: r.Labels, Annotations: r.Annotations, Origin: r.Origin}
		for _, dep := range r.DependsOn {
			old.DependsOn = append(old.DependsOn, manifest.ObjectRef{Kind: dep.Kind, Name: dep.Name})
		}
		var id int64
		err := db.QueryRowContext(ctx, `INSERT INTO resources (kind, grp, type_version, name, labels, annotations, spec, spec_hash,
				action, depends_on, origin_document, origin_line, source_name, source_path, source_revision, meta_hash,
				generation, observed_generation, phase, status_message, conditions, lease_owner, lease_token, lease_expires_at,
				created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'infra', $13, $14, $15, $16, $17, $18, $19, '[]', $20, $21, $22, $23, $23)
			RETURNING id`,
			r.Kind, r.Group, r.Version, r.Name, jsonText(t, r.Labels, "{}"), jsonText(t, r.Annotations, "{}"), string(r.Spec), r.SpecHash,
			r.Action, jsonText(t, old.DependsOn, "[]"), r.Origin.Document, r.Origin.Line, r.Origin.File, string(snap.Revision),
			old.MetaHash(), s.gen, s.observed, s.phase, "as it was", s.owner, s.token, s.expires, d.at(now)).Scan(&id)
		if err != nil {
			t.Fatalf("insert %s: %v", r.Ref(), err)
		}
		return id
	}
	for _, r := range set.Resources {
		ids[r.Name] = insertResource(r, states[r.Name])
	}
	// A resource destroyed since: its id is never handed out again.
	destroyed := &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: "destroyed",
		Spec: []byte(`{}`), SpecHash: "sha256:d", Origin: manifest.Origin{File: "w.yaml"}}
	gone := insertResource(destroyed, state{1, 1, "ready", "", 0, nil})
	exec(`DELETE FROM resources WHERE id = $1`, gone)
	exec(`INSERT INTO reconcile_history (resource_id, kind, name, generation, trigger, phase, success, started_at, finished_at)
		VALUES ($1, 'Widget', 'b', 1, 'create', 'completed', $2, $3, $3), ($1, 'Widget', 'b', 1, 'retry', 'completed', $4, $3, $3),
			($5, 'Widget', 'a', 1, 'create', 'completed', $4, $3, $3)`, ids["b"], false, d.at(now), true, ids["a"])
	exec(`INSERT INTO notifications (event, severity, source, revision, kind, name, generation, message)
		VALUES ('ResourceFailed', 'error', 'infra', $1, 'Widget', 'b', 1, 'boom'), ('RevisionApplied', 'info', 'infra', $1, '', '', 0, 'applied')`,
		string(snap.Revision))
	exec(`INSERT INTO sources (name, kind, path, phase, last_applied_revision, last_attempted_revision, created_at, updated_at)
		VALUES ('infra', 'dir', '/srv/infra', 'ready', $1, $1, $2, $2)`, string(snap.Revision), d.at(now))

	tables := []string{"resources", "reconcile_history", "notifications", "resource_types", "sources"}
	before := map[string][]map[string]any{}
	for _, table := range tables {
		before[table] = rowsOf(t, db, table)
	}

	st := d.open(t)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("ping after migrating: %v", err)
	}
	if ns, err := st.DefaultNamespace(ctx); err != nil || ns != "default" {
		t.Fatalf("recorded default namespace %q, %v", ns, err)
	}
	// Statements prepared before read the tables as they were.
	db.Close()
	if db, err = sql.Open(d.driver, d.dsn); err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Every row is as it was, in the namespace "default"; dependencies
	// name it.
	for _, table := range tables {
		after := rowsOf(t, db, table)
		if len(after) != len(before[table]) {
			t.Fatalf("%s: %d rows, %d before", table, len(after), len(before[table]))
		}
		for i, row := range after {
			old := before[table][i]
			for col, v := range old {
				want := v
				if table == "resources" && col == "depends_on" {
					want = withNamespace(t, v)
					v = row[col]
					if !reflect.DeepEqual(decodeJSON(t, v), want) {
						t.Errorf("%s %v: depends_on %s, want %v", table, old["id"], v, want)
					}
					continue
				}
				if !reflect.DeepEqual(row[col], want) {
					t.Errorf("%s %v: %s = %#v, was %#v", table, old["id"], col, row[col], want)
				}
			}
			wantNS := map[string]any{"resources": "default", "reconcile_history": "default", "notifications": "default"}[table]
			if table == "notifications" && old["kind"] == "" {
				wantNS = ""
			}
			if wantNS != nil && row["namespace"] != wantNS {
				t.Errorf("%s %v: namespace %#v, want %#v", table, old["id"], row["namespace"], wantNS)
			}
			if table == "resource_types" && row["scope"] != "" {
				t.Errorf("%s %v: scope %#v, want none until its source writes it", table, old["id"], row["scope"])
			}
		}
	}
	notes, err := st.ListNotices(ctx, "", 10)
	if err != nil || len(notes) != len(before["notifications"]) {
		t.Fatalf("notices %v, %v", notes, err)
	}
	for _, n := range notes {
		if n.Kind != "" && (n.Namespace != "default" || n.Name != "b") {
			t.Errorf("notice %+v", n)
		}
	}
	hist, err := st.ListReconcileRecords(ctx, ids["b"], 0)
	if err != nil || len(hist) != 2 || hist[0].Namespace != "default" {
		t.Fatalf("history of b %+v, %v", hist, err)
	}
	b, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "b"})
	if err != nil || b.ID != ids["b"] || len(b.DependsOn) != 1 || b.DependsOn[0] != (manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "a"}) {
		t.Fatalf("b after migrating: %+v, %v", b, err)
	}
	// a, which b depends on, becoming ready again wakes b: the
	// dependencies' index follows the namespace.
	deps, err := st.ListResources(ctx, store.ResourceFilter{DependsOn: &manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "a"}})
	if err != nil || len(deps) != 2 {
		t.Fatalf("dependents of a: %v, %v", deps, err)
	}

	// A sync of the same manifests re-runs nothing. Forced, as the
	// revision is the one applied.
	s := sync.New(st, nil)
	tg := sync.Target{Name: "infra", Kind: store.SourceDir, Path: "/srv/infra", Prune: sync.Prune{Enabled: true}}
	res, err := s.Sync(ctx, tg, snap, false)
	if err != nil || !res.Skipped {
		t.Fatalf("the applied revision again: %+v, %v", res, err)
	}
	res, err = s.Sync(ctx, tg, snap, true)
	if err != nil {
		t.Fatalf("forced sync after migrating: %v", err)
	}
	if p := res.Plan; len(p.Creates)+len(p.Updates)+len(p.Deletes)+len(p.Forgets) != 0 || p.Unchanged != 4 {
		t.Fatalf("forced sync after migrating: %s", p.Summary())
	}
	for name, s := range states {
		r, err := st.GetResource(ctx, ids[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Generation != s.gen || r.ObservedGeneration != s.observed || string(r.Phase) != s.phase || r.LeaseOwner != s.owner || r.LeaseToken != s.token {
			t.Errorf("%s after the sync: generation %d/%d phase %s lease %q %d; was %+v", name, r.ObservedGeneration, r.Generation, r.Phase, r.LeaseOwner, r.LeaseToken, s)
		}
		// The CRD says cluster-scoped: its resource left "default", in
		// place; the rest stay there.
		wantNS := "default"
		if r.Kind == "ClusterIssuer" {
			wantNS = ""
		}
		if r.Namespace != wantNS {
			t.Errorf("%s in namespace %q, want %q", name, r.Namespace, wantNS)
		}
	}
	c, err := st.GetResource(ctx, ids["c"])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.DependsOn) != "[ClusterIssuer/ca Widget/a]" || c.DependsOn[1].Namespace != "default" || c.DependsOn[0].Namespace != "" {
		t.Errorf("c depends on %#v", c.DependsOn)
	}
	types, err := st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		want := manifest.ScopeNamespaced
		if ty.Name == "ClusterIssuer" {
			want = manifest.ScopeCluster
		}
		if ty.Scope != want {
			t.Errorf("type %s is %q, want %q", ty.Name, ty.Scope, want)
		}
	}
	// Only what was due before is due: c's waiting generation. ca's
	// lease still holds.
	claims, err := st.ClaimResources(ctx, store.ClaimParams{Owner: "agent-new", Limit: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].ID != ids["c"] {
		var got []string
		for _, cl := range claims {
			got = append(got, cl.Ref().String())
		}
		t.Fatalf("due after the sync: %v, want c alone", got)
	}
	for name, n := range map[string]int{"a": 1, "b": 2, "c": 0, "ca": 0} {
		if h, err := st.ListReconcileRecords(ctx, ids[name], 0); err != nil || len(h) != n {
			t.Errorf("history of %s: %d records, %v; want %d, as before", name, len(h), err, n)
		}
	}
	// A new resource gets an id never used before.
	r, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Namespace: "default", Group: "example.com", Version: "v1",
		Name: "new", Spec: json.RawMessage(`{}`), SpecHash: "sha256:x"}, store.SourceRef{Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID <= gone {
		t.Errorf("a new resource got id %d; %d was handed out before", r.ID, gone)
	}
}

// snapshotOf is a snapshot of in-memory files, as a folder source makes.
func snapshotOf(files map[string]string) *source.Snapshot {
	var fs []manifest.File
	for path, data := range files {
		fs = append(fs, manifest.File{Path: path, Data: []byte(data), Hash: manifest.HashJSON([]byte(data))})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	return &source.Snapshot{Revision: source.DigestRevision(fs, nil), Files: fs}
}

// jsonText is v as JSON, or empty when v is empty.
func jsonText(t *testing.T, v any, empty string) string {
	t.Helper()
	if reflect.ValueOf(v).Len() == 0 {
		return empty
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rowsOf reads every row of table, in id order (sources by name), as
// column -> value.
func rowsOf(t *testing.T, db *sql.DB, table string) []map[string]any {
	t.Helper()
	order := "id"
	if table == "sources" {
		order = "name"
	}
	rows, err := db.QueryContext(t.Context(), "SELECT * FROM "+table+" ORDER BY "+order)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]any{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			if tm, ok := vals[i].(time.Time); ok {
				vals[i] = tm.UTC()
			}
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeJSON decodes a JSON column's value.
func decodeJSON(t *testing.T, v any) any {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("JSON column holds %T", v)
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// withNamespace is a stored dependsOn list with the namespace "default" in
// every reference.
func withNamespace(t *testing.T, v any) any {
	t.Helper()
	list, _ := decodeJSON(t, v).([]any)
	out := []any{}
	for _, e := range list {
		m := e.(map[string]any)
		m["namespace"] = "default"
		out = append(out, m)
	}
	return out
}
