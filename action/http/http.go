// Package httpaction is the action plugin "http": it POSTs each request as
// JSON to a URL that the agent configuration names, and the response's
// status decides: 2xx succeeds.
//
// The package lives in action/http but is named httpaction, because a
// package named http would shadow net/http in every file that uses both.
//
// With secretEnv set, every request carries X-No8s-Signature-256, an
// HMAC-SHA256 of the body in GitHub's webhook format, so the receiver can
// check that the agent sent it. With tokenEnv set, it carries a bearer
// token. Both are read from the environment, never from the configuration,
// and never appear in an error.
package httpaction

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/redact"
)

// Plugin is the plugin's name in the agent configuration.
const Plugin = "http"

// DefaultTimeout bounds a call when the settings set no timeout.
const DefaultTimeout = 30 * time.Second

const (
	// maxBody bounds a response body: a 2xx body becomes outputs, which are
	// stored with every resource and history row.
	maxBody = 1 << 20
	// errorBody is how much of a failed response's body an error quotes.
	errorBody = 4 << 10
	// userAgent identifies the agent to the receiver.
	userAgent = "no8s-agent"
)

// The headers the plugin sets on every request.
const (
	// HeaderOperation says apply, destroy or plan.
	HeaderOperation = "X-No8s-Operation"
	// HeaderDelivery is a random id, unique per call.
	HeaderDelivery = "X-No8s-Delivery"
	// HeaderFencingToken is the request's fencing token in decimal: it
	// grows with every claim of the resource, so the receiver can refuse a
	// request whose token is lower than the highest it has seen for that
	// resource.
	HeaderFencingToken = "X-No8s-Fencing-Token"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body, keyed
	// with the secret; only sent when secretEnv is set.
	HeaderSignature = "X-No8s-Signature-256"
)

// settings are the plugin's settings in the agent configuration.
type settings struct {
	// URL receives the requests; http or https.
	URL string `json:"url"`
	// SecretEnv names the variable holding the HMAC key.
	SecretEnv string `json:"secretEnv"`
	// TokenEnv names the variable holding a bearer token.
	TokenEnv string `json:"tokenEnv"`
	// Headers are fixed, non-secret headers.
	Headers map[string]string `json:"headers"`
	// Timeout bounds one call, as a Go duration such as "30s".
	Timeout string `json:"timeout"`
	// Plan makes the action a Planner: the receiver answers operation
	// "plan" with {"changes": bool, "summary": string, "output": string}.
	Plan bool `json:"plan"`
}

// reservedHeaders are set by the plugin (or by net/http) and may not be
// configured. Authorization is among them because a secret does not belong
// in the configuration: tokenEnv is the way to send one.
var reservedHeaders = []string{
	"Authorization", "Content-Type", "Content-Length", "Host", "User-Agent",
	"Transfer-Encoding", "Connection",
}

// poster POSTs requests for Apply and Destroy. It is safe for concurrent use.
type poster struct {
	instance string
	url      string // without credentials, so messages may show it
	secret   []byte
	token    string
	masker   *redact.Masker // the secret and the token
	headers  http.Header
	timeout  time.Duration
	client   *http.Client
}

// planner is a poster that is also an action.Planner: what New returns when
// the settings say plan: true. A separate type keeps the reconciler's "is it
// a Planner?" check truthful for receivers that cannot plan.
type planner struct {
	*poster
}

var (
	_ action.Action       = (*poster)(nil)
	_ action.Timeouter    = (*poster)(nil)
	_ action.SecretHolder = (*poster)(nil)
	_ action.Planner      = planner{}
)

