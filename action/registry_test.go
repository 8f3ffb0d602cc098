package action

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fake is an Action that a test factory builds; it remembers its settings.
type fake struct{ s Settings }

func (fake) Apply(context.Context, *Request) (*Result, error)   { return &Result{}, nil }
func (fake) Destroy(context.Context, *Request) (*Result, error) { return &Result{}, nil }

func fakeFactory(s Settings) (Action, error) { return &fake{s: s}, nil }

func TestNewRegistryHoldsNoop(t *testing.T) {
	t.Parallel()
	if got := NewRegistry().Plugins(); !slices.Equal(got, []string{"noop"}) {
		t.Fatalf("Plugins() = %q, want [noop]", got)
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		plugin  string
		factory Factory
		wantErr string
	}{
		{name: "new plugin", plugin: "fake", factory: fakeFactory},
		{name: "empty name", plugin: "", factory: fakeFactory, wantErr: "empty name"},
		{name: "nil factory", plugin: "fake", factory: nil, wantErr: "nil factory"},
		{name: "built-in name", plugin: "noop", factory: fakeFactory, wantErr: `"noop": already registered`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRegistry()
			err := r.Register(tt.plugin, tt.factory)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Register: %v", err)
				}
				if got := r.Plugins(); !slices.Equal(got, []string{"fake", "noop"}) {
					t.Fatalf("Plugins() = %q, want [fake noop]", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Register error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegisterTwice(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if err := r.Register("fake", fakeFactory); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("fake", fakeFactory); err == nil {
		t.Fatal("second Register of the same plugin succeeded")
	}
}

func TestPluginsSorted(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for _, p := range []string{"zeta", "alpha", "mid"} {
		if err := r.Register(p, fakeFactory); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.Plugins(), []string{"alpha", "mid", "noop", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("Plugins() = %q, want %q", got, want)
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if err := r.Register("fake", fakeFactory); err != nil {
		t.Fatal(err)
	}
	getenv := func(name string) (string, bool) {
		if name == "TOKEN" {
			return "value", true
		}
		return "", false
	}
	in, err := r.Build(map[string]Spec{
		"web.hook-1": {Plugin: "fake", Config: json.RawMessage(`{"a":1}`)},
		"dry_run":    {Plugin: "noop"},
	}, getenv, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if got, want := in.Names(), []string{"dry_run", "noop", "web.hook-1"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}

	hook, ok := in.Get("web.hook-1")
	if !ok {
		t.Fatal("Get(web.hook-1) found nothing")
	}
	if hook.Name != "web.hook-1" || hook.Plugin != "fake" {
		t.Fatalf("Get(web.hook-1) = %+v", hook)
	}
	s := hook.Action.(*fake).s
	if s.Instance != "web.hook-1" || string(s.Config) != `{"a":1}` {
		t.Fatalf("factory got instance %q config %s", s.Instance, s.Config)
	}
	if v, ok := s.LookupEnv("TOKEN"); !ok || v != "value" {
		t.Fatalf("factory's LookupEnv(TOKEN) = %q, %v; want the getenv passed to Build", v, ok)
	}
	if s.Logger == nil {
		t.Fatal("factory got a nil Logger")
	}

	for _, name := range []string{"noop", "dry_run"} {
		i, ok := in.Get(name)
		if !ok || i.Plugin != "noop" {
			t.Fatalf("Get(%s) = %+v, %v; want a noop instance", name, i, ok)
		}
	}
	if _, ok := in.Get(""); ok {
		t.Fatal(`Get("") found an instance; the empty name must not be an alias`)
	}
	if _, ok := in.Get("missing"); ok {
		t.Fatal("Get(missing) found an instance")
	}
}

func TestBuildWithoutSpecsHasNoop(t *testing.T) {
	t.Parallel()
	in, err := NewRegistry().Build(nil, nil, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if got := in.Names(); !slices.Equal(got, []string{"noop"}) {
		t.Fatalf("Names() = %q, want [noop]", got)
	}
}

func TestBuildNilGetenvReadsProcessEnvironment(t *testing.T) {
	t.Setenv("NO8S_REGISTRY_TEST", "from-process")
	r := NewRegistry()
	var got string
	if err := r.Register("fake", func(s Settings) (Action, error) {
		got, _ = s.LookupEnv("NO8S_REGISTRY_TEST")
		return fake{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Build(map[string]Spec{"x": {Plugin: "fake"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got != "from-process" {
		t.Fatalf("LookupEnv with nil getenv = %q, want the process environment's value", got)
	}
}

var errBadSetting = errors.New("bad setting")

func TestBuildReportsEveryProblem(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for name, f := range map[string]Factory{
		"fake": fakeFactory,
		"failing": func(Settings) (Action, error) {
			return nil, errors.Join(errors.New("url: required"), errBadSetting)
		},
		"broken": func(Settings) (Action, error) { return nil, nil },
	} {
		if err := r.Register(name, f); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.Build(map[string]Spec{
		"good":       {Plugin: "fake"},
		"Bad":        {Plugin: "fake"},
		"trailing-":  {Plugin: "fake"},
		"noop":       {Plugin: "noop"},
		"typo":       {Plugin: "exce"},
		"no-plugin":  {},
		"failing":    {Plugin: "failing"},
		"broken":     {Plugin: "broken"},
		"noop-twice": {Plugin: "noop", Config: json.RawMessage(`{"x":1}`)},
	}, nil, nil)
	if err == nil {
		t.Fatal("Build succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`actions.Bad: invalid instance name "Bad"`,
		`actions.broken: plugin "broken" built no action`,
		`actions.failing: url: required`,
		`actions.failing: bad setting`,
		`actions.no-plugin: plugin is required (known plugins: broken, failing, fake, noop)`,
		`actions.noop: the instance noop is built in and cannot be redeclared`,
		`actions.noop-twice: plugin noop takes no settings: unknown setting "x"`,
		`actions.trailing-: invalid instance name "trailing-"`,
		`actions.typo: unknown plugin "exce" (known plugins: broken, failing, fake, noop)`,
	}
	if len(lines) != len(want) {
		t.Fatalf("Build error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if !errors.Is(err, ErrUnknownPlugin) {
		t.Error("error does not wrap ErrUnknownPlugin")
	}
	if !errors.Is(err, errBadSetting) {
		t.Error("error does not wrap the factory's error")
	}
}

func TestInstanceNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"0", true},
		{"provision-db", true},
		{"web.hook_2", true},
		{"", false},
		{"-a", false},
		{"a-", false},
		{"a.", false},
		{"Upper", false},
		{"with space", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRegistry()
			_, err := r.Build(map[string]Spec{tt.name: {Plugin: "noop"}}, nil, nil)
			if tt.ok && err != nil {
				t.Fatalf("Build(%q): %v", tt.name, err)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "invalid instance name")) {
				t.Fatalf("Build(%q) error = %v, want an invalid instance name", tt.name, err)
			}
		})
	}
}

func TestNoop(t *testing.T) {
	t.Parallel()
	a, err := newNoop(Settings{Instance: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(Planner); ok {
		t.Fatal("noop is a Planner; it observes nothing and must not report drift")
	}
	for op, f := range map[string]func(context.Context, *Request) (*Result, error){
		"apply": a.Apply, "destroy": a.Destroy,
	} {
		res, err := f(t.Context(), &Request{Reporter: NoopReporter{}})
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if res.Message != "nothing to do" || res.Outputs != nil {
			t.Fatalf("%s = %+v, want message %q and no outputs", op, res, "nothing to do")
		}
	}
}

func TestNoopSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		config  string
		wantErr string
	}{
		{config: ""},
		{config: "null"},
		{config: "{}"},
		{config: " { } \n"},
		{config: `{"command":["x"]}`, wantErr: `unknown setting "command"`},
		{config: `[]`, wantErr: "settings must be an object"},
		{config: `"x"`, wantErr: "settings must be an object"},
		{config: `{} {}`, wantErr: "unexpected data"},
		{config: `{`, wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			t.Parallel()
			_, err := newNoop(Settings{Config: json.RawMessage(tt.config)})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("newNoop(%s): %v", tt.config, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("newNoop(%s) error = %v, want it to contain %q", tt.config, err, tt.wantErr)
			}
		})
	}
}

func TestDecodeConfig(t *testing.T) {
	t.Parallel()
	type settings struct {
		URL     string            `json:"url"`
		Command []string          `json:"command"`
		Env     map[string]string `json:"env"`
		Plan    bool              `json:"plan"`
		Timeout string            `json:"timeout"`
	}
	tests := []struct {
		name    string
		config  string
		want    settings
		wantErr string
	}{
		{name: "absent keeps defaults", config: "", want: settings{Timeout: "5m"}},
		{name: "values", config: `{"url":"u","command":["a","b"],"plan":true}`,
			want: settings{URL: "u", Command: []string{"a", "b"}, Plan: true, Timeout: "5m"}},
		{name: "unknown", config: `{"url":"u","comand":["a"]}`, wantErr: `unknown setting "comand"`},
		{name: "wrong type", config: `{"command":"a"}`, wantErr: "command: must be a list, not string"},
		{name: "wrong element type", config: `{"command":[1]}`, wantErr: "command"},
		{name: "wrong map value", config: `{"env":{"A":1}}`, wantErr: "env"},
		{name: "bool", config: `{"plan":"yes"}`, wantErr: "plan: must be true or false"},
		{name: "number for string", config: `{"timeout":5}`, wantErr: "timeout: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := settings{Timeout: "5m"}
			err := Settings{Config: json.RawMessage(tt.config)}.DecodeConfig(&got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecodeConfig error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.want.URL || !slices.Equal(got.Command, tt.want.Command) || got.Plan != tt.want.Plan || got.Timeout != tt.want.Timeout {
				t.Fatalf("DecodeConfig = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if err := r.Register("webhook", fakeFactory); err != nil {
		t.Fatal(err)
	}
	in, err := r.Build(map[string]Spec{"deploy": {Plugin: "noop"}, "hook-a": {Plugin: "webhook"}, "hook-b": {Plugin: "webhook"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want, err string
	}{
		{"deploy", "deploy", ""},
		{"noop", "noop", ""}, // the built-in instance is called noop
		{"hook-b", "hook-b", ""},
		{"webhook", "", `plugin webhook has several (hook-a, hook-b): name one`},
		{"nope", "", `unknown action instance "nope" (instances: deploy, hook-a, hook-b, noop)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := in.Resolve(tt.name)
			if tt.err != "" {
				if !errors.Is(err, ErrUnknownInstance) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Resolve(%q) = %v, want %q", tt.name, err, tt.err)
				}
				return
			}
			if err != nil || got.Name != tt.want {
				t.Fatalf("Resolve(%q) = %+v, %v; want %s", tt.name, got, err, tt.want)
			}
		})
	}
	// One instance of a plugin stands for it.
	single, err := r.Build(map[string]Spec{"only-hook": {Plugin: "webhook"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := single.Resolve("webhook"); err != nil || got.Name != "only-hook" {
		t.Errorf("Resolve(webhook) with one instance = %+v, %v", got, err)
	}
	if names := in.List(); len(names) != 4 || names[0].Name != "deploy" || names[1].Plugin != "webhook" {
		t.Errorf("List = %+v", names)
	}
}
