package terraform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/no8s/no8s-agent/action"
)

// module is where the module's files come from: a local folder, or a source
// string that `init -from-module` downloads once per instance.
type module struct {
	// dir is the local folder, absolute; empty for a source string.
	dir string
	// source is the source string; empty for a local folder.
	source string
	// fetched guards the download of source.
	fetched sync.Mutex
}

// newModule tells a folder from a source string: a setting that names an
// existing folder is a folder; one that looks like a path but names none is
// a mistake; anything else is a source for init to download.
func newModule(setting string) (module, error) {
	looksLocal := strings.HasPrefix(setting, "./") || strings.HasPrefix(setting, "../") || strings.HasPrefix(setting, "/")
	abs, err := filepath.Abs(setting)
	if err != nil {
		return module{}, err
	}
	if fi, err := os.Stat(abs); err == nil {
		if !fi.IsDir() {
			return module{}, fmt.Errorf("%s is a file; name the folder that holds the module's .tf files", abs)
		}
		return module{dir: abs}, nil
	} else if looksLocal || !strings.ContainsAny(setting, ":/") {
		return module{}, fmt.Errorf("no folder %s: name a folder relative to the agent's working directory, or a module source", abs)
	}
	return module{source: setting}, nil
}

// files returns the folder holding the module's files, downloading a source
// module into root/.modules the first time.
func (a *Action) moduleDir(ctx context.Context) (string, error) {
	if a.module.dir != "" {
		return a.module.dir, nil
	}
	a.module.fetched.Lock()
	defer a.module.fetched.Unlock()
	sum := sha256.Sum256([]byte(a.module.source))
	dir := filepath.Join(a.root, ".modules", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, ".no8s-complete")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if _, err := a.run(ctx, runSpec{dir: tmp, args: []string{"init", "-input=false", "-no-color", "-backend=false", "-from-module=" + a.module.source}, phase: "init"}); err != nil {
		return "", fmt.Errorf("download module %s: %w", a.module.source, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".no8s-complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// workState is what a work folder records of how it was prepared, in
// .no8s-module.json.
type workState struct {
	// Instance is the terraform instance that prepared the folder last;
	// empty in folders of the earlier layout, which did not record it.
	Instance    string   `json:"instance,omitempty"`
	ModuleHash  string   `json:"moduleHash"`
	BackendHash string   `json:"backendHash"`
	Files       []string `json:"files"`
	Initialized bool     `json:"initialized"`
}

const (
	workStateFile = ".no8s-module.json"
	varsFile      = "no8s.tfvars.json"
	backendFile   = "no8s_backend.tf"
	planFile      = "no8s.tfplan"
)

// readWorkState reads dir's record; ok is false when there is none or it
// cannot be read.
func readWorkState(dir string) (st workState, ok bool) {
	raw, err := os.ReadFile(filepath.Join(dir, workStateFile))
	if err != nil {
		return workState{}, false
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return workState{}, false
	}
	return st, true
}

// prepareMode says how prepare treats a folder that another instance, or
// an earlier version, prepared last.
type prepareMode int

const (
	// prepareOwn makes the folder this instance's: when its backend changed
	// with its owner, init moves the state to this instance's backend key
	// (-migrate-state), so that it follows the folder.
	prepareOwn prepareMode = iota
	// preparePreview works in a copy for a preview, which must write
	// nothing anywhere: a folder from elsewhere keeps the backend it was
	// initialised with, so that the plan reads the state it holds.
	preparePreview
)

// prepare makes dir ready for an operation on req's resource: the module's
// files (copied again when they changed), the backend file, the variables,
// and init when the module or the backend changed or it never ran.
func (a *Action) prepare(ctx context.Context, dir string, req *action.Request, mode prepareMode) error {
	src, err := a.moduleDir(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create work folder: %w", err)
	}
	files, moduleHash, err := moduleFiles(src)
	if err != nil {
		return fmt.Errorf("read module %s: %w", src, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("module %s holds no files: name the folder that holds the module's .tf files", src)
	}
	backend := ""
	if a.backend != nil {
		body, err := a.renderBackend(req.Resource)
		if err != nil {
			return fmt.Errorf("backend: %w", err)
		}
		backend = "terraform {\n" + body + "\n}\n"
	}
	backendSum := sha256.Sum256([]byte(backend))
	backendHash := hex.EncodeToString(backendSum[:])

	st, recorded := readWorkState(dir)
	// A folder another instance (or the earlier layout) prepared: moved
	// here on purpose, its state with it.
	fromElsewhere, previous := recorded && st.Instance != a.instance, st.Instance
	migrate := false
	if st.ModuleHash != moduleHash {
		for _, f := range st.Files {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the module's old file %s: %w", f, err)
			}
		}
		for _, f := range files {
			if err := copyFile(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
				return fmt.Errorf("copy the module: %w", err)
			}
		}
		st.Initialized = false
	}
	switch {
	case st.BackendHash == backendHash:
	case fromElsewhere && mode == preparePreview:
		// Plan against the state where it is.
		backendHash = st.BackendHash
	default:
		if backend == "" {
			if err := os.Remove(filepath.Join(dir, backendFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else if err := os.WriteFile(filepath.Join(dir, backendFile), []byte(backend), 0o600); err != nil {
			return err
		}
		st.Initialized = false
		migrate = fromElsewhere
	}
	st.Instance, st.ModuleHash, st.BackendHash, st.Files = a.instance, moduleHash, backendHash, files
	if _, err := os.Stat(filepath.Join(dir, ".terraform")); err != nil {
		st.Initialized = false
	}
	if err := a.writeVars(dir, varsFile, req); err != nil {
		return err
	}
	if !st.Initialized {
		req.Reporter.Progress("init")
		args := []string{"init", "-input=false", "-no-color", "-reconfigure"}
		if migrate {
			// The state moves from the backend the folder was initialised
			// with to this instance's key; the old copy stays where it was.
			args = []string{"init", "-input=false", "-no-color", "-migrate-state", "-force-copy"}
			a.log.Info("moving the state to the instance's backend key", "dir", dir, "previous", previous)
		}
		if _, err := a.run(ctx, runSpec{dir: dir, args: args, phase: "init", req: req}); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		st.Initialized = true
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, workStateFile), raw, 0o600)
}

// writeVars writes the variables: the vars setting and the spec over them.
// no8s_kind, no8s_name and no8s_generation come from the environment (see
// requestEnv), where a module that does not declare them is not warned.
func (a *Action) writeVars(dir, name string, req *action.Request) error {
	vars := map[string]json.RawMessage{}
	for k, v := range a.vars {
		vars[k] = v
	}
	if len(req.Resource.Spec) > 0 && string(req.Resource.Spec) != "null" {
		var spec map[string]json.RawMessage
		if err := json.Unmarshal(req.Resource.Spec, &spec); err != nil {
			return fmt.Errorf("the spec is not an object of variables: %w", err)
		}
		for k, v := range spec {
			vars[k] = v
		}
	}
	raw, err := json.MarshalIndent(vars, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), raw, 0o600)
}

// moduleFiles lists the module's files (relative, slash-separated, sorted)
// and hashes their names and contents. Init's and state's files, and
// dot-folders such as .terraform and .git, are not part of the module.
func moduleFiles(dir string) ([]string, string, error) {
	var files []string
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if strings.HasPrefix(name, ".") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || name == ".no8s-complete" || strings.HasSuffix(name, ".tfstate") ||
			strings.HasSuffix(name, ".tfstate.backup") || strings.HasSuffix(name, ".tfplan") {
			return nil
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	return files, hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies src to dst, creating dst's folder.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyForPreview copies a work folder (module, state, init's folder) into a
// fresh temporary folder for a plan that must not touch the real one.
func copyForPreview(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == from {
				return fs.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		switch {
		case d.IsDir() && filepath.ToSlash(rel) == ".terraform/providers":
			// Providers can weigh hundreds of megabytes: link, not copy.
			if err := os.Symlink(p, target); err != nil {
				return err
			}
			return fs.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			// init links providers into .terraform; the link is enough.
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case strings.HasSuffix(d.Name(), ".tfplan") || d.Name() == ".terraform.tfstate.lock.info":
			return nil
		default:
			return copyFile(p, target)
		}
	})
}
