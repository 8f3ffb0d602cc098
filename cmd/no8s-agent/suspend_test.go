package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// suspendedSite declares a Site the annotation no8s.io/suspend suspends.
func suspendedSite(name string, replicas int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Site\nmetadata:\n  name: %s\n  annotations: {no8s.io/suspend: \"true\"}\nspec: {replicas: %d}\n",
		name, replicas)
}

// TestSuspendAndResume suspends a Git source and resources of it through
// the API, by annotation and by configuration, on either store: a
// suspended source ignores new commits, whether a webhook or its poll
// brings them, until it is resumed; a suspended resource keeps its
// pending generation until it is resumed, while the others go on.
func TestSuspendAndResume(t *testing.T) {
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			repo := gittest.NewRepo(t)
			repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2), "sites/blog.yaml": site("blog", 1)})
			repo.Commit("first")
			gs := gittest.NewServer(t, filepath.Dir(repo.Dir), "bot", "git-pass-51d0")
			remote := gs.URL + "/" + filepath.Base(repo.Dir) + "/.git"
			const secret, token = "hook-secret-9c1e", "write-token-77b2"
			cfgFor := func(suspend bool) string {
				return fmt.Sprintf(`sources:
  - name: sites
    suspend: %t
    git: {url: %q, branch: main, interval: 1s, auth: {usernameEnv: %s, passwordEnv: %s}}
webhooks: {githubSecretEnv: %s}
api: {writeTokenEnv: %s}
actions: {web: {plugin: noop}}
`, suspend, remote, setSecret(t, "bot"), setSecret(t, "git-pass-51d0"), setSecret(t, secret), setSecret(t, token))
			}
			path := filepath.Join(dir, "no8s.yaml")
			if err := os.WriteFile(path, []byte(cfgFor(false)), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Parallel()
			url := "sqlite://" + filepath.Join(dir, "state.db")
			if backend == "postgres" {
				url = pgtest.URL(t)
			}
			agent := startAgent(t, url, "--config", path)
			base := agent.addr()
			s := &suspendProbe{t: t, base: base, token: token}

			waitFor(t, 30*time.Second, agent, "the first sync", s.applied(repo.Head()))
			shop := s.resource("shop")
			waitFor(t, 30*time.Second, agent, "shop at generation 1", s.observed("shop", 1))

			// A suspended source: neither the webhook nor the poll syncs a
			// new commit, and a sync through the API is refused.
			if code, body := s.post("/api/v1/sources/sites/suspend"); code != http.StatusOK ||
				!strings.Contains(body, `"suspended":true`) || !strings.Contains(body, `"suspended_by":"api"`) {
				t.Fatalf("suspend source = %d %s", code, body)
			}
			if code, body := s.post("/api/v1/sources/sites/sync"); code != http.StatusConflict || !strings.Contains(body, "suspended") {
				t.Errorf("sync of a suspended source = %d %s, want 409", code, body)
			}
			first := repo.Head()
			repo.Write(map[string]string{"sites/shop.yaml": site("shop", 3)})
			second := repo.Commit("grow the shop")
			looked := s.suspendedLooks()
			if code := deliver(t, base, "push", pushPayload(remote, "refs/heads/main", second), secret); code != http.StatusOK {
				t.Fatalf("signed push = %d", code)
			}
			// The push's trigger and at least two polls looked and passed by.
			waitFor(t, 30*time.Second, agent, "the suspended source to be looked at three times", func() (bool, string) {
				n := s.suspendedLooks()
				return n >= looked+3, fmt.Sprintf("%v looks, from %v", n, looked)
			})
			if src := s.source(); !strings.HasSuffix(src.LastApplied, first) || s.resource("shop").Generation != 1 {
				t.Fatalf("a suspended source applied %s", src.LastApplied)
			}
			// Resumed: the commit is synced at once.
			if code, body := s.post("/api/v1/sources/sites/resume"); code != http.StatusOK || !strings.Contains(body, `"suspended":false`) {
				t.Fatalf("resume source = %d %s", code, body)
			}
			waitFor(t, 30*time.Second, agent, "the commit after the resume", s.applied(second))
			waitFor(t, 30*time.Second, agent, "shop at generation 2", s.observed("shop", 2))

			// A suspended resource keeps its new generation pending while
			// the other resources of the commit are reconciled.
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/suspend", shop.ID)); code != http.StatusOK ||
				!strings.Contains(body, `"suspended_by":"api"`) {
				t.Fatalf("suspend shop = %d %s", code, body)
			}
			repo.Write(map[string]string{"sites/shop.yaml": site("shop", 4), "sites/blog.yaml": site("blog", 2)})
			third := repo.Commit("grow both")
			waitFor(t, 30*time.Second, agent, "the third commit", s.applied(third))
			waitFor(t, 30*time.Second, agent, "blog at generation 2", s.observed("blog", 2))
			if r := s.resource("shop"); r.Generation != 3 || r.ObservedGeneration != 2 || r.Status != "pending" || !r.Suspended {
				t.Fatalf("suspended shop after a spec change: %+v", r)
			}
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/reconcile", shop.ID)); code != http.StatusConflict {
				t.Errorf("reconcile of a suspended resource = %d %s, want 409", code, body)
			}
			if got := s.metric(`no8s_resources_suspended`); got != 1 {
				t.Errorf("no8s_resources_suspended = %v, want 1", got)
			}
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/resume", shop.ID)); code != http.StatusOK {
				t.Fatalf("resume shop = %d %s", code, body)
			}
			waitFor(t, 30*time.Second, agent, "shop at generation 3 after its resume", s.observed("shop", 3))

			// The annotation suspends as the API does, and only its removal
			// from Git resumes.
			repo.Write(map[string]string{"sites/shop.yaml": site("shop", 5), "sites/blog.yaml": suspendedSite("blog", 3)})
			fourth := repo.Commit("pause the blog")
			waitFor(t, 30*time.Second, agent, "the fourth commit", s.applied(fourth))
			waitFor(t, 30*time.Second, agent, "shop at generation 4", s.observed("shop", 4))
			blog := s.resource("blog")
			if blog.Generation != 3 || blog.ObservedGeneration != 2 || blog.SuspendedBy != "annotation" {
				t.Fatalf("annotated blog: %+v", blog)
			}
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/resume", blog.ID)); code != http.StatusConflict ||
				!strings.Contains(body, "sites/blog.yaml") {
				t.Errorf("resume of an annotated resource = %d %s, want 409 naming its file", code, body)
			}
			repo.Write(map[string]string{"sites/blog.yaml": site("blog", 3)})
			fifth := repo.Commit("resume the blog")
			waitFor(t, 30*time.Second, agent, "the fifth commit", s.applied(fifth))
			waitFor(t, 30*time.Second, agent, "blog at generation 3", s.observed("blog", 3))

			// A suspended resource removed from Git is not destroyed until
			// it is resumed.
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/suspend", blog.ID)); code != http.StatusOK {
				t.Fatalf("suspend blog = %d %s", code, body)
			}
			repo.Git("rm", "-q", "sites/blog.yaml")
			repo.Write(map[string]string{"sites/shop.yaml": site("shop", 6)})
			sixth := repo.Commit("retire the blog")
			waitFor(t, 30*time.Second, agent, "the sixth commit", s.applied(sixth))
			waitFor(t, 30*time.Second, agent, "shop at generation 5", s.observed("shop", 5))
			if r := s.resource("blog"); r.ID != blog.ID || r.Status != "deleting" || !r.Suspended {
				t.Fatalf("suspended blog after its file went: %+v, want it kept, deleting", r)
			}
			if code, body := s.post(fmt.Sprintf("/api/v1/resources/%d/resume", blog.ID)); code != http.StatusOK {
				t.Fatalf("resume blog = %d %s", code, body)
			}
			waitFor(t, 30*time.Second, agent, "blog destroyed after its resume", func() (bool, string) {
				code, body := curl(t, "GET", s.base+"/api/v1/resources/by-name/Site/v1/blog", s.token, "")
				return code == http.StatusNotFound, body
			})
			fifth = sixth

			// Suspended by the configuration: the API cannot resume it.
			if code, _ := agent.stop(); code != 0 {
				t.Fatalf("run exited %d", code)
			}
			if err := os.WriteFile(path, []byte(cfgFor(true)), 0o644); err != nil {
				t.Fatal(err)
			}
			agent = startAgent(t, url, "--config", path)
			s.base = agent.addr()
			waitFor(t, 30*time.Second, agent, "the configuration's suspension", func() (bool, string) {
				src := s.source()
				return src.SuspendedBy == "config", "suspended by " + src.SuspendedBy
			})
			if code, body := s.post("/api/v1/sources/sites/resume"); code != http.StatusConflict || !strings.Contains(body, "configuration") {
				t.Errorf("resume through the API of a source the configuration suspends = %d %s, want 409", code, body)
			}
			repo.Write(map[string]string{"sites/shop.yaml": site("shop", 7)})
			repo.Commit("grow the shop again")
			looked = s.suspendedLooks()
			waitFor(t, 30*time.Second, agent, "the suspended source to be polled twice", func() (bool, string) {
				n := s.suspendedLooks()
				return n >= looked+2, fmt.Sprintf("%v looks, from %v", n, looked)
			})
			if src := s.source(); !strings.HasSuffix(src.LastApplied, fifth) {
				t.Fatalf("a source the configuration suspends applied %s", src.LastApplied)
			}
		})
	}
}

