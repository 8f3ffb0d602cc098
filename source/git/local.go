package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
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

// defaultLocalMaxEntries bounds the tree entries one local fetch reads, in
// the new trees and in the clone's they are compared with. Each commit's
// folders are read whole, in this process, at some microseconds an entry:
// many commits to a large folder cost several times what go-git's fetch of
// them costs, for which git's upload-pack does the walk, and would eat the
// deadline of every fetch of that head. Past the bound they are fetched
// the usual way.
const defaultLocalMaxEntries = 1 << 18

// localRemote is a file:// remote's object store, kept open between fetches
// so that its pack indexes are decoded once.
type localRemote struct {
	dir   string
	files *remoteFiles
	st    *filesystem.Storage
	// packs are the remote's pack files st has indexed, sorted.
	packs []string
}

// localGitDir returns the git folder of a file:// remote: the repository
// itself when bare, else its .git folder. It returns "" when the remote is
// not one such folder (a .git file pointing elsewhere, say), or one git
// reads with others.
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
	// git reads the branches and objects of the folder commondir names,
	// and objects of those alternates names, which go-git's storage reads
	// from elsewhere or not at all.
	for _, name := range []string{"commondir", filepath.Join("objects", "info", "alternates")} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
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
	files := &remoteFiles{Filesystem: osfs.New(dir), dir: dir}
	packs, err := packFilesIn(files, filepath.Join("objects", "pack"))
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
	st := filesystem.NewStorageWithOptions(files, cache.NewObjectLRU(objectCacheSize),
		filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: s.largeObject()})
	s.local = &localRemote{dir: dir, files: files, st: st, packs: packs}
	return s.local, nil
}

// dropLocal closes the kept remote object store, when there is one.
func (s *Source) dropLocal() {
	if r := s.local; r != nil {
		r.st.Close()
		s.local = nil
	}
}

// packFilesIn lists the pack files of the remote's pack folder dir, sorted.
func packFilesIn(files *remoteFiles, dir string) ([]string, error) {
	entries, err := files.ReadDir(dir)
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
	slices.Sort(packs)
	return packs, nil
}

// remoteFiles is a local remote's git folder as this process reads it:
// regular files and folders only, opened without blocking, through an
// os.Root so that no link leads out of it. A FIFO or a device where git
// keeps a ref or an object would hold an open or a read past any deadline,
// with the source's lock: the upload-pack that reads such a remote
// otherwise is a process of its own, stopped at the deadline.
type remoteFiles struct {
	// Filesystem answers what opens nothing: Stat, Join and the like.
	billy.Filesystem
	dir string
}

// errNotRegular is the error for a file of the remote that is neither a
// regular file nor a folder.
var errNotRegular = errors.New("not a regular file")

