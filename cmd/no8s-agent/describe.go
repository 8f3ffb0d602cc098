package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// describeAttempts is how many of the last attempts describe shows.
const describeAttempts = 5

func describeCommand(stdout, stderr io.Writer) *cobra.Command {
	var sf serverFlags
	// What is not there is said as kubectl says it, and exits 1.
	notFound := func(err error) error {
		var e *client.Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			fmt.Fprintf(stderr, "Error from server (NotFound): %s\n", e.Message)
			return exitCode(exitError)
		}
		return err
	}
	res := &cobra.Command{
		Use: "resource KIND/NAME", Aliases: resourceWords[1:],
		Short: "show a resource (KIND/NAME or KIND/NAMESPACE/NAME): status, conditions, lease, dependencies, last attempts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], sf.namespace)
			if err != nil {
				return err
			}
			c, err := sf.client()
			if err != nil {
				return err
			}
			return notFound(describeResource(cmd.Context(), c, stdout, ref))
		},
	}
	sf.namespaceFlag(res)
	res.ValidArgsFunction = resourceRefs(&sf)
	src := &cobra.Command{
		Use: "source NAME", Aliases: sourceWords[1:], Short: "show a source: phase, revisions, errors, resources, last syncs",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.client()
			if err != nil {
				return err
			}
			return notFound(describeSource(cmd.Context(), c, stdout, args[0]))
		},
	}
	src.ValidArgsFunction = sourceNames(&sf)
	v := verb("describe", "show one resource or source in detail", &sf, res)
	v.AddCommand(src)
	return v
}

