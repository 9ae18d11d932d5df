package partition

import (
	"fmt"

	"github.com/cudaep/cudaep/ep"
)

// maxMatMulGroup is the most MatMuls a cudaep.MatMulGroup joins (its kernel's limit).
const maxMatMulGroup = 4

// matMulGroup joins MatMul i and the later live MatMuls that read its A into one
// cudaep.MatMulGroup at i, in graph order, when each one's B is available at i (a graph input
// or initializer, or made before i). The kernel must build: A with one row, each B a matrix of
// A's dtype whose rows are whole 16-byte packs (its GEMV path).
func (g *fusion) matMulGroup(i int) (Node, []int, bool) {
	first := &g.nodes[i]
	if first.Op != "MatMul" || len(first.Inputs) != 2 || len(first.Outputs) != 1 {
		return Node{}, nil, false
	}
	a := first.Inputs[0]
	n := Node{Name: first.Name, Op: "cudaep.MatMulGroup", Opset: 1, Inputs: []Value{a, first.Inputs[1]}, Outputs: first.Outputs}
	var rest []int
	for j := i + 1; j < len(g.nodes) && len(rest)+1 < maxMatMulGroup; j++ {
		m := &g.nodes[j]
		if g.gone[j] || m.Op != "MatMul" || len(m.Inputs) != 2 || len(m.Outputs) != 1 || m.Inputs[0].Name != a.Name {
			continue
		}
		if at, made := g.maker[m.Inputs[1].Name]; made && at > i {
			continue
		}
		rest = append(rest, j)
		n.Inputs = append(n.Inputs, m.Inputs[1])
		n.Outputs = append(n.Outputs, m.Outputs[0])
	}
	return n, rest, len(rest) > 0
}

// matrices returns the matrices of node n when it is a MatMul or a cudaep.MatMulGroup: the
// inputs after its row.
func matrices(n *Node) ([]Value, bool) {
	switch {
	case n.Op == "MatMul" && len(n.Inputs) == 2 && len(n.Outputs) == 1:
	case n.Op == "cudaep.MatMulGroup" && len(n.Inputs) >= 2:
	default:
		return nil, false
	}
	return n.Inputs[1:], true
}

// maxNBitsGroup is the most com.microsoft.MatMulNBits a cudaep.MatMulNBitsGroup joins (its
// kernel's limit).
const maxNBitsGroup = 3

// nbitsGroup joins com.microsoft.MatMulNBits i and the later live ones that read its A with
// the same attributes but N (K, bits, block_size, accuracy_level, and any other the node has,
// which the group's kernel then validates) into one cudaep.MatMulNBitsGroup at i, in
// graph order, when each one's weights, scales, zero points and bias are available at i (graph
// inputs or initializers, or made before i): an int4 decode step's q, k and v projections, or
// its gate and up. The group's inputs are A, then each matrix's B, scales, zero_points and
// bias (an absent one the empty Value); its N is each matrix's N. The kernel decides the rest
// (one kind of zero points for the group, no g_idx, the decode launch's limits): Fuse keeps a
// group only when the provider builds it.
func (g *fusion) nbitsGroup(i int) (Node, []int, bool) {
	first := &g.nodes[i]
	if !isNBits(first) {
		return Node{}, nil, false
	}
	a := first.Inputs[0]
	n := Node{Name: first.Name, Op: "cudaep.MatMulNBitsGroup", Opset: 1, Attrs: map[string]ep.Attribute{}, Inputs: []Value{a}}
	for name, v := range first.Attrs {
		if name != "N" {
			n.Attrs[name] = v
		}
	}
	var ns []int64
	join := func(m *Node) {
		ins := nbitsInputs(m)
		n.Inputs = append(n.Inputs, ins[1], ins[2], ins[3], ins[5])
		n.Outputs = append(n.Outputs, m.Outputs[0])
		ns = append(ns, m.Attrs["N"].Int())
	}
	join(first)
	var rest []int
	for j := i + 1; j < len(g.nodes) && len(rest)+1 < maxNBitsGroup; j++ {
		m := &g.nodes[j]
		if g.gone[j] || !isNBits(m) || m.Inputs[0].Name != a.Name || !sameAttrsBut(first, m, "N") {
			continue
		}
		later := false
		for _, v := range m.Inputs[1:] {
			if at, made := g.maker[v.Name]; v.Name != "" && made && at > i {
				later = true
			}
		}
		if later {
			continue
		}
		rest = append(rest, j)
		join(m)
	}
	n.Attrs["N"] = ep.IntsAttr(ns...)
	return n, rest, len(rest) > 0
}

// isNBits reports whether n is a com.microsoft.MatMulNBits with one output, an N attribute and
// no g_idx.
func isNBits(n *Node) bool {
	if n.Op != "com.microsoft.MatMulNBits" || len(n.Inputs) < 3 || len(n.Outputs) != 1 {
		return false
	}
	if _, ok := n.Attrs["N"]; !ok {
		return false
	}
	return len(n.Inputs) < 5 || n.Inputs[4].Name == ""
}

// nbitsInputs returns MatMulNBits n's six inputs (A, B, scales, zero_points, g_idx, bias), the
// absent ones the empty Value.
func nbitsInputs(n *Node) []Value {
	ins := make([]Value, 6)
	copy(ins, n.Inputs)
	return ins
}

// sameAttrsBut reports whether a and b have the same attributes, with the same values, but
// the one named except.
func sameAttrsBut(a, b *Node, except string) bool {
	for _, pair := range [][2]*Node{{a, b}, {b, a}} {
		for name, x := range pair[0].Attrs {
			y, ok := pair[1].Attrs[name]
			if name != except && (!ok || fmt.Sprint(x) != fmt.Sprint(y)) {
				return false
			}
		}
	}
	return true
}
