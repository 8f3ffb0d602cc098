package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/store"
)

// nsWidget is widget(name, ...) in namespace ns, depending on deps given
// as refs.
func nsWidget(ns, name string, deps ...manifest.ObjectRef) *manifest.Resource {
	r := widget(name, `{}`, "widgets")
	r.Namespace = ns
	r.DependsOn = deps
	return r
}

// waitRow waits until the row id is in phase at observed generation gen.
func waitRow(t *testing.T, st store.Store, id int64, phase manifest.Phase, gen int64) *store.Resource {
	t.Helper()
	var r *store.Resource
	waitFor(t, 20*time.Second, fmt.Sprintf("resource %d to be %s at generation %d", id, phase, gen), func() (bool, string) {
		var err error
		if r, err = st.GetResource(context.Background(), id); err != nil {
			return false, err.Error()
		}
		return r.Phase == phase && r.ObservedGeneration == gen && r.LeaseOwner == "",
			fmt.Sprintf("phase %s observed %d/%d message %q", r.Phase, r.ObservedGeneration, r.Generation, r.StatusMessage)
	})
	return r
}

// TestDependsOnAcrossNamespaces: a resource waits for the dependency in
// the namespace it names, not for one of the same kind and name in its
// own; actions are told the namespace.
func TestDependsOnAcrossNamespaces(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	release := make(chan struct{})
	var (
		mu   gosync.Mutex
		seen []string
	)
	act := &scripted{apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		mu.Lock()
		seen = append(seen, req.Resource.Ref().String())
		mu.Unlock()
		if req.Resource.Namespace == "data" && req.Resource.Name == "db" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &action.Result{}, nil
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	dataDB := manifest.ObjectRef{Kind: "Widget", Namespace: "data", Name: "db"}
	// The dependency first: a resource that finds its dependency missing
	// waits for the recheck (an hour here), as nothing announces a creation.
	apply(t, st, nsWidget("data", "db"))
	webDB := apply(t, st, nsWidget("web", "db"))
	app := apply(t, st, nsWidget("web", "app", dataDB))
	// web/db is ready, and is not what app waits for.
	waitRow(t, st, webDB.ID, manifest.PhaseReady, 1)
	waitFor(t, 20*time.Second, "app to wait for data/db", func() (bool, string) {
		r, err := st.GetResource(t.Context(), app.ID)
		if err != nil {
			return false, err.Error()
		}
		c := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
		// Pending or reconciling, as app looked before or after data/db
		// was claimed: web/db's readiness does not wake it.
		return c != nil && c.Reason == reconcile.ReasonDependencyNotReady && strings.HasPrefix(c.Message, "waiting for Widget/data/db is not ready ("),
			fmt.Sprintf("%+v", r.Conditions)
	})
	if len(act.callsOf("app")) != 0 {
		t.Fatal("app was applied before the dependency it names was ready")
	}
	close(release)
	r := waitRow(t, st, app.ID, manifest.PhaseReady, 1)
	if h := history(t, st, r.ID); len(h) != 1 || h[0].Namespace != "web" {
		t.Errorf("app's history %+v: want one record in namespace web", h)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(seen)
	if fmt.Sprint(seen) != "[Widget/data/db Widget/web/app Widget/web/db]" {
		t.Errorf("actions were asked about %v", seen)
	}
}

// TestDependentsAcrossNamespacesAreDestroyedFirst: a dependency is
// destroyed only once its dependents in other namespaces are gone; one of
// the same name in another namespace, which nothing depends on, is not held.
func TestDependentsAcrossNamespacesAreDestroyedFirst(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	release := make(chan struct{})
	act := &scripted{destroy: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		if req.Resource.Name == "app" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &action.Result{}, nil
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	dataDB := apply(t, st, nsWidget("data", "db"))
	otherDB := apply(t, st, nsWidget("web", "db"))
	app := apply(t, st, nsWidget("web", "app", dataDB.Ref()))
	waitRow(t, st, app.ID, manifest.PhaseReady, 1)
	if err := st.RequestDeletions(t.Context(), []int64{dataDB.ID, otherDB.ID, app.ID}); err != nil {
		t.Fatal(err)
	}
	gone := func(id int64) (bool, string) {
		_, err := st.GetResource(t.Context(), id)
		return errors.Is(err, store.ErrNotFound), fmt.Sprint(err)
	}
	// web/db has no dependent: it goes while app's destroy is held.
	waitFor(t, 20*time.Second, "web/db to be destroyed", func() (bool, string) { return gone(otherDB.ID) })
	waitFor(t, 20*time.Second, "data/db to wait for its dependent", func() (bool, string) {
		r, err := st.GetResource(t.Context(), dataDB.ID)
		if err != nil {
			return false, err.Error()
		}
		c := manifest.FindCondition(r.Conditions, manifest.ConditionReconciling)
		return c != nil && c.Reason == reconcile.ReasonDependentsExist, fmt.Sprintf("%+v", r.Conditions)
	})
	close(release)
	waitFor(t, 20*time.Second, "data/db to be destroyed", func() (bool, string) { return gone(dataDB.ID) })
}
