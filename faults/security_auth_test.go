package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// The API tokens of these scenarios. The agent processes inherit the test
// binary's environment, and t.Setenv cannot be used in parallel tests:
// they are set once, before any test runs.
const (
	authWriteEnv   = "NO8S_FAULTS_AUTH_WRITE"
	authWrite      = "auth-write-4f1c92"
	authReadEnv    = "NO8S_FAULTS_AUTH_READ"
	authRead       = "auth-read-0b7e35"
	authCIEnv      = "NO8S_FAULTS_AUTH_CI"
	authCI         = "auth-ci-a81d06"
	authCreatorEnv = "NO8S_FAULTS_AUTH_CREATOR"
	authCreator    = "auth-creator-5c3e7b"
	authActionsEnv = "NO8S_FAULTS_AUTH_ACTIONS"
	authActions    = "auth-actions-9e2f40"
)

func init() {
	for name, value := range map[string]string{authWriteEnv: authWrite, authReadEnv: authRead, authCIEnv: authCI,
		authCreatorEnv: authCreator, authActionsEnv: authActions} {
		os.Setenv(name, value)
	}
}

// authWidgetType is a type declared through the API.
const authWidgetType = `{"name": "Widget", "version": "v1", "schema": {"type": "object", "properties": {"size": {"type": "integer"}}}}`

// authCall sends a request with the bearer token (none when empty), the
// Host header host (the URL's when empty) and a JSON body (none when
// empty), and returns the status and body; a network error fails the test.
func authCall(t *testing.T, method, url, token, host, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// authMust sends a request and fails unless it answers want.
func authMust(t *testing.T, method, url, token, body string, want int) string {
	t.Helper()
	status, got := authCall(t, method, url, token, "", body)
	if status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, url, status, got, want)
	}
	return got
}

