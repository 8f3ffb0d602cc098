package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// noticeEvents returns the events of every notice, oldest first, as
// "Event kind/name" or "Event source".
func noticeEvents(t *testing.T, s store.Store) []string {
	t.Helper()
	ns, err := s.ListNotices(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ns) - 1; i >= 0; i-- {
		n := ns[i]
		if n.Kind != "" {
			out = append(out, n.Event+" "+n.Kind+"/"+n.Name)
		} else {
			out = append(out, n.Event+" "+n.Source)
		}
	}
	return out
}

// testNoticesRecorded changes resources and sources as syncs and
// reconciles do: each transition is recorded once, whoever writes it.
func testNoticesRecorded(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicNotifications)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := s.ApplyResource(ctx, resource("a", `{}`), gitSource("infra", "widgets/a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	set := func(phase manifest.Phase, msg string) {
		t.Helper()
		if _, err := s.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: phase, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	// Failing five times in a row, with claims in between, is told once.
	for i := range 5 {
		set(manifest.PhaseReconciling, "")
		set(manifest.PhaseFailed, "attempt "+string(rune('1'+i))+" failed")
	}
	waitNote(t, notes, store.TopicNotifications, "a failure")
	set(manifest.PhaseReconciling, "")
	set(manifest.PhaseReady, "applied")
	set(manifest.PhaseReconciling, "")
	set(manifest.PhaseReady, "applied again")
	// A destroy that fails is told as such.
	if _, err := s.RequestDeletion(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	set(manifest.PhaseFailed, "destroy: boom")
	// A drift check that applied changes.
	if _, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 1,
		Trigger: store.TriggerDrift, Phase: "completed", Success: true, StartedAt: now(), FinishedAt: now()}); err != nil {
		t.Fatal(err)
	}
	// One that found nothing is not.
	if _, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Name: "a", Generation: 1,
		Trigger: store.TriggerDrift, Phase: "completed", Success: true, NoDriftChecks: 1, StartedAt: now(), FinishedAt: now()}); err != nil {
		t.Fatal(err)
	}

	// A source failing on a broken commit, failing again, recovering with
	// a revision applied, stalled on the prune guard.
	src := &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceFailed, Message: "2 problems",
		LastAttemptedRevision: "main@sha1:bad", Errors: []manifest.Problem{
			{File: "widgets/b.yaml", Line: 7, Message: "spec.size: expected integer"}, {Message: "no file"}}}
	for range 2 {
		if _, err := s.PutSource(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	src.Phase, src.Errors, src.LastAppliedRevision = store.SourceReady, nil, "main@sha1:good"
	for range 2 {
		if _, err := s.PutSource(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	src.Phase, src.Message = store.SourceStalled, "would delete 30 resources"
	if _, err := s.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	want := []string{"ResourceFailed Widget/a", "ResourceRecovered Widget/a", "DestroyFailed Widget/a", "DriftDetected Widget/a",
		"SourceFailed infra", "RevisionRefused infra", "SourceRecovered infra", "RevisionApplied infra", "SourceStalled infra",
		"RevisionRefused infra"}
	// One write may record two notices (a recovery and a revision
	// applied), whose order is the backend's.
	if got := noticeEvents(t, s); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("notices:\n got %q\nwant %q", got, want)
	}
	ns, err := s.ListNotices(ctx, "infra", 100)
	if err != nil {
		t.Fatal(err)
	}
	byEvent := map[string]*store.Notice{}
	for _, n := range ns {
		byEvent[n.Event] = n
	}
	if n := byEvent[store.EventResourceFailed]; n.Message != "attempt 1 failed" || n.Severity != "error" || n.Generation != 1 ||
		n.Source != "infra" || n.Routed || n.DoneAt != nil {
		t.Errorf("ResourceFailed: %+v", n)
	}
	if n := byEvent[store.EventSourceFailed]; !strings.Contains(n.Message, "widgets/b.yaml:7: spec.size: expected integer") ||
		!strings.Contains(n.Message, "-: no file") || n.Revision != "main@sha1:bad" {
		t.Errorf("SourceFailed does not name the file and line: %+v", n)
	}
	if n := byEvent[store.EventSourceStalled]; !strings.Contains(n.Message, "no8s-agent approve source infra") {
		t.Errorf("SourceStalled does not say how to approve: %+v", n)
	}
	if n := byEvent[store.EventRevisionApplied]; n.Revision != "main@sha1:good" {
		t.Errorf("RevisionApplied: %+v", n)
	}
	checkUTC(t, "CreatedAt", ns[0].CreatedAt)
	if other, err := s.ListNotices(ctx, "other", 10); err != nil || len(other) != 0 {
		t.Errorf("notices of another source: %v %v", other, err)
	}
}

// testNoticeDelivery routes notices to providers, claims them, and
// completes their deliveries, fenced by the lease.
func testNoticeDelivery(t *testing.T, s store.Store) {
	ctx := t.Context()
	putSource(t, s, "infra", store.SourceFailed)
	if _, err := s.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceReady,
		LastAppliedRevision: "main@sha1:one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimNotices(ctx, "a1", 0, time.Minute); err == nil {
		t.Error("ClaimNotices with a limit of 0 succeeded")
	}
	if cs, err := s.ClaimNotices(ctx, "a1", 10, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("claimed notices before routing: %v %v", cs, err)
	}
	n, err := s.RouteNotices(ctx, 10, func(n *store.Notice) []string {
		if n.Event == store.EventRevisionApplied {
			return nil // no provider wants it
		}
		return []string{"hook", "chat"}
	})
	if err != nil || n != 3 {
		t.Fatalf("RouteNotices = %d, %v; want 3 (failed, recovered, applied)", n, err)
	}
	if n, err := s.RouteNotices(ctx, 10, func(*store.Notice) []string { return []string{"x"} }); err != nil || n != 0 {
		t.Fatalf("routing again = %d, %v", n, err)
	}
	cs, err := s.ClaimNotices(ctx, "a1", 10, time.Minute)
	if err != nil || len(cs) != 2 {
		t.Fatalf("ClaimNotices = %+v, %v; want the two routed to providers", cs, err)
	}
	if again, err := s.ClaimNotices(ctx, "a2", 10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("a second agent claimed leased notices: %+v %v", again, err)
	}
	first := cs[0]
	if !slices.Equal(first.Pending, []string{"hook", "chat"}) || first.LeaseOwner != "a1" {
		t.Fatalf("claimed notice %+v", first)
	}
	at := now()
	if err := s.CompleteNotice(ctx, first, store.NoticeCompletion{
		Results: map[string]store.Delivery{"hook": {Result: store.DeliveryDelivered, Attempts: 1, At: at},
			"chat": {Result: store.DeliveryFailed, Error: "503", Attempts: 1, At: at}},
		Pending: []string{"chat"}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a second completion with the same lease", s.CompleteNotice(ctx, first, store.NoticeCompletion{}), store.ErrLeaseLost)
	if err := s.CompleteNotice(ctx, cs[1], store.NoticeCompletion{Pending: []string{"hook"}, RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// The first is due again at once for chat alone; the second in an hour.
	cs, err = s.ClaimNotices(ctx, "a2", 10, time.Minute)
	if err != nil || len(cs) != 1 || cs[0].ID != first.ID || !slices.Equal(cs[0].Pending, []string{"chat"}) ||
		cs[0].Results["hook"].Result != store.DeliveryDelivered || cs[0].Results["chat"].Error != "503" || cs[0].Attempts != 1 {
		t.Fatalf("claim of the retry = %+v, %v", cs, err)
	}
	if err := s.CompleteNotice(ctx, cs[0], store.NoticeCompletion{
		Results: map[string]store.Delivery{"chat": {Result: store.DeliveryDelivered, Attempts: 2, At: at}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListNotices(ctx, "infra", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got {
		if n.ID != first.ID {
			continue
		}
		if n.DoneAt == nil || len(n.Pending) != 0 || n.Results["chat"] != (store.Delivery{Result: store.DeliveryDelivered, Attempts: 2, At: at}) ||
			n.Results["hook"].Result != store.DeliveryDelivered {
			t.Errorf("delivered notice %+v", n)
		}
	}
	if cs, err := s.ClaimNotices(ctx, "a1", 10, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("claimed done or later notices: %+v %v", cs, err)
	}
	// Done notices are trimmed like history; open ones stay.
	if n, err := s.TrimHistory(ctx, store.HistoryLimits{MaxPerResource: 1}, 100); err != nil || n != 1 {
		t.Fatalf("TrimHistory = %d, %v; want the older of two done notices", n, err)
	}
	if left, err := s.ListNotices(ctx, "infra", 10); err != nil || len(left) != 2 {
		t.Fatalf("after the trim: %+v, %v; want the newest done one and the open one", left, err)
	}
}

// testRevisionRefused: each revision a source refuses is told once,
// RevisionRefused, however often the refusal is written again (a poll, a
// retry, another reason, a fetch failure in between); a fetch failure is
// not a refusal; applying a revision lets a revision refused before be
// told again when it is refused again.
func testRevisionRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	put := func(phase store.SourcePhase, attempted, applied manifest.Revision, msg string) {
		t.Helper()
		if _, err := s.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: phase, Message: msg,
			LastAttemptedRevision: attempted, LastAppliedRevision: applied,
			Errors: []manifest.Problem{{File: "w.yaml", Line: 3, Message: "spec.size: expected integer"}}}); err != nil {
			t.Fatal(err)
		}
	}
	refused := func() []string {
		t.Helper()
		ns, err := s.ListNotices(ctx, "infra", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := len(ns) - 1; i >= 0; i-- {
			if n := ns[i]; n.Event == store.EventRevisionRefused {
				out = append(out, n.Severity+" "+string(n.Revision)+" "+n.Message)
			}
		}
		return out
	}
	// Refused at first sight, on insert.
	put(store.SourceFailed, "main@sha1:one", "", "ValidationFailed: 1 invalid manifest(s)")
	put(store.SourceFailed, "main@sha1:one", "", "ValidationFailed: 1 invalid manifest(s)")
	put(store.SourceFailed, "main@sha1:one", "", "FetchFailed: connection refused")
	put(store.SourceFailed, "main@sha1:one", "", "OwnershipConflict: another reason, same revision")
	put(store.SourceReady, "main@sha1:two", "main@sha1:two", "applied")
	put(store.SourceFailed, "main@sha1:two", "main@sha1:two", "FetchFailed: connection refused")
	put(store.SourceFailed, "main@sha1:three", "main@sha1:two", "SignatureRejected: commit 3: not signed")
	put(store.SourceStalled, "main@sha1:four", "main@sha1:two", "PruneLimitExceeded: would delete 3")
	put(store.SourceStalled, "main@sha1:four", "main@sha1:two", "PruneLimitExceeded: would delete 3")
	put(store.SourceReady, "main@sha1:four", "main@sha1:four", "applied")
	put(store.SourceFailed, "main@sha1:one", "main@sha1:four", "ValidationFailed: 1 invalid manifest(s)")
	want := []string{
		"error main@sha1:one ValidationFailed: 1 invalid manifest(s)\nw.yaml:3: spec.size: expected integer",
		"error main@sha1:three SignatureRejected: commit 3: not signed\nw.yaml:3: spec.size: expected integer",
		"warning main@sha1:four PruneLimitExceeded: would delete 3\nw.yaml:3: spec.size: expected integer",
		"error main@sha1:one ValidationFailed: 1 invalid manifest(s)\nw.yaml:3: spec.size: expected integer",
	}
	if got := refused(); !slices.Equal(got, want) {
		t.Fatalf("RevisionRefused notices:\n got %q\nwant %q", got, want)
	}
}

// testSourceChecked: MarkSourceChecked records a source's last check and
// nothing else; an earlier time, or a source the store does not know,
// changes nothing; PutSource keeps it when given none.
func testSourceChecked(t *testing.T, s store.Store) {
	ctx := t.Context()
	synced := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	src, err := s.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceReady,
		LastAppliedRevision: "main@sha1:one", LastAttemptedRevision: "main@sha1:one", LastSyncTime: &synced})
	if err != nil {
		t.Fatal(err)
	}
	if src.LastCheckTime != nil {
		t.Errorf("a new source's LastCheckTime = %v, want nil", src.LastCheckTime)
	}
	checked := synced.Add(90 * time.Second)
	for _, at := range []time.Time{checked, synced.Add(time.Second)} {
		if err := s.MarkSourceChecked(ctx, "infra", at); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkSourceChecked(ctx, "nosuch", checked); err != nil {
		t.Errorf("MarkSourceChecked of an unknown source: %v", err)
	}
	got, err := s.GetSource(ctx, "infra")
	if err != nil {
		t.Fatal(err)
	}
	if !sameTime(got.LastCheckTime, &checked) || !sameTime(got.LastSyncTime, &synced) || !got.UpdatedAt.Equal(src.UpdatedAt) {
		t.Errorf("after the checks: checked %v (want %v), synced %v (want %v), updated %v (want %v)",
			got.LastCheckTime, checked, got.LastSyncTime, synced, got.UpdatedAt, src.UpdatedAt)
	}
	got.LastCheckTime, got.Message = nil, "written again"
	if got, err = s.PutSource(ctx, got); err != nil || !sameTime(got.LastCheckTime, &checked) {
		t.Errorf("PutSource without a check time: %v, %v; want it kept", got, err)
	}
	later := checked.Add(time.Minute)
	got.LastCheckTime = &later
	if got, err = s.PutSource(ctx, got); err != nil || !sameTime(got.LastCheckTime, &later) {
		t.Errorf("PutSource with a check time: %v, %v", got, err)
	}
}
