package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

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

// Verify requires commits to carry a good signature by a trusted key.
type Verify struct {
	// Mode is VerifyHead or VerifyAll.
	Mode string
	// Verifier holds the trusted keys.
	Verifier *commitsig.Verifier
	// Applied returns the revision last applied from this source, or ""
	// when none was; VerifyAll checks the commits since it. It is asked
	// at each fetch of a new head, so that it answers for every agent.
	Applied func(ctx context.Context) (manifest.Revision, error)
}

// maxVerifyCommits bounds the commits one fetch checks in VerifyAll: a
// longer line since the last applied commit is refused, not checked for
// minutes.
const maxVerifyCommits = 10000

// verifying is what the last snapshot's verification needs again: the
// commits to check, kept so that a rotation of the keys is noticed while
// the head stays where it is.
type verifying struct {
	head    plumbing.Hash
	commits []*object.Commit
	// problem is why the commits to check could not be listed.
	problem string
}

// collect lists the commits the policy checks for head: head alone, or
// (VerifyAll) every commit reachable from head and not from the last
// applied commit. The first snapshot of a source has no applied commit:
// its head alone is checked, as there is no "since".
func (s *Source) collect(ctx context.Context, repo *gogit.Repository, head *object.Commit) (*verifying, error) {
	v := &verifying{head: head.Hash, commits: []*object.Commit{head}}
	if s.cfg.Verify.Mode != VerifyAll || s.cfg.Verify.Applied == nil {
		return v, nil
	}
	applied, err := s.cfg.Verify.Applied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the last applied revision of %s: %w", s.cfg.Name, err)
	}
	_, hash, found := strings.Cut(string(applied), "sha1:")
	if !found || !hexSHA1.MatchString(hash) {
		return v, nil
	}
	base := plumbing.NewHash(hash)
	if base == head.Hash {
		return v, nil
	}
	baseCommit, err := repo.CommitObject(base)
	if err != nil {
		v.problem = fmt.Sprintf("cannot list the commits since %s, the last applied one: it is not in the fetched history (rewritten?); verify mode all refuses what it cannot check",
			base.String()[:12])
		return v, nil
	}
	// Everything the applied commit reaches was applied or is older.
	seen := map[plumbing.Hash]bool{}
	err = object.NewCommitPreorderIter(baseCommit, nil, nil).ForEach(func(c *object.Commit) error {
		seen[c.Hash] = true
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("walk the history of %s: %w", base, err)
	}
	v.commits = v.commits[:0]
	err = object.NewCommitPreorderIter(head, seen, nil).ForEach(func(c *object.Commit) error {
		if len(v.commits) == maxVerifyCommits {
			return errTooMany
		}
		v.commits = append(v.commits, c)
		return ctx.Err()
	})
	switch {
	case errors.Is(err, errTooMany):
		v.problem = fmt.Sprintf("more than %d commits since %s, the last applied one: verify mode all checks at most that many", maxVerifyCommits, base.String()[:12])
	case errors.Is(err, plumbing.ErrObjectNotFound):
		v.problem = fmt.Sprintf("the history since %s, the last applied commit, is incomplete in the clone: %v", base.String()[:12], err)
	case err != nil:
		return nil, fmt.Errorf("walk the history of %s: %w", head.Hash, err)
	}
	return v, nil
}

var errTooMany = errors.New("too many commits")

// checkSignatures adds to snap a problem for each commit of v without a
// good signature by a trusted key, so that the revision is refused like an
// invalid one. The keys are read again when their files changed.
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
	if len(problems) > 0 {
		s.log.Warn("commit signatures refused", "revision", snap.Revision, "problems", len(problems), "first", problems[0].Message)
		snap.Problems = append(append([]manifest.Problem(nil), snap.Problems...), problems...)
	}
}
