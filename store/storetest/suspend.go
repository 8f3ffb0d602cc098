package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// annotated returns r with the annotation key set to value.
func annotated(r *manifest.Resource, key, value string) *manifest.Resource {
	r.Annotations = map[string]string{key: value}
	return r
}

// waitNote waits for a notification on topic.
func waitNote(t *testing.T, notes <-chan store.Notification, topic, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-notes:
			if n.Topic == topic {
				return
			}
		case <-deadline:
			t.Fatalf("no %s notification after %s", topic, what)
		}
	}
}

// waitSuspendedEvent waits for a status event of resource id that says it
// is suspended or not.
func waitSuspendedEvent(t *testing.T, status <-chan store.Notification, id int64, suspended bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-status:
			ev, err := store.ParseStatusEvent(n.Payload)
			if err == nil && ev.ID == id && ev.Suspended == suspended {
				return
			}
		case <-deadline:
			t.Fatalf("no status event of resource %d with suspended %t", id, suspended)
		}
	}
}

// testSuspendResources suspends resources through the API and by their
// annotation: nothing claims them, for a new generation, a retry, a
// manual request or a deletion, until they are resumed.
func testSuspendResources(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	byAPI, _, err := s.ApplyResource(ctx, resource("by-api", `{"size":1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	byNote, _, err := s.ApplyResource(ctx, annotated(resource("by-note", `{}`), manifest.AnnotationSuspend, "true"), src)
	if err != nil {
		t.Fatal(err)
	}
	doomed, _, err := s.ApplyResource(ctx, annotated(resource("doomed", `{}`), manifest.AnnotationSuspend, "true"), src)
	if err != nil {
		t.Fatal(err)
	}
	// Suspended by its annotation, it says since when, as a suspension
	// through the API does; a later apply keeps that time.
	if !byNote.Suspended() || byNote.SuspendedBy() != store.SuspendedByAnnotation || byNote.SuspendedAt == nil {
		t.Fatalf("annotated resource: suspended %v by %q at %v", byNote.Suspended(), byNote.SuspendedBy(), byNote.SuspendedAt)
	}
	checkUTC(t, "SuspendedAt", *byNote.SuspendedAt)
	if d := time.Since(*byNote.SuspendedAt); d > time.Minute || d < -time.Minute {
		t.Errorf("annotated resource suspended at %v, want about now", byNote.SuspendedAt)
	}
	noted := *byNote.SuspendedAt
	relabelled := annotated(resource("by-note", `{}`), manifest.AnnotationSuspend, "true")
	relabelled.Labels = map[string]string{"team": "b"}
	if r, _, err := s.ApplyResource(ctx, relabelled, src); err != nil || r.SuspendedAt == nil || !r.SuspendedAt.Equal(noted) {
		t.Fatalf("annotated resource applied again: %v, %v; want suspended at %v still", r.SuspendedAt, err, noted)
	}
	if r, err := s.GetResource(ctx, byNote.ID); err != nil || r.SuspendedAt == nil || !r.SuspendedAt.Equal(noted) {
		t.Fatalf("annotated resource read: %+v, %v; want suspended at %v", r, err, noted)
	}
	status, err := s.Listen(ctx, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.SuspendResource(ctx, byAPI.ID, true, store.Suspension{})
	waitSuspendedEvent(t, status, byAPI.ID, true)
	if err != nil || !got.Suspended() || got.SuspendedBy() != store.SuspendedByAPI || got.SuspendedAt == nil {
		t.Fatalf("SuspendResource = %+v, %v", got, err)
	}
	since := *got.SuspendedAt
	checkUTC(t, "SuspendedAt", since)
	// Suspending again keeps the first time.
	if again, err := s.SuspendResource(ctx, byAPI.ID, true, store.Suspension{}); err != nil || !again.SuspendedAt.Equal(since) {
		t.Fatalf("second SuspendResource = %v, %v; want since %v", again.SuspendedAt, err, since)
	}
	_, err = s.SuspendResource(ctx, 999999, true, store.Suspension{})
	wantErr(t, "suspend an unknown resource", err, store.ErrNotFound)

	// A new generation, a manual request and a deletion all wait.
	if _, _, err := s.ApplyResource(ctx, resource("by-api", `{"size":2}`), src); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestReconcile(ctx, byNote.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestDeletion(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	if cs := claim(t, s, "a1", 10); len(cs) != 0 {
		t.Fatalf("claimed suspended resources %v", claimedIDs(cs))
	}
	if _, ok, err := s.NextDue(ctx); err != nil || ok {
		t.Fatalf("NextDue with only suspended resources = %v, %v; want none", ok, err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Due != 0 || st.Suspended != 3 {
		t.Fatalf("Stats = %+v, %v; want none due and 3 suspended", st, err)
	}
	if r, err := s.GetResource(ctx, byAPI.ID); err != nil || r.Generation != 2 || r.Phase != manifest.PhasePending {
		t.Fatalf("suspended resource after a spec change: %+v, %v; want generation 2 pending", r, err)
	}

	// Resumed through the API: claimed at once, told by a notification.
	notes, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.SuspendResource(ctx, byAPI.ID, false, store.Suspension{}); err != nil || r.Suspended() || r.SuspendedAt != nil {
		t.Fatalf("resume = %+v, %v", r, err)
	}
	waitSuspendedEvent(t, status, byAPI.ID, false)
	waitNote(t, notes, store.TopicResources, "a resume")
	if cs := claim(t, s, "a1", 10); len(cs) != 1 || cs[0].ID != byAPI.ID || cs[0].Generation != 2 {
		t.Fatalf("after resume claimed %v; want [%d] at generation 2", claimedIDs(cs), byAPI.ID)
	}

	// The annotation cannot be overruled through the API while it is declared.
	_, err = s.SuspendResource(ctx, byNote.ID, false, store.Suspension{})
	wantErr(t, "resume of an annotated resource", err, store.ErrConflict)
	if cs := claim(t, s, "a1", 10); len(cs) != 0 {
		t.Fatalf("claimed %v after a refused resume", claimedIDs(cs))
	}
	// Taking the annotation out of its declaration resumes it.
	if _, _, err := s.ApplyResource(ctx, resource("by-note", `{}`), src); err != nil {
		t.Fatal(err)
	}
	waitNote(t, notes, store.TopicResources, "an annotation was removed")
	if cs := claim(t, s, "a1", 10); len(cs) != 1 || cs[0].ID != byNote.ID {
		t.Fatalf("after the annotation went, claimed %v; want [%d]", claimedIDs(cs), byNote.ID)
	}

	// A resource whose declaration is gone is resumed through the API, and
	// only then destroyed.
	r, err := s.SuspendResource(ctx, doomed.ID, false, store.Suspension{})
	if err != nil || r.Suspended() || r.Annotations[manifest.AnnotationSuspend] != "" {
		t.Fatalf("resume of a deleting annotated resource = %+v, %v", r, err)
	}
	cs := claim(t, s, "a1", 10)
	if len(cs) != 1 || cs[0].ID != doomed.ID || cs[0].Phase != manifest.PhaseDeleting {
		t.Fatalf("after resume of a deleting resource claimed %+v; want it deleting", cs)
	}
	if st, err := s.Stats(ctx); err != nil || st.Suspended != 0 {
		t.Fatalf("Stats after resumes = %+v, %v", st, err)
	}
}

// testSuspendSources suspends sources through the API and the
// configuration, which wins over the API.
func testSuspendSources(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.SuspendSource(ctx, "nope", store.SuspendedByAPI, true, store.Suspension{})
	wantErr(t, "suspend an unknown source", err, store.ErrNotFound)
	putSource(t, s, "infra", store.SourceReady)
	_, err = s.SuspendSource(ctx, "infra", "someone", true, store.Suspension{})
	wantErr(t, "unknown suspender", err, store.ErrInvalid)

	notes, err := s.Listen(ctx, store.TopicSources)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, store.Suspension{})
	if err != nil || got.SuspendedBy != store.SuspendedByAPI || got.SuspendedAt == nil {
		t.Fatalf("suspend through the API = %+v, %v", got, err)
	}
	waitNote(t, notes, store.TopicSources, "a suspend")
	since := *got.SuspendedAt
	checkUTC(t, "SuspendedAt", since)
	// A sync writing the source's state keeps the suspension.
	putSource(t, s, "infra", store.SourceFailed)
	if got, err := s.GetSource(ctx, "infra"); err != nil || got.SuspendedBy != store.SuspendedByAPI || !got.SuspendedAt.Equal(since) {
		t.Fatalf("after PutSource: %+v, %v", got, err)
	}
	if got, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, false, store.Suspension{}); err != nil || got.SuspendedBy != "" || got.SuspendedAt != nil {
		t.Fatalf("resume through the API = %+v, %v", got, err)
	}

	// The configuration's suspension: the API cannot lift it, and its own
	// resume leaves one made through the API.
	if got, err := s.SuspendSource(ctx, "infra", store.SuspendedByConfig, true, store.Suspension{}); err != nil || got.SuspendedBy != store.SuspendedByConfig {
		t.Fatalf("suspend by the configuration = %+v, %v", got, err)
	}
	if got, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, store.Suspension{}); err != nil || got.SuspendedBy != store.SuspendedByConfig {
		t.Fatalf("suspend through the API over the configuration = %+v, %v", got, err)
	}
	_, err = s.SuspendSource(ctx, "infra", store.SuspendedByAPI, false, store.Suspension{})
	wantErr(t, "resume through the API of a source the configuration suspends", err, store.ErrConflict)
	if got, err := s.SuspendSource(ctx, "infra", store.SuspendedByConfig, false, store.Suspension{}); err != nil || got.SuspendedBy != "" {
		t.Fatalf("resume by the configuration = %+v, %v", got, err)
	}
	if _, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SuspendSource(ctx, "infra", store.SuspendedByConfig, false, store.Suspension{}); err != nil || got.SuspendedBy != store.SuspendedByAPI {
		t.Fatalf("resume by the configuration of an API suspension = %+v, %v", got, err)
	}
	if all, err := s.ListSources(ctx); err != nil || len(all) != 1 || all[0].SuspendedBy != store.SuspendedByAPI {
		t.Fatalf("ListSources = %+v, %v", all, err)
	}
}

// testResourceStates lists what metrics show of resources, those not
// ready first, up to a limit.
func testResourceStates(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.ResourceStates(ctx, 0)
	wantErr(t, "a limit of zero", err, store.ErrInvalid)
	src := gitSource("infra", "widgets/a.yaml")
	var ids []int64
	for _, name := range []string{"ok-1", "ok-2", "broken", "paused"} {
		r, _, err := s.ApplyResource(ctx, resource(name, `{}`), src)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for i, phase := range []manifest.Phase{manifest.PhaseReady, manifest.PhaseReady, manifest.PhaseFailed} {
		if _, err := s.SetResourceStatus(ctx, ids[i], store.StatusUpdate{Phase: phase, ObservedGeneration: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SuspendResource(ctx, ids[3], true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	states, err := s.ResourceStates(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ResourceState{
		{Kind: "Widget", Name: "broken", Source: "infra", Phase: manifest.PhaseFailed},
		{Kind: "Widget", Name: "paused", Source: "infra", Phase: manifest.PhasePending, Suspended: true},
		{Kind: "Widget", Name: "ok-1", Source: "infra", Phase: manifest.PhaseReady, Ready: true},
	}
	if len(states) != len(want) {
		t.Fatalf("ResourceStates(3) = %+v, want %+v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Errorf("state %d = %+v, want %+v", i, states[i], want[i])
		}
	}
}

// testSuspendAnnotationTime records when a resource's annotation suspended
// it, from the update that wrote it until the one that takes it out.
func testSuspendAnnotationTime(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	// Suspended by annotation on an update, it says so too.
	later, _, err := s.ApplyResource(ctx, resource("noted-later", `{}`), src)
	if err != nil || later.SuspendedAt != nil {
		t.Fatalf("plain resource: %v, %v", later, err)
	}
	if later, _, err = s.ApplyResource(ctx, annotated(resource("noted-later", `{}`), manifest.AnnotationSuspend, "true"), src); err != nil ||
		later.SuspendedBy() != store.SuspendedByAnnotation || later.SuspendedAt == nil {
		t.Fatalf("resource annotated on an update: %+v, %v", later, err)
	}
	if later, _, err = s.ApplyResource(ctx, resource("noted-later", `{}`), src); err != nil || later.Suspended() || later.SuspendedAt != nil {
		t.Fatalf("resource whose annotation went: %+v, %v", later, err)
	}
	// Suspended through the API as well, it keeps the API's time once the
	// annotation goes.
	byAPI, err := s.SuspendResource(ctx, later.ID, true, store.Suspension{})
	if err != nil || byAPI.SuspendedAt == nil {
		t.Fatalf("SuspendResource = %+v, %v", byAPI, err)
	}
	if both, _, err := s.ApplyResource(ctx, annotated(resource("noted-later", `{}`), manifest.AnnotationSuspend, "true"), src); err != nil ||
		both.SuspendedBy() != store.SuspendedByAnnotation || both.SuspendedAt == nil {
		t.Fatalf("suspended both ways: %+v, %v", both, err)
	}
	if r, _, err := s.ApplyResource(ctx, resource("noted-later", `{}`), src); err != nil ||
		r.SuspendedBy() != store.SuspendedByAPI || r.SuspendedAt == nil || !r.SuspendedAt.Equal(*byAPI.SuspendedAt) {
		t.Fatalf("annotation gone, API suspension left: %+v, %v; want suspended by the API at %v", r, err, byAPI.SuspendedAt)
	}
}

// testSuspendReasons records who suspended a resource or a source through
// the API and why, replaces both with a later suspension, clears them
// with a resume, and refuses notes no page can show on one line.
func testSuspendReasons(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	r, _, err := s.ApplyResource(ctx, resource("noted", `{}`), src)
	if err != nil {
		t.Fatal(err)
	}
	note := store.Suspension{Reason: `db migration <script>alert(1)</script> "till 5pm"`, Identity: "ops-token"}
	got, err := s.SuspendResource(ctx, r.ID, true, note)
	if err != nil || got.SuspendedReason != note.Reason || got.SuspendedIdentity != note.Identity || got.SuspendReason() != note.Reason {
		t.Fatalf("SuspendResource with a note = %+v, %v", got, err)
	}
	since := *got.SuspendedAt
	for _, read := range readBack(t, s, r.ID) {
		if read.SuspendedReason != note.Reason || read.SuspendedIdentity != note.Identity {
			t.Fatalf("read back: reason %q by %q, want %q by %q", read.SuspendedReason, read.SuspendedIdentity, note.Reason, note.Identity)
		}
	}
	// A later suspension's note replaces it; the time stays.
	later := store.Suspension{Reason: "still migrating", Identity: "oidc:alice@example.com"}
	if got, err := s.SuspendResource(ctx, r.ID, true, later); err != nil || got.SuspendedReason != later.Reason ||
		got.SuspendedIdentity != later.Identity || !got.SuspendedAt.Equal(since) {
		t.Fatalf("suspended again = %+v, %v; want the new note since %v", got, err, since)
	}
	for name, bad := range map[string]store.Suspension{
		"newline":   {Reason: "one\ntwo"},
		"too long":  {Reason: strings.Repeat("x", 10<<10)},
		"not UTF-8": {Reason: "\xff"},
		"identity":  {Reason: "ok", Identity: "a\tb"},
	} {
		_, err := s.SuspendResource(ctx, r.ID, true, bad)
		wantErr(t, "suspend with a "+name+" note", err, store.ErrInvalid)
		_, err = s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, bad)
		wantErr(t, "suspend a source with a "+name+" note", err, store.ErrInvalid)
	}
	if got, err := s.GetResource(ctx, r.ID); err != nil || got.SuspendedReason != later.Reason {
		t.Fatalf("after refused notes: %+v, %v; want the note kept", got, err)
	}
	// At the limit, in characters, not bytes.
	full := store.Suspension{Reason: strings.Repeat("é", store.MaxSuspendReason)}
	if got, err := s.SuspendResource(ctx, r.ID, true, full); err != nil || got.SuspendedReason != full.Reason {
		t.Fatalf("suspend with a reason of %d characters: %v", store.MaxSuspendReason, err)
	}
	// A resume clears it, whatever note it is given.
	if got, err := s.SuspendResource(ctx, r.ID, false, store.Suspension{Reason: "ignored\n"}); err != nil ||
		got.SuspendedReason != "" || got.SuspendedIdentity != "" || got.SuspendReason() != "" {
		t.Fatalf("resume = %+v, %v; want the note cleared", got, err)
	}

	// The annotation gives the reason of its own suspension.
	a := annotated(resource("annotated", `{}`), manifest.AnnotationSuspend, "true")
	a.Annotations[manifest.AnnotationSuspendReason] = "frozen for the audit"
	ar, _, err := s.ApplyResource(ctx, a, src)
	if err != nil || ar.SuspendReason() != "frozen for the audit" || ar.SuspendedIdentity != "" {
		t.Fatalf("annotated resource: reason %q, %v", ar.SuspendReason(), err)
	}

	putSource(t, s, "infra", store.SourceReady)
	gs, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, note)
	if err != nil || gs.SuspendedReason != note.Reason || gs.SuspendedIdentity != note.Identity {
		t.Fatalf("SuspendSource with a note = %+v, %v", gs, err)
	}
	if gs, err := s.SuspendSource(ctx, "infra", store.SuspendedByAPI, true, later); err != nil ||
		gs.SuspendedReason != later.Reason || gs.SuspendedIdentity != later.Identity {
		t.Fatalf("source suspended again = %+v, %v; want the new note", gs, err)
	}
	putSource(t, s, "infra", store.SourceFailed)
	if all, err := s.ListSources(ctx); err != nil || len(all) != 1 || all[0].SuspendedReason != later.Reason {
		t.Fatalf("after PutSource: %+v, %v; want the note kept", all, err)
	}
	// The configuration's suspension takes the place of the API's, note and all.
	if gs, err := s.SuspendSource(ctx, "infra", store.SuspendedByConfig, true, store.Suspension{}); err != nil ||
		gs.SuspendedBy != store.SuspendedByConfig || gs.SuspendedReason != "" || gs.SuspendedIdentity != "" {
		t.Fatalf("suspended by the configuration = %+v, %v", gs, err)
	}
	if gs, err := s.SuspendSource(ctx, "infra", store.SuspendedByConfig, false, store.Suspension{}); err != nil ||
		gs.SuspendedReason != "" || gs.SuspendedAt != nil {
		t.Fatalf("resumed = %+v, %v", gs, err)
	}
}

// readBack reads resource id by id and in a list.
func readBack(t *testing.T, s store.Store, id int64) []*store.Resource {
	t.Helper()
	one, err := s.GetResource(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListResources(t.Context(), store.ResourceFilter{IDs: []int64{id}})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListResources = %v, %v", list, err)
	}
	return []*store.Resource{one, list[0]}
}
