package admission_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/admission"
)

func TestHookCheck(t *testing.T) {
	t.Parallel()
	valid := func(edit func(*admission.Hook)) admission.Hook {
		h := admission.Hook{Name: "policy", URL: "https://hooks.example.com/review?team=db", Type: admission.Validating}
		edit(&h)
		return h
	}
	tests := []struct {
		name string
		hook admission.Hook
		// want are the expected problems as "key: substring of message".
		want []string
	}{
		{name: "minimal", hook: valid(func(*admission.Hook) {})},
		{name: "everything set", hook: valid(func(h *admission.Hook) {
			h.Type = admission.Mutating
			h.Kinds = []string{"Database", "Queue"}
			h.Operations = []admission.Operation{admission.Create, admission.Update, admission.Delete}
			h.FailurePolicy = admission.Ignore
			h.Timeout = admission.Duration{Duration: admission.MaxTimeout}
			h.SecretEnv = "HOOK_SECRET"
			h.URL = "http://127.0.0.1:8443/mutate"
		})},
		{name: "no name", hook: valid(func(h *admission.Hook) { h.Name = "" }), want: []string{"name: required"}},
		{name: "bad name", hook: valid(func(h *admission.Hook) { h.Name = "My Hook" }), want: []string{`name: invalid hook name "My Hook"`}},
		{name: "no url", hook: valid(func(h *admission.Hook) { h.URL = "" }), want: []string{"url: required"}},
		{name: "relative url", hook: valid(func(h *admission.Hook) { h.URL = "/review" }), want: []string{"url: \"/review\" is not an absolute http or https URL"}},
		{name: "other scheme", hook: valid(func(h *admission.Hook) { h.URL = "ftp://hooks.example.com/" }), want: []string{"url: \"ftp://hooks.example.com/\" is not an absolute http or https URL"}},
		{name: "no host", hook: valid(func(h *admission.Hook) { h.URL = "https:///review" }), want: []string{"url: \"https:///review\" has no host"}},
		{name: "credentials", hook: valid(func(h *admission.Hook) { h.URL = "https://user:pw@hooks.example.com/" }), want: []string{"url: must not contain credentials"}},
		{name: "fragment", hook: valid(func(h *admission.Hook) { h.URL = "https://hooks.example.com/#x" }), want: []string{"url: must not contain a fragment"}},
		{name: "unparsable url", hook: valid(func(h *admission.Hook) { h.URL = "https://hooks example.com/" }), want: []string{"url: "}},
		{name: "bad kind", hook: valid(func(h *admission.Hook) { h.Kinds = []string{"Database", "database"} }), want: []string{`kinds[1]: "database" is not a kind name`}},
		{name: "unknown operation", hook: valid(func(h *admission.Hook) { h.Operations = []admission.Operation{"create", "apply"} }), want: []string{`operations[1]: unknown operation "apply"`}},
		{name: "no type", hook: valid(func(h *admission.Hook) { h.Type = "" }), want: []string{"type: required"}},
		{name: "bad type", hook: valid(func(h *admission.Hook) { h.Type = "Validating" }), want: []string{`type: must be validating or mutating, not "Validating"`}},
		{name: "bad policy", hook: valid(func(h *admission.Hook) { h.FailurePolicy = "fail" }), want: []string{`failurePolicy: must be Fail or Ignore, not "fail"`}},
		{name: "timeout over the max", hook: valid(func(h *admission.Hook) { h.Timeout = admission.Duration{Duration: 31 * time.Second} }), want: []string{"timeout: must be at most 30s, not 31s"}},
		{name: "negative timeout", hook: valid(func(h *admission.Hook) { h.Timeout = admission.Duration{Duration: -time.Second} }), want: []string{"timeout: must be positive"}},
		{name: "several problems", hook: admission.Hook{Type: "audit", FailurePolicy: "Retry"}, want: []string{
			"name: required", "url: required", "type: must be", "failurePolicy: must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.hook.Check()
			if len(got) != len(tt.want) {
				t.Fatalf("Check() = %q, want %d problems %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i].String(), w) {
					t.Errorf("problem %d = %q, want it to start %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckHooks(t *testing.T) {
	t.Parallel()
	hook := func(name string) admission.Hook {
		return admission.Hook{Name: name, URL: "https://hooks.example.com/", Type: admission.Validating}
	}
	bad := hook("bad")
	bad.Timeout = admission.Duration{Duration: time.Minute}
	tests := []struct {
		name  string
		hooks []admission.Hook
		want  []admission.Problem
	}{
		{name: "none"},
		{name: "distinct", hooks: []admission.Hook{hook("a"), hook("b")}},
		{name: "duplicate names", hooks: []admission.Hook{hook("a"), hook("b"), hook("a")}, want: []admission.Problem{
			{Key: "admission[2].name", Message: `duplicate hook name "a" (also admission[0])`}}},
		{name: "keys from the root", hooks: []admission.Hook{hook("a"), bad}, want: []admission.Problem{
			{Key: "admission[1].timeout", Message: "must be at most 30s, not 1m0s"}}},
		{name: "missing names are not duplicates", hooks: []admission.Hook{hook(""), hook("")}, want: []admission.Problem{
			{Key: "admission[0].name", Message: "required"}, {Key: "admission[1].name", Message: "required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := admission.CheckHooks(tt.hooks); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("CheckHooks() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHookJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    admission.Hook
		wantErr string
	}{
		{
			name: "all fields",
			in: `{"name":"defaults","url":"https://h.example.com/","kinds":["Database"],"operations":["create","update"],
				"type":"mutating","failurePolicy":"Ignore","timeout":"5s","secretEnv":"KEY"}`,
			want: admission.Hook{Name: "defaults", URL: "https://h.example.com/", Kinds: []string{"Database"},
				Operations: []admission.Operation{admission.Create, admission.Update}, Type: admission.Mutating,
				FailurePolicy: admission.Ignore, Timeout: admission.Duration{Duration: 5 * time.Second}, SecretEnv: "KEY"},
		},
		{name: "null timeout", in: `{"timeout":null}`},
		{name: "bare number", in: `{"timeout":10}`, wantErr: "write it with a unit"},
		{name: "not a duration", in: `{"timeout":"soon"}`, wantErr: `invalid duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got admission.Hook
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Unmarshal: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			// Written back, it reads the same.
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var again admission.Hook
			if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("round trip %s: %+v, %v", out, again, err)
			}
		})
	}
}