// startAuthAgent runs an agent that declares resources through the API
// only, with the api section given (indented by two spaces) and two action
// instances, a and b, that do nothing.
func startAuthAgent(t *testing.T, api string) (*agent, string) {
	t.Helper()
	work := t.TempDir()
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
actions:
  a: {plugin: noop}
  b: {plugin: noop}
api:
  writeTokenEnv: %s
  readTokenEnv: %s
%s`, pgtest.URL(t), authWriteEnv, authReadEnv, api))
	a := startAgent(t, work, "run", "--config", cfg)
	return a, a.URL()
}

// TestSecurityAuthOIDCIdentity sends ID tokens of the configured issuer,
// genuinely signed, whose subject is the name of the write shorthand, of
// the read shorthand, or of a token with a secret of its own: none gets
// that token's grants, and nothing is written. The entry declared for ID
// tokens works, and the audit trail names it oidc:<subject>.
func TestSecurityAuthOIDCIdentity(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	a, base := startAuthAgent(t, fmt.Sprintf(`  oidc: {issuerURL: %q, audience: no8s}
  tokens:
    - name: ci
      tokenEnv: %s
      allow: [{verbs: [get, list, create, update, delete, sync]}]
    - name: alice
      allow: [{verbs: [get, list, create]}]
`, is.URL, authCIEnv))

	for _, sub := range []string{"write", "read", "ci"} {
		tok := is.Token(t, "no8s", sub, nil)
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/api/v1/resource-types", authWidgetType},
			{"GET", "/api/v1/resources", ""},
			{"GET", "/api/v1/sources/api", ""},
		} {
			status, body := authCall(t, c.method, base+c.path, tok, "", c.body)
			if status != http.StatusUnauthorized && status != http.StatusForbidden {
				t.Errorf("ID token with sub %q: %s %s = %d %s; want 401 or 403", sub, c.method, c.path, status, body)
			}
		}
	}
	if body := authMust(t, "GET", base+"/api/v1/resource-types", authRead, "", http.StatusOK); strings.TrimSpace(body) != "[]" {
		t.Fatalf("ID tokens naming other tokens declared types: %s", body)
	}

	alice := is.Token(t, "no8s", "alice", nil)
	authMust(t, "POST", base+"/api/v1/resource-types", alice, authWidgetType, http.StatusCreated)
	if body := authMust(t, "GET", base+"/api/v1/sources/api/history", authRead, "", http.StatusOK); !strings.Contains(body, `"author":"oidc:alice"`) {
		t.Errorf("the API's sync history does not name the ID token: %s", body)
	}
	if log := a.Log(); !strings.Contains(log, "token=oidc:alice method=POST path=/api/v1/resource-types") {
		t.Errorf("the log does not audit the write as oidc:alice")
	}
}

// TestSecurityAuthOIDCKeys floods the agent with tokens signed by keys the
// issuer never published, each with a key ID of its own: the issuer's keys
// are read a bounded number of times, not once per token. Then the issuer
// goes down: a token with an unknown key is 503, and no answer names the
// issuer's or its keys' URL.
func TestSecurityAuthOIDCKeys(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	_, base := startAuthAgent(t, fmt.Sprintf(`  oidc: {issuerURL: %q, audience: no8s}
  tokens:
    - name: alice
      allow: [{verbs: [get, list]}]
`, is.URL))
	alice := is.Token(t, "no8s", "alice", nil)
	authMust(t, "GET", base+"/api/v1/resources", alice, "", http.StatusOK)

	noURL := func(what, body string) {
		t.Helper()
		if strings.Contains(body, "http") || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "/keys") {
			t.Fatalf("%s names a URL: %s", what, body)
		}
	}
	const flood = 100
	forged := make([]string, flood)
	for i := range forged {
		forged[i] = is.ForgedToken(t, fmt.Sprintf("attacker-%d", i), "no8s", "alice")
	}
	before, start := is.KeyReads(), time.Now()
	for _, tok := range forged {
		status, body := authCall(t, "GET", base+"/api/v1/resources", tok, "", "")
		noURL("the answer to a forged token", body)
		if status != http.StatusUnauthorized {
			t.Fatalf("a forged token = %d %s; want 401", status, body)
		}
	}
	allowed := 1 + int(time.Since(start)/oidc.KeyRefreshFloor)
	if reads := is.KeyReads() - before; reads > allowed {
		t.Errorf("%d forged tokens made the agent read the issuer's keys %d times; want at most %d", flood, reads, allowed)
	}

	is.Close()
	i := 0
	waitUntil(t, 3*oidc.KeyRefreshFloor, "an unknown key to be 503 while the issuer is down", func() (bool, string) {
		i++
		status, body := authCall(t, "GET", base+"/api/v1/resources", forged[i%flood], "", "")
		noURL("the answer to an unknown key while the issuer is down", body)
		if status != http.StatusServiceUnavailable && status != http.StatusUnauthorized {
			t.Fatalf("an unknown key while the issuer is down = %d %s; want 503", status, body)
		}
		return status == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", status, body)
	})
	// The key it knows still verifies.
	authMust(t, "GET", base+"/api/v1/resources", alice, "", http.StatusOK)
}

// TestSecurityAuthScopedTokens: a token that may create Widgets but not
// update them cannot change an existing one by POSTing it; the same token,
// limited to one kind, can describe its resources with the CLI, but not
// list the agents or the action instances, which are about every kind.
func TestSecurityAuthScopedTokens(t *testing.T) {
	t.Parallel()
	_, base := startAuthAgent(t, fmt.Sprintf(`  tokens:
    - name: creator
      tokenEnv: %s
      allow: [{verbs: [create, get, list], kinds: [Widget]}]
`, authCreatorEnv))
	authMust(t, "POST", base+"/api/v1/resource-types", authWrite, authWidgetType, http.StatusCreated)
	var before apiResourceState
	if err := json.Unmarshal([]byte(authMust(t, "POST", base+"/api/v1/resources", authWrite,
		`{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated)), &before); err != nil {
		t.Fatal(err)
	}
	status, body := authCall(t, "POST", base+"/api/v1/resources", authCreator, "",
		`{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 666}}`)
	if status != http.StatusForbidden || !strings.Contains(body, "missing permission update") {
		t.Errorf("a create-only token POSTing an existing Widget = %d %s; want 403 naming update", status, body)
	}
	var after apiResourceState
	if err := json.Unmarshal([]byte(authMust(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", base, before.ID), authRead, "", http.StatusOK)), &after); err != nil {
		t.Fatal(err)
	}
	if string(after.Spec) != string(before.Spec) || after.Generation != before.Generation {
		t.Errorf("the refused POST changed w1: %s generation %d, was %s %d", after.Spec, after.Generation, before.Spec, before.Generation)
	}

	out, err := exec.Command(agentBinary(t), "describe", "resource", "Widget/w1", "--server", base, "--token-env", authCreatorEnv).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Widget (no8s.io/v1)") || !strings.Contains(string(out), "Last attempts:") {
		t.Errorf("describe with a kind-scoped token: %v\n%s", err, out)
	}
	for _, path := range []string{"/api/v1/agents", "/api/v1/plugins/actions"} {
		if status, body := authCall(t, "GET", base+path, authCreator, "", ""); status != http.StatusForbidden {
			t.Errorf("GET %s with a kind-scoped token = %d %s; want 403", path, status, body)
		}
		authMust(t, "GET", base+path, authRead, "", http.StatusOK)
	}
}

