package git

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/commitsig"
)

// Signature verification modes.
const (
	// VerifyHead checks the commit to apply.
	VerifyHead = "head"
	// VerifyAll checks every commit since the last one applied.
	VerifyAll = "all"
)

// What a source with a signature policy does with a head that is an
// ancestor of the commit last applied: a force-push back to older history.
const (
	// RollbackRefuse makes the snapshot a rollback (source.Lineage), which
	// the sync refuses until that revision is approved.
	RollbackRefuse = "refuse"
	// RollbackAllow checks such a head like any other.
	RollbackAllow = "allow"
)

// Verify requires commits to carry a good signature by a trusted key.
type Verify struct {
	// Mode is VerifyHead or VerifyAll.
	Mode string
	// Rollback is RollbackRefuse (the default when "") or RollbackAllow.
	// A signature proves who made a commit, not that it is the newest: an
	// old commit signed by a trusted key, or one older than the policy and
	// not signed at all, would otherwise take the source back.
	Rollback string
	// Verifier holds the trusted keys.
	Verifier *commitsig.Verifier
	// Applied returns the revision last applied from this source, or ""
	// when none was; VerifyAll checks the commits since it, and a head that
	// is its ancestor is a rollback. It is asked at each fetch, so that it
	// answers for every agent.
	Applied func(ctx context.Context) (manifest.Revision, error)
}

// maxVerifyCommits bounds the commits one fetch checks in VerifyAll: a
// longer line since the last applied commit is refused, not checked for
// minutes.
const maxVerifyCommits = 10000

// appliedRef is where the clone keeps the last applied commit when it had
// to fetch it on its own: it is on no branch any more, or the clone was
// started over since.
const appliedRef plumbing.ReferenceName = "refs/no8s/applied"

// verifying is what the last snapshot's verification needs again: the
// commits to check, kept so that a rotation of the keys is noticed while
// the head stays where it is, and what they were judged against.
type verifying struct {
	head    plumbing.Hash
	commits []*object.Commit
	// problem is why the commits to check could not be listed.
	problem string
	// judged is set when the verdict depends on the revision last applied,
	// which was then applied.
	judged  bool
	applied manifest.Revision
	// rollback, when not "", says why head goes back in history.
	rollback string
}

// guardsRollback reports whether the source tells a head that goes back
// in history from new history. A pull request's head is not: it is not the
// line the applied revision came from, and previews apply nothing.
func (s *Source) guardsRollback() bool {
	v := s.cfg.Verify
	return v != nil && v.Rollback == RollbackRefuse && v.Applied != nil && s.strategy != byPullRequest
}

// judgesAgainstApplied reports whether the verdict on a head depends on the
// revision last applied.
func (s *Source) judgesAgainstApplied() bool {
	v := s.cfg.Verify
	return v != nil && v.Applied != nil && (v.Mode == VerifyAll || s.guardsRollback())
}

// verify checks the signatures the source's policy asks for, when it has
// one, and keeps what to check again while the head stays.
func (s *Source) verify(ctx context.Context, st *filesystem.Storage, repo *gogit.Repository, head *object.Commit, snap *source.Snapshot) error {
	s.verifyLast = nil
	if s.cfg.Verify == nil {
		return nil
	}
	v, err := s.judge(ctx, st, repo, head)
	if err != nil {
		// The snapshot is kept but not used: the next fetch lists again.
		s.last = nil
		return err
	}
	s.verifyLast = v
	s.checkSignatures(snap, v)
	return nil
}

// verifyUnchanged checks the commits of the last verdict again, with the
// keys as they are now. When the revision applied has moved since (another
// agent's sync, an approved rollback), the head is judged again, as what it
// goes back from and what lies since it changed.
func (s *Source) verifyUnchanged(ctx context.Context, snap *source.Snapshot) error {
	v := s.verifyLast
	if v != nil && v.judged {
		applied, err := s.cfg.Verify.Applied(ctx)
		if err != nil {
			return fmt.Errorf("read the last applied revision of %s: %w", s.cfg.Name, err)
		}
		if applied != v.applied {
			st, repo, err := s.openCache()
			if err != nil {
				return err
			}
			defer s.release()
			head, err := repo.CommitObject(v.head)
			if err != nil {
				s.last = nil
				return fmt.Errorf("read commit %s of %s: %w", v.head, s.location, err)
			}
			return s.verify(ctx, st, repo, head, snap)
		}
	}
	s.checkSignatures(snap, v)
	return nil
}

