package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/client"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// getObjectWords are the objects get reads, with their short names.
func getObjectWords() []string {
	return []string{"types", "resources", "sources", "history", "rt", "res", "src"}
}

// getObject resolves what get was asked for to types, resources, sources
// or history.
func getObject(word string) (string, bool) {
	switch strings.ToLower(word) {
	case "types", "type", "resource-types", "resource-type", "rt":
		return "types", true
	case "resources", "resource", "res":
		return "resources", true
	case "sources", "source", "src":
		return "sources", true
	case "history":
		return "history", true
	}
	return "", false
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("get", "get types|resources|sources|history [NAME] [flags]\n\n"+
		"Reads the store. Short names: rt (types), res (resources), src (sources). NAME picks one\n"+
		"object by name. history lists sync attempts of sources, or with --resource KIND/NAME the\n"+
		"reconcile attempts of one resource. -o json prints the objects the HTTP API returns; -o wide\n"+
		"adds columns; -o name prints kind/name. -w then watches the running agent's event stream\n"+
		"(--server, default from --config's listen address; token from NO8S_TOKEN or --token-env).", stdout, stderr)
	var sf storeFlags
	sf.register(fs)
	output := fs.String("o", "table", "output format: table, wide, name, json or yaml")
	kind := fs.String("kind", "", "only resources of this kind (resources), or types of this name (types); any case")
	sourceName := fs.String("source", "", "only this source's resources, types or history")
	status := fs.String("status", "", "only resources in this status (pending, reconciling, ready, failed, deleting)")
	var labels repeated
	fs.Var(&labels, "label", "only resources with this label, as key=value; repeatable")
	limit := fs.Int("limit", 0, "at most this many rows (0: all; history: 20)")
	resource := fs.String("resource", "", "history of this resource, as KIND/NAME")
	watch := fs.Bool("w", false, "after the list, watch the agent's event stream for changes (resources, sources)")
	fs.BoolVar(watch, "watch", false, "same as -w")
	server := fs.String("server", "", "with -w: the agent's API, as http://host:port (default: --config's listen address)")
	tokenEnv := fs.String("token-env", defaultTokenEnv, "with -w: the environment variable holding the API token")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) < 1 || len(rest) > 2 {
		return fail(stderr, "get", fmt.Errorf("say what to get: types, resources, sources or history, and optionally a NAME"))
	}
	switch *output {
	case "table", "wide", "name", "json", "yaml":
	default:
		return fail(stderr, "get", fmt.Errorf("-o must be table, json or yaml (or wide, name), not %q", *output))
	}
	object, ok := getObject(rest[0])
	if !ok {
		return fail(stderr, "get", fmt.Errorf("unknown object %q: want types (rt), resources (res), sources (src) or history", rest[0]))
	}
	name := ""
	if len(rest) == 2 {
		if object == "history" {
			return fail(stderr, "get", fmt.Errorf("history takes no NAME: use --source NAME or --resource KIND/NAME"))
		}
		name = rest[1]
	}
	if *watch && object != "resources" && object != "sources" {
		return fail(stderr, "get", fmt.Errorf("-w watches resources or sources, not %s", object))
	}
	cfg, st, err := sf.open(ctx)
	if err != nil {
		return fail(stderr, "get", err)
	}
	defer st.Close()
	m := cliMasker(cfg, sf.config, stderr)

	var n int
	switch object {
	case "types":
		n, err = getTypes(ctx, st, m, stdout, *output, store.TypeFilter{Source: *sourceName}, *kind, name)
	case "resources":
		f := store.ResourceFilter{Source: *sourceName, Phase: manifest.Phase(*status)}
		if f.Phase != "" && !f.Phase.Valid() {
			return fail(stderr, "get", fmt.Errorf("--status %q: want pending, reconciling, ready, failed or deleting", *status))
		}
		for _, l := range labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return fail(stderr, "get", fmt.Errorf("--label %q: want key=value", l))
			}
			if f.Labels == nil {
				f.Labels = map[string]string{}
			}
			f.Labels[k] = v
		}
		n, err = getResources(ctx, st, m, stdout, *output, f, *kind, name, *limit)
	case "sources":
		n, err = getSources(ctx, st, m, stdout, *output, name)
	case "history":
		lim := *limit
		if lim == 0 {
			lim = 20
		}
		if *resource != "" {
			n, err = getReconcileHistory(ctx, st, m, stdout, *output, *resource, lim)
		} else {
			n, err = getSyncHistory(ctx, st, m, stdout, *output, *sourceName, lim)
		}
	}
	if err != nil {
		return fail(stderr, "get", err)
	}
	if n == 0 && isTable(*output) {
		fmt.Fprintln(stderr, "No resources found")
	}
	if !*watch {
		return exitOK
	}
	flags := serverFlags{server: *server, config: sf.config, tokenEnv: *tokenEnv}
	c, err := flags.client()
	if err != nil {
		return fail(stderr, "get", err)
	}
	if err := watchEvents(ctx, c, m, stdout, object, *output, *kind, *sourceName, name); err != nil && ctx.Err() == nil {
		return fail(stderr, "get", err)
	}
	return exitOK
}

