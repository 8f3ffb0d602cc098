package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
)

// remoteName is the name of the clone's only remote.
const remoteName = "origin"

// markerFile, inside the clone's .git folder, holds the hash of the commit
// whose files are fully checked out. It is removed before a checkout and
// written after, so that a crash half-way never passes for a good tree.
const markerFile = "no8s-checkout"

// target is what the remote says the source should be at.
type target struct {
	// name is the branch, tag or pull request ref ("pull/<N>/head") named
	// in the revision ("" for a bare commit).
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
// they select. When that commit is the one checked out in the cache it
// fetches nothing; otherwise it fetches it (shallow, one ref, forced) and
// checks it out. The whole call is bounded by Config.Timeout.
//
// A branch, tag, commit or path that does not exist, and a remote with no
// refs at all (never pushed to, or wiped and re-created), are errors wrapping
// source.ErrNotFound, never an empty snapshot: reading them as "nothing is
// declared any more" would destroy everything the source owns. Only a real
// commit gives an empty snapshot: one whose tree at Path holds no manifest,
// or whose whole tree is empty (every file deleted, even when Path is set).
// Whether to prune then is the sync layer's decision. The returned snapshot
// is shared with later calls that find nothing new: treat it as read-only.
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
		s.log.Debug("unchanged", "revision", s.last.snap.Revision)
		return s.last.snap, nil
	}

	repo, err := s.openCache()
	if err != nil {
		return nil, err
	}
	if commit, ok := s.fromCache(repo, t); ok {
		// Errors here, such as a missing path, are the answer for this
		// commit: fetching it again would not change them.
		snap, err := s.snapshot(commit, t)
		if err != nil {
			return nil, err
		}
		s.last = &cached{key: t.key(s.remoteKey(t)), snap: snap}
		s.log.Debug("unchanged since a previous run", "revision", snap.Revision)
		return snap, nil
	}

	if repo, err = s.fetch(ctx, repo, t); err != nil {
		return nil, err
	}
	commit, err := s.localCommit(repo, t)
	if err != nil {
		return nil, err
	}
	if err := s.checkout(repo, commit.Hash); err != nil {
		return nil, err
	}
	snap, err := s.snapshot(commit, t)
	if err != nil {
		return nil, err
	}
	// Key on what was fetched: the remote may have moved since it was listed.
	refHash := s.commit
	if t.localRef != "" {
		ref, err := repo.Reference(t.localRef, false)
		if err != nil {
			return nil, fmt.Errorf("read fetched %s: %w", t.localRef, err)
		}
		refHash = ref.Hash()
	}
	s.last = &cached{key: t.key(refHash), snap: snap}
	s.log.Info("fetched", "url", s.location, "revision", snap.Revision,
		"files", len(snap.Files), "duration", time.Since(start).Round(time.Millisecond))
	return snap, nil
}

