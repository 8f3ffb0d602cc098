package admission_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/admission"
)

// reviewRequest is an AdmissionReview as a hook receives it, written from
// the package documentation rather than taken from the package, so that the
// tests hold the implementation to the documented protocol.
type reviewRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    struct {
		UID       string          `json:"uid"`
		Kind      string          `json:"kind"`
		Name      string          `json:"name"`
		Operation string          `json:"operation"`
		Source    string          `json:"source"`
		Revision  string          `json:"revision"`
		Object    json.RawMessage `json:"object"`
		OldObject json.RawMessage `json:"oldObject"`
		DryRun    bool            `json:"dryRun"`
	} `json:"request"`
}

// object is the manifest-like object of the tests' requests.
func object(name string, spec string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":%q,"labels":{"tier":"db"}},"spec":%s}`, name, spec))
}

// responder answers one call of a receiver.
type responder func(t *testing.T, w http.ResponseWriter, r *http.Request, rv reviewRequest)

// answer writes a response to rv with the given fields besides uid.
func answer(t *testing.T, w http.ResponseWriter, rv reviewRequest, fields map[string]any) {
	t.Helper()
	resp := map[string]any{"uid": rv.Request.UID}
	for k, v := range fields {
		resp[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(map[string]any{"apiVersion": "no8s.io/v1", "kind": "AdmissionReview", "response": resp}); err != nil {
		t.Errorf("write response: %v", err)
	}
}

func allow(fields ...any) responder {
	return func(t *testing.T, w http.ResponseWriter, _ *http.Request, rv reviewRequest) {
		m := map[string]any{"allowed": true}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fields[i].(string)] = fields[i+1]
		}
		answer(t, w, rv, m)
	}
}

func deny(message string, code int) responder {
	return func(t *testing.T, w http.ResponseWriter, _ *http.Request, rv reviewRequest) {
		answer(t, w, rv, map[string]any{"allowed": false, "status": map[string]any{"message": message, "code": code},
			"warnings": []string{"looked at it"}})
	}
}

// patchB64 allows with a JSON Patch in base64, as Kubernetes has it.
func patchB64(patch string) responder {
	return allow("patchType", "JSONPatch", "patch", base64.StdEncoding.EncodeToString([]byte(patch)))
}

// patchArray allows with a JSON Patch written as a plain array.
func patchArray(patch string) responder {
	return allow("patch", json.RawMessage(patch))
}

func status(code int, body string) responder {
	return func(_ *testing.T, w http.ResponseWriter, _ *http.Request, _ reviewRequest) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// block answers nothing until the caller gives up on the call.
func block(_ *testing.T, _ http.ResponseWriter, r *http.Request, _ reviewRequest) {
	<-r.Context().Done()
}

// requireObject allows when the request's object has want at pointer
// (a top-level key path like spec.a), and denies otherwise: a hook that
// checks what the hooks before it did.
func requireObject(path, want string) responder {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request, rv reviewRequest) {
		var doc any
		if err := json.Unmarshal(rv.Request.Object, &doc); err != nil {
			answer(t, w, rv, map[string]any{"allowed": false, "status": map[string]any{"message": "no object"}})
			return
		}
		for _, k := range strings.Split(path, ".") {
			m, _ := doc.(map[string]any)
			doc = m[k]
		}
		if doc != want {
			answer(t, w, rv, map[string]any{"allowed": false, "status": map[string]any{"message": fmt.Sprintf("%s is %v, want %s", path, doc, want)}})
			return
		}
		allow()(t, w, r, rv)
	}
}

// receiver is a hook's server: it checks the headers and the signature the
// way a hook author would, decodes the review, records it and lets respond
// answer.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []reviewRequest
	secret string
}

func newReceiver(t *testing.T, secret string, respond responder) *receiver {
	t.Helper()
	rc := &receiver{secret: secret}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
			return
		}
		switch {
		case r.Method != http.MethodPost:
			t.Errorf("method %s, want POST", r.Method)
		case r.Header.Get("Content-Type") != "application/json":
			t.Errorf("Content-Type %q", r.Header.Get("Content-Type"))
		case len(r.Header.Get("X-No8s-Delivery")) != 32:
			t.Errorf("X-No8s-Delivery %q, want 32 hex digits", r.Header.Get("X-No8s-Delivery"))
		}
		sig := r.Header.Get("X-No8s-Signature-256")
		if secret == "" {
			if sig != "" {
				t.Errorf("unsigned hook got signature %q", sig)
			}
		} else {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body)
			want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
			if !hmac.Equal([]byte(sig), []byte(want)) {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
		}
		var rv reviewRequest
		if err := json.Unmarshal(body, &rv); err != nil {
			t.Errorf("decode request: %v", err)
			return
		}
		if rv.APIVersion != "no8s.io/v1" || rv.Kind != "AdmissionReview" {
			t.Errorf("apiVersion %q kind %q", rv.APIVersion, rv.Kind)
		}
		rc.mu.Lock()
		rc.seen = append(rc.seen, rv)
		rc.mu.Unlock()
		respond(t, w, r, rv)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) calls() []reviewRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]reviewRequest(nil), rc.seen...)
}

