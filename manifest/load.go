package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// DefaultMaxFileSize is the largest manifest file read by default: 1.5 MiB,
// etcd's request limit and so the largest object an API server stores, so
// that the large CRDs projects publish load as they are.
const DefaultMaxFileSize = 3 << 19

// DefaultSizeSetting names the setting that sets MaxFileSize, in messages.
const DefaultSizeSetting = "maxFileSize"

// LoadOptions control which files are read and how.
type LoadOptions struct {
	// MaxFileSize is the largest file read; zero means DefaultMaxFileSize.
	MaxFileSize int64
	// SizeSetting names the setting that sets MaxFileSize, so that the
	// problem of a file over it says what to raise; empty means
	// DefaultSizeSetting.
	SizeSetting string
	// Ignore, when set, skips paths (slash-separated, relative to the root)
	// for which it returns true; dot-files and dot-folders are always skipped.
	Ignore func(path string, isDir bool) bool
	// Decode bounds the decoding of each file.
	Decode DecodeOptions
}

// IsManifestFile reports whether a file name has a manifest extension.
func IsManifestFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// File is one manifest file of a tree, read whole.
type File struct {
	// Path is relative to the tree's root, with forward slashes.
	Path string
	// Data is the file's content.
	Data []byte
	// Hash is "sha256:<hex>" of Data; decoded documents are cached by it.
	Hash string
}

// ReadDir reads every manifest file under dir. Symlinks are followed only
// while they stay inside dir (enforced by os.Root, so chains of links cannot
// escape either). Files that cannot be used come back as problems, next to
// the good files; an error means the tree could not be read at all.
func ReadDir(dir string, opts LoadOptions) ([]File, []Problem, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open source root: %w", err)
	}
	defer root.Close()
	return ReadTree(RootFS(root), opts)
}

// RootFS returns the file system of root for ReadTree and Load. It is
// root.FS(), and it lets ReadTree open each folder once and read that
// folder's files through it: opening a file through an os.Root otherwise
// opens, checks and closes every folder on its path again, which costs more
// than the read itself when folders hold thousands of small files.
func RootFS(root *os.Root) fs.FS { return rootFS{FS: root.FS(), root: root} }

// rootFS is what RootFS returns.
type rootFS struct {
	fs.FS
	root *os.Root
}

// openFolder opens the folder dir of the root as a root of its own, which
// keeps the same confinement below it; the caller closes it.
func (r rootFS) openFolder(dir string) (*os.Root, error) { return r.root.OpenRoot(dir) }

// The embedding promotes only Open: the methods below keep root.FS()'s own
// Stat, ReadDir, ReadFile, ReadLink and Lstat in use.

// Stat is fs.Stat of root.FS().
func (r rootFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(r.FS, name) }

// ReadDir is fs.ReadDir of root.FS().
func (r rootFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(r.FS, name) }

// ReadFile is fs.ReadFile of root.FS().
func (r rootFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(r.FS, name) }

// ReadLink is fs.ReadLink of root.FS().
func (r rootFS) ReadLink(name string) (string, error) { return fs.ReadLink(r.FS, name) }

// Lstat is fs.Lstat of root.FS().
func (r rootFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(r.FS, name) }

// folderOpener is implemented by file systems that can open one of their
// folders to read many files of it (RootFS).
type folderOpener interface {
	openFolder(dir string) (*os.Root, error)
}

// folderReaders opens, once each, the folders of the files ReadTree reads
// directly (not through symlinks, which may lead to a sibling folder and are
// read through the whole tree). read reads a file through its folder when
// that folder is open, and through the whole tree otherwise; close closes
// the folders.
type folderReaders struct {
	fsys    fs.FS
	folders map[string]*openFolder
}

// openFolder is one folder opened for reading its files.
type openFolder struct {
	root *os.Root
	// dir is the folder itself, open, where files can be opened relative to
	// it without the os.File machinery (see readIn); nil where they cannot.
	dir *os.File
}

