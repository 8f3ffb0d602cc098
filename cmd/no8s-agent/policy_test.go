package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestAgentPolicy runs the agent with a configuration whose Git source
// requires signed commits and whose admission hook refuses one resource:
// a signed commit applies, an unsigned one on top is refused and changes
// nothing, a signed one the hook refuses changes nothing either, and the
// next signed commit the hook accepts applies everything.
func TestAgentPolicy(t *testing.T) {
	t.Parallel()
	keys := sigtest.New(t)
	ops := keys.SSH("ops")
	dir := t.TempDir()
	signers := filepath.Join(dir, "allowed_signers")
	keys.WriteAllowedSigners(signers, ops)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request struct {
				UID  string `json:"uid"`
				Name string `json:"name"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"uid": review.Request.UID, "allowed": review.Request.Name != "forbidden"}
		if review.Request.Name == "forbidden" {
			resp["status"] = map[string]any{"message": "forbidden sites need a ticket"}
		}
		json.NewEncoder(w).Encode(map[string]any{"response": resp})
	}))
	t.Cleanup(hook.Close)

	repo := gittest.NewRepo(t)
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - name: infra
    git:
      url: %q
      branch: main
      interval: 1s
      verify: {mode: all, sshAllowedSignersFile: %q}
admission:
  - {name: tickets, url: %q, type: validating}
`, repo.URL(), signers, hook.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	signed := func(files map[string]string, msg string) string {
		repo.Write(files)
		return repo.CommitSigned(msg, keys.Env(), sigtest.SignWithSSH(ops)...)
	}
	exists := func(name string) bool {
		_, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: name})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	refusedWith := func(agent *agentRun, commit, want string) {
		t.Helper()
		waitFor(t, 30*time.Second, agent, "a refusal saying "+want, func() (bool, string) {
			src, err := st.GetSource(t.Context(), "infra")
			if err != nil {
				return false, err.Error()
			}
			return string(src.LastAttemptedRevision) == "main@sha1:"+commit && strings.Contains(src.Message, want), src.Message
		})
	}

	first := signed(map[string]string{"types.yaml": siteType, "shop.yaml": site("shop", 1)}, "signed: the shop")
	agent := startAgent(t, url, "--config", cfgPath)
	waitFor(t, 30*time.Second, agent, "the shop", func() (bool, string) { return exists("shop"), "" })

	repo.Write(map[string]string{"blog.yaml": site("blog", 1)})
	unsigned := repo.Commit("unsigned: the blog")
	refusedWith(agent, unsigned, "commit "+unsigned[:8]+": not signed")

	// Signed on top of the unsigned one: mode all still refuses.
	onTop := signed(map[string]string{"docs.yaml": site("docs", 1)}, "signed: the docs")
	refusedWith(agent, onTop, "commit "+unsigned[:8]+": not signed")

	// A line of signed commits from the last applied one: the hook decides.
	repo.Git("reset", "-q", "--hard", first)
	denied := signed(map[string]string{"blog.yaml": site("blog", 1), "forbidden.yaml": site("forbidden", 1)}, "signed: blog and forbidden")
	refusedWith(agent, denied, "forbidden sites need a ticket")
	for _, name := range []string{"blog", "docs", "forbidden"} {
		if exists(name) {
			t.Errorf("%s was created by a refused revision", name)
		}
	}

	signed(map[string]string{"forbidden.yaml": ""}, "signed: without forbidden")
	waitFor(t, 30*time.Second, agent, "the blog", func() (bool, string) { return exists("blog"), "" })
}