// spec is a hook of a test case and its receiver's behaviour.
type spec struct {
	hook admission.Hook
	// secret is the key the chain signs with; receiverSecret, when set,
	// is the one the receiver checks instead.
	secret, receiverSecret string
	respond                responder
}

// setup starts the receivers and builds the chain of specs.
func setup(t *testing.T, specs []spec) (*admission.Chain, map[string]*receiver) {
	t.Helper()
	env := map[string]string{}
	var hooks []admission.Hook
	receivers := map[string]*receiver{}
	for _, s := range specs {
		h := s.hook
		checked := s.secret
		if s.receiverSecret != "" {
			checked = s.receiverSecret
		}
		rc := newReceiver(t, checked, s.respond)
		receivers[h.Name] = rc
		if h.URL == "" {
			h.URL = rc.srv.URL + "/review"
		}
		if s.secret != "" {
			h.SecretEnv = "HOOK_SECRET_" + strings.ToUpper(h.Name)
			env[h.SecretEnv] = s.secret
		}
		hooks = append(hooks, h)
	}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	c, err := admission.New(hooks, getenv, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, receivers
}

func validating(name string, opts ...func(*admission.Hook)) admission.Hook {
	h := admission.Hook{Name: name, Type: admission.Validating}
	for _, o := range opts {
		o(&h)
	}
	return h
}

func mutating(name string, opts ...func(*admission.Hook)) admission.Hook {
	h := validating(name, opts...)
	h.Type = admission.Mutating
	return h
}

func ignore(h *admission.Hook) { h.FailurePolicy = admission.Ignore }

func timeout(d time.Duration) func(*admission.Hook) {
	return func(h *admission.Hook) { h.Timeout = admission.Duration{Duration: d} }
}

func kinds(k ...string) func(*admission.Hook) { return func(h *admission.Hook) { h.Kinds = k } }

func ops(o ...admission.Operation) func(*admission.Hook) {
	return func(h *admission.Hook) { h.Operations = o }
}

var (
	createReq = admission.Request{Kind: "Database", Name: "orders", Operation: admission.Create,
		Source: "platform", Revision: "main@sha1:abc", Object: object("orders", `{"size":"large"}`)}
	updateReq = admission.Request{Kind: "Database", Name: "orders", Operation: admission.Update,
		Source: "api", Object: object("orders", `{"size":"large"}`), OldObject: object("orders", `{"size":"small"}`), DryRun: true}
	deleteReq = admission.Request{Kind: "Database", Name: "orders", Operation: admission.Delete,
		Source: "platform", OldObject: object("orders", `{"size":"small"}`)}
)

// want is the expected Result of a case.
type want struct {
	allowed bool
	// denial is "hook" for a refusal, "hook!" for a failure under Fail.
	denial string
	// message is a substring of the denial's message.
	message string
	code    int
	patched bool
	// object is the expected Result.Object as JSON; empty means the
	// request's own object, byte for byte.
	object string
	// warnings are substrings, one per expected warning, in order.
	warnings []string
	// calls is how often each hook was called; hooks left out, never.
	calls map[string]int
}

func TestReview(t *testing.T) {
	t.Parallel()
	bigBody := func(t *testing.T, w http.ResponseWriter, _ *http.Request, rv reviewRequest) {
		fmt.Fprintf(w, `{"response":{"uid":%q,"allowed":true,"warnings":["%s"]}}`, rv.Request.UID, strings.Repeat("x", admission.MaxResponseSize))
	}
	tests := []struct {
		name  string
		req   admission.Request
		specs []spec
		want  want
	}{
		{
			name:  "allowed",
			req:   createReq,
			specs: []spec{{hook: validating("policy"), respond: allow()}},
			want:  want{allowed: true, calls: map[string]int{"policy": 1}},
		},
		{
			name:  "allowed with warnings",
			req:   createReq,
			specs: []spec{{hook: validating("policy"), respond: allow("warnings", []string{"large is deprecated"})}},
			want:  want{allowed: true, warnings: []string{`admission hook "policy": large is deprecated`}, calls: map[string]int{"policy": 1}},
		},
		{
			name:  "denied with message and code",
			req:   createReq,
			specs: []spec{{hook: validating("policy"), respond: deny("size large needs approval", 422)}},
			want: want{denial: "policy", message: "size large needs approval", code: 422,
				warnings: []string{`admission hook "policy": looked at it`}, calls: map[string]int{"policy": 1}},
		},
		{
			name:  "denied with a code out of range",
			req:   createReq,
			specs: []spec{{hook: validating("policy"), respond: deny("no", 200)}},
			want:  want{denial: "policy", message: "no", warnings: []string{"looked at it"}, calls: map[string]int{"policy": 1}},
		},
		{
			name: "a denial ends the review",
			req:  createReq,
			specs: []spec{
				{hook: validating("first"), respond: deny("no", 403)},
				{hook: validating("second"), respond: allow()},
			},
			want: want{denial: "first", message: "no", code: 403, warnings: []string{"looked at it"}, calls: map[string]int{"first": 1}},
		},
		{
			name: "base64 patch applied and seen by a later validating hook",
			req:  createReq,
			// Configured before the mutating hook: mutating hooks run first
			// all the same.
			specs: []spec{
				{hook: validating("check"), respond: requireObject("metadata.labels.team", "shop")},
				{hook: mutating("label"), respond: patchB64(`[{"op":"add","path":"/metadata/labels/team","value":"shop"}]`)},
			},
			want: want{allowed: true, patched: true,
				object: `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"orders","labels":{"tier":"db","team":"shop"}},"spec":{"size":"large"}}`,
				calls:  map[string]int{"check": 1, "label": 1}},
		},
		{
			name: "plain array patches chained through mutating hooks",
			req:  updateReq,
			specs: []spec{
				{hook: mutating("first"), respond: patchArray(`[{"op":"replace","path":"/spec/size","value":"medium"}]`)},
				{hook: mutating("second"), respond: func(t *testing.T, w http.ResponseWriter, r *http.Request, rv reviewRequest) {
					// It sees the first hook's patch.
					if !strings.Contains(string(rv.Request.Object), `"medium"`) {
						deny("first patch not seen", 0)(t, w, r, rv)
						return
					}
					patchArray(`[{"op":"add","path":"/spec/replicas","value":3}]`)(t, w, r, rv)
				}},
				{hook: validating("check"), respond: requireObject("spec.size", "medium")},
			},
			want: want{allowed: true, patched: true,
				object: `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"orders","labels":{"tier":"db"}},"spec":{"size":"medium","replicas":3}}`,
				calls:  map[string]int{"first": 1, "second": 1, "check": 1}},
		},
		{
			name:  "empty patch changes nothing",
			req:   createReq,
			specs: []spec{{hook: mutating("noop"), respond: patchArray(`[]`)}},
			want:  want{allowed: true, calls: map[string]int{"noop": 1}},
		},
		{
			name:  "a refusal's patch is not applied",
			req:   createReq,
			specs: []spec{{hook: mutating("m"), respond: allow("allowed", false, "patch", json.RawMessage(`[{"op":"remove","path":"/spec"}]`))}},
			want:  want{denial: "m", calls: map[string]int{"m": 1}},
		},
		{
			name:  "validating hook returning a patch fails",
			req:   createReq,
			specs: []spec{{hook: validating("policy"), respond: patchArray(`[{"op":"remove","path":"/spec/size"}]`)}},
			want:  want{denial: "policy!", message: "a validating hook returned a patch", calls: map[string]int{"policy": 1}},
		},
		{
			name:  "validating hook returning a patch, ignored",
			req:   createReq,
			specs: []spec{{hook: validating("policy", ignore), respond: patchArray(`[{"op":"remove","path":"/spec/size"}]`)}},
			want: want{allowed: true, warnings: []string{`admission hook "policy" failed and is ignored: a validating hook returned a patch`},
				calls: map[string]int{"policy": 1}},
		},
		{
			name:  "patch changing metadata.name fails",
			req:   createReq,
			specs: []spec{{hook: mutating("rename"), respond: patchArray(`[{"op":"replace","path":"/metadata/name","value":"other"}]`)}},
			want:  want{denial: "rename!", message: "changes metadata.name", calls: map[string]int{"rename": 1}},
		},
		{
			name: "patch changing metadata.name, ignored, leaves the object as it was",
			req:  createReq,
			specs: []spec{
				{hook: mutating("rename", ignore), respond: patchArray(`[{"op":"replace","path":"/metadata/name","value":"other"}]`)},
				{hook: mutating("label"), respond: patchArray(`[{"op":"add","path":"/metadata/labels/team","value":"shop"}]`)},
			},
			want: want{allowed: true, patched: true,
				object:   `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"orders","labels":{"tier":"db","team":"shop"}},"spec":{"size":"large"}}`,
				warnings: []string{"changes metadata.name"}, calls: map[string]int{"rename": 1, "label": 1}},
		},
		{
			name:  "patch changing kind fails",
			req:   createReq,
			specs: []spec{{hook: mutating("rekind"), respond: patchB64(`[{"op":"replace","path":"/kind","value":"Queue"}]`)}},
			want:  want{denial: "rekind!", message: "changes kind", calls: map[string]int{"rekind": 1}},
		},
		{
			name:  "patch removing metadata fails",
			req:   createReq,
			specs: []spec{{hook: mutating("strip"), respond: patchArray(`[{"op":"remove","path":"/metadata"}]`)}},
			want:  want{denial: "strip!", message: "changes metadata.name", calls: map[string]int{"strip": 1}},
		},
		{
			name:  "patch replacing the whole object with a list fails",
			req:   createReq,
			specs: []spec{{hook: mutating("list"), respond: patchArray(`[{"op":"replace","path":"","value":[1]}]`)}},
			want:  want{denial: "list!", calls: map[string]int{"list": 1}},
		},
		{
			name:  "patch that does not apply fails",
			req:   createReq,
			specs: []spec{{hook: mutating("bad"), respond: patchArray(`[{"op":"remove","path":"/spec/missing"}]`)}},
			want:  want{denial: "bad!", message: "does not apply", calls: map[string]int{"bad": 1}},
		},
		{
			name:  "patch that is not base64 fails",
			req:   createReq,
			specs: []spec{{hook: mutating("bad"), respond: allow("patch", "not base64!")}},
			want:  want{denial: "bad!", message: "not base64", calls: map[string]int{"bad": 1}},
		},
		{
			name:  "patch of another type fails",
			req:   createReq,
			specs: []spec{{hook: mutating("bad"), respond: allow("patchType", "MergePatch", "patch", json.RawMessage(`[]`))}},
			want:  want{denial: "bad!", message: "only JSONPatch", calls: map[string]int{"bad": 1}},
		},
		{
			name:  "patch on delete fails",
			req:   deleteReq,
			specs: []spec{{hook: mutating("m"), respond: patchArray(`[{"op":"add","path":"/spec/x","value":1}]`)}},
			want:  want{denial: "m!", message: "on delete", calls: map[string]int{"m": 1}},
		},
		{
			name: "a mutating hook's failure ends the review before the validating hooks",
			req:  createReq,
			specs: []spec{
				{hook: validating("check"), respond: allow()},
				{hook: mutating("m"), respond: status(http.StatusInternalServerError, "boom")},
			},
			want: want{denial: "m!", message: "answered 500 Internal Server Error: boom", calls: map[string]int{"m": 1}},
		},
		{
			name: "kinds and operations choose the hooks",
			req:  updateReq,
			specs: []spec{
				{hook: validating("all"), respond: allow()},
				{hook: validating("kind", kinds("Queue", "Database")), respond: allow()},
				{hook: validating("other-kind", kinds("Queue")), respond: deny("wrong kind", 0)},
				{hook: validating("op", ops(admission.Update, admission.Delete)), respond: allow()},
				{hook: validating("other-op", ops(admission.Create)), respond: deny("wrong operation", 0)},
				{hook: mutating("both", kinds("Database"), ops(admission.Update)), respond: allow()},
			},
			want: want{allowed: true, calls: map[string]int{"all": 1, "kind": 1, "op": 1, "both": 1}},
		},
		{
			name:  "no hook matches",
			req:   deleteReq,
			specs: []spec{{hook: validating("create-only", ops(admission.Create)), respond: deny("no", 0)}},
			want:  want{allowed: true},
		},
		{
			name:  "timeout fails",
			req:   createReq,
			specs: []spec{{hook: validating("slow", timeout(100*time.Millisecond)), respond: block}},
			want:  want{denial: "slow!", message: "timed out after 100ms", calls: map[string]int{"slow": 1}},
		},
		{
			name:  "timeout ignored",
			req:   createReq,
			specs: []spec{{hook: validating("slow", timeout(100*time.Millisecond), ignore), respond: block}},
			want: want{allowed: true, warnings: []string{`admission hook "slow" failed and is ignored: timed out after 100ms`},
				calls: map[string]int{"slow": 1}},
		},
		{
			name:  "500 fails",
			req:   createReq,
			specs: []spec{{hook: validating("broken"), respond: status(http.StatusInternalServerError, "database down\n")}},
			want:  want{denial: "broken!", message: "answered 500 Internal Server Error: database down", calls: map[string]int{"broken": 1}},
		},
		{
			name:  "500 ignored",
			req:   createReq,
			specs: []spec{{hook: validating("broken", ignore), respond: status(http.StatusInternalServerError, "")}},
			want:  want{allowed: true, warnings: []string{"answered 500 Internal Server Error"}, calls: map[string]int{"broken": 1}},
		},
		{
			name:  "bad JSON fails",
			req:   createReq,
			specs: []spec{{hook: validating("garbled"), respond: status(http.StatusOK, "allowed, I guess")}},
			want:  want{denial: "garbled!", message: "not an AdmissionReview", calls: map[string]int{"garbled": 1}},
		},
		{
			name:  "bad JSON ignored",
			req:   createReq,
			specs: []spec{{hook: validating("garbled", ignore), respond: status(http.StatusOK, "{")}},
			want:  want{allowed: true, warnings: []string{"not an AdmissionReview"}, calls: map[string]int{"garbled": 1}},
		},
		{
			name:  "uid mismatch fails",
			req:   createReq,
			specs: []spec{{hook: validating("echo"), respond: status(http.StatusOK, `{"response":{"uid":"someone-else","allowed":true}}`)}},
			want:  want{denial: "echo!", message: `uid "someone-else"`, calls: map[string]int{"echo": 1}},
		},
		{
			name:  "uid mismatch ignored",
			req:   createReq,
			specs: []spec{{hook: validating("echo", ignore), respond: status(http.StatusOK, `{"response":{"uid":"","allowed":false}}`)}},
			want:  want{allowed: true, warnings: []string{`uid ""`}, calls: map[string]int{"echo": 1}},
		},
		{
			name: "missing allowed fails",
			req:  createReq,
			specs: []spec{{hook: validating("vague"), respond: func(t *testing.T, w http.ResponseWriter, _ *http.Request, rv reviewRequest) {
				answer(t, w, rv, nil)
			}}},
			want: want{denial: "vague!", message: "without response.allowed", calls: map[string]int{"vague": 1}},
		},
		{
			name:  "missing response fails",
			req:   createReq,
			specs: []spec{{hook: validating("vague"), respond: status(http.StatusOK, `{"allowed":true}`)}},
			want:  want{denial: "vague!", message: "without a response", calls: map[string]int{"vague": 1}},
		},
		{
			name:  "body over the bound fails",
			req:   createReq,
			specs: []spec{{hook: validating("chatty"), respond: bigBody}},
			want:  want{denial: "chatty!", message: "more than 1048576 bytes", calls: map[string]int{"chatty": 1}},
		},
		{
			name:  "body over the bound ignored",
			req:   createReq,
			specs: []spec{{hook: validating("chatty", ignore), respond: bigBody}},
			want:  want{allowed: true, warnings: []string{"more than 1048576 bytes"}, calls: map[string]int{"chatty": 1}},
		},
		{
			name: "redirect fails",
			req:  createReq,
			specs: []spec{{hook: validating("moved"), respond: func(_ *testing.T, w http.ResponseWriter, r *http.Request, _ reviewRequest) {
				http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			}}},
			want: want{denial: "moved!", message: "redirects are not followed", calls: map[string]int{"moved": 1}},
		},
		{
			name:  "signed request verified by the receiver",
			req:   createReq,
			specs: []spec{{hook: validating("signed"), secret: "s3cret-key", respond: allow()}},
			want:  want{allowed: true, calls: map[string]int{"signed": 1}},
		},
		{
			name:  "signature with another key refused by the receiver",
			req:   createReq,
			specs: []spec{{hook: validating("signed"), secret: "s3cret-key", receiverSecret: "other-key", respond: allow()}},
			want:  want{denial: "signed!", message: "answered 401 Unauthorized: bad signature"},
		},
		{
			name:  "denial quoting the secret is redacted",
			req:   createReq,
			specs: []spec{{hook: validating("leaky"), secret: "s3cret-key", respond: deny("your key s3cret-key is wrong", 0)}},
			want:  want{denial: "leaky", message: "your key [redacted] is wrong", warnings: []string{"looked at it"}, calls: map[string]int{"leaky": 1}},
		},
		{
			// Cut first, the message would keep a piece of the key that
			// no masking could find afterwards.
			name:  "denial cut inside the secret is redacted before it is cut",
			req:   createReq,
			specs: []spec{{hook: validating("leaky"), secret: "s3cret-key", respond: deny(strings.Repeat("x", 4096-4)+"s3cret-key", 0)}},
			want:  want{denial: "leaky", message: "x[red", warnings: []string{"looked at it"}, calls: map[string]int{"leaky": 1}},
		},
		{
			name:  "error body cut inside the secret is redacted before it is cut",
			req:   createReq,
			specs: []spec{{hook: validating("leaky"), secret: "s3cret-key", respond: status(http.StatusInternalServerError, strings.Repeat("x", 256-4)+"s3cret-key")}},
			want:  want{denial: "leaky!", message: "x[red", calls: map[string]int{"leaky": 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, receivers := setup(t, tt.specs)
			got, err := c.Review(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Review: %v", err)
			}
			checkResult(t, tt.req, got, tt.want)
			for name, rc := range receivers {
				if n := len(rc.calls()); n != tt.want.calls[name] {
					t.Errorf("hook %s called %d times, want %d", name, n, tt.want.calls[name])
				}
			}
		})
	}
}

func checkResult(t *testing.T, req admission.Request, got admission.Result, w want) {
	t.Helper()
	if got.Allowed != w.allowed {
		t.Errorf("Allowed = %v, want %v (denial: %v)", got.Allowed, w.allowed, got.Denial)
	}
	switch {
	case w.denial == "" && got.Denial != nil:
		t.Errorf("Denial = %v, want none", got.Denial)
	case w.denial != "" && got.Denial == nil:
		t.Errorf("no Denial, want one by %s", w.denial)
	case w.denial != "":
		d := got.Denial
		hook, failed := strings.CutSuffix(w.denial, "!")
		if d.Hook != hook || d.Failed != failed {
			t.Errorf("Denial by %q (failed %v), want %q (failed %v)", d.Hook, d.Failed, hook, failed)
		}
		if !strings.Contains(d.Message, w.message) {
			t.Errorf("Denial.Message = %q, want it to contain %q", d.Message, w.message)
		}
		if d.Code != w.code {
			t.Errorf("Denial.Code = %d, want %d", d.Code, w.code)
		}
		if !strings.Contains(d.Error(), fmt.Sprintf("admission hook %q", hook)) {
			t.Errorf("Denial.Error() = %q does not name the hook", d.Error())
		}
	}
	if got.Patched != w.patched {
		t.Errorf("Patched = %v, want %v", got.Patched, w.patched)
	}
	if w.object == "" {
		if !bytes.Equal(got.Object, req.Object) {
			t.Errorf("Object = %s, want the request's %s", got.Object, req.Object)
		}
	} else if !jsonEqual(t, got.Object, w.object) {
		t.Errorf("Object = %s, want %s", got.Object, w.object)
	}
	if len(got.Warnings) != len(w.warnings) {
		t.Errorf("Warnings = %q, want %d matching %q", got.Warnings, len(w.warnings), w.warnings)
		return
	}
	for i, sub := range w.warnings {
		if !strings.Contains(got.Warnings[i], sub) {
			t.Errorf("Warnings[%d] = %q, want it to contain %q", i, got.Warnings[i], sub)
		}
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Errorf("result object %s: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("test object %s: %v", want, err)
	}
	return reflect.DeepEqual(a, b)
}

// TestReviewRequest checks what a hook receives for each operation.
func TestReviewRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		req               admission.Request
		object, oldObject string // "null" or the request's
		dryRun            bool
	}{
		{name: "create", req: createReq, object: string(createReq.Object), oldObject: "null"},
		{name: "update", req: updateReq, object: string(updateReq.Object), oldObject: string(updateReq.OldObject), dryRun: true},
		{name: "delete", req: deleteReq, object: "null", oldObject: string(deleteReq.OldObject)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, receivers := setup(t, []spec{
				{hook: mutating("first"), respond: allow()},
				{hook: validating("second"), secret: "k", respond: allow()},
			})
			if _, err := c.Review(context.Background(), tt.req); err != nil {
				t.Fatalf("Review: %v", err)
			}
			first, second := receivers["first"].calls(), receivers["second"].calls()
			if len(first) != 1 || len(second) != 1 {
				t.Fatalf("calls: %d and %d, want 1 each", len(first), len(second))
			}
			r := first[0].Request
			if r.UID == "" || r.UID != second[0].Request.UID {
				t.Errorf("uids %q and %q, want one uid for the review", r.UID, second[0].Request.UID)
			}
			if r.Kind != tt.req.Kind || r.Name != tt.req.Name || r.Operation != string(tt.req.Operation) ||
				r.Source != tt.req.Source || r.Revision != tt.req.Revision || r.DryRun != tt.dryRun {
				t.Errorf("request %+v does not carry %+v", r, tt.req)
			}
			if string(r.Object) != tt.object || string(r.OldObject) != tt.oldObject {
				t.Errorf("object %s oldObject %s, want %s and %s", r.Object, r.OldObject, tt.object, tt.oldObject)
			}
		})
	}
}

