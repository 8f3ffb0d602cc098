package httpaction

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
)

const (
	testSecret = "s3cr3t-hmac-key"
	testToken  = "t0k3n-bearer-value"
)

// env is the agent environment the tests build instances with.
func env(name string) (string, bool) {
	switch name {
	case "HOOK_SECRET":
		return testSecret, true
	case "HOOK_TOKEN":
		return testToken, true
	case "EMPTY":
		return "", true
	case "BROKEN_TOKEN":
		return "line\nbreak", true
	}
	return "", false
}

func newAction(t *testing.T, cfg map[string]any) action.Action {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(action.Settings{Instance: "hook", Config: raw, Getenv: env})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func request() *action.Request {
	return &action.Request{
		Instance: "hook",
		Trigger:  "update",
		Resource: action.Resource{
			ID: 9, Kind: "Bucket", APIVersion: "example.com/v1", Namespace: "team-a", Name: "logs",
			Spec: json.RawMessage(`{"region":"eu"}`), Generation: 2, Source: "infra",
		},
		Reporter: action.NoopReporter{},
	}
}

// seen is what a test server saw of one request.
type seen struct {
	header http.Header
	method string
	body   []byte
}

// recordingServer answers every request with status and body and sends what
// it saw on the returned channel.
func recordingServer(t *testing.T, status int, body string) (*httptest.Server, <-chan seen) {
	t.Helper()
	ch := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		ch <- seen{header: r.Header.Clone(), method: r.Method, body: b}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func receive(t *testing.T, ch <-chan seen) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	default:
		t.Fatal("the server saw no request")
		return seen{}
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestSigned(t *testing.T) {
	t.Parallel()
	srv, ch := recordingServer(t, http.StatusOK, "")
	a := newAction(t, map[string]any{
		"url":       srv.URL + "/hooks/deploy?team=db",
		"secretEnv": "HOOK_SECRET",
		"headers":   map[string]string{"x-team": "databases"},
	})

	ids := map[string]bool{}
	for _, op := range []action.Operation{action.OperationApply, action.OperationDestroy} {
		var err error
		if op == action.OperationApply {
			_, err = a.Apply(t.Context(), request())
		} else {
			_, err = a.Destroy(t.Context(), request())
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		got := receive(t, ch)
		if got.method != http.MethodPost {
			t.Errorf("method = %s, want POST", got.method)
		}
		for name, want := range map[string]string{
			"Content-Type":     "application/json",
			"User-Agent":       "no8s-agent",
			"X-No8s-Operation": string(op),
			"X-Team":           "databases",
			"Authorization":    "",
		} {
			if v := got.header.Get(name); v != want {
				t.Errorf("%s: %s = %q, want %q", op, name, v, want)
			}
		}
		// What a receiver does: recompute the signature over the raw body.
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write(got.body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if sig := got.header.Get("X-No8s-Signature-256"); !hmac.Equal([]byte(sig), []byte(want)) {
			t.Errorf("%s: signature %q does not verify; want %q", op, sig, want)
		}
		id := got.header.Get("X-No8s-Delivery")
		if !hexID.MatchString(id) || ids[id] {
			t.Errorf("%s: delivery id %q is not a fresh 32-digit hex id (seen: %v)", op, id, ids)
		}
		ids[id] = true

		var body action.Request
		if err := json.Unmarshal(got.body, &body); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		if body.Operation != op || body.Instance != "hook" || body.Trigger != "update" ||
			body.Resource.Name != "logs" || body.Resource.Namespace != "team-a" || string(body.Resource.Spec) != `{"region":"eu"}` {
			t.Errorf("%s: body = %s", op, got.body)
		}
	}
}

func TestRequestUnsigned(t *testing.T) {
	t.Parallel()
	srv, ch := recordingServer(t, http.StatusNoContent, "")
	a := newAction(t, map[string]any{"url": srv.URL})
	if _, err := a.Apply(t.Context(), request()); err != nil {
		t.Fatal(err)
	}
	got := receive(t, ch)
	if _, ok := got.header["X-No8s-Signature-256"]; ok {
		t.Error("signature header sent without a secret")
	}
	if _, ok := got.header["Authorization"]; ok {
		t.Error("Authorization header sent without a token")
	}
}

func TestFencingToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		token int64
		want  string
	}{
		{name: "first claim", token: 1, want: "1"},
		{name: "large", token: 9007199254740993, want: "9007199254740993"},
		{name: "unset", token: 0, want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, ch := recordingServer(t, http.StatusOK, `{"changes":false}`)
			a := newAction(t, map[string]any{"url": srv.URL, "plan": true})
			req := request()
			req.FencingToken = tt.token
			for _, op := range []action.Operation{action.OperationApply, action.OperationDestroy, action.OperationPlan} {
				var err error
				switch op {
				case action.OperationApply:
					_, err = a.Apply(t.Context(), req)
				case action.OperationDestroy:
					_, err = a.Destroy(t.Context(), req)
				default:
					_, err = a.(action.Planner).Plan(t.Context(), req)
				}
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				got := receive(t, ch)
				if v := got.header.Get("X-No8s-Fencing-Token"); v != tt.want {
					t.Errorf("%s: X-No8s-Fencing-Token = %q, want %q", op, v, tt.want)
				}
				// Decoded as a number would lose precision past 2^53; the
				// body must carry the exact digits.
				var body struct {
					FencingToken json.Number `json:"fencingToken"`
				}
				dec := json.NewDecoder(bytes.NewReader(got.body))
				dec.UseNumber()
				if err := dec.Decode(&body); err != nil || body.FencingToken.String() != tt.want {
					t.Errorf("%s: body fencingToken = %q (%v), want %s", op, body.FencingToken, err, tt.want)
				}
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	srv, ch := recordingServer(t, http.StatusOK, "")
	a := newAction(t, map[string]any{"url": srv.URL, "tokenEnv": "HOOK_TOKEN"})
	if _, err := a.Apply(t.Context(), request()); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ch).header.Get("Authorization"); got != "Bearer "+testToken {
		t.Fatalf("Authorization = %q, want the bearer token", got)
	}
}

func TestResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		body        string
		wantOutputs string
		wantErr     string // the whole message, with URL for the server's URL
	}{
		{name: "JSON body is outputs", status: 200, body: ` {"id": 7} ` + "\n", wantOutputs: `{"id": 7}`},
		{name: "created", status: 201, body: `["a"]`, wantOutputs: `["a"]`},
		{name: "empty body", status: 200, body: ""},
		{name: "no content", status: 204},
		{name: "text body is no outputs", status: 202, body: "accepted"},
		{name: "server error quotes body", status: 500, body: "database is down\n", wantErr: "POST URL: 500 Internal Server Error: database is down"},
		{name: "error without body", status: 404, wantErr: "POST URL: 404 Not Found"},
		{name: "1xx-free client error", status: 422, body: `{"error":"size"}`, wantErr: `POST URL: 422 Unprocessable Entity: {"error":"size"}`},
		{name: "body of exactly 1 MiB", status: 200, body: `"` + strings.Repeat("a", 1<<20-2) + `"`, wantOutputs: `"` + strings.Repeat("a", 1<<20-2) + `"`},
		{name: "body over 1 MiB", status: 200, body: strings.Repeat("a", 1<<20+1), wantErr: "POST URL: 200 OK: response body exceeds 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := recordingServer(t, tt.status, tt.body)
			a := newAction(t, map[string]any{"url": srv.URL})
			res, err := a.Apply(t.Context(), request())
			if tt.wantErr != "" {
				want := strings.ReplaceAll(tt.wantErr, "URL", srv.URL)
				if err == nil || err.Error() != want {
					t.Fatalf("error = %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Outputs) != tt.wantOutputs {
				t.Fatalf("Outputs = %.80q, want %.80q", res.Outputs, tt.wantOutputs)
			}
			if tt.wantOutputs == "" && res.Outputs != nil {
				t.Fatalf("Outputs = %q, want nil", res.Outputs)
			}
		})
	}
}

func TestErrorBodyTruncated(t *testing.T) {
	t.Parallel()
	body := "BEGIN" + strings.Repeat("x", 10000) + "END"
	srv, _ := recordingServer(t, http.StatusBadGateway, body)
	a := newAction(t, map[string]any{"url": srv.URL})
	_, err := a.Apply(t.Context(), request())
	prefix := "POST " + srv.URL + ": 502 Bad Gateway: BEGIN"
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error = %.120v, want prefix %q", err, prefix)
	}
	if n := len(err.Error()) - len(prefix) + len("BEGIN"); n != 4096 {
		t.Fatalf("error quotes %d bytes of the body, want 4096", n)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		followed.Store(true)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	a := newAction(t, map[string]any{"url": srv.URL + "/hook"})
	_, err := a.Apply(t.Context(), request())
	if err == nil || !strings.Contains(err.Error(), "302 Found: redirects are not followed") {
		t.Fatalf("error = %v, want a 302 failure", err)
	}
	if followed.Load() {
		t.Fatal("the redirect was followed")
	}
}

// block waits until the client gives up on the request. It reads the body
// first: only then does the server watch the connection and cancel the
// request's context when the client closes it.
func block(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// blockingServer's handler blocks; entered receives a value when a request
// arrives.
func blockingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		block(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, entered
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	srv, _ := blockingServer(t)
	a := newAction(t, map[string]any{"url": srv.URL, "timeout": "100ms"})
	if got := a.(action.Timeouter).Timeout(); got != 100*time.Millisecond {
		t.Fatalf("Timeout() = %s", got)
	}
	_, err := a.Apply(t.Context(), request())
	want := "POST " + srv.URL + ": timed out after 100ms"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	srv, entered := blockingServer(t)
	a := newAction(t, map[string]any{"url": srv.URL})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := a.Apply(ctx, request())
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the server")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply did not return after cancellation")
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		want    action.Plan
		wantErr string
	}{
		{name: "changes", status: 200, body: `{"changes":true,"summary":" 1 to add ","output":"+ bucket logs\n"}`,
			want: action.Plan{Changes: true, Summary: "1 to add", Output: "+ bucket logs\n"}},
		{name: "no changes", status: 200, body: `{"changes":false}`, want: action.Plan{Summary: "no changes"}},
		{name: "changes without summary", status: 200, body: `{"changes":true,"extra":1}`, want: action.Plan{Changes: true, Summary: "changes"}},
		{name: "server error", status: 503, body: "busy", wantErr: "503 Service Unavailable: busy"},
		{name: "not JSON", status: 200, body: "no changes", wantErr: "plan response is not"},
		{name: "empty", status: 200, body: "", wantErr: "plan response is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, ch := recordingServer(t, tt.status, tt.body)
			a := newAction(t, map[string]any{"url": srv.URL, "plan": true})
			planner, ok := a.(action.Planner)
			if !ok {
				t.Fatal("with plan: true the action is not a Planner")
			}
			plan, err := planner.Plan(t.Context(), request())
			got := receive(t, ch)
			if op := got.header.Get("X-No8s-Operation"); op != "plan" {
				t.Errorf("X-No8s-Operation = %q, want plan", op)
			}
			if !strings.Contains(string(got.body), `"operation":"plan"`) {
				t.Errorf("body = %s, want operation plan", got.body)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *plan != tt.want {
				t.Fatalf("Plan = %+v, want %+v", *plan, tt.want)
			}
		})
	}
}

func TestPlanSetting(t *testing.T) {
	t.Parallel()
	for _, cfg := range []map[string]any{
		{"url": "https://example.com/hook"},
		{"url": "https://example.com/hook", "plan": false},
	} {
		a := newAction(t, cfg)
		if _, ok := a.(action.Planner); ok {
			t.Errorf("%v: the action is a Planner", cfg)
		}
		if got := a.(action.Timeouter).Timeout(); got != 30*time.Second {
			t.Errorf("%v: Timeout() = %s, want the 30s default", cfg, got)
		}
	}
}

func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  string
		wantErr []string
	}{
		{name: "no settings", config: ``, wantErr: []string{"url: required"}},
		{name: "unknown setting", config: `{"url":"https://x","secret":"abc"}`, wantErr: []string{`unknown setting "secret"`}},
		{name: "relative url", config: `{"url":"/hooks"}`, wantErr: []string{"url:", "not an absolute http or https URL"}},
		{name: "other scheme", config: `{"url":"ftp://example.com/x"}`, wantErr: []string{"url:", "not an absolute http or https URL"}},
		{name: "no host", config: `{"url":"https:///x"}`, wantErr: []string{"url:", "has no host"}},
		{name: "credentials in url", config: `{"url":"https://user:pw@example.com/"}`, wantErr: []string{"url: must not contain credentials"}},
		{name: "unparsable url", config: `{"url":"https://exa mple.com/"}`, wantErr: []string{"url:"}},
		{name: "secret unset", config: `{"url":"https://x","secretEnv":"NOPE"}`, wantErr: []string{"secretEnv: NOPE is not set"}},
		{name: "secret empty", config: `{"url":"https://x","secretEnv":"EMPTY"}`, wantErr: []string{"secretEnv: EMPTY is empty"}},
		{name: "token unset", config: `{"url":"https://x","tokenEnv":"NOPE"}`, wantErr: []string{"tokenEnv: NOPE is not set"}},
		{name: "token not a header value", config: `{"url":"https://x","tokenEnv":"BROKEN_TOKEN"}`, wantErr: []string{"tokenEnv: the value of BROKEN_TOKEN"}},
		{name: "bad timeout", config: `{"url":"https://x","timeout":"soon"}`, wantErr: []string{"timeout:", "not a duration"}},
		{name: "zero timeout", config: `{"url":"https://x","timeout":"0s"}`, wantErr: []string{"timeout: must be positive"}},
		{name: "timeout a number", config: `{"url":"https://x","timeout":30}`, wantErr: []string{"timeout: must be a string"}},
		{name: "authorization header", config: `{"url":"https://x","headers":{"authorization":"Bearer abc"}}`, wantErr: []string{"headers: Authorization is set by the agent"}},
		{name: "agent header", config: `{"url":"https://x","headers":{"X-No8s-Delivery":"1"}}`, wantErr: []string{"headers: X-No8s-Delivery"}},
		{name: "bad header name", config: `{"url":"https://x","headers":{"X Team":"1"}}`, wantErr: []string{`headers: "X Team" is not a valid header name`}},
		{name: "header twice", config: `{"url":"https://x","headers":{"X-Team":"1","x-team":"2"}}`, wantErr: []string{"headers: X-Team is set twice"}},
		{name: "bad header value", config: `{"url":"https://x","headers":{"X-Team":"a\nb"}}`, wantErr: []string{"headers: the value of X-Team"}},
		{name: "headers a list", config: `{"url":"https://x","headers":["X-Team"]}`, wantErr: []string{"headers: must be an object"}},
		{name: "every problem at once", config: `{"timeout":"-1s","tokenEnv":"NOPE"}`, wantErr: []string{"url: required", "timeout:", "tokenEnv: NOPE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(action.Settings{Instance: "hook", Config: json.RawMessage(tt.config), Getenv: env})
			if err == nil {
				t.Fatalf("New succeeded: %T", a)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "line\nbreak") {
				t.Errorf("error = %q quotes a variable's value", err)
			}
		})
	}
}