// listRefs is ls-remote: one round trip that says whether anything changed.
func (s *Source) listRefs(ctx context.Context) ([]*plumbing.Reference, error) {
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
		return fmt.Sprintf("pull request %d", r.PullRequest)
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
		return s.pullRequestTarget(hashes, ref.PullRequest)
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

// pullRequestTarget follows GitHub's ref for the head of pull request n.
// The commit it points at is on no branch of the remote (a fork's, or one
// since deleted), so the ref itself is fetched. It is stored under the same
// name in the clone rather than under refs/remotes/origin/, where fetching
// every branch for a bare commit could have written a branch called "pull"
// and made the name unusable in a reused cache.
func (s *Source) pullRequestTarget(hashes map[plumbing.ReferenceName]plumbing.Hash, n int) (*target, error) {
	name := pullRequestRef(n)
	h, ok := hashes[name]
	if !ok {
		return nil, fmt.Errorf("pull request %d (%s) of %s: %w", n, name, s.location, source.ErrNotFound)
	}
	return &target{
		name:       strings.TrimPrefix(name.String(), "refs/"),
		remoteRef:  name,
		localRef:   name,
		remoteHash: h,
	}, nil
}

// pullRequestRef is GitHub's ref for the head commit of pull request n.
func pullRequestRef(n int) plumbing.ReferenceName {
	return plumbing.ReferenceName(fmt.Sprintf("refs/pull/%d/head", n))
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

// openCache opens the clone in CacheDir, creating it on first use.
func (s *Source) openCache() (*gogit.Repository, error) {
	dir := s.cfg.CacheDir
	repo, err := gogit.PlainOpen(dir)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cache folder: %w", err)
		}
		// Checkouts delete whatever the commit does not hold: refuse to
		// take over a folder that has something else in it.
		entries, readErr := os.ReadDir(dir)
		if readErr != nil {
			return nil, fmt.Errorf("read cache folder: %w", readErr)
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("cache folder %s is neither empty nor a clone: refusing to use it", dir)
		}
		repo, err = gogit.PlainInit(dir, false)
		if err != nil {
			return nil, fmt.Errorf("init clone in %s: %w", dir, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open clone in %s: %w", dir, err)
	}
	return repo, nil
}

// remoteKey is the hash that, with the remote reference, determines the
// commit: the advertised hash, or the commit itself for a bare commit.
func (s *Source) remoteKey(t *target) plumbing.Hash {
	if t.localRef == "" {
		return s.commit
	}
	return t.remoteHash
}

// fromCache returns the checked-out commit when it is the one wanted, so
// that a new process on the same cache fetches nothing.
func (s *Source) fromCache(repo *gogit.Repository, t *target) (*object.Commit, bool) {
	done, err := os.ReadFile(filepath.Join(s.cfg.CacheDir, gogit.GitDirName, markerFile))
	if err != nil {
		return nil, false
	}
	have := plumbing.NewHash(strings.TrimSpace(string(done)))
	if have.IsZero() {
		return nil, false
	}
	if t.localRef != "" {
		// The local ref must be what the remote advertises now: the
		// checked-out commit was resolved from it (a peeled tag) or checked
		// against it (a commit on a branch).
		local, err := repo.Reference(t.localRef, false)
		if err != nil || local.Hash() != t.remoteHash {
			return nil, false
		}
	}
	commit, err := s.localCommit(repo, t)
	if err != nil || commit.Hash != have {
		return nil, false
	}
	return commit, true
}

// fetch brings the target's objects into the clone and returns the clone,
// which is a new one when the old could not serve.
func (s *Source) fetch(ctx context.Context, repo *gogit.Repository, t *target) (*gogit.Repository, error) {
	opts := &gogit.FetchOptions{
		RemoteName: remoteName,
		RemoteURL:  s.transport,
		Auth:       s.auth,
		Tags:       gogit.NoTags,
		Force:      true,
		Depth:      1,
	}
	if t.remoteRef != "" {
		opts.RefSpecs = []config.RefSpec{config.RefSpec(fmt.Sprintf("+%s:%s", t.remoteRef, t.localRef))}
	} else {
		// A bare commit can be on any branch: fetch them all.
		opts.RefSpecs = []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/*:refs/remotes/%s/*", remoteName))}
	}
	var err error
	if s.strategy == byCommit {
		// The commit may be anywhere in the history, so fetch all of it. A
		// shallow clone cannot be deepened reliably; start over instead.
		opts.Depth = 0
		var shallow []plumbing.Hash
		if shallow, err = repo.Storer.Shallow(); err != nil {
			return nil, fmt.Errorf("read clone: %w", err)
		}
		if len(shallow) > 0 {
			s.log.Info("replacing shallow clone by a full one", "dir", s.cfg.CacheDir)
			if repo, err = s.resetCache(); err != nil {
				return nil, err
			}
		}
	} else if packs := s.countPacks(); packs > s.maxPacks {
		// Every shallow fetch adds a pack and go-git cannot collect the
		// garbage of a shallow clone. Starting over costs one shallow
		// fetch, about what this one would cost anyway.
		s.log.Info("starting the clone over", "dir", s.cfg.CacheDir, "packs", packs)
		if repo, err = s.resetCache(); err != nil {
			return nil, err
		}
	}
	if err := s.ensureRemote(repo); err != nil {
		return nil, err
	}
	err = repo.FetchContext(ctx, opts)
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil, s.transportError("fetch "+s.location, ctx, err)
	}
	return repo, nil
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

// countPacks returns the number of pack files in the clone.
func (s *Source) countPacks() int {
	packs, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, gogit.GitDirName, "objects", "pack", "*.pack"))
	return len(packs)
}

// resetCache empties CacheDir and initialises a new clone in it.
func (s *Source) resetCache() (*gogit.Repository, error) {
	entries, err := os.ReadDir(s.cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("reset cache folder: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.cfg.CacheDir, e.Name())); err != nil {
			return nil, fmt.Errorf("reset cache folder: %w", err)
		}
	}
	return s.openCache()
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

// checkout makes the worktree exactly the commit's tree.
func (s *Source) checkout(repo *gogit.Repository, h plumbing.Hash) error {
	marker := filepath.Join(s.cfg.CacheDir, gogit.GitDirName, markerFile)
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkout %s: %w", h, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return fmt.Errorf("checkout %s: %w", h, err)
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Hash: h, Force: true}); err != nil {
		return fmt.Errorf("checkout %s: %w", h, err)
	}
	// Force resets tracked files only; anything else left in the folder
	// would be read as a manifest.
	if err := wt.Clean(&gogit.CleanOptions{Dir: true}); err != nil {
		return fmt.Errorf("clean worktree at %s: %w", h, err)
	}
	tmp := marker + ".tmp"
	if err := os.WriteFile(tmp, []byte(h.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("checkout %s: %w", h, err)
	}
	if err := os.Rename(tmp, marker); err != nil {
		return fmt.Errorf("checkout %s: %w", h, err)
	}
	return nil
}

// snapshot reads the manifests of the checked-out commit.
func (s *Source) snapshot(c *object.Commit, t *target) (*source.Snapshot, error) {
	snap := &source.Snapshot{
		Revision: s.revision(t, c.Hash),
		Commit: manifest.Commit{
			Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
			Message: c.Message,
			Time:    c.Author.When.UTC(),
		},
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", snap.Revision, err)
	}
	if len(tree.Entries) == 0 {
		// Every file was deleted: an empty state, not a missing path.
		return snap, nil
	}
	// The commit's tree, not the folder, says whether the path exists:
	// checkouts leave empty folders behind.
	if s.cfg.Path != "" {
		if _, err := tree.Tree(s.cfg.Path); err != nil {
			return nil, fmt.Errorf("path %q does not exist at %s of %s (moved or deleted?): %w", s.cfg.Path, snap.Revision, s.location, source.ErrNotFound)
		}
	}
	root, err := os.OpenRoot(s.cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("open clone: %w", err)
	}
	defer root.Close()
	if s.cfg.Path != "" {
		// os.Root refuses a path that leaves the clone through a symlink.
		sub, err := root.OpenRoot(filepath.FromSlash(s.cfg.Path))
		if err != nil {
			return nil, fmt.Errorf("open path %q at %s: %w", s.cfg.Path, snap.Revision, err)
		}
		defer sub.Close()
		root = sub
	}
	files, problems, err := source.ReadTree(root.FS(), s.cfg.Load)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", s.location, snap.Revision, err)
	}
	snap.Files, snap.Problems = files, problems
	return snap, nil
}

// revision writes h the way Flux does.
func (s *Source) revision(t *target, h plumbing.Hash) manifest.Revision {
	if t.name == "" {
		return manifest.Revision("sha1:" + h.String())
	}
	return manifest.Revision(t.name + "@sha1:" + h.String())
}
