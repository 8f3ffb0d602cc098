package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// remoteName is the name of the clone's only remote.
const remoteName = "origin"

// objectCacheSize bounds the objects go-git keeps decoded while one
// snapshot is read (delta bases mostly); the cache goes with the read.
const objectCacheSize = 8 << 20

// target is what the remote says the source should be at.
type target struct {
	// name is the branch, tag or pull or merge request ref
	// ("pull/<N>/head", "merge-requests/<IID>/head") named in the revision
	// ("" for a bare commit).
	name string
	// remoteRef is the remote reference fetched; "" when a bare commit is
	// fetched through every branch.
	remoteRef plumbing.ReferenceName
	// localRef is where the fetch stores remoteRef in the clone.
	localRef plumbing.ReferenceName
	// remoteHash is remoteRef's hash as advertised (a tag object for an
	// annotated tag).
	remoteHash plumbing.Hash
}

// key identifies the remote state a snapshot is made from: the remote
// reference at a hash (the commit itself for a bare commit).
func (t *target) key(refHash plumbing.Hash) string {
	return fmt.Sprintf("%s %s", t.remoteRef, refHash)
}

// Fetch asks the remote for its refs and returns the snapshot of the commit
// they select. When that commit is the one read last it fetches nothing and
// rebuilds the snapshot from what it kept and the object store; otherwise
// it fetches what the cache lacks (see fetchTarget) and reads the commit's
// tree straight from the object store: no worktree is ever written. Files
// whose folder or blob did not change since the last snapshot are neither
// read nor hashed again. The whole call is bounded by Config.Timeout.
//
// A branch, tag, commit or path that does not exist, and a remote with no
// refs at all (never pushed to, or wiped and re-created), are errors wrapping
// source.ErrNotFound, never an empty snapshot: reading them as "nothing is
// declared any more" would destroy everything the source owns. Only a real
// commit gives an empty snapshot: one whose tree at Path holds no manifest,
// or whose whole tree is empty (every file deleted, even when Path is set).
// Whether to prune then is the sync layer's decision. Snapshots share file
// contents with each other: treat them as read-only.
func (s *Source) Fetch(ctx context.Context) (*source.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	start := time.Now()

	refs, err := s.listRefs(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.resolve(refs)
	if err != nil {
		return nil, err
	}

	if s.last != nil && s.last.key == t.key(s.remoteKey(t)) {
		snap, err := s.fromIndex(s.last)
		if err == nil {
			s.log.Debug("unchanged", "revision", snap.Revision)
			if err := s.verifyUnchanged(ctx, snap); err != nil {
				return nil, err
			}
			return snap, nil
		}
		// The clone lost what the index names (emptied behind the agent's
		// back, say): fetch as if it were the first time.
		s.log.Warn("cannot rebuild the last snapshot from the clone: fetching it again", "error", err)
		s.last = nil
	}

	st, repo, err := s.openCache()
	if err != nil {
		return nil, err
	}
	defer s.release()
	startOver := false
	if commit, ok := s.fromCache(repo, t); ok && s.deepEnough(st) {
		// Errors here, such as a missing path, are the answer for this
		// commit: fetching it again would not change them. An object
		// missing from the clone is not one: the clone starts over.
		snap, err := s.read(st, commit, t, t.key(s.remoteKey(t)))
		if err == nil {
			s.log.Debug("unchanged since a previous run", "revision", snap.Revision)
			return snap, s.verify(ctx, st, repo, commit, snap)
		}
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, err
		}
		s.log.Info("the clone lacks part of the head: starting the clone over", "dir", s.cfg.CacheDir, "error", err)
		startOver = true
	}

	st, repo, how, commit, snap, err := s.fetchAndRead(ctx, t, st, repo, startOver)
	if errors.Is(err, plumbing.ErrObjectNotFound) && !startOver {
		// A head moved back to an ancestor of the clone's (a force-push to
		// older history) is one go-git believes the clone has, as it has
		// what came after; a shallow clone does not. And a fetch may have
		// moved the ref to a head whose objects did not all arrive (a
		// remote whose objects do not match their names, say): the ref
		// would make the clone believe it holds the head for good, after
		// the remote is repaired too. Start over, once.
		s.log.Info("the fetched head is not whole in the clone: starting the clone over", "dir", s.cfg.CacheDir, "error", err)
		st, repo, how, commit, snap, err = s.fetchAndRead(ctx, t, st, repo, true)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("fetched", "url", s.location, "revision", snap.Revision, "with", how,
		"files", len(snap.Files), "duration", time.Since(start).Round(time.Millisecond))
	return snap, s.verify(ctx, st, repo, commit, snap)
}

// fetchAndRead fetches the target (see fetchTarget) and reads the snapshot
// of the commit it stands for.
func (s *Source) fetchAndRead(ctx context.Context, t *target, st *filesystem.Storage, repo *gogit.Repository, startOver bool) (
	*filesystem.Storage, *gogit.Repository, string, *object.Commit, *source.Snapshot, error,
) {
	st, repo, how, err := s.fetchTarget(ctx, t, st, repo, startOver)
	if err != nil {
		return st, repo, how, nil, nil, err
	}
	commit, err := s.localCommit(repo, t)
	if err != nil {
		return st, repo, how, nil, nil, err
	}
	// Key on what was fetched: the remote may have moved since it was listed.
	refHash := s.commit
	if t.localRef != "" {
		ref, err := repo.Reference(t.localRef, false)
		if err != nil {
			return st, repo, how, nil, nil, fmt.Errorf("read fetched %s: %w", t.localRef, err)
		}
		refHash = ref.Hash()
	}
	snap, err := s.read(st, commit, t, t.key(refHash))
	return st, repo, how, commit, snap, err
}

// deepEnough reports whether the clone holds the history the source needs:
// a shallow one, left by an agent or a setting that did not need it, is
// fetched into again, which starts it over.
func (s *Source) deepEnough(st *filesystem.Storage) bool {
	if !s.fullHistory() {
		return true
	}
	shallow, err := st.Shallow()
	return err == nil && len(shallow) == 0
}

// listRefs is ls-remote: one round trip that says whether anything changed.
func (s *Source) listRefs(ctx context.Context) ([]*plumbing.Reference, error) {
	if refs, ok := s.localRefs(); ok {
		return refs, nil
	}
	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{
		Name: remoteName,
		URLs: []string{s.transport},
	})
	refs, err := remote.ListContext(ctx, &gogit.ListOptions{Auth: s.auth, PeelingOption: gogit.AppendPeeled})
	if err != nil {
		return nil, s.transportError("list refs of "+s.location, ctx, err)
	}
	return refs, nil
}