func getTypes(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format string, f store.TypeFilter, kind, name string) (int, error) {
	rows, err := st.ListResourceTypes(ctx, f)
	if err != nil {
		return 0, err
	}
	objs := []api.ResourceType{}
	for _, r := range rows {
		if (kind != "" && !strings.EqualFold(r.Name, kind)) || (name != "" && !strings.EqualFold(r.Name, name)) {
			continue
		}
		objs = append(objs, api.NewResourceType(r))
	}
	objs = redact.MaskValues(m, objs)
	if format == "name" {
		for _, o := range objs {
			fmt.Fprintf(w, "resourcetype/%s/%s\n", o.Name, o.Version)
		}
		return len(objs), nil
	}
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tVERSION\tGROUP\tACTION\tSOURCE\tAGE")
		for _, o := range objs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Version, o.Group, orDash(o.Action), o.Source.Name, age(o.CreatedAt))
		}
	})
}

// getResources lists resources; kind matches any case, and the limit
// applies after that match.
func getResources(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format string, f store.ResourceFilter, kind, name string, limit int) (int, error) {
	rows, err := st.ListResources(ctx, f)
	if err != nil {
		return 0, err
	}
	objs := []api.Resource{}
	for _, r := range rows {
		if (kind != "" && !strings.EqualFold(r.Kind, kind)) || (name != "" && r.Name != name) {
			continue
		}
		if limit > 0 && len(objs) == limit {
			break
		}
		objs = append(objs, api.NewResource(r))
	}
	// Specs, labels and annotations are stored as declared: a secret
	// quoted in them is masked before anything escapes, quotes or cuts it.
	objs = redact.MaskValues(m, objs)
	if format == "name" {
		for _, o := range objs {
			fmt.Fprintf(w, "%s/%s\n", o.Kind, o.Name)
		}
		return len(objs), nil
	}
	wide := format == "wide"
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		if wide {
			fmt.Fprintln(tw, "ID\tKIND\tNAME\tREADY\tSTATUS\tREASON\tSUSPENDED\tGEN\tOBSERVED\tACTION\tSOURCE\tAGE\tMESSAGE")
		} else {
			fmt.Fprintln(tw, "KIND\tNAME\tREADY\tSTATUS\tREASON\tSUSPENDED\tAGE\tMESSAGE")
		}
		for _, o := range objs {
			ready, reason := readiness(o.Conditions)
			msg := orDash(oneLine(o.StatusMessage))
			if wide {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", o.ID, o.Kind, o.Name, ready, o.Status, reason,
					suspendedCell(o.Suspended), o.Generation, o.ObservedGeneration, orDash(o.ActionPlugin), o.Source.Name, age(o.CreatedAt), msg)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Kind, o.Name, ready, o.Status, reason, suspendedCell(o.Suspended),
				age(o.CreatedAt), shorten(msg, 60))
		}
	})
}

