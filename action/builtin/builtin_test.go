package builtin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/no8s/no8s-agent/action"
)

func TestPlugins(t *testing.T) {
	t.Parallel()
	if got, want := Registry().Plugins(), []string{"exec", "github_actions", "http", "noop"}; !slices.Equal(got, want) {
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
