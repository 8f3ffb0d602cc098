package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store"
)

// getAgents prints the agents sharing the store, as GET /api/v1/agents
// returns them: alive, stopped (a clean shutdown) or gone (vanished).
func getAgents(ctx context.Context, st store.Store, w io.Writer, format, name string) (int, error) {
	rows, err := st.ListAgents(ctx)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	objs := []api.Agent{}
	for _, a := range rows {
		if name == "" || a.ID == name {
			objs = append(objs, api.NewAgent(a, now))
		}
	}
	if format == "name" {
		for _, o := range objs {
			fmt.Fprintf(w, "agent/%s\n", o.ID)
		}
		return len(objs), nil
	}
	if len(objs) == 0 && isTable(format) {
		return 0, nil
	}
	return len(objs), printObjects(w, format, objs, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tHOST\tVERSION\tSTATUS\tLAST SEEN\tAGE")
		for _, o := range objs {
			status := string(o.State)
			if o.StoppedAt != nil {
				status += " " + age(*o.StoppedAt) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", orDash(o.ID), orDash(o.Host), orDash(o.Version), status,
				age(o.LastSeenAt)+" ago", age(o.StartedAt))
		}
	})
}

// statusCell is a resource's STATUS: its phase, and ",orphaned" while its
// source is orphaned (as kubectl writes a node Ready,SchedulingDisabled):
// the phase is the last one it reached, and nothing reconciles it.
func statusCell(r api.Resource) string {
	if r.Orphaned {
		return string(r.Status) + ",orphaned"
	}
	return string(r.Status)
}
