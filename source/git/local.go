package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A file:// remote is a repository on this machine. Once the clone follows
// its branch, what a new commit brings is copied from the remote's object
// store into the clone in this process, as git's own local clone reads the
// objects folder directly: no upload-pack process, no pack made for the
// occasion and parsed again. Anything out of the ordinary (a first fetch,
// a head whose history the clone does not meet within a thousand commits, a
// remote that is not a plain repository folder) goes through go-git's
// fetch as before.

// defaultLocalMaxCommits bounds the commits one local fetch copies: a head
// on an unrelated line (a force-push of other history) is fetched the
// usual way.
const defaultLocalMaxCommits = 1000

// localRemote is a file:// remote's object store, kept open between fetches
// so that its pack indexes are decoded once.
type localRemote struct {
	dir string
	st  *filesystem.Storage
	// packs are the remote's pack files st has indexed, sorted.
	packs []string
}

// localGitDir returns the git folder of a file:// remote: the repository
// itself when bare, else its .git folder. It returns "" when the remote is
// not one such folder (a .git file pointing elsewhere, say).
func (s *Source) localGitDir() string {
	if s.protocol != "file" {
		return ""
	}
	u, err := url.Parse(s.transport)
	if err != nil || u.Path == "" {
		return ""
	}
	dir := filepath.Clean(u.Path)
	if fi, err := os.Lstat(filepath.Join(dir, gogit.GitDirName)); err == nil {
		if !fi.IsDir() {
			return ""
		}
		dir = filepath.Join(dir, gogit.GitDirName)
	}
	for _, name := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			return ""
		}
	}
	return dir
}

// openLocal returns the remote's object store, opened again when its pack
// files changed since (a repack, or a push that left a pack), or nil when
// the remote is not local.
func (s *Source) openLocal() (*localRemote, error) {
	dir := s.localGitDir()
	if dir == "" {
		s.dropLocal()
		return nil, nil
	}
	packs, err := packFilesIn(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return nil, err
	}
	if r := s.local; r != nil && r.dir == dir {
		if !slices.Equal(packs, r.packs) {
			r.st.Reindex()
			r.packs = packs
		}
		return r, nil
	}
	s.dropLocal()
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCacheSize),
		filesystem.Options{KeepDescriptors: true})
	s.local = &localRemote{dir: dir, st: st, packs: packs}
	return s.local, nil
}

// dropLocal closes the kept remote object store, when there is one.
func (s *Source) dropLocal() {
	if r := s.local; r != nil {
		r.st.Close()
		s.local = nil
	}
}

// packFilesIn lists the pack files of a pack folder, sorted.
func packFilesIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var packs []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".pack" {
			packs = append(packs, e.Name())
		}
	}
	return packs, nil
}

// localRefs reads the followed branch of a local remote from its refs
// folder, as upload-pack would advertise it, without starting one. ok is
// false when the refs are better listed the usual way: another strategy
// than a branch, another engine, a remote that is not a plain folder, a
// branch that cannot be read.
func (s *Source) localRefs() (_ []*plumbing.Reference, ok bool) {
	if s.strategy != byBranch || s.engine != engineAuto {
		return nil, false
	}
	r, err := s.openLocal()
	if r == nil || err != nil {
		return nil, false
	}
	name := plumbing.NewBranchReferenceName(s.cfg.Ref.Branch)
	ref, err := storer.ResolveReference(r.st, name)
	if err != nil || ref.Type() != plumbing.HashReference {
		// No such branch, say: the listing tells why (an empty
		// repository, a deleted branch).
		return nil, false
	}
	return []*plumbing.Reference{plumbing.NewHashReference(name, ref.Hash())}, true
}

