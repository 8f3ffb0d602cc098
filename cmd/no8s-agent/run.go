package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/cmd/no8s-agent/internal/memprofile"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/priority"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/retention"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/webhook"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", "run [--config FILE] [flags]\n\nRuns the agent: fetches every source, syncs it into the database, reconciles every\nresource through its action, and keeps at it until SIGINT or SIGTERM. Flags override the configuration file.", stdout, stderr)
	configPath := fs.String("config", "", "agent configuration file (YAML)")
	var flags config.Flags
	var sources repeated
	fs.StringVar(&flags.Database, "database", "", "a postgres:// URL, or the embedded store's file (overrides database; default "+DefaultDatabase+")")
	fs.StringVar(&flags.Listen, "listen", "", "address to listen on (overrides listen)")
	fs.Var(&sources, "source", "a folder, or a Git URL with #branch:path; repeatable (replaces the configured sources)")
	fs.StringVar(&flags.LogFormat, "log-format", "", "text or json (overrides logFormat)")
	fs.StringVar(&flags.LogLevel, "log-level", "", "debug, info, warn or error (overrides logLevel)")
	cacheDir := fs.String("cache-dir", ".no8s/cache", "folder for Git clones, one sub-folder per source")
	profiling := fs.Bool("pprof", false, "serve the Go runtime's profiles under /debug/pprof/ on the listen address (behind the read token when one is set)")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		return fail(stderr, "run", fmt.Errorf("unexpected argument %q", rest[0]))
	}
	if err := hideFromActions(); err != nil {
		return fail(stderr, "run", fmt.Errorf("keeping the environment from actions: %w", err))
	}
	if *profiling {
		// Heap samples are taken only when profiles are served.
		memprofile.Enable()
	}
	flags.Sources = sources
	// The configuration is checked whole before anything starts.
	cfg, err := loadConfig(*configPath, flags)
	if err != nil {
		return fail(stderr, "run", err)
	}
	// Without sources, only the API can declare resources: that needs its
	// write token.
	if len(cfg.Sources) == 0 && cfg.API.WriteToken() == "" && len(cfg.API.Tokens) == 0 {
		return fail(stderr, "run", errors.New("no sources: list them in --config or give --source (or set api.writeTokenEnv to declare resources through the API only)"))
	}
	masker, log := maskSecrets(cfg, newLogger(stderr, cfg.LogFormat, cfg.LogLevel))

	instances, err := actionInstances(cfg, log)
	if err != nil {
		return fail(stderr, "run", err)
	}
	addActionSecrets(masker, instances, log)
	var jobs []sync.Job
	// The store is opened after the sources are built; signature policies
	// ask it for the last applied revision when they fetch.
	var opened store.Store
	applied := appliedRevision(func() store.Store { return opened })
	for _, s := range cfg.Sources {
		src, err := newSource(s, *cacheDir, applied, log)
		if err != nil {
			return fail(stderr, "run", fmt.Errorf("source %s: %w", s.Name, err))
		}
		jobs = append(jobs, sync.Job{Source: src, Target: target(s, src), Interval: s.Interval.Duration, Suspend: s.Suspend})
	}
	st, err := openStore(ctx, cfg.Database, runStore, cfg.Reconcile.Workers+poolHeadroom)
	if err != nil {
		return fail(stderr, "run", err)
	}
	st = maskStore(st, masker)
	defer st.Close()
	opened = st
	logStore(log, cfg.Database)
	if err := st.Migrate(ctx); err != nil {
		return fail(stderr, "run", err)
	}
	// Before anything is synced: a default namespace that moved while
	// resources are in the old one would destroy and create them again.
	if err := st.SetDefaultNamespace(ctx, cfg.Namespace()); err != nil {
		return fail(stderr, "run", err)
	}
	b := currentBuild()
	mopts := metrics.Options{Logger: log, Version: b.Version, Commit: b.Commit, Bindings: bindings(ctx, st, log),
		ResourceSeriesLimit: cfg.Metrics.ResourceSeriesLimit}
	if mopts.ResourceSeriesLimit == 0 {
		mopts.ResourceSeriesLimit = -1 // none, as the configuration says
	}
	for _, s := range cfg.Sources {
		mopts.Sources = append(mopts.Sources, s.Name)
	}
	mopts.Webhooks = map[string][]string{}
	if cfg.Webhooks.GitHubSecret() != "" {
		maps.Copy(mopts.Webhooks, webhook.Outcomes(metrics.UnknownEvent))
	}
	if cfg.Webhooks.GitLabToken() != "" || cfg.Webhooks.GitLabSigningKey() != "" {
		// Its labels are gitlab_*: no series is shared with GitHub's.
		maps.Copy(mopts.Webhooks, webhook.GitLabOutcomes())
	}
	mopts.NotificationProviders = cfg.Notifications.ProviderNames()
	m := metrics.New(st, mopts)
	// The agent's own work in flight, which the API's reads give way to.
	work := &priority.Work{}
	controller := reconcile.New(st, instances, reconcile.Options{
		Work:           work,
		Workers:        cfg.Reconcile.Workers,
		LeaseDuration:  cfg.Reconcile.LeaseDuration.Duration,
		BackoffInitial: cfg.Reconcile.Backoff.Initial.Duration,
		BackoffMax:     cfg.Reconcile.Backoff.Max.Duration,
		Logger:         log,
		Version:        b.Version,
		// The embedded store writes in-process: gathering work into fewer
		// statements saves it little, and waiting leaves it idle.
		NoGather: !isPostgres(cfg.Database),
		OnAttempt: func(a reconcile.Attempt) {
			m.ObserveReconcile(a.Record.Kind, a.Action, string(a.Record.Trigger), a.Record.Success, a.Record.Duration, a.Drift)
		},
	})
	syncer := sync.New(st, log)
	syncer.CountWork(work)
	syncer.UseAPIUnknownFields(manifest.UnknownFields(cfg.API.UnknownFields))
	syncer.UseDefaultNamespace(cfg.Namespace())
	hooks, err := admission.New(cfg.Admission, os.LookupEnv, log, nil)
	if err != nil {
		return fail(stderr, "run", err)
	}
	if len(cfg.Admission) > 0 {
		syncer.UseAdmission(hooks)
	}
	// Before the first syncs, so that a source renamed in the configuration
	// is told that its resources belong to an orphan it may forget.
	configured := make([]string, len(cfg.Sources))
	for i, s := range cfg.Sources {
		configured[i] = s.Name
	}
	if _, err := syncer.MarkOrphans(ctx, configured); err != nil {
		return fail(stderr, "run", err)
	}
	runner := sync.NewRunner(syncer, jobs, log)
	runner.OnSync = func(source string, res *sync.Result, err error, took time.Duration) {
		m.ObserveSync(source, syncResult(res, err), took)
	}
	previewSrcs, err := previewSources(cfg, jobs, *cacheDir, applied, log)
	if err != nil {
		return fail(stderr, "run", err)
	}
	previewer := preview.New(preview.Options{Store: st, Syncer: syncer, Actions: instances, Sources: previewSrcs, Logger: log, Masker: masker})
	trims := make(trimNudges, 1)
	httpSrv, err := newHTTPServer(cfg, st, syncer, runner, previewer, instances, m, masker, work, trims.nudge, log, *profiling)
	if err != nil {
		return fail(stderr, "run", err)
	}
	dispatcher, err := newDispatcher(cfg, st, masker, m, controller.AgentID(), log)
	if err != nil {
		return fail(stderr, "run", err)
	}
	log.Info("agent started", "agent", controller.AgentID(), "sources", len(jobs), "actions", instances.Names(),
		"workers", cfg.Reconcile.Workers, "version", versionString())
	// Sync, reconcile and HTTP run side by side and stop together: on SIGINT or
	// SIGTERM the controller cancels its running actions and hands their
	// resources back before run returns.
	var wg gosync.WaitGroup
	wg.Go(func() { runner.Run(ctx) })
	wg.Go(func() { httpSrv.serve(ctx) })
	wg.Go(func() { previewer.Run(ctx) })
	wg.Go(func() { trimWhenIdle(ctx, trimEvery, trims, log) })
	history := retention.Trimmer{Store: st, Logger: log,
		Limits: store.HistoryLimits{MaxPerResource: cfg.History.MaxPerResource, MaxAge: cfg.History.MaxAge.Duration}}
	wg.Go(func() { history.Run(ctx) })
	wg.Go(func() { dispatcher.Run(ctx) })
	wg.Go(func() {
		if err := controller.Run(ctx); err != nil {
			log.Error("reconciler stopped", "error", err)
		}
	})
	wg.Wait()
	log.Info("agent stopped")
	return exitOK
}

