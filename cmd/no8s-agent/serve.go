package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/dashboard"
	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/priority"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/webhook"
	"github.com/no8s/no8s-agent/why"
)

// httpServer is the agent's HTTP side, listening before anything else
// starts so that a taken address fails the start, not a goroutine.
type httpServer struct {
	ln  net.Listener
	srv *api.Server
	log *slog.Logger
	// readsOpen: no read token and no scoped tokens, so anyone who
	// reaches the address reads everything.
	readsOpen bool
}

// newHTTPServer listens on cfg.Listen and builds the API with the
// dashboard, metrics and webhook receiver, and the runtime's profiles when
// profiling is on.
func newHTTPServer(cfg *config.Config, st store.Store, syncer *sync.Syncer, runner *sync.Runner, previewer *preview.Previewer,
	instances *action.Instances, m *metrics.Metrics, masker *redact.Masker, work *priority.Work, released func(), log *slog.Logger, profiling bool) (*httpServer, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	hook := webhook.NewGitHub(webhook.GitHubOptions{
		Secret:        cfg.Webhooks.GitHubSecret(),
		Sources:       webhookSources(cfg),
		Trigger:       func(name string) bool { return runner.Trigger(name, false) },
		OnDelivery:    m.ObserveWebhook,
		OnPullRequest: previewer.OnPullRequest,
		Logger:        log,
	})
	// Merge Request Hooks are acted on when a source previews GitLab merge
	// requests; otherwise they are acknowledged and ignored.
	var onMergeRequest func(context.Context, *gitlab.MergeEvent) error
	if gitlabPreviews(cfg) {
		onMergeRequest = previewer.OnMergeRequest
	}
	gitlabHook := webhook.NewGitLab(webhook.GitLabOptions{
		Token:          cfg.Webhooks.GitLabToken(),
		SigningKey:     cfg.Webhooks.GitLabSigningKey(),
		Sources:        webhookSources(cfg),
		Trigger:        func(name string) bool { return runner.Trigger(name, false) },
		OnDelivery:     m.ObserveWebhook,
		OnMergeRequest: onMergeRequest,
		Logger:         log,
	})
	// The dashboard offers the actions the caller's grants allow, which
	// the API tells from the request's token. srv is set before anything
	// is served.
	var srv *api.Server
	dashOpts := dashboard.Options{Logger: log, Version: versionString(), EventsURL: api.EventsPath, Caller: api.Caller,
		Masker: masker, SourceLinks: dashboardSourceLinks(cfg),
		Allows: func(r *http.Request, verb string, o dashboard.Object) bool {
			return srv.Allows(r, verb, o.Kind, o.Namespace, o.Source, o.Action)
		},
		// The explanations come from the API's read model.
		Why: func(r *http.Request, id int64) (*why.Why, error) { return srv.ResourceWhy(r, id) }}
	srv = api.New(api.Options{
		Store: st, Syncer: syncer, Sources: runner, Actions: instances,
		ReadToken: cfg.API.ReadToken(), WriteToken: cfg.API.WriteToken(), Tokens: apiTokens(cfg.API), OIDC: identityProvider(cfg.API),
		Login:         dashboardLogin(cfg, dashOpts),
		GitHubWebhook: hook,
		GitLabWebhook: gitlabHook,
		// A resource written through the API may be as large as a
		// manifest file, in its JSON.
		MaxBodyBytes: api.BodyLimit(cfg.FileSizeLimit()),
		Metrics:      m.Handler(),
		Dashboard:    dashboard.New(st, dashOpts),
		Instrument:   m.InstrumentHandler,
		Logger:       log,
		Wrap:         masker.HTTP,
		MaskEvent:    masker.MaskJSON,
		MaskCutTail:  func(s string) string { return masker.MaskCut(s, false, true) },
		Profiling:    profiling,
		AllowedHosts: cfg.API.AllowedHosts,
		Released:     released,
		Work:         work,
		// The configuration's -1 (never) is the API's negative pace.
		ReadsWhileWorking: float64(cfg.API.ReadsWhileWorking),
	})
	return &httpServer{ln: ln, srv: srv, log: log, readsOpen: cfg.API.ReadToken() == "" && len(apiTokens(cfg.API)) == 0}, nil
}