func openFolders(fsys fs.FS, paths []string) *folderReaders {
	fr := &folderReaders{fsys: fsys}
	opener, ok := fsys.(folderOpener)
	if !ok {
		return fr
	}
	fr.folders = map[string]*openFolder{}
	for _, p := range paths {
		dir := path.Dir(p)
		if _, done := fr.folders[dir]; done {
			continue
		}
		fr.folders[dir] = nil // read through fsys if it cannot be opened
		sub, err := opener.openFolder(dir)
		if err != nil {
			continue
		}
		f := &openFolder{root: sub}
		if d, err := sub.Open("."); err == nil {
			f.dir = d
		}
		fr.folders[dir] = f
	}
	return fr
}

// read reads the file at p up to limit bytes, as readLimited does.
func (fr *folderReaders) read(p string, limit sizeLimit) ([]byte, string) {
	f := fr.folders[path.Dir(p)]
	if f == nil {
		return readLimited(fr.fsys, p, limit)
	}
	if f.dir != nil {
		if data, msg, ok := readIn(f.dir, path.Base(p), limit); ok {
			return data, msg
		}
	}
	return readLimited(f.root.FS(), path.Base(p), limit)
}

func (fr *folderReaders) close() {
	for _, f := range fr.folders {
		if f == nil {
			continue
		}
		if f.dir != nil {
			f.dir.Close()
		}
		f.root.Close()
	}
}

// ReadTree reads every manifest file of fsys, in lexical order, skipping
// dot-files, dot-folders and ignored paths. See ReadDir. Files are read
// concurrently, so fsys must allow that (os.Root's and fstest's do).
func ReadTree(fsys fs.FS, opts LoadOptions) ([]File, []Problem, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	limit := sizeLimit{opts.MaxFileSize, cmp.Or(opts.SizeSetting, DefaultSizeSetting)}
	// The walk lists the files in order; reading and hashing them, most of
	// the work, is spread over GOMAXPROCS goroutines.
	type item struct {
		path    string
		problem string // set by the walk: the file is not read
		link    bool   // a symlink, read through the whole tree
		file    File
	}
	var items []item
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			items = append(items, item{path: p, problem: fmt.Sprintf("cannot read: %v", unwrapPath(err))})
			return nil
		}
		if p == "." {
			return nil
		}
		isDir := d.IsDir()
		if strings.HasPrefix(d.Name(), ".") || (opts.Ignore != nil && opts.Ignore(p, isDir)) {
			if isDir {
				return fs.SkipDir
			}
			return nil
		}
		if isDir || !IsManifestFile(p) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if msg := checkSymlink(fsys, p); msg != "" {
				items = append(items, item{path: p, problem: msg})
				return nil
			}
			items = append(items, item{path: p, link: true})
			return nil
		}
		items = append(items, item{path: p})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("walk source tree: %w", err)
	}
	var direct []string
	for _, it := range items {
		if it.problem == "" && !it.link {
			direct = append(direct, it.path)
		}
	}
	folders := openFolders(fsys, direct)
	defer folders.close()
	parallel(0, len(items), func(i int) {
		it := &items[i]
		if it.problem != "" {
			return
		}
		var (
			data []byte
			msg  string
		)
		if it.link {
			data, msg = readLimited(fsys, it.path, limit)
		} else {
			data, msg = folders.read(it.path, limit)
		}
		if msg != "" {
			it.problem = msg
			return
		}
		it.file = File{Path: it.path, Data: data, Hash: HashJSON(data)}
	})
	var (
		files = make([]File, 0, len(items))
		errs  problems
	)
	for _, it := range items {
		if it.problem != "" {
			errs.add(Problem{File: it.path, Message: it.problem})
			continue
		}
		files = append(files, it.file)
	}
	return files, errs, nil
}

