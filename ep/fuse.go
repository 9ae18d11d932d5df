package ep

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cudaep/cudaep/ep/kernels"
)

// Node is one operator of a graph as Fuse reads and writes it: its name, its op (as Spec.Op:
// the ONNX op type, "<domain>.<op>" outside the default domain), the opset the graph imports
// for the op's domain, its attributes, and its input and output values in ONNX order (an
// absent optional input or output has an empty name).
type Node struct {
	Name    string
	Op      string
	Opset   int
	Attrs   map[string]Attribute
	Inputs  []Value
	Outputs []Value
}

// Value is a tensor of a graph: its name, dtype and shape (-1 for a dimension known only at
// run time) and, for a constant the graph holds (an initializer), its value.
type Value struct {
	Name  string
	Info  TensorInfo
	Const *Const
}

// Fuse returns nodes with the chains below replaced by the one kernel that computes each of
// them, so that a plan of the result launches fewer kernels and reads and writes fewer
// intermediates. nodes must be in topological order; the result is too (a fused node takes
// the place of the chain's last node). keep names the values that must survive (the graph's
// outputs): a chain whose intermediate is kept, or read by a node outside the chain, is left
// as it is. A chain is fused only when its values' shapes are all known and the provider
// builds the fused kernel for them, so fusing never turns a graph the provider runs into one
// it refuses. Fuse neither modifies nodes nor touches the device beyond building kernels
// (GetKernel). It tries the chains at every node twice over: a pair below may need a chain
// that ends after it fused first.
//
// First, a node that repeats an earlier one (the same op, opset and attributes over the same
// inputs: the same values, or constants of equal contents) is dropped and its readers read the
// earlier node's outputs, unless one of its outputs is kept: an exporter may compute a decoder's
// cache-position mask once per layer.
//
// The chains, as exporters write them (torch.onnx for Hugging Face's Llama, for instance):
//
//   - RMS normalization: [Cast to float32,] Pow(x, 2), ReduceMean over the last axis, Add(ε),
//     Sqrt, Reciprocal, Mul(x, ·), [Cast back,] Mul(scale, ·) → SimplifiedLayerNormalization.
//   - Add(a, b) of two same-shape values and the SimplifiedLayerNormalization of its sum (the
//     residual stream and the next RMSNorm) → com.microsoft.SkipSimplifiedLayerNormalization,
//     whose fourth output is the sum, for the sum's other readers (the next residual Add).
//   - Rotary embedding with rotate_half: Mul(x, cos), Slice of each half of x's last axis, Neg
//     of the second, Concat(−second, first), Mul(·, sin), Add → cudaep.RotateHalf(x, cos, sin).
//   - Two cudaep.RotateHalf of one cos and sin row (a decode step's query and key), the
//     first's output not read between them → cudaep.RotateHalfPair at the second's place.
//   - Gated SiLU: Sigmoid(a), Mul(a, ·), Mul(·, b) → cudaep.SiluMul(a, b).
//   - Attention: repeat_kv of the keys and values (Unsqueeze, Expand, Reshape) or none,
//     Transpose of the keys' last two axes, MatMul with the queries, Mul or Div by a constant
//     scale, Add of a mask, Softmax over the last axis, MatMul with the values → Attention
//     (ONNX opset 23) with its scale and mask, for queries of at most maxFusedAttentionRows
//     rows (decode steps; see there why not prompts).
//   - An Expand read only by a broadcasting elementwise op that broadcasts to the same shape
//     without it (Add, Sub, Mul, Div, Where) is dropped.
//   - MatMuls of one row A (a decode step's q, k and v projections of one hidden state, or its
//     gate and up projections), up to four, each with a matrix that is not computed between
//     the first and itself → cudaep.MatMulGroup: one GEMV launch over every matrix's tiles.
//     (A node here is not a chain's last: the group takes the first MatMul's place.)
//   - A SimplifiedLayerNormalization or com.microsoft.SkipSimplifiedLayerNormalization (no
//     bias) of one row whose normalized output only a MatMul or cudaep.MatMulGroup reads →
//     cudaep.NormMatMulGroup or cudaep.SkipNormMatMulGroup: the GEMV launch normalizes the row
//     itself (and stores the skip sum for its other readers), at the MatMul's place.
//   - Two Wheres over one condition whose X and Y have the same dtypes and shapes, the first's
//     output not read between them (a decode step's key and value cache updates: one position
//     mask) → cudaep.WherePair at the second's place: one launch when both update their cache
//     in place.
//   - A cudaep.SiluMul only a MatMul or cudaep.MatMulGroup reads → cudaep.SiluMulMatMulGroup.
func (p *Provider) Fuse(nodes []Node, keep []string) []Node {
	g := newFusion(p, nodes, keep)
	g.dedupe()
	// Two passes: a fusion may need one that a later node's chain makes (two cache updates pair
	// up once the attention chain that read the first between them is one node).
	for range 2 {
		for i := range g.nodes {
			// Try the rules again after each fusion at i: the fused node may end another chain (a
			// Where that read two Expands drops both). Each fusion removes nodes, so this ends.
			for fused := !g.gone[i]; fused; {
				fused = false
				for _, rule := range fusionRules {
					if n, chain, ok := rule(g, i); ok && g.builds(n) {
						for _, j := range chain {
							g.gone[j] = true
						}
						g.nodes[i] = n
						g.index()
						fused = true
						break
					}
				}
			}
		}
	}
	out := make([]Node, 0, len(g.nodes))
	for i, n := range g.nodes {
		if !g.gone[i] {
			out = append(out, n)
		}
	}
	return out
}

