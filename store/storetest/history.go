package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func testReconcileHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateResource(ctx, resource("b", `{}`), gitSource("infra", "b.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	started := now().Add(-time.Hour)
	records := []*store.ReconcileRecord{
		{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 1, SourceRevision: "main@sha1:aaaa",
			Trigger: store.TriggerCreate, Phase: "applying", Success: false, Error: "boom", Created: 1,
			PlanOutput: "+ widget a", Duration: 1500 * time.Millisecond, AgentID: "agent-1",
			StartedAt: started, FinishedAt: started.Add(1500 * time.Millisecond)},
		{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 1, SourceRevision: "main@sha1:aaaa",
			Trigger: store.TriggerRetry, Phase: "completed", Success: true, Created: 1, Updated: 2, Deleted: 3,
			Outputs: json.RawMessage(`{"id":"w-123"}`), Duration: 42 * time.Millisecond, AgentID: "agent-2",
			StartedAt: started.Add(time.Minute), FinishedAt: started.Add(time.Minute + 42*time.Millisecond)},
		{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 2, SourceRevision: "main@sha1:bbbb",
			Trigger: store.TriggerDelete, Phase: "completed", Success: true, Deleted: 1, Duration: time.Second,
			AgentID: "agent-1", StartedAt: started.Add(2 * time.Minute), FinishedAt: started.Add(2*time.Minute + time.Second)},
	}
	var ids []int64
	for i, h := range records {
		id, err := s.AddReconcileRecord(ctx, h)
		if err != nil {
			t.Fatalf("AddReconcileRecord %d: %v", i, err)
		}
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Errorf("record %d got ID %d, not after %d", i, id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	if _, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: other.ID, Kind: "Widget", Name: "b",
		Generation: 1, Trigger: store.TriggerCreate, StartedAt: started, FinishedAt: started}); err != nil {
		t.Fatal(err)
	}

	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListReconcileRecords(ctx, r.ID, 0)
	if err != nil {
		t.Fatalf("ListReconcileRecords after the resource was deleted: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("ListReconcileRecords = %d records, want 3", len(got))
	}
	for i, g := range got {
		want := *records[len(records)-1-i]
		want.ID = ids[len(ids)-1-i]
		if !bytes.Equal(g.Outputs, want.Outputs) {
			t.Errorf("record %d: Outputs = %s, want %s", i, g.Outputs, want.Outputs)
		}
		checkUTC(t, "StartedAt", g.StartedAt)
		checkUTC(t, "FinishedAt", g.FinishedAt)
		if !g.StartedAt.Equal(want.StartedAt) || !g.FinishedAt.Equal(want.FinishedAt) {
			t.Errorf("record %d: times %v..%v, want %v..%v", i, g.StartedAt, g.FinishedAt, want.StartedAt, want.FinishedAt)
		}
		// Compare the rest field by field in one go.
		g2 := *g
		g2.Outputs, want.Outputs = nil, nil
		g2.StartedAt, g2.FinishedAt, want.StartedAt, want.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g2, want) {
			t.Errorf("record %d (newest first) = %+v, want %+v", i, g2, want)
		}
	}

	limited, err := s.ListReconcileRecords(ctx, r.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(limited) != 2 || limited[0].ID != ids[2] || limited[1].ID != ids[1] {
		t.Errorf("limit 2: %d records", len(limited))
	}
	none, err := s.ListReconcileRecords(ctx, other.ID+100, 0)
	if err != nil || len(none) != 0 {
		t.Errorf("ListReconcileRecords(unknown resource) = %d records, %v; want none and no error", len(none), err)
	}

	// By kind, namespace and name, the deleted resource's attempts are
	// found, and those of a resource declared again under its name after
	// them, newest first.
	again, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil || again.ID == r.ID {
		t.Fatalf("recreated: %+v, %v", again, err)
	}
	newest, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: again.ID, Kind: "Widget", Namespace: again.Namespace, Name: "a",
		Generation: 1, Trigger: store.TriggerCreate, StartedAt: started, FinishedAt: started})
	if err != nil {
		t.Fatal(err)
	}
	ref := manifest.ObjectRef{Kind: "Widget", Namespace: again.Namespace, Name: "a"}
	byRef, err := s.ListReconcileRecordsByRef(ctx, ref, 0)
	if err != nil || len(byRef) != 4 || byRef[0].ID != newest || byRef[1].ID != ids[2] || byRef[3].ID != ids[0] ||
		byRef[1].ResourceID != r.ID || byRef[1].Error != "" || byRef[3].Error != "boom" {
		t.Fatalf("ListReconcileRecordsByRef(%s) = %d records, %v; want 4, newest first", ref, len(byRef), err)
	}
	if lim, err := s.ListReconcileRecordsByRef(ctx, ref, 2); err != nil || len(lim) != 2 || lim[1].ID != ids[2] {
		t.Errorf("ListReconcileRecordsByRef limit 2 = %d records, %v", len(lim), err)
	}
	for _, other := range []manifest.ObjectRef{{Kind: "Widget", Namespace: again.Namespace, Name: "zzz"},
		{Kind: "Gadget", Namespace: again.Namespace, Name: "a"}, {Kind: "Widget", Namespace: "elsewhere", Name: "a"}} {
		if none, err := s.ListReconcileRecordsByRef(ctx, other, 0); err != nil || len(none) != 0 {
			t.Errorf("ListReconcileRecordsByRef(%s) = %d records, %v; want none", other, len(none), err)
		}
	}
	if _, err := s.ListReconcileRecordsByRef(ctx, ref, -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ListReconcileRecordsByRef with a negative limit: %v", err)
	}
}