// apiResourceState is what these scenarios compare of a resource.
type apiResourceState struct {
	ID         int64           `json:"id"`
	Spec       json.RawMessage `json:"spec"`
	Generation int64           `json:"generation"`
	Action     string          `json:"action_plugin"`
}

// TestSecurityAuthActionGrants: a token whose grant is limited to the
// action instance a cannot write a resource naming b, nor one that names
// none when its type's default is b, nor move a resource of a to b.
func TestSecurityAuthActionGrants(t *testing.T) {
	t.Parallel()
	_, base := startAuthAgent(t, fmt.Sprintf(`  tokens:
    - name: deployer
      tokenEnv: %s
      allow:
        - {verbs: [create, update], kinds: [Widget, Gadget], actions: [a]}
        - {verbs: [get, list], kinds: [Widget, Gadget]}
`, authActionsEnv))
	authMust(t, "POST", base+"/api/v1/resource-types", authWrite, authWidgetType, http.StatusCreated)
	authMust(t, "POST", base+"/api/v1/resource-types", authWrite, strings.Replace(
		strings.Replace(authWidgetType, "Widget", "Gadget", 1), `"schema"`, `"action": "b", "schema"`, 1), http.StatusCreated)

	for _, c := range []struct{ what, body string }{
		{"naming b", `{"name": "w-b", "resource_type_name": "Widget", "action_plugin": "b", "spec": {"size": 1}}`},
		{"naming none, its type's default b", `{"name": "g-1", "resource_type_name": "Gadget", "spec": {"size": 1}}`},
	} {
		status, body := authCall(t, "POST", base+"/api/v1/resources", authActions, "", c.body)
		if status != http.StatusForbidden || !strings.Contains(body, "actions [b]") {
			t.Errorf("a write %s with a grant of actions [a] = %d %s; want 403 naming actions [b]", c.what, status, body)
		}
	}
	if body := authMust(t, "GET", base+"/api/v1/resources", authRead, "", http.StatusOK); strings.TrimSpace(body) != "[]" {
		t.Fatalf("refused writes created resources: %s", body)
	}
	var own apiResourceState
	if err := json.Unmarshal([]byte(authMust(t, "POST", base+"/api/v1/resources", authActions,
		`{"name": "w-a", "resource_type_name": "Widget", "action_plugin": "a", "spec": {"size": 1}}`, http.StatusCreated)), &own); err != nil {
		t.Fatal(err)
	}
	status, body := authCall(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d", base, own.ID), authActions, "", `{"action_plugin": "b"}`)
	if status != http.StatusForbidden || !strings.Contains(body, "actions [b]") {
		t.Errorf("moving its resource to b = %d %s; want 403", status, body)
	}
	var after apiResourceState
	if err := json.Unmarshal([]byte(authMust(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", base, own.ID), authRead, "", http.StatusOK)), &after); err != nil {
		t.Fatal(err)
	}
	if after.Action != "a" || after.Generation != own.Generation {
		t.Errorf("the refused update changed the resource: %+v", after)
	}
}

// TestSecurityAuthDNSRebinding plays a DNS rebinding attack: a page of
// evil.example, whose name the attacker points at 127.0.0.1, makes a
// browser send requests to the agent with Host: evil.example. The agent,
// listening on loopback, refuses them, health and webhooks included; names
// listed in api.allowedHosts are answered.
func TestSecurityAuthDNSRebinding(t *testing.T) {
	t.Parallel()
	check := func(base string, allowed ...string) {
		t.Helper()
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
		for _, path := range []string{"/api/v1/resources", "/healthz", "/metrics", "/"} {
			status, body := authCall(t, "GET", base+path, authRead, "evil.example:"+port, "")
			if status != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host evil.example = %d %s; want 421", path, status, body)
			}
			for _, host := range append([]string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}, allowed...) {
				if status, body := authCall(t, "GET", base+path, authRead, host, ""); status != http.StatusOK {
					t.Errorf("GET %s with Host %s = %d %s; want 200", path, host, status, body)
				}
			}
		}
		status, body := authCall(t, "POST", base+"/api/v1/resource-types", authWrite, "evil.example", authWidgetType)
		if status != http.StatusMisdirectedRequest {
			t.Errorf("a write with Host evil.example = %d %s; want 421", status, body)
		}
	}
	first, base := startAuthAgent(t, "")
	check(base)
	first.Stop()
	_, base = startAuthAgent(t, "  allowedHosts: [no8s.internal.example]\n")
	check(base, "no8s.internal.example", "NO8S.internal.example:8080")
}
