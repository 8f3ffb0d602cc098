package gitlabpipelines

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
)

func settingsOf(cfg string, env map[string]string) action.Settings {
	return action.Settings{Instance: "deploy", Config: json.RawMessage(cfg),
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
}

// TestSettings checks every setting's validation, and that no error shows
// a token.
func TestSettings(t *testing.T) {
	t.Parallel()
	const token, trigger = "glpat-s3cretT0ken", "glptt-s3cretTr1gger"
	env := map[string]string{"GL_TOKEN": token, "GL_TRIGGER": trigger, "EMPTY": " "}
	base := `"project": "acme/infra/pipelines", "tokenEnv": "GL_TOKEN"`
	tests := []struct {
		name, cfg string
		wantErr   []string
	}{
		{"minimal", `{` + base + `}`, nil},
		{"everything", `{` + base + `, "baseURL": "https://gitlab.example.com/gitlab", "ref": "release", "triggerTokenEnv": "GL_TRIGGER",
			"pass": "inputs", "pollInterval": "5s", "timeout": "30m", "findTimeout": "30s", "names": {"spec": "resource_spec", "kind": ""}}`, nil},
		{"numeric project", `{"project": "278964", "tokenEnv": "GL_TOKEN"}`, nil},
		{"variables", `{` + base + `, "pass": "variables", "names": {"correlation_id": "NO8S_CORRELATION_ID"}}`, nil},
		{"nothing", `{}`, []string{"project: required", "tokenEnv: required"}},
		{"trigger token alone", `{"project": "acme/p", "triggerTokenEnv": "GL_TRIGGER"}`, []string{"tokenEnv: required"}},
		{"project without namespace", `{"project": "pipelines", "tokenEnv": "GL_TOKEN"}`, []string{"project:", "group/project"}},
		{"project URL", `{"project": "https://gitlab.com/acme/p.git", "tokenEnv": "GL_TOKEN"}`, []string{"project:", "is a URL"}},
		{"project zero", `{"project": "0", "tokenEnv": "GL_TOKEN"}`, []string{"project: \"0\" is not a project id"}},
		{"token unset", `{"project": "acme/p", "tokenEnv": "NOPE"}`, []string{"tokenEnv: NOPE is not set"}},
		{"token empty", `{"project": "acme/p", "tokenEnv": "EMPTY"}`, []string{"tokenEnv: EMPTY is empty"}},
		{"trigger unset", `{` + base + `, "triggerTokenEnv": "NOPE"}`, []string{"triggerTokenEnv: NOPE is not set"}},
		{"trigger same as token", `{` + base + `, "triggerTokenEnv": "GL_TOKEN"}`, []string{"triggerTokenEnv: names the same variable"}},
		{"bad base url", `{` + base + `, "baseURL": "ftp://x"}`, []string{"baseURL:"}},
		{"credentials in base url", `{` + base + `, "baseURL": "https://u:p@gitlab.example.com"}`, []string{"baseURL:", "must not contain credentials"}},
		{"http base url", `{` + base + `, "baseURL": "http://gitlab.example.com"}`, []string{"baseURL:", "use https"}},
		{"bad pass", `{` + base + `, "pass": "env"}`, []string{`pass: "env" is neither inputs nor variables`}},
		{"bad durations", `{` + base + `, "pollInterval": "often", "timeout": "-1s", "findTimeout": "0s"}`,
			[]string{"pollInterval: \"often\"", "timeout: must be positive", "findTimeout: must be positive"}},
		{"unknown name", `{` + base + `, "names": {"colour": "c"}}`, []string{"names: \"colour\" is not one of"}},
		{"correlation left out", `{` + base + `, "names": {"correlation_id": ""}}`, []string{"correlation_id cannot be left out"}},
		{"namespace left out", `{` + base + `, "names": {"namespace": ""}}`, []string{"namespace cannot be left out"}},
		{"bad input name", `{` + base + `, "names": {"spec": "a b"}}`, []string{"names: spec:", "pipeline input name"}},
		{"hyphen in a variable", `{` + base + `, "pass": "variables", "names": {"spec": "NO8S-SPEC"}}`, []string{"names: spec:", "pipeline variable name"}},
		{"two inputs one name", `{` + base + `, "names": {"spec": "kind"}}`, []string{"both map to \"kind\""}},
		{"unknown setting", `{` + base + `, "token": "x"}`, []string{"unknown setting \"token\""}},
		{"wrong type", `{` + base + `, "names": ["spec"]}`, []string{"names: must be an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(settingsOf(tt.cfg, env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %s", tt.cfg)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), trigger) || a != nil {
				t.Errorf("error shows a token or an action came back: %v", err)
			}
		})
	}
	a, err := New(settingsOf(`{"project": "278964", "tokenEnv": "GL_TOKEN", "triggerTokenEnv": "GL_TRIGGER",
		"baseURL": "https://gitlab.example.com/api/v4/", "pollInterval": "5s", "timeout": "30m"}`, env))
	if err != nil {
		t.Fatal(err)
	}
	r := a.(*runner)
	if r.client.BaseURL().String() != "https://gitlab.example.com/api/v4/" || r.trigger == nil || r.project != int64(278964) || r.ref != DefaultRef ||
		r.pass != PassInputs || r.maxInterval != 40*time.Second || r.Timeout() != 31*time.Minute || len(r.Secrets()) != 2 {
		t.Errorf("runner = base %s project %v ref %s pass %s max %s timeout %s", r.client.BaseURL(), r.project, r.ref, r.pass, r.maxInterval, r.Timeout())
	}
	if _, isPlanner := a.(action.Planner); isPlanner {
		t.Error("a pipeline cannot observe drift: the plugin must not be a Planner")
	}
}