// Addr is the address the server listens on (the port chosen when the
// configuration said :0).
func (h *httpServer) Addr() string { return h.ln.Addr().String() }

// serve runs until ctx is done.
func (h *httpServer) serve(ctx context.Context) {
	h.log.Info("serving HTTP", "addr", h.Addr(), "dashboard", "http://"+h.Addr()+"/")
	if h.readsOpen && !loopback(h.ln.Addr()) {
		h.log.Warn("reads are open to anyone who reaches this address: set api.readTokenEnv or api.tokens, or listen on 127.0.0.1",
			"addr", h.Addr())
	}
	if err := h.srv.Serve(ctx, h.ln); err != nil {
		h.log.Error("HTTP server stopped", "error", err)
	}
}

// loopback says whether addr is reachable from this host only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// webhookSources lists the Git sources a push may concern, with the ref
// each follows as the Git source resolves it.
func webhookSources(cfg *config.Config) []webhook.Source {
	var out []webhook.Source
	for _, s := range cfg.Sources {
		if s.Git == nil {
			continue
		}
		g := s.Git
		ws := webhook.Source{Name: s.Name, URL: g.URL, Branch: g.Branch, Tag: g.Tag, SemVer: g.SemVer, Commit: g.Commit}
		if ws.Branch == "" && ws.Tag == "" && ws.SemVer == "" && ws.Commit == "" {
			ws.Branch = git.DefaultBranch
		}
		out = append(out, ws)
	}
	return out
}

// apiTokens are the configuration's scoped tokens as the API takes them.
func apiTokens(c config.API) []api.Token {
	out := make([]api.Token, len(c.Tokens))
	for i, t := range c.Tokens {
		out[i] = api.Token{Name: t.Name, Value: t.Value()}
		for _, g := range t.Allow {
			out[i].Grants = append(out[i].Grants, api.Grant{Verbs: g.Verbs, Kinds: g.Kinds, Sources: g.Sources, Actions: g.Actions,
				Namespaces: g.Namespaces})
		}
	}
	return out
}

// identityProvider is the OpenID Connect issuer the configuration names, or nil.
func identityProvider(c config.API) api.IdentityProvider {
	if c.OIDC == nil {
		return nil
	}
	return oidc.New(c.OIDC.IssuerURL, c.OIDC.Audience, c.OIDC.Claim)
}

// httpsURL reports whether raw is an https URL. The scheme is compared as
// URLs have it, case-insensitively: the configuration takes HTTPS://, and
// cookies of such a sign-in must still be Secure and __Host-.
func httpsURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https"
}

// dashboardLogin is the dashboard's sign-in the configuration asks for, or
// nil.
func dashboardLogin(cfg *config.Config, dashOpts dashboard.Options) *api.Login {
	o := cfg.Dashboard.OIDC
	if o == nil || cfg.API.OIDC == nil {
		return nil
	}
	clientID := cmp.Or(o.ClientID, cfg.API.OIDC.Audience)
	pages := dashboard.SignInPages(dashOpts)
	var key []byte
	if k := cfg.Dashboard.SessionKey(); k != "" {
		key = []byte(k)
	}
	return &api.Login{
		Provider: oidc.NewLogin(oidc.LoginConfig{IssuerURL: cfg.API.OIDC.IssuerURL, Claim: cfg.API.OIDC.Claim, ClientID: clientID,
			ClientSecret: o.ClientSecret(), RedirectURL: o.RedirectURL, Scopes: o.Scopes}),
		SessionKey: key,
		SessionTTL: cfg.Dashboard.SessionLifetime(),
		Secure:     httpsURL(o.RedirectURL),
		Page: func(w http.ResponseWriter, r *http.Request, p api.SignInPage) {
			pages(w, r, dashboard.SignIn{Status: p.Status, Message: p.Message, SignInURL: p.SignInURL, TokenURL: p.TokenURL})
		},
	}
}
