package partition

import (
	"slices"

	"github.com/cudaep/cudaep/ep"
)

// rmsNorm fuses [Cast,] Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, [Cast,] Mul(scale).
func (g *fusion) rmsNorm(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	pairs, ok := twoInputs(last, "Mul")
	if !ok {
		return Node{}, nil, false
	}
	for _, pr := range pairs {
		scale, normed := pr[0], pr[1]
		chain := []int{}
		y := normed
		castBack := false
		if j, c, ok := g.inner(normed, "Cast"); ok {
			chain, y, castBack = append(chain, j), c.Inputs[0], true
		}
		jm, mul, ok := g.inner(y, "Mul")
		if !ok {
			continue
		}
		for _, mp := range orders(mul) {
			xf, r := mp[0], mp[1]
			jr, rec, ok := g.inner(r, "Reciprocal")
			if !ok {
				continue
			}
			js, sq, ok := g.inner(rec.Inputs[0], "Sqrt")
			if !ok {
				continue
			}
			ja, add, ok := g.inner(sq.Inputs[0], "Add")
			if !ok {
				continue
			}
			eps, jmean, mean, found := 0.0, 0, (*Node)(nil), false
			for _, ap := range orders(add) {
				if e, ok := scalar(ap[1]); ok {
					if jj, m, ok := g.inner(ap[0], "ReduceMean"); ok {
						eps, jmean, mean, found = e, jj, m, true
						break
					}
				}
			}
			if !found || intAttr(mean, "keepdims", 1) != 1 {
				continue
			}
			if axes, ok := axesOf(mean); !ok || len(axes) != 1 || !lastAxis(axes[0], xf.Info.Rank()) {
				continue
			}
			jp, pow, ok := g.inner(mean.Inputs[0], "Pow")
			if !ok || len(pow.Inputs) != 2 || pow.Inputs[0].Name != xf.Name {
				continue
			}
			if e, ok := scalar(pow.Inputs[1]); !ok || e != 2 {
				continue
			}
			x := xf
			body := []int{jm, jr, js, ja, jmean, jp}
			if castBack {
				// The float32 input comes from a Cast of x that only the chain reads.
				jc, ok := g.maker[xf.Name]
				if !ok || g.gone[jc] || g.nodes[jc].Op != "Cast" || g.reads[xf.Name] != 2 {
					continue
				}
				x = g.nodes[jc].Inputs[0]
				if x.Info.DType != normed.Info.DType || xf.Info.DType != ep.Float32 {
					continue
				}
				body = append(body, jc)
			} else if x.Info.DType != ep.Float32 {
				continue
			}
			rank := x.Info.Rank()
			if rank == 0 || scale.Info.DType != x.Info.DType || !slices.Equal(scale.Info.Shape, x.Info.Shape[rank-1:]) {
				continue
			}
			out := last.Outputs[0]
			if out.Info.DType != x.Info.DType || !slices.Equal(out.Info.Shape, x.Info.Shape) {
				continue
			}
			n := Node{
				Name: last.Name, Op: "SimplifiedLayerNormalization", Opset: last.Opset,
				Attrs: map[string]ep.Attribute{
					"axis": ep.IntAttr(-1), "epsilon": ep.FloatAttr(float32(eps)), "stash_type": ep.IntAttr(1),
				},
				Inputs: []Value{x, scale}, Outputs: []Value{out},
			}
			return n, append(chain, body...), true
		}
	}
	return Node{}, nil, false
}

// skipNorm fuses node i, a SimplifiedLayerNormalization over the last axis, with the Add that
// makes its input when the Add's two inputs have the sum's shape and dtype (no broadcast) and
// no live node between the two reads the sum: the fused node makes the sum at i.
func (g *fusion) skipNorm(i int) (Node, []int, bool) {
	n := &g.nodes[i]
	if n.Op != "SimplifiedLayerNormalization" || len(n.Inputs) != 2 || len(n.Outputs) != 1 {
		return Node{}, nil, false
	}
	h := n.Inputs[0]
	if !lastAxis(intAttr(n, "axis", -1), h.Info.Rank()) || intAttr(n, "stash_type", 1) != 1 {
		return Node{}, nil, false
	}
	j, add, ok := g.producer(h)
	if !ok || add.Op != "Add" || len(add.Inputs) != 2 || len(add.Outputs) != 1 {
		return Node{}, nil, false
	}
	for _, v := range add.Inputs {
		if v.Info.DType != h.Info.DType || !slices.Equal(v.Info.Shape, h.Info.Shape) {
			return Node{}, nil, false
		}
	}
	if g.readBetween(h.Name, j, i) {
		return Node{}, nil, false
	}
	attrs := map[string]ep.Attribute{}
	if eps, ok := n.Attrs["epsilon"]; ok {
		attrs["epsilon"] = eps
	}
	fused := Node{
		Name: n.Name, Op: "com.microsoft.SkipSimplifiedLayerNormalization", Opset: 1, Attrs: attrs,
		Inputs:  []Value{add.Inputs[0], add.Inputs[1], n.Inputs[1]},
		Outputs: []Value{n.Outputs[0], {}, {}, h},
	}
	return fused, []int{j}, true
}

// normMatMul fuses node i, a MatMul or cudaep.MatMulGroup, with the normalization over the
// last axis that makes its row when only i reads the normalized row and the normalization's
// mean and inverse deviation are unread: cudaep.NormMatMulGroup(X, scale, B…) for a
// SimplifiedLayerNormalization, cudaep.SkipNormMatMulGroup(X, skip, scale, B…) for a
// com.microsoft.SkipSimplifiedLayerNormalization without bias, whose sum output, when read,
// becomes the fused node's last (no live node between the two may read it).
func (g *fusion) normMatMul(i int) (Node, []int, bool) {
	n := &g.nodes[i]
	mats, ok := matrices(n)
	if !ok {
		return Node{}, nil, false
	}
	row := n.Inputs[0]
	j, norm, ok := g.producer(row)
	if !ok || g.reads[row.Name] != 1 || slices.Contains(g.keep, row.Name) || norm.Outputs[0].Name != row.Name ||
		!g.unread(norm, 1) || !g.unread(norm, 2) {
		return Node{}, nil, false
	}
	x := norm.Inputs[0]
	if !lastAxis(intAttr(norm, "axis", -1), x.Info.Rank()) || intAttr(norm, "stash_type", 1) != 1 {
		return Node{}, nil, false
	}
	fused := Node{Name: n.Name, Opset: 1, Outputs: slices.Clone(n.Outputs)}
	if eps, ok := norm.Attrs["epsilon"]; ok {
		fused.Attrs = map[string]ep.Attribute{"epsilon": eps}
	}
	switch {
	case norm.Op == "SimplifiedLayerNormalization" && len(norm.Inputs) == 2:
		fused.Op = "cudaep.NormMatMulGroup"
		fused.Inputs = append([]Value{x, norm.Inputs[1]}, mats...)
	case norm.Op == "com.microsoft.SkipSimplifiedLayerNormalization" && len(norm.Inputs) >= 3 &&
		(len(norm.Inputs) == 3 || norm.Inputs[3].Name == ""):
		fused.Op = "cudaep.SkipNormMatMulGroup"
		fused.Inputs = append([]Value{x, norm.Inputs[1], norm.Inputs[2]}, mats...)
		if !g.unread(norm, 3) {
			sum := norm.Outputs[3]
			if g.readBetween(sum.Name, j, i) {
				return Node{}, nil, false
			}
			fused.Outputs = append(fused.Outputs, sum)
		}
	default:
		return Node{}, nil, false
	}
	return fused, []int{j}, true
}