// transportError wraps a go-git transport error with what was being done,
// classified as source.ErrAuth or source.ErrNotFound where it is one.
func (s *Source) transportError(what string, ctx context.Context, err error) error {
	err = s.redact(err)
	switch {
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fmt.Errorf("%s: %s: the remote has no branches or tags at all (never pushed to, or emptied): %w: %w",
			what, s.wanted(), source.ErrNotFound, err)
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		strings.Contains(err.Error(), "unable to authenticate"):
		return fmt.Errorf("%s: %w: %w", what, source.ErrAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		// Forges answer 404 for a private repository the credentials may
		// not read, so with credentials it is most likely their fault.
		if s.auth != nil {
			return fmt.Errorf("%s: %w: %w", what, source.ErrAuth, err)
		}
		return fmt.Errorf("%s: %w: %w", what, source.ErrNotFound, err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		// Some transports report a cancelled request vaguely; say why.
		return fmt.Errorf("%s: %w (%w)", what, ctxErr, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// wanted names what the source follows, for errors.
func (s *Source) wanted() string {
	r := s.cfg.Ref
	switch s.strategy {
	case byPullRequest:
		return s.changeName()
	case byCommit:
		return "commit " + r.Commit
	case bySemVer:
		return fmt.Sprintf("semver range %q", r.SemVer)
	case byTag:
		return fmt.Sprintf("tag %q", r.Tag)
	}
	return fmt.Sprintf("branch %q", r.Branch)
}

// resolve picks the remote reference the strategy asks for.
func (s *Source) resolve(refs []*plumbing.Reference) (*target, error) {
	hashes := make(map[plumbing.ReferenceName]plumbing.Hash, len(refs))
	for _, r := range refs {
		if r.Type() == plumbing.HashReference {
			hashes[r.Name()] = r.Hash()
		}
	}
	ref := s.cfg.Ref
	switch s.strategy {
	case byPullRequest:
		return s.pullRequestTarget(hashes)
	case byTag:
		return s.tagTarget(hashes, ref.Tag)
	case bySemVer:
		tag, err := s.highestTag(hashes)
		if err != nil {
			return nil, err
		}
		return s.tagTarget(hashes, tag)
	case byCommit:
		if ref.Branch == "" {
			return &target{}, nil
		}
	}
	name := plumbing.NewBranchReferenceName(ref.Branch)
	h, ok := hashes[name]
	if !ok {
		return nil, fmt.Errorf("branch %q of %s does not exist (deleted, or never pushed): %w", ref.Branch, s.location, source.ErrNotFound)
	}
	return &target{
		name:       ref.Branch,
		remoteRef:  name,
		localRef:   plumbing.NewRemoteReferenceName(remoteName, ref.Branch),
		remoteHash: h,
	}, nil
}

func (s *Source) tagTarget(hashes map[plumbing.ReferenceName]plumbing.Hash, tag string) (*target, error) {
	name := plumbing.NewTagReferenceName(tag)
	h, ok := hashes[name]
	if !ok {
		return nil, fmt.Errorf("tag %q of %s does not exist: %w", tag, s.location, source.ErrNotFound)
	}
	// An annotated tag is peeled after fetching, from the clone, so that
	// servers that do not advertise peeled tags work the same.
	return &target{name: tag, remoteRef: name, localRef: name, remoteHash: h}, nil
}

// pullRequestTarget follows the ref of the head of a GitHub pull request
// or a GitLab merge request. The commit it points at is on no branch of the
// remote (a fork's, or one since deleted), so the ref itself is fetched. It
// is stored under the same name in the clone rather than under
// refs/remotes/origin/, where fetching every branch for a bare commit could
// have written a branch called "pull" (or "merge-requests") and made the
// name unusable in a reused cache.
func (s *Source) pullRequestTarget(hashes map[plumbing.ReferenceName]plumbing.Hash) (*target, error) {
	name := s.changeRef()
	h, ok := hashes[name]
	if !ok {
		return nil, fmt.Errorf("%s (%s) of %s: %w", s.changeName(), name, s.location, source.ErrNotFound)
	}
	return &target{
		name:       strings.TrimPrefix(name.String(), "refs/"),
		remoteRef:  name,
		localRef:   name,
		remoteHash: h,
	}, nil
}

// changeRef is the remote's ref for the head commit of the pull request
// (GitHub's refs/pull/<N>/head) or merge request (GitLab's
// refs/merge-requests/<IID>/head) followed.
func (s *Source) changeRef() plumbing.ReferenceName {
	if n := s.cfg.Ref.MergeRequest; n > 0 {
		return plumbing.ReferenceName(fmt.Sprintf("refs/merge-requests/%d/head", n))
	}
	return plumbing.ReferenceName(fmt.Sprintf("refs/pull/%d/head", s.cfg.Ref.PullRequest))
}

// changeName names the pull or merge request followed, for errors.
func (s *Source) changeName() string {
	if n := s.cfg.Ref.MergeRequest; n > 0 {
		return fmt.Sprintf("merge request %d", n)
	}
	return fmt.Sprintf("pull request %d", s.cfg.Ref.PullRequest)
}

// highestTag returns the tag with the highest version in the semver range.
func (s *Source) highestTag(hashes map[plumbing.ReferenceName]plumbing.Hash) (string, error) {
	type tagVersion struct {
		name string
		v    *semver.Version
	}
	var matches []tagVersion
	for name := range hashes {
		if !name.IsTag() {
			continue
		}
		short := name.Short()
		if strings.HasSuffix(short, "^{}") {
			continue
		}
		v, err := semver.NewVersion(short)
		if err != nil || !s.constraint.Check(v) {
			continue
		}
		matches = append(matches, tagVersion{short, v})
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("no tag of %s matches semver range %q: %w", s.location, s.cfg.Ref.SemVer, source.ErrNotFound)
	}
	sort.Slice(matches, func(i, j int) bool {
		if c := matches[i].v.Compare(matches[j].v); c != 0 {
			return c > 0
		}
		// "v1.0.0" and "1.0.0" are the same version: pick one for good.
		return matches[i].name < matches[j].name
	})
	return matches[0].name, nil
}

// openCache returns the bare repository in CacheDir, creating it on first
// use. It is kept open between fetches so that the pack indexes are decoded
// once, not at each fetch: it is opened again only when the pack files are
// no longer those it indexed (the folder emptied or changed behind the
// agent's back). A clone with a worktree, left by an older agent, is
// emptied and started over: its checked-out files would only cost space.
// Objects are read through the returned storage; release ends the use.
func (s *Source) openCache() (*filesystem.Storage, *gogit.Repository, error) {
	if c := s.clone; c != nil {
		if packs, err := s.packFiles(); err == nil && slices.Equal(packs, c.packs) {
			return c.st, c.repo, nil
		}
		s.dropClone()
	}
	dir := s.cfg.CacheDir
	if fi, err := os.Stat(filepath.Join(dir, gogit.GitDirName)); err == nil && fi.IsDir() {
		s.log.Info("replacing a clone with a worktree by a bare repository", "dir", dir)
		if err := s.emptyCache(); err != nil {
			return nil, nil, err
		}
	}
	objects := cache.NewObjectLRU(objectCacheSize)
	st := s.storage(objects)
	repo, err := gogit.Open(st, nil)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		st.Close()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("create cache folder: %w", err)
		}
		// Starting over deletes whatever is in the folder: refuse to take
		// over one that has something else in it.
		entries, readErr := os.ReadDir(dir)
		if readErr != nil {
			return nil, nil, fmt.Errorf("read cache folder: %w", readErr)
		}
		if len(entries) > 0 {
			return nil, nil, fmt.Errorf("cache folder %s is neither empty nor a clone: refusing to use it", dir)
		}
		st = s.storage(objects)
		repo, err = gogit.Init(st, nil)
		if err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("init clone in %s: %w", dir, err)
		}
	}
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("open clone in %s: %w", dir, err)
	}
	packs, err := s.packFiles()
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	s.clone = &clone{st: st, repo: repo, objects: objects, packs: packs}
	return st, repo, nil
}

// clone is the cache as kept open between fetches.
type clone struct {
	st      *filesystem.Storage
	repo    *gogit.Repository
	objects *cache.ObjectLRU
	// packs are the pack files st has indexed, sorted.
	packs []string
}

// release ends a use of the clone: the pack files are closed and the
// decoded objects dropped, so that what stays between fetches is the pack
// indexes alone.
func (s *Source) release() {
	if c := s.clone; c != nil {
		c.st.Close()
		c.objects.Clear()
	}
}

// packsChanged tells the kept clone that its pack files changed: written
// by go-git through the storage, which indexed them as it wrote them, or by
// the git binary (reindexed is false), which the storage has to index again.
func (s *Source) packsChanged(reindexed bool) error {
	c := s.clone
	if c == nil {
		return nil
	}
	if !reindexed {
		c.st.Reindex()
	}
	packs, err := s.packFiles()
	if err != nil {
		s.dropClone()
		return err
	}
	c.packs = packs
	return nil
}

// dropClone closes the kept clone, when there is one.
func (s *Source) dropClone() {
	if c := s.clone; c != nil {
		c.st.Close()
		c.objects.Clear()
		s.clone = nil
	}
}

// packFiles lists the pack files of the cache, sorted.
func (s *Source) packFiles() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.cfg.CacheDir, "objects", "pack"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cache folder: %w", err)
	}
	var packs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			packs = append(packs, e.Name())
		}
	}
	return packs, nil
}

