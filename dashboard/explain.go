package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// generationsLimit is how many generations, the newest, the diff form
// offers; older kept ones can still be compared by their numbers.
const generationsLimit = 20

// specDiff is the diff section of a resource page: a form to pick two
// generations, and their diff when one was asked for.
type specDiff struct {
	// Generations are those whose specs are kept, newest first.
	Generations []int64
	From, To    int64
	Split       bool
	// Asked is true when the request asked for a diff; Problem then says
	// why none is shown, if none is.
	Asked   bool
	Problem string
	Hunks   []hunk
	// Unchanged is true when both specs read the same.
	Unchanged bool
	// UnifiedURL and SplitURL show the same diff the other way.
	UnifiedURL, SplitURL string
}

// historyRow is a reconcile attempt as the history shows it.
type historyRow struct {
	*store.ReconcileRecord
	// Cause says what started the attempt, By who, where that is recorded.
	Cause, By string
	// DiffURL shows what changed in the attempt's generation, for a new
	// generation whose predecessor's spec is kept.
	DiffURL string
	// Plan is the attempt's plan output, masked.
	Plan string
}

// conditionLinks are the links of one condition's message.
type conditionLinks struct {
	Type  string
	Links []segment
}

// resourceExtras is what a resource page shows to explain the resource:
// the diff of its generations, its history with the cause of each
// attempt, the last plan, and the links its progress, conditions and
// outputs carry.
type resourceExtras struct {
	Diff      specDiff
	Attempts  []historyRow
	LastPlan  *historyRow
	Progress  []segment
	CondLinks []conditionLinks
	OutLinks  []outputLink
}

// explainResource fills what p shows beyond the resource's row: it masks
// the spec and outputs as they are shown, and reads the kept specs of its
// generations and its source's sync history.
func (h *handler) explainResource(ctx context.Context, q url.Values, res *store.Resource, p *resourcePage) error {
	p.Spec = prettyJSON(h.masker.MaskJSON(res.Spec))
	p.Outputs = prettyJSON(h.masker.MaskJSON(res.Outputs))
	x := &p.Extras
	if res.Phase == manifest.PhaseReconciling || res.Phase == manifest.PhaseDeleting {
		if segs := linked(h.masker.Mask(res.StatusMessage)); hasLink(segs) {
			x.Progress = segs
		}
	}
	for _, c := range res.Conditions {
		if segs := linked(h.masker.Mask(c.Message)); hasLink(segs) {
			x.CondLinks = append(x.CondLinks, conditionLinks{Type: c.Type, Links: segs})
		}
	}
	x.OutLinks = outputLinks(h.masker.MaskJSON(res.Outputs))

	if err := h.diffGenerations(ctx, q, res, &x.Diff); err != nil {
		return err
	}
	if x.Diff.Asked {
		// A diff is read, not watched: reloading would lose the reader's place.
		p.Refresh = 0
	}
	kept := make(map[int64]bool, len(x.Diff.Generations))
	for _, g := range x.Diff.Generations {
		kept[g] = true
	}

	// The syncs that wrote the generations say who wrote them.
	syncs, err := h.store.ListSyncRecords(ctx, res.Source.Name, syncHistoryLimit)
	if err != nil {
		return err
	}
	byRev := make(map[manifest.Revision]*store.SyncRecord, len(syncs))
	for _, s := range syncs {
		if _, ok := byRev[s.Revision]; !ok && s.Success {
			byRev[s.Revision] = s
		}
	}
	for _, rec := range p.History {
		row := historyRow{ReconcileRecord: rec, Plan: h.masker.Mask(rec.PlanOutput)}
		row.Cause, row.By = attemptCause(rec, res.Source.Name, byRev[rec.SourceRevision])
		if (rec.Trigger == store.TriggerUpdate || rec.Trigger == store.TriggerCreate) && kept[rec.Generation-1] && kept[rec.Generation] {
			row.DiffURL = diffURL(rec.Generation-1, rec.Generation, false)
		}
		x.Attempts = append(x.Attempts, row)
	}
	for i := range x.Attempts {
		if x.Attempts[i].Plan != "" {
			x.LastPlan = &x.Attempts[i]
			break
		}
	}
	return nil
}

