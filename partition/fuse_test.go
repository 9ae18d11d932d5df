package partition

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
)

// graphBuilder writes node lists the way an exporter does, inferring each output's shape from
// the kernel the provider builds for the node.
type graphBuilder struct {
	t      *testing.T
	p      *ep.Provider
	nodes  []Node
	inputs []Value // the graph's inputs, filled with random data by run
	n      int
}

func newGraph(t *testing.T, p *ep.Provider) *graphBuilder { return &graphBuilder{t: t, p: p} }

func (g *graphBuilder) input(name string, dt ep.DType, shape ...int64) Value {
	v := Value{Name: name, Info: ep.TensorInfo{DType: dt, Shape: shape}}
	g.inputs = append(g.inputs, v)
	return v
}

// floats is a constant floating-point tensor.
func (g *graphBuilder) floats(dt ep.DType, shape []int64, vals ...float64) Value {
	g.n++
	c := ep.FloatsConst(vals...)
	return Value{Name: fmt.Sprintf("const%d", g.n), Info: ep.TensorInfo{DType: dt, Shape: shape}, Const: &c}
}

// ints is a constant int64 vector.
func (g *graphBuilder) ints(vals ...int64) Value {
	g.n++
	c := ep.IntsConst(vals...)
	return Value{Name: fmt.Sprintf("const%d", g.n), Info: ep.TensorInfo{DType: ep.Int64, Shape: []int64{int64(len(vals))}}, Const: &c}
}

// op appends a node and returns its (first) output.
func (g *graphBuilder) op(op string, attrs map[string]ep.Attribute, ins ...Value) Value {
	g.t.Helper()
	g.n++
	opset := 18
	switch {
	case op == "Attention":
		opset = 23
	case strings.Contains(op, "."): // a domain's op: com.microsoft's
		opset = 1
	}
	n := Node{Name: fmt.Sprintf("%s_%d", op, g.n), Op: op, Opset: opset, Attrs: attrs, Inputs: ins}
	k, err := g.p.GetKernel(nodeSpec(n))
	require.NoError(g.t, err, "node %s", n.Name)
	out := Value{Name: fmt.Sprintf("v%d", g.n), Info: k.Outputs()[0]}
	n.Outputs = []Value{out}
	g.nodes = append(g.nodes, n)
	return out
}

func nodeSpec(n Node) ep.Spec {
	spec := ep.Spec{Op: n.Op, Opset: n.Opset, Attrs: n.Attrs, NumOutputs: max(1, len(n.Outputs)), Consts: map[int]ep.Const{}}
	for i, v := range n.Inputs {
		spec.Inputs = append(spec.Inputs, v.Info)
		if v.Const != nil {
			spec.Consts[i] = *v.Const
		}
	}
	return spec
}

// encode writes vals as dt's bytes.
func encode(dt ep.DType, vals []float64) []byte {
	b := make([]byte, 0, len(vals)*8)
	for _, v := range vals {
		switch dt {
		case ep.Float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case ep.BFloat16:
			b = binary.LittleEndian.AppendUint16(b, cudadrv.BFloat16Bits(float32(v)))
		case ep.Float16:
			b = binary.LittleEndian.AppendUint16(b, cudadrv.Float16Bits(float32(v)))
		case ep.Int64:
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
		case ep.Uint8:
			b = append(b, byte(v))
		default:
			panic("encode: dtype " + dt.String())
		}
	}
	return b
}

// decode reads dt's bytes as float64s.
func decode(dt ep.DType, b []byte) []float64 {
	var out []float64
	for len(b) > 0 {
		switch dt {
		case ep.Float32:
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
			b = b[4:]
		case ep.BFloat16:
			out = append(out, float64(cudadrv.BFloat16Value(binary.LittleEndian.Uint16(b))))
			b = b[2:]
		case ep.Float16:
			out = append(out, float64(cudadrv.Float16Value(binary.LittleEndian.Uint16(b))))
			b = b[2:]
		case ep.Bool:
			out = append(out, float64(b[0]))
			b = b[1:]
		default:
			panic("decode: dtype " + dt.String())
		}
	}
	return out
}

// run executes nodes kernel by kernel on data (by input name) and returns the value named out.
func run(t *testing.T, p *ep.Provider, nodes []Node, data map[string][]float64, out string) []float64 {
	t.Helper()
	return runAll(t, p, nodes, data, []string{out})[out]
}

// runAll executes nodes kernel by kernel on data (by input name) and returns the values named
// outs.
func runAll(t *testing.T, p *ep.Provider, nodes []Node, data map[string][]float64, outs []string) map[string][]float64 {
	t.Helper()
	vals, bufs := map[string]ep.Tensor{}, map[string]*ep.Buffer{}
	put := func(v Value, host []float64) {
		b := alloc(t, p, uint64(max(v.Info.Bytes(), 1)))
		require.NoError(t, p.CopyToDevice(b, 0, encode(v.Info.DType, host)))
		vals[v.Name], bufs[v.Name] = ep.Tensor{TensorInfo: v.Info, Ptr: b.Ptr()}, b
	}
	for _, n := range nodes {
		var ins []ep.Tensor
		for _, v := range n.Inputs {
			if v.Name == "" { // an absent optional input
				ins = append(ins, ep.Tensor{})
				continue
			}
			if _, ok := vals[v.Name]; !ok {
				switch {
				case v.Const != nil && v.Const.Ints != nil:
					f := make([]float64, len(v.Const.Ints))
					for i, x := range v.Const.Ints {
						f[i] = float64(x)
					}
					put(v, f)
				case v.Const != nil:
					put(v, v.Const.Floats)
				default:
					d, ok := data[v.Name]
					require.True(t, ok, "no data for %s", v.Name)
					put(v, d)
				}
			}
			ins = append(ins, vals[v.Name])
		}
		k, err := p.GetKernel(nodeSpec(n))
		require.NoError(t, err, "node %s", n.Name)
		var outs []ep.Tensor
		for i, info := range k.Outputs() {
			b := alloc(t, p, uint64(max(info.Bytes(), 1)))
			outs = append(outs, ep.Tensor{TensorInfo: info, Ptr: b.Ptr()})
			if i < len(n.Outputs) {
				vals[n.Outputs[i].Name], bufs[n.Outputs[i].Name] = outs[i], b
			}
		}
		require.NoError(t, k.Execute(ins, outs), "node %s", n.Name)
	}
	got := map[string][]float64{}
	for _, out := range outs {
		res, ok := vals[out]
		require.True(t, ok, "nothing makes %s", out)
		b := make([]byte, res.Bytes())
		require.NoError(t, p.CopyToHost(b, bufs[out], 0))
		got[out] = decode(res.DType, b)
	}
	return got
}