func TestReviewUIDsDiffer(t *testing.T) {
	t.Parallel()
	c, receivers := setup(t, []spec{{hook: validating("policy"), respond: allow()}})
	for range 2 {
		if _, err := c.Review(context.Background(), createReq); err != nil {
			t.Fatalf("Review: %v", err)
		}
	}
	calls := receivers["policy"].calls()
	if len(calls) != 2 || calls[0].Request.UID == calls[1].Request.UID {
		t.Errorf("two reviews had requests %+v, want two different uids", calls)
	}
}

func TestReviewUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	tests := []struct {
		name   string
		policy admission.FailurePolicy
	}{{"fail", admission.Fail}, {"ignore", admission.Ignore}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := admission.New([]admission.Hook{{Name: "gone", URL: url, Type: admission.Validating, FailurePolicy: tt.policy}}, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Review(context.Background(), createReq)
			if err != nil {
				t.Fatalf("Review: %v", err)
			}
			if tt.policy == admission.Fail {
				if res.Allowed || res.Denial == nil || !res.Denial.Failed || !strings.Contains(res.Denial.Message, "cannot be reached") {
					t.Errorf("Result %+v, denial %v: want a failure of the hook", res, res.Denial)
				}
				if strings.Contains(res.Denial.Message, "POST") {
					t.Errorf("message %q repeats the method and URL", res.Denial.Message)
				}
				return
			}
			if !res.Allowed || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "cannot be reached") {
				t.Errorf("Result %+v: want allowed with a warning", res)
			}
		})
	}
}

