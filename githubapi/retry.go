// Package githubapi holds what the agent's GitHub clients share on top of
// go-github: building a client for github.com or GitHub Enterprise Server,
// and calling the API the way GitHub asks integrators to, waiting out rate
// limits and retrying server errors, and telling configuration mistakes,
// which no retry mends, from the rest.
package githubapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// Bounds of the retries of one call.
const (
	// maxServerErrors is how many 5xx answers or network errors in a row
	// one call tolerates.
	maxServerErrors = 6
	// defaultRetryAfter is the wait for a secondary rate limit that names
	// none, as GitHub's documentation advises (at least a minute).
	defaultRetryAfter = time.Minute
)

// ConfigError is a failure that retrying cannot mend: bad credentials, a
// token without access, a repository or workflow that does not exist.
type ConfigError struct {
	Status int
	Err    error
	// Hint, when set, replaces the generic advice for the status.
	Hint string
}

// Error implements error.
func (e *ConfigError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = "the token in tokenEnv is not valid (expired or revoked?)"
	case http.StatusForbidden:
		hint = "the token in tokenEnv lacks a permission this call needs"
	case http.StatusNotFound:
		hint = "the repository (or the object asked for) does not exist, or the token cannot see it"
	case http.StatusUnprocessableEntity:
		hint = "GitHub refused the request as invalid"
	}
	if e.Hint != "" {
		hint = e.Hint
	}
	return fmt.Sprintf("%s: %v", hint, e.Err)
}

// Unwrap returns the GitHub error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Retrier runs API calls with retries.
type Retrier struct {
	// Backoff is the first wait after a server or network error; it doubles
	// up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// ServerErrors is how many server or network errors in a row a call
	// tolerates: 0 means a default of 6, a negative number no limit (the
	// context bounds the call).
	ServerErrors int
	// NoServerRetry returns the first server or network error as a
	// *TransientError instead of retrying: for calls that are not
	// idempotent, whose first attempt may have taken effect (a workflow
	// dispatch). Rate limits are still waited out: GitHub did nothing.
	NoServerRetry bool
}

// TransientError is a server or network error a NoServerRetry call did not
// retry: the request may or may not have taken effect.
type TransientError struct{ Err error }

// Error implements error.
func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// Call runs one API call, waiting out rate limits and retrying server and
// network errors with backoff, until ctx is done. Other errors end it: a
// *ConfigError for 401, 403, 404 and 422, which retrying cannot mend.
func (r Retrier) Call(ctx context.Context, do func() (*github.Response, error)) error {
	backoff := max(r.Backoff, time.Millisecond)
	maxBackoff := max(r.MaxBackoff, backoff)
	serverErrors := 0
	for {
		resp, err := do()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		wait, retry := retryAfter(resp, err)
		if !retry {
			var er *github.ErrorResponse
			if errors.As(err, &er) && er.Response != nil {
				switch st := er.Response.StatusCode; st {
				case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity:
					return &ConfigError{Status: st, Err: err}
				}
			}
			return err
		}
		if wait == 0 {
			if r.NoServerRetry {
				return &TransientError{Err: err}
			}
			serverErrors++
			if limit := cmp.Or(r.ServerErrors, maxServerErrors); limit > 0 && serverErrors > limit {
				return fmt.Errorf("giving up after %d failed attempts: %w", serverErrors, err)
			}
			wait = backoff
			backoff = min(backoff*2, maxBackoff)
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Sleep waits d, or until ctx is done, and then returns its cause.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// retryAfter classifies an error: retry after the given wait (rate
// limits), retry with backoff (wait 0: server and network errors), or not.
func retryAfter(resp *github.Response, err error) (time.Duration, bool) {
	var (
		primary   *github.RateLimitError
		secondary *github.AbuseRateLimitError
		er        *github.ErrorResponse
		netErr    net.Error
	)
	switch {
	case errors.As(err, &primary):
		// Wait for the window to reset; a second more for clock skew.
		return max(time.Until(primary.Rate.Reset.Time)+time.Second, time.Second), true
	case errors.As(err, &secondary):
		if secondary.RetryAfter != nil {
			return max(*secondary.RetryAfter, time.Second), true
		}
		return defaultRetryAfter, true
	case errors.As(err, &er) && er.Response != nil:
		switch st := er.Response.StatusCode; {
		case st == http.StatusTooManyRequests,
			st == http.StatusForbidden && (er.Response.Header.Get("Retry-After") != "" || er.Response.Header.Get("X-RateLimit-Remaining") == "0"):
			return retryAfterHeader(er.Response.Header), true
		case st >= 500:
			return 0, true
		}
		return 0, false
	case errors.As(err, &netErr):
		return 0, true
	}
	// Calls go-github does not check (the artifact download) report the
	// status only in the response.
	if resp != nil && resp.Response != nil {
		switch st := resp.StatusCode; {
		case st == http.StatusTooManyRequests,
			st == http.StatusForbidden && (resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""):
			return retryAfterHeader(resp.Header), true
		case st >= 500:
			return 0, true
		}
		return 0, false
	}
	// Errors without a response (a reset connection) are network errors too.
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return 0, true
	}
	return 0, false
}

// retryAfterHeader reads Retry-After (seconds or an HTTP date), or the
// rate limit's reset time; a minute when there is neither.
func retryAfterHeader(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return max(time.Duration(s)*time.Second, time.Second)
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), time.Second)
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Until(time.Unix(s, 0))+time.Second, time.Second)
		}
	}
	return defaultRetryAfter
}

// NewClient returns a client of the REST API at apiURL (default
// https://api.github.com/; for GitHub Enterprise Server https://HOST/api/v3/)
// that authenticates with token.
func NewClient(apiURL, token string) (*github.Client, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	base, err := url.Parse(apiURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http or https URL", apiURL)
	}
	if base.User != nil {
		return nil, errors.New("the API URL must not contain credentials")
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// A stalled connection must not hold a poll (or a preview) for an hour.
	transport.ResponseHeaderTimeout = 30 * time.Second
	// The token is added to every request the transport sends, redirected
	// ones included: a redirect to another host or scheme would hand it
	// (and a POST's body) to whoever the answer names, so it is not
	// followed. GitHub's own redirects (a renamed repository) stay on the
	// API's host.
	client := &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.URL.Scheme != base.Scheme || !strings.EqualFold(req.URL.Host, base.Host) {
			return fmt.Errorf("%w: the API answered with a redirect to another host, which is not followed", ErrRedirectRefused)
		}
		return nil
	}}
	c := github.NewClient(client).WithAuthToken(token)
	c.BaseURL = base
	c.UserAgent = "no8s-agent"
	return c, nil
}

// ErrRedirectRefused is returned when the API redirects a request to
// another host or scheme: the client does not follow it, so that the token
// never leaves the API's host.
var ErrRedirectRefused = errors.New("redirect refused")

// DefaultAPIURL is GitHub's REST API.
const DefaultAPIURL = "https://api.github.com/"
