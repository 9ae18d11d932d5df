package partition

import (
	"slices"

	"github.com/cudaep/cudaep/ep"
)

// broadcasting are the ops whose inputs broadcast multidirectionally.
var broadcasting = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Where": true}

// dropExpand drops an Expand that node i, a broadcasting op, reads and that only it reads,
// when i's inputs broadcast to i's output shape without it.
func (g *fusion) dropExpand(i int) (Node, []int, bool) {
	n := g.nodes[i]
	if !broadcasting[n.Op] || len(n.Outputs) != 1 {
		return Node{}, nil, false
	}
	for a, v := range n.Inputs {
		je, e, ok := g.inner(v, "Expand")
		if !ok {
			continue
		}
		ins := slices.Clone(n.Inputs)
		ins[a] = e.Inputs[0]
		shapes := make([][]int64, len(ins))
		for b, in := range ins {
			if !static(in.Info) {
				return Node{}, nil, false
			}
			shapes[b] = in.Info.Shape
		}
		out, ok := ep.BroadcastShapes(shapes...)
		if !ok || !slices.Equal(out, n.Outputs[0].Info.Shape) {
			continue
		}
		n.Inputs = ins
		return n, []int{je}, true
	}
	return Node{}, nil, false
}