func TestReviewContextEnded(t *testing.T) {
	t.Parallel()
	t.Run("during a call", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The receiver cancels the review's context, then waits for the
		// agent to give up on the call.
		c, receivers := setup(t, []spec{
			{hook: validating("slow", ignore), respond: func(_ *testing.T, _ http.ResponseWriter, r *http.Request, _ reviewRequest) {
				cancel()
				<-r.Context().Done()
			}},
			{hook: validating("after"), respond: allow()},
		})
		res, err := c.Review(ctx, createReq)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Review = %+v, %v; want an error wrapping context.Canceled", res, err)
		}
		if n := len(receivers["after"].calls()); n != 0 {
			t.Errorf("the hook after the cancelled call was called %d times", n)
		}
	})
	t.Run("before the review", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		shutdown := errors.New("agent stopping")
		cancel(shutdown)
		c, receivers := setup(t, []spec{{hook: validating("policy"), respond: allow()}})
		_, err := c.Review(ctx, createReq)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Review: %v; want an error wrapping context.Canceled", err)
		}
		if n := len(receivers["policy"].calls()); n != 0 {
			t.Errorf("hook called %d times", n)
		}
	})
	t.Run("deadline shorter than the hook's timeout", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		c, _ := setup(t, []spec{{hook: validating("slow"), respond: block}})
		_, err := c.Review(ctx, createReq)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Review: %v; want an error wrapping context.DeadlineExceeded", err)
		}
	})
}

