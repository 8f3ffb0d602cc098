package sync_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestSyncFromGit drives the whole desired-state path on real repositories:
// commits -> Git source -> sync -> PostgreSQL, over file:// and over HTTP
// with basic auth.
func TestSyncFromGit(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"file", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			st, _ := newStore(t)
			repo := gittest.NewRepo(t)
			repo.Write(map[string]string{
				"infra/types.yaml":   widgetType,
				"infra/widgets.yaml": widget("a", "{size: 1}") + widget("b", "{size: 1}"),
				"infra/keep.yaml":    strings.Replace(widget("kept", "{size: 1}"), "name: kept", "name: kept\n  annotations: {no8s.io/prune: disabled}", 1),
				"README.md":          "# infra\n",
			})
			first := repo.Commit("Add widgets")

			cfg := git.Config{Name: "infra", URL: repo.URL(), Ref: git.Ref{Branch: "main"}, Path: "infra",
				CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second}
			var server *gittest.Server
			if transport == "http" {
				server = gittest.NewServer(t, filepath.Dir(repo.Dir), "robot", "s3cret")
				cfg.URL = server.URL + "/" + filepath.Base(repo.Dir) + "/.git"
				cfg.Auth = git.Auth{Username: "robot", Password: "s3cret"}
			}
			src, err := git.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: src.Location(), Path: "infra", Prune: sync.Prune{Enabled: true}}
			s := sync.New(st, nil)
			syncOnce := func() *sync.Result {
				t.Helper()
				snap, err := src.Fetch(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return mustSync(t, s, tg, snap)
			}

			// Add: generation 1, revision and commit recorded.
			res := syncOnce()
			if len(res.Plan.Creates) != 3 || res.Revision != manifest.Revision("main@sha1:"+first) {
				t.Fatalf("first sync: %s at %s", res.Plan.Summary(), res.Revision)
			}
			a := get(t, st, "Widget", "a")
			if a.Generation != 1 || a.Source.Path != "widgets.yaml" || a.Source.Revision != res.Revision {
				t.Errorf("a: generation %d source %+v", a.Generation, a.Source)
			}
			stored, _ := st.GetSource(t.Context(), "infra")
			if strings.TrimSpace(stored.LastCommit.Message) != "Add widgets" || stored.LastCommit.Author != "Test <test@example.com>" || stored.URL != src.Location() {
				t.Errorf("source %+v", stored)
			}

			// Unchanged remote head: no fetch, and nothing synced.
			if server != nil {
				server.Take()
			}
			if res := syncOnce(); !res.Skipped {
				t.Errorf("unchanged head was synced: %+v", res)
			}
			if server != nil {
				reqs := server.Take()
				for _, r := range reqs {
					if strings.HasPrefix(r, "POST") {
						t.Errorf("unchanged head fetched: %v", reqs)
					}
				}
				if len(reqs) != 1 {
					t.Errorf("requests for an unchanged head: %v", reqs)
				}
			}

			// Spec change: generation 2.
			repo.Write(map[string]string{"infra/widgets.yaml": widget("a", "{size: 2}") + widget("b", "{size: 1}")})
			repo.Commit("Grow a")
			if res := syncOnce(); len(res.Plan.Updates) != 1 || get(t, st, "Widget", "a").Generation != 2 {
				t.Errorf("spec change: %s", res.Plan.Summary())
			}
			// Label-only change: still 2.
			repo.Write(map[string]string{"infra/widgets.yaml": strings.Replace(widget("a", "{size: 2}"), "name: a", "name: a\n  labels: {team: x}", 1) + widget("b", "{size: 1}")})
			repo.Commit("Label a")
			if res := syncOnce(); res.Plan.Changes() != 0 || get(t, st, "Widget", "a").Generation != 2 || get(t, st, "Widget", "a").Labels["team"] != "x" {
				t.Errorf("label change: %s", res.Plan.Summary())
			}
			// A change outside the path, and to a non-manifest: a new commit, nothing to do.
			repo.Write(map[string]string{"README.md": "# infra, now documented\n"})
			repo.Commit("Docs")
			if res := syncOnce(); res.Skipped || res.Plan.Changes() != 0 {
				t.Errorf("docs change: %+v", res)
			}
			// Files removed: b is marked for deletion, kept is forgotten.
			repo.Write(map[string]string{"infra/widgets.yaml": widget("a", "{size: 2}"), "infra/keep.yaml": ""})
			repo.Commit("Remove b and kept")
			res = syncOnce()
			if len(res.Plan.Deletes) != 1 || res.Plan.Deletes[0].Name != "b" || len(res.Plan.Forgets) != 1 || res.Plan.Forgets[0].Name != "kept" {
				t.Fatalf("removal: deletes %v forgets %v", res.Plan.Deletes, res.Plan.Forgets)
			}
			if b := get(t, st, "Widget", "b"); b.Phase != manifest.PhaseDeleting {
				t.Errorf("b phase %s", b.Phase)
			}
			if _, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "kept"}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("kept: %v", err)
			}

			// A force-pushed branch (history rewritten) syncs like any new commit.
			repo.Git("reset", "-q", "--hard", first)
			repo.Write(map[string]string{"infra/widgets.yaml": widget("a", "{size: 9}")})
			rewritten := repo.Commit("Rewrite history")
			res = syncOnce()
			if res.Revision != manifest.Revision("main@sha1:"+rewritten) || get(t, st, "Widget", "a").Generation != 3 {
				t.Errorf("force push: %s at %s", res.Plan.Summary(), res.Revision)
			}
		})
	}
}

