package partition

// wherePair fuses node i, a Where, with the nearest earlier live Where over the same condition
// whose X and Y have i's X's and Y's dtypes and shapes (earlierPartner):
// cudaep.WherePair(condition, X0, Y0, X1, Y1) at i, the earlier Where's output first.
func (g *fusion) wherePair(i int) (Node, []int, bool) {
	n := &g.nodes[i]
	if n.Op != "Where" || len(n.Inputs) != 3 || len(n.Outputs) != 1 {
		return Node{}, nil, false
	}
	j, ok := g.earlierPartner(i, func(m *Node) bool {
		return m.Op == "Where" && len(m.Inputs) == 3 && m.Inputs[0].Name == n.Inputs[0].Name &&
			m.Inputs[1].Info.Equal(n.Inputs[1].Info) && m.Inputs[2].Info.Equal(n.Inputs[2].Info)
	})
	if !ok {
		return Node{}, nil, false
	}
	m := &g.nodes[j]
	return Node{Name: n.Name, Op: "cudaep.WherePair", Opset: 1,
		Inputs:  []Value{n.Inputs[0], m.Inputs[1], m.Inputs[2], n.Inputs[1], n.Inputs[2]},
		Outputs: []Value{m.Outputs[0], n.Outputs[0]}}, []int{j}, true
}
