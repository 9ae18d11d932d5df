package partition

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