// poolHeadroom is how many PostgreSQL connections the agent keeps beside
// one per worker: for claims, syncs, the API's reads and the metrics.
const poolHeadroom = 6

// syncResult classifies a sync attempt for metrics.
func syncResult(res *sync.Result, err error) string {
	var refused *sync.Error
	switch {
	case err == nil && res.Suspended:
		return metrics.SyncSuspended
	case errors.As(err, &refused), err == nil && res.Refused:
		// A revision refused before, and not judged again because nothing
		// that could change the outcome changed, is still refused.
		return metrics.SyncRefused
	case err != nil:
		return metrics.SyncFailed
	case res.Skipped:
		return metrics.SyncUnchanged
	}
	return metrics.SyncApplied
}

// actionInstances builds the configured action instances with the plugins
// compiled into the agent.
func actionInstances(cfg *config.Config, log *slog.Logger) (*action.Instances, error) {
	specs := make(map[string]action.Spec, len(cfg.Actions))
	for name, a := range cfg.Actions {
		specs[name] = action.Spec{Plugin: a.Plugin, Config: a.Config}
	}
	return builtin.Registry().Build(specs, os.LookupEnv, log)
}

// bindings lists the kinds and action instances of the stored resource
// types, whose reconcile counters start at 0; types that come later start
// at their first reconcile.
func bindings(ctx context.Context, st store.Store, log *slog.Logger) []metrics.Binding {
	types, err := st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		log.Warn("cannot list resource types for the metrics", "error", err)
		return nil
	}
	seen := map[metrics.Binding]bool{}
	var out []metrics.Binding
	for _, t := range types {
		b := metrics.Binding{Kind: t.Name, Action: t.Action}
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out
}
