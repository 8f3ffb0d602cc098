package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("get", "get types|resources|sources|history [flags]\n\nReads the store. history lists sync attempts of sources, or with --resource KIND/NAME\nthe reconcile attempts of one resource. -o json prints the objects the HTTP API returns.", stderr)
	var sf storeFlags
	sf.register(fs)
	output := fs.String("o", "table", "output format: table, json or yaml")
	kind := fs.String("kind", "", "only resources of this kind (resources), or types of this name (types)")
	sourceName := fs.String("source", "", "only this source's resources, types or history")
	status := fs.String("status", "", "only resources in this status (pending, reconciling, ready, failed, deleting)")
	var labels repeated
	fs.Var(&labels, "label", "only resources with this label, as key=value; repeatable")
	limit := fs.Int("limit", 0, "at most this many rows (0: all; history: 20)")
	resource := fs.String("resource", "", "history of this resource, as KIND/NAME")
	rest, code := parseFlags(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return fail(stderr, "get", fmt.Errorf("say what to get: types, resources, sources or history"))
	}
	if *output != "table" && *output != "json" && *output != "yaml" {
		return fail(stderr, "get", fmt.Errorf("-o must be table, json or yaml, not %q", *output))
	}
	switch rest[0] {
	case "types", "type", "resource-types", "resources", "resource", "sources", "source", "history":
	default:
		return fail(stderr, "get", fmt.Errorf("unknown object %q: want types, resources, sources or history", rest[0]))
	}
	_, st, err := sf.open(ctx)
	if err != nil {
		return fail(stderr, "get", err)
	}
	defer st.Close()

	switch rest[0] {
	case "types", "type", "resource-types":
		err = getTypes(ctx, st, stdout, *output, store.TypeFilter{Name: *kind, Source: *sourceName})
	case "resources", "resource":
		f := store.ResourceFilter{Kind: *kind, Source: *sourceName, Phase: manifest.Phase(*status), Limit: *limit}
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
		err = getResources(ctx, st, stdout, *output, f)
	case "sources", "source":
		err = getSources(ctx, st, stdout, *output)
	case "history":
		n := *limit
		if n == 0 {
			n = 20
		}
		if *resource != "" {
			err = getReconcileHistory(ctx, st, stdout, *output, *resource, n)
		} else {
			err = getSyncHistory(ctx, st, stdout, *output, *sourceName, n)
		}
	}
	if err != nil {
		return fail(stderr, "get", err)
	}
	return exitOK
}

func getTypes(ctx context.Context, st store.Store, w io.Writer, format string, f store.TypeFilter) error {
	rows, err := st.ListResourceTypes(ctx, f)
	if err != nil {
		return err
	}
	objs := make([]api.ResourceType, len(rows))
	for i, r := range rows {
		objs[i] = api.NewResourceType(r)
	}
	return printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tVERSION\tGROUP\tACTION\tSOURCE\tAGE")
		for _, o := range objs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Version, o.Group, orDash(o.Action), o.Source.Name, age(o.CreatedAt))
		}
	})
}

func getResources(ctx context.Context, st store.Store, w io.Writer, format string, f store.ResourceFilter) error {
	rows, err := st.ListResources(ctx, f)
	if err != nil {
		return err
	}
	objs := make([]api.Resource, len(rows))
	for i, r := range rows {
		objs[i] = api.NewResource(r)
	}
	return printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "ID\tKIND\tNAME\tSTATUS\tGEN\tOBSERVED\tACTION\tSOURCE\tAGE")
		for _, o := range objs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", o.ID, o.Kind, o.Name, o.Status, o.Generation,
				o.ObservedGeneration, orDash(o.ActionPlugin), o.Source.Name, age(o.CreatedAt))
		}
	})
}

func getSources(ctx context.Context, st store.Store, w io.Writer, format string) error {
	rows, err := st.ListSources(ctx)
	if err != nil {
		return err
	}
	objs := make([]api.Source, len(rows))
	for i, r := range rows {
		objs[i] = api.NewSource(r)
	}
	return printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tKIND\tPHASE\tREVISION\tLAST SYNC\tMESSAGE")
		for _, o := range objs {
			last := "-"
			if o.LastSyncTime != nil {
				last = age(*o.LastSyncTime) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, o.Kind, o.Phase, orDash(shortRevision(o.LastAppliedRevision)), last, oneLine(o.Message))
		}
	})
}

func getSyncHistory(ctx context.Context, st store.Store, w io.Writer, format, sourceName string, limit int) error {
	names := []string{sourceName}
	if sourceName == "" {
		sources, err := st.ListSources(ctx)
		if err != nil {
			return err
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
			return err
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
	return printObjects(w, format, objs, func(tw *tabwriter.Writer) {
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

func getReconcileHistory(ctx context.Context, st store.Store, w io.Writer, format, ref string, limit int) error {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("--resource %q: want KIND/NAME", ref)
	}
	r, err := st.GetResourceByName(ctx, kind, name)
	if err != nil {
		return err
	}
	rows, err := st.ListReconcileRecords(ctx, r.ID, limit)
	if err != nil {
		return err
	}
	objs := make([]api.ReconcileRecord, len(rows))
	for i, h := range rows {
		objs[i] = api.NewReconcileRecord(h)
	}
	return printObjects(w, format, objs, func(tw *tabwriter.Writer) {
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