// suspendProbe reads and writes a running agent's API for TestSuspendAndResume.
type suspendProbe struct {
	t           *testing.T
	base, token string
}

type probedResource struct {
	ID                 int64  `json:"id"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observed_generation"`
	Status             string `json:"status"`
	Suspended          bool   `json:"suspended"`
	SuspendedBy        string `json:"suspended_by"`
}

type probedSource struct {
	LastApplied string `json:"last_applied_revision"`
	SuspendedBy string `json:"suspended_by"`
}

func (s *suspendProbe) post(path string) (int, string) {
	return curl(s.t, "POST", s.base+path, s.token, "")
}

// get reads path into v; a 404 leaves v as it is.
func (s *suspendProbe) get(path string, v any) {
	s.t.Helper()
	code, body := curl(s.t, "GET", s.base+path, s.token, "")
	if code == http.StatusNotFound {
		return
	}
	if code != http.StatusOK {
		s.t.Fatalf("GET %s = %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
}

func (s *suspendProbe) resource(name string) probedResource {
	s.t.Helper()
	var r probedResource
	s.get("/api/v1/resources/by-name/Site/v1/"+name, &r)
	return r
}

func (s *suspendProbe) source() probedSource {
	s.t.Helper()
	var src probedSource
	s.get("/api/v1/sources/sites", &src)
	return src
}

func (s *suspendProbe) applied(commit string) func() (bool, string) {
	return func() (bool, string) {
		src := s.source()
		return strings.HasSuffix(src.LastApplied, commit), "applied " + src.LastApplied
	}
}

func (s *suspendProbe) observed(name string, gen int64) func() (bool, string) {
	return func() (bool, string) {
		r := s.resource(name)
		return r.ObservedGeneration == gen, fmt.Sprintf("%+v", r)
	}
}

// metric returns the value of the series named exactly so, or -1.
func (s *suspendProbe) metric(series string) float64 {
	s.t.Helper()
	_, text := curl(s.t, "GET", s.base+"/metrics", s.token, "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		s.t.Fatal(err)
	}
	return v
}

// suspendedLooks is how often the source was looked at and passed by as suspended.
func (s *suspendProbe) suspendedLooks() float64 {
	return s.metric(`no8s_sync_runs_total{result="suspended",source="sites"}`)
}
