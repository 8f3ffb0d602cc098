package sync_test

import (
	"context"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestDeprecationCountsEveryUser has five resources of a deprecated type
// version, from two sources and the API: every warning counts all the
// store's users after the change, not only those the change declares.
func TestDeprecationCountsEveryUser(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	deprecated := strings.Replace(widgetType, "    - name: v1\n", "    - name: v1\n      deprecated: true\n", 1)
	warned := func(what, summary string, n string) {
		t.Helper()
		want := "resource type Widget version v1 is deprecated (used by " + n + " resource(s))"
		if !strings.Contains(summary, want) {
			t.Errorf("%s: want %q in:\n%s", what, want, summary)
		}
	}
	res := mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": deprecated,
		"w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 2}") + widget("c", "{size: 3}")}))
	warned("infra", res.Plan.Summary(), "3")
	res = mustSync(t, s, target("apps"), snapshot(map[string]string{"w.yaml": widget("d", "{size: 4}")}))
	warned("apps", res.Plan.Summary(), "4")
	w, err := s.ApplyDocument(t.Context(), func(context.Context, store.Store) ([]byte, error) {
		return []byte(widget("e", "{size: 5}")), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	warned("the API write", strings.Join(w.Warnings, "\n"), "5")
	// A source that drops one of its own counts what stays.
	res = mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": deprecated,
		"w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 2}")}))
	warned("infra without c", res.Plan.Summary(), "4")
	// The plan of a change, as diff and previews make it, counts the same.
	plan, err := s.Plan(t.Context(), target("apps"), snapshot(map[string]string{"w.yaml": widget("d", "{size: 4}") + widget("f", "{size: 6}")}))
	if err != nil {
		t.Fatal(err)
	}
	warned("a plan", plan.Summary(), "5")
}