// randomData fills every floating-point graph input with distinct non-zero values in (-1, 1),
// and every uint8 one (quantized weights) with bytes of any value.
func (g *graphBuilder) randomData() map[string][]float64 {
	data := map[string][]float64{}
	for _, v := range g.inputs {
		f := drivertest.RandomFloat32(int(v.Info.NumElements()))
		d := make([]float64, len(f))
		for i, x := range f {
			d[i] = float64(x)
			if v.Info.DType == ep.Uint8 {
				d[i] = math.Floor((float64(x) + 1) * 128)
			}
		}
		data[v.Name] = d
	}
	return data
}

// ops lists the ops of nodes in order.
func ops(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Op)
	}
	return out
}

// assertFusedSame checks that fusing g's nodes yields want's ops and the same value of out as
// the unfused nodes, within tol relative to the largest magnitude.
func assertFusedSame(t *testing.T, g *graphBuilder, out Value, want []string, tol float64) []Node {
	t.Helper()
	fused := Fuse(g.p, g.nodes, []string{out.Name})
	require.Equal(t, want, ops(fused))
	data := g.randomData()
	ref := run(t, g.p, g.nodes, data, out.Name)
	got := run(t, g.p, fused, data, out.Name)
	require.Len(t, got, len(ref))
	scale := 0.0
	for _, r := range ref {
		scale = math.Max(scale, math.Abs(r))
	}
	require.Positive(t, scale)
	for i := range ref {
		require.InDelta(t, ref[i], got[i], tol*scale, "element %d", i)
	}
	return fused
}

// rmsNormChain writes torch.onnx's RMSNorm of x with scale w: in float32 for a float32 x, else
// between Casts.
func rmsNormChain(g *graphBuilder, x, w Value) Value {
	xf := x
	if x.Info.DType != ep.Float32 {
		xf = g.op("Cast", map[string]ep.Attribute{"to": ep.IntAttr(int64(ep.Float32))}, x)
	}
	p := g.op("Pow", nil, xf, g.floats(ep.Float32, nil, 2))
	m := g.op("ReduceMean", map[string]ep.Attribute{"keepdims": ep.IntAttr(1)}, p, g.ints(-1))
	a := g.op("Add", nil, m, g.floats(ep.Float32, nil, 1e-5))
	s := g.op("Sqrt", nil, a)
	r := g.op("Reciprocal", nil, s)
	y := g.op("Mul", nil, xf, r)
	if x.Info.DType != ep.Float32 {
		y = g.op("Cast", map[string]ep.Attribute{"to": ep.IntAttr(int64(x.Info.DType))}, y)
	}
	return g.op("Mul", nil, w, y)
}

func TestFuseRMSNorm(t *testing.T) {
	for _, tc := range []struct {
		dt  ep.DType
		tol float64
	}{{ep.Float32, 1e-5}, {ep.BFloat16, 2e-2}, {ep.Float16, 2e-3}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			p := newProvider(t)
			g := newGraph(t, p)
			x := g.input("x", tc.dt, 2, 3, 64)
			w := g.input("w", tc.dt, 64)
			out := rmsNormChain(g, x, w)
			fused := assertFusedSame(t, g, out, []string{"SimplifiedLayerNormalization"}, tc.tol)
			assert.Equal(t, []string{"x", "w"}, []string{fused[0].Inputs[0].Name, fused[0].Inputs[1].Name})
			assert.InDelta(t, 1e-5, fused[0].Attrs["epsilon"].Float(), 1e-12)
		})
	}
}

func TestFuseLeavesChainsWhoseIntermediatesOthersRead(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	x := g.input("x", ep.Float32, 2, 64)
	w := g.input("w", ep.Float32, 64)
	out := rmsNormChain(g, x, w)
	mean := g.nodes[1].Outputs[0] // ReduceMean's output
	unfused := ops(g.nodes)

	// The mean is a graph output: the chain must stay.
	assert.Equal(t, unfused, ops(Fuse(p, g.nodes, []string{out.Name, mean.Name})))
	// A node outside the chain reads the mean.
	extra := g.op("Relu", nil, mean)
	assert.Equal(t, append(unfused, "Relu"), ops(Fuse(p, g.nodes, []string{out.Name, extra.Name})))
}

