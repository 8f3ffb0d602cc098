package terraform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
)

// A resource's state is keyed by the instance and the resource's whole
// identity: the work folder is <workingDir>/<instance>/<kind>/<name>, and
// a backend's key, {{ .Key }}, is <instance>/<kind>/<name>, for a resource
// in the namespace "default" or of a cluster-scoped kind (as before
// namespaces, so that their state stays where it is); a resource in
// another namespace has it before the kind: <instance>/<namespace>/<kind>/
// <name>. A namespace is lower case and a kind starts with a capital, so
// the two layouts never meet. Another
// instance never finds the state of a resource that was bound to it
// before, so it can never run its own module against it: a change of
// instance would otherwise plan the first instance's infrastructure away
// as a plain update. An operation refuses, before it runs the binary, a
// resource that has a work folder under another instance of the same
// workingDir, and says how to move the state.

// identity is the resource's identity, outermost first: its namespace,
// unless it is the default one or none, then its kind and name.
func identity(res action.Resource) []string {
	if legacyNamespace(res.Namespace) {
		return []string{res.Kind, res.Name}
	}
	return []string{res.Namespace, res.Kind, res.Name}
}

// legacyNamespace reports whether resources in namespace ns keep their
// state where it was before namespaces: in "default", where the upgrade
// placed every resource, and in none (cluster-scoped kinds).
func legacyNamespace(ns string) bool { return ns == "" || ns == manifest.DefaultNamespace }

// stateKey is the instance and the resource's identity, each encoded as a
// path component: the work folder's path under workingDir, and, joined by
// "/", a backend's key.
func (a *Action) stateKey(res action.Resource) ([]string, error) {
	parts := append([]string{a.instance}, identity(res)...)
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("cannot key the state of %s: empty name", res.Ref())
		}
		parts[i] = encodeComponent(p)
	}
	return parts, nil
}

// encodeComponent makes s a safe path component, one-to-one: letters,
// digits, '-', '_' and (but first) '.' stay; any other byte is %XX. Names
// the agent accepts need no escape; nothing can climb out of workingDir,
// and nothing begins with a dot, as the plugin's own folders do.
func encodeComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// decodeComponent undoes encodeComponent, for messages.
func decodeComponent(s string) string {
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

// legacyDir is where the earlier layout, <workingDir>/<kind>/<name>, kept
// the resource's work folder; empty when it could not have: that layout
// knew no namespaces, so a resource in a namespace of its own never had
// one there (the folder is the default namespace's resource's).
func (a *Action) legacyDir(res action.Resource) string {
	if !legacyNamespace(res.Namespace) {
		return ""
	}
	for _, part := range []string{res.Kind, res.Name} {
		if part == "" || part == "." || part == ".." || strings.ContainsAny(part, `/\`) {
			return ""
		}
	}
	return filepath.Join(a.root, res.Kind, res.Name)
}

// isWorkFolder reports whether dir is a work folder that may hold state or
// point at it: one that was initialised or applied. A folder that only
// got the module's files before a failure holds nothing to lose.
func isWorkFolder(dir string) bool {
	for _, name := range []string{workStateFile, "terraform.tfstate", ".terraform"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// locate returns the resource's work folder, dir, and the folder that
// holds its state now, from: dir itself, or a folder of the earlier layout
// that adopt is false for (a preview, which moves nothing). It refuses a
// resource whose state is elsewhere and is not this instance's to take:
// under another instance, or in a folder of the earlier layout made with
// another module. With adopt, a folder of the earlier layout made with this
// instance's module is moved to dir, the state with it.
func (a *Action) locate(ctx context.Context, res action.Resource, adopt bool) (dir, from string, err error) {
	parts, err := a.stateKey(res)
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(append([]string{a.root}, parts...)...)
	ref := res.Ref().String()

	entries, err := os.ReadDir(a.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("read workingDir: %w", err)
	}
	for _, e := range entries {
		// Not only folders: an instance's folder may be a symlink (to
		// another disk). Under a file, nothing is a work folder.
		if e.Name() == parts[0] || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		other := filepath.Join(append([]string{a.root, e.Name()}, parts[1:]...)...)
		if !isWorkFolder(other) {
			continue
		}
		owner := decodeComponent(e.Name())
		return "", "", fmt.Errorf("%s has state under terraform instance %q (%s); instance %q does not run its module against another instance's state, which could destroy what %q made: "+
			"destroy it first (bind it back to %q and delete it, then declare it again with %q), "+
			"or, to hand the state over as it is, move the folder: mv %s %s (with a backend, the state moves to %q's key on its next run)",
			ref, owner, other, a.instance, owner, owner, a.instance, other, dir, a.instance)
	}

	legacy := a.legacyDir(res)
	if legacy == "" || !isWorkFolder(legacy) {
		return dir, dir, nil
	}
	if isWorkFolder(dir) {
		return "", "", fmt.Errorf("%s has state in two work folders, %s and %s (of an earlier version): keep the one that holds its state and remove the other", ref, dir, legacy)
	}
	src, err := a.moduleDir(ctx)
	if err != nil {
		return "", "", err
	}
	_, hash, err := moduleFiles(src)
	if err != nil {
		return "", "", fmt.Errorf("read module %s: %w", src, err)
	}
	if st, ok := readWorkState(legacy); !ok || st.ModuleHash != hash {
		// Made by another instance, or before this one's module changed:
		// only people can tell.
		return "", "", fmt.Errorf("%s has state in %s, a work folder of an earlier version made with another module than terraform instance %q's: "+
			"if %q made it (and its module changed since), move it: mv %s %s; if another instance made it, move it under that one "+
			"(mv %s %s) and bind the resource back to it",
			ref, legacy, a.instance, a.instance, legacy, dir, legacy, filepath.Join(append([]string{a.root, "<instance>"}, parts[1:]...)...))
	}
	if !adopt {
		return dir, legacy, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", "", fmt.Errorf("create work folder: %w", err)
	}
	if err := os.Rename(legacy, dir); err != nil {
		return "", "", fmt.Errorf("move the work folder %s to %s: %w", legacy, dir, err)
	}
	_ = os.Remove(filepath.Dir(legacy)) // the kind's folder, once empty
	a.log.Info("moved a work folder of the earlier layout under its instance", "from", legacy, "to", dir)
	return dir, dir, nil
}