func problems() []manifest.Problem {
	return []manifest.Problem{
		{File: "widgets/a.yaml", Line: 12, Document: 1, Pointer: "/spec/storage_gb", Message: "must be >= 10"},
		{File: "widgets/b.yaml", Document: 0, Message: "unknown kind Gizmo"},
		{Message: "two resources named Widget/c"},
	}
}

func testSources(t *testing.T, s store.Store) {
	ctx := t.Context()
	synced := now().Add(-time.Minute)
	applied := synced.Add(-time.Hour)
	commit := manifest.Commit{Author: "Ada <ada@example.com>", Message: "Grow the widgets", Time: now().Add(-time.Hour).In(time.FixedZone("X", -5*3600))}
	src := &store.Source{
		Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git", Path: "deploy",
		Phase: store.SourceFailed, Message: "3 problems",
		LastAppliedRevision: "main@sha1:1111", LastAttemptedRevision: "main@sha1:2222",
		LastCommit: commit, ApprovedRevision: "main@sha1:0000", LastSyncTime: &synced, LastAppliedTime: &applied,
		Errors: problems(),
	}
	first, err := s.PutSource(ctx, src)
	if err != nil {
		t.Fatalf("PutSource: %v", err)
	}
	for _, got := range []*store.Source{first, mustSource(t, s, "infra")} {
		if got.Name != src.Name || got.Kind != src.Kind || got.URL != src.URL || got.Path != src.Path ||
			got.Phase != src.Phase || got.Message != src.Message || got.LastAppliedRevision != src.LastAppliedRevision ||
			got.LastAttemptedRevision != src.LastAttemptedRevision || got.ApprovedRevision != src.ApprovedRevision {
			t.Errorf("source = %+v, want %+v", got, src)
		}
		if got.LastCommit.Author != commit.Author || got.LastCommit.Message != commit.Message || !got.LastCommit.Time.Equal(commit.Time) {
			t.Errorf("LastCommit = %+v, want %+v", got.LastCommit, commit)
		}
		checkUTC(t, "LastCommit.Time", got.LastCommit.Time)
		if !sameTime(got.LastSyncTime, &synced) {
			t.Errorf("LastSyncTime = %v, want %v", got.LastSyncTime, synced)
		}
		if !sameTime(got.LastAppliedTime, &applied) {
			t.Errorf("LastAppliedTime = %v, want %v", got.LastAppliedTime, applied)
		}
		if !reflect.DeepEqual(got.Errors, problems()) {
			t.Errorf("Errors = %+v, want %+v", got.Errors, problems())
		}
		checkUTC(t, "CreatedAt", got.CreatedAt)
	}

	fixed := &store.Source{Name: "infra", Kind: store.SourceGit, URL: src.URL, Phase: store.SourceReady,
		LastAppliedRevision: "main@sha1:2222", LastAttemptedRevision: "main@sha1:2222"}
	second, err := s.PutSource(ctx, fixed)
	if err != nil {
		t.Fatalf("PutSource(replace): %v", err)
	}
	if second.Phase != store.SourceReady || second.Path != "" || second.Message != "" || len(second.Errors) != 0 ||
		second.ApprovedRevision != "" || second.LastSyncTime != nil || !second.LastCommit.Time.IsZero() ||
		second.LastAppliedRevision != "main@sha1:2222" {
		t.Errorf("replaced source = %+v, want exactly %+v", second, fixed)
	}
	if !second.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("CreatedAt changed from %v to %v", first.CreatedAt, second.CreatedAt)
	}

	if _, err := s.PutSource(ctx, &store.Source{Name: "api", Kind: store.SourceAPI, Phase: store.SourceReady}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSource(ctx, &store.Source{Name: "local", Kind: store.SourceDir, Path: "/srv/manifests", Phase: store.SourcePending}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range list {
		got = append(got, l.Name)
	}
	if !equalStrings(got, []string{"api", "infra", "local"}) {
		t.Errorf("ListSources = %v, want [api infra local]", got)
	}
	_, err = s.GetSource(ctx, "nope")
	wantErr(t, "GetSource(missing)", err, store.ErrNotFound)
}

func mustSource(t *testing.T, s store.Store, name string) *store.Source {
	t.Helper()
	src, err := s.GetSource(t.Context(), name)
	if err != nil {
		t.Fatalf("GetSource(%s): %v", name, err)
	}
	return src
}

func testSyncHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	started := now().Add(-time.Hour)
	recs := []*store.SyncRecord{
		{Source: "infra", Revision: "main@sha1:1111", Commit: manifest.Commit{Author: "Ada", Message: "first", Time: started.Add(-time.Hour)},
			Success: true, Created: 10, Unchanged: 0, Duration: 2300 * time.Millisecond, Message: "applied",
			StartedAt: started, FinishedAt: started.Add(2300 * time.Millisecond)},
		{Source: "infra", Revision: "main@sha1:2222", Commit: manifest.Commit{Author: "Bob", Message: "break it"},
			Success: false, Errors: problems(), Duration: 15 * time.Millisecond, Message: "3 problems",
			StartedAt: started.Add(time.Minute), FinishedAt: started.Add(time.Minute + 15*time.Millisecond)},
		{Source: "infra", Revision: "main@sha1:3333", Success: true, Created: 1, Updated: 2, Deleted: 3, Unchanged: 4,
			Duration: time.Second, StartedAt: started.Add(2 * time.Minute), FinishedAt: started.Add(2*time.Minute + time.Second)},
	}
	var ids []int64
	for _, r := range recs {
		id, err := s.AddSyncRecord(ctx, r)
		if err != nil {
			t.Fatalf("AddSyncRecord: %v", err)
		}
		ids = append(ids, id)
	}
	if _, err := s.AddSyncRecord(ctx, &store.SyncRecord{Source: "other", Success: true, StartedAt: started, FinishedAt: started}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListSyncRecords(ctx, "infra", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("ListSyncRecords = %d records, want 3", len(got))
	}
	for i, g := range got {
		want := *recs[len(recs)-1-i]
		want.ID = ids[len(ids)-1-i]
		for _, tm := range []time.Time{g.StartedAt, g.FinishedAt} {
			checkUTC(t, "sync record time", tm)
		}
		if !g.StartedAt.Equal(want.StartedAt) || !g.FinishedAt.Equal(want.FinishedAt) || !g.Commit.Time.Equal(want.Commit.Time) {
			t.Errorf("record %d: times %v %v %v, want %v %v %v", i, g.StartedAt, g.FinishedAt, g.Commit.Time,
				want.StartedAt, want.FinishedAt, want.Commit.Time)
		}
		if len(g.Errors) == 0 && len(want.Errors) == 0 {
			g.Errors, want.Errors = nil, nil
		}
		g2 := *g
		g2.StartedAt, g2.FinishedAt, g2.Commit.Time = time.Time{}, time.Time{}, time.Time{}
		want.StartedAt, want.FinishedAt, want.Commit.Time = time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g2, want) {
			t.Errorf("record %d (newest first) = %+v, want %+v", i, g2, want)
		}
	}
	limited, err := s.ListSyncRecords(ctx, "infra", 1)
	if err != nil || len(limited) != 1 || limited[0].ID != ids[2] {
		t.Errorf("limit 1: %v, %v", limited, err)
	}
	none, err := s.ListSyncRecords(ctx, "nope", 0)
	if err != nil || len(none) != 0 {
		t.Errorf("ListSyncRecords(unknown source) = %d records, %v", len(none), err)
	}
}