// judge lists the commits the policy checks for head: head alone, or
// (VerifyAll) head and every commit reachable from it and not from the last
// applied commit. The first snapshot of a source has no applied commit: its
// head alone is checked, as there is no "since". With rollbacks refused it
// also tells whether head is an ancestor of the applied commit, fetching
// that commit's history when the clone lacks it.
func (s *Source) judge(ctx context.Context, st *filesystem.Storage, repo *gogit.Repository, head *object.Commit) (*verifying, error) {
	v := &verifying{head: head.Hash, commits: []*object.Commit{head}}
	if !s.judgesAgainstApplied() {
		return v, nil
	}
	applied, err := s.cfg.Verify.Applied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the last applied revision of %s: %w", s.cfg.Name, err)
	}
	v.judged, v.applied = true, applied
	_, hash, found := strings.Cut(string(applied), "sha1:")
	if !found || !hexSHA1.MatchString(hash) {
		return v, nil
	}
	base := plumbing.NewHash(hash)
	if base == head.Hash {
		return v, nil
	}
	// Whatever lies since the applied commit, or goes back from it, is
	// judged on its history: bring it in when the clone lacks it.
	fetchErr := s.ensureCommit(ctx, st, repo, base)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("fetch %s, the last applied commit, from %s: %w", base, s.location, ctx.Err())
	}
	if s.guardsRollback() {
		back, known, err := goesBack(ctx, repo, base, head)
		if err != nil {
			return nil, fmt.Errorf("compare %s with %s, the last applied commit: %w", head.Hash, base, err)
		}
		switch {
		case back == head.Hash:
			v.rollback = fmt.Sprintf("commit %s is an ancestor of %s, the commit last applied (%s)",
				short(head.Hash), short(base), applied)
		case !back.IsZero():
			v.rollback = fmt.Sprintf("commit %s is a copy of %s, an ancestor of %s, the commit last applied (%s): "+
				"the same signed content under another encoding of its signature",
				short(head.Hash), short(back), short(base), applied)
		case !known:
			why := "the clone lacks part of its history"
			if fetchErr != nil {
				why = fmt.Sprintf("the remote would not send it (%v)", fetchErr)
			}
			v.rollback = fmt.Sprintf("cannot tell whether commit %s is an ancestor of %s, the commit last applied (%s): %s",
				short(head.Hash), short(base), applied, why)
		}
		if v.rollback != "" {
			s.log.Warn("head goes back in history", "revision", applied, "head", head.Hash.String(), "why", v.rollback)
		}
	}
	if s.cfg.Verify.Mode == VerifyAll {
		if err := s.collectSince(ctx, repo, head, base, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// collectSince adds to v the commits reachable from head and not from
// base, the last applied commit, head first; head is always among them.
func (s *Source) collectSince(ctx context.Context, repo *gogit.Repository, head *object.Commit, base plumbing.Hash, v *verifying) error {
	baseCommit, err := repo.CommitObject(base)
	if err != nil {
		v.problem = fmt.Sprintf("cannot list the commits since %s, the last applied one: it is not in the fetched history (rewritten?); verify mode all refuses what it cannot check",
			short(base))
		return nil
	}
	// Everything the applied commit reaches was applied or is older.
	seen := map[plumbing.Hash]bool{}
	err = object.NewCommitPreorderIter(baseCommit, nil, nil).ForEach(func(c *object.Commit) error {
		seen[c.Hash] = true
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("walk the history of %s: %w", base, err)
	}
	// v.commits holds the head already, which is checked even when the
	// applied commit reaches it: a force-push back to older history lists
	// nothing since.
	err = object.NewCommitPreorderIter(head, seen, nil).ForEach(func(c *object.Commit) error {
		if len(v.commits) == maxVerifyCommits {
			return errTooMany
		}
		if c.Hash != head.Hash {
			v.commits = append(v.commits, c)
		}
		return ctx.Err()
	})
	switch {
	case errors.Is(err, errTooMany):
		v.problem = fmt.Sprintf("more than %d commits since %s, the last applied one: verify mode all checks at most that many", maxVerifyCommits, short(base))
	case errors.Is(err, plumbing.ErrObjectNotFound):
		v.problem = fmt.Sprintf("the history since %s, the last applied commit, is incomplete in the clone: %v", short(base), err)
	case err != nil:
		return fmt.Errorf("walk the history of %s: %w", head.Hash, err)
	}
	return nil
}

var errTooMany = errors.New("too many commits")

// short abbreviates a hash for messages.
func short(h plumbing.Hash) string { return h.String()[:12] }

// goesBack returns head's hash when head is an ancestor of base, or the
// hash of an ancestor of base that head is a copy of: the same signed
// content (tree, parents, author, committer, message) with its signature
// headers written another way. Anyone can make such a copy of a signed
// commit without the key, by wrapping its signature's lines differently,
// say; it has a hash of its own, so it is no ancestor, yet it takes the
// source back all the same. A copy of base itself goes nowhere. known is
// false when the clone lacks part of base's history, so that it cannot
// tell. New history, the usual case, is told from head's side at once.
func goesBack(ctx context.Context, repo *gogit.Repository, base plumbing.Hash, head *object.Commit) (back plumbing.Hash, known bool, err error) {
	forward, _, err := reaches(ctx, repo, head.Hash, base, nil)
	if err != nil || !forward.IsZero() {
		return plumbing.ZeroHash, err == nil, err
	}
	signed, err := signedHash(head)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	copyOfHead := func(c *object.Commit) bool {
		if c.Hash == base || c.TreeHash != head.TreeHash || !slices.Equal(c.ParentHashes, head.ParentHashes) {
			return false
		}
		h, err := signedHash(c)
		return err == nil && h == signed
	}
	back, complete, err := reaches(ctx, repo, base, head.Hash, copyOfHead)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	return back, !back.IsZero() || complete, nil
}

// signedHash is the hash of the commit as its signature covers it: the
// object without its signature headers.
func signedHash(c *object.Commit) (plumbing.Hash, error) {
	var o plumbing.MemoryObject
	if err := c.EncodeWithoutSignature(&o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit %s: %w", c.Hash, err)
	}
	return o.Hash(), nil
}

// reaches walks the history of from, breadth first, until it meets target
// or a commit same (when not nil) accepts, and returns that commit's hash.
// complete is false when some commit of that history is missing from the
// clone (a shallow boundary, or a commit never fetched).
func reaches(ctx context.Context, repo *gogit.Repository, from, target plumbing.Hash, same func(*object.Commit) bool) (found plumbing.Hash, complete bool, err error) {
	seen := map[plumbing.Hash]bool{from: true}
	queue := []plumbing.Hash{from}
	complete = true
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return plumbing.ZeroHash, false, err
		}
		h := queue[0]
		queue = queue[1:]
		if h == target {
			return h, true, nil
		}
		c, err := object.GetCommit(repo.Storer, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			complete = false
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read commit %s: %w", h, err)
		}
		if same != nil && same(c) {
			return h, true, nil
		}
		for _, p := range c.ParentHashes {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return plumbing.ZeroHash, complete, nil
}

// ensureCommit fetches commit h, with its history, when the clone lacks it:
// the commit last applied may be on no branch any more (a force-push), or
// the clone may have started over since. It keeps it under appliedRef.
func (s *Source) ensureCommit(ctx context.Context, st *filesystem.Storage, repo *gogit.Repository, h plumbing.Hash) error {
	if _, err := repo.CommitObject(h); err == nil {
		return nil
	}
	spec := fmt.Sprintf("+%s:%s", h, appliedRef)
	s.log.Info("fetching the last applied commit, which the clone lacks", "commit", h.String())
	if s.engine != engineGoGit {
		if err := s.gitFetchSpecs(ctx, 0, spec); err != nil {
			return err
		}
		return s.packsChanged(false)
	}
	if err := s.ensureRemote(repo); err != nil {
		return err
	}
	err := repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: remoteName, RemoteURL: s.transport, Auth: s.auth,
		Tags: gogit.NoTags, Force: true, RefSpecs: []config.RefSpec{config.RefSpec(spec)}})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return s.transportError("fetch "+h.String()+" from "+s.location, ctx, err)
	}
	return s.packsChanged(true)
}

