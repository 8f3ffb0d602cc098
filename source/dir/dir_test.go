package dir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// deadline bounds every wait for a signal; generous because CI machines
// under -race can be slow, while a passing run never waits this long.
const deadline = 2 * time.Second

const doc = "apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: %s}\nspec: {size: %d}\n"

func newSource(t *testing.T, path string) *Source {
	t.Helper()
	s, err := New(Config{Name: "local", Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func watch(t *testing.T, s *Source) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed instead of signalling", what)
		}
	case <-time.After(deadline):
		t.Fatalf("%s: no signal within %v", what, deadline)
	}
}

func fetch(t *testing.T, s *Source) *source.Snapshot {
	t.Helper()
	snap, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func paths(snap *source.Snapshot) []string {
	var ps []string
	for _, f := range snap.Files {
		ps = append(ps, f.Path)
	}
	return ps
}

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Path: "x"}); err == nil {
		t.Error("New without a name: want an error")
	}
	if _, err := New(Config{Name: "x"}); err == nil {
		t.Error("New without a path: want an error")
	}
	s, err := New(Config{Name: "local", Path: "rel/folder"})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(s.Location()) || !strings.HasSuffix(s.Location(), filepath.FromSlash("rel/folder")) {
		t.Errorf("Location = %q, want an absolute path ending in rel/folder", s.Location())
	}
	if s.Name() != "local" || s.Kind() != source.KindDir || s.Path() != "" || s.debounce != DefaultDebounce {
		t.Errorf("got name %q kind %q path %q debounce %v", s.Name(), s.Kind(), s.Path(), s.debounce)
	}
}

func TestWatchSignalsOnWrite(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newSource(t, root)
	ch := watch(t, s)
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	waitSignal(t, ch, "write at the root")
}

func TestWatchNewSubfolders(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newSource(t, root)
	ch := watch(t, s)

	write(t, filepath.Join(root, "team", "db.yaml"), fmt.Sprintf(doc, "a", 1))
	waitSignal(t, ch, "file in a new sub-folder")
	if got := paths(fetch(t, s)); len(got) != 1 || got[0] != "team/db.yaml" {
		t.Fatalf("files = %v, want [team/db.yaml]", got)
	}

	// Created in one go, before the watcher can add the inner folders: the
	// signal after adding them covers the file already there.
	write(t, filepath.Join(root, "a", "b", "c", "deep.yaml"), fmt.Sprintf(doc, "b", 1))
	waitSignal(t, ch, "file in a nested new folder")

	// Now the nested folder is watched: a later write there is seen too.
	write(t, filepath.Join(root, "a", "b", "c", "later.yaml"), fmt.Sprintf(doc, "c", 1))
	waitSignal(t, ch, "write in a folder added by the watcher")
	if got := paths(fetch(t, s)); len(got) != 3 {
		t.Fatalf("files = %v, want three", got)
	}
}

func TestWatchDebouncesBursts(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newSource(t, root)
	ch := watch(t, s)

	for i := range 50 {
		write(t, filepath.Join(root, fmt.Sprintf("f%02d.yaml", i)), fmt.Sprintf(doc, fmt.Sprint("r", i), i))
	}
	waitSignal(t, ch, "burst")
	signals := 1
	// Count further signals until the folder has been quiet for several
	// debounce periods; a signal still pending would arrive by then.
	for quiet := false; !quiet; {
		select {
		case <-ch:
			signals++
		case <-time.After(5 * DefaultDebounce):
			quiet = true
		}
	}
	if signals >= 5 {
		t.Errorf("50 writes gave %d signals, want fewer than 5", signals)
	}
	if got := len(fetch(t, s).Files); got != 50 {
		t.Errorf("Fetch after the burst read %d files, want 50", got)
	}
}

func TestWatchSkipsDotFolders(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, filepath.Join(root, ".git", "HEAD"), "ref: refs/heads/main\n")
	s := newSource(t, root)
	ch := watch(t, s)
	write(t, filepath.Join(root, ".git", "HEAD"), "ref: refs/heads/other\n")
	write(t, filepath.Join(root, ".cache.yaml"), "x: 1\n")
	// A signal for these would come one debounce period after the last
	// write; waiting five shows none is coming.
	select {
	case <-ch:
		t.Fatal("writes to dot-files and dot-folders signalled a change")
	case <-time.After(5 * DefaultDebounce):
	}
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	waitSignal(t, ch, "manifest write after dot-file writes")
}

func TestWatchCancelClosesChannel(t *testing.T) {
	t.Parallel()
	s := newSource(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	timeout := time.After(deadline)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("channel still open %v after cancel", deadline)
		}
	}
}