// storage is the object store of the cache, keeping its pack files open
// while a snapshot is read: reopening them for each of thousands of blobs
// would cost more than reading them. objects holds what is decoded (delta
// bases mostly) while it is in use.
func (s *Source) storage(objects cache.Object) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(bufferedIndexes{osfs.New(s.cfg.CacheDir)}, objects,
		filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: s.largeObject()})
}

// largeObject is the size beyond which an object is streamed from its
// file rather than read whole into memory: no manifest is larger.
func (s *Source) largeObject() int64 {
	if limit := s.cfg.Load.MaxFileSize; limit > 0 {
		return limit
	}
	return manifest.DefaultMaxFileSize
}

// remoteKey is the hash that, with the remote reference, determines the
// commit: the advertised hash, or the commit itself for a bare commit.
func (s *Source) remoteKey(t *target) plumbing.Hash {
	if t.localRef == "" {
		return s.commit
	}
	return t.remoteHash
}

// fromCache returns the commit the target stands for when the cache holds
// it already, so that a new process on the same cache fetches nothing.
func (s *Source) fromCache(repo *gogit.Repository, t *target) (*object.Commit, bool) {
	if t.localRef != "" {
		// The local ref must be what the remote advertises now: the commit
		// was resolved from it (a peeled tag) or checked against it (a
		// commit on a branch).
		local, err := repo.Reference(t.localRef, false)
		if err != nil || local.Hash() != t.remoteHash {
			return nil, false
		}
	}
	commit, err := s.localCommit(repo, t)
	if err != nil {
		return nil, false
	}
	return commit, true
}