func TestFuseLeavesNearMisses(t *testing.T) {
	for name, build := range map[string]func(g *graphBuilder) Value{
		"cube instead of square": func(g *graphBuilder) Value {
			x, w := g.input("x", ep.Float32, 2, 64), g.input("w", ep.Float32, 64)
			pw := g.op("Pow", nil, x, g.floats(ep.Float32, nil, 3))
			m := g.op("ReduceMean", map[string]ep.Attribute{"keepdims": ep.IntAttr(1)}, pw, g.ints(-1))
			a := g.op("Add", nil, m, g.floats(ep.Float32, nil, 1e-5))
			r := g.op("Reciprocal", nil, g.op("Sqrt", nil, a))
			return g.op("Mul", nil, w, g.op("Mul", nil, x, r))
		},
		"mean over the first axis": func(g *graphBuilder) Value {
			x, w := g.input("x", ep.Float32, 64, 64), g.input("w", ep.Float32, 64)
			pw := g.op("Pow", nil, x, g.floats(ep.Float32, nil, 2))
			m := g.op("ReduceMean", map[string]ep.Attribute{"keepdims": ep.IntAttr(1)}, pw, g.ints(0))
			a := g.op("Add", nil, m, g.floats(ep.Float32, nil, 1e-5))
			r := g.op("Reciprocal", nil, g.op("Sqrt", nil, a))
			return g.op("Mul", nil, w, g.op("Mul", nil, x, r))
		},
		"rotate by a third": func(g *graphBuilder) Value {
			x := g.input("x", ep.Float32, 1, 2, 3, 12)
			cos, sin := g.input("cos", ep.Float32, 1, 1, 3, 12), g.input("sin", ep.Float32, 1, 1, 3, 12)
			a := g.op("Slice", nil, x, g.ints(0), g.ints(4), g.ints(-1), g.ints(1))
			b := g.op("Slice", nil, x, g.ints(4), g.ints(12), g.ints(-1), g.ints(1))
			c := g.op("Concat", map[string]ep.Attribute{"axis": ep.IntAttr(-1)}, g.op("Neg", nil, b), a)
			return g.op("Add", nil, g.op("Mul", nil, x, cos), g.op("Mul", nil, c, sin))
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newProvider(t)
			g := newGraph(t, p)
			out := build(g)
			assert.Equal(t, ops(g.nodes), ops(Fuse(p, g.nodes, []string{out.Name})))
		})
	}
}

func TestFuseLeavesUnknownShapes(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	x := g.input("x", ep.Float32, 2, 64)
	w := g.input("w", ep.Float32, 64)
	out := rmsNormChain(g, x, w)
	for i := range g.nodes {
		for j := range g.nodes[i].Inputs {
			if g.nodes[i].Inputs[j].Name == "x" {
				g.nodes[i].Inputs[j].Info.Shape = []int64{-1, 64}
			}
		}
	}
	assert.Equal(t, ops(g.nodes), ops(Fuse(p, g.nodes, []string{out.Name})))
}

// rotaryChain writes Hugging Face's x·cos + rotate_half(x)·sin as torch.onnx exports it.
func rotaryChain(g *graphBuilder, x, cos, sin Value) Value {
	d := x.Info.Shape[x.Info.Rank()-1]
	a := g.op("Slice", nil, x, g.ints(0), g.ints(d/2), g.ints(-1), g.ints(1))
	b := g.op("Slice", nil, x, g.ints(d/2), g.ints(math.MaxInt64), g.ints(-1), g.ints(1))
	c := g.op("Concat", map[string]ep.Attribute{"axis": ep.IntAttr(-1)}, g.op("Neg", nil, b), a)
	return g.op("Add", nil, g.op("Mul", nil, x, cos), g.op("Mul", nil, c, sin))
}

func TestFuseRotateHalf(t *testing.T) {
	for _, dt := range []ep.DType{ep.Float32, ep.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			p := newProvider(t)
			g := newGraph(t, p)
			x := g.input("x", dt, 1, 4, 3, 16)
			cos, sin := g.input("cos", dt, 1, 1, 3, 16), g.input("sin", dt, 1, 1, 3, 16)
			out := rotaryChain(g, x, cos, sin)
			tol := 1e-6
			if dt != ep.Float32 {
				tol = 2e-2
			}
			assertFusedSame(t, g, out, []string{"cudaep.RotateHalf"}, tol)
		})
	}
}

// TestFuseRotatePair: a decode step's query and key rotations over one cos and sin row become
// one cudaep.RotateHalfPair; a prompt's (cos and sin a row per position) stay two RotateHalfs.
func TestFuseRotatePair(t *testing.T) {
	p := newProvider(t)
	concat := map[string]ep.Attribute{"axis": ep.IntAttr(1)}
	for _, c := range []struct {
		seq  int64
		want []string
	}{
		{1, []string{"cudaep.RotateHalfPair", "Concat"}},
		{3, []string{"cudaep.RotateHalf", "cudaep.RotateHalf", "Concat"}},
	} {
		t.Run(fmt.Sprintf("seq%d", c.seq), func(t *testing.T) {
			g := newGraph(t, p)
			q, k := g.input("q", ep.Float32, 1, 4, c.seq, 16), g.input("k", ep.Float32, 1, 2, c.seq, 16)
			cos, sin := g.input("cos", ep.Float32, 1, 1, c.seq, 16), g.input("sin", ep.Float32, 1, 1, c.seq, 16)
			qr, kr := rotaryChain(g, q, cos, sin), rotaryChain(g, k, cos, sin)
			fused := assertFusedSame(t, g, g.op("Concat", concat, qr, kr), c.want, 1e-6)
			if c.seq == 1 {
				assert.Equal(t, []string{"q", "k", "cos", "sin"}, names(fused[0].Inputs))
				assert.Equal(t, []string{qr.Name, kr.Name}, names(fused[0].Outputs))
			}
		})
	}
}

func TestFuseSiluMul(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	a, b := g.input("a", ep.Float32, 2, 96), g.input("b", ep.Float32, 2, 96)
	out := g.op("Mul", nil, g.op("Mul", nil, a, g.op("Sigmoid", nil, a)), b)
	assertFusedSame(t, g, out, []string{"cudaep.SiluMul"}, 1e-6)
}

