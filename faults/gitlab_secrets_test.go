package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// gitlabTaskType is a resource type whose action runs GitLab pipelines.
const gitlabTaskType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Task}
spec:
  action: pipelines
  versions:
    - name: v1
      schema: {type: object, properties: {note: {type: string}}}
`

// streamRecorder keeps what an event stream sent until its context ends.
type streamRecorder struct {
	mu    gosync.Mutex
	lines []string
}

func (s *streamRecorder) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// record reads the agent's event stream at url until ctx ends.
func (s *streamRecorder) record(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		s.mu.Unlock()
	}
	return nil
}

// TestGitLabTokenNeverShown runs the agent binary with every GitLab
// feature on one token, the way a small team configures it: the Git source
// read over HTTP with the token as its password, the gitlab_pipelines
// action, merge-request previews and commit-status notifications. The
// pipelines echo the token in a job's log, in the failure's log tail and in
// the no8s-outputs.json artifact. The token, in any form the agent's
// encoders give it, shows nowhere: the API and dashboard responses, the
// event stream, the history, the merge request's note, the commit
// statuses, the agent's log, and get -o json and -o yaml with --config.
func TestGitLabTokenNeverShown(t *testing.T) {
	const token = "glpat-FaultsGitLabT0ken-5c9e"
	tokenEnv := secretEnv(t, token)

	gl := gitlabtest.New(t, gitlabtest.Options{Token: token, Script: func(c gitlabtest.Creation) gitlabtest.Script {
		name, _ := c.Inputs["name"].(string)
		if name == "bad" {
			return gitlabtest.Script{Status: "failed", Polls: 2, Jobs: []gitlabtest.Job{{Name: "deploy", Stage: "deploy",
				Status: "failed", FailureReason: "script_failure",
				Log: "$ ./deploy\nlogin failed for " + token + "\nERROR: Job failed: exit code 3\n"}}}
		}
		out := fmt.Sprintf(`{"token": %q, "note": "with %s"}`, token, token)
		return gitlabtest.Script{Status: "success", Polls: 2, Jobs: []gitlabtest.Job{{Name: "deploy", Stage: "deploy",
			Log: "logging in with " + token + "\n", Artifacts: map[string][]byte{"no8s-outputs.json": []byte(out)}}}}
	}})
	gl.AddProject("acme/infra", gitlabtest.ProjectOptions{WorkflowName: "no8s $[[ inputs.correlation_id ]]"})

	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": gitlabTaskType,
		"tasks/good.yaml": "apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: first}\n",
		"tasks/bad.yaml":  "apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: bad}\nspec: {}\n"})
	repo.Commit("deploy the tasks")
	mainSHA := repo.Git("rev-parse", "main")
	head := repo.MergeRequest(7, mainSHA, map[string]string{
		"tasks/good.yaml": "apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: second}\n"}, "change good")
	gl.AddMergeRequest("acme/infra", gitlabtest.MergeRequest{IID: 7, SHA: head, SourceBranch: "change-good"})
	// Served as acme/infra, the way GitLab names projects, with the token
	// as the password, as GitLab takes it.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo.Dir, filepath.Join(root, "acme", "infra")); err != nil {
		t.Fatal(err)
	}
	gs := gittest.NewServer(t, root, "oauth2", token)
	userEnv := secretEnv(t, "oauth2")
	t.Parallel()

	work := t.TempDir()
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %[1]q
sources:
  - name: tasks
    git: {url: %[2]q, branch: main, interval: 1h, auth: {usernameEnv: %[3]s, passwordEnv: %[4]s}}
    pullRequests: {enabled: true, provider: gitlab, tokenEnv: %[4]s, apiURL: %[5]q, interval: 1h}
reconcile: {backoff: {initial: 1h}}
actions:
  pipelines:
    plugin: gitlab_pipelines
    config: {baseURL: %[5]q, project: acme/infra, tokenEnv: %[4]s, pollInterval: 100ms, timeout: 5m}
notifications:
  providers:
    commits: {type: gitlab, tokenEnv: %[4]s, apiURL: %[5]q, repository: acme/infra}
`, pgtest.URL(t), gs.URL+"/acme/infra/.git", userEnv, tokenEnv, gl.URL))

	a := startAgent(t, work, "run", "--config", cfg, "--log-level", "debug")
	base := a.URL()
	events := &streamRecorder{}
	streamCtx, stopStream := context.WithCancel(t.Context())
	streamDone := make(chan error, 1)
	go func() { streamDone <- events.record(streamCtx, base+"/api/v1/events") }()

	waitUntil(t, 90*time.Second, "good to be ready and bad to fail", func() (bool, string) {
		var list []appResource
		apiGet(t, base+"/api/v1/resources", &list)
		state := map[string]string{}
		for _, r := range list {
			state[r.Name] = r.Status
		}
		return state["good"] == "ready" && state["bad"] == "failed", fmt.Sprint(state)
	})
	waitUntil(t, 90*time.Second, "the preview's note and final status", func() (bool, string) {
		ss := gl.Statuses("acme/infra", head)
		return len(gl.Notes("acme/infra", 7)) > 0 && len(ss) > 0 && ss[len(ss)-1].Status != "running", fmt.Sprintf("%+v", ss)
	})
	waitUntil(t, 90*time.Second, "the commit status of main", func() (bool, string) {
		ss := gl.Statuses("acme/infra", mainSHA)
		return len(ss) > 0 && ss[len(ss)-1].Status != "running", fmt.Sprintf("%+v", ss)
	})

	surfaces := map[string]string{}
	var list []appResource
	apiGet(t, base+"/api/v1/resources", &list)
	paths := []string{"/api/v1/resources", "/api/v1/sources", "/api/v1/sources/tasks", "/api/v1/sources/tasks/history",
		"/", "/sources/tasks", "/metrics"}
	for _, r := range list {
		paths = append(paths, fmt.Sprintf("/api/v1/resources/%d", r.ID), fmt.Sprintf("/api/v1/resources/%d/history", r.ID),
			fmt.Sprintf("/api/v1/resources/%d/outputs", r.ID), fmt.Sprintf("/resources/%d", r.ID))
	}
	var responses strings.Builder
	for _, p := range paths {
		status, body := getPath(t, base, p)
		fmt.Fprintf(&responses, "GET %s -> %d\n%s\n", p, status, body)
	}
	surfaces["the API and dashboard responses"] = responses.String()
	stopStream()
	if err := <-streamDone; err != nil && streamCtx.Err() == nil {
		t.Errorf("the event stream: %v", err)
	}
	surfaces["the event stream"] = events.text()
	var notes, statuses []string
	for _, n := range gl.Notes("acme/infra", 7) {
		notes = append(notes, n.Body)
	}
	surfaces["the merge request's note"] = strings.Join(notes, "\n")
	for _, sha := range []string{head, mainSHA} {
		for _, s := range gl.Statuses("acme/infra", sha) {
			statuses = append(statuses, s.Description+" "+s.TargetURL)
		}
	}
	surfaces["the commit statuses"] = strings.Join(statuses, "\n")
	for _, format := range []string{"json", "yaml"} {
		for _, object := range []string{"resources", "sources", "history"} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			cmd := exec.CommandContext(ctx, agentBinary(t), "get", object, "-o", format, "--config", cfg)
			cmd.Dir = work
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Errorf("get %s -o %s: %v\n%s", object, format, err, out.String())
			}
			surfaces[fmt.Sprintf("get %s -o %s --config", object, format)] = out.String()
		}
	}
	a.Stop()
	surfaces["the agent's log"] = a.Log()

	// Each surface must show what the token was in, masked, or the check
	// proves nothing.
	for surface, want := range map[string]string{
		"the API and dashboard responses": `"token":"***"`,
		"the event stream":                "login failed for ***",
		"the agent's log":                 "login failed for ***",
		"get resources -o json --config":  `"token": "***"`,
	} {
		if !strings.Contains(surfaces[surface], want) {
			t.Errorf("%s lacks %q; the check would prove nothing:\n%s", surface, want, surfaces[surface])
		}
	}
	if !strings.Contains(surfaces["the merge request's note"], "no8s preview") {
		t.Errorf("the note is not the preview: %q", surfaces["the merge request's note"])
	}
	for surface, text := range surfaces {
		for name, form := range securityForms(token) {
			if strings.Contains(text, form) {
				t.Errorf("the token is in %s %s: %q", surface, name, form)
			}
		}
	}
	if t.Failed() {
		for surface, text := range surfaces {
			t.Logf("%s:\n%s", surface, text)
		}
	}
}
