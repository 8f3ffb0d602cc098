package git

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-billy/v5"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Reading trees and writing objects for the local copy (see local.go). go-git
// decodes a tree entry by entry through a buffered reader, allocating every
// name, and its pack writer compresses at zlib's default level and parses
// the pack again to index it: for a folder of 10,000 files (a 400 KB tree)
// that is some 30 ms a commit, several times what the rest of a one-file
// commit costs. Here a tree is parsed in one pass over its bytes, and the
// objects a commit brings are written as loose objects, stored rather than
// compressed, each under the hash of the content written, so that an
// object never stands under a name its content does not have.

// errObjectMismatch means an object's content does not hash to the name it
// was read under: the remote's store is damaged or was tampered with.
var errObjectMismatch = errors.New("object content does not match its name")

// readRaw reads the whole content of object h of type typ from st.
func readRaw(st storer.EncodedObjectStorer, typ plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := st.EncodedObject(typ, h)
	if err != nil {
		return nil, err
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	data := make([]byte, obj.Size())
	if _, err := io.ReadFull(rd, data); err != nil {
		return nil, err
	}
	if plumbing.ComputeHash(typ, data) != h {
		return nil, fmt.Errorf("%s %s: %w", typ, h, errObjectMismatch)
	}
	return data, nil
}

// maxRawObject bounds the commits and trees read whole into memory from a
// local remote's loose objects: far more than the walk's bound on tree
// entries lets through.
const maxRawObject = 64 << 20

// readRemoteRaw reads the whole content of object h of type typ from the
// local remote r: from its loose object file when it has one, which costs
// one decompression and one hash (go-git's store hashes it three times),
// else from its store.
func readRemoteRaw(r *localRemote, typ plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	hex := h.String()
	f, err := r.files.open(filepath.Join("objects", hex[:2], hex[2:]), false)
	if errors.Is(err, iofs.ErrNotExist) {
		return readRaw(r.st, typ, h)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReaderSize(f, 32<<10))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", typ, h, err)
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 64)
	head, err := br.ReadSlice(0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: header: %w", typ, h, err)
	}
	kind, size, ok := strings.Cut(string(head[:len(head)-1]), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n < 0 || kind != typ.String() {
		return nil, fmt.Errorf("%s %s: header %q: %w", typ, h, head, plumbing.ErrObjectNotFound)
	}
	if n > maxRawObject {
		return nil, fmt.Errorf("%s %s: %d bytes, over %d", typ, h, n, maxRawObject)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(br, data); err != nil {
		return nil, fmt.Errorf("%s %s: %w", typ, h, err)
	}
	if extra, _ := br.Read(make([]byte, 1)); extra != 0 {
		return nil, fmt.Errorf("%s %s: longer than its header says", typ, h)
	}
	if plumbing.ComputeHash(typ, data) != h {
		return nil, fmt.Errorf("%s %s: %w", typ, h, errObjectMismatch)
	}
	return data, nil
}

// parseTree decodes the entries of tree h from its content. Names are
// slices of one string. Modes are read as git reads them (see
// canonicalMode). It refuses what git's fsck refuses and go-git would take:
// an empty name, or one holding a slash.
func parseTree(h plumbing.Hash, raw []byte) (*object.Tree, error) {
	bad := func(what string) error { return fmt.Errorf("tree %s: malformed entry: %s", h, what) }
	// Each entry takes at least 28 bytes: a mode digit, a space, a name
	// byte, the zero byte and the 20 of the hash.
	entries := make([]object.TreeEntry, 0, len(raw)/28)
	all := string(raw)
	for i := 0; i < len(all); {
		var mode uint64
		j := i
		for ; j < len(all) && all[j] != ' '; j++ {
			c := all[j]
			if c < '0' || c > '7' || j-i >= 11 {
				return nil, bad("mode")
			}
			mode = mode<<3 | uint64(c-'0')
		}
		if j == i || j == len(all) || mode > 1<<32-1 {
			return nil, bad("mode")
		}
		k := j + 1
		end := bytes.IndexByte(raw[k:], 0)
		if end <= 0 {
			return nil, bad("name")
		}
		name := all[k : k+end]
		for n := 0; n < len(name); n++ {
			if name[n] == '/' {
				return nil, bad("name with a slash")
			}
		}
		k += end + 1
		if len(all)-k < 20 {
			return nil, bad("hash")
		}
		var eh plumbing.Hash
		copy(eh[:], raw[k:k+20])
		entries = append(entries, object.TreeEntry{Name: name, Mode: canonicalMode(mode), Hash: eh})
		i = k + 20
	}
	return &object.Tree{Hash: h, Entries: entries}, nil
}

// canonicalMode is the mode git (and go-git) reads a tree entry's mode as:
// its type bits decide, and a file is executable or not.
func canonicalMode(mode uint64) filemode.FileMode {
	switch mode & 0o170000 {
	case 0o040000:
		return filemode.Dir
	case 0o100000:
		if mode&0o111 != 0 {
			return filemode.Executable
		}
		return filemode.Regular
	case 0o120000:
		return filemode.Symlink
	}
	return filemode.Submodule
}

// looseWriter writes objects into a clone's objects folder, one file each,
// as git writes a few objects: go-git's store finds them without listing
// or indexing anything again. They are stored, not compressed: a clone
// keeps them only until it starts over (see Source.looseBound).
type looseWriter struct {
	dir string // the objects folder
	zw  *zlib.Writer
	// objects and bytes count what was written.
	objects int
	bytes   int64
}

// add writes the object of type typ and size whose content r gives, under
// the name want, and fails, writing nothing, unless that content hashes to
// want. An object the folder has is not written again.
func (w *looseWriter) add(want plumbing.Hash, typ plumbing.ObjectType, size int64, r io.Reader) error {
	return w.write(want, typ, size, r, true)
}

// addRead writes content read by readRaw or readRemoteRaw, which checked
// that it hashes to want.
func (w *looseWriter) addRead(want plumbing.Hash, typ plumbing.ObjectType, content []byte) error {
	return w.write(want, typ, int64(len(content)), bytes.NewReader(content), false)
}

// write writes an object, checking its hash when check is set.
func (w *looseWriter) write(want plumbing.Hash, typ plumbing.ObjectType, size int64, r io.Reader, check bool) error {
	hex := want.String()
	final := filepath.Join(w.dir, hex[:2], hex[2:])
	if _, err := os.Lstat(final); err == nil {
		return nil
	}
	f, err := os.CreateTemp(w.dir, "tmp_obj_")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if w.zw == nil {
		if w.zw, err = zlib.NewWriterLevel(bw, zlib.NoCompression); err != nil {
			return err
		}
	} else {
		w.zw.Reset(bw)
	}
	head := append(typ.Bytes(), ' ')
	head = strconv.AppendInt(head, size, 10)
	head = append(head, 0)
	if _, err := w.zw.Write(head); err != nil {
		return err
	}
	var (
		h      plumbing.Hasher
		copied int64
	)
	if check {
		h = plumbing.NewHasher(typ, size)
		copied, err = io.Copy(io.MultiWriter(w.zw, h), r)
	} else {
		copied, err = io.Copy(w.zw, r)
	}
	if err != nil {
		return err
	}
	if copied != size {
		return fmt.Errorf("%s %s: read %d bytes of %d", typ, want, copied, size)
	}
	if check {
		if got := h.Sum(); got != want {
			return fmt.Errorf("%s %s: content hashes to %s: %w", typ, want, got, errObjectMismatch)
		}
	}
	if err := w.zw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return err
	}
	done = true
	w.objects++
	w.bytes += size
	return nil
}

// bufferedIndexes is the clone's folder as go-git's storage reads it, with
// pack indexes read through a buffer: go-git decodes an index four bytes at
// a time, a system call each, which for the packs a clone gathers costs
// more than the rest of a one-file fetch.
type bufferedIndexes struct{ billy.Filesystem }

// Open opens name, buffered when it is a pack index.
func (fs bufferedIndexes) Open(name string) (billy.File, error) {
	f, err := fs.Filesystem.Open(name)
	if err != nil || !strings.HasSuffix(name, ".idx") {
		return f, err
	}
	return &bufferedFile{File: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

// bufferedFile is a file read from start to end through a buffer.
type bufferedFile struct {
	billy.File
	r *bufio.Reader
}

// Read reads through the buffer.
func (f *bufferedFile) Read(b []byte) (int, error) { return f.r.Read(b) }
