package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// storeFlags are the flags of commands that read the store: --database, or
// --config for the database it names.
type storeFlags struct {
	database, config string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.database, "database", "", "a postgres:// URL, or the embedded store's file (default "+DefaultDatabase+")")
	fs.StringVar(&f.config, "config", "", "agent configuration file; its database is used unless --database is given")
}

// loadConfig reads the configuration file, if any, and applies flag
// overrides, for the agent: every secret it names must be set.
func loadConfig(path string, flags config.Flags) (*config.Config, error) {
	return readConfig(path, flags, config.Load)
}

// loadSettings reads the configuration file, if any, and applies flag
// overrides, for a command that reads the store or talks to an agent: a
// secret whose variable is not set is left empty (config.LoadSettings), as
// such a command needs the database and listen settings, not the agent's
// credentials.
func loadSettings(path string, flags config.Flags) (*config.Config, error) {
	return readConfig(path, flags, config.LoadSettings)
}

func readConfig(path string, flags config.Flags, load func(string, func(string) (string, bool)) (*config.Config, error)) (*config.Config, error) {
	cfg := &config.Config{}
	if path != "" {
		var err error
		if cfg, err = load(path, os.LookupEnv); err != nil {
			return nil, err
		}
	}
	if err := cfg.ApplyFlags(flags, os.LookupEnv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// open returns the configuration (possibly empty) and an open store whose
// schema is current.
func (f *storeFlags) open(ctx context.Context) (*config.Config, agentStore, error) {
	cfg, err := loadSettings(f.config, config.Flags{Database: f.database})
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, cfg.Database, readStore, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Ping(ctx); err != nil {
		st.Close()
		return nil, nil, err
	}
	return cfg, st, nil
}

// newLogger builds the agent's logger from the configured format and level.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// target turns a configured source into what sync records and guards.
func target(s config.Source, src source.Source) sync.Target {
	t := sync.Target{Name: s.Name, Kind: store.SourceKind(src.Kind()), Path: src.Path(), Prune: pruneRules(s.Prune),
		MaxFileSize:   s.FileSizeLimit(),
		UnknownFields: manifest.UnknownFields(s.UnknownFields)}
	if src.Kind() == source.KindGit {
		t.URL = src.Location()
	} else {
		t.Path = src.Location()
	}
	return t
}

// pruneRules turns configured prune settings into the sync's.
func pruneRules(p config.Prune) sync.Prune {
	out := sync.Prune{Enabled: p.IsEnabled(), AllowEmpty: p.AllowEmpty}
	if m := p.MaxDeletes; m.Set {
		out.MaxDeletes = &sync.MaxDeletes{Value: m.Count}
		if m.Percent > 0 {
			out.MaxDeletes = &sync.MaxDeletes{Value: m.Percent, Percent: true}
		}
	}
	return out
}

// newSource builds the source a configuration describes. Git clones live in
// cacheDir/<name>.
func newSource(s config.Source, cacheDir string, applied appliedFunc, log *slog.Logger) (source.Source, error) {
	if s.Git == nil {
		return dir.New(dir.Config{Name: s.Name, Path: s.Dir, Logger: log, Load: loadOptions(s)})
	}
	g := s.Git
	verify, err := gitVerify(s.Name, g.Verify, applied)
	if err != nil {
		return nil, err
	}
	return git.New(git.Config{
		Name: s.Name, URL: g.URL, Path: g.Path, Timeout: g.Timeout.Duration, Logger: log,
		Ref:      git.Ref{Branch: g.Branch, Tag: g.Tag, SemVer: g.SemVer, Commit: g.Commit},
		CacheDir: filepath.Join(cacheDir, s.Name),
		Auth: git.Auth{Username: g.Auth.Username(), Password: g.Auth.Password(), Token: g.Auth.Token(),
			SSHKeyFile: g.Auth.SSHKeyFile, KnownHostsFile: g.Auth.KnownHostsFile, SSHKeyPassphrase: g.Auth.SSHKeyPassphrase()},
		Verify: verify,
		Load:   loadOptions(s),
	})
}

// loadOptions are how a source's files are read: up to its maxFileSize.
func loadOptions(s config.Source) manifest.LoadOptions {
	return manifest.LoadOptions{MaxFileSize: s.FileSizeLimit()}
}

// appliedFunc returns the revision last applied from a source.
type appliedFunc func(ctx context.Context, source string) (manifest.Revision, error)

// appliedRevision reads the last applied revision from the store that
// opened returns.
func appliedRevision(opened func() store.Store) appliedFunc {
	return func(ctx context.Context, name string) (manifest.Revision, error) {
		st := opened()
		if st == nil {
			return "", errors.New("the store is not open yet")
		}
		src, err := st.GetSource(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return src.LastAppliedRevision, nil
	}
}

// gitVerify builds a source's signature policy; nil when it has none.
func gitVerify(name string, v *config.GitVerify, applied appliedFunc) (*git.Verify, error) {
	if v == nil {
		return nil, nil
	}
	verifier, err := commitsig.New(commitsig.Config{OpenPGPKeysFile: v.OpenPGPKeysFile, SSHAllowedSignersFile: v.SSHAllowedSignersFile})
	if err != nil {
		return nil, fmt.Errorf("git.verify: %w", err)
	}
	return &git.Verify{Mode: v.Mode, Rollback: v.Rollback, Verifier: verifier, Applied: func(ctx context.Context) (manifest.Revision, error) {
		return applied(ctx, name)
	}}, nil
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	return exitError
}