// fetchTarget brings the target's objects into the cache open in st and
// returns the cache open again, with the engine that fetched.
//
// The first fetch is shallow (depth 1). Later ones send what the cache has,
// so that a one-file commit transfers that file's blob, the trees above it
// and the commit: the git binary fetches at depth 1 again, moving the
// shallow boundary forward; go-git, which re-sends the whole tree at any
// depth, fetches the history since the commit it has. A bare commit may be
// anywhere in the history, so all of it is fetched. Packs pile up either
// way: past maxPacks the clone starts over, which costs one shallow fetch.
// With startOver it starts over whatever its state.
func (s *Source) fetchTarget(ctx context.Context, t *target, st *filesystem.Storage, repo *gogit.Repository, startOver bool) (*filesystem.Storage, *gogit.Repository, string, error) {
	shallow, err := st.Shallow()
	if err != nil {
		return st, repo, "", fmt.Errorf("read clone: %w", err)
	}
	reset := startOver
	switch {
	case startOver:
	case (s.strategy == byCommit || s.fullHistory()) && len(shallow) > 0:
		// A shallow clone cannot be deepened reliably; start over instead.
		s.log.Info("replacing shallow clone by a full one", "dir", s.cfg.CacheDir)
		reset = true
	case s.countPacks() > s.maxPacks || s.looseOver():
		// go-git cannot collect the garbage of a shallow clone, and history
		// fetched since the last start is reachable: only starting over
		// drops it.
		s.log.Info("starting the clone over", "dir", s.cfg.CacheDir, "packs", s.countPacks(),
			"looseObjects", s.loose.objects, "looseBytes", s.loose.bytes)
		reset = true
	}
	if reset {
		if err := s.emptyCache(); err != nil {
			return nil, nil, "", err
		}
		if st, repo, err = s.openCache(); err != nil {
			return st, repo, "", err
		}
	}
	depth := 1
	if s.strategy == byCommit || s.fullHistory() {
		depth = 0
	}
	useGit := s.engine == engineGit
	if s.engine == engineAuto {
		// go-git costs no process and fetches the history since the commit
		// the cache has, which is what a branch gains. A pull request or
		// tag that moves to a rebased line would bring that line's whole
		// history through go-git: the git binary fetches it at depth 1.
		useGit = t.localRef == "" || s.strategy != byBranch || !hasRef(repo, t.localRef)
	}
	if useGit {
		// git may leave the objects of a small fetch loose.
		s.loose.known = false
		if err := s.gitFetch(ctx, t, depth); err != nil {
			return st, repo, "", err
		}
		// git added packs and moved refs behind go-git's back.
		return st, repo, "git", s.packsChanged(false)
	}
	if hasRef(repo, t.localRef) {
		depth = 0
		if s.strategy == byBranch && s.engine == engineAuto {
			copied, err := s.localFetch(ctx, st, repo, t)
			if err != nil {
				return st, repo, "", err
			}
			if copied {
				return st, repo, "local", nil
			}
		}
	}
	if err := s.goGitFetch(ctx, repo, t, depth); err != nil {
		return st, repo, "", err
	}
	return st, repo, "go-git", s.packsChanged(true)
}

