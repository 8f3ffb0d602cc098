package admission

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// APIVersion and ReviewKind are the apiVersion and kind of the reviews the
// agent sends.
const (
	APIVersion = "no8s.io/v1"
	ReviewKind = "AdmissionReview"
)

// MaxResponseSize bounds a hook's response body; a longer one is a failure
// of the hook.
const MaxResponseSize = 1 << 20

// The headers the agent sets on every call, besides Content-Type and
// User-Agent.
const (
	// HeaderDelivery is a random id, unique per call.
	HeaderDelivery = "X-No8s-Delivery"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body,
	// keyed with the hook's secret; only sent when secretEnv is set.
	HeaderSignature = "X-No8s-Signature-256"
)

const (
	userAgent = "no8s-agent"
	// What is kept of a hook's words: they reach people through the API,
	// the store and pull-request comments, and a hook should not be able to
	// flood those.
	maxMessage     = 4 << 10
	maxWarnings    = 16
	maxWarning     = 512
	maxErrorQuoted = 256
)

// ErrInvalidRequest is wrapped by the error Review returns for a Request
// that does not hold what its operation needs.
var ErrInvalidRequest = errors.New("invalid admission request")

// Request is one change for the hooks to review.
type Request struct {
	// Kind, Namespace and Name identify the resource; Namespace is empty
	// for a resource of a cluster-scoped kind.
	Kind      string
	Namespace string
	Name      string
	// Operation is create, update or delete.
	Operation Operation
	// Source is the source that declares the resource, or "api".
	Source string
	// Revision is the source's revision being synced, if any.
	Revision string
	// Object is the resource after the change, as a JSON object written
	// like a manifest (apiVersion, kind, metadata, spec). Required for
	// create and update, empty for delete.
	Object json.RawMessage
	// OldObject is the resource before the change. Required for update and
	// delete, empty for create.
	OldObject json.RawMessage
	// DryRun is true when the change is only previewed and will not be
	// made, as for a pull request.
	DryRun bool
}

// Result is what the hooks decided.
type Result struct {
	// Allowed is true when no hook refused the change.
	Allowed bool
	// Object is the object to accept: Request.Object as the mutating hooks
	// patched it, or Request.Object itself when none did. Nil on delete.
	// When the change is refused it is the object as far as it was patched.
	Object json.RawMessage
	// Patched is true when a mutating hook's patch was applied.
	Patched bool
	// Denial says which hook refused the change and why; nil when Allowed.
	Denial *Denial
	// Warnings are the hooks' warnings, each prefixed with its hook, and the
	// failures of hooks whose failurePolicy is Ignore, for the person who
	// made the change.
	Warnings []string
}

// Denial is a refusal of a change by a hook. It is an error, so that a
// caller may return it as one and find it again with errors.As.
type Denial struct {
	// Hook is the name of the hook that refused.
	Hook string
	// Message is the hook's reason, or for a hook that failed, what went
	// wrong; it may be empty when the hook gave no reason.
	Message string
	// Code is the HTTP status the hook asked for (400 to 599), or 0.
	Code int
	// Failed is true when the hook did not refuse but failed, and its
	// failurePolicy is Fail: the same change may pass once the hook works.
	Failed bool
}

// Error says which hook refused and why.
func (d *Denial) Error() string {
	switch {
	case d.Failed:
		return fmt.Sprintf("admission hook %q failed: %s", d.Hook, d.Message)
	case d.Message == "":
		return fmt.Sprintf("admission hook %q denied the request", d.Hook)
	}
	return fmt.Sprintf("admission hook %q denied the request: %s", d.Hook, d.Message)
}

// Chain calls the configured hooks. It is safe for concurrent use. A nil
// *Chain has no hooks and allows every change.
type Chain struct {
	hooks  []*hook
	logger *slog.Logger
	client *http.Client
}

// hook is a configured hook with its secret read.
type hook struct {
	Hook
	secret []byte
}

