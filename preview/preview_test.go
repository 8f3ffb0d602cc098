package preview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const token = "ghp_previewT0ken"

const dbType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Database}
spec:
  action: provision
  versions:
    - name: v1
      schema:
        type: object
        required: [storage_gb]
        properties:
          storage_gb: {type: integer, minimum: 10}
          note: {type: string}
`

func db(name string, gb int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: %s}\nspec: {storage_gb: %d}\n", name, gb)
}

// planner is an action whose Plan says what it would do.
type planner struct{}

func (planner) Apply(context.Context, *action.Request) (*action.Result, error) {
	return &action.Result{}, nil
}
func (planner) Destroy(context.Context, *action.Request) (*action.Result, error) {
	return &action.Result{}, nil
}
func (planner) Plan(_ context.Context, r *action.Request) (*action.Plan, error) {
	var spec struct {
		GB int `json:"storage_gb"`
	}
	json.Unmarshal(r.Resource.Spec, &spec)
	return &action.Plan{Changes: true, Summary: "1 to change", Output: fmt.Sprintf("~ disk of %s to %d GB", r.Resource.Name, spec.GB)}, nil
}

type actions struct{}

func (actions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: "test", Action: planner{}}, name == "provision"
}

// fixture is a repository synced into a store, its fake GitHub, and a
// Previewer for it.
type fixture struct {
	t      *testing.T
	repo   *gittest.Repo
	gh     *githubtest.Server
	st     *postgres.Store
	syncer *sync.Syncer
	src    *preview.Source
	p      *preview.Previewer
}

func newFixture(t *testing.T, maxDeletes int) *fixture {
	t.Helper()
	return newFixtureIn(t, maxDeletes, "")
}

// newFixtureIn is newFixture with the source's manifests in the folder dir
// of the repository ("" for its root).
func newFixtureIn(t *testing.T, maxDeletes int, dir string) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.repo = gittest.NewRepo(t)
	files := map[string]string{}
	for name, content := range map[string]string{"types.yaml": dbType, "dbs/a.yaml": db("a", 100), "dbs/b.yaml": db("b", 200), "dbs/c.yaml": db("c", 300)} {
		files[path.Join(dir, name)] = content
	}
	f.repo.Write(files)
	f.repo.Commit("three databases")
	var err error
	f.st, err = postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.st.Close)
	if err := f.st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.syncer = sync.New(f.st, nil)
	target := sync.Target{Name: "infra", Kind: store.SourceGit, URL: f.repo.URL(), Path: dir,
		Prune: sync.Prune{Enabled: true, MaxDeletes: &sync.MaxDeletes{Value: maxDeletes}}}
	main, err := git.New(git.Config{Name: "infra", URL: f.repo.URL(), CacheDir: t.TempDir(), Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := main.Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.syncer.Sync(t.Context(), target, snap, false); err != nil {
		t.Fatal(err)
	}
	f.gh = githubtest.New(t, githubtest.Options{Token: token, Owner: "acme", Repo: "infra"})
	client, err := githubapi.NewClient(f.gh.BaseURL(), token)
	if err != nil {
		t.Fatal(err)
	}
	pullCache := t.TempDir()
	f.src = &preview.Source{Target: target, Branch: "main",
		Host: &preview.GitHub{Client: client, Owner: "acme", Repo: "infra",
			Retry: githubapi.Retrier{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
		Fetch: func(ctx context.Context, n int) (*source.Snapshot, error) {
			s, err := git.New(git.Config{Name: "infra", URL: f.repo.URL(), CacheDir: pullCache, Ref: git.Ref{PullRequest: n}, Path: dir})
			if err != nil {
				return nil, err
			}
			return s.Fetch(ctx)
		}}
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{f.src}})
	return f
}

// push makes a pull request's head a commit on top of main with files
// changed (an empty value removes the file), as GitHub's refs/pull/N/head.
func (f *fixture) push(n int, files map[string]string) string {
	f.t.Helper()
	sha := f.repo.PullRequest(n, f.repo.Head(), files, fmt.Sprintf("change %d", n))
	f.gh.SetPull(githubtest.Pull{Number: n, HeadSHA: sha, BaseRef: "main"})
	return sha
}

// dump is every row a preview could touch, to compare before and after.
func (f *fixture) dump() string {
	f.t.Helper()
	ctx := f.t.Context()
	rs, err1 := f.st.ListResources(ctx, store.ResourceFilter{})
	ts, err2 := f.st.ListResourceTypes(ctx, store.TypeFilter{})
	ss, err3 := f.st.ListSources(ctx)
	hs, err4 := f.st.ListSyncRecords(ctx, "infra", 0)
	if err := errorsJoin(err1, err2, err3, err4); err != nil {
		f.t.Fatal(err)
	}
	data, err := json.Marshal([]any{rs, ts, ss, hs})
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (f *fixture) only(n int) githubtest.Comment {
	f.t.Helper()
	cs := f.gh.Comments(n)
	if len(cs) != 1 {
		f.t.Fatalf("%d comments on #%d, want exactly one: %+v", len(cs), n, cs)
	}
	return cs[0]
}

func lastStatus(t *testing.T, gh *githubtest.Server, sha string) githubtest.Status {
	t.Helper()
	ss := gh.Statuses(sha)
	if len(ss) == 0 {
		t.Fatalf("no status on %s", sha)
	}
	last := ss[len(ss)-1]
	if last.Context != preview.StatusContext {
		t.Fatalf("status context %q", last.Context)
	}
	return last
}

// TestValidPullRequest previews a valid change, then a second push: the
// status says success, and the one comment lists exactly the changes and
// is edited in place.
func TestValidPullRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	before := f.dump()
	sha := f.push(1, map[string]string{"dbs/a.yaml": db("a", 150), "dbs/d.yaml": db("d", 50)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	st := lastStatus(t, f.gh, sha)
	if st.State != "success" || !strings.Contains(st.Description, "1 created, 1 updated, 0 deleted") {
		t.Errorf("status = %+v", st)
	}
	c := f.only(1)
	for _, want := range []string{"<!-- no8s-preview source=infra -->", "| create | Database/d | dbs/d.yaml:1 | 1 |",
		"| update | Database/a | dbs/a.yaml:1 | 2 | `storage_gb: 100 → 150` |", "~ disk of a to 150 GB", "~ disk of d to 50 GB",
		"<details><summary>Plan of Database/a by provision: 1 to change</summary>"} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, c.Body)
		}
	}
	if strings.Contains(c.Body, "Database/b") || strings.Contains(c.Body, "Database/c") {
		t.Errorf("comment lists unchanged resources:\n%s", c.Body)
	}

	// Someone else's comment and a second push: still one preview comment, edited.
	f.gh.AddComment(1, "reviewer", "looks good")
	sha2 := f.push(1, map[string]string{"dbs/a.yaml": db("a", 175)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha2, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	var mine []githubtest.Comment
	for _, c := range f.gh.Comments(1) {
		if strings.Contains(c.Body, "no8s-preview") {
			mine = append(mine, c)
		}
	}
	if len(mine) != 1 || mine[0].Edits != 1 || !strings.Contains(mine[0].Body, "`storage_gb: 100 → 175`") || strings.Contains(mine[0].Body, "Database/d") {
		t.Errorf("after the second push: %+v", mine)
	}
	if st := lastStatus(t, f.gh, sha2); st.State != "success" {
		t.Errorf("second status = %+v", st)
	}
	if after := f.dump(); after != before {
		t.Errorf("a preview changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// TestSecretsMasked previews with a mask: the plan an action printed and
// the status's summary reach GitHub masked. The fake planner's output and
// the summary stand in for secret values an action echoes.
func TestSecretsMasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	m := redact.New("disk of a to 150 GB", "1 created, 1 updated")
	p := preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{f.src},
		Masker: m})
	sha := f.push(1, map[string]string{"dbs/a.yaml": db("a", 150), "dbs/d.yaml": db("d", 50)})
	if err := p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, sha); !strings.HasPrefix(st.Description, "***, 0 deleted") {
		t.Errorf("status description %q, want it masked", st.Description)
	}
	c := f.only(1)
	if !strings.Contains(c.Body, "~ ***") || !strings.Contains(c.Body, "~ disk of d to 50 GB") || m.Contains(c.Body) {
		t.Errorf("comment not masked:\n%s", c.Body)
	}
}

// TestRefusedPullRequests checks that an invalid manifest and a deletion
// over the prune limit fail the status and say why, changing nothing.
func TestRefusedPullRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	before := f.dump()
	bad := f.push(2, map[string]string{"dbs/b.yaml": "apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: b}\nspec:\n  storage_gb: 5\n"})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 2, HeadSHA: bad}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, bad); st.State != "failure" || !strings.HasPrefix(st.Description, "ValidationFailed") {
		t.Errorf("invalid: status %+v", st)
	}
	if c := f.only(2); !strings.Contains(c.Body, "| dbs/b.yaml | 5 | spec.storage_gb: must be &gt;= 10") {
		t.Errorf("invalid: comment does not name the file and line:\n%s", c.Body)
	}
	prune := f.push(3, map[string]string{"dbs/b.yaml": "", "dbs/c.yaml": ""})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 3, HeadSHA: prune}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, prune); st.State != "failure" || !strings.HasPrefix(st.Description, "PruneLimitExceeded") {
		t.Errorf("prune: status %+v", st)
	}
	if c := f.only(3); !strings.Contains(c.Body, "PruneLimitExceeded") || !strings.Contains(c.Body, "| delete | Database/b |") {
		t.Errorf("prune: comment:\n%s", c.Body)
	}
	if after := f.dump(); after != before {
		t.Errorf("a preview changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// TestGitHubFailuresAreRetried injects server errors into every call a
// preview makes; it succeeds all the same.
func TestGitHubFailuresAreRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	sha := f.push(4, map[string]string{"dbs/c.yaml": db("c", 400)})
	f.gh.FailNext(githubtest.Match{Method: "POST", PathSuffix: "/statuses/" + sha}, 2, githubtest.BadGateway())
	f.gh.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/comments"}, 1, githubtest.TooManyRequests(0))
	f.gh.FailNext(githubtest.Match{Method: "POST", PathSuffix: "/comments"}, 1, githubtest.BadGateway())
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 4, HeadSHA: sha}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, sha); st.State != "success" {
		t.Errorf("status %+v", st)
	}
	f.only(4)
}

// TestRunPreviewsOpenPullRequests runs the Previewer: it finds open pull
// requests by listing them, previews a push announced by a webhook, and
// stops previewing a closed one. Syncing main goes on meanwhile.
func TestRunPreviewsOpenPullRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	f.src.Interval = time.Hour // only the listing at start
	sha := f.push(5, map[string]string{"dbs/a.yaml": db("a", 120)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitStatus := func(sha, state string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if ss := f.gh.Statuses(sha); len(ss) > 0 && ss[len(ss)-1].State == state {
				return
			}
			select {
			case <-deadline:
				t.Fatalf("no %s status on %s: %+v", state, sha, f.gh.Statuses(sha))
			case <-tick.C:
			}
		}
	}
	waitStatus(sha, "success")

	// A push announced by the webhook is previewed at once.
	sha2 := f.push(5, map[string]string{"dbs/a.yaml": db("a", 130)})
	ev := &github.PullRequestEvent{Action: github.String("synchronize"),
		Repo: &github.Repository{CloneURL: github.String("https://github.com/acme/infra.git")},
		PullRequest: &github.PullRequest{Number: github.Int(5), Head: &github.PullRequestBranch{SHA: github.String(sha2)},
			Base: &github.PullRequestBranch{Ref: github.String("main")}}}
	// The source's URL is the local repository; the webhook names GitHub's.
	f.src.Target.URL = "https://github.com/acme/infra.git"
	if err := f.p.OnPullRequest(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	waitStatus(sha2, "success")
	if c := f.only(5); c.Edits != 1 || !strings.Contains(c.Body, "100 → 130") {
		t.Errorf("comment after the webhook: %+v", c)
	}

	// Main moves on while previews run.
	f.repo.Write(map[string]string{"dbs/b.yaml": db("b", 250)})
	f.repo.Commit("grow b")
	mainSrc, err := git.New(git.Config{Name: "infra", URL: f.repo.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := mainSrc.Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.syncer.Sync(t.Context(), f.src.Target, snap, false); err != nil || res.Plan.Changes() != 1 {
		t.Fatalf("sync of main during previews: %+v %v", res, err)
	}
	if !reflect.DeepEqual(len(f.gh.Comments(5)), 1) {
		t.Errorf("comments: %+v", f.gh.Comments(5))
	}
}
