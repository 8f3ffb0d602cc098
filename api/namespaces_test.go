package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// The namespaces fixture: a namespaced kind (Certificate) and a
// cluster-scoped one (Network), declared in Git, with a Git-owned
// certificate in team-a and team-b each and the network; the API then
// writes Certificate/web in team-a, team-b and shared.
const nsGitTypes = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Certificate}
spec:
  group: pki.example.com
  versions:
    - name: v1
      schema:
        type: object
        properties:
          cn: {type: string}
---
apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Network}
spec:
  group: infra.example.com
  scope: Cluster
  versions:
    - name: v1
      schema:
        type: object
        required: [cidr]
        properties:
          cidr: {type: string}
`

const nsGitResources = `apiVersion: infra.example.com/v1
kind: Network
metadata: {name: prod-vpc}
spec: {cidr: 10.0.0.0/16}
---
apiVersion: pki.example.com/v1
kind: Certificate
metadata: {name: git-cert, namespace: team-a}
spec: {cn: a.example.com}
---
apiVersion: pki.example.com/v1
kind: Certificate
metadata: {name: git-cert-b, namespace: team-b}
spec: {cn: secret-b.example.com}
`

// Tokens of the namespaces fixture.
const (
	// teamAToken may do everything to resources in team-a, and read
	// (only read) those in shared.
	teamAToken = "team-a-token-6c1e9b"
	// viewerToken may read everything.
	viewerToken = "viewer-token-0d4f7a"
)

// resourceVerbs are the verbs a team's grant holds on its namespace.
var resourceVerbs = []string{api.VerbGet, api.VerbList, api.VerbCreate, api.VerbUpdate, api.VerbDelete, api.VerbReconcile, api.VerbSuspend}

// nsEnv is a server over either store with the namespaces fixture.
type nsEnv struct {
	t    *testing.T
	st   store.Store
	base string
	// ids are the resources' ids by namespace/name ("" namespace: the network).
	ids map[string]int64
}

func newNSEnv(t *testing.T, backend string, mutate func(*api.Options)) *nsEnv {
	t.Helper()
	st := openBackend(t, backend)
	syncer := sync.New(st, nil)
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("cd", 20)), Files: []manifest.File{
		file("types.yaml", nsGitTypes), file("resources.yaml", nsGitResources)}}
	if _, err := syncer.Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	opts := api.Options{Store: st, Syncer: syncer, Sources: &fakeRunner{known: map[string]bool{"infra": true}}, WriteToken: writeToken,
		Tokens: []api.Token{
			{Name: "team-a", Value: teamAToken, Grants: []api.Grant{
				{Verbs: resourceVerbs, Namespaces: []string{"team-a"}},
				{Verbs: []string{api.VerbGet, api.VerbList}, Namespaces: []string{"shared"}},
			}},
			{Name: "viewer", Value: viewerToken, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}},
		},
		Dashboard: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "<html>every resource</html>") }),
		Metrics:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "no8s_resources 6\n") }),
	}
	if mutate != nil {
		mutate(&opts)
	}
	_, hs := serve(t, opts)
	e := &nsEnv{t: t, st: st, base: hs.URL, ids: map[string]int64{}}
	for _, ns := range []string{"team-a", "team-b", "shared"} {
		var r api.Resource
		e.must("POST", "/api/v1/resources", writeToken,
			`{"name": "web", "namespace": "`+ns+`", "resource_type_name": "Certificate", "spec": {"cn": "web.`+ns+`.example.com"}}`,
			http.StatusCreated, &r)
		if r.Namespace != ns {
			t.Fatalf("created in namespace %q, want %q", r.Namespace, ns)
		}
	}
	rows, err := st.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		e.ids[r.Namespace+"/"+r.Name] = r.ID
	}
	if len(e.ids) != 6 {
		t.Fatalf("fixture: %v", e.ids)
	}
	return e
}

func (e *nsEnv) id(ref string) string {
	e.t.Helper()
	id, ok := e.ids[ref]
	if !ok {
		e.t.Fatalf("no resource %s in the fixture", ref)
	}
	return itoa(id)
}

// call sends a request as token and returns the status, body and headers;
// reads ask for a store version issued after whatever the test did.
func (e *nsEnv) call(method, path, token, body string) (int, string, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// Bounded: an event stream a request is wrongly let into never ends.
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodGet {
		if v, err := e.st.Fence(e.t.Context()); err == nil {
			req.Header.Set(api.HeaderMinVersion, itoa(v))
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil && ctx.Err() == nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

func (e *nsEnv) must(method, path, token, body string, want int, out any) http.Header {
	e.t.Helper()
	status, data, h := e.call(method, path, token, body)
	if status != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, status, data, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(data), out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return h
}

// refs lists the namespace/name of each resource of a list's body.
func refs(t *testing.T, body string) []string {
	t.Helper()
	var rows []api.Resource
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Namespace + "/" + r.Name
	}
	return out
}

// onlyTeamA fails unless every resource listed is in team-a.
func onlyTeamA(t *testing.T, what string, got []string) {
	t.Helper()
	for _, r := range got {
		if !strings.HasPrefix(r, "team-a/") {
			t.Errorf("%s: the team-a token sees %s (all: %v)", what, r, got)
		}
	}
}

// TestNamespaceAttackReads: a token granted team-a reads team-a's
// resources and nothing else, whatever route, filter or cursor it tries:
// another namespace's resource is a 403, a list without a filter holds only
// team-a's, and cluster-scoped resources are outside its grant.
func TestNamespaceAttackReads(t *testing.T) {
	t.Parallel()
	e := newNSEnv(t, "postgres", nil)
	tests := []struct {
		name, path string
		status     int
		contains   string
	}{
		{"by id, its own", "/api/v1/resources/" + e.id("team-a/web"), 200, `"namespace":"team-a"`},
		{"by id, another namespace's", "/api/v1/resources/" + e.id("team-b/web"), 403, `may not get Certificate in namespace team-b`},
		{"by id, a Git-owned one elsewhere", "/api/v1/resources/" + e.id("team-b/git-cert-b"), 403, `namespace team-b`},
		{"by id, cluster-scoped", "/api/v1/resources/" + e.id("/prod-vpc"), 403, `may not get Network`},
		{"by id, in a namespace it only reads", "/api/v1/resources/" + e.id("shared/web"), 200, `"namespace":"shared"`},
		{"by name in its namespace", "/api/v1/resources/by-name/Certificate/v1/web?namespace=team-a", 200, `"namespace":"team-a"`},
		{"by name in another", "/api/v1/resources/by-name/Certificate/v1/web?namespace=team-b", 403, `namespace team-b`},
		{"by name in another, absent there", "/api/v1/resources/by-name/Certificate/v1/nothing?namespace=team-b", 403, `namespace team-b`},
		{"by name of another's only", "/api/v1/resources/by-name/Certificate/v1/git-cert-b", 403, `may not get`},
		{"by name, cluster-scoped", "/api/v1/resources/by-name/Network/v1/prod-vpc", 403, `may not get Network`},
		{"history of another's", "/api/v1/resources/" + e.id("team-b/web") + "/history", 403, `namespace team-b`},
		{"outputs of another's", "/api/v1/resources/" + e.id("team-b/web") + "/outputs", 403, `namespace team-b`},
		{"history of its own", "/api/v1/resources/" + e.id("team-a/web") + "/history", 200, `[`},
		{"a list of another namespace", "/api/v1/resources?namespace=team-b", 403, `may not list resources of every kind in namespace team-b`},
		{"a list of another namespace, one kind", "/api/v1/resources?namespace=team-b&kind=Certificate", 403, `namespace team-b`},
		{"a list with a bad namespace", "/api/v1/resources?namespace=Team_B", 400, `namespace`},
		{"the events of another namespace", "/api/v1/events?namespace=team-b", 403, `namespace team-b`},
		{"the events of another's resource", "/api/v1/resources/" + e.id("team-b/web") + "/events", 403, `namespace team-b`},
		{"the sources", "/api/v1/sources", 403, `may not list source`},
		{"a source", "/api/v1/sources/infra", 403, `may not get source infra`},
		{"a source's history", "/api/v1/sources/infra/history", 403, `may not get source infra`},
		{"the dashboard", "/", 403, `may not read everything`},
		{"a dashboard page", "/resources/" + e.id("team-b/web"), 403, `may not read everything`},
		{"the metrics", "/metrics", 403, `may not read everything`},
		{"the agents", "/api/v1/agents", 403, `may not read everything`},
		// Types are schemas, shared by every namespace: readable.
		{"the types", "/api/v1/resource-types", 200, `"name":"Certificate"`},
	}
	for _, tt := range tests {
		status, body, _ := e.call("GET", tt.path, teamAToken, "")
		if status != tt.status || !strings.Contains(body, tt.contains) {
			t.Errorf("%s: GET %s = %d %s; want %d with %s", tt.name, tt.path, status, body, tt.status, tt.contains)
		}
		if status == http.StatusForbidden && strings.Contains(body, "web.team-b") {
			t.Errorf("%s: the refusal shows team-b's resource: %s", tt.name, body)
		}
	}

	// Lists without a namespace hold only what the token may read, with
	// every filter, and so do their pages.
	for _, path := range []string{"/api/v1/resources", "/api/v1/resources?kind=Certificate", "/api/v1/resources?source=api",
		"/api/v1/resources?source=infra", "/api/v1/resources?status=pending", "/api/v1/resources?namespace=team-a"} {
		status, body, _ := e.call("GET", path, teamAToken, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, status, body)
		}
		got := refs(t, body)
		if strings.Contains(path, "namespace=team-a") {
			onlyTeamA(t, path, got)
		}
		for _, r := range got {
			if !strings.HasPrefix(r, "team-a/") && !strings.HasPrefix(r, "shared/") {
				t.Errorf("GET %s: the team-a token sees %s", path, r)
			}
		}
		if path == "/api/v1/resources" && !slices.Equal(got, []string{"team-a/git-cert", "team-a/web", "shared/web"}) {
			t.Errorf("GET %s: %v, want team-a's two and shared's one", path, got)
		}
	}

	// By name without a namespace: only the namespaces it may read are
	// looked in, so a name in team-a and team-b is team-a's, and one in
	// two namespaces it reads is ambiguous, naming only those.
	status, body, _ := e.call("GET", "/api/v1/resources/by-name/Certificate/v1/git-cert", teamAToken, "")
	if status != http.StatusOK || !strings.Contains(body, `"namespace":"team-a"`) {
		t.Errorf("by name, unique among its namespaces: %d %s", status, body)
	}
	status, body, _ = e.call("GET", "/api/v1/resources/by-name/Certificate/v1/web", teamAToken, "")
	if status != http.StatusConflict || !strings.Contains(body, "shared") || !strings.Contains(body, "team-a") || strings.Contains(body, "team-b") {
		t.Errorf("by name, in two namespaces it reads: %d %s; want 409 naming shared and team-a, not team-b", status, body)
	}
	status, body, _ = e.call("GET", "/api/v1/resources/by-name/Certificate/v1/web", viewerToken, "")
	if status != http.StatusConflict || !strings.Contains(body, "shared, team-a, team-b") || !strings.Contains(body, "?namespace=") {
		t.Errorf("by name, ambiguous for a viewer: %d %s; want 409 naming the namespaces", status, body)
	}
}

// TestNamespaceAttackCursors pages through lists with the team-a token,
// and replays cursors issued for other lists and other tokens: no page
// ever holds another namespace's resource, and the pages the agent keeps
// for everyone's lists are never served to it.
func TestNamespaceAttackCursors(t *testing.T) {
	t.Parallel()
	e := newNSEnv(t, "postgres", nil)
	// Pages of one: every page is team-a's or shared's, and together they
	// are all of those.
	var seen []string
	next := "/api/v1/resources?limit=1"
	for next != "" {
		status, body, h := e.call("GET", next, teamAToken, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", next, status, body)
		}
		seen = append(seen, refs(t, body)...)
		next = ""
		if c := h.Get("X-Continue"); c != "" {
			next = "/api/v1/resources?limit=1&continue=" + url.QueryEscape(c)
		}
		if len(seen) > 10 {
			t.Fatal("the pages do not end")
		}
	}
	if !slices.Equal(seen, []string{"team-a/git-cert", "team-a/web", "shared/web"}) {
		t.Errorf("pages of one: %v", seen)
	}

	// The viewer's cursors of a list of everything, replayed by team-a:
	// a position, never a grant.
	next = "/api/v1/resources?limit=1"
	for next != "" {
		status, body, h := e.call("GET", next, viewerToken, "")
		if status != http.StatusOK {
			t.Fatalf("viewer GET %s = %d %s", next, status, body)
		}
		next = ""
		c := h.Get("X-Continue")
		if c == "" {
			break
		}
		next = "/api/v1/resources?limit=1&continue=" + url.QueryEscape(c)
		status, body, _ = e.call("GET", "/api/v1/resources?limit=5&continue="+url.QueryEscape(c), teamAToken, "")
		if status != http.StatusOK && status != http.StatusBadRequest {
			t.Errorf("a replayed cursor: %d %s", status, body)
		}
		if status == http.StatusOK {
			for _, r := range refs(t, body) {
				if strings.HasPrefix(r, "team-b/") || strings.HasPrefix(r, "/") {
					t.Errorf("a replayed cursor shows %s to team-a", r)
				}
			}
		}
	}

	// A cursor of team-a's own list, replayed with another namespace, is
	// refused before anything is read.
	_, _, h := e.call("GET", "/api/v1/resources?limit=1&namespace=team-a", teamAToken, "")
	c := h.Get("X-Continue")
	if c == "" {
		t.Fatal("no cursor for a page of one")
	}
	for _, q := range []string{"&namespace=team-b", "", "&namespace=shared"} {
		status, body, _ := e.call("GET", "/api/v1/resources?limit=1&continue="+url.QueryEscape(c)+q, teamAToken, "")
		if status != http.StatusForbidden && status != http.StatusBadRequest {
			t.Errorf("a cursor replayed with %q: %d %s, want 403 or 400", q, status, body)
		}
	}
	// after= jumps anywhere, and still shows team-a's alone.
	for _, id := range e.ids {
		status, body, _ := e.call("GET", "/api/v1/resources?after="+itoa(id-1), teamAToken, "")
		if status != http.StatusOK {
			t.Fatalf("after=%d: %d %s", id-1, status, body)
		}
		for _, r := range refs(t, body) {
			if strings.HasPrefix(r, "team-b/") || strings.HasPrefix(r, "/") {
				t.Errorf("after=%d shows %s to team-a", id-1, r)
			}
		}
	}

	// The viewer's lists are prepared and kept first; team-a asks for the
	// same lists and gets its own.
	for _, path := range []string{"/api/v1/resources", "/api/v1/resources?kind=Certificate", "/api/v1/resources?limit=2"} {
		for range 2 {
			if status, body, _ := e.call("GET", path, viewerToken, ""); status != http.StatusOK {
				t.Fatalf("viewer GET %s = %d %s", path, status, body)
			}
		}
		_, body, _ := e.call("GET", path, teamAToken, "")
		for _, r := range refs(t, body) {
			if strings.HasPrefix(r, "team-b/") || strings.HasPrefix(r, "/") {
				t.Errorf("GET %s after the viewer's: team-a sees %s", path, r)
			}
		}
		// And the other way round: team-a's page is not the viewer's.
		_, body, _ = e.call("GET", path, viewerToken, "")
		if got := refs(t, body); !slices.ContainsFunc(got, func(r string) bool { return strings.HasPrefix(r, "team-b/") }) {
			t.Errorf("GET %s after team-a's: the viewer sees %v", path, got)
		}
	}
}

// TestNamespaceAttackWrites: the team-a token writes team-a's resources
// only. Writing, deleting, reconciling, suspending another namespace's is
// a 403; so is creating in another namespace or in the default one it does
// not hold, moving its resource to another namespace, depending on a
// resource it may not read, writing a cluster-scoped resource and writing
// types, which are cluster-wide. Nothing it was refused changed anything.
func TestNamespaceAttackWrites(t *testing.T) {
	t.Parallel()
	e := newNSEnv(t, "postgres", nil)
	before, err := e.st.GetResource(t.Context(), mustID(t, e.id("team-b/web")))
	if err != nil {
		t.Fatal(err)
	}
	cert := func(fields string) string {
		return `{"resource_type_name": "Certificate", "spec": {"cn": "evil.example.com"}, ` + fields + `}`
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		contains                 string
	}{
		{"update another's", "PUT", "/api/v1/resources/" + e.id("team-b/web"), `{"spec": {"cn": "evil.example.com"}}`, 403, `may not update Certificate in namespace team-b`},
		{"delete another's", "DELETE", "/api/v1/resources/" + e.id("team-b/web"), "", 403, `may not delete Certificate in namespace team-b`},
		{"reconcile another's", "POST", "/api/v1/resources/" + e.id("team-b/web") + "/reconcile", "", 403, `may not reconcile`},
		{"suspend another's", "POST", "/api/v1/resources/" + e.id("team-b/web") + "/suspend", "", 403, `may not suspend`},
		{"resume another's", "POST", "/api/v1/resources/" + e.id("team-b/web") + "/resume", "", 403, `may not suspend`},
		{"update one it only reads", "PUT", "/api/v1/resources/" + e.id("shared/web"), `{"spec": {"cn": "evil.example.com"}}`, 403, `namespace shared`},
		{"create in another namespace", "POST", "/api/v1/resources", cert(`"name": "web", "namespace": "team-b"`), 403, `may not create Certificate in namespace team-b`},
		{"create over another's by POST", "POST", "/api/v1/resources", cert(`"name": "git-cert-b", "namespace": "team-b"`), 403, `namespace team-b`},
		{"create in the default namespace", "POST", "/api/v1/resources", cert(`"name": "web"`), 403, `namespace default`},
		{"move its own to another namespace", "PUT", "/api/v1/resources/" + e.id("team-a/web"), `{"namespace": "team-b"}`, 403, `namespace team-b`},
		{"depend on another namespace's", "POST", "/api/v1/resources",
			cert(`"name": "dep", "namespace": "team-a", "depends_on": [{"kind": "Certificate", "namespace": "team-b", "name": "web"}]`), 403,
			`depends_on: token \"team-a\" may not read resources in namespace team-b`},
		{"depend on a cluster-scoped one", "POST", "/api/v1/resources",
			cert(`"name": "dep", "namespace": "team-a", "depends_on": [{"kind": "Network", "name": "prod-vpc"}]`), 403, `may not read cluster-scoped resources`},
		{"add a dependency by update", "PUT", "/api/v1/resources/" + e.id("team-a/web"),
			`{"depends_on": [{"kind": "Certificate", "namespace": "team-b", "name": "git-cert-b"}]}`, 403, `namespace team-b`},
		{"write a cluster-scoped resource", "POST", "/api/v1/resources", `{"name": "evil-vpc", "resource_type_name": "Network", "spec": {"cidr": "10.9.0.0/16"}}`,
			403, `may not create Network (cluster-scoped)`},
		{"a cluster-scoped one in its namespace", "POST", "/api/v1/resources",
			`{"name": "evil-vpc", "namespace": "team-a", "resource_type_name": "Network", "spec": {"cidr": "10.9.0.0/16"}}`, 400, `Network is cluster-scoped and takes no namespace`},
		{"create a type", "POST", "/api/v1/resource-types", widgetType, 403, `resource types are cluster-wide`},
		{"update a type", "PUT", "/api/v1/resource-types/1", `{"description": "evil"}`, 403, ``},
		{"delete a type", "DELETE", "/api/v1/resource-types/1", "", 403, ``},
		{"sync a source", "POST", "/api/v1/sources/infra/sync", "", 403, `may not sync`},
		{"suspend a source", "POST", "/api/v1/sources/infra/suspend", "", 403, `may not suspend source infra`},
	}
	for _, tt := range tests {
		status, body, _ := e.call(tt.method, tt.path, teamAToken, tt.body)
		if status != tt.status || !strings.Contains(body, tt.contains) {
			t.Errorf("%s: %s %s = %d %s; want %d with %s", tt.name, tt.method, tt.path, status, body, tt.status, tt.contains)
		}
	}
	// Nothing refused changed anything: team-b's resource is as it was, no
	// resource was added anywhere, team-a's stays in team-a.
	after, err := e.st.GetResource(t.Context(), before.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || string(after.Spec) != string(before.Spec) || after.Suspended() || after.DeletionRequestedAt != nil {
		t.Errorf("team-b's resource changed: %+v", after)
	}
	rows, err := e.st.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(e.ids) {
		t.Errorf("%d resources now, %d before", len(rows), len(e.ids))
	}
	for _, r := range rows {
		if r.ID == mustID(t, e.id("team-a/web")) && (r.Namespace != "team-a" || len(r.DependsOn) > 0) {
			t.Errorf("team-a's web is now %s with dependencies %v", r.Ref(), r.DependsOn)
		}
	}

	// What it may do: create in team-a, depend on its own namespace's and on
	// a namespace it reads, update, suspend, reconcile and delete its own.
	var created api.Resource
	e.must("POST", "/api/v1/resources", teamAToken, cert(`"name": "app", "namespace": "team-a",
		"depends_on": [{"kind": "Certificate", "name": "web"}, {"kind": "Certificate", "namespace": "shared", "name": "web"}]`), http.StatusCreated, &created)
	want := []manifest.ObjectRef{{Kind: "Certificate", Namespace: "team-a", Name: "web"}, {Kind: "Certificate", Namespace: "shared", Name: "web"}}
	if created.Namespace != "team-a" || !slices.Equal(created.DependsOn, want) {
		t.Errorf("created %s/%s depending on %v", created.Namespace, created.Name, created.DependsOn)
	}
	// The same name in another namespace is another resource: team-b's is untouched.
	e.must("PUT", "/api/v1/resources/"+e.id("team-a/web"), teamAToken, `{"spec": {"cn": "new.team-a.example.com"}, "namespace": "team-a"}`, http.StatusOK, nil)
	e.must("POST", "/api/v1/resources/"+e.id("team-a/web")+"/suspend", teamAToken, "", http.StatusOK, nil)
	e.must("POST", "/api/v1/resources/"+e.id("team-a/web")+"/resume", teamAToken, "", http.StatusOK, nil)
	e.must("POST", "/api/v1/resources/"+e.id("team-a/web")+"/reconcile", teamAToken, "", http.StatusAccepted, nil)
	e.must("DELETE", "/api/v1/resources/"+itoa(created.ID), teamAToken, "", http.StatusAccepted, nil)
	if after, err := e.st.GetResource(t.Context(), before.ID); err != nil || string(after.Spec) != string(before.Spec) {
		t.Errorf("team-b's web after team-a's writes: %v %v", after, err)
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var id int64
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestNamespaceAttackEvents: the team-a token's event stream without a
// filter carries team-a's resources' events only: not team-b's, not the
// cluster-scoped ones', not the sources'.
func TestNamespaceAttackEvents(t *testing.T) {
	t.Parallel()
	e := newNSEnv(t, "postgres", nil)
	s := streamWith(t, e.base+"/api/v1/events", teamAToken)
	all := streamWith(t, e.base+"/api/v1/events?namespace=team-b", viewerToken)
	// Changes elsewhere first, then one of team-a's: the first event the
	// stream carries must be team-a's.
	e.must("POST", "/api/v1/resources/"+e.id("team-b/web")+"/suspend", writeToken, "", http.StatusOK, nil)
	e.must("POST", "/api/v1/resources/"+e.id("/prod-vpc")+"/suspend", writeToken, "", http.StatusOK, nil)
	e.must("POST", "/api/v1/sources/infra/suspend", writeToken, "", http.StatusOK, nil)
	e.must("POST", "/api/v1/resources/"+e.id("team-a/web")+"/suspend", writeToken, "", http.StatusOK, nil)
	// The setup's creations may still be on their way: events of
	// resources in shared, which the token reads, may come first; none of
	// team-b, of a cluster-scoped resource or of a source may.
	for {
		ev := s.next()
		if ev.name != api.EventResource {
			t.Fatalf("event of team-a's stream: %s %s", ev.name, ev.data)
		}
		var got store.StatusEvent
		if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
			t.Fatal(err)
		}
		if got.Namespace == "shared" && !got.Suspended {
			continue
		}
		if got.Namespace != "team-a" || got.Name != "web" {
			t.Errorf("first event of team-a's stream after the suspensions began: %s", ev.data)
		}
		break
	}
	// The viewer's stream of team-b carries team-b's, with its namespace.
	if got := all.nextResource(); got.Namespace != "team-b" || got.Name != "web" {
		t.Errorf("the viewer's stream of team-b: %+v", got)
	}
	// The per-resource stream of its own resource works.
	one := streamWith(t, e.base+"/api/v1/resources/"+e.id("team-a/web")+"/events", teamAToken)
	e.must("POST", "/api/v1/resources/"+e.id("team-a/web")+"/resume", writeToken, "", http.StatusOK, nil)
	if got := one.nextResource(); got.Namespace != "team-a" {
		t.Errorf("the per-resource stream: %+v", got)
	}
}

// TestNamespaceAttackIDTokens: a grant limited to namespaces holds for ID
// tokens too, through the entry their claim names.
func TestNamespaceAttackIDTokens(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	e := newNSEnv(t, "postgres", func(o *api.Options) {
		o.OIDC = oidc.New(is.URL, "no8s", "email")
		o.Tokens = append(o.Tokens, api.Token{Name: "alice@example.com", Grants: []api.Grant{{Verbs: resourceVerbs, Namespaces: []string{"team-a"}}}})
	})
	alice := is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com"})
	if status, body, _ := e.call("GET", "/api/v1/resources/"+e.id("team-b/web"), alice, ""); status != http.StatusForbidden {
		t.Errorf("an ID token reads team-b's: %d %s", status, body)
	}
	if status, body, _ := e.call("GET", "/api/v1/resources/"+e.id("team-a/web"), alice, ""); status != http.StatusOK {
		t.Errorf("an ID token reads team-a's: %d %s", status, body)
	}
	_, body, _ := e.call("GET", "/api/v1/resources", alice, "")
	onlyTeamA(t, "an ID token's list", refs(t, body))
	if status, body, _ := e.call("DELETE", "/api/v1/resources/"+e.id("team-b/web"), alice, ""); status != http.StatusForbidden {
		t.Errorf("an ID token deletes team-b's: %d %s", status, body)
	}
}

// TestNamespacesTwoTeams is the acceptance test, on both stores: team-a and
// team-b each hold Certificate/web; a token granted team-a reads and
// writes team-a's and is refused team-b's; deleting one leaves the other.
func TestNamespacesTwoTeams(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newNSEnv(t, backend, nil)
			a, b := e.id("team-a/web"), e.id("team-b/web")
			var got api.Resource
			e.must("GET", "/api/v1/resources/"+a, teamAToken, "", http.StatusOK, &got)
			if got.Namespace != "team-a" || got.Name != "web" || got.Kind != "Certificate" {
				t.Errorf("team-a reads %+v", got)
			}
			e.must("GET", "/api/v1/resources/by-name/Certificate/v1/web?namespace=team-a", teamAToken, "", http.StatusOK, &got)
			if itoa(got.ID) != a {
				t.Errorf("by name in team-a: %d, want %s", got.ID, a)
			}
			e.must("PUT", "/api/v1/resources/"+a, teamAToken, `{"spec": {"cn": "v2.team-a.example.com"}}`, http.StatusOK, &got)
			if got.Generation != 2 || got.Namespace != "team-a" {
				t.Errorf("team-a's update: generation %d in %q", got.Generation, got.Namespace)
			}
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/api/v1/resources/" + b, ""},
				{"GET", "/api/v1/resources/by-name/Certificate/v1/web?namespace=team-b", ""},
				{"PUT", "/api/v1/resources/" + b, `{"spec": {"cn": "evil"}}`},
				{"DELETE", "/api/v1/resources/" + b, ""},
			} {
				if status, body, _ := e.call(c.method, c.path, teamAToken, c.body); status != http.StatusForbidden {
					t.Errorf("%s %s by team-a: %d %s, want 403", c.method, c.path, status, body)
				}
			}
			// Deleting team-a's leaves team-b's.
			e.must("DELETE", "/api/v1/resources/"+a, teamAToken, "", http.StatusAccepted, nil)
			e.must("GET", "/api/v1/resources/"+b, viewerToken, "", http.StatusOK, &got)
			if got.Namespace != "team-b" || got.Generation != 1 || got.DeletionRequestedAt != nil {
				t.Errorf("team-b's after team-a's deletion: %+v", got)
			}
			ra, err := e.st.GetResource(t.Context(), mustID(t, a))
			if err != nil || ra.DeletionRequestedAt == nil {
				t.Errorf("team-a's after its deletion: %v %v", ra, err)
			}
			rb, err := e.st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Certificate", Namespace: "team-b", Name: "web"})
			if err != nil || rb.DeletionRequestedAt != nil {
				t.Errorf("team-b's in the store: %v %v", rb, err)
			}
		})
	}
}

