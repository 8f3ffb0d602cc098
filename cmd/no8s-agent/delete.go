package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/sync"
)

// runDelete removes what agents no longer serve: for now, orphaned sources.
func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("delete", "delete source NAME --mode forget|prune [--approve] [flags]\n\n"+
		"Removes a source that no agent's configuration lists any more (phase orphaned), working on\n"+
		"the store directly. --mode forget drops its resources, resource types and the source from\n"+
		"the store and destroys nothing (another source may then declare them); --mode prune asks\n"+
		"the agents to destroy its resources through their actions, and the source goes once they\n"+
		"are gone. Pruning destroys everything the source declared, so, like a sync that would\n"+
		"empty a source, it needs --approve, and the configuration's admission hooks review\n"+
		"each destruction: a prune without --config is refused unless --no-admission says to do it\n"+
		"unreviewed. History stays either way.", stdout, stderr)
	var sf storeFlags
	sf.register(fs)
	mode := fs.String("mode", "", "forget (remove from the store, destroy nothing) or prune (destroy through the actions)")
	approve := fs.Bool("approve", false, "with --mode prune: approve destroying every resource of the source")
	noAdmission := fs.Bool("no-admission", false, "with --mode prune and no --config: prune without admission hooks reviewing it")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 2 || rest[0] != "source" {
		return fail(stderr, "delete", errors.New("say what to delete: delete source NAME --mode forget|prune"))
	}
	name, m := rest[1], sync.RemoveMode(*mode)
	if m != sync.ModeForget && m != sync.ModePrune {
		return fail(stderr, "delete", fmt.Errorf("--mode %q: want forget (destroy nothing) or prune (destroy its resources)", *mode))
	}
	if m == sync.ModePrune && *approve && sf.config == "" && !*noAdmission {
		// The agents' admission hooks are in their configuration: without
		// it, nothing would review the destructions (without --approve,
		// none is made). Pruning unreviewed is for whoever says so.
		return fail(stderr, "delete", errors.New("--mode prune without --config: the admission hooks of the agents' configuration would not review the destructions; "+
			"pass the agents' --config, or --no-admission to prune without hooks"))
	}
	cfg, st, err := sf.open(ctx)
	if err != nil {
		return fail(stderr, "delete", err)
	}
	defer st.Close()
	for _, s := range cfg.Sources {
		if s.Name == name {
			return fail(stderr, "delete", fmt.Errorf("source %q is in the configuration %s: remove it there and restart the agents first", name, sf.config))
		}
	}
	syncer := sync.New(st, slog.New(slog.DiscardHandler))
	if len(cfg.Admission) > 0 && m == sync.ModePrune {
		// A prune destroys: the configured admission hooks review it, as
		// they would through an agent's API. Their calls are logged here.
		// A forget destroys nothing, and needs neither them nor their keys.
		hooks, err := admission.New(cfg.Admission, os.LookupEnv, slog.New(slog.NewTextHandler(stderr, nil)), nil)
		if err != nil {
			return fail(stderr, "delete", err)
		}
		syncer.UseAdmission(hooks)
	}
	removal, err := syncer.RemoveSource(ctx, name, m, *approve)
	if err != nil {
		return fail(stderr, "delete", err)
	}
	switch {
	case removal.Removed:
		fmt.Fprintf(stdout, "source %s removed: %d resource(s) forgotten, nothing destroyed\n", name, removal.Forgotten)
	default:
		fmt.Fprintf(stdout, "source %s is pruning: %d resource(s) to destroy (%d forgotten, annotated no8s.io/prune: disabled); it goes once they are gone\n",
			name, removal.Destroying, removal.Forgotten)
	}
	return exitOK
}
