package partition

// NodeValues are the names of the values one node reads and writes, in the node's order ("" for
// an optional input or output the node leaves out).
type NodeValues struct {
	Inputs, Outputs []string
}

// FusionGroups splits the supported nodes (supported[i] for nodes[i]) into groups a host can
// fuse, each a list of node indices: runs of consecutive supported nodes in a topological order
// (such a run is convex: a path that leaves it cannot come back, since every node between its
// ends is in it), each split into its connected components (a component of a convex set is
// convex).
func FusionGroups(nodes []NodeValues, supported []bool) [][]int {
	order := TopoOrder(nodes)
	var groups [][]int
	var run []int
	flush := func() {
		groups = append(groups, components(nodes, run)...)
		run = nil
	}
	for _, i := range order {
		if supported[i] {
			run = append(run, i)
		} else if len(run) > 0 {
			flush()
		}
	}
	if len(run) > 0 {
		flush()
	}
	return groups
}

// TopoOrder orders node indices so that every producer comes before its consumers (Kahn's
// algorithm over the value names; the nodes' own order breaks ties). A graph with a cycle
// (which ONNX forbids) keeps its own order.
func TopoOrder(nodes []NodeValues) []int {
	producer := map[string]int{}
	for i, nd := range nodes {
		for _, v := range nd.Outputs {
			if v != "" {
				producer[v] = i
			}
		}
	}
	indeg := make([]int, len(nodes))
	consumers := make([][]int, len(nodes))
	for i, nd := range nodes {
		for _, v := range nd.Inputs {
			if p, ok := producer[v]; ok && v != "" && p != i {
				indeg[i]++
				consumers[p] = append(consumers[p], i)
			}
		}
	}
	var order, ready []int
	for i := range nodes {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, c := range consumers[i] {
			if indeg[c]--; indeg[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	if len(order) < len(nodes) {
		order = order[:0]
		for i := range nodes {
			order = append(order, i)
		}
	}
	return order
}

// components splits run (node indices) into connected components by shared values (a
// union-find over the nodes), each in run's order.
func components(nodes []NodeValues, run []int) [][]int {
	parent := map[int]int{}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	producer := map[string]int{}
	for _, i := range run {
		parent[i] = i
		for _, v := range nodes[i].Outputs {
			producer[v] = i
		}
	}
	for _, i := range run {
		for _, v := range nodes[i].Inputs {
			if p, ok := producer[v]; ok && v != "" {
				parent[find(i)] = find(p)
			}
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	for _, i := range run {
		r := find(i)
		if _, seen := byRoot[r]; !seen {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], i)
	}
	out := make([][]int, 0, len(roots))
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}
