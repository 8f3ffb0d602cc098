package api

import (
	"testing"

	"github.com/no8s/no8s-agent/store"
)

// TestAttackPageKeysDoNotCollide names filters that differ only by where
// quotes, commas, equals signs, spaces and empty values fall, an empty
// label against none, a cursor against a limit: each must have its own
// key, or one filter's page would answer the other.
func TestAttackPageKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	filters := []store.ResourceFilter{
		{},
		{Limit: 1},
		{After: 1},
		{After: 11},
		{After: 1, Limit: 1},
		{Kind: "a"},
		{Phase: "a"},
		{Action: "a"},
		{Source: "a"},
		{Kind: `a"`},
		{Kind: `a""`},
		{Kind: `a`, Source: `"`},
		{Kind: `a","`},
		{Kind: `a\`},
		{Kind: " 1"},
		{Kind: "a,"},
		{Kind: "a", Phase: ","},
		{Kind: "a 1"},
		{Labels: map[string]string{"a": ""}},
		{Labels: map[string]string{"": "a"}},
		{Labels: map[string]string{"a": "b"}},
		{Labels: map[string]string{"a": "b", "c": ""}},
		{Labels: map[string]string{"a": "b,c="}},
		{Labels: map[string]string{"a": `b"c"`}},
		{Labels: map[string]string{"a": `b"`, `"c`: "d"}},
		{Labels: map[string]string{"a": `b""c`, "d": "e"}},
		{Labels: map[string]string{`a"b`: "c"}},
		{Labels: map[string]string{"a": `"b"`}},
		{Labels: map[string]string{"a": " 1"}},
		{Labels: map[string]string{"a": "b"}, Kind: "c"},
		{Labels: map[string]string{"c": "a"}, Kind: "b"},
		{Labels: map[string]string{"ab": ""}},
		{Labels: map[string]string{"a": "b"}, Limit: 1},
	}
	seen := map[string]int{}
	for i := range filters {
		k := pageKey(&filters[i])
		if j, ok := seen[k]; ok {
			t.Errorf("filters %+v and %+v share the key %q", filters[j], filters[i], k)
		}
		seen[k] = i
	}
}
