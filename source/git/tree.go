package git

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// maxLinkHops bounds the symlinks followed to resolve one path, as the
// kernel does (ELOOP), so that a cycle of links ends.
const maxLinkHops = 40

// defaultMaxRetained is the total size of file contents a source keeps
// between fetches so that unchanged files are neither read nor hashed
// again. Beyond it only the blob and SHA-256 hashes are kept and unchanged
// files are read again from the object store: memory stays bounded
// whatever the repository holds.
const defaultMaxRetained = 8 << 20

// errPathEscapes is what os.Root says of a path that leaves it; the tree
// reader says the same so that problems read alike whatever the source.
var errPathEscapes = errors.New("path escapes from parent")

// indexed is one manifest file of a snapshot, with the blob it was read
// from (the target's blob for a symlink).
type indexed struct {
	file manifest.File
	blob plumbing.Hash
}

// span is what one folder of the tree produced: a range of the files and
// problems, which are in walk order, so that an unchanged folder (same
// tree hash) is taken over without being read.
type span struct {
	tree     plumbing.Hash
	files    [2]int
	problems [2]int
	// dirs is the range of folders, in index.order, the folder itself first.
	dirs         [2]int
	followsLinks bool // holds a symlink: its result depends on other folders
}

// index is what a source keeps of its last snapshot: enough to answer an
// unchanged head and to read only what a new commit changed.
type index struct {
	key      string
	revision manifest.Revision
	commit   manifest.Commit
	// empty is true for a commit whose whole tree is empty.
	empty    bool
	files    []indexed
	problems []manifest.Problem
	dirs     map[string]span
	// order lists the folders of dirs as they were walked, so that the
	// folders under one are a range of it.
	order []string
	// ignoreBlob is the .no8signore blob the files were selected with.
	ignoreBlob plumbing.Hash
	// retained is true when every file's Data is kept.
	retained bool
}

// treeReader reads the manifests of a Git tree straight from the object
// store, applying the rules of manifest.ReadTree: dot-files and
// dot-folders skipped, .no8signore and LoadOptions.Ignore honoured,
// manifest extensions only, the size limit, symlinks followed only inside
// the root and never to folders. Submodules (gitlinks) are skipped: their
// commits are not in this repository.
type treeReader struct {
	st    storer.EncodedObjectStorer
	opts  manifest.LoadOptions
	prev  *index // nil, or the last index when its folders may be taken over
	reads *atomic.Int64

	ignore     func(p string, isDir bool) bool
	ignoreBlob plumbing.Hash
	root       *object.Tree
	trees      map[plumbing.Hash]*object.Tree
	parsed     map[plumbing.Hash]*object.Tree // trees read before (see Source.trees)
	byBlob     map[plumbing.Hash]int          // prev.files by blob, built on first use
	byDir      map[string]map[plumbing.Hash]int
	next       int // the previous index's file after the last one found

	files    []indexed
	problems []manifest.Problem
	dirs     map[string]span
	order    []string
}

// readTree reads the manifests of root (the tree at the source path).
// prev, when set, is the index of an earlier snapshot of the same source:
// folders whose tree did not change are taken from it, and files whose
// blob did not change keep its hash and, when retained, its contents.
func readTree(st storer.EncodedObjectStorer, root *object.Tree, known map[plumbing.Hash]*object.Tree, opts manifest.LoadOptions, prev *index, reads *atomic.Int64) (*index, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = manifest.DefaultMaxFileSize
	}
	if opts.SizeSetting == "" {
		opts.SizeSetting = manifest.DefaultSizeSetting
	}
	r := &treeReader{
		st:     st,
		opts:   opts,
		prev:   prev,
		reads:  reads,
		root:   root,
		parsed: known,
		trees:  map[plumbing.Hash]*object.Tree{root.Hash: root},
		dirs:   map[string]span{},
	}
	if err := r.loadIgnore(); err != nil {
		return nil, err
	}
	if prev != nil {
		r.files = make([]indexed, 0, len(prev.files)+16)
	}
	if prev != nil && prev.ignoreBlob != r.ignoreBlob {
		// Other rules select other files: only the hashes of blobs carry over.
		r.prev = &index{files: prev.files, retained: prev.retained}
	}
	if err := r.walk("", root.Hash); err != nil {
		return nil, err
	}
	return &index{files: r.files, problems: r.problems, dirs: r.dirs, order: r.order, ignoreBlob: r.ignoreBlob, retained: true}, nil
}