// readiness is the Ready condition's status and reason, or "Unknown" and
// "-" without one.
func readiness(conds []manifest.Condition) (ready, reason string) {
	c := manifest.FindCondition(conds, manifest.ConditionReady)
	if c == nil {
		return string(manifest.ConditionUnknown), "-"
	}
	return string(c.Status), orDash(c.Reason)
}

// suspendedCell is the SUSPENDED column: True or False, as Flux prints it.
func suspendedCell(suspended bool) string {
	if suspended {
		return "True"
	}
	return "False"
}

// shorten cuts s to n characters at most.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func getSources(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format, name string) (int, error) {
	rows, err := st.ListSources(ctx)
	if err != nil {
		return 0, err
	}
	objs := []api.Source{}
	for _, r := range rows {
		if name == "" || r.Name == name {
			objs = append(objs, api.NewSource(r))
		}
	}
	objs = redact.MaskValues(m, objs)
	if format == "name" {
		for _, o := range objs {
			fmt.Fprintf(w, "source/%s\n", o.Name)
		}
		return len(objs), nil
	}
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tKIND\tREADY\tPHASE\tSUSPENDED\tREVISION\tLAST SYNC\tMESSAGE")
		for _, o := range objs {
			last := "-"
			if o.LastSyncTime != nil {
				last = age(*o.LastSyncTime) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Kind, sourceReady(o.Phase), o.Phase, suspendedCell(o.Suspended), orDash(shortRevision(o.LastAppliedRevision)), last, orDash(oneLine(o.Message)))
		}
	})
}

func getSyncHistory(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format, sourceName string, limit int) (int, error) {
	names := []string{sourceName}
	if sourceName == "" {
		sources, err := st.ListSources(ctx)
		if err != nil {
			return 0, err
		}
		names = names[:0]
		for _, s := range sources {
			names = append(names, s.Name)
		}
	}
	var objs []api.SyncRecord
	for _, n := range names {
		rows, err := st.ListSyncRecords(ctx, n, limit)
		if err != nil {
			return 0, err
		}
		for _, r := range rows {
			objs = append(objs, api.NewSyncRecord(r))
		}
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].StartedAt.After(objs[j].StartedAt) })
	if len(objs) > limit {
		objs = objs[:limit]
	}
	if objs == nil {
		objs = []api.SyncRecord{}
	}
	objs = redact.MaskValues(m, objs)
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, historyFormat(format), objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "SOURCE\tREVISION\tRESULT\tCREATED\tUPDATED\tDELETED\tUNCHANGED\tDURATION\tWHEN\tMESSAGE")
		for _, o := range objs {
			result := "ok"
			if !o.Success {
				result = "refused"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%dms\t%s ago\t%s\n", o.Source, shortRevision(o.Revision), result,
				o.Created, o.Updated, o.Deleted, o.Unchanged, o.DurationMS, age(o.StartedAt), oneLine(o.Message))
		}
	})
}

func getReconcileHistory(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format, ref string, limit int) (int, error) {
	r, err := resourceByRef(ctx, st, ref)
	if err != nil {
		return 0, err
	}
	rows, err := st.ListReconcileRecords(ctx, r.ID, limit)
	if err != nil {
		return 0, err
	}
	objs := make([]api.ReconcileRecord, len(rows))
	for i, h := range rows {
		objs[i] = api.NewReconcileRecord(h)
	}
	objs = redact.MaskValues(m, objs)
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, historyFormat(format), objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "ID\tGEN\tTRIGGER\tPHASE\tRESULT\tDURATION\tWHEN\tERROR")
		for _, o := range objs {
			result, msg := "ok", "-"
			if !o.Success {
				result = "failed"
			}
			if o.ErrorMessage != nil {
				msg = oneLine(*o.ErrorMessage)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%dms\t%s ago\t%s\n", o.ID, o.Generation, o.Trigger, orDash(o.Phase), result,
				o.DurationMS, age(o.ReconcileTime), msg)
		}
	})
}

