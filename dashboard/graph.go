package dashboard

import (
	"cmp"
	"slices"
)

// The dependency graph is laid out in layers (Sugiyama style, simplified):
// cycles are broken, every node goes to the layer of its longest path from
// a node that depends on nothing, and a few barycenter sweeps order each
// layer so that fewer edges cross. The code here knows nothing of
// resources: nodes are 0..n-1 in the caller's order, which is also the
// initial order within each layer, so that the same input always gives
// the same picture.

// graphEdge is an edge from a dependency (From) to what depends on it (To):
// From must be ready before To is reconciled.
type graphEdge struct {
	From, To int
}

// graphLayout is where layered puts the nodes.
type graphLayout struct {
	// Layer is each node's layer: 0 for nodes that depend on nothing
	// drawn, else one more than the highest layer among their
	// dependencies.
	Layer []int
	// Pos is each node's position within its layer, from 0.
	Pos []int
	// Layers lists each layer's nodes in order.
	Layers [][]int
	// Cycle marks, per edge (in input order), the edges dropped to break a
	// dependency cycle: they are left out of the layering, and the page
	// draws them apart. A self-dependency is always one.
	Cycle []bool
}

// sweeps is how many barycenter sweeps (down, up, down, up) layered runs.
const sweeps = 4

// layered lays out n nodes joined by edges. Edges naming a node outside
// 0..n-1 are a programming error and panic.
func layered(n int, edges []graphEdge) graphLayout {
	out := make([]graphEdge, 0, len(edges))
	l := graphLayout{Layer: make([]int, n), Pos: make([]int, n), Cycle: breakCycles(n, edges)}
	for i, e := range edges {
		if !l.Cycle[i] {
			out = append(out, e)
		}
	}
	// Longest-path layering over what is left, which is acyclic: Kahn's
	// algorithm, taking ready nodes in input order.
	succ := make([][]int, n)
	pred := make([][]int, n)
	indeg := make([]int, n)
	for _, e := range out {
		succ[e.From] = append(succ[e.From], e.To)
		pred[e.To] = append(pred[e.To], e.From)
		indeg[e.To]++
	}
	queue := make([]int, 0, n)
	for v := range n {
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	layers := 0
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		layers = max(layers, l.Layer[v]+1)
		for _, w := range succ[v] {
			l.Layer[w] = max(l.Layer[w], l.Layer[v]+1)
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	if len(queue) != n {
		panic("dashboard: layered: a cycle survived breakCycles")
	}
	l.Layers = make([][]int, layers)
	for v := range n {
		l.Layers[l.Layer[v]] = append(l.Layers[l.Layer[v]], v)
	}
	l.number()

	best, bestCrossings := l.copyOrder(), crossings(l, out)
	for s := range sweeps {
		down := s%2 == 0
		if down {
			for i := 1; i < len(l.Layers); i++ {
				l.orderBy(i, pred)
			}
		} else {
			for i := len(l.Layers) - 2; i >= 0; i-- {
				l.orderBy(i, succ)
			}
		}
		if c := crossings(l, out); c < bestCrossings {
			best, bestCrossings = l.copyOrder(), c
		}
	}
	l.Layers = best
	l.number()
	return l
}

// breakCycles marks the edges that close a cycle: the back edges of a
// depth-first search that visits nodes, and their edges, in input order.
// Dropping them leaves the graph acyclic. The search keeps its own stack,
// so that a chain of any length cannot overflow the goroutine's.
func breakCycles(n int, edges []graphEdge) []bool {
	cycle := make([]bool, len(edges))
	out := make([][]int, n) // edge indices by From
	for i, e := range edges {
		out[e.From] = append(out[e.From], i)
	}
	const (
		unseen = iota
		onStack
		done
	)
	state := make([]int, n)
	type frame struct{ v, next int }
	var stack []frame
	for root := range n {
		if state[root] != unseen {
			continue
		}
		state[root] = onStack
		stack = append(stack[:0], frame{v: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(out[top.v]) {
				state[top.v] = done
				stack = stack[:len(stack)-1]
				continue
			}
			ei := out[top.v][top.next]
			top.next++
			switch w := edges[ei].To; state[w] {
			case onStack:
				cycle[ei] = true
			case unseen:
				state[w] = onStack
				stack = append(stack, frame{v: w})
			}
		}
	}
	return cycle
}

// orderBy sorts layer i by the barycenter of each node's neighbours (its
// dependencies on a down sweep, its dependents on an up sweep), in
// whatever layer they are. A node without neighbours keeps its place.
// Positions are scaled to the layer's size, so that layers of different
// sizes compare.
func (l *graphLayout) orderBy(i int, neighbours [][]int) {
	layer := l.Layers[i]
	key := make(map[int]float64, len(layer))
	for _, v := range layer {
		own := (float64(l.Pos[v]) + .5) / float64(len(layer))
		if len(neighbours[v]) == 0 {
			key[v] = own
			continue
		}
		sum := 0.
		for _, w := range neighbours[v] {
			sum += (float64(l.Pos[w]) + .5) / float64(len(l.Layers[l.Layer[w]]))
		}
		key[v] = sum / float64(len(neighbours[v]))
	}
	slices.SortStableFunc(layer, func(a, b int) int { return cmp.Compare(key[a], key[b]) })
	for p, v := range layer {
		l.Pos[v] = p
	}
}

// number sets Pos from Layers.
func (l *graphLayout) number() {
	for _, layer := range l.Layers {
		for p, v := range layer {
			l.Pos[v] = p
		}
	}
}

func (l *graphLayout) copyOrder() [][]int {
	out := make([][]int, len(l.Layers))
	for i, layer := range l.Layers {
		out[i] = slices.Clone(layer)
	}
	return out
}

// crossings counts the pairs of edges that cross, drawn as straight lines
// between the nodes' positions: two edges cross when their ends are in
// opposite orders at both ends. It compares edges that span the same pair
// of layers only, which is what the sweeps can change most, and it is
// quadratic in the edges of a pair of layers, which the page bounds.
func crossings(l graphLayout, edges []graphEdge) int {
	type span struct{ from, to int }
	bySpan := map[span][]graphEdge{}
	for _, e := range edges {
		s := span{l.Layer[e.From], l.Layer[e.To]}
		bySpan[s] = append(bySpan[s], e)
	}
	n := 0
	for _, es := range bySpan {
		for i, a := range es {
			for _, b := range es[i+1:] {
				da := l.Pos[a.From] - l.Pos[b.From]
				db := l.Pos[a.To] - l.Pos[b.To]
				if da < 0 && db > 0 || da > 0 && db < 0 {
					n++
				}
			}
		}
	}
	return n
}

// closure returns the nodes reachable from start along next, start
// excluded. Cycles end the walk, they do not loop it.
func closure(start int, next [][]int) map[int]bool {
	seen := map[int]bool{start: true}
	stack := []int{start}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range next[v] {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	delete(seen, start)
	return seen
}