// TestFuseDropsRepeatedNodes: a node that computes what an earlier one does (the same op and
// attributes over the same values, or constants of equal contents) goes, its readers reading
// the earlier node's output; one with other attributes, other inputs or a kept output stays.
func TestFuseDropsRepeatedNodes(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	pos := g.input("pos", ep.Int64, 1)
	x, y := g.input("x", ep.Float32, 4), g.input("y", ep.Float32, 4)
	w1 := g.op("Where", nil, g.op("Equal", nil, g.ints(0, 1, 2, 3), pos), x, y)
	w2 := g.op("Where", nil, g.op("Equal", nil, g.ints(0, 1, 2, 3), pos), y, x) // a repeat with another constant of the same contents
	w3 := g.op("Where", nil, g.op("Equal", nil, g.ints(3, 2, 1, 0), pos), x, y) // other contents
	axis := map[string]ep.Attribute{"axis": ep.IntAttr(0)}
	out := g.op("Concat", axis, g.op("Concat", axis, w1, w2), w3)
	// The two Wheres over the one Equal left then pair up (cudaep.WherePair).
	fused := assertFusedSame(t, g, out, []string{"Equal", "cudaep.WherePair", "Equal", "Where", "Concat", "Concat"}, 0)
	assert.Equal(t, fused[0].Outputs[0].Name, fused[1].Inputs[0].Name, "the second Where reads the first Equal")

	// Kept: the repeat's output is a graph output.
	g = newGraph(t, p)
	a := g.input("a", ep.Float32, 4)
	n1, n2 := g.op("Neg", nil, a), g.op("Neg", nil, a)
	kept := Fuse(p, g.nodes, []string{n1.Name, n2.Name})
	assert.Equal(t, []string{"Neg", "Neg"}, ops(kept))
	// Other attributes.
	g = newGraph(t, p)
	m := g.input("m", ep.Float32, 2, 3)
	g.op("Softmax", map[string]ep.Attribute{"axis": ep.IntAttr(0)}, m)
	g.op("Softmax", map[string]ep.Attribute{"axis": ep.IntAttr(1)}, m)
	assert.Equal(t, []string{"Softmax", "Softmax"}, ops(Fuse(p, g.nodes, nil)))
}

// TestFuseSkipNorm: a residual Add and the RMSNorm of its sum run as one
// SkipSimplifiedLayerNormalization that also writes the sum for its later reader; when a node
// between the Add and the norm reads the sum, the Add stays.
func TestFuseSkipNorm(t *testing.T) {
	p := newProvider(t)
	for _, dt := range []ep.DType{ep.Float32, ep.BFloat16} {
		g := newGraph(t, p)
		x, r := g.input("x", dt, 1, 1, 64), g.input("r", dt, 1, 1, 64)
		h := g.op("Add", nil, x, r)
		y := rmsNormChain(g, h, g.input("w", dt, 64))
		out := g.op("Add", nil, h, y)
		tol := 1e-6
		if dt == ep.BFloat16 {
			tol = 1.0 / 64 // the sum rounded once, not twice
		}
		fused := assertFusedSame(t, g, out, []string{"com.microsoft.SkipSimplifiedLayerNormalization", "Add"}, tol)
		assert.Equal(t, []string{y.Name, "", "", h.Name}, names(fused[0].Outputs), dt.String())
		assert.Equal(t, []string{"x", "r", "w"}, names(fused[0].Inputs), dt.String())
	}
	g := newGraph(t, p)
	x, r := g.input("x", ep.Float32, 1, 1, 64), g.input("r", ep.Float32, 1, 1, 64)
	h := g.op("Add", nil, x, r)
	between := g.op("Mul", nil, h, h)
	y := rmsNormChain(g, h, g.input("w", ep.Float32, 64))
	assertFusedSame(t, g, g.op("Add", nil, between, y), []string{"Add", "Mul", "SimplifiedLayerNormalization", "Add"}, 1e-6)
}

// TestFuseMatMulGroup: the MatMuls of one row with matrices known before the first of them
// (q, k and v of a decode step) run as one cudaep.MatMulGroup with the same results; a
// MatMul whose matrix is computed after the first, one of two rows, and one whose matrix's
// rows are not whole 16-byte packs stay MatMuls.
func TestFuseMatMulGroup(t *testing.T) {
	p := newProvider(t)
	concat := map[string]ep.Attribute{"axis": ep.IntAttr(-1)}
	t.Run("q, k and v", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, 1, 128)
		wq, wk, wv := g.input("wq", ep.Float32, 128, 64), g.input("wk", ep.Float32, 128, 32), g.input("wv", ep.Float32, 128, 32)
		q, k, v := g.op("MatMul", nil, x, wq), g.op("MatMul", nil, x, wk), g.op("MatMul", nil, x, wv)
		out := g.op("Concat", concat, q, k, v)
		fused := assertFusedSame(t, g, out, []string{"cudaep.MatMulGroup", "Concat"}, 1e-6)
		assert.Equal(t, []string{q.Name, k.Name, v.Name}, names(fused[0].Outputs))
		assert.Equal(t, []string{"x", "wq", "wk", "wv"}, names(fused[0].Inputs))
	})
	t.Run("a matrix computed after the first MatMul", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, 128)
		q := g.op("MatMul", nil, x, g.input("wq", ep.Float32, 128, 64))
		wk := g.op("Transpose", nil, g.input("wkT", ep.Float32, 32, 128))
		k := g.op("MatMul", nil, x, wk)
		v := g.op("MatMul", nil, x, g.input("wv", ep.Float32, 128, 32))
		out := g.op("Concat", concat, q, k, v)
		fused := assertFusedSame(t, g, out, []string{"cudaep.MatMulGroup", "Transpose", "MatMul", "Concat"}, 1e-6)
		assert.Equal(t, []string{q.Name, v.Name}, names(fused[0].Outputs))
	})
	t.Run("two rows, or N not whole packs", func(t *testing.T) {
		for _, c := range []struct{ rows, n int64 }{{2, 64}, {1, 6}} {
			g := newGraph(t, p)
			x := g.input("x", ep.Float32, c.rows, 128)
			q := g.op("MatMul", nil, x, g.input("wq", ep.Float32, 128, c.n))
			k := g.op("MatMul", nil, x, g.input("wk", ep.Float32, 128, c.n))
			assertFusedSame(t, g, g.op("Concat", concat, q, k), []string{"MatMul", "MatMul", "Concat"}, 0)
		}
	})
}

