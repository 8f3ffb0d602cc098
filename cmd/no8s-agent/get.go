package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
	return []string{"types", "resources", "sources", "history", "agents", "rt", "res", "src"}
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
	case "agents", "agent":
		return "agents", true
	}
	return "", false
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("get", "get types|resources|sources|history|agents [NAME] [flags]\n\n"+
		"Reads the store. Short names: rt (types), res (resources), src (sources). NAME picks one\n"+
		"object by name: -o json or yaml print it as an object (a list when several kinds or versions\n"+
		"share the name), and none is an error (exit 1). history lists sync attempts of sources, or with --resource KIND/NAME the\n"+
		"reconcile attempts of one resource (KIND/NAME or KIND/NAMESPACE/NAME). agents lists the agents sharing\n"+
		"the store: alive, stopped (shut down cleanly) or gone (vanished). Resources are those of the\n"+
		"default namespace (the store records it) and cluster-scoped ones, as kubectl lists them; -n picks\n"+
		"another namespace, -A all of them with a NAMESPACE column. -o json prints the objects the HTTP API returns; -o wide\n"+
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
	resource := fs.String("resource", "", "history of this resource, as KIND/NAME, KIND/NAMESPACE/NAME or its ID; also once it is deleted")
	var namespace string
	var allNamespaces bool
	fs.StringVar(&namespace, "n", "", "resources of this namespace (and cluster-scoped ones); default: the default namespace")
	fs.StringVar(&namespace, "namespace", "", "same as -n")
	fs.BoolVar(&allNamespaces, "A", false, "resources of every namespace, with a NAMESPACE column")
	fs.BoolVar(&allNamespaces, "all-namespaces", false, "same as -A")
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
		return fail(stderr, "get", fmt.Errorf("unknown object %q: want types (rt), resources (res), sources (src), history or agents", rest[0]))
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
	if namespace != "" && allNamespaces {
		return fail(stderr, "get", errors.New("-n and -A: give one namespace, or all of them, not both"))
	}
	if namespace != "" && !manifest.ValidNamespace(namespace) {
		return fail(stderr, "get", fmt.Errorf("-n %q: not a namespace (%s)", namespace, strings.Join(manifest.NamespaceProblems(namespace), "; ")))
	}
	cfg, st, err := sf.open(ctx)
	if err != nil {
		return fail(stderr, "get", err)
	}
	defer st.Close()
	m := cliMasker(cfg, sf.config, stderr)
	// Without -n, the default namespace the store records: the one the
	// agents place resources declared without one in.
	if namespace == "" && !allNamespaces && object == "resources" {
		if namespace, err = st.DefaultNamespace(ctx); err != nil {
			return fail(stderr, "get", err)
		}
	}

	// A get by name prints the object, as kubectl does, not a list of
	// one: the list is read as JSON, then printed as asked.
	out, format := stdout, *output
	var named *bytes.Buffer
	if name != "" && (format == "json" || format == "yaml") {
		named = &bytes.Buffer{}
		out, format = named, "json"
	}
	var n int
	// listed are the resources listed, which the watch starts from.
	var listed []api.Resource
	switch object {
	case "types":
		n, err = getTypes(ctx, st, m, out, format, store.TypeFilter{Source: *sourceName}, *kind, name)
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
		if !allNamespaces {
			// Cluster-scoped resources are in no namespace: every
			// namespace's list shows them, as kubectl does.
			f.Namespaces = []string{namespace, ""}
		}
		listed, err = getResources(ctx, st, m, out, format, f, *kind, name, *limit, allNamespaces)
		n = len(listed)
	case "sources":
		n, err = getSources(ctx, st, m, out, format, name)
	case "agents":
		n, err = getAgents(ctx, st, out, format, name)
	case "history":
		lim := *limit
		if lim == 0 {
			lim = 20
		}
		if *resource != "" {
			n, err = getReconcileHistory(ctx, st, m, stdout, *output, *resource, namespace, lim)
		} else {
			n, err = getSyncHistory(ctx, st, m, stdout, *output, *sourceName, lim)
		}
	}
	if err != nil {
		return fail(stderr, "get", err)
	}
	if name != "" && n == 0 {
		// What was asked for by name is not there: an error, as kubectl
		// has it, not an empty list.
		where := ""
		if object == "resources" && !allNamespaces {
			where = fmt.Sprintf(" in namespace %q", namespace)
		}
		fmt.Fprintf(stderr, "Error from store (NotFound): %s %q not found%s\n", object, name, where)
		return exitError
	}
	if named != nil {
		if err := printNamed(stdout, *output, named.Bytes()); err != nil {
			return fail(stderr, "get", err)
		}
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
	watched := watchFilter{kind: *kind, source: *sourceName, name: name, namespace: namespace, all: allNamespaces, listed: listed}
	if err := watchEvents(ctx, c, m, stdout, object, *output, watched); err != nil && ctx.Err() == nil {
		return fail(stderr, "get", err)
	}
	return exitOK
}

// printNamed prints what a get by name listed, as JSON: the object when
// there is one, as kubectl prints one named object; several objects of
// the name (of different kinds, or versions of a type) stay a list.
func printNamed(w io.Writer, format string, list []byte) error {
	var objs []json.RawMessage
	if err := json.Unmarshal(list, &objs); err != nil {
		return err
	}
	if len(objs) == 1 {
		return printObjects(w, format, objs[0], nil)
	}
	return printObjects(w, format, objs, nil)
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
// With allNamespaces, a NAMESPACE column comes first.
func getResources(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format string, f store.ResourceFilter, kind, name string, limit int,
	allNamespaces bool) ([]api.Resource, error) {
	rows, err := st.ListResources(ctx, f)
	if err != nil {
		return nil, err
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
	// Tables read by kind, then namespace, then name; the store lists by id.
	slices.SortStableFunc(objs, func(a, b api.Resource) int { return a.Ref().Compare(b.Ref()) })
	if format == "name" {
		for _, o := range objs {
			fmt.Fprintln(w, o.Ref())
		}
		return objs, nil
	}
	if len(objs) == 0 && isTable(format) {
		return objs, nil
	}
	wide := format == "wide"
	return objs, printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, resourceHeader(wide, allNamespaces))
		for _, o := range objs {
			fmt.Fprintln(tw, resourceRow(o, wide, allNamespaces))
		}
	})
}