// describeResource shows the resource ref names: without a namespace, in
// the agent's default namespace, or cluster-scoped.
func describeResource(ctx context.Context, c *client.Client, w io.Writer, ref manifest.ObjectRef) error {
	all, defaultNS, err := c.Resources(ctx, client.ResourceQuery{})
	// A token limited to some kinds may list those only: this kind's then,
	// and what depends on the others is not shown.
	partial := forbidden(err)
	if partial {
		all, defaultNS, err = c.Resources(ctx, client.ResourceQuery{Kind: ref.Kind})
	}
	if err != nil {
		return err
	}
	r, err := client.Match(all, ref, defaultNS)
	if err != nil {
		return err
	}
	// The list may leave out what the single read has (the lease).
	if one, err := c.GetResource(ctx, r.ID); err == nil {
		r = one
	} else if !client.IsNotFound(err) {
		return err
	}
	var agents []api.Agent
	agentsHidden := false
	if r.Lease != nil {
		agents, err = c.Agents(ctx)
		if agentsHidden = forbidden(err); err != nil && !agentsHidden {
			return err
		}
	}
	recs, err := c.ResourceHistory(ctx, r.ID, describeAttempts)
	if err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("Name", orDash(r.Name))
	if r.Namespace != "" {
		field("Namespace", r.Namespace)
	}
	field("Kind", r.Kind+" ("+r.APIVersion+")")
	field("ID", fmt.Sprint(r.ID))
	src := r.Source.Name
	if r.Source.Path != "" {
		src += " " + r.Source.Path
	}
	if r.Source.Revision != "" {
		src += " @ " + shortRevision(r.Source.Revision)
	}
	field("Source", orDash(src))
	field("Action", orDash(r.ActionPlugin))
	if len(r.PluginConfig) > 0 && string(r.PluginConfig) != "null" {
		field("Plugin config", oneLine(string(r.PluginConfig)))
	}
	field("Status", statusCell(r.Resource))
	if r.Orphaned {
		field("Orphaned", fmt.Sprintf("yes: no agent's configuration lists source %s; neither reconciled nor destroyed until it is "+
			"listed again, or forgotten or pruned (no8s-agent delete source %s)", r.Source.Name, r.Source.Name))
	}
	if r.Suspended {
		field("Suspended", suspendedBy(r.SuspendedBy, r.SuspendedAt))
	}
	field("Message", orDash(oneLine(r.StatusMessage)))
	field("Generation", fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration))
	if r.RetryCount > 0 {
		field("Retries", fmt.Sprint(r.RetryCount))
	}
	if r.NextReconcileTime != nil {
		field("Next reconcile", when(*r.NextReconcileTime))
	}
	if r.LastReconcileTime != nil {
		field("Last reconcile", when(*r.LastReconcileTime))
	}
	if r.DeletionRequestedAt != nil {
		field("Deletion requested", when(*r.DeletionRequestedAt))
	}
	if l := r.Lease; l != nil {
		holder := orDash(l.Holder)
		switch state, known := holderState(agents, l.Holder); {
		case agentsHidden:
			holder += " (the token may not list the agents)"
		case !known:
			holder += " (not a registered agent)"
		case state == store.AgentAlive:
			holder += " (alive)"
		case state == store.AgentStopped:
			holder += " (stopped)"
		default:
			holder += " (not heart-beating)"
		}
		field("Lease holder", holder)
		if l.Since != nil {
			field("Lease since", when(*l.Since))
		}
		field("Lease expires", when(l.ExpiresAt))
	}
	field("Created", when(r.CreatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	describeWhy(w, r.Why)

	fmt.Fprintln(w, "Conditions:")
	if len(r.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, cd := range r.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cd.Type, cd.Status, orDash(cd.Reason), age(cd.LastTransitionTime), orDash(oneLine(cd.Message)))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "Depends on:")
	if len(r.DependsOn) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, d := range r.DependsOn {
		state := "not found"
		if partial && d.Kind != r.Kind {
			state = "not shown: the token may not list " + d.Kind
		}
		for i := range all {
			if all[i].Ref() == d {
				state = string(all[i].Status)
			}
		}
		fmt.Fprintf(w, "  %s (%s)\n", d, state)
	}
	fmt.Fprintln(w, "Required by:")
	var dependents []string
	for i := range all {
		for _, d := range all[i].DependsOn {
			if d == r.Ref() {
				dependents = append(dependents, fmt.Sprintf("%s (%s)", all[i].Ref(), all[i].Status))
			}
		}
	}
	sort.Strings(dependents)
	if partial {
		dependents = append(dependents, "(resources of other kinds not shown: the token may not list them)")
	}
	if len(dependents) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, d := range dependents {
		fmt.Fprintf(w, "  %s\n", d)
	}

	fmt.Fprintln(w, "Last attempts:")
	if len(recs) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  GEN\tTRIGGER\tRESULT\tDURATION\tAGENT\tAGE\tERROR")
		for _, h := range recs {
			result, msg := "ok", "-"
			if !h.Success {
				result = "failed"
			}
			if h.ErrorMessage != nil {
				msg = oneLine(*h.ErrorMessage)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%dms\t%s\t%s\t%s\n", h.Generation, h.Trigger, result, h.DurationMS, orDash(h.AgentID), age(h.ReconcileTime), msg)
		}
		_ = tw.Flush()
	}

	// Events: what happened to the resource, oldest first, from its
	// condition transitions and its attempts.
	type event struct {
		at   time.Time
		text string
	}
	var events []event
	for _, cd := range r.Conditions {
		text := fmt.Sprintf("%s=%s", cd.Type, cd.Status)
		if cd.Reason != "" {
			text += " " + cd.Reason
		}
		events = append(events, event{cd.LastTransitionTime, text})
	}
	for _, h := range recs {
		text := fmt.Sprintf("reconcile of generation %d (%s) succeeded", h.Generation, h.Trigger)
		if !h.Success {
			text = fmt.Sprintf("reconcile of generation %d (%s) failed", h.Generation, h.Trigger)
		}
		events = append(events, event{h.ReconcileTime, text})
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	fmt.Fprintln(w, "Events:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range events {
		fmt.Fprintf(tw, "  %s ago\t%s\n", age(e.at), e.text)
	}
	return tw.Flush()
}

func describeSource(ctx context.Context, c *client.Client, w io.Writer, name string) error {
	s, err := c.GetSource(ctx, name)
	if err != nil {
		return err
	}
	recs, err := c.SourceHistory(ctx, name, describeAttempts)
	if err != nil {
		return err
	}
	rs, err := c.ListResources(ctx, "", name)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("Name", s.Name)
	field("Kind", s.Kind)
	if s.URL != "" {
		field("URL", s.URL)
	}
	if s.Path != "" {
		field("Path", s.Path)
	}
	field("Phase", s.Phase)
	if s.Suspended {
		field("Suspended", suspendedBy(s.SuspendedBy, s.SuspendedAt))
	}
	field("Message", orDash(oneLine(s.Message)))
	field("Applied revision", orDash(s.LastAppliedRevision))
	field("Attempted revision", orDash(s.LastAttemptedRevision))
	if s.ApprovedRevision != "" {
		field("Approved revision", s.ApprovedRevision)
	}
	if s.LastCommit != nil {
		field("Last commit", oneLine(s.LastCommit.Author+": "+s.LastCommit.Message))
	}
	if s.LastCheckTime != nil {
		field("Last check", when(*s.LastCheckTime))
	}
	if s.LastSyncTime != nil {
		field("Last sync", when(*s.LastSyncTime))
	}
	if s.LastAppliedTime != nil {
		field("Last applied", when(*s.LastAppliedTime))
	}
	counts := map[string]int{}
	for _, r := range rs {
		counts[string(r.Status)]++
	}
	var parts []string
	for _, phase := range []string{"ready", "pending", "reconciling", "failed", "deleting"} {
		if counts[phase] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[phase], phase))
		}
	}
	field("Resources", fmt.Sprintf("%d", len(rs))+parenthesised(strings.Join(parts, ", ")))
	if err := tw.Flush(); err != nil {
		return err
	}
	describeWhy(w, s.Why)
	fmt.Fprintln(w, "Errors:")
	if len(s.Errors) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, p := range s.Errors {
		fmt.Fprintf(w, "  %s:%d: %s\n", orDash(p.File), p.Line, oneLine(p.Message))
	}
	fmt.Fprintln(w, "Last syncs:")
	if len(recs) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REVISION\tRESULT\tCREATED\tUPDATED\tDELETED\tDURATION\tAGE\tMESSAGE")
	for _, h := range recs {
		result := "ok"
		if !h.Success {
			result = "refused"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%dms\t%s\t%s\n", orDash(shortRevision(h.Revision)), result, h.Created, h.Updated, h.Deleted,
			h.DurationMS, age(h.StartedAt), orDash(oneLine(h.Message)))
	}
	return tw.Flush()
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// when writes a time as RFC 3339 with how long ago or ahead it is.
func when(t time.Time) string {
	if d := time.Until(t); d > 0 {
		return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age(t))
}