// TestWatchRootRemovedAndBack shows that a removed folder is signalled, so
// the reader records it missing, and that its return is watched and
// signalled too, with changes inside it afterwards.
func TestWatchRootRemovedAndBack(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	s := newSource(t, root)
	ch := watch(t, s)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "folder removed")
	if _, err := s.Fetch(context.Background()); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("Fetch after removal: %v, want ErrNotFound", err)
	}
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "b", 1))
	waitSignal(t, ch, "folder back")
	if snap := fetch(t, s); len(snap.Files) != 1 {
		t.Fatalf("files after the folder came back = %v", paths(snap))
	}
	write(t, filepath.Join(root, "more", "db.yaml"), fmt.Sprintf(doc, "c", 1))
	waitSignal(t, ch, "write in the folder that came back")
}

// TestWatchMissingFolder shows that a folder missing when the watch starts
// is waited for, through parents that do not exist yet either, and
// signalled when it appears.
func TestWatchMissingFolder(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "a", "b", "src")
	s := newSource(t, root)
	ch := watch(t, s)
	if err := os.MkdirAll(filepath.Join(base, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "folder created")
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	waitSignal(t, ch, "file written in the new folder")
	if snap := fetch(t, s); len(snap.Files) != 1 {
		t.Fatalf("files = %v, want db.yaml", paths(snap))
	}
}

// TestFetchFolderLinks shows that links to folders out of the root are
// errors for that file rather than silently skipped, and that links to
// folders inside it (read where they are) and to other files, which are no
// manifests, are left alone.
func TestFetchFolderLinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.yaml"), fmt.Sprintf(doc, "s", 1))
	write(t, filepath.Join(outside, "LICENSE"), "text")
	root := t.TempDir()
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	write(t, filepath.Join(root, "inner", "x.yaml"), fmt.Sprintf(doc, "x", 1))
	for link, target := range map[string]string{
		"escape":       outside,
		"up":           "..",
		"again":        "inner",
		"LICENSE":      filepath.Join(outside, "LICENSE"),
		".hidden":      outside,
		"inner/.other": outside,
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	snap := fetch(t, newSource(t, root))
	if got := paths(snap); len(got) != 2 {
		t.Errorf("files = %v, want db.yaml and inner/x.yaml, once each", got)
	}
	want := map[string]string{"escape": "outside the source root", "up": "outside the source root"}
	if len(snap.Problems) != len(want) {
		t.Fatalf("problems = %+v, want one per folder link: %v", snap.Problems, want)
	}
	for _, p := range snap.Problems {
		if !strings.Contains(p.Message, want[p.File]) {
			t.Errorf("problem %s, want it to say %q", p, want[p.File])
		}
	}
}

// TestWatchFolderLinkAddedLater shows that a link out of the root added
// while watched is signalled and changes the revision, with a problem that
// names it, so that the sync reports it.
func TestWatchFolderLinkAddedLater(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.yaml"), fmt.Sprintf(doc, "s", 1))
	root := t.TempDir()
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	s := newSource(t, root)
	ch := watch(t, s)
	before := fetch(t, s)
	if err := os.Symlink(outside, filepath.Join(root, "team")); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "link added")
	after := fetch(t, s)
	if after.Revision == before.Revision {
		t.Fatal("a link out of the root kept the revision: no sync would see it")
	}
	if len(after.Problems) != 1 || after.Problems[0].File != "team" || !strings.Contains(after.Problems[0].Message, "outside the source root") {
		t.Fatalf("problems = %+v, want one for team", after.Problems)
	}
}

func TestFetchRevision(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newSource(t, root)
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	write(t, filepath.Join(root, "README.md"), "# infra\n")
	write(t, filepath.Join(root, ".notes.yaml"), "x: 1\n")

	first := fetch(t, s)
	if !strings.HasPrefix(first.Revision.String(), "sha256:") || first.Commit != (manifest.Commit{}) {
		t.Fatalf("revision %q commit %+v, want sha256:... and no commit", first.Revision, first.Commit)
	}
	if got := paths(first); len(got) != 1 || got[0] != "db.yaml" {
		t.Fatalf("files = %v, want [db.yaml]", got)
	}
	if again := fetch(t, s); again.Revision != first.Revision {
		t.Errorf("unchanged folder: revision %s then %s", first.Revision, again.Revision)
	}

	write(t, filepath.Join(root, "README.md"), "# infra, edited\n")
	if got := fetch(t, s).Revision; got != first.Revision {
		t.Errorf("README.md edit changed the revision to %s", got)
	}
	write(t, filepath.Join(root, ".notes.yaml"), "x: 2\n")
	if got := fetch(t, s).Revision; got != first.Revision {
		t.Errorf("dot-file edit changed the revision to %s", got)
	}

	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 2))
	if got := fetch(t, s).Revision; got == first.Revision {
		t.Error("manifest edit kept the revision")
	}
}

func TestFetchIgnoreFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	write(t, filepath.Join(root, "drafts", "wip.yaml"), fmt.Sprintf(doc, "b", 1))
	s := newSource(t, root)
	before := fetch(t, s)
	if len(before.Files) != 2 {
		t.Fatalf("files = %v, want two", paths(before))
	}
	write(t, filepath.Join(root, source.IgnoreFile), "# work in progress\ndrafts/\n")
	after := fetch(t, s)
	if got := paths(after); len(got) != 1 || got[0] != "db.yaml" {
		t.Fatalf("files = %v, want [db.yaml]", got)
	}
	if after.Revision == before.Revision {
		t.Error("ignoring a folder kept the revision")
	}
}

func TestFetchSymlinkOutOfRoot(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.yaml"), fmt.Sprintf(doc, "s", 1))
	root := t.TempDir()
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(root, "abs.yaml")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, filepath.Join(outside, "secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(root, "rel.yaml")); err != nil {
		t.Fatal(err)
	}
	snap := fetch(t, newSource(t, root))
	if got := paths(snap); len(got) != 1 || got[0] != "db.yaml" {
		t.Errorf("files = %v, want only [db.yaml]", got)
	}
	if len(snap.Problems) != 2 {
		t.Fatalf("problems = %+v, want one per link", snap.Problems)
	}
	for _, p := range snap.Problems {
		if !strings.Contains(p.Message, "outside the source root") {
			t.Errorf("problem %s does not say the link leaves the root", p)
		}
	}
}

func TestFetchMissingFolder(t *testing.T) {
	t.Parallel()
	s := newSource(t, filepath.Join(t.TempDir(), "nope"))
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Fetch of a missing folder: %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "nope") {
		t.Errorf("error %q does not name the folder", err)
	}
}

func TestFetchCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newSource(t, t.TempDir()).Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch with a cancelled context: %v", err)
	}
}

func BenchmarkFetch(b *testing.B) {
	root := b.TempDir()
	for f := range 100 {
		var sb strings.Builder
		for d := range 100 {
			if d > 0 {
				sb.WriteString("---\n")
			}
			fmt.Fprintf(&sb, doc, fmt.Sprintf("r-%03d-%03d", f, d), d)
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d.yaml", f)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, err := New(Config{Name: "bench", Path: root})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		snap, err := s.Fetch(ctx)
		if err != nil || len(snap.Files) != 100 {
			b.Fatalf("Fetch: %d files, %v", len(snap.Files), err)
		}
	}
}

// TestFetchFileSizeLimit: a folder source reads files up to its maxFileSize,
// 1.5 MiB unless set; a larger file is a problem naming its size and the
// setting, the other files are read.
func TestFetchFileSizeLimit(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, filepath.Join(root, "db.yaml"), fmt.Sprintf(doc, "a", 1))
	big := fmt.Sprintf(doc, "big", 1) + "#" + strings.Repeat("x", 1_600_000-len(fmt.Sprintf(doc, "big", 1))-2) + "\n"
	write(t, filepath.Join(root, "big.yaml"), big)
	tests := []struct {
		name  string
		load  manifest.LoadOptions
		files []string
		want  string
	}{
		{"default", manifest.LoadOptions{}, []string{"db.yaml"}, "file is 1600000 bytes, over the limit of 1572864 bytes (maxFileSize)"},
		{"raised", manifest.LoadOptions{MaxFileSize: 2 << 20}, []string{"big.yaml", "db.yaml"}, ""},
		{"lowered", manifest.LoadOptions{MaxFileSize: 1 << 10}, []string{"db.yaml"}, "file is 1600000 bytes, over the limit of 1024 bytes (maxFileSize)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{Name: "local", Path: root, Load: tt.load, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			snap := fetch(t, s)
			if got := paths(snap); !slices.Equal(got, tt.files) {
				t.Errorf("files %v, want %v", got, tt.files)
			}
			var got string
			for _, p := range snap.Problems {
				got += p.String()
			}
			want := ""
			if tt.want != "" {
				want = "big.yaml: " + tt.want
			}
			if got != want {
				t.Errorf("problems %q, want %q", got, want)
			}
		})
	}
}
