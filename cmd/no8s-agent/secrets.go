package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store/masked"
)

// Every secret value the agent knows is masked in what it writes and
// serves, at three doors that nothing passes around:
//   - the store (store/masked): every text a write carries — status
//     messages, conditions, outputs, reconcile and sync history, source
//     messages and errors, progress — is masked before it is kept, so the
//     API, the dashboard, the event stream, `get` and every other agent on
//     the database only ever read masked text;
//   - the HTTP server (api.Options.Wrap): every response is masked as it
//     is written, error bodies and rows kept before masking included;
//   - the logger (redact.Masker.Handler): every record.
//
// Pull-request comments and statuses, and notifications, mask what they
// show before it is rendered (redact.MaskValues), then the rendered text
// again, before they are sent. So do the commands that print what the
// store holds, given --config (cliMasker): specs are stored as declared.

// maskSecrets returns a masker of every secret value the configuration
// names, and log wrapped to mask them. A value too short to be masked
// safely is only warned about, naming its setting.
func maskSecrets(cfg *config.Config, log *slog.Logger) (*redact.Masker, *slog.Logger) {
	m := redact.New()
	log = slog.New(m.Handler(log.Handler()))
	for _, s := range cfg.Secrets() {
		if redact.TooShort(s.Value()) {
			warnShortSecret(log, s.Setting, s.Env)
			continue
		}
		m.Add(s.Value())
	}
	return m, log
}

// cliMasker returns a masker of the secret values the configuration names
// and its action instances read, for a command that prints what the store
// holds: specs, labels and annotations are kept as declared, so a secret
// quoted in a manifest is masked only where the values are known. Without
// a configuration file it masks nothing. A secret whose variable is not set
// here, or actions that cannot be built here (a command path relative to
// another working directory), are values not known: a warning on stderr
// says so.
func cliMasker(cfg *config.Config, configPath string, stderr io.Writer) *redact.Masker {
	m := redact.New()
	if configPath == "" {
		return m
	}
	if missing := cfg.MissingSecrets(); len(missing) > 0 {
		var names []string
		for _, s := range missing {
			names = append(names, s.Env)
		}
		fmt.Fprintf(stderr, "warning: %s not set here: the values of the configuration's secrets are masked only where they are known\n",
			strings.Join(slices.Compact(names), ", "))
	}
	for _, s := range cfg.Secrets() {
		m.Add(s.Value())
	}
	instances, err := actionInstances(cfg, nil)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the actions cannot be built here, so the values they read from the environment (passEnv) are not masked in this output; run where the agent runs: %v\n", err)
		return m
	}
	for _, values := range instances.Secrets() {
		m.Add(values...)
	}
	return m
}

// addActionSecrets adds the secret values the action instances read.
func addActionSecrets(m *redact.Masker, instances *action.Instances, log *slog.Logger) {
	secrets := instances.Secrets()
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		for _, v := range secrets[name] {
			if v == "" {
				continue // nothing to hide, nothing to warn about
			}
			if redact.TooShort(v) {
				warnShortSecret(log, "actions."+name, "")
				continue
			}
			m.Add(v)
		}
	}
}

func warnShortSecret(log *slog.Logger, setting, env string) {
	args := []any{"setting", setting, "min_length", redact.MinLength}
	if env != "" {
		args = append(args, "env", env)
	}
	log.Warn("a secret value is too short to be masked: it may show in status, history and logs; use a longer one", args...)
}

// maskedAgentStore is an agentStore whose writes mask secret values.
type maskedAgentStore struct {
	*masked.Store
	migrate func(context.Context) error
}

// maskStore wraps st so that every text written through it is masked.
func maskStore(st agentStore, m *redact.Masker) agentStore {
	return maskedAgentStore{Store: masked.New(st, m), migrate: st.Migrate}
}

// Migrate migrates the wrapped store.
func (s maskedAgentStore) Migrate(ctx context.Context) error { return s.migrate(ctx) }
