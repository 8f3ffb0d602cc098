package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// exitChanges is diff's exit status when the plan changes something.
const exitChanges = 2

func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("diff", "diff [PATH] --source NAME [flags]\n\nShows what syncing PATH (default .) as source NAME would create, update and delete,\nagainst the live store, or with --base against the manifests in another folder (a\ncheckout of the base branch: no store, no credentials, for any CI). Nothing is changed.\nExit status: 0 no change, 2 changes, 1 error or a refused plan.", stdout, stderr)
	var sf storeFlags
	sf.register(fs)
	name := fs.String("source", "", "the source PATH stands for (required)")
	output := fs.String("o", "table", "output format: table, json or markdown")
	base := fs.String("base", "", "compare with the manifests in this folder instead of the store")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if *name == "" {
		return fail(stderr, "diff", errors.New("--source is required: the name of the source PATH would replace"))
	}
	if *output != "table" && *output != "json" && *output != "markdown" {
		return fail(stderr, "diff", fmt.Errorf("-o must be table, json or markdown, not %q", *output))
	}
	if len(rest) > 1 {
		return fail(stderr, "diff", fmt.Errorf("one PATH at most, got %d", len(rest)))
	}
	path := "."
	if len(rest) == 1 {
		path = rest[0]
	}
	var (
		cfg *config.Config
		st  agentStore
		err error
	)
	if *base != "" {
		cfg, st, err = baseStore(ctx, sf, *name, *base)
	} else {
		cfg, st, err = sf.open(ctx)
	}
	if err != nil {
		return fail(stderr, "diff", err)
	}
	defer st.Close()

	snap, err := folderSnapshot(path, diffTarget(cfg, *name, path).MaxFileSize)
	if err != nil {
		return fail(stderr, "diff", err)
	}
	tg := diffTarget(cfg, *name, path)
	plan, planErr := diffSyncer(cfg, st).Plan(ctx, tg, snap)
	var serr *sync.Error
	if planErr != nil && !errors.As(planErr, &serr) {
		return fail(stderr, "diff", planErr)
	}
	// The store's specs are kept as declared: secrets the configuration
	// names are masked before the plan is written.
	m := cliMasker(cfg, sf.config, stderr)
	plan = redact.MaskValues(m, plan)
	if serr != nil {
		serr = redact.MaskValues(m, serr)
		planErr = serr
	}
	if err := writePlan(stdout, *output, plan, planErr); err != nil {
		return fail(stderr, "diff", err)
	}
	switch {
	case serr != nil:
		return exitError
	case plan.Changes() > 0 || len(plan.Types) > 0:
		return exitChanges
	}
	return exitOK
}

// baseStore syncs the manifests in the folder base, as source name, into
// a throwaway embedded store, for a diff that needs no store of its own.
func baseStore(ctx context.Context, sf storeFlags, name, base string) (*config.Config, agentStore, error) {
	cfg, err := loadSettings(sf.config, config.Flags{})
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "no8s-diff-*")
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, filepath.Join(dir, "base.db"), migrateStore, 0)
	if err == nil {
		err = st.Migrate(ctx)
	}
	if err == nil {
		// As an agent records it at start: the sync refuses a default
		// namespace the store does not record.
		err = st.SetDefaultNamespace(ctx, cfg.Namespace())
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := &removeOnClose{agentStore: st, dir: dir}
	snap, err := folderSnapshot(base, diffTarget(cfg, name, base).MaxFileSize)
	if err != nil {
		cleanup.Close()
		return nil, nil, fmt.Errorf("--base: %w", err)
	}
	if _, err := diffSyncer(cfg, st).Sync(ctx, diffTarget(cfg, name, base), snap, false); err != nil {
		cleanup.Close()
		return nil, nil, fmt.Errorf("--base %s does not sync: %w", base, err)
	}
	return cfg, cleanup, nil
}

// removeOnClose is a store whose folder goes with it.
type removeOnClose struct {
	agentStore
	dir string
}

func (r *removeOnClose) Close() {
	r.agentStore.Close()
	os.RemoveAll(r.dir)
}

// folderSnapshot reads the manifests under path, files of up to
// maxFileSize bytes (zero: the default).
func folderSnapshot(path string, maxFileSize int64) (*source.Snapshot, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	files, problems, err := source.ReadTree(manifest.RootFS(root), manifest.LoadOptions{MaxFileSize: maxFileSize})
	if err != nil {
		return nil, err
	}
	return &source.Snapshot{Revision: source.DigestRevision(files, problems), Files: files, Problems: problems}, nil
}

// diffSyncer is a Syncer of st that places resources declared without a
// namespace where the agent would.
func diffSyncer(cfg *config.Config, st store.Store) *sync.Syncer {
	s := sync.New(st, nil)
	s.UseDefaultNamespace(cfg.Namespace())
	return s
}

// diffTarget is the configured source of that name, with its prune rules
// and file size limit, or a folder source with the defaults (the agent's
// maxFileSize).
func diffTarget(cfg *config.Config, name, path string) sync.Target {
	for _, s := range cfg.Sources {
		if s.Name == name {
			t := sync.Target{Name: name, Kind: store.SourceDir, Path: path, Prune: pruneRules(s.Prune), MaxFileSize: s.FileSizeLimit(),
				UnknownFields: manifest.UnknownFields(s.UnknownFields)}
			if s.Git != nil {
				t.Kind, t.URL, t.Path = store.SourceGit, s.Git.URL, s.Git.Path
			}
			return t
		}
	}
	return sync.Target{Name: name, Kind: store.SourceDir, Path: path, Prune: sync.Prune{Enabled: true}, MaxFileSize: cfg.FileSizeLimit()}
}

func writePlan(w io.Writer, format string, plan *sync.Plan, planErr error) error {
	var serr *sync.Error
	errors.As(planErr, &serr)
	switch format {
	case "markdown":
		return sync.WriteMarkdown(w, plan, planErr)
	case "json":
		out := struct {
			Plan     *sync.Plan         `json:"plan"`
			Refused  string             `json:"refused,omitempty"`
			Message  string             `json:"message,omitempty"`
			Problems []manifest.Problem `json:"problems,omitempty"`
		}{Plan: plan}
		if serr != nil {
			out.Refused, out.Message, out.Problems = serr.Reason, serr.Message, serr.Problems
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if serr != nil {
		fmt.Fprintf(w, "refused: %s: %s\n", serr.Reason, serr.Message)
		for _, p := range serr.Problems {
			fmt.Fprintln(w, "  "+p.String())
		}
	}
	if plan == nil {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANGE\tOBJECT\tFILE\tGENERATION")
	for _, t := range plan.Types {
		fmt.Fprintf(tw, "%s\tResourceType/%s %s\t%s\t-\n", t.Action, t.Name, t.Version, orDash(t.File))
	}
	for _, c := range plan.All() {
		gen := "-"
		if c.Generation > 0 {
			gen = fmt.Sprint(c.Generation)
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\n", c.Action, c.Kind, c.Name, orDash(c.Location()), gen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, plan.Summary())
	return err
}