// loadIgnore reads .no8signore at the root, through symlinks inside the
// root as the folder sources do, and builds its matcher with
// source.LoadIgnore so that the syntax is the same everywhere.
func (r *treeReader) loadIgnore() error {
	e, err := r.resolve(source.IgnoreFile)
	if errors.Is(err, syscall.ENOENT) {
		r.ignore = r.opts.Ignore
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", source.IgnoreFile, err)
	}
	if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
		return fmt.Errorf("read %s: %w", source.IgnoreFile, syscall.EISDIR)
	}
	data, _, err := r.readBlob(e.Hash, r.opts.MaxFileSize)
	if err != nil {
		return fmt.Errorf("read %s: %w", source.IgnoreFile, err)
	}
	if data == nil {
		return fmt.Errorf("read %s: over the limit of %d bytes (%s)", source.IgnoreFile, r.opts.MaxFileSize, r.opts.SizeSetting)
	}
	match, err := source.LoadIgnore(oneFile(data))
	if err != nil {
		return err
	}
	r.ignoreBlob = e.Hash
	prev := r.opts.Ignore
	r.ignore = func(p string, isDir bool) bool {
		return match(p, isDir) || (prev != nil && prev(p, isDir))
	}
	return nil
}

// oneFile is an fs.FS holding only the ignore file, to hand its content to
// source.LoadIgnore.
type oneFile []byte

func (f oneFile) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
}

func (f oneFile) ReadFile(name string) ([]byte, error) {
	if name != source.IgnoreFile {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return f, nil
}

// walk reads the folder dir ("" for the root) whose tree is h, in the
// order fs.WalkDir visits a checked-out copy: entries sorted by name,
// depth first.
func (r *treeReader) walk(dir string, h plumbing.Hash) error {
	if r.prev != nil && r.prev.dirs != nil {
		if sp, ok := r.prev.dirs[dir]; ok && sp.tree == h && !sp.followsLinks {
			return r.takeOver(sp)
		}
	}
	t, err := r.tree(h)
	if err != nil {
		return fmt.Errorf("read folder %q: %w", dir, err)
	}
	entries := t.Entries
	// Git sorts a folder as if its name ended in "/"; fs.WalkDir sorts by
	// name. Files come out in the latter order, as from a folder. The two
	// differ only around folders whose name another's begins with.
	if !slices.IsSortedFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(a.Name, b.Name) }) {
		entries = slices.Clone(entries)
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	}
	sp := span{tree: h, files: [2]int{len(r.files)}, problems: [2]int{len(r.problems)}, dirs: [2]int{len(r.order)}}
	r.order = append(r.order, dir)
	for _, e := range entries {
		p := e.Name
		if dir != "" {
			p = dir + "/" + e.Name
		}
		isDir := e.Mode == filemode.Dir
		if e.Mode == filemode.Submodule || strings.HasPrefix(e.Name, ".") || (r.ignore != nil && r.ignore(p, isDir)) {
			continue
		}
		if isDir {
			if err := r.walk(p, e.Hash); err != nil {
				return err
			}
			sp.followsLinks = sp.followsLinks || r.dirs[p].followsLinks
			continue
		}
		if !manifest.IsManifestFile(p) {
			continue
		}
		if e.Mode == filemode.Symlink {
			sp.followsLinks = true
			if err := r.symlink(p, e.Hash); err != nil {
				return err
			}
			continue
		}
		if err := r.file(p, e.Hash); err != nil {
			return err
		}
	}
	sp.files[1], sp.problems[1], sp.dirs[1] = len(r.files), len(r.problems), len(r.order)
	r.dirs[dir] = sp
	return nil
}

