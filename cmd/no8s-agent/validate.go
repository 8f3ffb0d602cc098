package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", "validate [flags] [PATH]\n\nChecks every manifest under PATH (a folder or one file, default .) without a database.\nWith --base, the transition rules of CEL (oldSelf) compare each resource with the one of the\nsame kind and name in the base folder (a checkout of the base branch).\nExit status: 0 valid, 1 invalid or error.", stdout, stderr)
	output := fs.String("o", "text", "output format: text or json")
	maxSize := fs.Int64("max-file-size", manifest.DefaultMaxFileSize, "largest manifest file in bytes")
	base := fs.String("base", "", "a folder with the manifests as they were: transition rules compare with them")
	unknownFields := fs.String("unknown-fields", "strict", "fields a spec's schema does not declare: strict refuses them, warn keeps them, prune drops them (a source's unknownFields)")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "validate: -o must be text or json, not %q\n", *output)
		return exitError
	}
	if len(rest) > 1 {
		fmt.Fprintf(stderr, "validate: one PATH at most, got %d\n", len(rest))
		return exitError
	}
	path := "."
	if len(rest) == 1 {
		path = rest[0]
	}
	unknown, err := manifest.ParseUnknownFields(*unknownFields)
	if err != nil {
		fmt.Fprintf(stderr, "validate: --unknown-fields: %v\n", err)
		return exitError
	}

	if os.Getenv("GOGC") == "" {
		// A one-shot command whose live data is the tree it reads: collecting
		// four times less often cut a 10,000-file check by a fifth, for a
		// peak about 30 MB higher. GOGC, when set, is left to decide.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	opts := manifest.LoadOptions{MaxFileSize: *maxSize, SizeSetting: "--max-file-size"}
	checked, err := validatePath(path, opts, unknown)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitError
	}
	set, problems := checked.set, checked.problems
	if *base != "" && len(problems) == 0 {
		old, err := validatePath(*base, opts, unknown)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "validate: --base: %v\n", err)
			return exitError
		case len(old.problems) > 0:
			fmt.Fprintf(stderr, "validate: --base %s is not valid itself; first: %s\n", *base, old.problems[0])
			return exitError
		}
		problems = transitionProblems(checked, old.set)
	}
	if set != nil {
		// Warnings refuse nothing: on stderr, apart from the problems.
		for _, w := range append(set.Warnings, set.UnknownFields...) {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}
	if *output == "json" {
		if problems == nil {
			problems = []manifest.Problem{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(problems); err != nil {
			fmt.Fprintf(stderr, "validate: %v\n", err)
			return exitError
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(stdout, p.String())
		}
	}
	if len(problems) > 0 {
		if *output == "text" {
			fmt.Fprintf(stderr, "%d problem(s) found\n", len(problems))
		}
		return exitError
	}
	if *output == "text" {
		fmt.Fprintf(stderr, "valid: %d resource type(s), %d resource(s)\n", len(set.Types), len(set.Resources))
	}
	return exitOK
}

// checkedPath is what validatePath found: the set (nil when invalid), the
// problems and warnings, which name files as the user wrote PATH, and the
// files read, whose paths are relative to dir.
type checkedPath struct {
	set      *manifest.Set
	problems []manifest.Problem
	files    []manifest.File
	dir      string
}

// validatePath reads and validates a folder or a single file, with the same
// rules a source applies (.no8signore included). Problems name files as the
// user wrote PATH, so that "file:line" opens in an editor.
// unknown says what to do with the fields a spec's schema does not declare.
func validatePath(path string, opts manifest.LoadOptions, unknown manifest.UnknownFields) (*checkedPath, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	if !info.IsDir() {
		// One file: read its folder with everything else ignored, so that it
		// gets the same size, symlink and decoding rules as a whole tree.
		var file string
		dir, file = filepath.Split(path)
		if dir == "" {
			dir = "."
		}
		opts.Ignore = func(p string, isDir bool) bool { return isDir || p != file }
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	files, problems, err := source.ReadTree(manifest.RootFS(root), opts)
	if err != nil {
		return nil, err
	}
	decode := opts.Decode
	if decode.MaxExpandedSize <= 0 {
		// A document may expand to what a file may hold, as in a source.
		decode.MaxExpandedSize = opts.MaxFileSize
	}
	v := manifest.Validator{Decode: decode, UnknownFields: unknown}
	set, err := v.ValidateFiles(files, nil)
	var verr *manifest.ValidationError
	if errors.As(err, &verr) {
		problems = append(problems, verr.Problems...)
	} else if err != nil {
		return nil, err
	}
	manifest.SortProblems(problems)
	fromDir(dir, problems)
	if set != nil {
		fromDir(dir, set.Warnings)
		fromDir(dir, set.UnknownFields)
	}
	return &checkedPath{set: set, problems: problems, files: files, dir: dir}, nil
}

// fromDir names the files of problems found under dir as the user wrote
// dir.
func fromDir(dir string, problems []manifest.Problem) {
	for i := range problems {
		if problems[i].File != "" {
			problems[i].File = filepath.ToSlash(filepath.Join(dir, problems[i].File))
		}
	}
}

// transitionProblems checks the transition rules of each resource of the
// checked set against the resource of the same kind and name in base, as a
// sync checks them against the store. Problems are at the field's line and
// name files as validatePath does.
func transitionProblems(checked *checkedPath, base *manifest.Set) []manifest.Problem {
	set := checked.set
	types := make(map[string]*manifest.ResourceType, len(set.Types))
	for _, t := range set.Types {
		types[t.Name] = t
	}
	before := make(map[manifest.ObjectRef]*manifest.Resource, len(base.Resources))
	for _, r := range base.Resources {
		before[r.Ref()] = r
	}
	var problems []manifest.Problem
	for _, r := range set.Resources {
		old, t := before[r.Ref()], types[r.Kind]
		if old == nil || t == nil {
			continue
		}
		problems = append(problems, t.CheckTransition(r, old.Version, old.Spec)...)
	}
	manifest.PlaceProblems(checked.files, problems)
	manifest.SortProblems(problems)
	fromDir(checked.dir, problems)
	return problems
}