// open opens name, a path under the remote's folder, for reading without
// blocking, when it is a regular file (a folder when dir is set).
func (f *remoteFiles) open(name string, dir bool) (*os.File, error) {
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	file, err := root.OpenFile(strings.TrimLeft(filepath.ToSlash(name), "/"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err == nil && (dir && !fi.IsDir() || !dir && !fi.Mode().IsRegular()) {
		err = &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// Open opens a regular file of the remote for reading.
func (f *remoteFiles) Open(name string) (billy.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens a regular file of the remote for reading: the remote is
// never written to.
func (f *remoteFiles) OpenFile(name string, flag int, _ os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.ErrUnsupported}
	}
	file, err := f.open(name, false)
	if err != nil {
		return nil, err
	}
	return remoteFile{File: file, name: name}, nil
}

// ReadDir lists a folder of the remote.
func (f *remoteFiles) ReadDir(name string) ([]fs.FileInfo, error) {
	file, err := f.open(name, true)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return file.Readdir(-1)
}

// remoteFile is a file of the remote as go-git reads it: named as it was
// opened, as go-git opens a pack again by its file's name, and locked by
// nothing, as upload-pack does not lock it.
type remoteFile struct {
	*os.File
	name string
}

func (f remoteFile) Name() string { return f.name }
func (remoteFile) Lock() error    { return nil }
func (remoteFile) Unlock() error  { return nil }

// maxLooseRef and maxPackedRefs bound what is read of the branch's file
// and of packed-refs: a hash and a line end, or a file of many refs.
const (
	maxLooseRef   = 256
	maxPackedRefs = 64 << 20
)

// readFile reads a regular file of the remote, when it holds at most max
// bytes.
func (f *remoteFiles) readFile(name string, max int64) ([]byte, error) {
	file, err := f.open(name, false)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("read %s: over %d bytes", name, max)
	}
	return data, err
}

// readBranch reads the hash of the branch name from the remote's refs
// folder, or from packed-refs when it has no file of its own, as git does.
// ok is false for anything but a plain hash there (a symbolic or malformed
// ref, a file that is not a regular one, a huge one): the usual listing
// says then what git makes of it.
func (f *remoteFiles) readBranch(name plumbing.ReferenceName) (_ plumbing.Hash, ok bool) {
	data, err := f.readFile(name.String(), maxLooseRef)
	if err == nil {
		// git reads a hash followed by the end or by a space.
		if len(data) < 40 || !hexSHA1.Match(data[:40]) || len(data) > 40 && !unicode.IsSpace(rune(data[40])) {
			return plumbing.ZeroHash, false
		}
		return plumbing.NewHash(string(data[:40])), true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, false
	}
	if data, err = f.readFile("packed-refs", maxPackedRefs); err != nil {
		return plumbing.ZeroHash, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		h, ref, found := strings.Cut(strings.TrimSuffix(line, "\r"), " ")
		if found && ref == name.String() && hexSHA1.MatchString(h) {
			return plumbing.NewHash(h), true
		}
	}
	return plumbing.ZeroHash, false
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
	h, ok := r.files.readBranch(name)
	if !ok {
		// No such branch, say: the listing tells why (an empty
		// repository, a deleted branch).
		return nil, false
	}
	return []*plumbing.Reference{plumbing.NewHashReference(name, h)}, true
}

// localFetch brings the target's head from a local remote into the clone
// and moves the local ref to it. It reports false, having changed nothing,
// when the head is better fetched the usual way.
func (s *Source) localFetch(ctx context.Context, st *filesystem.Storage, repo *gogit.Repository, t *target) (bool, error) {
	r, err := s.openLocal()
	if err != nil {
		// Its pack folder cannot be read as a plain folder (a link out of
		// the remote, say): go-git's fetch reads it as git does.
		s.log.Debug("cannot read the local remote: fetching it the usual way", "error", err)
		return false, nil
	}
	if r == nil {
		return false, nil
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
		w := &missingWalk{remote: r, from: r.st, have: st, known: s.trees, maxCommits: s.localMaxCommits, maxEntries: s.localMaxEntries}
		ok, err := w.run(ctx, t.remoteHash, base)
		if err == nil && ok {
			lw := &looseWriter{dir: filepath.Join(s.cfg.CacheDir, "objects")}
			err = copyObjects(r.st, lw, w.out)
			s.loose.objects += lw.objects
			s.loose.bytes += lw.bytes
		}
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if err != nil || !ok {
			// What go-git's fetch makes of it is the answer: a remote
			// that lacks objects, say, or a file that is not a regular one.
			s.log.Debug("cannot copy from the local remote: fetching it the usual way", "error", err)
			return false, nil
		}
		// The trees read are those the snapshot reads next.
		s.trees = w.trees
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(t.localRef, t.remoteHash)); err != nil {
		return false, fmt.Errorf("update %s: %w", t.localRef, err)
	}
	return true, nil
}

// errTooManyEntries ends a walk past its bound on the tree entries read.
var errTooManyEntries = errors.New("too many tree entries")

// newObject is an object the clone lacks: a commit or tree with the
// content already read and checked against its name, or a blob (data nil)
// read and checked as it is copied.
type newObject struct {
	hash plumbing.Hash
	typ  plumbing.ObjectType
	data []byte
}

// copyObjects writes objs, read from from's store, into the clone's
// objects folder w writes to.
func copyObjects(from *filesystem.Storage, w *looseWriter, objs []newObject) error {
	for _, o := range objs {
		var err error
		if o.data != nil {
			err = w.addRead(o.hash, o.typ, o.data)
		} else {
			err = copyBlob(w, from, o.hash)
		}
		if err != nil {
			return fmt.Errorf("copy objects: %w", err)
		}
	}
	return nil
}

// copyBlob streams blob h from from's store into w.
func copyBlob(w *looseWriter, from *filesystem.Storage, h plumbing.Hash) error {
	obj, err := from.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	rd, err := obj.Reader()
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	defer rd.Close()
	return w.add(h, plumbing.BlobObject, obj.Size(), rd)
}

// missingWalk lists the objects of a head's history that the clone lacks:
// the commits down to those it has, with the trees and blobs they bring.
// Each commit's tree is compared with base, a tree the clone holds whole
// (that of its head): what is the same there is not looked up one by one.
type missingWalk struct {
	remote     *localRemote // from's files
	from, have *filesystem.Storage
	// known are trees parsed before, by hash (those the last fetch brought).
	known map[plumbing.Hash]*object.Tree
	// maxCommits and maxEntries bound the walk: past either, run reports
	// false.
	maxCommits, maxEntries int

	out     []newObject
	trees   map[plumbing.Hash]*object.Tree // the trees read from from
	seen    map[plumbing.Hash]bool
	entries int
}

// run walks head's history; ok is false when more than maxCommits commits
// are missing, or when more than maxEntries tree entries would be read.
func (w *missingWalk) run(ctx context.Context, head, base plumbing.Hash) (ok bool, _ error) {
	w.trees = map[plumbing.Hash]*object.Tree{}
	w.seen = map[plumbing.Hash]bool{}
	commits := []plumbing.Hash{head}
	n := 0
	for len(commits) > 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		h := commits[len(commits)-1]
		commits = commits[:len(commits)-1]
		if !w.lacks(h) {
			continue
		}
		if n++; n > w.maxCommits {
			return false, nil
		}
		raw, err := w.raw(w.from, plumbing.CommitObject, h)
		if err != nil {
			return false, fmt.Errorf("read commit %s: %w", h, err)
		}
		var c object.Commit
		mo := &plumbing.MemoryObject{}
		mo.SetType(plumbing.CommitObject)
		mo.Write(raw)
		if err := c.Decode(mo); err != nil {
			return false, fmt.Errorf("read commit %s: %w", h, err)
		}
		w.out = append(w.out, newObject{hash: h, typ: plumbing.CommitObject, data: raw})
		err = w.walk(c.TreeHash, base)
		if errors.Is(err, errTooManyEntries) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		commits = append(commits, c.ParentHashes...)
	}
	return true, nil
}

// raw reads object h of st whole, from the remote's files when st is the
// remote's.
func (w *missingWalk) raw(st *filesystem.Storage, typ plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	if st == w.from && w.remote != nil {
		return readRemoteRaw(w.remote, typ, h)
	}
	return readRaw(st, typ, h)
}

func (w *missingWalk) lacks(h plumbing.Hash) bool {
	if w.seen[h] {
		return false
	}
	w.seen[h] = true
	return w.have.HasEncodedObject(h) != nil
}

// tree reads tree h of st, or takes it from those parsed before.
func (w *missingWalk) tree(st *filesystem.Storage, h plumbing.Hash) (*object.Tree, []byte, error) {
	if t, ok := w.trees[h]; ok {
		return t, nil, nil
	}
	if t, ok := w.known[h]; ok {
		return t, nil, nil
	}
	raw, err := w.raw(st, plumbing.TreeObject, h)
	if err != nil {
		return nil, nil, err
	}
	t, err := parseTree(h, raw)
	return t, raw, err
}

// walk lists what tree h brings; old is the tree at the same place under
// base, or zero.
func (w *missingWalk) walk(h, old plumbing.Hash) error {
	if h == old || !w.lacks(h) {
		return nil
	}
	tree, raw, err := w.tree(w.from, h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", h, err)
	}
	if raw == nil {
		// A tree parsed before but not in the clone: its content again.
		if raw, err = w.raw(w.from, plumbing.TreeObject, h); err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
	}
	w.out = append(w.out, newObject{hash: h, typ: plumbing.TreeObject, data: raw})
	w.trees[h] = tree
	w.entries += len(tree.Entries)
	var had []object.TreeEntry
	if !old.IsZero() {
		if t, _, err := w.tree(w.have, old); err == nil {
			w.entries += len(t.Entries)
			had = t.Entries
		}
	}
	if w.entries > w.maxEntries {
		return errTooManyEntries
	}
	// Both trees are in git's order: walk them side by side. A tree out of
	// order only makes entries look new, which costs a lookup each.
	j := 0
	for _, e := range tree.Entries {
		var before object.TreeEntry
		found := false
		for j < len(had) {
			c := compareTreeNames(had[j], e)
			if c > 0 {
				break
			}
			j++
			if c == 0 {
				before, found = had[j-1], true
				break
			}
		}
		if found && before.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Dir:
			if !found || before.Mode != filemode.Dir {
				before.Hash = plumbing.ZeroHash
			}
			if err := w.walk(e.Hash, before.Hash); err != nil {
				return err
			}
		case filemode.Submodule:
			// A commit of another repository: not an object here.
		default:
			if w.lacks(e.Hash) {
				w.out = append(w.out, newObject{hash: e.Hash, typ: plumbing.BlobObject})
			}
		}
	}
	return nil
}

// compareTreeNames orders two entries as git orders a tree: by name, a
// folder's name as if it ended in a slash.
func compareTreeNames(a, b object.TreeEntry) int {
	an, bn := a.Name, b.Name
	n := min(len(an), len(bn))
	if c := strings.Compare(an[:n], bn[:n]); c != 0 {
		return c
	}
	ac, bc := byte(0), byte(0)
	if len(an) > n {
		ac = an[n]
	} else if a.Mode == filemode.Dir {
		ac = '/'
	}
	if len(bn) > n {
		bc = bn[n]
	} else if b.Mode == filemode.Dir {
		bc = '/'
	}
	switch {
	case ac < bc:
		return -1
	case ac > bc:
		return 1
	}
	return 0
}
