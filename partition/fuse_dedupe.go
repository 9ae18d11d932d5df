package partition

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// dedupe drops the nodes that repeat an earlier live node (nodeKey) and renames their outputs,
// for the nodes after them, to the earlier node's. A node with a kept output, or an output
// the earlier node leaves out, stays.
func (g *fusion) dedupe() {
	seen := map[string]int{}
	rename := map[string]string{}
	for i := range g.nodes {
		n := &g.nodes[i]
		cloned := false
		for j, v := range n.Inputs {
			if to, ok := rename[v.Name]; ok {
				if !cloned {
					n.Inputs, cloned = slices.Clone(n.Inputs), true
				}
				n.Inputs[j].Name = to
			}
		}
		key := nodeKey(n)
		first, dup := seen[key]
		if !dup {
			seen[key] = i
			continue
		}
		if !g.repeats(n, &g.nodes[first]) {
			continue
		}
		for j, v := range n.Outputs {
			if v.Name != "" {
				rename[v.Name] = g.nodes[first].Outputs[j].Name
			}
		}
		g.gone[i] = true
	}
	g.index()
}

// repeats reports whether n, with first's key, may read first's outputs instead of its own:
// first makes every output n makes, and no output of n is kept.
func (g *fusion) repeats(n, first *Node) bool {
	if len(n.Outputs) != len(first.Outputs) {
		return false
	}
	for j, v := range n.Outputs {
		if v.Name != "" && (first.Outputs[j].Name == "" || slices.Contains(g.keep, v.Name)) {
			return false
		}
	}
	return true
}

// nodeKey identifies what a node computes: its op, opset, attributes and inputs (a value by
// name, a constant by dtype, shape and contents).
func nodeKey(n *Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", n.Op, n.Opset)
	names := slices.Sorted(maps.Keys(n.Attrs))
	for _, name := range names {
		fmt.Fprintf(&b, "|%s=%s", name, n.Attrs[name])
	}
	for _, v := range n.Inputs {
		if v.Const != nil {
			fmt.Fprintf(&b, "|c:%s%v%v%v", v.Info.DType, v.Info.Shape, v.Const.Ints, v.Const.Floats)
		} else {
			fmt.Fprintf(&b, "|v:%q", v.Name)
		}
	}
	return b.String()
}