// New checks the hooks and reads their secrets through getenv (nil means
// os.LookupEnv), so that a mistake stops the agent at start: a secretEnv
// that is unset or empty is an error. logger receives a record of every
// call (nil discards them). client makes the calls (nil means a client of
// its own); New copies it and stops it following redirects, which would
// send the signed request to a URL that the configuration does not name.
func New(hooks []Hook, getenv func(string) (string, bool), logger *slog.Logger, client *http.Client) (*Chain, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if client != nil {
		c = *client
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	var problems []error
	for _, p := range CheckHooks(hooks) {
		problems = append(problems, errors.New(p.String()))
	}
	chain := &Chain{logger: logger, client: &c}
	for i, h := range hooks {
		hk := &hook{Hook: h}
		// Only the variable's name goes into a message, never its value.
		if h.SecretEnv != "" {
			key := fmt.Sprintf("%s[%d].secretEnv", Section, i)
			switch v, ok := getenv(h.SecretEnv); {
			case !ok:
				problems = append(problems, fmt.Errorf("%s: environment variable %s is not set", key, h.SecretEnv))
			case v == "":
				problems = append(problems, fmt.Errorf("%s: environment variable %s is empty", key, h.SecretEnv))
			default:
				hk.secret = []byte(v)
			}
		}
		hk.Kinds = append([]string(nil), h.Kinds...)
		hk.Operations = append([]Operation(nil), h.Operations...)
		chain.hooks = append(chain.hooks, hk)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return chain, nil
}

// Matches reports whether any hook reviews op on resources of kind, so that
// a caller may skip building the objects of a Request no hook will see.
func (c *Chain) Matches(kind string, op Operation) bool {
	if c == nil {
		return false
	}
	for _, h := range c.hooks {
		if h.matches(kind, op) {
			return true
		}
	}
	return false
}

// Secrets returns the hooks' signing keys, for redaction: a hook may echo
// one in its answer.
func (c *Chain) Secrets() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, h := range c.hooks {
		if len(h.secret) > 0 {
			out = append(out, string(h.secret))
		}
	}
	return out
}

// Review asks the hooks that match req's kind and operation about the
// change: the mutating hooks first, then the validating ones, each in the
// order configured (see the package documentation). A hook that refuses or
// fails under failurePolicy Fail ends the review with a Denial.
//
// The error is for faults of the caller only: a Request that does not hold
// what its operation needs (ErrInvalidRequest), or ctx ending, which the
// error wraps. A hook that fails is not an error: its failurePolicy decides.
func (c *Chain) Review(ctx context.Context, req Request) (Result, error) {
	if err := req.check(); err != nil {
		return Result{}, err
	}
	res := Result{Allowed: true, Object: req.Object}
	if !c.Matches(req.Kind, req.Operation) {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("admission review of %s/%s: %w", req.Kind, req.Name, err)
	}
	uid := newUID()
	for _, phase := range []HookType{Mutating, Validating} {
		for _, h := range c.hooks {
			if h.Type != phase || !h.matches(req.Kind, req.Operation) {
				continue
			}
			if err := c.run(ctx, h, &req, uid, &res); err != nil {
				return Result{}, err
			}
			if !res.Allowed {
				return res, nil
			}
		}
	}
	return res, nil
}

// check reports what req lacks for its operation.
func (req *Request) check() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s/%s: %s", ErrInvalidRequest, req.Kind, req.Name, fmt.Sprintf(format, args...))
	}
	if req.Kind == "" || req.Name == "" {
		return invalid("kind and name are required")
	}
	wantObject, wantOld := false, false
	switch req.Operation {
	case Create:
		wantObject = true
	case Update:
		wantObject, wantOld = true, true
	case Delete:
		wantOld = true
	default:
		return invalid("unknown operation %q", req.Operation)
	}
	for _, f := range []struct {
		name  string
		value json.RawMessage
		want  bool
	}{{"object", req.Object, wantObject}, {"oldObject", req.OldObject, wantOld}} {
		switch {
		case f.want && len(f.value) == 0:
			return invalid("%s needs %s", req.Operation, f.name)
		case !f.want && len(f.value) > 0:
			return invalid("%s takes no %s", req.Operation, f.name)
		case f.want && !isObject(f.value):
			return invalid("%s is not a JSON object", f.name)
		}
	}
	return nil
}