// fusionRules try to fuse the chain that ends at node i; each returns the fused node and the
// indices of the chain's other nodes (which go).
var fusionRules = []func(g *fusion, i int) (Node, []int, bool){
	(*fusion).rmsNorm,
	(*fusion).skipNorm,
	(*fusion).rotateHalf,
	(*fusion).rotatePair,
	(*fusion).siluMul,
	(*fusion).attention,
	(*fusion).dropExpand,
	(*fusion).wherePair,
	(*fusion).matMulGroup,
	(*fusion).normMatMul,
	(*fusion).siluMatMul,
}

// fusion is Fuse's working state: the nodes (fused ones replace their chain's last node), which
// ones went, which node makes each value and how many readers each value has.
type fusion struct {
	p     *Provider
	nodes []Node
	gone  []bool
	maker map[string]int
	reads map[string]int // readers among the live nodes, +1 for a kept value
	keep  []string
}

func newFusion(p *Provider, nodes []Node, keep []string) *fusion {
	g := &fusion{p: p, nodes: slices.Clone(nodes), gone: make([]bool, len(nodes)), keep: keep}
	g.index()
	return g
}

// index recomputes maker and reads from the live nodes.
func (g *fusion) index() {
	g.maker, g.reads = map[string]int{}, map[string]int{}
	for i, n := range g.nodes {
		if g.gone[i] {
			continue
		}
		for _, v := range n.Outputs {
			if v.Name != "" {
				g.maker[v.Name] = i
			}
		}
		for _, v := range n.Inputs {
			if v.Name != "" {
				g.reads[v.Name]++
			}
		}
	}
	for _, k := range g.keep {
		g.reads[k]++
	}
}

// builds reports whether the provider builds a kernel for n: every shape known, and GetKernel
// accepts it.
func (g *fusion) builds(n Node) bool {
	spec := Spec{Op: n.Op, Opset: n.Opset, Attrs: n.Attrs, NumOutputs: len(n.Outputs)}
	for i, v := range n.Inputs {
		if v.Name == "" {
			spec.Inputs = append(spec.Inputs, TensorInfo{})
			continue
		}
		if !static(v.Info) {
			return false
		}
		spec.Inputs = append(spec.Inputs, v.Info)
		if v.Const != nil {
			if spec.Consts == nil {
				spec.Consts = map[int]Const{}
			}
			spec.Consts[i] = *v.Const
		}
	}
	for _, v := range n.Outputs {
		if !static(v.Info) {
			return false
		}
	}
	k, err := g.p.GetKernel(spec)
	if err != nil {
		return false
	}
	outs := k.Outputs()
	return len(outs) >= len(n.Outputs) && outs[0].Equal(n.Outputs[0].Info)
}

// static reports whether every dimension of info is known.
func static(info TensorInfo) bool {
	for _, d := range info.Shape {
		if d < 0 {
			return false
		}
	}
	return true
}

// inner returns the node that makes value v when the chain may swallow it: a live node of op
// op with one output, v read once and not kept.
func (g *fusion) inner(v Value, op string) (int, *Node, bool) {
	j, ok := g.maker[v.Name]
	if !ok || g.gone[j] || g.reads[v.Name] != 1 {
		return 0, nil, false
	}
	n := &g.nodes[j]
	if n.Op != op || len(n.Outputs) != 1 {
		return 0, nil, false
	}
	return j, n, true
}

// orders returns node n's two inputs in both orders (none unless it has exactly two): the
// commutative ops' chains match either way round.
func orders(n *Node) [][2]Value {
	if len(n.Inputs) != 2 {
		return nil
	}
	a, b := n.Inputs[0], n.Inputs[1]
	return [][2]Value{{a, b}, {b, a}}
}

// binary returns node n's two inputs in both orders when n is op with two inputs and one output.
func binary(n *Node, op string) ([][2]Value, bool) {
	if n.Op != op || len(n.Outputs) != 1 {
		return nil, false
	}
	o := orders(n)
	return o, o != nil
}

