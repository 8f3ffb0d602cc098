package dashboard

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

const namespacedManifests = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Certificate}
spec:
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Zone}
spec:
  scope: Cluster
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: Zone
metadata: {name: z1}
spec: {}
---
apiVersion: no8s.io/v1
kind: Certificate
metadata: {name: web, namespace: team-a}
spec: {}
---
apiVersion: no8s.io/v1
kind: Certificate
metadata: {name: web, namespace: team-b}
dependsOn: [{kind: Certificate, namespace: team-a, name: web}]
spec: {}
`

// TestNamespacesShown: the lists show each resource's namespace, linking to
// the overview of that namespace, which shows its resources only; a
// resource's page names its namespace and its dependencies in full.
func TestNamespacesShown(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	snap := &source.Snapshot{Revision: "main@sha1:" + manifest.Revision(strings.Repeat("e", 40)),
		Files: []manifest.File{{Path: "all.yaml", Data: []byte(namespacedManifests), Hash: "sha256:" + strings.Repeat("1", 64)}}}
	if _, err := sync.New(st, nil).Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	h := newHandler(st, Options{})
	code, body, _ := get(t, h, "/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d", code)
	}
	for _, want := range []string{`<th scope="col">Namespace</th>`, `<a class="ns" href="/?namespace=team-a"`, `<a class="ns" href="/?namespace=team-b"`,
		`cluster-wide</span>`, `name="namespace" value=""`} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s", want)
		}
	}
	code, body, _ = get(t, h, "/?namespace=team-b")
	if code != http.StatusOK || strings.Count(body, `<tr class="resource">`) != 1 || !strings.Contains(body, `href="/?namespace=team-b"`) ||
		strings.Contains(body, `href="/?namespace=team-a"`) || !strings.Contains(body, `name="namespace" value="team-b"`) {
		t.Errorf("the overview of team-b: %d\n%s", code, body)
	}
	if code, _, _ := get(t, h, "/?namespace=Team_B"); code != http.StatusBadRequest {
		t.Errorf("a bad namespace: %d, want 400", code)
	}
	b, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Certificate", Namespace: "team-b", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ = get(t, h, "/resources/"+strconv.FormatInt(b.ID, 10))
	for _, want := range []string{`<title>Certificate/team-b/web`, `<span class="ns">team-b</span>`, `<dt>Namespace</dt><dd><a class="ns" href="/?namespace=team-b"`,
		`>Certificate/team-a/web</a>`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("the page of team-b's web lacks %s (%d)", want, code)
		}
	}
}
