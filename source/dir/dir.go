// Package dir is the source that reads manifests from a local folder and
// watches it with fsnotify, so that an edit is synced within moments instead
// of at the next interval.
package dir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// DefaultDebounce is how long Watch waits after the last event of a burst
// before it signals: long enough that an editor's save or a `git checkout`
// is seen as one change, short enough to feel immediate.
const DefaultDebounce = 100 * time.Millisecond

// maxDelayFactor bounds how long a continuous stream of events (say, a tool
// rewriting a file in the tree every few milliseconds) can postpone the
// signal: at most this many debounce periods after the burst began.
const maxDelayFactor = 10

// Config configures a folder source.
type Config struct {
	// Name is the source's configured name.
	Name string
	// Path is the folder to read; a relative path is taken from the current
	// working directory when New is called.
	Path string
	// Load bounds the files read.
	Load manifest.LoadOptions
	// Debounce is the quiet time after the last file event before Watch
	// signals; zero means DefaultDebounce.
	Debounce time.Duration
	// Logger receives watcher errors; nil means slog.Default().
	Logger *slog.Logger
}

// Source reads a folder. It is safe for concurrent use.
type Source struct {
	name     string
	path     string // absolute
	load     manifest.LoadOptions
	debounce time.Duration
	log      *slog.Logger
}

var (
	_ source.Source  = (*Source)(nil)
	_ source.Watcher = (*Source)(nil)
)

// New returns a source for cfg. The folder need not exist yet: Fetch reports
// source.ErrNotFound until it does.
func New(cfg Config) (*Source, error) {
	if cfg.Name == "" {
		return nil, errors.New("dir source: name is required")
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("dir source %s: path is required", cfg.Name)
	}
	// Resolve now so that a later change of working directory cannot move
	// the source, and so that status shows where it really reads.
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("dir source %s: resolve path: %w", cfg.Name, err)
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Source{
		name:     cfg.Name,
		path:     abs,
		load:     cfg.Load,
		debounce: cfg.Debounce,
		log:      cfg.Logger.With("source", cfg.Name, "kind", source.KindDir),
	}, nil
}

// Name returns the configured name.
func (s *Source) Name() string { return s.name }

// Kind returns source.KindDir.
func (s *Source) Kind() string { return source.KindDir }

// Location returns the absolute path of the folder.
func (s *Source) Location() string { return s.path }

// Path returns "": the folder itself is the root of the manifests.
func (s *Source) Path() string { return "" }

// Fetch reads every manifest file of the folder. The read goes through an
// os.Root, so symlinks cannot lead outside the folder; such links and other
// unusable files come back as Problems. The revision is a digest of the
// manifest files only, so editing a README or a dot-file does not make a new
// revision. A missing folder is an error wrapping source.ErrNotFound.
func (s *Source) Fetch(ctx context.Context) (*source.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dir source %s: folder %s: %w", s.name, s.path, source.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("dir source %s: open folder: %w", s.name, err)
	}
	defer root.Close()
	files, problems, err := source.ReadTree(manifest.RootFS(root), s.load)
	if err != nil {
		return nil, fmt.Errorf("dir source %s: %w", s.name, err)
	}
	links, err := s.folderLinks(root.FS())
	if err != nil {
		return nil, fmt.Errorf("dir source %s: %w", s.name, err)
	}
	if len(links) > 0 {
		problems = append(problems, links...)
		manifest.SortProblems(problems)
	}
	return &source.Snapshot{
		Revision: source.DigestRevision(files, problems),
		Files:    files,
		Problems: problems,
	}, nil
}

// Watch watches the folder tree and sends on the returned channel after
// each burst of changes. Sub-folders created later are watched as they
// appear; dot-folders are not watched, since their content is never read.
//
// A folder that does not exist yet, or that is removed or renamed while
// watched, is waited for: the nearest existing parent folder is watched
// instead, one level down each time a folder on the way appears, and a
// signal is sent when the folder itself appears, so that it is synced at
// once rather than at the next interval. Its removal is signalled too, so
// that the reader fetches and records the folder as missing.
//
// The channel has room for one signal and sends never block: a signal that
// finds the channel full is merged with the one already waiting, so a slow
// reader sees one signal for many changes and should Fetch once per signal.
// The channel is closed when ctx is done or when the watcher fails.
func (s *Source) Watch(ctx context.Context) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("dir source %s: start watcher: %w", s.name, err)
	}
	present, err := s.arm(w)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("dir source %s: watch: %w", s.name, err)
	}
	if !present {
		s.log.Info("source folder does not exist; waiting for it to appear", "path", s.path)
	}
	ch := make(chan struct{}, 1)
	go s.loop(ctx, w, ch, present)
	return ch, nil
}

// arm sets the watches for the folder's current state: the whole tree when
// the folder exists (present), otherwise only its nearest existing parent.
// A folder on the way that appears while arm adds a watch raised no event
// for that watch, so arm looks again after each watch it adds.
func (s *Source) arm(w *fsnotify.Watcher) (present bool, err error) {
	for _, p := range w.WatchList() {
		_ = w.Remove(p) // gone already, or watched under a stale name
	}
	watched := ""
	for {
		dir := nearestFolder(s.path)
		if dir == s.path {
			if watched != "" {
				_ = w.Remove(watched)
			}
			return true, s.addTree(w, s.path)
		}
		if dir == watched {
			return false, nil
		}
		if err := w.Add(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile: look again
			}
			return false, fmt.Errorf("watch %s, the nearest parent of %s: %w", dir, s.path, err)
		}
		if watched != "" {
			_ = w.Remove(watched)
		}
		watched = dir
	}
}

