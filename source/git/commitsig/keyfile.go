package commitsig

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"
)

// racyWindow is how long after its last modification a file is read again
// on every call. Within it a second write of the same size may keep the
// same modification time (coarse kernel clocks, or filesystems with
// second or two-second resolution), so an unchanged stat proves nothing.
const racyWindow = 2 * time.Second

// keyFile is a key file parsed into T, parsed again when it changes.
type keyFile[T any] struct {
	path  string
	parse func(path string, data []byte) (T, error)

	mu sync.Mutex
	// The last read, whether its parse succeeded or not: a broken file
	// keeps failing without being parsed again until it changes.
	stat   fs.FileInfo
	readAt time.Time
	sum    [sha256.Size]byte
	val    T
	err    error
}

func newKeyFile[T any](path string, parse func(string, []byte) (T, error)) *keyFile[T] {
	return &keyFile[T]{path: path, parse: parse}
}

// get returns the file's current parse, reading it again if it changed.
func (f *keyFile[T]) get() (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	info, err := os.Stat(f.path)
	if err != nil {
		return zero, f.readError(err)
	}
	if f.stat != nil && sameStat(f.stat, info) && f.readAt.Sub(lastChange(info)) > racyWindow {
		return f.val, f.err
	}
	// The stat is taken before the read, so a write between the two leaves
	// a stale stat that the next call sees differ, and it reads again.
	readAt := time.Now()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return zero, f.readError(err)
	}
	sum := sha256.Sum256(data)
	if f.stat == nil || sum != f.sum {
		val, perr := f.parse(f.path, data)
		f.val, f.err, f.sum = val, perr, sum
	}
	f.stat, f.readAt = info, readAt
	if f.err != nil {
		return zero, f.err
	}
	return f.val, nil
}

// readError names the file once: the os error would name it too.
func (f *keyFile[T]) readError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &FileError{Path: f.path, Err: err}
}

// sameStat reports whether two stats of the file show the same contents,
// as far as a stat can tell. The modification time alone proves nothing:
// cp -p, rsync -t or an archive's extraction rewrite a file in place and
// set it back; the change time they cannot. Where it is unknown, the file
// is read at every check (its digest spares the parse).
func sameStat(a, b fs.FileInfo) bool {
	ca, okA := changeTime(a)
	cb, okB := changeTime(b)
	return okA && okB && ca.Equal(cb) &&
		os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

// lastChange is the later of the file's modification and change times.
func lastChange(info fs.FileInfo) time.Time {
	t := info.ModTime()
	if c, ok := changeTime(info); ok && c.After(t) {
		t = c
	}
	return t
}

// splitLines splits a file into lines without their line endings, so that
// index i is line i+1.
func splitLines(data []byte) []string {
	data = bytes.TrimSuffix(data, []byte("\n"))
	if len(data) == 0 {
		return nil
	}
	lines := bytes.Split(data, []byte("\n"))
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(bytes.TrimSuffix(l, []byte("\r")))
	}
	return out
}
