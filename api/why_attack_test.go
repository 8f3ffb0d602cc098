package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/why"
)

// TestWhyHidesTheSourceMessageFromATokenThatMayNotReadTheSource: a token
// limited to namespace default reads a resource there, but not its source
// (GET /sources/apps is a 403): the source's message, which names what
// the sync refused in every namespace, is not told to it through the
// resource's explanation either. Its name and phase, which say why the
// resource waits, still are.
func TestWhyHidesTheSourceMessageFromATokenThatMayNotReadTheSource(t *testing.T) {
	t.Parallel()
	const team = "team-default-5e1c7a2b9f04"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "team", Value: team, Grants: []api.Grant{
			{Verbs: []string{api.VerbGet, api.VerbList}, Namespaces: []string{"default"}}}}}
	})
	target := sync.Target{Name: "apps", Kind: store.SourceGit}
	good := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("ab", 20)), Files: []manifest.File{
		file("tiers.yaml", chainResources), file("types/tier.yaml", chainTypes)}}
	if _, err := e.syncer.Sync(t.Context(), target, good, false); err != nil {
		t.Fatal(err)
	}
	// The next revision holds a file of another team that does not parse.
	bad := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{
		file("tiers.yaml", chainResources), file("types/tier.yaml", chainTypes),
		file("team-b/payroll-migration.yaml", "apiVersion: [\n")}}
	_, _ = e.syncer.Sync(t.Context(), target, bad, false)
	src, err := e.store.GetSource(t.Context(), "apps")
	if err != nil {
		t.Fatal(err)
	}
	if src.Phase == store.SourceReady || !strings.Contains(src.Message+problemText(src.Errors), "payroll-migration") {
		t.Fatalf("source after the bad revision: %s %q %+v", src.Phase, src.Message, src.Errors)
	}
	e.must("GET", "/api/v1/sources/apps", team, "", http.StatusForbidden, nil)
	app, err := e.store.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Tier", Namespace: "default", Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/resources/" + itoa(app.ID) + "/why", "/api/v1/resources/" + itoa(app.ID)} {
		var got struct{ Why *why.Why }
		e.must("GET", path, team, "", http.StatusOK, &got)
		data, _ := json.Marshal(got.Why)
		if got.Why == nil || got.Why.Source == nil || got.Why.Source.Name != "apps" || got.Why.Source.Phase != string(src.Phase) {
			t.Fatalf("%s: why = %s, want the source named with its phase", path, data)
		}
		if src.Message != "" && strings.Contains(string(data), src.Message) || strings.Contains(string(data), "payroll") {
			t.Errorf("%s: the team token is told the source's message: %s", path, data)
		}
	}
	// A token that may read the source is told its message.
	var got struct{ Why *why.Why }
	e.must("GET", "/api/v1/resources/"+itoa(app.ID)+"/why", writeToken, "", http.StatusOK, &got)
	if got.Why == nil || got.Why.Source == nil || got.Why.Source.Message == "" {
		t.Fatalf("write token's why = %+v", got.Why)
	}
}

func problemText(ps []manifest.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.File + ": " + p.Message + "\n")
	}
	return b.String()
}

// TestWhyCutsNoSecretInHalf: an explanation cuts a long source message (and
// a long problem) short. The agent masks secret values in every answer,
// but only whole values: a cut through one would leave its start, which
// no masking recognises. The cut leaves no piece of a word behind.
func TestWhyCutsNoSecretInHalf(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-DbPassw0rd-91c7e4"
	masker := redact.New(secret)
	e := newEnv(t, func(o *api.Options) { o.Wrap = masker.HTTP })
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{
		file("tiers.yaml", chainResources), file("types/tier.yaml", chainTypes)}}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "apps", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	src, err := e.store.GetSource(t.Context(), "apps")
	if err != nil {
		t.Fatal(err)
	}
	// The secret starts 12 characters before the explanation's cut of a
	// source's message (300) and of a problem's (500).
	long := func(n int) string { return strings.Repeat("word ", (n-12)/5) + secret + " and then some more text" }
	src.Phase, src.Message = store.SourceFailed, "FetchFailed: "+long(300-len("FetchFailed: "))
	src.Errors = []manifest.Problem{{File: "a.yaml", Line: 1, Message: long(500)}}
	if _, err := e.store.PutSource(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	app, err := e.store.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Tier", Namespace: "default", Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/resources/" + itoa(app.ID) + "/why", "/api/v1/sources/apps/why"} {
		_, body, _ := e.call("GET", path, writeToken, "")
		if strings.Contains(string(body), secret[:6]) {
			t.Errorf("%s tells the start of the secret:\n%s", path, body)
		}
		if !strings.Contains(string(body), "word word") {
			t.Errorf("%s: no message:\n%s", path, body)
		}
	}
}