// TestFuseMatMulNBitsGroup: int4 MatMulNBits of one A with the same K, bits and block size
// (q, k and v of an int4 decode step) run as one cudaep.MatMulNBitsGroup with the same
// results, absent inputs kept absent; one with another block size stays apart, and a group
// the kernel refuses (two kinds of zero points, or an attribute it does not take, which the
// rule hands on rather than drops) is not made.
func TestFuseMatMulNBitsGroup(t *testing.T) {
	p := newProvider(t)
	concat := map[string]ep.Attribute{"axis": ep.IntAttr(-1)}
	const k = 64
	nbits := func(g *graphBuilder, x Value, name string, n, bs int64, zp bool) Value {
		attrs := map[string]ep.Attribute{"K": ep.IntAttr(k), "N": ep.IntAttr(n), "bits": ep.IntAttr(4), "block_size": ep.IntAttr(bs)}
		blocks := k / bs
		ins := []Value{x, g.input(name+"_B", ep.Uint8, n, blocks, bs/2), g.input(name+"_scales", ep.Float32, n, blocks)}
		if zp {
			ins = append(ins, g.input(name+"_zp", ep.Uint8, n, (blocks+1)/2))
		}
		return g.op("com.microsoft.MatMulNBits", attrs, ins...)
	}
	t.Run("q, k and v", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, 1, k)
		q, kk, v := nbits(g, x, "q", 32, 32, false), nbits(g, x, "k", 16, 32, false), nbits(g, x, "v", 16, 32, false)
		out := g.op("Concat", concat, q, kk, v)
		fused := assertFusedSame(t, g, out, []string{"cudaep.MatMulNBitsGroup", "Concat"}, 1e-6)
		assert.Equal(t, []string{q.Name, kk.Name, v.Name}, names(fused[0].Outputs))
		assert.Equal(t, []string{"x", "q_B", "q_scales", "", "", "k_B", "k_scales", "", "", "v_B", "v_scales", "", ""}, names(fused[0].Inputs))
		assert.Equal(t, []int64{32, 16, 16}, fused[0].Attrs["N"].Ints())
	})
	t.Run("another block size", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, k)
		q, kk, v := nbits(g, x, "q", 32, 32, true), nbits(g, x, "k", 16, 16, true), nbits(g, x, "v", 16, 32, true)
		fused := assertFusedSame(t, g, g.op("Concat", concat, q, kk, v),
			[]string{"cudaep.MatMulNBitsGroup", "com.microsoft.MatMulNBits", "Concat"}, 1e-6)
		assert.Equal(t, []string{q.Name, v.Name}, names(fused[0].Outputs))
	})
	t.Run("an attribute the group does not take", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, k)
		var outs []Value
		for _, name := range []string{"q", "k"} {
			attrs := map[string]ep.Attribute{"K": ep.IntAttr(k), "N": ep.IntAttr(16), "bits": ep.IntAttr(4), "block_size": ep.IntAttr(32),
				"weight_prepacked": ep.IntAttr(0)}
			outs = append(outs, g.op("com.microsoft.MatMulNBits", attrs, x, g.input(name+"_B", ep.Uint8, 16, 2, 16), g.input(name+"_scales", ep.Float32, 16, 2)))
		}
		assertFusedSame(t, g, g.op("Concat", concat, outs...), []string{"com.microsoft.MatMulNBits", "com.microsoft.MatMulNBits", "Concat"}, 0)
	})
	t.Run("two kinds of zero points", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, k)
		q, kk := nbits(g, x, "q", 32, 32, true), nbits(g, x, "k", 16, 32, false)
		assertFusedSame(t, g, g.op("Concat", concat, q, kk), []string{"com.microsoft.MatMulNBits", "com.microsoft.MatMulNBits", "Concat"}, 0)
	})
}