// New builds an http instance from its settings. It checks the URL and
// reads the secret and token now, so that a mistake stops the agent at
// start; every error names its setting.
func New(s action.Settings) (action.Action, error) {
	var cfg settings
	if err := s.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	p := &poster{instance: s.Instance, timeout: DefaultTimeout, headers: http.Header{}}
	var problems []error
	fail := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	if cfg.URL == "" {
		fail("url: required")
	} else if u, err := url.Parse(cfg.URL); err != nil {
		fail("url: %w", err)
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			fail("url: %q is not an absolute http or https URL", cfg.URL)
		case u.Host == "":
			fail("url: %q has no host", cfg.URL)
		case u.User != nil:
			// Credentials would sit in the configuration and show in errors.
			fail("url: must not contain credentials; use tokenEnv")
		case u.Fragment != "":
			fail("url: must not contain a fragment")
		default:
			p.url = u.String()
		}
	}

	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		switch {
		case err != nil:
			fail("timeout: %q is not a duration such as \"30s\" or \"2m\"", cfg.Timeout)
		case d <= 0:
			fail("timeout: must be positive, not %q", cfg.Timeout)
		default:
			p.timeout = d
		}
	}

	// The values themselves never go into a message: only the variable's
	// name does.
	if cfg.SecretEnv != "" {
		if v, ok := s.LookupEnv(cfg.SecretEnv); !ok {
			fail("secretEnv: %s is not set in the agent's environment", cfg.SecretEnv)
		} else if v == "" {
			fail("secretEnv: %s is empty", cfg.SecretEnv)
		} else {
			p.secret = []byte(v)
		}
	}
	if cfg.TokenEnv != "" {
		if v, ok := s.LookupEnv(cfg.TokenEnv); !ok {
			fail("tokenEnv: %s is not set in the agent's environment", cfg.TokenEnv)
		} else if v == "" {
			fail("tokenEnv: %s is empty", cfg.TokenEnv)
		} else if !validHeaderValue(v) {
			fail("tokenEnv: the value of %s contains characters not allowed in a header", cfg.TokenEnv)
		} else {
			p.token = v
		}
	}
	p.masker = redact.New(string(p.secret), p.token)

	for _, name := range slices.Sorted(maps.Keys(cfg.Headers)) {
		value := cfg.Headers[name]
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case !validHeaderName(name):
			fail("headers: %q is not a valid header name", name)
		case slices.Contains(reservedHeaders, canonical):
			fail("headers: %s is set by the agent", canonical)
		case strings.HasPrefix(canonical, "X-No8s-"):
			fail("headers: %s: the X-No8s- headers are set by the agent", canonical)
		case p.headers.Get(canonical) != "":
			fail("headers: %s is set twice", canonical)
		case !validHeaderValue(value):
			fail("headers: the value of %s contains characters not allowed in a header", canonical)
		default:
			p.headers.Set(canonical, value)
		}
	}

	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	p.client = &http.Client{
		Transport: transport,
		// A redirect would re-send the request, signature and token to a
		// URL that the operator did not configure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if cfg.Plan {
		return planner{p}, nil
	}
	return p, nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters, which would let a value end
// the header early or be refused by net/http with a less helpful error.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Timeout implements action.Timeouter.
func (p *poster) Timeout() time.Duration { return p.timeout }

// TakesPluginConfig implements action.PluginConfigTaker.
func (p *poster) TakesPluginConfig() string {
	return "in the request body (resource.pluginConfig)"
}

// Secrets returns the signing secret and the bearer token, those set: a
// receiver may echo either in its answer.
func (p *poster) Secrets() []string {
	var out []string
	if len(p.secret) > 0 {
		out = append(out, string(p.secret))
	}
	if p.token != "" {
		out = append(out, p.token)
	}
	return out
}

// Apply implements action.Action.
func (p *poster) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	return p.operate(ctx, action.OperationApply, req)
}

// Destroy implements action.Action.
func (p *poster) Destroy(ctx context.Context, req *action.Request) (*action.Result, error) {
	return p.operate(ctx, action.OperationDestroy, req)
}

func (p *poster) operate(ctx context.Context, op action.Operation, req *action.Request) (*action.Result, error) {
	resp, err := p.post(ctx, op, req)
	if err != nil {
		return nil, err
	}
	res := &action.Result{Message: resp.status}
	// The body is the receiver's to shape: only a JSON body is outputs, and
	// a plain "ok" is no failure.
	if body := bytes.TrimSpace(resp.body); len(body) > 0 && json.Valid(body) {
		res.Outputs = json.RawMessage(body)
	}
	return res, nil
}

// planResponse is what a receiver answers to operation "plan".
type planResponse struct {
	Changes bool   `json:"changes"`
	Summary string `json:"summary"`
	Output  string `json:"output"`
}

