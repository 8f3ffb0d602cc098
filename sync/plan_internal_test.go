package sync

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestMatchStoredAgreesWithAMap matches declared resources to stored rows
// side by side, with the rows in the set's order, in id order and shuffled,
// and with the resources out of order, against a plain map lookup.
func TestMatchStoredAgreesWithAMap(t *testing.T) {
	t.Parallel()
	kinds := []string{"Alpha", "Beta", "beta", "Gamma"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var resources []*manifest.Resource
		var owned []store.ResourceDigest
		for i := range 300 {
			kind, name := kinds[rng.IntN(len(kinds))], fmt.Sprintf("n-%d", i)
			if rng.IntN(4) > 0 {
				resources = append(resources, &manifest.Resource{Kind: kind, Name: name})
			}
			if rng.IntN(4) > 0 {
				owned = append(owned, store.ResourceDigest{ID: int64(rng.IntN(1 << 20)), Kind: kind, Name: name})
			}
		}
		byKindName := func(a, b *manifest.Resource) int {
			if c := strings.Compare(a.Kind, b.Kind); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		}
		slices.SortFunc(resources, byKindName)
		orders := map[string]func([]store.ResourceDigest){
			"set order": func(o []store.ResourceDigest) { slices.SortFunc(o, compareDigests) },
			"id order": func(o []store.ResourceDigest) {
				slices.SortFunc(o, func(a, b store.ResourceDigest) int { return int(a.ID - b.ID) })
			},
			"shuffled": func(o []store.ResourceDigest) { rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] }) },
		}
		for name, order := range orders {
			for _, shuffleResources := range []bool{false, true} {
				rs := slices.Clone(resources)
				if shuffleResources {
					rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				}
				o := slices.Clone(owned)
				order(o)
				stored, declared := make([]*store.ResourceDigest, len(rs)), make([]bool, len(o))
				matchStored(rs, o, stored, declared)
				at := map[manifest.ObjectRef]int{}
				for j := range o {
					at[o[j].Ref()] = j
				}
				matched := 0
				for i, r := range rs {
					j, ok := at[r.Ref()]
					switch {
					case ok && stored[i] != &o[j]:
						t.Fatalf("seed %d, %s, resources shuffled %v: %s not matched to its row", seed, name, shuffleResources, r.Ref())
					case !ok && stored[i] != nil:
						t.Fatalf("seed %d, %s, resources shuffled %v: %s matched to %s", seed, name, shuffleResources, r.Ref(), stored[i].Ref())
					case ok:
						matched++
						if !declared[j] {
							t.Fatalf("seed %d, %s: row %s not marked declared", seed, name, o[j].Ref())
						}
					}
				}
				n := 0
				for _, d := range declared {
					if d {
						n++
					}
				}
				if n != matched {
					t.Fatalf("seed %d, %s: %d rows marked declared, %d matched", seed, name, n, matched)
				}
			}
		}
	}
}
