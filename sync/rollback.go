package sync

import (
	"fmt"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// ReasonRollbackRefused: the revision goes back in history on a source with
// a signature policy (its commit is an ancestor of the one applied, or that
// could not be told). It waits, stalled, for an approval of that revision.
const ReasonRollbackRefused = "RollbackRefused"

// checkLineage refuses a snapshot whose source judged it against another
// revision than the one applied now, as the verdict may not hold any more
// (a plain error: the next fetch judges it again), and a rollback that is
// not approved. An approval is of one revision: the rollback's own.
func checkLineage(t Target, snap *source.Snapshot, cur *store.Source) error {
	l := snap.Lineage
	if l == nil {
		return nil
	}
	if l.Applied != cur.LastAppliedRevision {
		return fmt.Errorf("source %s: revision %s was judged against %s, and %s has been applied since: it is judged again at the next fetch",
			t.Name, snap.Revision, orNone(l.Applied), orNone(cur.LastAppliedRevision))
	}
	if l.Rollback == "" || cur.ApprovedRevision == snap.Revision {
		return nil
	}
	if len(l.Problems) > 0 {
		signature := strings.TrimPrefix(l.Problems[0].Message, "signature policy: ")
		if len(l.Problems) > 1 {
			signature += fmt.Sprintf(" (and %d more)", len(l.Problems)-1)
		}
		return &Error{Reason: ReasonRollbackRefused, Problems: l.Problems, Message: fmt.Sprintf(
			"revision %s goes back in history: %s; and its signature does not verify: %s. "+
				"An approval would not lift that: to go back, push a new signed commit with the content wanted",
			snap.Revision, l.Rollback, signature)}
	}
	return &Error{Reason: ReasonRollbackRefused, Message: fmt.Sprintf(
		"revision %s goes back in history: %s. A signature proves who made a commit, not that it is the newest: "+
			"if going back is intended, approve this revision (no8s-agent approve source %s --revision %s), which applies it as it is, deletions included",
		snap.Revision, l.Rollback, t.Name, snap.Revision)}
}

// lineageJudged is what of the snapshot's lineage a refusal depends on,
// for judgedAgainst: a rotated key may change the rollback's problems.
func lineageJudged(snap *source.Snapshot) string {
	l := snap.Lineage
	if l == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nlineage %s %s", l.Applied, l.Rollback)
	for _, p := range l.Problems {
		b.WriteString("\nlineage " + p.String())
	}
	return b.String()
}

func orNone(rev manifest.Revision) string {
	if rev == "" {
		return "nothing"
	}
	return string(rev)
}