// resourceHeader is the header of the resources table; -o wide adds
// columns, -A the NAMESPACE column first.
func resourceHeader(wide, allNamespaces bool) string {
	nsCol := ""
	if allNamespaces {
		nsCol = "NAMESPACE\t"
	}
	if wide {
		return nsCol + "ID\tKIND\tNAME\tREADY\tSTATUS\tREASON\tSUSPENDED\tGEN\tOBSERVED\tACTION\tSOURCE\tAGE\tMESSAGE"
	}
	return nsCol + "KIND\tNAME\tREADY\tSTATUS\tREASON\tSUSPENDED\tAGE\tMESSAGE"
}

// resourceRow is a resource's row of the table resourceHeader heads: the
// list and the watch print the same columns. A zero CreatedAt (a resource
// known only from an event) has no age.
func resourceRow(o api.Resource, wide, allNamespaces bool) string {
	nsCell := ""
	if allNamespaces {
		nsCell = orDash(o.Namespace) + "\t"
	}
	ready, reason := readiness(o.Conditions)
	msg := orDash(oneLine(o.StatusMessage))
	created := "-"
	if !o.CreatedAt.IsZero() {
		created = age(o.CreatedAt)
	}
	if wide {
		return fmt.Sprintf("%s%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s", nsCell, o.ID, orDash(o.Kind), orDash(o.Name), ready, orDash(statusCell(o)), reason,
			suspendedCell(o.Suspended), o.Generation, o.ObservedGeneration, orDash(o.ActionPlugin), orDash(o.Source.Name), created, msg)
	}
	return fmt.Sprintf("%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", nsCell, orDash(o.Kind), orDash(o.Name), ready, orDash(statusCell(o)), reason, suspendedCell(o.Suspended),
		created, shorten(msg, 60))
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

// sourceHeader heads the sources' table; sourceRow fills it.
const sourceHeader = "NAME\tKIND\tREADY\tPHASE\tSUSPENDED\tREVISION\tLAST CHECK\tMESSAGE"

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
		fmt.Fprintln(tw, sourceHeader)
		for _, o := range objs {
			fmt.Fprintln(tw, sourceRow(o))
		}
	})
}