// age writes how long ago t was, kubectl style.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// shortRevision abbreviates "main@sha1:<40 hex>" to "main@sha1:<12 hex>".
func shortRevision(rev string) string {
	if i := strings.LastIndex(rev, ":"); i >= 0 && len(rev)-i-1 > 12 {
		return rev[:i+13]
	}
	return rev
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 100 {
		return s[:97] + "..."
	}
	return s
}

// historyFormat is the format history prints in: -o name and -o wide have
// nothing to add to its table.
func historyFormat(format string) string {
	if format == "name" || format == "wide" {
		return "table"
	}
	return format
}

// sourceReady says whether a source's phase means its last revision
// applied.
func sourceReady(phase string) string {
	switch phase {
	case "ready":
		return "True"
	case "failed", "stalled", "orphaned":
		return "False"
	}
	return "Unknown"
}

// watchEvents prints a row for every change the agent's event stream
// announces of the objects get listed, until ctx ends.
func watchEvents(ctx context.Context, c *client.Client, m *redact.Masker, w io.Writer, object, format, kind, source, name string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The server filters kinds exactly; kinds match any case here.
	return c.Events(ctx, "", source, nil, func(ev client.Event) (bool, error) {
		switch {
		case ev.Name == api.EventResource && object == "resources":
			var e store.StatusEvent
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return false, fmt.Errorf("a resource event: %w", err)
			}
			e = redact.MaskValues(m, e)
			if (kind != "" && !strings.EqualFold(e.Kind, kind)) || (name != "" && e.Name != name) {
				return true, nil
			}
			status := string(e.Phase)
			if e.Deleted {
				status = "deleted"
			} else if e.Suspended {
				status += " (suspended)"
			}
			switch format {
			case "json", "yaml":
				return true, printObjects(w, format, e, nil)
			case "name":
				fmt.Fprintf(w, "%s/%s\n", e.Kind, e.Name)
				return true, nil
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", e.Kind, e.Name, status, e.ObservedGeneration, e.Generation,
				shorten(orDash(oneLine(e.Message)), 60))
		case ev.Name == api.EventSource && object == "sources":
			var s api.Source
			if err := json.Unmarshal(ev.Data, &s); err != nil {
				return false, fmt.Errorf("a source event: %w", err)
			}
			s = redact.MaskValues(m, s)
			if name != "" && s.Name != name {
				return true, nil
			}
			switch format {
			case "json", "yaml":
				return true, printObjects(w, format, s, nil)
			case "name":
				fmt.Fprintf(w, "source/%s\n", s.Name)
				return true, nil
			}
			phase := s.Phase
			if s.Suspended {
				phase += " (suspended)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, sourceReady(s.Phase), phase, orDash(shortRevision(s.LastAppliedRevision)))
		case ev.Name == api.EventResync:
			fmt.Fprintln(tw, "# events may have been missed: run get again for the current state")
		default:
			return true, nil
		}
		return true, tw.Flush()
	})
}

// isTable reports whether format prints a table, which an empty result
// leaves out: "No resources found" says it instead.
func isTable(format string) bool { return format == "table" || format == "wide" }

// resourceByRef finds the resource ref names, KIND/NAME or
// KIND/NAMESPACE/NAME: without a namespace, in the default namespace the
// store records, or else cluster-scoped.
func resourceByRef(ctx context.Context, st store.Store, s string) (*store.Resource, error) {
	ref, err := manifest.ParseObjectRef(s)
	if err != nil {
		return nil, fmt.Errorf("--resource %q: want KIND/NAME or KIND/NAMESPACE/NAME", s)
	}
	if ref.Namespace != "" {
		return st.GetResourceByName(ctx, ref)
	}
	if ref.Namespace, err = st.DefaultNamespace(ctx); err != nil {
		return nil, err
	}
	r, err := st.GetResourceByName(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		ref.Namespace = ""
		if cluster, cerr := st.GetResourceByName(ctx, ref); cerr == nil {
			return cluster, nil
		}
	}
	return r, err
}