// hasRef reports whether the clone has the local reference name.
func hasRef(repo *gogit.Repository, name plumbing.ReferenceName) bool {
	if name == "" {
		return false
	}
	_, err := repo.Reference(name, false)
	return err == nil
}

// goGitFetch fetches the target with go-git; depth 0 means no limit.
func (s *Source) goGitFetch(ctx context.Context, repo *gogit.Repository, t *target, depth int) error {
	opts := &gogit.FetchOptions{
		RemoteName: remoteName,
		RemoteURL:  s.transport,
		Auth:       s.auth,
		Tags:       gogit.NoTags,
		Force:      true,
		Depth:      depth,
		RefSpecs:   []config.RefSpec{config.RefSpec(s.refSpec(t))},
	}
	if err := s.ensureRemote(repo); err != nil {
		return err
	}
	err := repo.FetchContext(ctx, opts)
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return s.transportError("fetch "+s.location, ctx, err)
	}
	return nil
}

// refSpec is the forced refspec that fetches the target.
func (s *Source) refSpec(t *target) string {
	if t.remoteRef == "" {
		// A bare commit can be on any branch: fetch them all.
		return fmt.Sprintf("+refs/heads/*:refs/remotes/%s/*", remoteName)
	}
	return fmt.Sprintf("+%s:%s", t.remoteRef, t.localRef)
}

