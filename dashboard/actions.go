package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/no8s/no8s-agent/store"
)

// actionButton is a button that sends a write to the API after the person
// confirms it. Buttons are hidden until the page's script shows them:
// without JavaScript a page shows state only.
type actionButton struct {
	// Label is the button's text; Confirm the question asked first; Done
	// what the page says once the API accepted it.
	Label, Confirm, Done string
	// URL is the API endpoint the script posts JSON to.
	URL string
	// Reason is true when the person may give a reason, sent as
	// {"reason": "..."}: only for a suspension, which records it (a
	// resume records none, and the dialog says the reason is recorded).
	Reason bool
	// Revision, when set, is sent as {"revision": "..."}: the revision the
	// page showed, so that an approval never covers one the person did
	// not see.
	Revision string
	// Danger marks an action that stops work.
	Danger bool
}

// resourceActions are the actions the caller of r may take on res, in the
// state it is in: the API would refuse the others.
func (h *handler) resourceActions(r *http.Request, res *store.Resource) []actionButton {
	if h.allows == nil {
		return nil
	}
	o := Object{Kind: res.Kind, Namespace: res.Namespace, Source: res.Source.Name, Action: res.Action}
	base := "/api/v1/resources/" + strconv.FormatInt(res.ID, 10)
	ref := res.Ref().String()
	var out []actionButton
	if !res.Suspended() && h.may(r, VerbReconcile, o) {
		out = append(out, actionButton{Label: "Reconcile", URL: base + "/reconcile", Done: "Reconcile of " + ref + " requested.",
			Confirm: "Reconcile " + ref + " now? Its action runs at once, whether or not anything changed."})
	}
	if h.may(r, VerbSuspend, o) {
		switch {
		case !res.Suspended():
			out = append(out, actionButton{Label: "Suspend", URL: base + "/suspend", Reason: true, Danger: true, Done: ref + " suspended.",
				Confirm: "Suspend " + ref + "? It is not reconciled, checked for drift or destroyed until it is resumed."})
		case res.CheckResume() == nil:
			out = append(out, actionButton{Label: "Resume", URL: base + "/resume", Done: ref + " resumed.",
				Confirm: "Resume " + ref + "? It is reconciled again."})
		}
	}
	return out
}

// sourceActions are the actions the caller of r may take on src.
func (h *handler) sourceActions(r *http.Request, src *store.Source) []actionButton {
	if h.allows == nil {
		return nil
	}
	o := Object{Source: src.Name}
	base := "/api/v1/sources/" + url.PathEscape(src.Name)
	gone := src.Phase == store.SourceOrphaned || src.Phase == store.SourcePruning
	var out []actionButton
	if src.SuspendedBy == "" && !gone && h.may(r, VerbSync, o) {
		out = append(out, actionButton{Label: "Sync now", URL: base + "/sync", Done: "Sync of " + src.Name + " requested.",
			Confirm: "Fetch and sync source " + src.Name + " now?"})
	}
	if src.Phase == store.SourceStalled && src.LastAttemptedRevision != "" && h.may(r, VerbApprove, o) {
		rev := string(src.LastAttemptedRevision)
		out = append(out, actionButton{Label: "Approve " + shortRevision(src.LastAttemptedRevision), URL: base + "/approve", Revision: rev, Danger: true,
			Done:    "Revision " + rev + " approved: the source syncs it.",
			Confirm: fmt.Sprintf("Approve revision %s of source %s? The sync applies it though it was held back: %s", rev, src.Name, src.Message)})
	}
	if h.may(r, VerbSuspend, o) {
		switch src.SuspendedBy {
		case "":
			out = append(out, actionButton{Label: "Suspend", URL: base + "/suspend", Reason: true, Danger: true, Done: "Source " + src.Name + " suspended.",
				Confirm: "Suspend source " + src.Name + "? It is neither fetched nor synced until it is resumed."})
		case store.SuspendedByAPI:
			out = append(out, actionButton{Label: "Resume", URL: base + "/resume", Done: "Source " + src.Name + " resumed.",
				Confirm: "Resume source " + src.Name + "? It is fetched and synced again."})
		}
	}
	return out
}
