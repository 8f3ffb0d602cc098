package api

import (
	"testing"

	"github.com/no8s/no8s-agent/store"
)

// TestModelLabelFilters: the copy's labels, held as pairs, select as the
// map they came from does: every label asked for must be there with its
// value, an empty value included, whatever the order of the pairs.
func TestModelLabelFilters(t *testing.T) {
	t.Parallel()
	e := &modelResource{labels: labelPairs(map[string]string{"team": "a", "tier": "gold", "empty": "", "app.kubernetes.io/name": "web"})}
	none := &modelResource{}
	cases := []struct {
		name   string
		e      *modelResource
		labels map[string]string
		want   bool
	}{
		{"no filter", e, nil, true},
		{"one label", e, map[string]string{"tier": "gold"}, true},
		{"every label", e, map[string]string{"team": "a", "tier": "gold", "empty": "", "app.kubernetes.io/name": "web"}, true},
		{"a prefixed key", e, map[string]string{"app.kubernetes.io/name": "web"}, true},
		{"an empty value", e, map[string]string{"empty": ""}, true},
		{"another value", e, map[string]string{"tier": "silver"}, false},
		{"an empty value for a set one", e, map[string]string{"team": ""}, false},
		{"a key it lacks", e, map[string]string{"owner": ""}, false},
		{"one of two wrong", e, map[string]string{"team": "a", "tier": "bronze"}, false},
		{"a value as a key", e, map[string]string{"a": ""}, false},
		{"no labels at all", none, map[string]string{"team": "a"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := c.e.matches(&store.ResourceFilter{Labels: c.labels}); got != c.want {
				t.Errorf("matches(%v) = %v, want %v", c.labels, got, c.want)
			}
		})
	}
}