// takeOver copies an unchanged folder's results, and the spans of the
// folders under it, from the previous index. Contents that were not
// retained are read again; their hashes are not computed again.
func (r *treeReader) takeOver(sp span) error {
	fshift := len(r.files) - sp.files[0]
	pshift := len(r.problems) - sp.problems[0]
	dshift := len(r.order) - sp.dirs[0]
	for _, f := range r.prev.files[sp.files[0]:sp.files[1]] {
		if f.file.Data == nil {
			data, _, err := r.readBlob(f.blob, -1)
			if err != nil {
				return fmt.Errorf("read %s: %w", f.file.Path, err)
			}
			f.file.Data = data
		}
		r.files = append(r.files, f)
	}
	r.problems = append(r.problems, r.prev.problems[sp.problems[0]:sp.problems[1]]...)
	for _, d := range r.prev.order[sp.dirs[0]:sp.dirs[1]] {
		s := r.prev.dirs[d]
		s.files[0] += fshift
		s.files[1] += fshift
		s.problems[0] += pshift
		s.problems[1] += pshift
		s.dirs[0] += dshift
		s.dirs[1] += dshift
		r.dirs[d] = s
		r.order = append(r.order, d)
	}
	return nil
}

// file reads the regular file p from blob h, or takes it from the previous
// index when the blob is one it already read.
func (r *treeReader) file(p string, h plumbing.Hash) error {
	if f, ok := r.known(h, dirOf(p)); ok {
		if f.Data == nil {
			data, _, err := r.readBlob(h, -1)
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			f.Data = data
		}
		f.Path = p
		r.files = append(r.files, indexed{file: f, blob: h})
		return nil
	}
	data, size, err := r.readBlob(h, r.opts.MaxFileSize)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if data == nil {
		r.problem(p, manifest.FileTooLarge(size, r.opts.MaxFileSize, r.opts.SizeSetting))
		return nil
	}
	r.files = append(r.files, indexed{file: manifest.File{Path: p, Data: data, Hash: manifest.HashJSON(data)}, blob: h})
	return nil
}

// known returns the file the previous index read from blob h, if any.
// It looks among the files the folder dir held before, where an unchanged
// file is, so that a commit changing one file of a folder costs a map of
// that folder and not of the whole tree; a folder new to the index (or
// every folder, when the rules changed) looks everywhere.
func (r *treeReader) known(h plumbing.Hash, dir string) (manifest.File, bool) {
	if r.prev == nil || len(r.prev.files) == 0 {
		return manifest.File{}, false
	}
	// Files come in the order they came last time: the one after the
	// last found is most often the one. Any file of that blob will do.
	i := r.next
	if i >= len(r.prev.files) || r.prev.files[i].blob != h {
		var ok bool
		if i, ok = r.blobsOf(dir)[h]; !ok {
			return manifest.File{}, false
		}
	}
	r.next = i + 1
	f := r.prev.files[i].file
	if !r.prev.retained {
		f.Data = nil
	}
	return f, true
}

// blobsOf maps the blobs of the previous index's files under dir, or of
// all its files when it did not have dir, to their position.
func (r *treeReader) blobsOf(dir string) map[plumbing.Hash]int {
	sp, ok := r.prev.dirs[dir]
	if !ok {
		if r.byBlob == nil {
			r.byBlob = blobPositions(r.prev.files, 0)
		}
		return r.byBlob
	}
	if r.byDir == nil {
		r.byDir = map[string]map[plumbing.Hash]int{}
	}
	m, ok := r.byDir[dir]
	if !ok {
		m = blobPositions(r.prev.files[sp.files[0]:sp.files[1]], sp.files[0])
		r.byDir[dir] = m
	}
	return m
}

// dirOf is the folder of the slash-separated path p, "" for the root.
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// blobPositions maps the blobs of files to their position plus offset.
func blobPositions(files []indexed, offset int) map[plumbing.Hash]int {
	m := make(map[plumbing.Hash]int, len(files))
	for i, f := range files {
		m[f.blob] = offset + i
	}
	return m
}

