// Package gitlabapi holds what the agent's GitLab clients share on top of
// GitLab's Go client (gitlab.com/gitlab-org/api/client-go): building a
// client for gitlab.com or a self-managed instance, calling the REST API the
// way GitLab asks integrators to (waiting out rate limits, retrying server
// errors only where a retry cannot do a thing twice), telling configuration
// mistakes, which no retry mends, from the rest, and reading a project's
// instance and path from its Git remote URL.
package gitlabapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// DefaultBaseURL is gitlab.com, the instance a client talks to when no base
// URL is given.
const DefaultBaseURL = "https://gitlab.com"

// Timeouts of the HTTP client the API clients use.
const (
	// responseHeaderTimeout bounds the wait for an answer to start: a
	// stalled connection must not hold a poll (or a preview) for an hour.
	responseHeaderTimeout = 30 * time.Second
	// requestTimeout bounds a whole exchange, body included, for callers
	// whose context has no deadline; job logs and artifacts are the largest
	// bodies and take seconds, not minutes.
	requestTimeout = 5 * time.Minute
)

// ErrRedirectRefused is returned when the API redirects a request to another
// host or scheme: the client does not follow it, because Go's HTTP client
// forwards custom headers such as Private-Token (and a 307/308's body) to
// whatever host the redirect names.
var ErrRedirectRefused = errors.New("redirect refused")

// NewClient returns a client of the REST API of the GitLab instance at
// baseURL ("" means https://gitlab.com; a self-managed instance is
// https://HOST or https://HOST/prefix for a relative URL root) that
// authenticates with a personal, project or group access token, sent as the
// Private-Token header.
//
// The client does not retry by itself: client-go would retry a POST on a 5xx,
// and a retried pipeline creation may create two pipelines. Calls go through
// a Retrier instead, which retries only what is safe to. client-go's own
// pacing, configured once from the first answer's RateLimit-Limit, is off
// too: that figure may belong to another throttle than later calls (GitLab
// names several), and the Retrier waits out 429s by GitLab's own headers.
func NewClient(baseURL, token string) (*gitlab.Client, error) {
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("no GitLab token: set a personal, project or group access token with the api scope")
	}
	return newClient(baseURL, gitlab.AccessTokenAuthSource{Token: token})
}

// NewTriggerClient returns a client for calls authenticated by a pipeline
// trigger token, which travels in the request body
// (PipelineTriggers.RunPipelineTrigger): it sends no authentication header,
// so that no other credential rides along. baseURL is as for NewClient.
func NewTriggerClient(baseURL string) (*gitlab.Client, error) {
	return newClient(baseURL, gitlab.Unauthenticated{})
}

func newClient(baseURL string, auth gitlab.AuthSource) (*gitlab.Client, error) {
	base, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = responseHeaderTimeout
	hc := &http.Client{Transport: transport, Timeout: requestTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.URL.Scheme != base.Scheme || !strings.EqualFold(req.URL.Host, base.Host) {
			return fmt.Errorf("%w: the GitLab API answered with a redirect to another host (%s), which is not followed", ErrRedirectRefused, req.URL.Host)
		}
		return nil
	}}
	c, err := gitlab.NewAuthSourceClient(auth,
		gitlab.WithBaseURL(base.String()),
		gitlab.WithHTTPClient(hc),
		gitlab.WithoutRetries(),
		gitlab.WithCustomLimiter(noLimit{}),
		gitlab.WithUserAgent("no8s-agent"),
	)
	if err != nil {
		return nil, fmt.Errorf("GitLab client for %s: %w", base, err)
	}
	return c, nil
}

// noLimit is a client-side rate limiter that never waits.
type noLimit struct{}

// Wait returns at once, or the context's error if it is already done.
func (noLimit) Wait(ctx context.Context) error { return ctx.Err() }

// ParseBaseURL checks a GitLab instance's URL and returns it without a
// trailing slash or the /api/v4 suffix; "" means DefaultBaseURL. It must be
// https: the token travels in every request. http is accepted for loopback
// hosts only (tests, a local instance), where the token crosses no network.
func ParseBaseURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		raw = DefaultBaseURL
	}
	// Errors quote the URL without what may be credentials, whichever
	// check fails first: a token pasted into a malformed URL is still a
	// token.
	shown := redactRemote(raw)
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Error repeats the whole URL; what went wrong is within it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GitLab URL %q: %w", shown, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("GitLab URL %q: want https://HOST or https://HOST/PREFIX", shown)
	case u.User != nil:
		return nil, fmt.Errorf("GitLab URL %q: must not contain credentials; the token is given apart", redact(u))
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("GitLab URL %q: must not have a query or fragment", shown)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return nil, fmt.Errorf("GitLab URL %q: use https; http is accepted only for localhost, where the token crosses no network", shown)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/api/v4")
	u.RawPath = ""
	return u, nil
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