// TestCorrelationIDOfLongNames: a name of up to 253 characters gives a
// correlation id that fits a pipeline name, unique per pipeline, starting
// with as much of the name as fits.
func TestCorrelationIDOfLongNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 62) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + ".example.org"
	for _, tt := range []struct{ name, prefix string }{
		{"production-pg", "databasecluster-production-pg-g3-apply-"},
		{long, "databasecluster-" + strings.Repeat("a", 62) + "-g3-apply-"},
	} {
		req := &action.Request{Resource: action.Resource{Kind: "DatabaseCluster", Name: tt.name, Generation: 3}}
		a, err := correlationID(req, action.OperationApply)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := correlationID(req, action.OperationApply)
		if !strings.HasPrefix(a, tt.prefix) || len(a) != len(tt.prefix)+12 || a == b {
			t.Errorf("correlation ids %q and %q, want %q and 12 random hex digits each", a, b, tt.prefix)
		}
	}
}

// TestHandles: a handle names the pipeline's project and id; anything
// else is no handle of this plugin.
func TestHandles(t *testing.T) {
	t.Parallel()
	for h, want := range map[string][2]int64{"278964/1234567": {278964, 1234567}, "1/2": {1, 2}} {
		if p, id, ok := parseHandle(h); !ok || p != want[0] || id != want[1] {
			t.Errorf("parseHandle(%q) = %d, %d, %v", h, p, id, ok)
		}
	}
	for _, h := range []string{"", "1234567", "0/5", "5/0", "a/5", "5/-1", "1/2/3", "+1/2", "99999999999999999999/1"} {
		if _, _, ok := parseHandle(h); ok {
			t.Errorf("parseHandle(%q) accepted", h)
		}
	}
}

// TestProjectPathsRefused: a project path is group/.../project as GitLab
// names them; dot segments, escapes, spaces and empty segments are no path
// of a project, whatever GitLab would make of them.
func TestProjectPathsRefused(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GL_TOKEN": "glpat-s3cretT0ken"}
	for _, p := range []string{"acme/..", "../acme", "acme/../other", "acme/./p", "./p", "acme/.", "acme%2Fp", "acme/%2e%2e",
		"acme/ p", "acme /p", "acme//p", "/acme/p", "acme/p/", "acme/-p", "acme\\p", "-5", "1e3", "acme/p?x=1", "acme/p#x"} {
		cfg, _ := json.Marshal(map[string]string{"project": p, "tokenEnv": "GL_TOKEN"})
		if _, err := New(settingsOf(string(cfg), env)); err == nil || !strings.Contains(err.Error(), "project:") {
			t.Errorf("project %q: New = %v, want it refused", p, err)
		}
	}
	for _, p := range []string{"acme/p", "acme/sub/p.x", "acme/.hidden", "a_b/c-d", "278964"} {
		cfg, _ := json.Marshal(map[string]string{"project": p, "tokenEnv": "GL_TOKEN"})
		if _, err := New(settingsOf(string(cfg), env)); err != nil {
			t.Errorf("project %q: New = %v", p, err)
		}
	}
}