// Plan implements action.Planner: the receiver gets operation "plan" and
// answers with planResponse.
func (p planner) Plan(ctx context.Context, req *action.Request) (*action.Plan, error) {
	resp, err := p.post(ctx, action.OperationPlan, req)
	if err != nil {
		return nil, err
	}
	var pr planResponse
	if err := json.Unmarshal(resp.body, &pr); err != nil {
		return nil, fmt.Errorf("POST %s: plan response is not {\"changes\": bool, \"summary\": string, \"output\": string}: %w", p.url, err)
	}
	plan := &action.Plan{Changes: pr.Changes, Summary: strings.TrimSpace(pr.Summary), Output: pr.Output}
	if plan.Summary == "" {
		plan.Summary = "no changes"
		if plan.Changes {
			plan.Summary = "changes"
		}
	}
	return plan, nil
}

// response is a 2xx response.
type response struct {
	status string
	body   []byte
}

// post sends one request and returns its 2xx response; anything else is an
// error.
func (p *poster) post(ctx context.Context, op action.Operation, req *action.Request) (*response, error) {
	r := *req
	r.Operation = op
	if r.Instance == "" {
		r.Instance = p.instance
	}
	body, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}

	errTimeout := fmt.Errorf("POST %s: timed out after %s", p.url, p.timeout)
	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, errTimeout)
	defer cancel()

	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", p.url, err)
	}
	hreq.Header = p.headers.Clone()
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", userAgent)
	hreq.Header.Set(HeaderOperation, string(op))
	hreq.Header.Set(HeaderDelivery, deliveryID())
	hreq.Header.Set(HeaderFencingToken, strconv.FormatInt(r.FencingToken, 10))
	if p.secret != nil {
		mac := hmac.New(sha256.New, p.secret)
		mac.Write(body)
		hreq.Header.Set(HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	if p.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.token)
	}

	resp, err := p.client.Do(hreq)
	if err != nil {
		return nil, p.callError(ctx, errTimeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, p.callError(ctx, errTimeout, err)
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, p.redact(fmt.Errorf("POST %s: %s: redirects are not followed; configure the final URL (Location: %s)",
			p.url, resp.Status, resp.Header.Get("Location")))
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		msg := fmt.Sprintf("POST %s: %s", p.url, resp.Status)
		// Mask before cutting: a cut through a credential would leave a
		// piece that no masking afterwards can find.
		if quoted := strings.TrimSpace(string(truncate([]byte(p.mask(string(data))), errorBody))); quoted != "" {
			msg += ": " + quoted
		}
		return nil, p.redact(errors.New(msg))
	case len(data) > maxBody:
		return nil, fmt.Errorf("POST %s: %s: response body exceeds %d bytes", p.url, resp.Status, maxBody)
	}
	return &response{status: resp.Status, body: data}, nil
}

// callError describes a call that got no complete response; errTimeout is
// the cause the call's own timeout gives its context.
func (p *poster) callError(ctx context.Context, errTimeout, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errTimeout) {
		return errTimeout
	}
	// *url.Error repeats the method and URL; keep only what went wrong.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return p.redact(fmt.Errorf("POST %s: %w", p.url, err))
}

// redact replaces the secret and the token in err's message, for messages
// that quote what the receiver said: a receiver that echoes the request's
// headers back must not make the agent store its own credentials.
func (p *poster) redact(err error) error {
	msg := err.Error()
	redacted := msg
	if p.token != "" {
		redacted = strings.ReplaceAll(redacted, p.token, "[redacted]")
	}
	if len(p.secret) > 0 {
		redacted = strings.ReplaceAll(redacted, string(p.secret), "[redacted]")
	}
	if redacted == msg {
		return err
	}
	return &redactedError{msg: redacted, err: err}
}

// mask replaces the secret and the token in s, as they are and (with the
// agent's placeholder) in the other forms the agent masks them in.
func (p *poster) mask(s string) string {
	if p.token != "" {
		s = strings.ReplaceAll(s, p.token, "[redacted]")
	}
	if len(p.secret) > 0 {
		s = strings.ReplaceAll(s, string(p.secret), "[redacted]")
	}
	return p.masker.Mask(s)
}

// redactedError shows a redacted message but still matches what the
// original error wraps, such as context.Canceled.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return errors.Unwrap(e.err) }

// deliveryID returns a random id for X-No8s-Delivery, so that a receiver
// can recognize a request it has seen, as with GitHub's X-GitHub-Delivery.
func deliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
}

// truncate cuts b to at most n bytes without splitting a UTF-8 sequence.
func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