// TestFuseNormIntoMatMul: a decoder layer's residual Add and RMSNorm before q, k and v, and
// its last RMSNorm before one MatMul (the LM head), run as GEMV launches that normalize the
// row themselves, the skip sum still made for the next residual Add; the gated SiLU before
// the down projection likewise. A normalized row that another node also reads, and a
// normalization of two rows, stay as they are.
func TestFuseNormIntoMatMul(t *testing.T) {
	p := newProvider(t)
	concat := map[string]ep.Attribute{"axis": ep.IntAttr(-1)}
	for _, dt := range []ep.DType{ep.Float32, ep.BFloat16} {
		tol := 1e-5
		if dt == ep.BFloat16 {
			tol = 2e-2 // the normalized row and the sum rounded in another order of float32 sums
		}
		t.Run(dt.String()+"/layer", func(t *testing.T) {
			g := newGraph(t, p)
			x, r := g.input("x", dt, 1, 1, 128), g.input("r", dt, 1, 1, 128)
			h := g.op("Add", nil, x, r)
			n := rmsNormChain(g, h, g.input("w", dt, 128))
			q, k, v := g.op("MatMul", nil, n, g.input("wq", dt, 128, 64)), g.op("MatMul", nil, n, g.input("wk", dt, 128, 32)),
				g.op("MatMul", nil, n, g.input("wv", dt, 128, 32))
			gate, up := g.op("MatMul", nil, h, g.input("wg", dt, 128, 256)), g.op("MatMul", nil, h, g.input("wu", dt, 128, 256))
			silu := g.op("Mul", nil, g.op("Mul", nil, gate, g.op("Sigmoid", nil, gate)), up)
			down := g.op("MatMul", nil, silu, g.input("wd", dt, 256, 128))
			out := g.op("Concat", concat, q, k, v, g.op("Add", nil, h, down))
			fused := assertFusedSame(t, g, out, []string{"cudaep.SkipNormMatMulGroup", "cudaep.MatMulGroup", "cudaep.SiluMulMatMulGroup", "Add", "Concat"}, tol)
			assert.Equal(t, []string{"x", "r", "w", "wq", "wk", "wv"}, names(fused[0].Inputs))
			assert.Equal(t, []string{q.Name, k.Name, v.Name, h.Name}, names(fused[0].Outputs), "the sum is the last output")
			assert.Equal(t, []string{gate.Name, up.Name, "wd"}, names(fused[2].Inputs))
			assert.Equal(t, []string{down.Name}, names(fused[2].Outputs))
		})
		t.Run(dt.String()+"/head", func(t *testing.T) {
			g := newGraph(t, p)
			x := g.input("x", dt, 1, 1, 128)
			logits := g.op("MatMul", nil, rmsNormChain(g, x, g.input("w", dt, 128)), g.input("wh", dt, 128, 512))
			fused := assertFusedSame(t, g, logits, []string{"cudaep.NormMatMulGroup"}, tol)
			assert.Equal(t, []string{"x", "w", "wh"}, names(fused[0].Inputs))
			assert.InDelta(t, 1e-5, fused[0].Attrs["epsilon"].Float(), 1e-12)
		})
	}
	t.Run("the normalized row read by another node", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, 1, 128)
		n := rmsNormChain(g, x, g.input("w", ep.Float32, 128))
		y := g.op("MatMul", nil, n, g.input("wh", ep.Float32, 128, 64))
		assertFusedSame(t, g, g.op("Concat", concat, y, n), []string{"SimplifiedLayerNormalization", "MatMul", "Concat"}, 1e-6)
	})
	t.Run("two rows", func(t *testing.T) {
		g := newGraph(t, p)
		x := g.input("x", ep.Float32, 1, 2, 128)
		y := g.op("MatMul", nil, rmsNormChain(g, x, g.input("w", ep.Float32, 128)), g.input("wh", ep.Float32, 128, 64))
		assertFusedSame(t, g, y, []string{"SimplifiedLayerNormalization", "MatMul"}, 1e-6)
	})
	t.Run("the sum read between the norm and the MatMul", func(t *testing.T) {
		g := newGraph(t, p)
		x, r := g.input("x", ep.Float32, 1, 1, 128), g.input("r", ep.Float32, 1, 1, 128)
		h := g.op("Add", nil, x, r)
		n := rmsNormChain(g, h, g.input("w", ep.Float32, 128))
		between := g.op("Mul", nil, h, h)
		y := g.op("MatMul", nil, n, g.input("wh", ep.Float32, 128, 128))
		assertFusedSame(t, g, g.op("Add", nil, between, y),
			[]string{"com.microsoft.SkipSimplifiedLayerNormalization", "Mul", "MatMul", "Add"}, 1e-6)
	})
}

// names lists vs' names.
func names(vs []Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestFuseDropsAnExpandTheWhereBroadcasts(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	// The cache update torch.onnx writes for a static cache: the new key expanded to the
	// cache's shape, then chosen where the position matches.
	k := g.input("k", ep.Float32, 1, 2, 1, 8)
	past := g.input("past", ep.Float32, 1, 2, 6, 8)
	pos := g.input("pos", ep.Float32, 1, 1, 6, 1)
	hit := g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.5))
	ke := g.op("Expand", nil, k, g.ints(1, 2, 6, 8))
	out := g.op("Where", nil, hit, ke, past)
	assertFusedSame(t, g, out, []string{"Greater", "Where"}, 0)
}

// TestFuseWherePair: a decode step's key and value cache updates (Where over one position mask,
// each new row expanded) become one cudaep.WherePair; Wheres over different masks, or whose
// first output is read between them, stay apart.
func TestFuseWherePair(t *testing.T) {
	p := newProvider(t)
	concat := map[string]ep.Attribute{"axis": ep.IntAttr(-1)}
	cache := func(g *graphBuilder) (k, v, pastK, pastV, pos Value) {
		return g.input("k", ep.Float32, 1, 2, 1, 8), g.input("v", ep.Float32, 1, 2, 1, 8),
			g.input("past_k", ep.Float32, 1, 2, 6, 8), g.input("past_v", ep.Float32, 1, 2, 6, 8), g.input("pos", ep.Float32, 1, 1, 6, 1)
	}
	update := func(g *graphBuilder, hit, x, past Value) Value {
		return g.op("Where", nil, hit, g.op("Expand", nil, x, g.ints(1, 2, 6, 8)), past)
	}
	t.Run("key and value caches", func(t *testing.T) {
		g := newGraph(t, p)
		k, v, pk, pv, pos := cache(g)
		hit := g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.5))
		ok, ov := update(g, hit, k, pk), update(g, hit, v, pv)
		fused := assertFusedSame(t, g, g.op("Concat", concat, ok, ov), []string{"Greater", "cudaep.WherePair", "Concat"}, 0)
		assert.Equal(t, []string{hit.Name, "k", "past_k", "v", "past_v"}, names(fused[1].Inputs))
		assert.Equal(t, []string{ok.Name, ov.Name}, names(fused[1].Outputs))
	})
	t.Run("two masks", func(t *testing.T) {
		g := newGraph(t, p)
		k, v, pk, pv, pos := cache(g)
		ok := update(g, g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.5)), k, pk)
		ov := update(g, g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.25)), v, pv)
		assertFusedSame(t, g, g.op("Concat", concat, ok, ov), []string{"Greater", "Where", "Greater", "Where", "Concat"}, 0)
	})
	t.Run("the first read between by a chain fused after the second", func(t *testing.T) {
		// The gated SiLU of the value cache starts between the updates and ends after them: the
		// first pass fuses it at its end, the second pairs the updates.
		g := newGraph(t, p)
		k, v, pk, pv, pos := cache(g)
		hit := g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.5))
		ov := update(g, hit, v, pv)
		gate := g.op("Mul", nil, ov, g.op("Sigmoid", nil, ov))
		ok := update(g, hit, k, pk)
		silu := g.op("Mul", nil, gate, ok)
		assertFusedSame(t, g, silu, []string{"Greater", "cudaep.WherePair", "cudaep.SiluMul"}, 1e-6)
	})
	t.Run("the first read between", func(t *testing.T) {
		g := newGraph(t, p)
		k, v, pk, pv, pos := cache(g)
		hit := g.op("Greater", nil, pos, g.floats(ep.Float32, nil, 0.5))
		neg := g.op("Neg", nil, update(g, hit, k, pk))
		ov := update(g, hit, v, pv)
		assertFusedSame(t, g, g.op("Concat", concat, neg, ov), []string{"Greater", "Where", "Neg", "Where", "Concat"}, 0)
	})
}

