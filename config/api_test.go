package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestAPIAuthProblems: entries for ID tokens cannot take the names of the
// shorthands, nor secret tokens the prefix that marks ID tokens in the
// audit trail; grants name known action instances, for writes only; the
// allowed hosts are host names or addresses.
func TestAPIAuthProblems(t *testing.T) {
	t.Parallel()
	const (
		oidc    = "api:\n  oidc: {issuerURL: \"https://id.example.com\", audience: no8s}\n"
		actions = "actions:\n  a: {plugin: noop}\n  b: {plugin: noop}\n"
	)
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"ID token entry named write", oidc + "  tokens: [{name: write, allow: [{verbs: [get]}]}]\n",
			"api.tokens[0].name", `"write" is reserved`},
		{"ID token entry named read", oidc + "  tokens: [{name: read, allow: [{verbs: [get]}]}]\n",
			"api.tokens[0].name", `"read" is reserved`},
		{"ID token entry named write beside the shorthand", "api:\n  writeTokenEnv: T\n  oidc: {issuerURL: \"https://id.example.com\", audience: no8s}\n" +
			"  tokens: [{name: write, allow: [{verbs: [get]}]}]\n", "api.tokens[0].name", `"write" is reserved`},
		{"secret token named as an ID token", "api: {tokens: [{name: \"oidc:alice\", tokenEnv: T, allow: [{verbs: [get]}]}]}\n",
			"api.tokens[0].name", `"oidc:"`},
		{"grant of an unknown action", actions + "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [create], actions: [c]}]}]}\n",
			"api.tokens[0].allow[0].actions", `unknown action instance "c" (instances: a, b, noop)`},
		{"grant of an empty action", actions + "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [create], actions: [\"\"]}]}]}\n",
			"api.tokens[0].allow[0].actions", `unknown action instance ""`},
		{"grant of actions to list", actions + "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [create, list], actions: [a]}]}]}\n",
			"api.tokens[0].allow[0].actions", `list`},
		{"grant of actions to sync", actions + "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [sync], actions: [a]}]}]}\n",
			"api.tokens[0].allow[0].actions", `sync`},
		{"grant of a namespace that is no label", "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [get], namespaces: [Team_A]}]}]}\n",
			"api.tokens[0].allow[0].namespaces[0]", `Invalid value: "Team_A"`},
		{"grant of an empty namespace", "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [get], namespaces: [\"\"]}]}]}\n",
			"api.tokens[0].allow[0].namespaces[0]", `empty`},
		{"grant of a namespace twice", "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [get], namespaces: [a, a]}]}]}\n",
			"api.tokens[0].allow[0].namespaces[1]", `listed twice`},
		{"grant of namespaces to sync", "api: {tokens: [{name: ci, tokenEnv: T, allow: [{verbs: [get, sync], namespaces: [a]}]}]}\n",
			"api.tokens[0].allow[0].namespaces", `sync is about sources`},
		{"allowed host as a URL", "api: {allowedHosts: [\"https://agent.example.com\"]}\n", "api.allowedHosts[0]", "not a URL"},
		{"allowed host with a path", "api: {allowedHosts: [\"agent.example.com/x\"]}\n", "api.allowedHosts[0]", "not a URL"},
		{"empty allowed host", "api: {allowedHosts: [\"\"]}\n", "api.allowedHosts[0]", "empty"},
		{"wildcard allowed host", "api: {allowedHosts: [\"*\"]}\n", "api.allowedHosts[0]", "wildcard"},
		{"allowed host with a bad port", "api: {allowedHosts: [\"agent.example.com:http\"]}\n", "api.allowedHosts[0]", "port"},
		{"allowed host with spaces", "api: {allowedHosts: [\"agent example\"]}\n", "api.allowedHosts[0]", "host name"},
		{"reads paced below zero", "api: {readsWhileWorking: -5}\n", "api.readsWhileWorking", "-1 to never pace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), env(map[string]string{"T": "x"}))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error\n%s\ndoes not contain %q and %q", err, tc.key, tc.msg)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *Error", err)
			}
		})
	}
}

// TestAPIAuthValid reads grants of actions, ID token entries and allowed
// hosts.
func TestAPIAuthValid(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`actions:
  a: {plugin: noop}
api:
  writeTokenEnv: T
  allowedHosts: [agent.example.com, "agent.example.com:8443", "10.0.0.5", "[fd00::1]:8080", AGENT.internal.]
  oidc: {issuerURL: "https://id.example.com", audience: no8s}
  tokens:
    - name: alice@example.com
      allow: [{verbs: [create, update, delete, reconcile, suspend], kinds: [Widget], actions: [a, noop]}, {verbs: [get], namespaces: [team-a, team-b]}]
    - name: ci
      tokenEnv: T
      allow: [{verbs: [get, list]}]
`), env(map[string]string{"T": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if g := c.API.Tokens[0].Allow[0]; !slices.Equal(g.Actions, []string{"a", "noop"}) {
		t.Errorf("grant actions: %v", g.Actions)
	}
	if g := c.API.Tokens[0].Allow[1]; !slices.Equal(g.Namespaces, []string{"team-a", "team-b"}) {
		t.Errorf("grant namespaces: %v", g.Namespaces)
	}
	if len(c.API.AllowedHosts) != 5 {
		t.Errorf("allowed hosts: %v", c.API.AllowedHosts)
	}
}