// nearestFolder returns path when it is a folder, or else its nearest
// ancestor that is one. The root of the file system always is.
func nearestFolder(path string) string {
	for {
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}

// loop owns the watcher: it alone reads its channels, adds watches and
// closes it, so no locking is needed. present says whether the folder
// itself is watched, or only a parent while waiting for it.
func (s *Source) loop(ctx context.Context, w *fsnotify.Watcher, ch chan struct{}, present bool) {
	defer close(ch)
	defer w.Close()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var burstStart time.Time // zero when no signal is pending

	// changed arms the debounce timer; within a burst each event pushes the
	// signal back, up to maxDelayFactor debounce periods after the first.
	changed := func() {
		now := time.Now()
		if burstStart.IsZero() {
			burstStart = now
		}
		wait := s.debounce
		if limit := burstStart.Add(maxDelayFactor * s.debounce); now.Add(wait).After(limit) {
			wait = max(limit.Sub(now), 0)
		}
		// Since Go 1.23 Reset discards a pending expiry, so no drain is needed.
		timer.Reset(wait)
	}
	signal := func() {
		burstStart = time.Time{}
		select {
		case ch <- struct{}{}:
		default: // a signal is already waiting; it covers this change too
		}
	}
	// rearm follows the folder appearing or disappearing.
	rearm := func() {
		was := present
		var err error
		present, err = s.arm(w)
		if err != nil {
			s.log.Error("cannot watch source folder", "path", s.path, "error", err)
		}
		switch {
		case present && !was:
			s.log.Info("source folder appeared; watching it", "path", s.path)
			changed()
		case !present && was:
			s.log.Error("source folder was removed or renamed; waiting for it to come back", "path", s.path)
			signal()
		case present:
			// Removed and back already: whatever it holds now is new.
			changed()
		}
	}

	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			signal()
		case ev, ok := <-w.Events:
			if !ok {
				s.log.Error("folder watcher stopped")
				return
			}
			if !present {
				// Only a parent is watched: anything in it may be a folder
				// on the way.
				rearm()
				continue
			}
			if ev.Name == s.path && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The kernel drops the watch with the folder (or keeps it on
				// the folder under its new name, which is no longer read).
				rearm()
				continue
			}
			if !s.relevant(ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				s.watchNew(w, ev.Name)
			}
			changed()
		case err, ok := <-w.Errors:
			if !ok {
				s.log.Error("folder watcher stopped")
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost, so something may have changed unseen.
				s.log.Warn("folder watcher lost events; rescanning", "error", err)
				if !present {
					rearm()
				}
				changed()
				continue
			}
			s.log.Error("folder watcher error", "error", err)
		}
	}
}

// folderLinks returns a problem for each symbolic link in the tree that
// leads to a folder outside the root, except under dot-folders and ignored
// paths. Links to manifest files are checked as they are read; a link to a
// folder is never followed, so without this the manifests it leads to would
// be left out without a word. A link to a folder inside the root loses
// nothing (that folder is read where it is) and is left alone.
func (s *Source) folderLinks(fsys fs.FS) ([]manifest.Problem, error) {
	ignore, err := source.LoadIgnore(fsys)
	if err != nil {
		return nil, err
	}
	root := s.rootReal()
	var problems []manifest.Problem
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil // the manifest reader reports unreadable folders
		}
		skip := strings.HasPrefix(d.Name(), ".") || (ignore != nil && ignore(p, d.IsDir()))
		switch {
		case skip && d.IsDir():
			return fs.SkipDir
		case skip, d.Type()&fs.ModeSymlink == 0, manifest.IsManifestFile(p):
			return nil
		}
		// The link is resolved outside the os.Root on purpose, to tell a
		// folder out of the root from a file, which is no manifest.
		real := filepath.Join(s.path, filepath.FromSlash(p))
		info, err := os.Stat(real)
		if err != nil || !info.IsDir() {
			return nil
		}
		out, err := filepath.EvalSymlinks(real)
		if err != nil {
			return nil
		}
		if rel, err := filepath.Rel(root, out); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
		target, _ := os.Readlink(real)
		problems = append(problems, manifest.Problem{File: p,
			Message: fmt.Sprintf("symlink points outside the source root (-> %s): a folder out of the root is never read", target)})
		return nil
	})
	return problems, err
}

// rootReal is the folder's path with symlinks resolved, to compare link
// targets with.
func (s *Source) rootReal() string {
	if p, err := filepath.EvalSymlinks(s.path); err == nil {
		return p
	}
	return s.path
}

// relevant reports whether a change at name can change a snapshot: paths
// under a dot-file or dot-folder are never read, except the ignore file at
// the root, which decides what is read.
func (s *Source) relevant(name string) bool {
	rel, err := filepath.Rel(s.path, name)
	if err != nil || rel == "." {
		return true
	}
	rel = filepath.ToSlash(rel)
	if rel == source.IgnoreFile {
		return true
	}
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// watchNew adds watches for a folder that has just appeared. Files and
// folders created in it before its watch was added raised no event; the
// caller signals a change after this, and the Fetch that follows reads them.
func (s *Source) watchNew(w *fsnotify.Watcher, name string) {
	info, err := os.Lstat(name)
	if err != nil || !info.IsDir() {
		return // a file, or already gone
	}
	if err := s.addTree(w, name); err != nil {
		s.log.Error("cannot watch new folder", "path", name, "error", err)
	}
}

// addTree watches dir and every folder below it, except dot-folders.
// Symlinked folders are not followed, matching what Fetch reads. A folder
// that vanishes during the walk is skipped: its removal raised an event.
func (s *Source) addTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != s.path && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if err := w.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return fmt.Errorf("watch %s: %w", p, err)
		}
		return nil
	})
}