// attentionChain writes Hugging Face's eager attention with repeat_kv as torch.onnx exports it.
func attentionChain(g *graphBuilder, q, k, v, mask Value, scale float64) Value {
	rep := func(x Value, groups int64) Value {
		s := x.Info.Shape
		u := g.op("Unsqueeze", nil, x, g.ints(2))
		e := g.op("Expand", nil, u, g.ints(s[0], s[1], groups, s[2], s[3]))
		return g.op("Reshape", nil, e, g.ints(s[0], s[1]*groups, s[2], s[3]))
	}
	groups := q.Info.Shape[1] / k.Info.Shape[1]
	kt := g.op("Transpose", map[string]ep.Attribute{"perm": ep.IntsAttr(0, 1, 3, 2)}, rep(k, groups))
	s := g.op("Mul", nil, g.op("MatMul", nil, q, kt), g.floats(q.Info.DType, nil, scale))
	pr := g.op("Softmax", map[string]ep.Attribute{"axis": ep.IntAttr(-1)}, g.op("Add", nil, s, mask))
	return g.op("MatMul", nil, pr, rep(v, groups))
}

func TestFuseAttention(t *testing.T) {
	for _, s := range []int64{1, 5} {
		t.Run(fmt.Sprintf("S=%d", s), func(t *testing.T) {
			p := newProvider(t)
			g := newGraph(t, p)
			q := g.input("q", ep.Float32, 1, 8, s, 16)
			k, v := g.input("k", ep.Float32, 1, 2, 7, 16), g.input("v", ep.Float32, 1, 2, 7, 16)
			mask := g.input("mask", ep.Float32, 1, 1, s, 7)
			out := attentionChain(g, q, k, v, mask, 0.25)
			fused := assertFusedSame(t, g, out, []string{"Attention"}, 1e-5)
			assert.InDelta(t, 0.25, fused[0].Attrs["scale"].Float(), 1e-7)
		})
	}
	// A prompt: fused where the provider's Attention is the flash kernel (bfloat16, head size
	// 64), else (float32, or a head size the flash kernel lacks) left to the chain's kernels.
	for _, c := range []struct {
		name  string
		dt    ep.DType
		d     int64
		fused bool
	}{
		{"a bfloat16 prompt of head size 64 fuses into the flash kernel", ep.BFloat16, 64, true},
		{"a float32 prompt stays unfused", ep.Float32, 64, false},
		{"a bfloat16 prompt of head size 16 stays unfused", ep.BFloat16, 16, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t)
			g := newGraph(t, p)
			q := g.input("q", c.dt, 1, 4, 70, c.d)
			k, v := g.input("k", c.dt, 1, 2, 80, c.d), g.input("v", c.dt, 1, 2, 80, c.d)
			out := attentionChain(g, q, k, v, g.input("mask", c.dt, 1, 1, 70, 80), 0.125)
			if !c.fused {
				assert.Equal(t, ops(g.nodes), ops(Fuse(p, g.nodes, []string{out.Name})))
				return
			}
			// The unfused chain rounds the scores to bfloat16 at each of its four steps (the
			// kernels' tests hold the fused kernel to a float64 reference): 5 % of the largest
			// output between the two.
			fused := assertFusedSame(t, g, out, []string{"Attention"}, 5e-2)
			k2, err := p.GetKernel(nodeSpec(fused[0]))
			require.NoError(t, err)
			assert.Equal(t, "flash", k2.Variant())
		})
	}
}

func TestFuseKeepsAnExpandTheOpNeeds(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	// Expanded to [2, 3, 8], the sum is [2, 3, 8]; without the Expand it would be [1, 3, 8].
	a := g.input("a", ep.Float32, 1, 1, 8)
	b := g.input("b", ep.Float32, 1, 3, 8)
	out := g.op("Add", nil, g.op("Expand", nil, a, g.ints(2, 3, 8)), b)
	assert.Equal(t, []string{"Expand", "Add"}, ops(Fuse(p, g.nodes, []string{out.Name})))
}