func TestReviewInvalidRequest(t *testing.T) {
	t.Parallel()
	obj := object("orders", `{}`)
	tests := []struct {
		name string
		req  admission.Request
	}{
		{"no kind", admission.Request{Name: "orders", Operation: admission.Create, Object: obj}},
		{"no name", admission.Request{Kind: "Database", Operation: admission.Create, Object: obj}},
		{"unknown operation", admission.Request{Kind: "Database", Name: "orders", Operation: "patch", Object: obj}},
		{"create without object", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Create}},
		{"create with old object", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Create, Object: obj, OldObject: obj}},
		{"update without old object", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Update, Object: obj}},
		{"delete with object", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Delete, Object: obj, OldObject: obj}},
		{"object not an object", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Create, Object: json.RawMessage(`[]`)}},
		{"object not JSON", admission.Request{Kind: "Database", Name: "orders", Operation: admission.Create, Object: json.RawMessage(`{`)}},
	}
	c, receivers := setup(t, []spec{{hook: validating("policy"), respond: allow()}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, chain := range []*admission.Chain{c, nil} {
				if _, err := chain.Review(context.Background(), tt.req); !errors.Is(err, admission.ErrInvalidRequest) {
					t.Errorf("Review: %v; want ErrInvalidRequest", err)
				}
			}
		})
	}
	t.Cleanup(func() {
		if n := len(receivers["policy"].calls()); n != 0 {
			t.Errorf("hook called %d times for invalid requests", n)
		}
	})
}