// holderState tells whether the lease holder is an agent still recording
// its heartbeat, stopped or gone; known is false when no agent of that id
// is listed.
func holderState(agents []api.Agent, holder string) (state store.AgentState, known bool) {
	for _, a := range agents {
		if a.ID == holder {
			if a.State == "" && a.Alive { // an agent older than the state field
				return store.AgentAlive, true
			}
			return a.State, true
		}
	}
	return "", false
}

// suspendedBy says what suspended an object, and when if known.
func suspendedBy(by string, at *time.Time) string {
	out := "yes, by " + map[string]string{"api": "the API", "annotation": "its annotation no8s.io/suspend",
		"config": "the configuration (suspend: true)"}[by]
	if at != nil {
		out += ", " + when(*at)
	}
	return out
}

// forbidden reports whether err is the API's 403: the token may not.
func forbidden(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden
}

// describeWhy writes why a resource or a source is not ready, as the
// agent explains it: nothing when it is ready.
func describeWhy(w io.Writer, wh *why.Why) {
	if wh == nil {
		return
	}
	fmt.Fprintln(w, "Why:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "  %s:\t%s\n", k, v) }
	field("Reason", wh.Reason)
	field("Message", orDash(whyLine(wh.Message)))
	if wh.Since != nil {
		field("Since", when(*wh.Since))
	}
	if wh.Until != nil {
		field("Until", when(*wh.Until))
	}
	if s := wh.Suspension; s != nil {
		by := s.By
		if s.Identity != "" {
			by += ", by " + whyLine(s.Identity)
		}
		if s.Path != "" {
			by += ", in " + whyLine(s.Path)
		}
		field("Suspended", by)
		if s.Reason != "" {
			field("Suspend reason", whyLine(s.Reason))
		}
	}
	if l := wh.Lease; l != nil {
		field("Lease", fmt.Sprintf("%s (%s) until %s", whyLine(l.Holder), l.State, when(l.Until)))
	}
	if wh.Attempt > 0 {
		field("Failed attempts", fmt.Sprint(wh.Attempt))
	}
	if src := wh.Source; src != nil {
		state := src.Phase
		if src.Suspended {
			state += ", suspended"
		}
		text := fmt.Sprintf("%s (%s)", src.Name, state)
		if src.Message != "" {
			text += ": " + whyLine(src.Message)
		}
		field("Source", text)
	}
	if wh.Revision != "" {
		field("Revision", whyLine(wh.Revision))
	}
	if c := wh.Cause; c != nil {
		field("Root cause", c.Reason+": "+whyLine(c.Message))
	}
	_ = tw.Flush()
	if len(wh.Chain) > 0 {
		fmt.Fprintln(w, "  Chain:")
		for i, l := range wh.Chain {
			text := "(hidden)"
			if l.Kind != "" {
				text = l.Ref().String()
				switch {
				case l.Missing:
					text += " (missing)"
				case l.Phase != "":
					text += " (" + l.Phase + ")"
				}
			}
			if l.Message != "" {
				text += ": " + whyLine(l.Message)
			}
			fmt.Fprintf(w, "    %d. %s\n", i+1, text)
		}
	}
	if len(wh.Problems) > 0 {
		fmt.Fprintln(w, "  Problems:")
		for _, p := range wh.Problems {
			fmt.Fprintf(w, "    %s\n", whyLine(p))
		}
	}
	for _, a := range wh.Actions {
		fmt.Fprintf(w, "  To %s: %s", a.Name, a.CLI)
		if a.API != "" {
			fmt.Fprintf(w, " (API: %s)", a.API)
		}
		fmt.Fprintln(w)
	}
}

// whyLine is s on one line, cut only when very long: the explanation is
// what describe is read for. Control characters are escaped: the
// explanation quotes what others wrote (an action's status message, a
// source's problems), which must not drive the terminal.
func whyLine(s string) string {
	s = manifest.EscapeControl(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > 1000 {
		return string(r[:997]) + "..."
	}
	return s
}