// localFetch brings the target's head from a local remote into the clone
// and moves the local ref to it. It reports false, having changed nothing,
// when the head is better fetched the usual way.
func (s *Source) localFetch(ctx context.Context, st *filesystem.Storage, repo *gogit.Repository, t *target) (bool, error) {
	r, err := s.openLocal()
	if r == nil || err != nil {
		return false, err
	}
	// The pack files stay open only while they are read.
	defer r.st.Close()
	if st.HasEncodedObject(t.remoteHash) != nil {
		// The clone's head tree is whole in the clone: what the new
		// commits share with it is there already.
		var base plumbing.Hash
		if c, err := s.refCommit(repo, t.localRef); err == nil {
			base = c.TreeHash
		}
		missing, ok, err := missingObjects(ctx, r.st, st, t.remoteHash, base, s.localMaxCommits)
		if err == nil && ok {
			err = copyObjects(r.st, st, missing)
		}
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if err != nil || !ok {
			// What go-git's fetch makes of it is the answer: objects
			// behind alternates, say, or a remote that lacks them.
			s.log.Debug("cannot copy from the local remote: fetching it the usual way", "error", err)
			return false, nil
		}
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(t.localRef, t.remoteHash)); err != nil {
		return false, fmt.Errorf("update %s: %w", t.localRef, err)
	}
	// The clone's store indexed the pack as it was written.
	return true, s.packsChanged(true)
}

// copyObjects writes the objects named from from's store into a pack of
// to's. No deltas: searching for them would cost more than the few objects
// of a commit weigh.
func copyObjects(from, to *filesystem.Storage, hashes []plumbing.Hash) error {
	w, err := to.PackfileWriter()
	if err != nil {
		return err
	}
	_, err = packfile.NewEncoder(w, from, false).Encode(hashes, 0)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy objects: %w", err)
	}
	return nil
}

// missingObjects lists the objects of head's history that have lacks: the
// commits down to those it has, with the trees and blobs they bring. Each
// commit's tree is compared with base, a tree have holds whole (that of the
// clone's head): what is the same there is not looked up one by one. ok is
// false when more than maxCommits commits are missing.
func missingObjects(ctx context.Context, from, have *filesystem.Storage, head, base plumbing.Hash, maxCommits int) (_ []plumbing.Hash, ok bool, _ error) {
	var (
		out     []plumbing.Hash
		seen    = map[plumbing.Hash]bool{}
		commits = []plumbing.Hash{head}
		n       int
	)
	lacks := func(h plumbing.Hash) bool {
		if seen[h] {
			return false
		}
		seen[h] = true
		return have.HasEncodedObject(h) != nil
	}
	// walk lists what tree h brings; old is the tree at the same place
	// under base, or zero.
	var walk func(h, old plumbing.Hash) error
	walk = func(h, old plumbing.Hash) error {
		if h == old || !lacks(h) {
			return nil
		}
		tree, err := object.GetTree(from, h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		out = append(out, h)
		var had map[string]object.TreeEntry
		if !old.IsZero() {
			if t, err := object.GetTree(have, old); err == nil {
				had = make(map[string]object.TreeEntry, len(t.Entries))
				for _, e := range t.Entries {
					had[e.Name] = e
				}
			}
		}
		for _, e := range tree.Entries {
			before, ok := had[e.Name]
			if ok && before.Hash == e.Hash {
				continue
			}
			switch e.Mode {
			case filemode.Dir:
				if !ok || before.Mode != filemode.Dir {
					before.Hash = plumbing.ZeroHash
				}
				if err := walk(e.Hash, before.Hash); err != nil {
					return err
				}
			case filemode.Submodule:
				// A commit of another repository: not an object here.
			default:
				if lacks(e.Hash) {
					out = append(out, e.Hash)
				}
			}
		}
		return nil
	}
	for len(commits) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		h := commits[len(commits)-1]
		commits = commits[:len(commits)-1]
		if !lacks(h) {
			continue
		}
		if n++; n > maxCommits {
			return nil, false, nil
		}
		c, err := object.GetCommit(from, h)
		if err != nil {
			return nil, false, fmt.Errorf("read commit %s: %w", h, err)
		}
		out = append(out, h)
		if err := walk(c.TreeHash, base); err != nil {
			return nil, false, err
		}
		commits = append(commits, c.ParentHashes...)
	}
	return out, true, nil
}