// sourceRow is a source's row of the table, the same in a list and in a
// watch, under sourceHeader.
func sourceRow(o api.Source) string {
	last := "-"
	// When the agent last fetched and judged the source, changed or not:
	// whether it is being watched, as Flux's READY says. When it last
	// changed is describe's "Last sync".
	if checked := cmp.Or(o.LastCheckTime, o.LastSyncTime); checked != nil {
		last = age(*checked) + " ago"
	}
	return strings.Join([]string{o.Name, o.Kind, sourceReady(o.Phase), o.Phase, suspendedCell(o.Suspended),
		orDash(shortRevision(o.LastAppliedRevision)), last, orDash(oneLine(o.Message))}, "\t")
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

func getReconcileHistory(ctx context.Context, st store.Store, m *redact.Masker, w io.Writer, format, ref, namespace string, limit int) (int, error) {
	rows, err := reconcileHistory(ctx, st, ref, namespace, limit)
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

// oneLine is s on one line for a table or a field, cut when long, with
// control characters escaped: messages, commits and problems are text
// others wrote (an action's output, anyone who may push), which must not
// drive the terminal that shows them.
func oneLine(s string) string {
	s = manifest.EscapeControl(strings.ReplaceAll(s, "\n", " "))
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

// watchFilter is what get -w shows of the event stream: resources of kind
// (any case) and name when set, from source, in namespace and
// cluster-scoped, or in every namespace when all.
type watchFilter struct {
	kind, source, name, namespace string
	all                           bool
	// listed are the resources the list printed: a deleted one's last row
	// starts from them.
	listed []api.Resource
}

// watchEvents prints a row for every change the agent's event stream
// announces of the objects get listed, until ctx ends.
func watchEvents(ctx context.Context, c *client.Client, m *redact.Masker, w io.Writer, object, format string, f watchFilter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	kind, name := f.kind, f.name
	known := map[int64]api.Resource{}
	for _, r := range f.listed {
		known[r.ID] = r
	}
	// The server filters kinds exactly; kinds match any case here.
	return c.Events(ctx, "", f.source, nil, func(ev client.Event) (bool, error) {
		switch {
		case ev.Name == api.EventResource && object == "resources":
			var e store.StatusEvent
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return false, fmt.Errorf("a resource event: %w", err)
			}
			e = redact.MaskValues(m, e)
			if (kind != "" && !strings.EqualFold(e.Kind, kind)) || (name != "" && e.Name != name) ||
				(!f.all && e.Namespace != f.namespace && e.Namespace != "") {
				return true, nil
			}
			switch format {
			case "json", "yaml":
				return true, printObjects(w, format, e, nil)
			case "name":
				fmt.Fprintln(w, manifest.ObjectRef{Kind: e.Kind, Namespace: e.Namespace, Name: e.Name})
				return true, nil
			}
			fmt.Fprintln(tw, resourceRow(watchedResource(ctx, c, m, known, e), format == "wide", f.all))
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
			fmt.Fprintln(tw, sourceRow(s))
		case ev.Name == api.EventResync:
			fmt.Fprintln(tw, "# events may have been missed: run get again for the current state")
		default:
			return true, nil
		}
		return true, tw.Flush()
	})
}

// watchedResource is the resource a status event announces, as a row of
// the list shows it: read from the agent for its conditions and age (and
// kept in known), the event's status, message, generations and suspension
// over it. A deleted resource, or one the agent does not show, is what
// known last had of it, or the event alone.
func watchedResource(ctx context.Context, c *client.Client, m *redact.Masker, known map[int64]api.Resource, e store.StatusEvent) api.Resource {
	if !e.Deleted {
		if r, err := c.GetResource(ctx, e.ID); err == nil && r.ID == e.ID {
			known[e.ID] = redact.MaskValues(m, r.Resource)
		}
	}
	r, ok := known[e.ID]
	if !ok {
		r = api.Resource{ID: e.ID, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
		r.Source.Name = e.Source
	}
	r.Status, r.StatusMessage, r.Generation, r.ObservedGeneration, r.Suspended = e.Phase, e.Message, e.Generation, e.ObservedGeneration, e.Suspended
	if e.Deleted {
		r.Status = "deleted"
		delete(known, e.ID)
	}
	return r
}

// isTable reports whether format prints a table, which an empty result
// leaves out: "No resources found" says it instead.
func isTable(format string) bool { return format == "table" || format == "wide" }

// resourceByRef finds the resource ref names, KIND/NAME or
// KIND/NAMESPACE/NAME: without a namespace, in namespace (-n, or the
// default namespace the store records); a resource of a cluster-scoped
// kind whatever the namespace, as kubectl -n has it.
func resourceByRef(ctx context.Context, st store.Store, s, namespace string) (*store.Resource, error) {
	ref, err := parseRef(s, "")
	if err != nil {
		return nil, fmt.Errorf("--resource %w", err)
	}
	switch {
	case ref.Namespace != "" && namespace != "" && ref.Namespace != namespace:
		return nil, fmt.Errorf("--resource %q is in namespace %s, but -n says %s", s, ref.Namespace, namespace)
	case ref.Namespace == "":
		ref.Namespace = namespace
	}
	if ref.Namespace == "" {
		if ref.Namespace, err = st.DefaultNamespace(ctx); err != nil {
			return nil, err
		}
	}
	r, err := st.GetResourceByName(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		in := ref.Namespace
		ref.Namespace = ""
		if cluster, cerr := st.GetResourceByName(ctx, ref); cerr == nil {
			return cluster, nil
		}
		others, lerr := st.ListResources(ctx, store.ResourceFilter{Kind: ref.Kind, Name: ref.Name})
		if lerr == nil && len(others) > 0 {
			var nss []string
			for _, o := range others {
				nss = append(nss, o.Namespace)
			}
			slices.Sort(nss)
			return nil, fmt.Errorf("resource %s/%s not found in namespace %s; it is in namespace(s) %s: name one with -n NAMESPACE or as %s/NAMESPACE/%s: %w",
				ref.Kind, ref.Name, in, strings.Join(nss, ", "), ref.Kind, ref.Name, err)
		}
	}
	return r, err
}

// parseRef reads KIND/NAME or KIND/NAMESPACE/NAME, as the verbs take a
// resource; namespace (-n), when not empty, is the namespace of a ref that
// names none, and must agree with one that does. The kind is not checked:
// the verbs match it in any case.
func parseRef(s, namespace string) (manifest.ObjectRef, error) {
	parts := strings.Split(s, "/")
	var ref manifest.ObjectRef
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		ref = manifest.ObjectRef{Kind: parts[0], Name: parts[1]}
	case len(parts) == 3 && parts[0] != "" && parts[2] != "" && manifest.ValidNamespace(parts[1]):
		ref = manifest.ObjectRef{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
	default:
		return ref, fmt.Errorf("%q: want KIND/NAME or KIND/NAMESPACE/NAME", s)
	}
	if namespace == "" {
		return ref, nil
	}
	if !manifest.ValidNamespace(namespace) {
		return ref, fmt.Errorf("-n %q: not a namespace (%s)", namespace, strings.Join(manifest.NamespaceProblems(namespace), "; "))
	}
	if ref.Namespace != "" && ref.Namespace != namespace {
		return ref, fmt.Errorf("%q is in namespace %s, but -n says %s", s, ref.Namespace, namespace)
	}
	ref.Namespace = namespace
	return ref, nil
}
