package partition

// sliceOf returns the start and end of a Slice of x's last axis with step 1.
func sliceOf(n *Node) (start, end int64, ok bool) {
	if len(n.Inputs) < 4 {
		return 0, 0, false
	}
	get := func(i int) (int64, bool) {
		c := n.Inputs[i].Const
		if c == nil || len(c.Ints) != 1 {
			return 0, false
		}
		return c.Ints[0], true
	}
	s, ok1 := get(1)
	e, ok2 := get(2)
	ax, ok3 := get(3)
	if !ok1 || !ok2 || !ok3 || !lastAxis(ax, n.Inputs[0].Info.Rank()) {
		return 0, 0, false
	}
	if len(n.Inputs) > 4 && n.Inputs[4].Name != "" {
		if st, ok := get(4); !ok || st != 1 {
			return 0, 0, false
		}
	}
	return s, e, true
}

// rotateHalf fuses Mul(x, cos) + Mul(Concat(Neg(Slice(x, h:)), Slice(x, :h)), sin).
func (g *fusion) rotateHalf(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	pairs, ok := twoInputs(last, "Add")
	if !ok {
		return Node{}, nil, false
	}
	for _, pr := range pairs {
		j1, m1, ok1 := g.inner(pr[0], "Mul")
		j2, m2, ok2 := g.inner(pr[1], "Mul")
		if !ok1 || !ok2 {
			continue
		}
		for _, sp := range orders(m2) {
			cat, sin := sp[0], sp[1]
			jc, c, ok := g.inner(cat, "Concat")
			if !ok || len(c.Inputs) != 2 || !lastAxis(intAttr(c, "axis", 0), cat.Info.Rank()) {
				continue
			}
			jn, neg, ok := g.inner(c.Inputs[0], "Neg")
			if !ok {
				continue
			}
			js2, s2, ok := g.inner(neg.Inputs[0], "Slice")
			if !ok {
				continue
			}
			js1, s1, ok := g.inner(c.Inputs[1], "Slice")
			if !ok {
				continue
			}
			x := s1.Inputs[0]
			if s2.Inputs[0].Name != x.Name {
				continue
			}
			rank := x.Info.Rank()
			if rank == 0 {
				continue
			}
			d := x.Info.Shape[rank-1]
			if d <= 0 || d%2 != 0 {
				continue
			}
			a1, b1, ok1 := sliceOf(s1)
			a2, b2, ok2 := sliceOf(s2)
			if !ok1 || !ok2 || a1 != 0 || b1 != d/2 || a2 != d/2 || b2 < d {
				continue
			}
			var cos Value
			switch {
			case m1.Inputs[0].Name == x.Name:
				cos = m1.Inputs[1]
			case m1.Inputs[1].Name == x.Name:
				cos = m1.Inputs[0]
			default:
				continue
			}
			n := Node{Name: last.Name, Op: "cudaep.RotateHalf", Opset: 1, Inputs: []Value{x, cos, sin}, Outputs: []Value{last.Outputs[0]}}
			return n, []int{j1, j2, jc, jn, js1, js2}, true
		}
	}
	return Node{}, nil, false
}

// rotatePair fuses node i, a cudaep.RotateHalf, with the nearest earlier live one over the same
// cos and sin (earlierPartner): cudaep.RotateHalfPair(X0, X1, cos, sin) at i, the earlier
// rotation first. The pair's kernel takes only one cos and sin row for all rows (builds says
// whether it does).
func (g *fusion) rotatePair(i int) (Node, []int, bool) {
	n := &g.nodes[i]
	if n.Op != "cudaep.RotateHalf" || len(n.Inputs) != 3 || len(n.Outputs) != 1 {
		return Node{}, nil, false
	}
	j, ok := g.earlierPartner(i, func(m *Node) bool {
		return m.Op == n.Op && len(m.Inputs) == 3 && m.Inputs[1].Name == n.Inputs[1].Name && m.Inputs[2].Name == n.Inputs[2].Name
	})
	if !ok {
		return Node{}, nil, false
	}
	m := &g.nodes[j]
	return Node{Name: n.Name, Op: "cudaep.RotateHalfPair", Opset: 1,
		Inputs: []Value{m.Inputs[0], n.Inputs[0], n.Inputs[1], n.Inputs[2]}, Outputs: []Value{m.Outputs[0], n.Outputs[0]}}, []int{j}, true
}