func hasLink(segs []segment) bool {
	for _, s := range segs {
		if s.URL != "" {
			return true
		}
	}
	return false
}

// attemptCause says what started a reconcile attempt, and who, when the
// sync that wrote its generation recorded it: the author of an API write
// (its token's name) or of the commit.
func attemptCause(rec *store.ReconcileRecord, source string, sync *store.SyncRecord) (cause, by string) {
	switch rec.Trigger {
	case store.TriggerCreate, store.TriggerUpdate:
		what := "new generation"
		if rec.Trigger == store.TriggerCreate {
			what = "new resource"
		}
		if source == store.APISource {
			cause = what + " written through the API"
		} else {
			cause = what + " synced from " + source
		}
		if sync != nil {
			by = sync.Commit.Author
		}
	case store.TriggerRetry:
		cause = "after a failed attempt, with backoff"
	case store.TriggerDrift:
		cause = "scheduled check of the world against the spec"
	case store.TriggerManual:
		// Requests do not record their caller.
		cause = "requested through the API or the CLI"
	case store.TriggerDelete:
		cause = "its deletion was requested"
	default:
		cause = string(rec.Trigger)
	}
	return cause, by
}

// diffURL is the resource page's address showing the diff of two
// generations.
func diffURL(from, to int64, split bool) string {
	v := url.Values{"diff": {fmt.Sprintf("%d..%d", from, to)}}
	if split {
		v.Set("view", "split")
	}
	return "?" + v.Encode() + "#diff"
}

// parseDiff reads the generations a request asks to compare, as
// diff=FROM..TO or as the form's from and to; asked is false when it asks
// for none.
func parseDiff(q url.Values) (from, to int64, asked bool, err error) {
	a, b := q.Get("from"), q.Get("to")
	if d := q.Get("diff"); d != "" {
		var ok bool
		if a, b, ok = strings.Cut(d, ".."); !ok {
			return 0, 0, true, fmt.Errorf("diff=%q: want two generations, as in diff=1..2", d)
		}
	}
	if a == "" && b == "" {
		return 0, 0, false, nil
	}
	from, errA := strconv.ParseInt(a, 10, 64)
	to, errB := strconv.ParseInt(b, 10, 64)
	if errA != nil || errB != nil || from < 1 || to < 1 {
		return 0, 0, true, fmt.Errorf("generations %q and %q: want two positive numbers", a, b)
	}
	return from, to, true, nil
}

// diffGenerations fills d: the generations whose specs are kept, and the
// diff the request asks for.
func (h *handler) diffGenerations(ctx context.Context, q url.Values, res *store.Resource, d *specDiff) error {
	kept, err := h.store.ListGenerationSpecs(ctx, res.ID, generationsLimit)
	if err != nil {
		return err
	}
	specs := make(map[int64]json.RawMessage, len(kept)+1)
	for _, g := range kept {
		d.Generations = append(d.Generations, g.Generation)
		specs[g.Generation] = g.Spec
	}
	if _, ok := specs[res.Generation]; !ok {
		// The current generation's spec is the resource's own.
		specs[res.Generation] = res.Spec
		d.Generations = append([]int64{res.Generation}, d.Generations...)
	}
	d.Split = q.Get("view") == "split"
	d.From, d.To = res.Generation-1, res.Generation
	if d.From < 1 {
		d.From = 1
	}
	from, to, asked, err := parseDiff(q)
	d.Asked = asked
	switch {
	case err != nil:
		d.Problem = err.Error()
		return nil
	case !asked:
		return nil
	}
	d.From, d.To = from, to
	d.UnifiedURL, d.SplitURL = diffURL(from, to, false), diffURL(from, to, true)
	var missing []string
	for _, g := range []int64{from, to} {
		if _, ok := specs[g]; ok {
			continue
		}
		spec, err := h.store.GetGenerationSpec(ctx, res.ID, g)
		switch {
		case errors.Is(err, store.ErrNotFound):
			missing = append(missing, strconv.FormatInt(g, 10))
		case err != nil:
			return err
		default:
			specs[g] = spec.Spec
		}
	}
	if len(missing) > 0 {
		d.Problem = fmt.Sprintf("The spec of generation %s is not kept: it is older than the history kept, "+
			"from before the agent kept specs, or not written yet.", strings.Join(missing, " and "))
		return nil
	}
	d.Hunks = hunks(diffText(specLines(h.masker.MaskJSON(specs[from])), specLines(h.masker.MaskJSON(specs[to]))))
	d.Unchanged = len(d.Hunks) == 0
	return nil
}