// checkSignatures adds to snap a problem for each commit of v without a
// good signature by a trusted key, so that the revision is refused like an
// invalid one; for a rollback they are also named in its refusal, and an
// approval of the rollback does not lift them. The keys are read again when
// their files changed.
func (s *Source) checkSignatures(snap *source.Snapshot, v *verifying) {
	if v == nil {
		return
	}
	var problems []manifest.Problem
	if v.problem != "" {
		problems = append(problems, manifest.Problem{Message: "signature policy: " + v.problem})
	}
	for _, c := range v.commits {
		if _, err := s.cfg.Verify.Verifier.Verify(c); err != nil {
			problems = append(problems, manifest.Problem{Message: "signature policy: " + err.Error()})
		}
	}
	if v.judged {
		snap.Lineage = &source.Lineage{Applied: v.applied, Rollback: v.rollback}
		if v.rollback != "" {
			// Shown with the rollback's refusal; an approval of the
			// rollback does not lift them: they refuse the revision
			// like any other, since the head is always verified.
			snap.Lineage.Problems = problems
		}
	}
	s.logVerdict(snap.Revision, problems)
	if len(problems) > 0 {
		snap.Problems = append(append([]manifest.Problem(nil), snap.Problems...), problems...)
		snap.Unverified = problems
	}
}

// logVerdict logs the signature verdict on rev when it differs from the
// last one logged. The sync that refuses the revision logs the refusal,
// once; this says what the source found, for debugging, without a record
// at every fetch of the same head.
func (s *Source) logVerdict(rev manifest.Revision, problems []manifest.Problem) {
	var b strings.Builder
	b.WriteString(string(rev))
	for _, p := range problems {
		b.WriteString("\n" + p.Message)
	}
	// Fetch holds s.mu.
	same := s.verdictLogged == b.String()
	s.verdictLogged = b.String()
	if same {
		return
	}
	if len(problems) > 0 {
		s.log.Debug("commit signatures refused", "revision", rev, "problems", len(problems), "first", problems[0].Message)
	} else {
		s.log.Debug("commit signatures verified", "revision", rev)
	}
}