// TestNamespacesInShapes: every shape that names a resource carries its
// namespace (an empty one for cluster-scoped resources), writes take it
// and default it, and a name in several namespaces read without one is a
// 409 that names them.
func TestNamespacesInShapes(t *testing.T) {
	t.Parallel()
	e := newNSEnv(t, "sqlite", nil)
	var r api.Resource
	e.must("GET", "/api/v1/resources/"+e.id("/prod-vpc"), writeToken, "", http.StatusOK, &r)
	if r.Namespace != "" {
		t.Errorf("a cluster-scoped resource has namespace %q", r.Namespace)
	}
	// Without a namespace, a write lands in the default one; the answer,
	// the list and the history say where.
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "web", "resource_type_name": "Certificate", "spec": {"cn": "d"}}`, http.StatusCreated, &r)
	if r.Namespace != "default" {
		t.Errorf("created without a namespace: in %q", r.Namespace)
	}
	status, body, _ := e.call("GET", "/api/v1/resources?namespace=default", writeToken, "")
	if status != http.StatusOK || !slices.Equal(refs(t, body), []string{"default/web"}) {
		t.Errorf("list of default: %d %s", status, body)
	}
	status, body, _ = e.call("GET", "/api/v1/resources/by-name/Certificate/v1/web", writeToken, "")
	if status != http.StatusConflict || !strings.Contains(body, "default, shared, team-a, team-b") {
		t.Errorf("by name in four namespaces: %d %s", status, body)
	}
	// POST of an existing ref updates that one, not its namesakes.
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "web", "namespace": "team-b", "resource_type_name": "Certificate", "spec": {"cn": "b2"}}`,
		http.StatusOK, &r)
	if itoa(r.ID) != e.id("team-b/web") || r.Generation != 2 {
		t.Errorf("POST over team-b's web: %+v", r)
	}
	// The type shows its scope.
	var types []api.ResourceType
	e.must("GET", "/api/v1/resource-types", writeToken, "", http.StatusOK, &types)
	for _, ty := range types {
		want := map[string]string{"Certificate": "Namespaced", "Network": "Cluster"}[ty.Name]
		if ty.Scope != want {
			t.Errorf("type %s has scope %q, want %q", ty.Name, ty.Scope, want)
		}
	}
	// The event stream carries the namespace.
	s := streamWith(t, e.base+"/api/v1/events?namespace=team-b", writeToken)
	e.must("POST", "/api/v1/resources/"+e.id("team-b/web")+"/suspend", writeToken, "", http.StatusOK, nil)
	if ev := s.nextResource(); ev.Namespace != "team-b" {
		t.Errorf("event %+v", ev)
	}
}
