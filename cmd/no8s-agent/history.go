package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/no8s/no8s-agent/store"
)

// reconcileHistory returns the reconcile attempts of the resource arg names
// (KIND/NAME, KIND/NAMESPACE/NAME or its ID), newest first. History outlives
// its resource, as an audit trail must: a resource that is deleted is found
// by its ID or by its kind and name in the history itself, and a name used
// again shows the attempts of every resource that had it.
func reconcileHistory(ctx context.Context, st store.Store, arg, namespace string, limit int) ([]*store.ReconcileRecord, error) {
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil && id > 0 {
		rows, err := st.ListReconcileRecords(ctx, id, limit)
		if err != nil || len(rows) > 0 {
			return rows, err
		}
		// No attempt: a resource that exists has none yet; one never seen
		// is not found.
		if _, err := st.GetResource(ctx, id); err != nil {
			return nil, fmt.Errorf("resource %d: no such resource and no history: %w", id, err)
		}
		return nil, nil
	}
	r, err := resourceByRef(ctx, st, arg, namespace)
	if err == nil {
		return st.ListReconcileRecords(ctx, r.ID, limit)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	// Deleted, or never declared: its history says which.
	ref, perr := parseRef(arg, "")
	if perr != nil {
		return nil, err
	}
	named := ref.Namespace != ""
	if !named {
		ref.Namespace = namespace
	}
	if ref.Namespace == "" {
		if ref.Namespace, perr = st.DefaultNamespace(ctx); perr != nil {
			return nil, perr
		}
	}
	spaces := []string{ref.Namespace}
	if !named {
		spaces = append(spaces, "") // a cluster-scoped kind's
	}
	for _, ns := range spaces {
		ref.Namespace = ns
		rows, herr := st.ListReconcileRecordsByRef(ctx, ref, limit)
		if herr != nil {
			return nil, herr
		}
		if len(rows) > 0 {
			return rows, nil
		}
	}
	return nil, err
}