// TestSecretsNotInErrors makes every kind of failure happen to an instance
// with both a secret and a token, against a receiver that echoes them back.
func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/next?token="+testToken)
			w.WriteHeader(status)
			io.WriteString(w, "you sent "+r.Header.Get("Authorization")+" signed with "+testSecret)
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name    string
		handler http.Handler // nil: no server listens
		timeout string
	}{
		{name: "error status echoing credentials", handler: echo(http.StatusUnauthorized)},
		{name: "redirect with credentials", handler: echo(http.StatusTemporaryRedirect)},
		{name: "timeout", timeout: "50ms", handler: http.HandlerFunc(block)},
		{name: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := closed.URL
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				url = srv.URL
			}
			cfg := map[string]any{"url": url, "secretEnv": "HOOK_SECRET", "tokenEnv": "HOOK_TOKEN", "plan": true}
			if tt.timeout != "" {
				cfg["timeout"] = tt.timeout
			}
			a := newAction(t, cfg)
			_, applyErr := a.Apply(t.Context(), request())
			_, planErr := a.(action.Planner).Plan(t.Context(), request())
			for _, err := range []error{applyErr, planErr} {
				if err == nil {
					t.Fatal("succeeded")
				}
				if msg := err.Error(); strings.Contains(msg, testSecret) || strings.Contains(msg, testToken) {
					t.Fatalf("error reveals a credential: %s", msg)
				}
			}
			if tt.handler != nil && tt.timeout == "" && !strings.Contains(applyErr.Error(), "[redacted]") {
				t.Fatalf("error = %q, want the echoed credentials redacted", applyErr)
			}
		})
	}
}

// TestSecretCutInErrorBody has a receiver echo the token where the error's
// quote of its body is cut: no piece of it is left.
func TestSecretCutInErrorBody(t *testing.T) {
	t.Parallel()
	{
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, strings.Repeat("x", errorBody-10)+testToken)
		}))
		t.Cleanup(srv.Close)
		a := newAction(t, map[string]any{"url": srv.URL, "tokenEnv": "HOOK_TOKEN"})
		_, err := a.Apply(t.Context(), request())
		if err == nil || !strings.Contains(err.Error(), "xxxxxxxx") {
			t.Fatalf("error = %.200v, want the body quoted", err)
		}
		for i := 0; i+6 <= len(testToken); i++ {
			if piece := testToken[i : i+6]; strings.Contains(err.Error(), piece) {
				t.Fatalf("the error holds %q, a piece of the token: ...%s", piece, err.Error()[len(err.Error())-40:])
			}
		}
	}
}