// isObject reports whether raw is one valid JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// wireRequest is the request of an AdmissionReview, as hooks receive it.
type wireRequest struct {
	UID       string          `json:"uid"`
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	Operation Operation       `json:"operation"`
	Source    string          `json:"source"`
	Revision  string          `json:"revision"`
	Object    json.RawMessage `json:"object"`
	OldObject json.RawMessage `json:"oldObject"`
	DryRun    bool            `json:"dryRun"`
}

// wireResponse is the response of an AdmissionReview, as hooks answer it.
// Allowed is a pointer so that a hook that leaves it out fails instead of
// refusing every change without a word.
type wireResponse struct {
	UID     string `json:"uid"`
	Allowed *bool  `json:"allowed"`
	Status  *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"status"`
	PatchType string          `json:"patchType"`
	Patch     json.RawMessage `json:"patch"`
	Warnings  []string        `json:"warnings"`
}

// review is an AdmissionReview, both ways.
type review struct {
	APIVersion string        `json:"apiVersion,omitempty"`
	Kind       string        `json:"kind,omitempty"`
	Request    *wireRequest  `json:"request,omitempty"`
	Response   *wireResponse `json:"response,omitempty"`
}

// verdict is a hook's answer, checked.
type verdict struct {
	allowed  bool
	message  string
	code     int
	object   json.RawMessage // the patched object; nil without a patch
	warnings []string
}

// failure is a hook's fault: it could not be asked, or its answer does not
// hold. Its message is said to people, so it names no URL, which may hold a
// token in its path.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

func failed(format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...)}
}

// run calls one hook about the object in res and records its verdict in
// res. It returns an error only when ctx has ended.
func (c *Chain) run(ctx context.Context, h *hook, req *Request, uid string, res *Result) error {
	wr := wireRequest{
		UID: uid, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name, Operation: req.Operation,
		Source: req.Source, Revision: req.Revision, OldObject: req.OldObject, DryRun: req.DryRun,
	}
	if req.Operation != Delete {
		wr.Object = res.Object
	}
	body, err := json.Marshal(review{APIVersion: APIVersion, Kind: ReviewKind, Request: &wr})
	if err != nil {
		return fmt.Errorf("admission review of %s/%s: encode request: %w", req.Kind, req.Name, err)
	}

	start := time.Now()
	v, err := c.ask(ctx, h, body, uid, req.Operation, res.Object)
	elapsed := time.Since(start)
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The hook may have been fine: the caller gave up on it.
		err = fmt.Errorf("admission review of %s/%s: hook %q: %w", req.Kind, req.Name, h.Name, ctxErr)
		if cause := context.Cause(ctx); cause != ctxErr {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		c.log(ctx, slog.LevelInfo, h, req, "cancelled", elapsed, slog.Any("error", err))
		return err
	}

	var f *failure
	switch {
	case errors.As(err, &f) && h.failurePolicy() == Ignore:
		res.Warnings = append(res.Warnings, fmt.Sprintf("admission hook %q failed and is ignored: %s", h.Name, f.msg))
		c.log(ctx, slog.LevelWarn, h, req, "failed, ignored", elapsed, slog.String("error", f.msg))
	case errors.As(err, &f):
		res.Allowed = false
		res.Denial = &Denial{Hook: h.Name, Message: f.msg, Failed: true}
		c.log(ctx, slog.LevelWarn, h, req, "failed, denied", elapsed, slog.String("error", f.msg))
	case err != nil:
		// ask returns failures only; anything else is a mistake here.
		return fmt.Errorf("admission review of %s/%s: hook %q: %w", req.Kind, req.Name, h.Name, err)
	default:
		for _, w := range v.warnings {
			res.Warnings = append(res.Warnings, fmt.Sprintf("admission hook %q: %s", h.Name, w))
		}
		switch {
		case !v.allowed:
			res.Allowed = false
			res.Denial = &Denial{Hook: h.Name, Message: v.message, Code: v.code}
			c.log(ctx, slog.LevelInfo, h, req, "denied", elapsed, slog.String("message", v.message))
		case v.object != nil:
			res.Object, res.Patched = v.object, true
			c.log(ctx, slog.LevelInfo, h, req, "patched", elapsed)
		default:
			// Every call is logged, an allowing one too: the log is the
			// record of what each hook let through.
			c.log(ctx, slog.LevelInfo, h, req, "allowed", elapsed)
		}
	}
	return nil
}

// log records one call of a hook: the hook, the resource, the outcome and
// whether it let the change through, and how long it took; never the
// object, which may hold what should not be logged, nor the hook's key.
func (c *Chain) log(ctx context.Context, level slog.Level, h *hook, req *Request, outcome string, d time.Duration, extra ...slog.Attr) {
	allowed := outcome == "allowed" || outcome == "patched" || outcome == "failed, ignored"
	attrs := append([]slog.Attr{
		slog.String("hook", h.Name),
		slog.String("type", string(h.Type)),
		slog.String("kind", req.Kind),
		slog.String("namespace", req.Namespace),
		slog.String("name", req.Name),
		slog.String("operation", string(req.Operation)),
		slog.Bool("dryRun", req.DryRun),
		slog.String("outcome", outcome),
		slog.Bool("allowed", allowed),
		slog.Duration("duration", d),
	}, extra...)
	c.logger.LogAttrs(ctx, level, "admission hook called", attrs...)
}

// ask POSTs body to the hook and checks its answer; object is the object
// the request holds, to which a patch applies. Every error is a *failure,
// unless ctx ended.
func (c *Chain) ask(ctx context.Context, h *hook, body []byte, uid string, op Operation, object json.RawMessage) (verdict, error) {
	data, err := c.post(ctx, h, body)
	if err != nil {
		return verdict{}, err
	}
	var rv review
	if err := json.Unmarshal(data, &rv); err != nil {
		return verdict{}, failed("answered with a body that is not an AdmissionReview: %s", h.redact(err.Error()))
	}
	r := rv.Response
	switch {
	case r == nil:
		return verdict{}, failed("answered without a response")
	case r.UID != uid:
		return verdict{}, failed("answered with uid %q, not the request's %q", clip(h.redact(r.UID), maxErrorQuoted), uid)
	case r.Allowed == nil:
		return verdict{}, failed("answered without response.allowed")
	}

	v := verdict{allowed: *r.Allowed}
	if r.Status != nil {
		v.message = clip(h.redact(strings.TrimSpace(r.Status.Message)), maxMessage)
		if r.Status.Code >= 400 && r.Status.Code <= 599 {
			v.code = r.Status.Code
		}
	}
	for i, w := range r.Warnings {
		if i == maxWarnings {
			v.warnings = append(v.warnings, fmt.Sprintf("%d more warnings left out", len(r.Warnings)-maxWarnings))
			break
		}
		v.warnings = append(v.warnings, clip(h.redact(w), maxWarning))
	}
	if !v.allowed {
		// A refusal's patch would be applied to nothing.
		return v, nil
	}

	patch, err := decodePatch(r.PatchType, r.Patch)
	if err != nil {
		return verdict{}, err
	}
	if len(patch) == 0 {
		return v, nil
	}
	switch {
	case h.Type != Mutating:
		return verdict{}, failed("a validating hook returned a patch")
	case op == Delete:
		return verdict{}, failed("returned a patch on delete, where there is no object to patch")
	}
	v.object, err = applyPatch(patch, object)
	if err != nil {
		return verdict{}, err
	}
	return v, nil
}

// post sends the request and returns the 2xx response's body.
func (c *Chain) post(ctx context.Context, h *hook, body []byte) ([]byte, error) {
	errTimeout := failed("timed out after %s", h.timeout())
	ctx, cancel := context.WithTimeoutCause(ctx, h.timeout(), errTimeout)
	defer cancel()

	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, failed("cannot build the request: %s", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", userAgent)
	hreq.Header.Set(HeaderDelivery, randomHex(16))
	if h.secret != nil {
		mac := hmac.New(sha256.New, h.secret)
		mac.Write(body)
		hreq.Header.Set(HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}

	resp, err := c.client.Do(hreq)
	if err != nil {
		return nil, callFailure(ctx, errTimeout, err, h)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return nil, callFailure(ctx, errTimeout, err, h)
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, failed("answered %s: redirects are not followed; configure the final URL", resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		msg := "answered " + resp.Status
		// Redacted before it is cut: a cut through the key would leave a
		// piece that no masking afterwards could find.
		if quoted := strings.TrimSpace(clip(h.redact(string(data)), maxErrorQuoted)); quoted != "" {
			msg += ": " + quoted
		}
		return nil, &failure{msg: msg}
	case len(data) > MaxResponseSize:
		return nil, failed("answered with more than %d bytes", MaxResponseSize)
	}
	return data, nil
}

// callFailure describes a call that got no complete response; errTimeout
// is the cause the call's own timeout gives its context.
func callFailure(ctx context.Context, errTimeout, err error, h *hook) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errTimeout) {
		return errTimeout
	}
	// *url.Error repeats the method and the URL; keep only what went wrong.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return failed("cannot be reached: %s", h.redact(err.Error()))
}

// decodePatch returns the JSON Patch of a response: base64 in a string, or
// a plain array. No patch, null and [] are all none.
func decodePatch(patchType string, raw json.RawMessage) (jsonpatch.Patch, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if patchType != "" && patchType != "JSONPatch" {
		return nil, failed("answered with patchType %q; only JSONPatch is supported", clip(patchType, maxErrorQuoted))
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, failed("answered with a patch that is not a string: %s", err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, failed("answered with a patch that is not base64: %s", err)
		}
		raw = bytes.TrimSpace(b)
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, failed("answered with a patch that is not a JSON Patch (a list of operations)")
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, failed("answered with a patch that is not a JSON Patch: %s", err)
	}
	return patch, nil
}

// patchOptions apply patches as RFC 6902 has them: no negative indexes. The
// copy limit stops a short patch from copying a large part of the object
// many times over.
var patchOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	o.AccumulatedCopySizeLimit = MaxResponseSize
	o.EscapeHTML = false
	return o
}()

// applyPatch applies patch to object, and checks that the result is still
// an object of the same kind and name.
func applyPatch(patch jsonpatch.Patch, object json.RawMessage) (json.RawMessage, error) {
	out, err := patch.ApplyWithOptions(object, patchOptions)
	if err != nil {
		return nil, failed("answered with a patch that does not apply: %s", err)
	}
	before, err := identity(object)
	if err != nil {
		// Request.check made sure object is one.
		return nil, failed("cannot read the object: %s", err)
	}
	after, err := identity(out)
	switch {
	case err != nil:
		return nil, failed("answered with a patch that leaves no JSON object: %s", err)
	case !reflect.DeepEqual(before.Kind, after.Kind):
		return nil, failed("answered with a patch that changes kind, which hooks may not change")
	case !reflect.DeepEqual(before.Name, after.Name):
		return nil, failed("answered with a patch that changes metadata.name, which hooks may not change")
	case !reflect.DeepEqual(before.Namespace, after.Namespace):
		return nil, failed("answered with a patch that changes metadata.namespace, which hooks may not change")
	}
	return out, nil
}

// ident is what a patch may not change.
type ident struct {
	Kind      any
	Name      any
	Namespace any
}

// identity reads the kind and metadata.name of a JSON object, either of
// which may be missing or of any type.
func identity(doc []byte) (ident, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return ident{}, err
	}
	if top == nil {
		return ident{}, errors.New("null is not an object")
	}
	var id ident
	if k, ok := top["kind"]; ok {
		if err := json.Unmarshal(k, &id.Kind); err != nil {
			return ident{}, err
		}
	}
	// A metadata that is no object has no name.
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["metadata"], &meta) == nil {
		if n, ok := meta["name"]; ok {
			if err := json.Unmarshal(n, &id.Name); err != nil {
				return ident{}, err
			}
		}
		if n, ok := meta["namespace"]; ok {
			if err := json.Unmarshal(n, &id.Namespace); err != nil {
				return ident{}, err
			}
		}
	}
	return id, nil
}

// redact replaces the hook's secret in text from the hook: a hook that
// echoes the request's headers must not make the agent show its key.
func (h *hook) redact(s string) string {
	if len(h.secret) == 0 {
		return s
	}
	return strings.ReplaceAll(s, string(h.secret), "[redacted]")
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// newUID returns a random version 4 UUID, the form of Kubernetes' uids.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