// revisionRow is a revision a source synced or refused, with its commit
// on the Git host and what was told of it.
type revisionRow struct {
	Rev     manifest.Revision
	URL     string
	Subject string
	Author  string
	// Applied is true for a revision applied; Current for the one the
	// source is at.
	Applied, Current bool
	// Created, Updated and Deleted count what it changed, or would have
	// changed when it was refused.
	Created, Updated, Deleted int
	Message                   string
	Problems                  []manifest.Problem
	Finished                  *store.SyncRecord
	// Told are the deliveries of the notifications about the revision
	// (commit statuses among them), newest first.
	Told []told
}

// told is one delivery of a notification about a revision.
type told struct {
	Event, Provider string
	Delivery        store.Delivery
}

// sourceExtras is what a source page shows to explain the source: its
// revisions linked to the Git host, the refused ones with why, and what
// was told of each.
type sourceExtras struct {
	AppliedURL, AttemptedURL, ApprovedURL string
	// Refused is the revision the source is stuck on, nil when none.
	Refused   *revisionRow
	Revisions []revisionRow
}

// explainSource fills what p shows beyond the source's row, from what the
// page read already: the sync history and the notifications.
func (h *handler) explainSource(p *sourcePage) {
	s, x := p.S, &p.Extras
	var links SourceLinks
	if h.sourceLinks != nil {
		links = h.sourceLinks(s.Name)
	}
	link := func(r manifest.Revision) string { return commitLink(s.URL, links, r) }
	x.AppliedURL, x.AttemptedURL, x.ApprovedURL = link(s.LastAppliedRevision), link(s.LastAttemptedRevision), link(s.ApprovedRevision)

	byRev := map[manifest.Revision][]told{}
	for _, n := range p.Notices {
		if n.Kind != "" || n.Revision == "" {
			continue
		}
		if len(n.Results) == 0 {
			byRev[n.Revision] = append(byRev[n.Revision], told{Event: n.Event})
		}
		for _, prov := range sortedKeys(n.Results) {
			byRev[n.Revision] = append(byRev[n.Revision], told{Event: n.Event, Provider: prov, Delivery: n.Results[prov]})
		}
	}
	seen := map[manifest.Revision]bool{}
	for _, rec := range p.History {
		if seen[rec.Revision] {
			continue
		}
		seen[rec.Revision] = true
		x.Revisions = append(x.Revisions, revisionRow{Rev: rec.Revision, URL: link(rec.Revision),
			Subject: firstLine(h.masker.Mask(rec.Commit.Message)), Author: rec.Commit.Author,
			Applied: rec.Success, Current: rec.Revision == s.LastAppliedRevision,
			Created: rec.Created, Updated: rec.Updated, Deleted: rec.Deleted,
			Message: h.masker.Mask(rec.Message), Problems: rec.Errors, Finished: rec, Told: byRev[rec.Revision]})
	}
	if (s.Phase == store.SourceFailed || s.Phase == store.SourceStalled) && s.LastAttemptedRevision != "" &&
		s.LastAttemptedRevision != s.LastAppliedRevision {
		r := revisionRow{Rev: s.LastAttemptedRevision, URL: x.AttemptedURL, Subject: firstLine(h.masker.Mask(s.LastCommit.Message)),
			Author: s.LastCommit.Author, Message: h.masker.Mask(s.Message), Problems: s.Errors, Told: byRev[s.LastAttemptedRevision]}
		// The refusal's sync record, when kept, says what it would change.
		for i := range x.Revisions {
			if x.Revisions[i].Rev == r.Rev && !x.Revisions[i].Applied {
				f := x.Revisions[i]
				r.Created, r.Updated, r.Deleted, r.Finished = f.Created, f.Updated, f.Deleted, f.Finished
				break
			}
		}
		x.Refused = &r
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
