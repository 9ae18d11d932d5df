package partition

import (
	"slices"

	"github.com/cudaep/cudaep/ep"
)

// repeatKV returns the key or value tensor v was repeated from by Unsqueeze(axis 2), Expand
// and Reshape (Hugging Face's repeat_kv), with the chain's nodes, or v itself and none.
func (g *fusion) repeatKV(v Value) (Value, []int, bool) {
	jr, r, ok := g.inner(v, "Reshape")
	if !ok {
		return v, nil, v.Info.Rank() == 4
	}
	je, e, ok := g.inner(r.Inputs[0], "Expand")
	if !ok {
		return Value{}, nil, false
	}
	ju, u, ok := g.inner(e.Inputs[0], "Unsqueeze")
	if !ok {
		return Value{}, nil, false
	}
	if axes, ok := axesOf(u); !ok || len(axes) != 1 || axes[0] != 2 {
		return Value{}, nil, false
	}
	kv := u.Inputs[0]
	ks, es, rs := kv.Info.Shape, e.Outputs[0].Info.Shape, v.Info.Shape
	if len(ks) != 4 || len(es) != 5 || len(rs) != 4 || !static(kv.Info) || !static(e.Outputs[0].Info) {
		return Value{}, nil, false
	}
	// [B, Hkv, T, D] → [B, Hkv, g, T, D] → [B, Hkv·g, T, D]
	if es[0] != ks[0] || es[1] != ks[1] || es[3] != ks[2] || es[4] != ks[3] ||
		rs[0] != ks[0] || rs[1] != ks[1]*es[2] || rs[2] != ks[2] || rs[3] != ks[3] {
		return Value{}, nil, false
	}
	return kv, []int{jr, je, ju}, true
}

// attention fuses MatMul(Softmax(Add(Mul(MatMul(q, Transpose(K)), scale), mask)), V), with
// repeat_kv on K and V.
func (g *fusion) attention(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	if last.Op != "MatMul" || len(last.Inputs) != 2 || last.Outputs[0].Info.Rank() != 4 {
		return Node{}, nil, false
	}
	jsm, sm, ok := g.inner(last.Inputs[0], "Softmax")
	if !ok || last.Opset < 13 || !lastAxis(intAttr(sm, "axis", -1), sm.Inputs[0].Info.Rank()) {
		return Node{}, nil, false
	}
	chain := []int{jsm}
	logits := sm.Inputs[0]
	var mask *Value
	if ja, add, ok := g.inner(logits, "Add"); ok {
		for _, ap := range orders(add) {
			if j, _, ok := g.producer(ap[0]); ok && (g.nodes[j].Op == "Mul" || g.nodes[j].Op == "Div" || g.nodes[j].Op == "MatMul") {
				m := ap[1]
				mask, logits = &m, ap[0]
				chain = append(chain, ja)
				break
			}
		}
		if mask == nil {
			return Node{}, nil, false
		}
	}
	scale := 1.0
	for _, op := range []string{"Mul", "Div"} {
		jm, m, ok := g.inner(logits, op)
		if !ok {
			continue
		}
		found := false
		for _, mp := range orders(m) {
			if op == "Div" && mp[1].Name != m.Inputs[1].Name {
				continue
			}
			if s, ok := scalar(mp[1]); ok && s != 0 {
				if op == "Div" {
					s = 1 / s
				}
				scale, logits, found = s, mp[0], true
				break
			}
		}
		if !found {
			return Node{}, nil, false
		}
		chain = append(chain, jm)
		break
	}
	jqk, qk, ok := g.inner(logits, "MatMul")
	if !ok {
		return Node{}, nil, false
	}
	jt, tr, ok := g.inner(qk.Inputs[1], "Transpose")
	if !ok {
		return Node{}, nil, false
	}
	if a, ok := tr.Attrs["perm"]; !ok || !slices.Equal(a.Ints(), []int64{0, 1, 3, 2}) {
		return Node{}, nil, false
	}
	k, kchain, ok := g.repeatKV(tr.Inputs[0])
	if !ok {
		return Node{}, nil, false
	}
	v, vchain, ok := g.repeatKV(last.Inputs[1])
	if !ok {
		return Node{}, nil, false
	}
	q := qk.Inputs[0]
	if q.Info.Rank() != 4 || q.Info.DType != k.Info.DType || v.Info.DType != k.Info.DType || q.Info.Shape[2] < 0 {
		return Node{}, nil, false
	}
	chain = append(chain, jqk, jt)
	chain = append(chain, kchain...)
	chain = append(chain, vchain...)
	ins := []Value{q, k, v}
	if mask != nil {
		ins = append(ins, *mask)
	}
	n := Node{
		Name: last.Name, Op: "Attention", Opset: 23,
		Attrs:  map[string]ep.Attribute{"scale": ep.FloatAttr(float32(scale))},
		Inputs: ins, Outputs: []Value{last.Outputs[0]},
	}
	if q.Info.Shape[2] > maxFusedAttentionRows {
		if k, ok := g.kernel(n); !ok || k.Variant() != "flash" {
			return Node{}, nil, false
		}
	}
	return n, chain, true
}

// maxFusedAttentionRows is the longest query the attention chain is fused for whatever kernel
// the provider picks: decode steps. A longer query (a prompt) is fused only where the
// provider's Attention is the flash kernel (tensor cores; float16 and bfloat16, head size 64
// or 128, compute capability 8.0 or later): the float32 prefill kernel is slower than the
// chain's own kernels (on the H200 a 512-token prefill of a 1.1 B Llama took 14.4 ms with it
// against 12.6 ms with cuBLAS's GEMMs and a softmax, 2026-12-01; its kernel 0.37 ms per layer).
const maxFusedAttentionRows = 15