// DecodeFiles decodes files. A file with a problem counts whole: none of its
// documents are returned, so it cannot half-apply.
func DecodeFiles(files []File, opts DecodeOptions) ([]*Document, []Problem) {
	var (
		docs []*Document
		errs []Problem
	)
	for _, f := range files {
		d, ps := DecodeFile(f.Path, f.Data, opts)
		if len(ps) > 0 {
			errs = append(errs, ps...)
			continue
		}
		docs = append(docs, d...)
	}
	return docs, errs
}

// LoadDir reads and decodes every manifest under dir: ReadDir, then
// DecodeFiles. Problems come back as a *ValidationError together with the
// documents of the good files; other errors mean the tree could not be read.
func LoadDir(dir string, opts LoadOptions) ([]*Document, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open source root: %w", err)
	}
	defer root.Close()
	return Load(RootFS(root), opts)
}

// Load reads and decodes every manifest file of fsys. See LoadDir.
func Load(fsys fs.FS, opts LoadOptions) ([]*Document, error) {
	files, errs, err := ReadTree(fsys, opts)
	if err != nil {
		return nil, err
	}
	if opts.Decode.MaxExpandedSize <= 0 {
		// A document may expand to what a file may hold.
		opts.Decode.MaxExpandedSize = opts.MaxFileSize
	}
	docs, ps := DecodeFiles(files, opts.Decode)
	errs = append(errs, ps...)
	return docs, problems(errs).err()
}

// checkSymlink returns a message when the link at p leads outside the root
// or nowhere, and "" when it may be read.
func checkSymlink(fsys fs.FS, p string) string {
	if target, err := fs.ReadLink(fsys, p); err == nil {
		if path.IsAbs(target) || strings.HasPrefix(path.Clean(path.Join(path.Dir(p), target)), "../") ||
			path.Clean(path.Join(path.Dir(p), target)) == ".." {
			return fmt.Sprintf("symlink points outside the source root (-> %s)", QuotePath(target))
		}
	}
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return fmt.Sprintf("cannot follow symlink: %v", unwrapPath(err))
	}
	if info.IsDir() {
		return "symlink to a folder: folders are not followed through links"
	}
	return ""
}

// sizeLimit is the largest file read, and the setting that sets it.
type sizeLimit struct {
	max     int64
	setting string
}

// refuse is the problem of a file of size bytes (-1: unknown, but more
// than the limit) over the limit.
func (l sizeLimit) refuse(size int64) string { return FileTooLarge(size, l.max, l.setting) }

// FileTooLarge is the problem of a file of size bytes (-1 when only known
// to be more than limit) over the limit that setting sets, for every
// reader of manifest files to say alike.
func FileTooLarge(size, limit int64, setting string) string {
	if size < 0 {
		return fmt.Sprintf("file is over the limit of %d bytes (%s)", limit, setting)
	}
	return fmt.Sprintf("file is %d bytes, over the limit of %d bytes (%s)", size, limit, setting)
}

// readLimited reads a file up to limit bytes; a larger file is refused whole
// without being read into memory.
func readLimited(fsys fs.FS, p string, l sizeLimit) ([]byte, string) {
	limit := l.max
	f, err := fsys.Open(p)
	if err != nil {
		return nil, fmt.Sprintf("cannot read: %v", unwrapPath(err))
	}
	defer f.Close()
	size := int64(-1)
	if info, err := f.Stat(); err == nil {
		if info.Size() > limit {
			return nil, l.refuse(info.Size())
		}
		size = info.Size()
	}
	var data []byte
	if size >= 0 {
		// Read into a buffer of the size the file says it has, plus one
		// byte to see the end: no regrowing. The limit still holds if the
		// file grew since.
		data, err = readAllInto(io.LimitReader(f, limit+1), make([]byte, 0, size+1))
	} else {
		data, err = io.ReadAll(io.LimitReader(f, limit+1))
	}
	if err != nil {
		return nil, fmt.Sprintf("cannot read: %v", unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, l.refuse(-1)
	}
	return data, ""
}

// readAllInto is io.ReadAll appending to buf.
func readAllInto(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// unwrapPath drops the path from a *fs.PathError, which the Problem names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