func TestKernelViewIsTheInputsBytesUnderAnotherShape(t *testing.T) {
	p := newProvider(t)
	perm := func(v ...int64) map[string]ep.Attribute { return map[string]ep.Attribute{"perm": ep.IntsAttr(v...)} }
	for _, tc := range []struct {
		name string
		spec ep.Spec
		view bool
	}{
		{"Reshape", ep.Spec{Op: "Reshape", Opset: 18, Inputs: []ep.TensorInfo{f32(2, 6), {DType: ep.Int64, Shape: []int64{2}}},
			Consts: map[int]ep.Const{1: ep.IntsConst(3, 4)}}, true},
		{"Unsqueeze", ep.Spec{Op: "Unsqueeze", Opset: 18, Inputs: []ep.TensorInfo{f32(2, 6), {DType: ep.Int64, Shape: []int64{1}}},
			Consts: map[int]ep.Const{1: ep.IntsConst(0)}}, true},
		{"Transpose of a length-1 axis", ep.Spec{Op: "Transpose", Opset: 18, Inputs: []ep.TensorInfo{f32(1, 1, 4, 8)},
			Attrs: perm(0, 2, 1, 3)}, true},
		{"Transpose that moves data", ep.Spec{Op: "Transpose", Opset: 18, Inputs: []ep.TensorInfo{f32(1, 2, 4, 8)},
			Attrs: perm(0, 2, 1, 3)}, false},
		{"Expand to the same shape", ep.Spec{Op: "Expand", Opset: 18, Inputs: []ep.TensorInfo{f32(2, 3), {DType: ep.Int64, Shape: []int64{2}}},
			Consts: map[int]ep.Const{1: ep.IntsConst(2, 3)}}, true},
		{"Expand that repeats", ep.Spec{Op: "Expand", Opset: 18, Inputs: []ep.TensorInfo{f32(1, 3), {DType: ep.Int64, Shape: []int64{2}}},
			Consts: map[int]ep.Const{1: ep.IntsConst(2, 3)}}, false},
		{"Cast to its own type", ep.Spec{Op: "Cast", Opset: 18, Inputs: []ep.TensorInfo{f32(5)},
			Attrs: map[string]ep.Attribute{"to": ep.IntAttr(int64(ep.Float32))}}, true},
		{"Relu", ep.Spec{Op: "Relu", Opset: 14, Inputs: []ep.TensorInfo{f32(5)}}, false},
	} {
		k, err := p.GetKernel(tc.spec)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.view, k.View(), tc.name)
	}
}

func TestKernelInPlaceNamesTheInputsOfTheOutputsShape(t *testing.T) {
	p := newProvider(t)
	b := ep.TensorInfo{DType: ep.Bool, Shape: []int64{1, 1, 16, 1}}
	for _, tc := range []struct {
		name    string
		spec    ep.Spec
		inPlace []bool // per input
	}{
		{"Where into a cache", ep.Spec{Op: "Where", Opset: 16, Inputs: []ep.TensorInfo{b, f32(1, 2, 1, 8), f32(1, 2, 16, 8)}},
			[]bool{false, false, true}},
		{"Where of two full operands", ep.Spec{Op: "Where", Opset: 16, Inputs: []ep.TensorInfo{b, f32(1, 2, 16, 8), f32(1, 2, 16, 8)}},
			[]bool{false, true, true}},
		{"Add with a row", ep.Spec{Op: "Add", Opset: 14, Inputs: []ep.TensorInfo{f32(4, 8), f32(8)}}, []bool{true, false}},
		{"Equal: bool out", ep.Spec{Op: "Equal", Opset: 13, Inputs: []ep.TensorInfo{f32(4), f32(4)}}, []bool{false, false}},
		{"Relu", ep.Spec{Op: "Relu", Opset: 14, Inputs: []ep.TensorInfo{f32(5)}}, []bool{true}},
		{"Softmax", ep.Spec{Op: "Softmax", Opset: 13, Inputs: []ep.TensorInfo{f32(2, 5)}}, []bool{false}},
		{"MatMul", ep.Spec{Op: "MatMul", Opset: 13, Inputs: []ep.TensorInfo{f32(4, 4), f32(4, 4)}}, []bool{false, false}},
	} {
		k, err := p.GetKernel(tc.spec)
		require.NoError(t, err, tc.name)
		for i, want := range tc.inPlace {
			assert.Equal(t, want, k.InPlace(0, i), "%s input %d", tc.name, i)
			assert.False(t, k.InPlace(1, i), "%s: an output it does not have, input %d", tc.name, i)
		}
		assert.False(t, k.InPlace(0, len(tc.inPlace)), "%s: an input it does not have", tc.name)
	}
	// cudaep.WherePair: each output on its own Y (or X, when full-shaped), never the other's.
	k, err := p.GetKernel(ep.Spec{Op: "cudaep.WherePair", Opset: 1, NumOutputs: 2,
		Inputs: []ep.TensorInfo{b, f32(1, 2, 1, 8), f32(1, 2, 16, 8), f32(1, 2, 1, 8), f32(1, 2, 16, 8)}})
	require.NoError(t, err)
	for out, want := range [][]bool{{false, false, true, false, false}, {false, false, false, false, true}} {
		for i, w := range want {
			assert.Equal(t, w, k.InPlace(out, i), "WherePair output %d input %d", out, i)
		}
	}
}

func TestFuseDropsEveryExpandOfOneNode(t *testing.T) {
	p := newProvider(t)
	g := newGraph(t, p)
	a := g.input("a", ep.Float32, 1, 4)
	b := g.input("b", ep.Float32, 3, 1)
	c := g.input("c", ep.Float32, 3, 4)
	hit := g.op("Greater", nil, c, g.floats(ep.Float32, nil, 0))
	out := g.op("Where", nil, hit, g.op("Expand", nil, a, g.ints(3, 4)), g.op("Expand", nil, b, g.ints(3, 4)))
	assertFusedSame(t, g, out, []string{"Greater", "Where"}, 0)
}
