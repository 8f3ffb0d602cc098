// Package source turns "what is in Git or in a folder now" into a Snapshot:
// a revision, the commit it points at, and the manifest files at the source
// path, read whole into memory so that a sync sees one consistent state.
//
// Implementations live in sub-packages: source/git and source/dir.
package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/no8s/no8s-agent/manifest"
)

// Kinds of source, as shown in status.
const (
	KindGit = "git"
	KindDir = "dir"
)

// IgnoreFile is the file at a source root whose gitignore-style patterns
// exclude paths from the manifests.
const IgnoreFile = ".no8signore"

// Snapshot is one state of a source.
type Snapshot struct {
	// Revision identifies the state: "main@sha1:<hex>" for Git,
	// "sha256:<hex>" for a folder.
	Revision manifest.Revision
	// Commit describes a Git revision; zero for folders.
	Commit manifest.Commit
	// Files are the manifest files at the source path, in lexical order.
	Files []manifest.File
	// Problems are files that could not be used (too large, a symlink out of
	// the root, unreadable). A sync treats them like invalid manifests.
	Problems []manifest.Problem
	// Unverified are the commits a signature policy refused (unsigned,
	// signed by a key that is not trusted, a bad signature), one problem
	// each, not tied to a file. They are among Problems too; a sync
	// refuses the snapshot for them with its own reason.
	Unverified []manifest.Problem
	// Lineage, set by a source whose verdict on a snapshot depends on the
	// revision last applied (a Git source with a signature policy), says
	// what it was judged against; nil otherwise.
	Lineage *Lineage
}

// Lineage is where a snapshot's commit stands against the revision last
// applied from its source, as the source found when it made the snapshot.
type Lineage struct {
	// Applied is the revision last applied when the snapshot was judged, ""
	// when there was none. Once another revision is applied the verdict may
	// no longer hold, and the snapshot must be judged again before it is.
	Applied manifest.Revision
	// Rollback, when not "", says why the snapshot goes back in history:
	// its commit is an ancestor of Applied's, or whether it is could not be
	// told. A signature proves who made a commit, not that it is the
	// newest, so going back to an old commit, signed or not, needs an
	// approval of that revision.
	Rollback string
	// Problems are, for a rollback, what the signature policy found wrong
	// with the commit, shown with the refusal. They are among the
	// snapshot's Problems too: an approval says going back is intended,
	// not who made the commit, so it never lets an unsigned one through.
	Problems []manifest.Problem
}

// Source produces snapshots.
type Source interface {
	// Name is the source's configured name.
	Name() string
	// Kind is KindGit or KindDir.
	Kind() string
	// Location is the URL (Git) or folder (dir) the source reads, for status.
	Location() string
	// Path is the folder within the repository that holds the manifests ("" for the root).
	Path() string
	// Fetch returns the current snapshot. It does the least work it can:
	// a Git source asks the remote for its head first and fetches nothing
	// when the head is the one it has.
	Fetch(ctx context.Context) (*Snapshot, error)
}

// Watcher is implemented by sources that can tell when they may have changed,
// so that a change is synced at once instead of at the next interval.
type Watcher interface {
	// Watch sends on the returned channel (without blocking, coalescing
	// bursts) each time the source may have changed, until ctx is done, when
	// the channel is closed. Its goroutines end with ctx.
	Watch(ctx context.Context) (<-chan struct{}, error)
}

// ErrNotFound means what the source points at does not exist: no such
// branch, tag or commit, no tag matching a semver range, no such path.
// Retrying helps only once someone pushes it.
var ErrNotFound = errors.New("not found")

// ErrAuth means the remote refused the credentials. Retrying helps only
// once the credentials are fixed.
var ErrAuth = errors.New("authentication failed")

// ReadTree reads the manifest files under root, honouring the .no8signore
// file at root. It is what every source and the offline commands use, so
// that they all see the same files.
func ReadTree(fsys fs.FS, opts manifest.LoadOptions) (files []manifest.File, problems []manifest.Problem, err error) {
	ignore, err := LoadIgnore(fsys)
	if err != nil {
		return nil, nil, err
	}
	if ignore != nil {
		prev := opts.Ignore
		opts.Ignore = func(p string, isDir bool) bool {
			return ignore(p, isDir) || (prev != nil && prev(p, isDir))
		}
	}
	return manifest.ReadTree(fsys, opts)
}

// LoadIgnore reads the .no8signore file at the root of fsys and returns a
// matcher for slash-separated paths relative to that root, or nil when there
// is no such file. The syntax is gitignore's, matched by go-git.
func LoadIgnore(fsys fs.FS) (func(path string, isDir bool) bool, error) {
	data, err := fs.ReadFile(fsys, IgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", IgnoreFile, err)
	}
	var patterns []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		patterns = append(patterns, gitignore.ParsePattern(line, nil))
	}
	m := gitignore.NewMatcher(patterns)
	return func(p string, isDir bool) bool { return m.Match(strings.Split(p, "/"), isDir) }, nil
}

// DigestRevision returns the revision of a set of files that has no commit:
// "sha256:" and the SHA-256 of the sorted paths and contents, and of the
// problems found reading the tree. Any change to a manifest file, its name
// included, changes it, and so does a file that turns unusable (too large, a
// symlink out of the root); changes to other files do not.
func DigestRevision(files []manifest.File, problems []manifest.Problem) manifest.Revision {
	sorted := make([]manifest.File, len(files))
	copy(sorted, files)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var b strings.Builder
	for _, f := range sorted {
		// Paths cannot contain NUL, so path NUL hash NL is unambiguous.
		b.WriteString(f.Path)
		b.WriteByte(0)
		b.WriteString(f.Hash)
		b.WriteByte('\n')
	}
	ps := append([]manifest.Problem(nil), problems...)
	manifest.SortProblems(ps)
	for _, p := range ps {
		b.WriteByte(0)
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return manifest.Revision(manifest.HashJSON([]byte(b.String())))
}