// ensureRemote points the clone's remote at the configured URL, without
// credentials: they are passed per fetch and never written to disk.
func (s *Source) ensureRemote(repo *gogit.Repository) error {
	if r, err := repo.Remote(remoteName); err == nil {
		if urls := r.Config().URLs; len(urls) == 1 && urls[0] == s.location {
			return nil
		}
		if err := repo.DeleteRemote(remoteName); err != nil {
			return fmt.Errorf("update clone remote: %w", err)
		}
	}
	_, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{s.location}})
	if err != nil {
		return fmt.Errorf("update clone remote: %w", err)
	}
	return nil
}

// Loose objects (those local copies and small git fetches write) are
// bounded as packs are: past defaultMaxLooseObjects or
// defaultMaxLooseBytes the clone starts over.
const (
	defaultMaxLooseObjects = 4096
	defaultMaxLooseBytes   = 128 << 20
)

// looseCount is what a clone holds as loose objects.
type looseCount struct {
	known   bool // counted since the clone last changed behind the count
	objects int
	bytes   int64
}

// looseOver reports whether the clone holds more loose objects than it
// may keep, counting them when the count is not known.
func (s *Source) looseOver() bool {
	if !s.loose.known {
		s.loose = countLoose(filepath.Join(s.cfg.CacheDir, "objects"))
	}
	return s.loose.objects > s.maxLoose.objects || s.loose.bytes > s.maxLoose.bytes
}

