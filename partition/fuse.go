package partition

import (
	"slices"

	"github.com/cudaep/cudaep/ep"
)

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
//     rows (decode steps), and for longer ones (prompts) where the provider's kernel is the
//     flash one (see maxFusedAttentionRows).
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
//   - com.microsoft.MatMulNBits of one A (an int4 decode step's q, k and v, or gate and up),
//     up to three, with the same attributes but N (K, bits, block_size, …), each one's inputs not
//     computed between the first and itself → cudaep.MatMulNBitsGroup: one decode launch over
//     every matrix's column tiles, at the first's place.
func Fuse(p *ep.Provider, nodes []Node, keep []string) []Node {
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
	(*fusion).nbitsGroup,
	(*fusion).normMatMul,
	(*fusion).siluMatMul,
}

// fusion is Fuse's working state: the nodes (fused ones replace their chain's last node), which
// ones went, which node makes each value and how many readers each value has.
type fusion struct {
	p     *ep.Provider
	nodes []Node
	gone  []bool
	maker map[string]int
	reads map[string]int // readers among the live nodes, +1 for a kept value
	keep  []string
}

func newFusion(p *ep.Provider, nodes []Node, keep []string) *fusion {
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
	_, ok := g.kernel(n)
	return ok
}

// kernel returns the provider's kernel for n when builds(n).
func (g *fusion) kernel(n Node) (*ep.Kernel, bool) {
	spec := ep.Spec{Op: n.Op, Opset: n.Opset, Attrs: n.Attrs, NumOutputs: len(n.Outputs)}
	for i, v := range n.Inputs {
		if v.Name == "" {
			spec.Inputs = append(spec.Inputs, ep.TensorInfo{})
			continue
		}
		if !static(v.Info) {
			return nil, false
		}
		spec.Inputs = append(spec.Inputs, v.Info)
		if v.Const != nil {
			if spec.Consts == nil {
				spec.Consts = map[int]ep.Const{}
			}
			spec.Consts[i] = *v.Const
		}
	}
	for _, v := range n.Outputs {
		if !static(v.Info) {
			return nil, false
		}
	}
	k, err := g.p.GetKernel(spec)
	if err != nil {
		return nil, false
	}
	outs := k.Outputs()
	return k, len(outs) >= len(n.Outputs) && outs[0].Equal(n.Outputs[0].Info)
}

// static reports whether every dimension of info is known.
func static(info ep.TensorInfo) bool {
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

// twoInputs returns node n's two inputs in both orders when n is op with two inputs and one output.
func twoInputs(n *Node, op string) ([][2]Value, bool) {
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
	if a, ok := n.Attrs[name]; ok && a.Kind() == ep.AttrInt {
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
	if a, ok := n.Attrs["axes"]; ok && a.Kind() == ep.AttrInts {
		return a.Ints(), true
	}
	return nil, false
}

// producer returns the live node that makes v, whatever its readers.
func (g *fusion) producer(v Value) (int, *Node, bool) {
	j, ok := g.maker[v.Name]
	if !ok || g.gone[j] {
		return 0, nil, false
	}
	return j, &g.nodes[j], true
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