func TestNilChainAllows(t *testing.T) {
	t.Parallel()
	var c *admission.Chain
	res, err := c.Review(context.Background(), createReq)
	if err != nil || !res.Allowed || !bytes.Equal(res.Object, createReq.Object) || res.Patched || res.Denial != nil {
		t.Errorf("Review = %+v, %v; want allowed, unchanged", res, err)
	}
	if c.Matches("Database", admission.Create) || c.Secrets() != nil {
		t.Error("a nil chain matches or holds secrets")
	}
}

func TestMatches(t *testing.T) {
	t.Parallel()
	c, err := admission.New([]admission.Hook{
		{Name: "a", URL: "http://127.0.0.1:1/", Type: admission.Validating, Kinds: []string{"Database"}},
		{Name: "b", URL: "http://127.0.0.1:1/", Type: admission.Mutating, Operations: []admission.Operation{admission.Delete}},
	}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind string
		op   admission.Operation
		want bool
	}{
		{"Database", admission.Create, true},
		{"Queue", admission.Create, false},
		{"Queue", admission.Delete, true},
	}
	for _, tt := range tests {
		if got := c.Matches(tt.kind, tt.op); got != tt.want {
			t.Errorf("Matches(%s, %s) = %v, want %v", tt.kind, tt.op, got, tt.want)
		}
	}
}