// symlink reads the link p (blob h) the way manifest.ReadTree does through
// an os.Root: a link leaving the root, dangling or to a folder is a
// problem; otherwise the file it leads to is read under the link's name.
func (r *treeReader) symlink(p string, h plumbing.Hash) error {
	target, _, err := r.readBlob(h, 4096)
	if err != nil {
		return fmt.Errorf("read link %s: %w", p, err)
	}
	if target == nil {
		r.problem(p, "cannot follow symlink: "+syscall.ENAMETOOLONG.Error())
		return nil
	}
	to := string(target)
	joined := path.Clean(path.Join(path.Dir(p), to))
	if path.IsAbs(to) || joined == ".." || strings.HasPrefix(joined, "../") {
		r.problem(p, fmt.Sprintf("symlink points outside the source root (-> %s)", manifest.QuotePath(to)))
		return nil
	}
	e, err := r.resolve(joined)
	if err != nil {
		r.problem(p, fmt.Sprintf("cannot follow symlink: %v", err))
		return nil
	}
	if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
		r.problem(p, "symlink to a folder: folders are not followed through links")
		return nil
	}
	return r.file(p, e.Hash)
}

func (r *treeReader) problem(p, msg string) {
	r.problems = append(r.problems, manifest.Problem{File: p, Message: msg})
}

// resolve finds the entry at the slash-separated path p under the root,
// following symlinks (in the middle of the path too) as long as they stay
// under the root. Errors are syscall errors, as os.Root reports them.
func (r *treeReader) resolve(p string) (object.TreeEntry, error) {
	parts := strings.Split(p, "/")
	var (
		dirs []*object.Tree // the folders walked so far, root first
		hops int
	)
	dirs = append(dirs, r.root)
	for i := 0; i < len(parts); i++ {
		name := parts[i]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(dirs) == 1 {
				return object.TreeEntry{}, errPathEscapes
			}
			dirs = dirs[:len(dirs)-1]
			continue
		}
		cur := dirs[len(dirs)-1]
		e, err := cur.FindEntry(name)
		if err != nil {
			return object.TreeEntry{}, syscall.ENOENT
		}
		last := i == len(parts)-1
		switch e.Mode {
		case filemode.Symlink:
			hops++
			if hops > maxLinkHops {
				return object.TreeEntry{}, syscall.ELOOP
			}
			target, _, err := r.readBlob(e.Hash, 4096)
			if err != nil {
				return object.TreeEntry{}, err
			}
			if target == nil {
				return object.TreeEntry{}, syscall.ENAMETOOLONG
			}
			to := string(target)
			if path.IsAbs(to) {
				return object.TreeEntry{}, errPathEscapes
			}
			// Go on with the link's target in place of its name.
			rest := append(strings.Split(to, "/"), parts[i+1:]...)
			parts = append(parts[:i:i], rest...)
			i--
			continue
		case filemode.Dir:
			t, err := r.tree(e.Hash)
			if err != nil {
				return object.TreeEntry{}, err
			}
			if last {
				return *e, nil
			}
			dirs = append(dirs, t)
		default:
			if last {
				return *e, nil
			}
			return object.TreeEntry{}, syscall.ENOTDIR
		}
	}
	// The path named a folder (the root included).
	return object.TreeEntry{Name: path.Base(p), Mode: filemode.Dir, Hash: dirs[len(dirs)-1].Hash}, nil
}

// tree decodes the tree h once per read.
func (r *treeReader) tree(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := r.trees[h]; ok {
		return t, nil
	}
	if t, ok := r.parsed[h]; ok {
		r.trees[h] = t
		return t, nil
	}
	t, err := object.GetTree(r.st, h)
	if err != nil {
		return nil, err
	}
	r.trees[h] = t
	return t, nil
}

// readBlob reads blob h whole, unless it is larger than limit (when limit
// is not negative): then it returns nil and the blob's size, having read
// nothing but its header.
func (r *treeReader) readBlob(h plumbing.Hash, limit int64) ([]byte, int64, error) {
	if limit >= 0 {
		if sized, ok := r.st.(interface {
			EncodedObjectSize(plumbing.Hash) (int64, error)
		}); ok {
			size, err := sized.EncodedObjectSize(h)
			if err != nil {
				return nil, 0, fmt.Errorf("blob %s: %w", h, err)
			}
			if size > limit {
				return nil, size, nil
			}
		}
	}
	if r.reads != nil {
		r.reads.Add(1)
	}
	obj, err := r.st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", h, err)
	}
	size := obj.Size()
	if limit >= 0 && size > limit {
		return nil, size, nil
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", h, err)
	}
	defer rd.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(rd, data); err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", h, err)
	}
	return data, size, nil
}