// testTrimHistory trims reconcile and sync history by count and by age,
// in batches, and leaves the newest records of every resource and source.
func testTrimHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.TrimHistory(ctx, store.HistoryLimits{MaxPerResource: 1}, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("TrimHistory with batch 0: %v", err)
	}
	fresh, old := now().Add(-time.Hour), now().Add(-40*24*time.Hour)
	add := func(id int64, name string, at time.Time) int64 {
		t.Helper()
		rid, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: id, Kind: "Widget", Name: name, Generation: 1,
			Trigger: store.TriggerDrift, Phase: "completed", Success: true, StartedAt: at, FinishedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return rid
	}
	// Resource 1: 3 old attempts, then 30 recent ones; resource 2: 5 recent;
	// resource 3 (deleted long ago): 2 old ones.
	for range 3 {
		add(1, "many", old)
	}
	var newest []int64
	for range 30 {
		newest = append(newest, add(1, "many", fresh))
	}
	for range 5 {
		add(2, "few", fresh)
	}
	add(3, "gone", old)
	add(3, "gone", old)
	for i := range 14 {
		at := fresh
		if i < 2 {
			at = old
		}
		if _, err := s.AddSyncRecord(ctx, &store.SyncRecord{Source: "infra", Revision: manifest.Revision(fmt.Sprintf("main@sha1:%040d", i)),
			Success: true, StartedAt: at, FinishedAt: at}); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing to do without limits.
	if n, err := s.TrimHistory(ctx, store.HistoryLimits{}, 100); err != nil || n != 0 {
		t.Fatalf("TrimHistory without limits: %d, %v", n, err)
	}
	limits := store.HistoryLimits{MaxPerResource: 10, MaxAge: 30 * 24 * time.Hour}
	// 7 old records, 20 of resource 1 over the count, 2 syncs over it.
	const want = 7 + 20 + 2
	total, calls := 0, 0
	for {
		n, err := s.TrimHistory(ctx, limits, 6)
		if err != nil {
			t.Fatal(err)
		}
		if n > 6 {
			t.Fatalf("a batch of 6 deleted %d", n)
		}
		total += n
		calls++
		if n < 6 {
			break
		}
	}
	if total != want || calls != want/6+1 {
		t.Errorf("trimmed %d records in %d calls, want %d in %d", total, calls, want, want/6+1)
	}
	many, err := s.ListReconcileRecords(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(many) != 10 || many[0].ID != newest[29] || many[9].ID != newest[20] {
		t.Errorf("resource 1 keeps %d records, from %d to %d; want the newest 10", len(many), many[0].ID, many[len(many)-1].ID)
	}
	if few, _ := s.ListReconcileRecords(ctx, 2, 0); len(few) != 5 {
		t.Errorf("resource 2 keeps %d records, want its 5", len(few))
	}
	if gone, _ := s.ListReconcileRecords(ctx, 3, 0); len(gone) != 0 {
		t.Errorf("old records of a deleted resource stay: %d", len(gone))
	}
	syncs, _ := s.ListSyncRecords(ctx, "infra", 0)
	if len(syncs) != 10 || syncs[0].Revision != manifest.Revision(fmt.Sprintf("main@sha1:%040d", 13)) {
		t.Errorf("sync history keeps %d records", len(syncs))
	}
	if n, err := s.TrimHistory(ctx, limits, 6); err != nil || n != 0 {
		t.Errorf("a second trim: %d, %v", n, err)
	}
}

// testNoDriftFold folds consecutive identical no-drift checks into one
// record, written directly, by CompleteReconcile and by CompleteReconciles,
// and keeps apart what differs.
func testNoDriftFold(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, _, err := s.ApplyResource(ctx, resource("checked", `{}`), gitSource("infra", "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	at := now().Add(-time.Hour)
	check := func(plan, agent string, ok bool) *store.ReconcileRecord {
		at = at.Add(time.Minute)
		return &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Name: "checked", Generation: 1, Trigger: store.TriggerDrift,
			Phase: "completed", Success: ok, PlanOutput: plan, AgentID: agent, Duration: time.Second, StartedAt: at, FinishedAt: at,
			NoDriftChecks: 1}
	}
	add := func(h *store.ReconcileRecord) int64 {
		t.Helper()
		id, err := s.AddReconcileRecord(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	apply := &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Name: "checked", Generation: 1, Trigger: store.TriggerCreate,
		Phase: "completed", Success: true, StartedAt: at, FinishedAt: at}
	add(apply)
	first := add(check("no changes", "a1", true))
	if id := add(check("no changes", "a2", true)); id != first {
		t.Errorf("the second identical check was written as %d, not folded into %d", id, first)
	}
	last := check("no changes", "a3", true)
	add(last)
	// Through the queue: one completion alone, then in a batch.
	for i, batch := range []bool{false, true} {
		if _, err := s.RequestReconcile(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		cs := claim(t, s, fmt.Sprintf("q%d", i), 1)
		if len(cs) != 1 {
			t.Fatalf("claimed %d", len(cs))
		}
		done := ready(cs[0], true)
		done.Record = check("no changes", cs[0].Lease.Owner, true)
		last = done.Record
		if batch {
			res := s.CompleteReconciles(ctx, []store.ClaimCompletion{{Claim: cs[0], Done: done}})
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
		} else if _, err := s.CompleteReconcile(ctx, cs[0], done); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.ListReconcileRecords(ctx, r.ID, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records %d, %v; want the apply and one folded check", len(recs), err)
	}
	f := recs[0]
	if f.ID != first || f.NoDriftChecks != 5 || f.LastCheckedAt == nil || !f.LastCheckedAt.Equal(last.FinishedAt) ||
		f.AgentID != "q1" || recs[1].NoDriftChecks != 0 || recs[1].LastCheckedAt != nil {
		t.Errorf("folded record %+v (last checked %v), apply %+v", f, f.LastCheckedAt, recs[1])
	}
	// A different plan output, a failure, and a check after a failure are
	// records of their own.
	add(check("no changes; 1 warning", "a4", true))
	add(check("", "a5", false))
	add(check("no changes", "a6", true))
	add(check("no changes", "a7", true))
	recs, _ = s.ListReconcileRecords(ctx, r.ID, 0)
	if len(recs) != 5 || recs[0].NoDriftChecks != 2 || recs[1].NoDriftChecks != 1 || recs[2].NoDriftChecks != 1 {
		t.Errorf("after differing checks: %d records, counts %d %d %d", len(recs), recs[0].NoDriftChecks, recs[1].NoDriftChecks, recs[2].NoDriftChecks)
	}
}