// TestSyncFromGitFaults shows that source faults leave the store intact.
func TestSyncFromGitFaults(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"infra/types.yaml": widgetType, "infra/w.yaml": widget("a", "{size: 1}")})
	repo.Commit("Add")
	server := gittest.NewServer(t, filepath.Dir(repo.Dir), "robot", "s3cret")
	url := server.URL + "/" + filepath.Base(repo.Dir) + "/.git"
	s := sync.New(st, nil)
	tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: url, Path: "infra", Prune: sync.Prune{Enabled: true}}
	cache := filepath.Join(t.TempDir(), "cache")
	newSrc := func(edit func(*git.Config)) *git.Source {
		cfg := git.Config{Name: "infra", URL: url, Path: "infra", CacheDir: cache, Timeout: 20 * time.Second,
			Auth: git.Auth{Username: "robot", Password: "s3cret"}}
		edit(&cfg)
		src, err := git.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	good, err := newSrc(func(*git.Config) {}).Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, s, tg, good)

	faults := []struct {
		name string
		edit func(*git.Config)
		want error
	}{
		{"wrong credentials", func(c *git.Config) { c.Auth.Password = "wrong" }, source.ErrAuth},
		{"unknown branch", func(c *git.Config) { c.Ref.Branch = "nope" }, source.ErrNotFound},
		{"path missing", func(c *git.Config) { c.Path = "elsewhere" }, source.ErrNotFound},
	}
	for _, f := range faults {
		_, err := newSrc(f.edit).Fetch(t.Context())
		if !errors.Is(err, f.want) {
			t.Fatalf("%s: %v, want %v", f.name, err, f.want)
		}
		if err := s.RecordFetchFailure(t.Context(), tg, err); err != nil {
			t.Fatal(err)
		}
		got, _ := st.GetSource(t.Context(), "infra")
		if got.Phase != store.SourceFailed || got.LastAppliedRevision != good.Revision || !strings.HasPrefix(got.Message, "FetchFailed: ") {
			t.Errorf("%s: source %s %q", f.name, got.Phase, got.Message)
		}
		if strings.Contains(got.Message, "s3cret") || strings.Contains(got.Message, "robot:") {
			t.Errorf("%s: a secret leaked into the status: %q", f.name, got.Message)
		}
		if a := get(t, st, "Widget", "a"); a.Generation != 1 || a.DeletionRequestedAt != nil {
			t.Errorf("%s changed the store", f.name)
		}
	}

	// The repository emptied: refused as an empty snapshot, nothing deleted.
	repo.Write(map[string]string{"infra/types.yaml": "", "infra/w.yaml": ""})
	repo.Commit("Empty it")
	snap, err := newSrc(func(*git.Config) {}).Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var serr *sync.Error
	if _, err := s.Sync(t.Context(), tg, snap, false); !errors.As(err, &serr) || serr.Reason != sync.ReasonEmptySnapshot {
		t.Fatalf("emptied repository: %v", err)
	}
	if a := get(t, st, "Widget", "a"); a.DeletionRequestedAt != nil {
		t.Error("an emptied repository deleted resources")
	}
}

