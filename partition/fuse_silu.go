package partition

import "slices"

// siluMul fuses Mul(Mul(a, Sigmoid(a)), b).
func (g *fusion) siluMul(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	pairs, ok := twoInputs(last, "Mul")
	if !ok {
		return Node{}, nil, false
	}
	for _, pr := range pairs {
		jt, t, ok := g.inner(pr[0], "Mul")
		if !ok {
			continue
		}
		for _, tp := range orders(t) {
			a := tp[0]
			js, sig, ok := g.inner(tp[1], "Sigmoid")
			if !ok || sig.Inputs[0].Name != a.Name {
				continue
			}
			n := Node{Name: last.Name, Op: "cudaep.SiluMul", Opset: 1, Inputs: []Value{a, pr[1]}, Outputs: []Value{last.Outputs[0]}}
			return n, []int{jt, js}, true
		}
	}
	return Node{}, nil, false
}

// siluMatMul fuses node i, a MatMul or cudaep.MatMulGroup, with the cudaep.SiluMul that makes
// its row when only i reads it: cudaep.SiluMulMatMulGroup(A, B, W…).
func (g *fusion) siluMatMul(i int) (Node, []int, bool) {
	n := &g.nodes[i]
	mats, ok := matrices(n)
	if !ok {
		return Node{}, nil, false
	}
	j, silu, ok := g.inner(n.Inputs[0], "cudaep.SiluMul")
	if !ok || len(silu.Inputs) != 2 {
		return Node{}, nil, false
	}
	fused := Node{Name: n.Name, Op: "cudaep.SiluMulMatMulGroup", Opset: 1,
		Inputs: append([]Value{silu.Inputs[0], silu.Inputs[1]}, mats...), Outputs: slices.Clone(n.Outputs)}
	return fused, []int{j}, true
}
