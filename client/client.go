// Package client talks to a running agent over its HTTP API: it asks for
// syncs, approvals and reconciles, reads resources, sources and their
// history, and follows the agent's event stream. It is what the command
// line's verbs that act on a live agent use.
package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/why"
)

// Client is a client of one agent's API. It reads its own writes: every
// read asks for at least the store version the answers to its writes
// carried, which the agent (or any agent on the same store) waits for.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	// version is the highest store version a write's answer carried.
	version atomic.Int64
}

// New returns a client of the agent at server (a URL such as
// http://127.0.0.1:8080, or a bare host:port) that sends token, when not
// empty, as a bearer token.
func New(server, token string) (*Client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server %q: want an http or https URL", server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	// No client timeout: the event stream stays open for as long as the
	// caller's context allows; every request carries that context.
	return &Client{base: u, token: token, http: &http.Client{}}, nil
}

// Error is a request the API answered with an error status.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is the API's message, or the status text.
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if v := c.version.Load(); v > 0 && method == http.MethodGet {
		req.Header.Set(api.HeaderMinVersion, strconv.FormatInt(v, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if v, err := strconv.ParseInt(resp.Header.Get(api.HeaderStoreVersion), 10, 64); err == nil {
		for cur := c.version.Load(); v > cur && !c.version.CompareAndSwap(cur, v); cur = c.version.Load() {
		}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error string `json:"error"`
		}
		msg := http.StatusText(resp.StatusCode)
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &Error{Status: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// do sends a request and decodes the JSON answer into out, when not nil.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// Resource is a resource as the API shows it.
type Resource struct {
	api.Resource
}

// Agents lists the agents that share the store, with whether each is
// alive (still records its heartbeat).
func (c *Client) Agents(ctx context.Context) ([]api.Agent, error) {
	var out []api.Agent
	if err := c.do(ctx, http.MethodGet, "/api/v1/agents", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListResources lists resources, all pages, optionally of one kind and one
// source (empty: any), in every namespace the token may read.
func (c *Client) ListResources(ctx context.Context, kind, source string) ([]Resource, error) {
	rs, _, err := c.Resources(ctx, ResourceQuery{Kind: kind, Source: source})
	return rs, err
}

// ResourceQuery selects resources; empty fields select all.
type ResourceQuery struct {
	Kind, Namespace, Source string
}

// Resources lists the resources q selects, all pages, and returns the
// agent's default namespace, where resources declared without one are:
// what a reference that names no namespace means.
func (c *Client) Resources(ctx context.Context, sel ResourceQuery) ([]Resource, string, error) {
	q := url.Values{}
	if sel.Kind != "" {
		q.Set("kind", sel.Kind)
	}
	if sel.Namespace != "" {
		q.Set("namespace", sel.Namespace)
	}
	if sel.Source != "" {
		q.Set("source", sel.Source)
	}
	var all []Resource
	defaultNS := ""
	for {
		var page []Resource
		resp, err := c.request(ctx, http.MethodGet, "/api/v1/resources", q, nil)
		if err != nil {
			return nil, "", fmt.Errorf("listing resources: %w", err)
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		token := resp.Header.Get("X-Continue")
		defaultNS = cmp.Or(defaultNS, resp.Header.Get(api.HeaderDefaultNamespace))
		resp.Body.Close()
		if err != nil {
			return nil, "", fmt.Errorf("listing resources: %w", err)
		}
		all = append(all, page...)
		if token == "" {
			// An agent from before namespaces sends none: it has but the one.
			return all, cmp.Or(defaultNS, manifest.DefaultNamespace), nil
		}
		q.Set("continue", token)
	}
}

// FindResource returns the resource ref names; its kind matches any case,
// unless the token may list only some kinds: then it must be spelt as the
// kind is. A ref without a namespace names a resource in the agent's
// default namespace; a resource of a cluster-scoped kind is found whatever
// the namespace. Not found there, but in
// other namespaces, the error names them.
func (c *Client) FindResource(ctx context.Context, ref manifest.ObjectRef) (*Resource, error) {
	all, defaultNS, err := c.Resources(ctx, ResourceQuery{})
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusForbidden {
		all, defaultNS, err = c.Resources(ctx, ResourceQuery{Kind: ref.Kind})
	}
	if err != nil {
		return nil, err
	}
	return Match(all, ref, defaultNS)
}

// Match finds the resource ref names among rs, as FindResource does: in
// ref's namespace (defaultNS when it names none), or of a cluster-scoped
// kind, whatever the namespace, as kubectl -n has it. The kind spelt as
// given wins over one that matches in another case. Kinds may differ only
// in case (DataBase and Database are two types): a reference that matches
// several of them that way is refused, naming them, rather than taken for
// whichever rs holds first. Not found, the error names the namespaces in
// which a resource of that kind and name is.
func Match(rs []Resource, ref manifest.ObjectRef, defaultNS string) (*Resource, error) {
	ns := cmp.Or(ref.Namespace, defaultNS)
	var exact, folded []*Resource
	var elsewhere []string
	for i := range rs {
		r := &rs[i]
		switch {
		case r.Name != ref.Name || !strings.EqualFold(r.Kind, ref.Kind):
		case r.Namespace != ns && r.Namespace != "":
			elsewhere = append(elsewhere, r.Namespace)
		case r.Kind == ref.Kind:
			exact = append(exact, r)
		default:
			folded = append(folded, r)
		}
	}
	// In the namespace asked for before cluster-scoped.
	pick := func(c []*Resource) *Resource {
		for _, r := range c {
			if r.Namespace == ns {
				return r
			}
		}
		return c[0]
	}
	switch {
	case len(exact) > 0:
		return pick(exact), nil
	case len(folded) == 1:
		return folded[0], nil
	case len(folded) > 1:
		refs := make([]string, len(folded))
		for i, r := range folded {
			refs[i] = r.Ref().String()
		}
		return nil, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("resource %s/%s not found; kinds differ in case only: %s: spell the kind as it is",
			ref.Kind, ref.Name, strings.Join(refs, ", "))}
	}
	msg := fmt.Sprintf("resource %s/%s not found in namespace %s", ref.Kind, ref.Name, ns)
	if len(elsewhere) > 0 {
		slices.Sort(elsewhere)
		msg += fmt.Sprintf("; it is in namespace(s) %s: name one with -n NAMESPACE or as %s/NAMESPACE/%s",
			strings.Join(slices.Compact(elsewhere), ", "), ref.Kind, ref.Name)
	}
	return nil, &Error{Status: http.StatusNotFound, Message: msg}
}

// GetResource returns the resource with this id.
func (c *Client) GetResource(ctx context.Context, id int64) (*Resource, error) {
	var r Resource
	if err := c.do(ctx, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(id, 10), nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Reconcile asks for the resource to be reconciled now and returns it as
// the agent recorded the request.
func (c *Client) Reconcile(ctx context.Context, id int64) (*Resource, error) {
	var r Resource
	if err := c.do(ctx, http.MethodPost, "/api/v1/resources/"+strconv.FormatInt(id, 10)+"/reconcile", nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ResourceHistory returns the last limit reconcile attempts of a resource,
// newest first.
func (c *Client) ResourceHistory(ctx context.Context, id int64, limit int) ([]api.ReconcileRecord, error) {
	var out []api.ReconcileRecord
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(id, 10)+"/history", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListSources lists the sources.
func (c *Client) ListSources(ctx context.Context) ([]api.Source, error) {
	var out []api.Source
	if err := c.do(ctx, http.MethodGet, "/api/v1/sources", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetSource returns one source.
func (c *Client) GetSource(ctx context.Context, name string) (*api.Source, error) {
	var s api.Source
	if err := c.do(ctx, http.MethodGet, "/api/v1/sources/"+url.PathEscape(name), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SourceHistory returns the last limit sync attempts of a source, newest
// first.
func (c *Client) SourceHistory(ctx context.Context, name string, limit int) ([]api.SyncRecord, error) {
	var out []api.SyncRecord
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, http.MethodGet, "/api/v1/sources/"+url.PathEscape(name)+"/history", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Sync asks the agent to fetch and sync a source now.
func (c *Client) Sync(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/sources/"+url.PathEscape(name)+"/sync", nil, nil, nil)
}

// Approve lets a revision past the source's prune guard, or a rollback the
// source refused, through; an empty revision approves the one the source is
// stalled on.
func (c *Client) Approve(ctx context.Context, name, revision string) error {
	var body any
	if revision != "" {
		body = map[string]string{"revision": revision}
	}
	return c.do(ctx, http.MethodPost, "/api/v1/sources/"+url.PathEscape(name)+"/approve", nil, body, nil)
}

// Event is one event of the agent's stream.
type Event struct {
	// Name is api.EventResource, api.EventSource or api.EventResync.
	Name string
	// Data is the event's JSON.
	Data json.RawMessage
}

// Events opens the event stream, optionally of one kind of resource and one
// source, and calls fn for each event until fn returns false or an error,
// the stream ends, or ctx is done. The stream is open when connected is
// called, so that what happens from then on is seen.
func (c *Client) Events(ctx context.Context, kind, source string, connected func(), fn func(Event) (bool, error)) error {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	if source != "" {
		q.Set("source", source)
	}
	resp, err := c.request(ctx, http.MethodGet, "/api/v1/events", q, nil)
	if err != nil {
		return fmt.Errorf("opening the event stream: %w", err)
	}
	defer resp.Body.Close()
	if connected != nil {
		connected()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev Event
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name == "" && data.Len() == 0 {
				continue
			}
			ev.Data = append(json.RawMessage(nil), data.Bytes()...)
			more, err := fn(ev)
			if err != nil || !more {
				return err
			}
			ev, data = Event{}, bytes.Buffer{}
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the event stream: %w", err)
	}
	return errors.New("the agent closed the event stream")
}

// SuspendSource suspends (suspend true) or resumes a source and returns it
// as the agent recorded it; a suspension records reason, when not empty.
func (c *Client) SuspendSource(ctx context.Context, name string, suspend bool, reason string) (*api.Source, error) {
	var s api.Source
	if err := c.do(ctx, http.MethodPost, "/api/v1/sources/"+url.PathEscape(name)+"/"+suspendVerb(suspend), nil, suspendBody(suspend, reason), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SuspendResource suspends (suspend true) or resumes a resource and
// returns it as the agent recorded it; a suspension records reason, when
// not empty.
func (c *Client) SuspendResource(ctx context.Context, id int64, suspend bool, reason string) (*Resource, error) {
	var r Resource
	if err := c.do(ctx, http.MethodPost, "/api/v1/resources/"+strconv.FormatInt(id, 10)+"/"+suspendVerb(suspend), nil, suspendBody(suspend, reason), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// suspendBody is the body of a suspension with a reason; nil otherwise.
func suspendBody(suspend bool, reason string) any {
	if !suspend || reason == "" {
		return nil
	}
	return map[string]string{"reason": reason}
}

// ResourceWhy returns why the resource is not ready, or is suspended; nil
// when it is ready.
func (c *Client) ResourceWhy(ctx context.Context, id int64) (*why.Why, error) {
	var out struct {
		Why *why.Why `json:"why"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(id, 10)+"/why", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Why, nil
}

// SourceWhy returns why the source is not ready, or is suspended; nil when
// it is ready.
func (c *Client) SourceWhy(ctx context.Context, name string) (*why.Why, error) {
	var out struct {
		Why *why.Why `json:"why"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/sources/"+url.PathEscape(name)+"/why", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Why, nil
}

func suspendVerb(suspend bool) string {
	if suspend {
		return "suspend"
	}
	return "resume"
}
