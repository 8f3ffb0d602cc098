package sync

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// Destruction is what the agent can least take back, and admission hooks
// are how an operator vets it. So every request to destroy resources, from
// a sync, an API deletion, the prune of an orphaned source or any path
// added later, goes through requestDestroys, which takes only deletions a
// review by the hooks (admit) allowed, and only while the resources are
// as the hooks saw them. A test fails when the store is asked to destroy
// anywhere else.
//
// The hooks are called before the write transaction and its locks are
// taken: a slow hook must not hold up the writes of everything else (on
// the embedded store, one transaction excludes every other writer). The
// transaction then checks that what was reviewed still holds; when it does
// not, the change is planned and reviewed again, a few times at most.

// review is what the admission hooks allowed of a plan, and what the store
// held when they judged it. Only admit makes one.
type review struct {
	// basis is the plan's basis when it was reviewed (Plan.stateBasis):
	// the plan still holds while the store gives the same basis.
	basis string
	// set is the declared set as mutating hooks left it.
	set *manifest.Set
	// warnings are the hooks' warnings, for the person who made the change.
	warnings []string
	// destroys has the ID of every deletion the review allowed, with the
	// stamp (rowStamp) of the row the hooks judged, or "" when no hook
	// reviews deletions of its kind.
	destroys map[int64]string
}

// errPlanMoved ends a write transaction whose plan changed since it was
// reviewed: the change is planned and reviewed again.
var errPlanMoved = errors.New("the store changed since the admission review")

// maxReviews bounds how many times one change is reviewed when the store
// keeps changing under the review.
const maxReviews = 3

// errReviewOutdated is the error of a change that went stale under every
// review: it may well pass when tried again.
var errReviewOutdated = fmt.Errorf("what it changes changed %d times in a row while admission hooks reviewed it; try again: %w",
	maxReviews, store.ErrConflict)

// reviewed runs attempt, which reviews a change and applies it in a
// transaction that fails with errPlanMoved when the review went stale,
// until it does not go stale, at most maxReviews times.
func reviewed(attempt func() error) error {
	for range maxReviews {
		if err := attempt(); !errors.Is(err, errPlanMoved) {
			return err
		}
	}
	return errReviewOutdated
}

// requestDestroys asks the store to destroy the resources ids. Each must
// be a deletion rv allowed, and each the admission hooks judged must be as
// they saw it (same owner, generation, declaration and deletion state);
// otherwise nothing is requested and the error is errPlanMoved.
func requestDestroys(ctx context.Context, tx store.Store, rv *review, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if rv == nil {
		return fmt.Errorf("destroy %d resource(s) without an admission review: %w", len(ids), errPlanMoved)
	}
	var judged []int64
	for _, id := range ids {
		stamp, ok := rv.destroys[id]
		if !ok {
			return fmt.Errorf("the destruction of resource %d was not reviewed: %w", id, errPlanMoved)
		}
		if stamp != "" {
			judged = append(judged, id)
		}
	}
	if len(judged) > 0 {
		rows, err := tx.ListResources(ctx, store.ResourceFilter{IDs: judged})
		if err != nil {
			return fmt.Errorf("read the resources to destroy: %w", err)
		}
		if len(rows) != len(judged) {
			return fmt.Errorf("%d of the %d resource(s) to destroy are gone: %w", len(judged)-len(rows), len(judged), errPlanMoved)
		}
		for _, r := range rows {
			stamp, err := rowStamp(r)
			if err != nil {
				return err
			}
			if stamp != rv.destroys[r.ID] {
				return fmt.Errorf("%s changed since the admission hooks reviewed its destruction: %w", r.Ref(), errPlanMoved)
			}
		}
	}
	return tx.RequestDeletions(ctx, ids)
}

// rowStamp fingerprints what an admission review of a stored resource
// judges: the object the hooks see, its owner, its generation and whether
// its destruction is requested.
func rowStamp(r *store.Resource) (string, error) {
	obj, err := r.Object()
	if err != nil {
		return "", fmt.Errorf("stamp %s: %w", r.Ref(), err)
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "%d\x00%s\x00%d\x00%t\x00", r.ID, r.Source.Name, r.Generation, r.DeletionRequestedAt != nil)
	sum.Write(obj)
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// stateBasis returns the plan's basis: for a plan made from a source's
// resources, a fingerprint of their digests as the plan read them. The
// same declared set planned again, and not refused, gives the same
// resource changes, against the same stored objects, when the basis is the
// same. It is computed on first use: only admission reviews need it.
func (p *Plan) stateBasis() string {
	if p.basis != "" {
		return p.basis
	}
	// In id order, whether the digests came from the store or the cache.
	owned := slices.SortedFunc(slices.Values(p.owned), func(a, b store.ResourceDigest) int { return cmp.Compare(a.ID, b.ID) })
	sum := sha256.New()
	var b []byte
	for _, d := range owned {
		b = strconv.AppendInt(b[:0], d.ID, 10)
		for _, f := range []string{d.Kind, d.Namespace, d.Name, d.SpecHash, d.Action, d.MetaHash} {
			b = append(append(b, 0), f...)
		}
		b = append(b, 0)
		b = strconv.AppendInt(b, d.Generation, 10)
		b = append(b, 0)
		b = strconv.AppendBool(b, d.Deleting)
		b = append(b, 0)
		b = strconv.AppendBool(b, d.PruneDisabled)
		b = append(b, '\n')
		sum.Write(b)
	}
	p.basis = hex.EncodeToString(sum.Sum(nil))
	return p.basis
}