// scalar returns the value of a constant of one element.
func scalar(v Value) (float64, bool) {
	if v.Const == nil {
		return 0, false
	}
	switch {
	case len(v.Const.Floats) == 1:
		return v.Const.Floats[0], true
	case len(v.Const.Ints) == 1:
		return float64(v.Const.Ints[0]), true
	}
	return 0, false
}

// lastAxis reports whether axis names the last of rank axes.
func lastAxis(axis int64, rank int) bool { return rank > 0 && (axis == -1 || axis == int64(rank-1)) }

// intAttr returns n's int attribute name, or def when n does not set it.
func intAttr(n *Node, name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind() == kernels.AttrInt {
		return a.Int()
	}
	return def
}

// axesOf returns the axes of a Reduce, Squeeze or Unsqueeze node: its constant input 1
// (opset 13 on for Squeeze/Unsqueeze, 18 on for ReduceMean) or its axes attribute.
func axesOf(n *Node) ([]int64, bool) {
	if len(n.Inputs) > 1 && n.Inputs[1].Name != "" {
		if c := n.Inputs[1].Const; c != nil && c.Ints != nil {
			return c.Ints, true
		}
		return nil, false
	}
	if a, ok := n.Attrs["axes"]; ok && a.Kind() == kernels.AttrInts {
		return a.Ints(), true
	}
	return nil, false
}

// rmsNorm fuses [Cast,] Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, [Cast,] Mul(scale).
func (g *fusion) rmsNorm(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	pairs, ok := binary(last, "Mul")
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
				if x.Info.DType != normed.Info.DType || xf.Info.DType != Float32 {
					continue
				}
				body = append(body, jc)
			} else if x.Info.DType != Float32 {
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
				Attrs: map[string]Attribute{
					"axis": IntAttr(-1), "epsilon": FloatAttr(float32(eps)), "stash_type": IntAttr(1),
				},
				Inputs: []Value{x, scale}, Outputs: []Value{out},
			}
			return n, append(chain, body...), true
		}
	}
	return Node{}, nil, false
}

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
	pairs, ok := binary(last, "Add")
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

// siluMul fuses Mul(Mul(a, Sigmoid(a)), b).
func (g *fusion) siluMul(i int) (Node, []int, bool) {
	last := &g.nodes[i]
	pairs, ok := binary(last, "Mul")
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
	if q.Info.Rank() != 4 || q.Info.DType != k.Info.DType || v.Info.DType != k.Info.DType ||
		q.Info.Shape[2] < 0 || q.Info.Shape[2] > maxFusedAttentionRows {
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
		Attrs:  map[string]Attribute{"scale": FloatAttr(float32(scale))},
		Inputs: ins, Outputs: []Value{last.Outputs[0]},
	}
	return n, chain, true
}

// maxFusedAttentionRows is the longest query the attention chain is fused for: decode steps.
// For longer queries (a prompt) the chain's own kernels are faster than the fused Attention's
// prefill path, which computes in float32 without tensor cores: on the H200 a 512-token prefill
// of a 1.1 B Llama took 14.4 ms with it against 12.6 ms with cuBLAS's GEMMs and a softmax
// (2026-12-01; its kernel 0.37 ms per layer).
const maxFusedAttentionRows = 15

// producer returns the live node that makes v, whatever its readers.
func (g *fusion) producer(v Value) (int, *Node, bool) {
	j, ok := g.maker[v.Name]
	if !ok || g.gone[j] {
		return 0, nil, false
	}
	return j, &g.nodes[j], true
}

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

// earlierPartner returns the nearest live node j before i with one output that like accepts,
// when its output may be made at i instead: no live node between the two reads it, and i does
// not. A pair rule's fused node takes i's place.
func (g *fusion) earlierPartner(i int, like func(m *Node) bool) (int, bool) {
	n := &g.nodes[i]
	for j := i - 1; j >= 0; j-- {
		m := &g.nodes[j]
		if g.gone[j] || len(m.Outputs) != 1 || !like(m) {
			continue
		}
		out := m.Outputs[0].Name
		if slices.ContainsFunc(n.Inputs, func(v Value) bool { return v.Name == out }) || g.readBetween(out, j, i) {
			return 0, false
		}
		return j, true
	}
	return 0, false
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
	attrs := map[string]Attribute{}
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

// unread reports whether no live node reads output o of node n (or n leaves it out).
func (g *fusion) unread(n *Node, o int) bool {
	return o >= len(n.Outputs) || n.Outputs[o].Name == "" || g.reads[n.Outputs[o].Name] == 0
}

// readBetween reports whether a live node after j and before i reads value name.
func (g *fusion) readBetween(name string, j, i int) bool {
	for k := j + 1; k < i; k++ {
		if g.gone[k] {
			continue
		}
		for _, v := range g.nodes[k].Inputs {
			if v.Name == name {
				return true
			}
		}
	}
	return false
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
		fused.Attrs = map[string]Attribute{"epsilon": eps}
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
