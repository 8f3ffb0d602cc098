package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/sync"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", "run [--config FILE] [flags]\n\nRuns the agent: fetches every source, syncs it into the database, and keeps it in sync\nuntil SIGINT or SIGTERM. Flags override the configuration file.", stderr)
	configPath := fs.String("config", "", "agent configuration file (YAML)")
	var flags config.Flags
	var sources repeated
	fs.StringVar(&flags.Database, "database", "", "PostgreSQL URL (overrides database)")
	fs.StringVar(&flags.Listen, "listen", "", "address to listen on (overrides listen)")
	fs.Var(&sources, "source", "a folder, or a Git URL with #branch:path; repeatable (replaces the configured sources)")
	fs.StringVar(&flags.LogFormat, "log-format", "", "text or json (overrides logFormat)")
	fs.StringVar(&flags.LogLevel, "log-level", "", "debug, info, warn or error (overrides logLevel)")
	cacheDir := fs.String("cache-dir", ".no8s/cache", "folder for Git clones, one sub-folder per source")
	rest, code := parseFlags(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		return fail(stderr, "run", fmt.Errorf("unexpected argument %q", rest[0]))
	}
	flags.Sources = sources
	// The configuration is checked whole before anything starts.
	cfg, err := loadConfig(*configPath, flags)
	if err != nil {
		return fail(stderr, "run", err)
	}
	if len(cfg.Sources) == 0 {
		return fail(stderr, "run", errors.New("no sources: list them in --config or give --source"))
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)

	var jobs []sync.Job
	for _, s := range cfg.Sources {
		src, err := newSource(s, *cacheDir, log)
		if err != nil {
			return fail(stderr, "run", fmt.Errorf("source %s: %w", s.Name, err))
		}
		jobs = append(jobs, sync.Job{Source: src, Target: target(s, src), Interval: s.Interval.Duration})
	}
	st, err := openStore(ctx, cfg.Database)
	if err != nil {
		return fail(stderr, "run", err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fail(stderr, "run", err)
	}
	runner := sync.NewRunner(sync.New(st, log), jobs, log)
	log.Info("agent started", "sources", len(jobs), "version", versionString())
	runner.Run(ctx)
	log.Info("agent stopped")
	return exitOK
}
