package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/why"
)

const chainTypes = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Tier}
spec:
  group: apps.example.com
  versions:
    - name: v1
      schema: {type: object}
`

// chainResources declare app -> api -> db, and lonely -> ghost, which
// does not exist.
const chainResources = `apiVersion: apps.example.com/v1
kind: Tier
metadata: {name: app}
spec: {}
dependsOn: [{kind: Tier, name: api}]
---
apiVersion: apps.example.com/v1
kind: Tier
metadata: {name: api}
spec: {}
dependsOn: [{kind: Tier, name: db}]
---
apiVersion: apps.example.com/v1
kind: Tier
metadata: {name: db}
spec: {}
---
apiVersion: apps.example.com/v1
kind: Tier
metadata: {name: lonely}
spec: {}
dependsOn: [{kind: Tier, name: ghost}]
`

const opsToken = "ops-7c2e9a41d0b3"

// whyEnv is newEnv with the tiers synced from source apps, and a token
// named ops that may do everything.
func whyEnv(t *testing.T) (*env, map[string]*store.Resource) {
	t.Helper()
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "ops", Value: opsToken, Grants: []api.Grant{{Verbs: api.Verbs}}}}
	})
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{
		file("tiers.yaml", chainResources), file("types/tier.yaml", chainTypes)}}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "apps", Kind: store.SourceGit, URL: "https://git.example.com/apps.git"}, snap, false); err != nil {
		t.Fatal(err)
	}
	rows := map[string]*store.Resource{}
	for _, name := range []string{"app", "api", "db", "lonely"} {
		r, err := e.store.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Tier", Namespace: "default", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		rows[name] = r
	}
	return e, rows
}

func setStatus(t *testing.T, st store.Store, id int64, u store.StatusUpdate) {
	t.Helper()
	if _, err := st.SetResourceStatus(t.Context(), id, u); err != nil {
		t.Fatal(err)
	}
}

// TestWhyThreeLevelsDeep: app waits on api, which waits on db, which
// failed "quota exceeded" and backs off. app's explanation names api and
// db and db's message, on its own endpoint and on the resource; db's says
// when it tries again; a ready resource has none.
func TestWhyThreeLevelsDeep(t *testing.T) {
	t.Parallel()
	e, rows := whyEnv(t)
	next := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Millisecond)
	setStatus(t, e.store, rows["db"].ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "quota exceeded", RetryCount: 3,
		NextReconcileAt: &next})
	for _, name := range []string{"app", "api"} {
		setStatus(t, e.store, rows[name].ID, store.StatusUpdate{Phase: manifest.PhasePending, Message: "waiting for dependencies"})
	}
	setStatus(t, e.store, e.gitRes.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: e.gitRes.Generation,
		Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionTrue, LastTransitionTime: time.Now()}}})

	var got struct {
		ID    int64    `json:"id"`
		Name  string   `json:"name"`
		Ready bool     `json:"ready"`
		Why   *why.Why `json:"why"`
	}
	e.must("GET", "/api/v1/resources/"+itoa(rows["app"].ID)+"/why", opsToken, "", http.StatusOK, &got)
	if got.Ready || got.Why == nil || got.Name != "app" {
		t.Fatalf("why of app = %+v", got)
	}
	w := got.Why
	if w.Reason != why.DependencyNotReady || len(w.Chain) != 2 || w.Chain[0].Name != "api" || w.Chain[1].Name != "db" ||
		w.Chain[1].Message != "quota exceeded" || w.Chain[1].ID != rows["db"].ID {
		t.Fatalf("why of app = %+v", w)
	}
	for _, s := range []string{"Tier/api", "Tier/db", "quota exceeded", "attempt 3"} {
		if !strings.Contains(w.Message, s) {
			t.Errorf("message %q does not say %q", w.Message, s)
		}
	}
	if w.Cause == nil || w.Cause.Reason != why.BackingOff || w.Cause.Until == nil || !w.Cause.Until.Equal(next) {
		t.Errorf("root cause = %+v, want backing off until %v", w.Cause, next)
	}

	// The same on the resource, by id and by name.
	var res api.Resource
	e.must("GET", "/api/v1/resources/"+itoa(rows["app"].ID), opsToken, "", http.StatusOK, &res)
	if res.Why == nil || res.Why.Reason != why.DependencyNotReady || len(res.Why.Chain) != 2 || res.Why.Message != w.Message {
		t.Fatalf("resource's why = %+v, want %+v", res.Why, w)
	}
	e.must("GET", "/api/v1/resources/by-name/Tier/v1/app", opsToken, "", http.StatusOK, &res)
	if res.Why == nil || len(res.Why.Chain) != 2 {
		t.Fatalf("resource by name: why = %+v", res.Why)
	}
	// db backs off.
	e.must("GET", "/api/v1/resources/"+itoa(rows["db"].ID), opsToken, "", http.StatusOK, &res)
	if res.Why == nil || res.Why.Reason != why.BackingOff || res.Why.Attempt != 3 || res.Why.Until == nil || !res.Why.Until.Equal(next) {
		t.Fatalf("db's why = %+v", res.Why)
	}
	// A missing dependency is named.
	e.must("GET", "/api/v1/resources/"+itoa(rows["lonely"].ID)+"/why", opsToken, "", http.StatusOK, &got)
	if got.Why == nil || got.Why.Reason != why.DependencyMissing || len(got.Why.Chain) != 1 || !got.Why.Chain[0].Missing ||
		!strings.Contains(got.Why.Message, "Tier/ghost does not exist") {
		t.Fatalf("lonely's why = %+v", got.Why)
	}
	// A ready resource has none, and its JSON no why at all.
	e.must("GET", "/api/v1/resources/"+itoa(e.gitRes.ID)+"/why", opsToken, "", http.StatusOK, &got)
	if !got.Ready || got.Why != nil {
		t.Fatalf("a ready resource's why = %+v", got)
	}
	_, body, _ := e.call("GET", "/api/v1/resources/"+itoa(e.gitRes.ID), opsToken, "")
	if strings.Contains(string(body), `"why"`) {
		t.Errorf("a ready resource has a why: %s", body)
	}
	// Lists are answered as before.
	_, body, _ = e.call("GET", "/api/v1/resources?kind=Tier", opsToken, "")
	if strings.Contains(string(body), `"why"`) {
		t.Errorf("a list has a why: %s", body)
	}
	e.must("GET", "/api/v1/resources/999999/why", opsToken, "", http.StatusNotFound, nil)
}

// TestWhyHidesWhatTheTokenMayNotRead: a token that may read Tier
// resources of source apps but not the database's kind is not told its
// name, message or explanation.
func TestWhyHidesWhatTheTokenMayNotRead(t *testing.T) {
	t.Parallel()
	const narrow = "narrow-4b1f0e9c2d7a"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "narrow", Value: narrow, Grants: []api.Grant{
			{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Tier"}}}}}
	})
	// Tier api depends on the Network the environment declares, which
	// the narrow token may not read.
	docs := strings.Replace(chainResources, "dependsOn: [{kind: Tier, name: db}]", "dependsOn: [{kind: Network, name: prod-vpc}]", 1)
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("ef", 20)), Files: []manifest.File{
		file("tiers.yaml", docs), file("types/tier.yaml", chainTypes)}}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "apps", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	setStatus(t, e.store, e.gitRes.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "secret network trouble"})
	app, err := e.store.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Tier", Namespace: "default", Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Why *why.Why }
	e.must("GET", "/api/v1/resources/"+itoa(app.ID)+"/why", narrow, "", http.StatusOK, &got)
	data, _ := json.Marshal(got.Why)
	if got.Why == nil || len(got.Why.Chain) != 2 || got.Why.Chain[0].Name != "api" || got.Why.Cause != nil ||
		strings.Contains(string(data), "prod-vpc") || strings.Contains(string(data), "secret network") {
		t.Fatalf("narrow token's why = %s", data)
	}
	// The write token reads it all.
	e.must("GET", "/api/v1/resources/"+itoa(app.ID)+"/why", writeToken, "", http.StatusOK, &got)
	if len(got.Why.Chain) != 2 || got.Why.Chain[1].Name != "prod-vpc" || !strings.Contains(got.Why.Message, "secret network trouble") {
		t.Fatalf("write token's why = %+v", got.Why)
	}
}

// TestSuspendReasonThroughTheAPI suspends with a reason as the token ops:
// the resource, the source and their explanations say who and why; text
// that cannot be shown on one line, or is too long, is refused, and markup
// is kept as text, escaped in JSON.
func TestSuspendReasonThroughTheAPI(t *testing.T) {
	t.Parallel()
	e, rows := whyEnv(t)
	id := itoa(rows["db"].ID)
	reason := `db migration <script>alert("x")</script> & more`
	status, body, _ := e.call("POST", "/api/v1/resources/"+id+"/suspend", opsToken, `{"reason": `+jsonString(reason)+`}`)
	if status != http.StatusOK {
		t.Fatalf("suspend = %d %s", status, body)
	}
	if strings.Contains(string(body), "<script>") {
		t.Errorf("markup unescaped in JSON: %s", body)
	}
	var res api.Resource
	e.must("GET", "/api/v1/resources/"+id, opsToken, "", http.StatusOK, &res)
	w := res.Why
	if w == nil || w.Reason != why.Suspended || w.Suspension == nil || w.Suspension.By != store.SuspendedByAPI ||
		w.Suspension.Identity != "ops" || w.Suspension.Reason != reason || w.Since == nil ||
		!strings.Contains(w.Message, "by ops: "+reason) {
		t.Fatalf("suspended resource's why = %+v", w)
	}
	// Its dependents say so through the chain.
	var app struct{ Why *why.Why }
	e.must("GET", "/api/v1/resources/"+itoa(rows["api"].ID)+"/why", opsToken, "", http.StatusOK, &app)
	if app.Why == nil || app.Why.Cause == nil || app.Why.Cause.Reason != why.Suspended || !strings.Contains(app.Why.Message, reason) {
		t.Fatalf("dependent's why = %+v", app.Why)
	}

	for name, bad := range map[string]string{
		"newline":       `{"reason": "line one\nline two"}`,
		"10 KB":         `{"reason": "` + strings.Repeat("x", 10<<10) + `"}`,
		"unknown field": `{"reason": "ok", "by": "someone else"}`,
		"not an object": `"just text"`,
	} {
		status, body, _ := e.call("POST", "/api/v1/resources/"+id+"/suspend", opsToken, bad)
		if status != http.StatusBadRequest {
			t.Errorf("suspend with a %s reason = %d %s, want 400", name, status, body)
		}
		status, body, _ = e.call("POST", "/api/v1/sources/apps/suspend", opsToken, bad)
		if status != http.StatusBadRequest {
			t.Errorf("suspend a source with a %s reason = %d %s, want 400", name, status, body)
		}
	}
	e.must("GET", "/api/v1/resources/"+id, opsToken, "", http.StatusOK, &res)
	if res.Why == nil || res.Why.Suspension == nil || res.Why.Suspension.Reason != reason {
		t.Fatalf("after refused reasons: %+v", res.Why)
	}
	// Without a body, by the write token: no reason, the token's name.
	e.must("POST", "/api/v1/resources/"+id+"/suspend", writeToken, "", http.StatusOK, nil)
	res = api.Resource{}
	e.must("GET", "/api/v1/resources/"+id, opsToken, "", http.StatusOK, &res)
	if res.Why.Suspension.Reason != "" || res.Why.Suspension.Identity != api.WriteTokenName {
		t.Fatalf("suspended again without a reason: %+v", res.Why.Suspension)
	}
	e.must("POST", "/api/v1/resources/"+id+"/resume", opsToken, "", http.StatusOK, nil)
	e.must("GET", "/api/v1/resources/"+id+"/why", opsToken, "", http.StatusOK, &app)
	if app.Why == nil || app.Why.Reason != why.BackingOff && app.Why.Reason != why.Pending {
		t.Fatalf("after resume: %+v", app.Why)
	}

	// The source.
	e.must("POST", "/api/v1/sources/apps/suspend", opsToken, `{"reason": "freeze for the release"}`, http.StatusOK, nil)
	var src api.Source
	e.must("GET", "/api/v1/sources/apps", opsToken, "", http.StatusOK, &src)
	if src.SuspendedReason != "freeze for the release" || src.SuspendedIdentity != "ops" || src.Why == nil ||
		src.Why.Reason != why.Suspended || src.Why.Suspension.Identity != "ops" || len(src.Why.Actions) != 1 {
		t.Fatalf("suspended source = %+v, why %+v", src, src.Why)
	}
	var sw struct {
		Name  string
		Ready bool
		Why   *why.Why
	}
	e.must("GET", "/api/v1/sources/apps/why", opsToken, "", http.StatusOK, &sw)
	if sw.Ready || sw.Why == nil || !strings.Contains(sw.Why.Message, "by ops: freeze for the release") {
		t.Fatalf("source why = %+v", sw)
	}
	// Its resources say their source is suspended.
	e.must("GET", "/api/v1/resources/"+itoa(rows["app"].ID), opsToken, "", http.StatusOK, &res)
	if res.Why == nil || res.Why.Source == nil || !res.Why.Source.Suspended || !strings.Contains(res.Why.Message, `source "apps" is suspended`) {
		t.Fatalf("resource of a suspended source: %+v", res.Why)
	}
	var list []api.Source
	e.must("GET", "/api/v1/sources", opsToken, "", http.StatusOK, &list)
	for _, s := range list {
		if (s.Name == "apps") != (s.Why != nil) {
			t.Errorf("source %s in the list: why %+v", s.Name, s.Why)
		}
	}
	e.must("POST", "/api/v1/sources/apps/resume", opsToken, "", http.StatusOK, nil)
	e.must("GET", "/api/v1/sources/apps/why", opsToken, "", http.StatusOK, &sw)
	if !sw.Ready || sw.Why != nil {
		t.Fatalf("resumed source's why = %+v", sw)
	}
	if !strings.Contains(e.logs.String(), "token=ops") {
		t.Errorf("the audit trail does not name ops")
	}
	e.must("GET", "/api/v1/sources/nope/why", opsToken, "", http.StatusNotFound, nil)
}

// TestWhyOfStalledAndLeased: a source stalled on the prune guard says
// what to approve and how; a resource held by a live agent says which,
// once the read model reads the agents again.
func TestWhyOfStalledAndLeased(t *testing.T) {
	t.Parallel()
	e, rows := whyEnv(t)
	ctx := t.Context()
	src, err := e.store.GetSource(ctx, "apps")
	if err != nil {
		t.Fatal(err)
	}
	rev := "main@sha1:" + strings.Repeat("12", 20)
	src.Phase, src.LastAttemptedRevision = store.SourceStalled, manifest.Revision(rev)
	src.Message = "PruneLimitExceeded: revision " + rev + " would delete 3 of 4 resources, over 25%"
	if _, err := e.store.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	var sw struct{ Why *why.Why }
	e.must("GET", "/api/v1/sources/apps/why", opsToken, "", http.StatusOK, &sw)
	if sw.Why == nil || sw.Why.Reason != "PruneLimitExceeded" || sw.Why.Revision != rev || len(sw.Why.Actions) != 1 ||
		sw.Why.Actions[0].API != "POST /api/v1/sources/apps/approve?revision="+rev ||
		sw.Why.Actions[0].CLI != "no8s-agent approve source apps --revision "+rev {
		t.Fatalf("stalled source's why = %+v", sw.Why)
	}

	if err := e.store.RecordAgent(ctx, &store.Agent{ID: "agent-x", Host: "h", Version: "v"}); err != nil {
		t.Fatal(err)
	}
	claims, err := e.store.ClaimResources(ctx, store.ClaimParams{Owner: "agent-x", Limit: 10, Duration: time.Minute})
	if err != nil || len(claims) == 0 {
		t.Fatalf("claims: %v, %v", claims, err)
	}
	id := itoa(claims[0].ID)
	deadline := time.Now().Add(3 * store.AgentBeat)
	for {
		var got struct{ Why *why.Why }
		e.must("GET", "/api/v1/resources/"+id+"/why", opsToken, "", http.StatusOK, &got)
		if got.Why == nil || got.Why.Reason != why.Reconciling || got.Why.Lease == nil || got.Why.Lease.Holder != "agent-x" {
			t.Fatalf("claimed resource's why = %+v", got.Why)
		}
		if got.Why.Lease.Alive {
			if !strings.Contains(got.Why.Message, "agent agent-x is reconciling it") {
				t.Errorf("message %q", got.Why.Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease's holder is not known alive after %s: %+v", 3*store.AgentBeat, got.Why.Lease)
		}
		// The read model reads the agents every beat: wait for the next.
		<-time.After(store.AgentBeat / 5)
	}
	_ = rows
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
