package githubactions

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
// the token.
func TestSettings(t *testing.T) {
	t.Parallel()
	const token = "ghp_s3cretT0ken"
	env := map[string]string{"GH_TOKEN": token, "EMPTY": " "}
	base := `"owner": "acme", "repo": "pipelines", "workflow": "no8s-apply.yml", "tokenEnv": "GH_TOKEN"`
	tests := []struct {
		name, cfg string
		wantErr   []string
	}{
		{"minimal", `{` + base + `}`, nil},
		{"everything", `{` + base + `, "ref": "release", "apiURL": "https://ghe.example.com/api/v3", "pollInterval": "5s",
			"timeout": "30m", "findTimeout": "1m", "inputs": {"spec": "resource_spec", "kind": ""}}`, nil},
		{"numeric workflow id", `{"owner": "acme", "repo": "p", "workflow": "161335", "tokenEnv": "GH_TOKEN"}`, nil},
		{"nothing", `{}`, []string{"owner: required", "repo: required", "workflow: required", "tokenEnv: required"}},
		{"bad owner", `{"owner": "ac me", "repo": "p", "workflow": "w.yml", "tokenEnv": "GH_TOKEN"}`, []string{"owner:"}},
		{"bad repo", `{"owner": "acme", "repo": "../x", "workflow": "w.yml", "tokenEnv": "GH_TOKEN"}`, []string{"repo:"}},
		{"workflow path", `{"owner": "acme", "repo": "p", "workflow": ".github/workflows/w.yml", "tokenEnv": "GH_TOKEN"}`, []string{"workflow:", "file name alone"}},
		{"token unset", `{"owner": "acme", "repo": "p", "workflow": "w.yml", "tokenEnv": "NOPE"}`, []string{"tokenEnv: NOPE is not set"}},
		{"token empty", `{"owner": "acme", "repo": "p", "workflow": "w.yml", "tokenEnv": "EMPTY"}`, []string{"tokenEnv: EMPTY is empty"}},
		{"bad api url", `{` + base + `, "apiURL": "ftp://x"}`, []string{"apiURL:"}},
		{"credentials in api url", `{` + base + `, "apiURL": "https://u:p@ghe.example.com/api/v3/"}`, []string{"apiURL:", "must not contain credentials"}},
		{"bad durations", `{` + base + `, "pollInterval": "often", "timeout": "-1s", "findTimeout": "0s"}`,
			[]string{"pollInterval: \"often\"", "timeout: must be positive", "findTimeout: must be positive"}},
		{"unknown input", `{` + base + `, "inputs": {"colour": "c"}}`, []string{"inputs: \"colour\" is not one of"}},
		{"correlation left out", `{` + base + `, "inputs": {"correlation_id": ""}}`, []string{"correlation_id cannot be left out"}},
		{"bad input name", `{` + base + `, "inputs": {"spec": "a b"}}`, []string{"inputs: spec:"}},
		{"two inputs one name", `{` + base + `, "inputs": {"spec": "kind"}}`, []string{"both map to \"kind\""}},
		{"unknown setting", `{` + base + `, "token": "x"}`, []string{"token"}},
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
			if strings.Contains(err.Error(), token) || a != nil {
				t.Errorf("error shows the token or an action came back: %v", err)
			}
		})
	}
	a, err := New(settingsOf(`{`+base+`, "apiURL": "https://ghe.example.com/api/v3", "pollInterval": "5s", "timeout": "30m"}`, env))
	if err != nil {
		t.Fatal(err)
	}
	r := a.(*runner)
	if r.client.BaseURL.String() != "https://ghe.example.com/api/v3/" || r.ref != DefaultRef || r.maxInterval != 40*time.Second ||
		r.Timeout() != 31*time.Minute {
		t.Errorf("runner = base %s ref %s max %s timeout %s", r.client.BaseURL, r.ref, r.maxInterval, r.Timeout())
	}
	if _, isPlanner := a.(action.Planner); isPlanner {
		t.Error("a workflow run cannot observe drift: the plugin must not be a Planner")
	}
}
