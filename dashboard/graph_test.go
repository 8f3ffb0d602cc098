package dashboard

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestLayeredChain(t *testing.T) {
	t.Parallel()
	// 3 waits on 2, 2 on 1, 1 on 0; given out of order.
	l := layered(4, []graphEdge{{2, 3}, {0, 1}, {1, 2}})
	if want := []int{0, 1, 2, 3}; !slices.Equal(l.Layer, want) {
		t.Errorf("layers %v, want %v", l.Layer, want)
	}
	if len(l.Layers) != 4 {
		t.Errorf("%d layers, want 4", len(l.Layers))
	}
	if slices.Contains(l.Cycle, true) {
		t.Errorf("a chain has a cycle: %v", l.Cycle)
	}
}

func TestLayeredDiamond(t *testing.T) {
	t.Parallel()
	// 0 is the base; 1 and 2 wait on it; 3 waits on both; 4 waits on 0
	// and 3, so its longest path puts it below 3, not beside 1 and 2.
	l := layered(5, []graphEdge{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {0, 4}, {3, 4}})
	if want := []int{0, 1, 1, 2, 3}; !slices.Equal(l.Layer, want) {
		t.Errorf("layers %v, want %v", l.Layer, want)
	}
	if want := [][]int{{0}, {1, 2}, {3}, {4}}; !slices.EqualFunc(l.Layers, want, slices.Equal) {
		t.Errorf("layers %v, want %v", l.Layers, want)
	}
	for v, layer := range l.Layer {
		if l.Layers[layer][l.Pos[v]] != v {
			t.Errorf("node %d: Pos %d does not match Layers %v", v, l.Pos[v], l.Layers)
		}
	}
}

func TestLayeredCycle(t *testing.T) {
	t.Parallel()
	// 0 → 1 → 2 → 0, and 3 depends on itself; 4 waits on 2.
	edges := []graphEdge{{0, 1}, {1, 2}, {2, 0}, {3, 3}, {2, 4}}
	done := make(chan graphLayout, 1)
	go func() { done <- layered(5, edges) }()
	var l graphLayout
	select {
	case l = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("layered does not return on a cycle")
	}
	if want := []bool{false, false, true, true, false}; !slices.Equal(l.Cycle, want) {
		t.Errorf("cycle edges %v, want %v (the edge closing the loop and the self-dependency)", l.Cycle, want)
	}
	if want := []int{0, 1, 2, 0, 3}; !slices.Equal(l.Layer, want) {
		t.Errorf("layers %v, want %v", l.Layer, want)
	}
	// Every edge left points to a later layer.
	for i, e := range edges {
		if !l.Cycle[i] && l.Layer[e.From] >= l.Layer[e.To] {
			t.Errorf("edge %v goes from layer %d to %d", e, l.Layer[e.From], l.Layer[e.To])
		}
	}
}

func TestLayeredLongChainAndCycle(t *testing.T) {
	t.Parallel()
	// A chain far deeper than any sane recursion, closed into a cycle.
	const n = 200_000
	edges := make([]graphEdge, n)
	for i := range n {
		edges[i] = graphEdge{i, (i + 1) % n}
	}
	l := layered(n, edges)
	if got := len(l.Layers); got != n {
		t.Errorf("%d layers, want %d", got, n)
	}
	cycles := 0
	for _, c := range l.Cycle {
		if c {
			cycles++
		}
	}
	if cycles != 1 || !l.Cycle[n-1] {
		t.Errorf("%d edges break the cycle, want the last one only", cycles)
	}
}

func TestLayeredReducesCrossings(t *testing.T) {
	t.Parallel()
	// Two layers of three, wired in reverse: in input order every pair of
	// edges crosses; sorted by barycenter, none does.
	edges := []graphEdge{{0, 5}, {1, 4}, {2, 3}}
	l := layered(6, edges)
	if c := crossings(l, edges); c != 0 {
		t.Errorf("%d crossings left, want 0; layers %v", c, l.Layers)
	}
	// The layout never gets worse than the input order.
	var in graphLayout
	in.Layer = []int{0, 0, 0, 1, 1, 1}
	in.Pos = []int{0, 1, 2, 0, 1, 2}
	if c := crossings(in, edges); c != 3 {
		t.Fatalf("input order has %d crossings, want 3", c)
	}
}

func TestLayeredIsolatedAndEmpty(t *testing.T) {
	t.Parallel()
	l := layered(0, nil)
	if len(l.Layers) != 0 {
		t.Errorf("empty graph has layers %v", l.Layers)
	}
	l = layered(3, nil)
	if want := [][]int{{0, 1, 2}}; !slices.EqualFunc(l.Layers, want, slices.Equal) {
		t.Errorf("isolated nodes: %v, want %v in input order", l.Layers, want)
	}
}

func TestClosure(t *testing.T) {
	t.Parallel()
	next := [][]int{{1}, {2}, {0, 3}, nil}
	got := closure(1, next)
	want := map[int]bool{0: true, 2: true, 3: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("closure = %v, want %v", got, want)
	}
}