// countLoose counts the loose objects under the objects folder dir.
func countLoose(dir string) looseCount {
	c := looseCount{known: true}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if len(e.Name()) != 2 || !e.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(dir, e.Name()))
		for _, f := range files {
			if info, err := f.Info(); err == nil && info.Mode().IsRegular() {
				c.objects++
				c.bytes += info.Size()
			}
		}
	}
	return c
}

// countPacks returns the number of pack files in the clone.
func (s *Source) countPacks() int {
	packs, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, "objects", "pack", "*.pack"))
	return len(packs)
}

// emptyCache removes everything in CacheDir, and forgets what was read of
// a local remote: starting over is how a bad state heals.
func (s *Source) emptyCache() error {
	s.dropClone()
	s.dropLocal()
	s.loose = looseCount{}
	entries, err := os.ReadDir(s.cfg.CacheDir)
	if err != nil {
		return fmt.Errorf("reset cache folder: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.cfg.CacheDir, e.Name())); err != nil {
			return fmt.Errorf("reset cache folder: %w", err)
		}
	}
	return nil
}

// localCommit returns the commit the target stands for in the clone: the
// fetched branch or pull request head, the peeled tag, or the configured
// commit (checked to be on the branch when there is one).
func (s *Source) localCommit(repo *gogit.Repository, t *target) (*object.Commit, error) {
	if s.strategy == byCommit {
		c, err := repo.CommitObject(s.commit)
		if err != nil {
			if t.localRef != "" {
				return nil, fmt.Errorf("commit %s on branch %q of %s: %w", s.commit, t.name, s.location, source.ErrNotFound)
			}
			return nil, fmt.Errorf("commit %s of %s: %w", s.commit, s.location, source.ErrNotFound)
		}
		if t.localRef == "" {
			return c, nil
		}
		head, err := s.refCommit(repo, t.localRef)
		if err != nil {
			return nil, err
		}
		if ok, err := c.IsAncestor(head); err != nil || !ok {
			if err == nil && head.Hash == c.Hash {
				return c, nil
			}
			return nil, fmt.Errorf("commit %s on branch %q of %s: %w", s.commit, t.name, s.location, source.ErrNotFound)
		}
		return c, nil
	}
	return s.refCommit(repo, t.localRef)
}

// refCommit peels a local reference down to its commit.
func (s *Source) refCommit(repo *gogit.Repository, name plumbing.ReferenceName) (*object.Commit, error) {
	ref, err := repo.Reference(name, true)
	if err != nil {
		return nil, fmt.Errorf("read fetched %s: %w", name, err)
	}
	h := ref.Hash()
	// Tags of tags exist; a few levels is plenty and stops a cycle.
	for range 10 {
		tag, err := repo.TagObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tag %s: %w", name.Short(), err)
		}
		if tag.TargetType != plumbing.CommitObject && tag.TargetType != plumbing.TagObject {
			return nil, fmt.Errorf("tag %s points at a %s, not a commit: %w", name.Short(), tag.TargetType, source.ErrNotFound)
		}
		h = tag.Target
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s of %s: %w", h, name, err)
	}
	return c, nil
}

