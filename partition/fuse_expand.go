package partition

import (
	"fmt"
	"slices"
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
		out, err := broadcastShapes(shapes)
		if err != nil || !slices.Equal(out, n.Outputs[0].Info.Shape) {
			continue
		}
		n.Inputs = ins
		return n, []int{je}, true
	}
	return Node{}, nil, false
}

// broadcastShapes returns the ONNX multidirectional broadcast of shapes.
func broadcastShapes(shapes [][]int64) ([]int64, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for i, d := range s {
			o := &out[rank-len(s)+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, fmt.Errorf("ep: shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}