func TestNewSecrets(t *testing.T) {
	t.Parallel()
	hook := admission.Hook{Name: "signed", URL: "https://hooks.example.com/", Type: admission.Validating, SecretEnv: "HOOK_KEY"}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "set", env: map[string]string{"HOOK_KEY": "k3y"}},
		{name: "unset", env: nil, wantErr: "admission[0].secretEnv: environment variable HOOK_KEY is not set"},
		{name: "empty", env: map[string]string{"HOOK_KEY": ""}, wantErr: "admission[0].secretEnv: environment variable HOOK_KEY is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(name string) (string, bool) { v, ok := tt.env[name]; return v, ok }
			c, err := admission.New([]admission.Hook{hook}, getenv, nil, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if got := c.Secrets(); !reflect.DeepEqual(got, []string{"k3y"}) {
					t.Errorf("Secrets() = %q", got)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("New: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRejectsInvalidHooks(t *testing.T) {
	t.Parallel()
	_, err := admission.New([]admission.Hook{
		{Name: "ok", URL: "https://hooks.example.com/", Type: admission.Validating},
		{Name: "ok", URL: "ftp://hooks.example.com/", Type: "audit"},
	}, nil, nil, nil)
	if err == nil {
		t.Fatal("New accepted invalid hooks")
	}
	for _, want := range []string{"admission[1].url:", "admission[1].type:", "admission[1].name: duplicate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want it to report %q", err, want)
		}
	}
}

// TestLogs checks that every call is logged with its outcome, and that the
// secret is not, even when the hook quotes it.
func TestLogs(t *testing.T) {
	t.Parallel()
	const secret = "very-secret-key"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rv reviewRequest
		if err := json.NewDecoder(r.Body).Decode(&rv); err != nil {
			t.Errorf("decode: %v", err)
		}
		// A hook that echoes what it got, signature included.
		fmt.Fprintf(w, `{"response":{"uid":%q,"allowed":false,"status":{"message":"bad signature %s"}}}`,
			rv.Request.UID, r.Header.Get("X-No8s-Signature-256")+" key "+secret)
	}))
	t.Cleanup(srv.Close)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "key "+secret, http.StatusBadGateway)
	}))
	t.Cleanup(broken.Close)

	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	getenv := func(string) (string, bool) { return secret, true }
	c, err := admission.New([]admission.Hook{
		{Name: "broken", URL: broken.URL, Type: admission.Mutating, FailurePolicy: admission.Ignore, SecretEnv: "K"},
		{Name: "echo", URL: srv.URL, Type: admission.Validating, SecretEnv: "K"},
	}, getenv, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Review(context.Background(), createReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Denial == nil || strings.Contains(res.Denial.Message, secret) || strings.Contains(strings.Join(res.Warnings, " "), secret) {
		t.Errorf("Result %+v, denial %v: want a denial that does not show the secret", res, res.Denial)
	}
	out := logs.String()
	if strings.Contains(out, secret) {
		t.Errorf("logs show the secret:\n%s", out)
	}
	var records []map[string]any
	for line := range strings.Lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		records = append(records, rec)
	}
	wantOutcomes := map[string]string{"broken": "failed, ignored", "echo": "denied"}
	if len(records) != len(wantOutcomes) {
		t.Fatalf("%d log records, want %d:\n%s", len(records), len(wantOutcomes), out)
	}
	for _, rec := range records {
		hook, _ := rec["hook"].(string)
		if rec["outcome"] != wantOutcomes[hook] || rec["kind"] != "Database" || rec["name"] != "orders" ||
			rec["operation"] != "create" || rec["duration"] == nil {
			t.Errorf("log record %v", rec)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's
// read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReviewConcurrent runs reviews at once on one chain, for the race
// detector.
func TestReviewConcurrent(t *testing.T) {
	t.Parallel()
	c, receivers := setup(t, []spec{
		{hook: mutating("label"), respond: patchArray(`[{"op":"add","path":"/metadata/labels/team","value":"shop"}]`)},
		{hook: validating("check"), secret: "k", respond: requireObject("metadata.labels.team", "shop")},
	})
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := c.Review(context.Background(), createReq)
			if err != nil || !res.Allowed || !res.Patched {
				t.Errorf("Review = %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if got := len(receivers["check"].calls()); got != n {
		t.Errorf("check called %d times, want %d", got, n)
	}
}