// read makes the snapshot of commit c from the object store, taking what
// did not change from the last index, and keeps the new index under key.
func (s *Source) read(st *filesystem.Storage, c *object.Commit, t *target, key string) (*source.Snapshot, error) {
	ix := &index{
		key:      key,
		revision: s.revision(t, c.Hash),
		commit: manifest.Commit{
			Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
			Message: c.Message,
			Time:    c.Author.When.UTC(),
		},
	}
	tree, err := s.tree(st, c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", ix.revision, err)
	}
	if len(tree.Entries) == 0 {
		// Every file was deleted: an empty state, not a missing path.
		ix.empty = true
		s.last = ix
		return s.snapshotOf(ix, nil), nil
	}
	root := tree
	if s.cfg.Path != "" {
		if root, err = s.subtree(st, tree, s.cfg.Path); err != nil {
			return nil, fmt.Errorf("path %q does not exist at %s of %s (moved or deleted?): %w", s.cfg.Path, ix.revision, s.location, source.ErrNotFound)
		}
	}
	var prev *index
	if s.last != nil && !s.last.empty {
		prev = s.last
	}
	read, err := readTree(st, root, s.trees, s.cfg.Load, prev, &s.reads)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", s.location, ix.revision, err)
	}
	read.key, read.revision, read.commit = ix.key, ix.revision, ix.commit
	snap := s.snapshotOf(read, nil)
	s.retain(read)
	s.last = read
	return snap, nil
}

// tree returns tree h: one the last local fetch read, else decoded from st.
func (s *Source) tree(st *filesystem.Storage, h plumbing.Hash) (*object.Tree, error) {
	if t, ok := s.trees[h]; ok {
		return t, nil
	}
	return object.GetTree(st, h)
}

// subtree returns the folder at the slash-separated path p under root, as
// object.Tree.Tree does, without following links.
func (s *Source) subtree(st *filesystem.Storage, root *object.Tree, p string) (*object.Tree, error) {
	t := root
	for _, name := range strings.Split(p, "/") {
		if name == "" {
			continue
		}
		e, err := t.FindEntry(name)
		if err != nil {
			return nil, err
		}
		if e.Mode != filemode.Dir {
			return nil, object.ErrDirectoryNotFound
		}
		if t, err = s.tree(st, e.Hash); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// retain drops the contents from ix when they are more than the source may
// keep; the hashes stay, so that unchanged files are still not hashed again.
func (s *Source) retain(ix *index) {
	var total int64
	for _, f := range ix.files {
		total += int64(len(f.file.Data))
	}
	if total <= s.maxRetained {
		return
	}
	files := make([]indexed, len(ix.files))
	for i, f := range ix.files {
		f.file.Data = nil
		files[i] = f
	}
	ix.files, ix.retained = files, false
}

// snapshotOf makes a snapshot of ix; data, when not nil, gives the
// contents of the files in order.
func (s *Source) snapshotOf(ix *index, data [][]byte) *source.Snapshot {
	snap := &source.Snapshot{Revision: ix.revision, Commit: ix.commit}
	if len(ix.files) > 0 {
		snap.Files = make([]manifest.File, len(ix.files))
		for i, f := range ix.files {
			snap.Files[i] = f.file
			if data != nil {
				snap.Files[i].Data = data[i]
			}
		}
	}
	if len(ix.problems) > 0 {
		snap.Problems = append([]manifest.Problem(nil), ix.problems...)
	}
	return snap
}

// fromIndex rebuilds the snapshot of an unchanged head without the
// network: from the kept contents, or else by reading the blobs the index
// names from the object store.
func (s *Source) fromIndex(ix *index) (*source.Snapshot, error) {
	if ix.retained || len(ix.files) == 0 {
		return s.snapshotOf(ix, nil), nil
	}
	st, _, err := s.openCache()
	if err != nil {
		return nil, err
	}
	defer s.release()
	r := &treeReader{st: st, reads: &s.reads}
	data := make([][]byte, len(ix.files))
	for i, f := range ix.files {
		d, _, err := r.readBlob(f.blob, -1)
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: %s: %w", s.location, ix.revision, f.file.Path, err)
		}
		data[i] = d
	}
	return s.snapshotOf(ix, data), nil
}

// revision writes h the way Flux does.
func (s *Source) revision(t *target, h plumbing.Hash) manifest.Revision {
	if t.name == "" {
		return manifest.Revision("sha1:" + h.String())
	}
	return manifest.Revision(t.name + "@sha1:" + h.String())
}