// TestSignedCommits: with a signature policy, only commits signed by a
// trusted key (OpenPGP or SSH, keys made here with gpg and ssh-keygen) are
// applied; an unsigned or untrusted head is refused, naming the commit and
// the key, and nothing changes; trusting the key in the file lets it
// through without a restart. In mode all a good head on top of an unsigned
// commit is refused; in mode head it is applied.
func TestSignedCommits(t *testing.T) {
	t.Parallel()
	keys := sigtest.New(t)
	alice, bob, mallory := keys.OpenPGP("Alice"), keys.SSH("bob"), keys.SSH("mallory")
	dir := t.TempDir()
	keyring, signers := filepath.Join(dir, "keyring.asc"), filepath.Join(dir, "allowed_signers")
	keys.WriteKeyring(keyring, alice)
	keys.WriteAllowedSigners(signers, bob)
	verifier, err := commitsig.New(commitsig.Config{OpenPGPKeysFile: keyring, SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}

	repo := gittest.NewRepo(t)
	type step struct {
		name  string
		size  int
		sign  []string
		apply bool
		want  string // in the refusal
	}
	var commits []string
	setup := func(st store.Store, mode string) (func() (*sync.Result, error), sync.Target) {
		tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: repo.URL(), Prune: sync.Prune{Enabled: true}}
		src := newVerifiedSource(t, st, repo.URL(), mode, verifier)
		s := sync.New(st, nil)
		return func() (*sync.Result, error) {
			snap, err := src.Fetch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return s.Sync(t.Context(), tg, snap, false)
		}, tg
	}
	st, _ := newStore(t)
	syncOnce, _ := setup(st, git.VerifyHead)
	for _, s := range []step{
		{"OpenPGP-signed by a trusted key", 1, sigtest.SignWithOpenPGP(alice), true, ""},
		{"SSH-signed by a trusted key", 2, sigtest.SignWithSSH(bob), true, ""},
		{"unsigned", 3, nil, false, "not signed"},
		{"SSH-signed by an untrusted key", 4, sigtest.SignWithSSH(mallory), false, mallory.Fingerprint + " which is not trusted"},
	} {
		repo.Write(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", fmt.Sprintf("{size: %d}", s.size))})
		var head string
		if s.sign == nil {
			head = repo.Commit(s.name)
		} else {
			head = repo.CommitSigned(s.name, keys.Env(), s.sign...)
		}
		commits = append(commits, head)
		res, err := syncOnce()
		a := get(t, st, "Widget", "a")
		switch {
		case s.apply && (err != nil || res.Revision != manifest.Revision("main@sha1:"+head) || !strings.Contains(string(a.Spec), fmt.Sprintf(`"size":%d`, s.size))):
			t.Fatalf("%s: not applied: %v; a is %s", s.name, err, a.Spec)
		case !s.apply:
			var serr *sync.Error
			if !errors.As(err, &serr) || !strings.Contains(err.Error(), "commit "+head[:8]) || !strings.Contains(err.Error(), s.want) {
				t.Fatalf("%s: want a refusal naming the commit and %q, got %v", s.name, s.want, err)
			}
			if strings.Contains(string(a.Spec), fmt.Sprintf(`"size":%d`, s.size)) {
				t.Fatalf("%s: applied all the same: %s", s.name, a.Spec)
			}
			src, _ := st.GetSource(t.Context(), "infra")
			if src.LastAppliedRevision != manifest.Revision("main@sha1:"+commits[1]) || !strings.Contains(src.Message, s.want) {
				t.Errorf("%s: source %s: %s", s.name, src.LastAppliedRevision, src.Message)
			}
		}
	}
	// Trusting mallory's key in the file lets the same head through, with
	// no new commit and no restart.
	keys.WriteAllowedSigners(signers, bob, mallory)
	if res, err := syncOnce(); err != nil || res.Revision != manifest.Revision("main@sha1:"+commits[3]) {
		t.Fatalf("after trusting the key: %v", err)
	}

	// An unsigned commit, then a good head on top of it.
	repo.Write(map[string]string{"w.yaml": widget("a", "{size: 5}")})
	unsigned := repo.Commit("unsigned in the middle")
	repo.Write(map[string]string{"w.yaml": widget("a", "{size: 6}")})
	good := repo.CommitSigned("good head", keys.Env(), sigtest.SignWithOpenPGP(alice)...)

	// Mode all, on a store where commits[3] was applied: refused.
	stAll, _ := newStore(t)
	syncAll, _ := setup(stAll, git.VerifyAll)
	repo.Git("reset", "-q", "--hard", commits[3])
	if _, err := syncAll(); err != nil {
		t.Fatalf("mode all, first sync: %v", err)
	}
	repo.Git("reset", "-q", "--hard", good)
	_, err = syncAll()
	var serr *sync.Error
	if !errors.As(err, &serr) || !strings.Contains(err.Error(), "commit "+unsigned[:8]+": not signed") || strings.Contains(err.Error(), good[:8]) {
		t.Fatalf("mode all with an unsigned commit below a good head: %v", err)
	}
	// Mode head lets the same head through.
	if res, err := syncOnce(); err != nil || res.Revision != manifest.Revision("main@sha1:"+good) {
		t.Fatalf("mode head with a good head: %v", err)
	}
}

// newVerifiedSource is the Git source "infra" of the main branch at url,
// its commits verified in mode by verifier against the revision st records
// as the source's last applied one.
func newVerifiedSource(t *testing.T, st store.Store, url, mode string, verifier *commitsig.Verifier) *git.Source {
	t.Helper()
	src, err := git.New(git.Config{Name: "infra", URL: url, Ref: git.Ref{Branch: "main"},
		CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second,
		Verify: &git.Verify{Mode: mode, Verifier: verifier, Applied: func(ctx context.Context) (manifest.Revision, error) {
			s, err := st.GetSource(ctx, "infra")
			if errors.Is(err, store.ErrNotFound) {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			return s.LastAppliedRevision, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
