package builtin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/no8s/no8s-agent/action"
)

func TestPlugins(t *testing.T) {
	t.Parallel()
	if got, want := Registry().Plugins(), []string{"exec", "github_actions", "gitlab_pipelines", "http", "noop", "terraform"}; !slices.Equal(got, want) {
		t.Fatalf("Plugins() = %q, want %q", got, want)
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	in, err := Registry().Build(map[string]action.Spec{
		"echo":    {Plugin: "exec", Config: json.RawMessage(`{"command":["true"]}`)},
		"webhook": {Plugin: "http", Config: json.RawMessage(`{"url":"https://example.com/hook","plan":true}`)},
	}, nil, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if got, want := in.Names(), []string{"echo", "noop", "webhook"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	if hook, _ := in.Get("webhook"); hook.Plugin != "http" {
		t.Fatalf("webhook was built by %q", hook.Plugin)
	} else if _, ok := hook.Action.(action.Planner); !ok {
		t.Fatal("webhook with plan: true is not a Planner")
	}
}

// TestSecrets checks that every built-in plugin lists the secret values its
// settings read, planners too, and nothing else (PATH, HOME and fixed env
// values are not secret).
func TestSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PASS_A": "pass-a-value", "PASS_B": "pass-b-value", "SIGN": "sign-value",
		"BEARER": "bearer-value", "GH": " gh-token-value\n", "GL": "gl-token-value", "GLT": "gl-trigger-value", "PATH": "/usr/bin:/bin", "HOME": "/home/agent"}
	in, err := Registry().Build(map[string]action.Spec{
		"run":     {Plugin: "exec", Config: json.RawMessage(`{"command":["true"],"env":{"FIXED":"fixed-value"},"passEnv":["PASS_A","PASS_B"]}`)},
		"plan":    {Plugin: "exec", Config: json.RawMessage(`{"command":["true"],"passEnv":["PASS_A"],"plan":true}`)},
		"plain":   {Plugin: "exec", Config: json.RawMessage(`{"command":["true"]}`)},
		"hook":    {Plugin: "http", Config: json.RawMessage(`{"url":"https://example.com/hook","secretEnv":"SIGN","tokenEnv":"BEARER","plan":true}`)},
		"signed":  {Plugin: "http", Config: json.RawMessage(`{"url":"https://example.com/hook","secretEnv":"SIGN"}`)},
		"actions": {Plugin: "github_actions", Config: json.RawMessage(`{"owner":"acme","repo":"p","workflow":"w.yml","tokenEnv":"GH"}`)},
		"gitlab":  {Plugin: "gitlab_pipelines", Config: json.RawMessage(`{"project":"acme/infra","tokenEnv":"GL","triggerTokenEnv":"GLT"}`)},
	}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	got := in.Secrets()
	want := map[string][]string{
		"run":     {"pass-a-value", "pass-b-value"},
		"plan":    {"pass-a-value"},
		"hook":    {"sign-value", "bearer-value"},
		"signed":  {"sign-value"},
		"actions": {" gh-token-value\n"},
		"gitlab":  {"gl-token-value", "gl-trigger-value"},
	}
	if len(got) != len(want) {
		t.Errorf("Secrets() = %q, want %q", got, want)
	}
	for name, values := range want {
		if !slices.Equal(got[name], values) {
			t.Errorf("Secrets()[%s] = %q, want %q", name, got[name], values)
		}
	}
}
