package kernels_test

import (
	"maps"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

// FuzzGet feeds Library.Get the specs a corrupt or hostile model could give it (fuzzSpec): any
// supported op at any opset, zero to five inputs of any dtype (unknown ones too) and of any
// rank, with empty, unknown (-1) and huge dimensions, constants of the right or the wrong
// length, attributes the ops read with values of any kind, and any output count. Get must
// return a kernel or an error with a message, never panic (not even one it recovers), and a kernel's inputs and outputs
// must have known dtypes (an absent optional input, the zero TensorInfo, aside) and shapes of at most 2^40 elements (maxElements: sizes never near
// int64 overflow); a small kernel must then run (fuzzRun).
func FuzzGet(f *testing.F) {
	ops := kernels.SupportedOps()
	// Seeds: specs Get builds (their neighbours are what a corrupt model looks like), two it
	// refuses, and every one of them again with each int64 extreme (fuzzExtremes) in place of
	// each value of each constant input and integer attribute it has (fuzzExtremeSeeds).
	for _, spec := range fuzzExtremeSeeds(fuzzBaseSpecs()) {
		f.Add(fuzzProg(spec, ops))
	}
	fx := newFixture(f)
	fx.allowFaults() // zeros in non-constant inputs are bad data for some kernels (a divisor, a length)
	f.Fuzz(func(t *testing.T, prog []byte) {
		spec := fuzzSpec(prog, ops)
		k, err := fx.lib.Get(spec)
		if err != nil {
			require.NotEmpty(t, err.Error())
			require.NotErrorIs(t, err, kernels.ErrPanicked, "Get recovered from a panic")
			return
		}
		require.NotNil(t, k)
		for i, ti := range append(append([]kernels.TensorInfo{}, spec.Inputs...), k.Outputs()...) {
			if i < len(spec.Inputs) && ti.DType == 0 && len(ti.Shape) == 0 {
				continue // an absent optional input (MatMulNBits' zero_points before a bias)
			}
			require.True(t, ti.DType.Valid(), "%s: %s has an unknown dtype", k.Name(), ti)
			n := 1.0
			for _, d := range ti.Shape {
				require.GreaterOrEqual(t, d, int64(0), "%s: %s", k.Name(), ti)
				n *= float64(d)
			}
			require.LessOrEqual(t, n, float64(1<<40), "%s: %s has more than 2^40 elements", k.Name(), ti)
		}
		fuzzRun(t, fx, spec, k)
	})
}

// fuzzBaseSpecs are FuzzGet's base seeds: a spec of each op with constant inputs or integer
// attributes, and a few more.
func fuzzBaseSpecs() []kernels.Spec {
	f32, i64, u8 := kernels.Float32, kernels.Int64, kernels.Uint8
	attrs := func(kv ...any) map[string]kernels.Attribute {
		m := map[string]kernels.Attribute{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(kernels.Attribute)
		}
		return m
	}
	return []kernels.Spec{
		{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(f32, 3)}},
		{Op: "Cast", Opset: 19, Inputs: []kernels.TensorInfo{info(f32, 2, 3)}, Attrs: attrs("to", kernels.IntAttr(10))},
		{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(f32, 3, 4)}},
		{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 3, 2), info(f32, 4, 3)}, Attrs: attrs("transA", kernels.IntAttr(1), "transB", kernels.IntAttr(1))},
		{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, 2, 3), info(f32, 2, 3), info(f32, 1, 3)}},
		{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(3, -1)}},
		{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 4), info(i64, 3)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1, 4, -1)}, Attrs: attrs("allowzero", kernels.IntAttr(0))},
		{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 6), info(i64, 1), info(i64, 1), info(i64, 1), info(i64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1), 2: kernels.IntsConst(3), 3: kernels.IntsConst(1), 4: kernels.IntsConst(1)}},
		{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 6), info(i64, 2), info(i64, 2), info(i64, 2), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(-1, 0), 2: kernels.IntsConst(-5, 6), 3: kernels.IntsConst(0, 1), 4: kernels.IntsConst(-1, 2)}},
		{Op: "Slice", Opset: 9, Inputs: []kernels.TensorInfo{info(f32, 4, 6)},
			Attrs: attrs("starts", kernels.IntsAttr(1, 0), "ends", kernels.IntsAttr(3, 5), "axes", kernels.IntsAttr(0, 1))},
		{Op: "Expand", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 1, 3), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(2, 3)}},
		{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(i64), info(i64), info(i64)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(1), 1: kernels.IntsConst(9), 2: kernels.IntsConst(2)}},
		{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int32), info(kernels.Int32), info(kernels.Int32)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(5), 1: kernels.IntsConst(-3), 2: kernels.IntsConst(-2)}},
		{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 2), info(i64, 2)}, Attrs: attrs("axis", kernels.IntAttr(0)),
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1, 3)}},
		{Op: "Split", Opset: 11, Inputs: []kernels.TensorInfo{info(f32, 4, 2)}, Attrs: attrs("split", kernels.IntsAttr(2, 2), "axis", kernels.IntAttr(-2))},
		{Op: "Split", Opset: 18, Inputs: []kernels.TensorInfo{info(f32, 4, 2)}, Attrs: attrs("num_outputs", kernels.IntAttr(2))},
		{Op: "Split", Opset: 18, Inputs: []kernels.TensorInfo{info(f32, 4, 2)}, Attrs: attrs("num_outputs", kernels.IntAttr(math.MaxInt64-48))},
		{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(f32, 2, 1)}, Attrs: attrs("axis", kernels.IntAttr(1))},
		{Op: "Trilu", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 3, 4), info(i64)}, Attrs: attrs("upper", kernels.IntAttr(0)),
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1)}},
		{Op: "Squeeze", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 1, 3), info(i64, 1)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(0)}},
		{Op: "Squeeze", Opset: 11, Inputs: []kernels.TensorInfo{info(f32, 1, 3, 1)}, Attrs: attrs("axes", kernels.IntsAttr(0, 2))},
		{Op: "Unsqueeze", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(i64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(-1)}},
		{Op: "Unsqueeze", Opset: 11, Inputs: []kernels.TensorInfo{info(f32, 2, 3)}, Attrs: attrs("axes", kernels.IntsAttr(0, 3))},
		{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 3), info(i64, 2)}, Attrs: attrs("axis", kernels.IntAttr(0))},
		{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(i64, 2)}, Consts: map[int]kernels.Const{0: kernels.IntsConst(2, 3)}},
		{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3, 4)}, Attrs: attrs("perm", kernels.IntsAttr(2, 0, 1))},
		{Op: "Shape", Opset: 15, Inputs: []kernels.TensorInfo{info(f32, 2, 3, 4)}, Attrs: attrs("start", kernels.IntAttr(1), "end", kernels.IntAttr(-1))},
		{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 4)}, Attrs: attrs("axis", kernels.IntAttr(-1))},
		{Op: "ReduceSum", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3, 4), info(i64, 2)}, Attrs: attrs("keepdims", kernels.IntAttr(0)),
			Consts: map[int]kernels.Const{1: kernels.IntsConst(0, -1)}},
		{Op: "ReduceMean", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3, 4)}, Attrs: attrs("axes", kernels.IntsAttr(1), "keepdims", kernels.IntAttr(1))},
		{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{info(f32, 2, 4), info(f32, 4)}, Attrs: attrs("axis", kernels.IntAttr(-1), "stash_type", kernels.IntAttr(1))},
		{Op: "SimplifiedLayerNormalization", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 2, 4), info(f32, 4)}, Attrs: attrs("axis", kernels.IntAttr(1))},
		{Op: "Attention", Opset: 23, Inputs: []kernels.TensorInfo{info(f32, 1, 2, 1, 4), info(f32, 1, 2, 3, 4), info(f32, 1, 2, 3, 4)},
			Attrs: attrs("q_num_heads", kernels.IntAttr(2), "kv_num_heads", kernels.IntAttr(2), "is_causal", kernels.IntAttr(0))},
		{Op: "com.microsoft.RotaryEmbedding", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 1, 2, 4), info(i64, 1), info(f32, 4, 2), info(f32, 4, 2)},
			Attrs: attrs("num_heads", kernels.IntAttr(1), "rotary_embedding_dim", kernels.IntAttr(4), "interleaved", kernels.IntAttr(1))},
		{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{info(i64, 1<<40, 1, 1)}},
		// MatMulNBits (4 bits, the default: a seed has at most 3 attributes): K a block, K padded
		// in one block with packed zero points, unpacked zero points through the prefill, and an
		// absent zero_points before a g_idx (refused).
		{Op: "com.microsoft.MatMulNBits", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 2, 16), info(u8, 4, 1, 8), info(f32, 4, 1)},
			Attrs: attrs("K", kernels.IntAttr(16), "N", kernels.IntAttr(4), "block_size", kernels.IntAttr(16))},
		{Op: "com.microsoft.MatMulNBits", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 1, 6), info(u8, 3, 1, 8), info(f32, 3), info(u8, 3, 1)},
			Attrs: attrs("K", kernels.IntAttr(6), "N", kernels.IntAttr(3), "block_size", kernels.IntAttr(16))},
		{Op: "com.microsoft.MatMulNBits", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 16, 6), info(u8, 2, 1, 8), info(f32, 2, 1), info(f32, 2, 1)},
			Attrs: attrs("K", kernels.IntAttr(6), "N", kernels.IntAttr(2), "block_size", kernels.IntAttr(16))},
		{Op: "com.microsoft.MatMulNBits", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 1, 16), info(u8, 4, 1, 8), info(f32, 4, 1), {}, info(kernels.Int32, 16)},
			Attrs: attrs("K", kernels.IntAttr(16), "N", kernels.IntAttr(4), "block_size", kernels.IntAttr(16))},
		{Op: "cudaep.MatMulNBitsGroup", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 1, 16), info(u8, 4, 1, 8), info(f32, 4, 1), {}, {}},
			Attrs: attrs("K", kernels.IntAttr(16), "N", kernels.IntsAttr(4), "block_size", kernels.IntAttr(16))},
	}
}

// fuzzRunBytes bounds the tensors fuzzRun runs a kernel on.
const fuzzRunBytes = 1 << 16

// fuzzRun runs a kernel Get built whose tensors are small (fuzzRunBytes in all): constant
// inputs hold their values, the others zeros. Get refuses what Execute cannot run, so Execute
// must queue the work and the stream must finish it without an error.
func fuzzRun(t *testing.T, fx *fixture, spec kernels.Spec, k kernels.Kernel) {
	outs := k.Outputs()
	total := int64(0)
	for _, ti := range append(append([]kernels.TensorInfo{}, spec.Inputs...), outs...) {
		total += ti.Bytes()
	}
	if total > fuzzRunBytes {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, fx.env.Context.Bind())
	var bufs []*cudadrv.DeviceBuffer
	defer func() {
		for _, b := range bufs {
			require.NoError(t, b.Free())
		}
	}()
	tensor := func(ti kernels.TensorInfo, data []byte) kernels.Tensor {
		b, err := fx.env.Context.Alloc(uint64(max(ti.Bytes(), 1)))
		require.NoError(t, err)
		bufs = append(bufs, b)
		if len(data) > 0 {
			require.NoError(t, fx.env.Context.CopyHtoD(b.Ptr(), data))
		}
		return kernels.Tensor{TensorInfo: ti, Ptr: b.Ptr()}
	}
	var ins, os []kernels.Tensor
	for i, ti := range spec.Inputs {
		if ti.DType == 0 && len(ti.Shape) == 0 {
			ins = append(ins, kernels.Tensor{TensorInfo: ti}) // absent: the zero Tensor
			continue
		}
		vals := make([]float64, ti.NumElements())
		if c, ok := spec.Consts[i]; ok {
			for j := range vals {
				if c.Ints != nil {
					vals[j] = float64(c.Ints[j])
				} else {
					vals[j] = c.Floats[j]
				}
			}
		}
		ins = append(ins, tensor(ti, encode(ti.DType, vals)))
	}
	for _, ti := range outs {
		os = append(os, tensor(ti, nil))
	}
	require.NoError(t, k.Execute(ins, os), "%s", k.Name())
	require.NoError(t, fx.stream.Synchronize(), "%s", k.Name())
}

// fuzzAttrs are attribute names the ops read.
var fuzzAttrs = []string{"axis", "axes", "perm", "to", "keepdims", "epsilon", "scale", "num_heads",
	"kv_num_heads", "q_num_heads", "is_causal", "causal", "do_rotary", "interleaved", "rotary_interleaved",
	"rotary_embedding_dim", "softcap", "local_window_size", "split", "num_outputs", "starts", "ends",
	"value", "alpha", "beta", "approximate", "allowzero", "noop_with_empty_axes", "upper", "stash_type",
	"qk_matmul_output_mode", "softmax_precision", "smooth_softmax", "mask_filter_value", "start", "end",
	"transA", "transB", "K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked"}

// fuzzSpecial maps the signed bytes from 117 to 127 and from -128 to -122 to the integers
// overflow hides in, which fuzzInt reads them as: the int64 extremes and their neighbours,
// 2^62 (two of it overflow), the 32-bit limits and 2^40 (the package's element bound).
var fuzzSpecial = map[int8]int64{
	127: math.MaxInt64, -128: math.MinInt64, -127: math.MinInt64 + 1, 126: math.MaxInt64 - 1,
	125: 1 << 62, -126: -(1 << 62), 124: 1 << 31, -125: math.MinInt32, 123: math.MaxInt32,
	122: 1 << 32, -124: -(1 << 32), 121: 1 << 40, -123: -(1 << 40), 120: 1<<40 + 1,
	119: 1 << 63 / 3, -122: math.MinInt64 / 3, 118: 1 << 48, 117: 1 << 53,
}

// fuzzExtremes are the values fuzzExtremeSeeds puts in every constant and integer attribute:
// fuzzSpecial's, -1 and 0.
var fuzzExtremes = func() []int64 {
	v := []int64{-1, 0}
	for _, x := range fuzzSpecial {
		v = append(v, x)
	}
	slices.Sort(v)
	return v
}()

// fuzzInt is the integer a byte stands for: a signed byte, or for fuzzSpecial's bytes the
// value there.
func fuzzInt(b int) int64 {
	v := int8(b)
	if x, ok := fuzzSpecial[v]; ok {
		return x
	}
	return int64(v)
}

// fuzzByte is the byte fuzzInt reads as v (v is a signed byte that fuzzSpecial leaves alone,
// or one of fuzzSpecial's values).
func fuzzByte(v int64) int {
	for b, x := range fuzzSpecial {
		if x == v {
			return int(byte(b))
		}
	}
	return int(byte(int8(v)))
}

// fuzzExtremeSeeds returns the specs and, for each, the specs made by putting each of
// fuzzExtremes in place of each value of each integer constant (Const.Ints) and of each
// integer attribute (AttrInt and AttrInts) in turn.
func fuzzExtremeSeeds(specs []kernels.Spec) []kernels.Spec {
	clone := func(s kernels.Spec) kernels.Spec {
		c := s
		c.Consts = map[int]kernels.Const{}
		for i, v := range s.Consts {
			c.Consts[i] = kernels.Const{Ints: slices.Clone(v.Ints), Floats: slices.Clone(v.Floats)}
		}
		c.Attrs = maps.Clone(s.Attrs)
		return c
	}
	var out []kernels.Spec
	for _, s := range specs {
		out = append(out, s)
		for _, e := range fuzzExtremes {
			for i, c := range s.Consts {
				for j := range c.Ints {
					v := clone(s)
					v.Consts[i].Ints[j] = e
					out = append(out, v)
				}
			}
			for name, a := range s.Attrs {
				switch a.Kind() {
				case kernels.AttrInt:
					v := clone(s)
					v.Attrs[name] = kernels.IntAttr(e)
					out = append(out, v)
				case kernels.AttrInts:
					for j := range a.Ints() {
						ints := a.Ints()
						ints[j] = e
						v := clone(s)
						v.Attrs[name] = kernels.IntsAttr(ints...)
						out = append(out, v)
					}
				}
			}
		}
	}
	return out
}

// fuzzStrings are the values a string attribute may take.
var fuzzStrings = []string{"", "tanh", "none", "linear", "\x00"}

// fuzzDTypes are the dtypes an input may take: every known one, none and an unknown number.
var fuzzDTypes = []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Float64,
	kernels.Int64, kernels.Int32, kernels.Bool, 0, 99, kernels.Uint8}

// fuzzSpec reads a Spec from prog, a byte at a time (a missing byte reads as 0): op, opset,
// input count, then per input its dtype, rank, dimensions (249: 8, 250: 16, 251: 2^62, 252:
// MaxInt64, 253: 0, 254: 2^40, 255: -1, else 1 to 6) and whether it is constant (then its values, a byte each (fuzzInt), with one too
// many when the next byte says so); then the attributes (name, kind, value) and the output
// count.
func fuzzSpec(prog []byte, ops []string) kernels.Spec {
	next := drivertest.NewFuzzBytes(prog).Next
	spec := kernels.Spec{Op: ops[next()%len(ops)], Opset: 1 + next()%25, Attrs: map[string]kernels.Attribute{},
		Consts: map[int]kernels.Const{}}
	for i := range next() % 6 {
		ti := kernels.TensorInfo{DType: fuzzDTypes[next()%len(fuzzDTypes)], Shape: []int64{}}
		for range next() % 5 {
			switch d := next(); d {
			case 249:
				ti.Shape = append(ti.Shape, 8)
			case 250:
				ti.Shape = append(ti.Shape, 16)
			case 251:
				ti.Shape = append(ti.Shape, 1<<62)
			case 252:
				ti.Shape = append(ti.Shape, math.MaxInt64)
			case 253:
				ti.Shape = append(ti.Shape, 0)
			case 254:
				ti.Shape = append(ti.Shape, 1<<40)
			case 255:
				ti.Shape = append(ti.Shape, -1)
			default:
				ti.Shape = append(ti.Shape, int64(1+d%6))
			}
		}
		spec.Inputs = append(spec.Inputs, ti)
		if next()%3 != 0 {
			continue
		}
		n := ti.NumElements()
		if n < 0 || n > 64 {
			continue
		}
		if next()%5 == 0 {
			n++
		}
		var c kernels.Const
		for range n {
			v := fuzzInt(next())
			if ti.DType == kernels.Int64 || ti.DType == kernels.Int32 || ti.DType == kernels.Bool || ti.DType == kernels.Uint8 {
				c.Ints = append(c.Ints, v)
			} else {
				c.Floats = append(c.Floats, float64(v)/4)
			}
		}
		spec.Consts[i] = c
	}
	for range next() % 4 {
		name := fuzzAttrs[next()%len(fuzzAttrs)]
		switch next() % 5 {
		case 0:
			spec.Attrs[name] = kernels.IntAttr(fuzzInt(next()))
		case 1:
			spec.Attrs[name] = kernels.IntAttr(math.MaxInt64 - int64(next()))
		case 2:
			var v []int64
			for range next() % 5 {
				v = append(v, fuzzInt(next()))
			}
			spec.Attrs[name] = kernels.IntsAttr(v...)
		case 3:
			spec.Attrs[name] = kernels.FloatAttr(float32(int8(next())) / 4)
		default:
			spec.Attrs[name] = kernels.StringAttr(fuzzStrings[next()%len(fuzzStrings)])
		}
	}
	spec.NumOutputs = next() % 4
	return spec
}

// fuzzProg writes the program fuzzSpec reads back as spec, for the seeds. The spec must be one
// fuzzSpec can write: an op of ops, opset 1 to 25, up to 5 inputs of fuzzDTypes with ranks up
// to 4 and dimensions 0, 1 to 6, 8, 16, 2^40, 2^62 or MaxInt64, constants of at most 64
// values (integers fuzzInt makes, floats in quarters of [-32, 31]), up to 3 attributes of
// fuzzAttrs (integers fuzzInt makes, up to 4 of them, floats in quarters, or fuzzStrings), and
// up to 3 outputs.
func fuzzProg(spec kernels.Spec, ops []string) []byte {
	var p []byte
	put := func(v int) { p = append(p, byte(v)) }
	put(slices.Index(ops, spec.Op))
	put(spec.Opset - 1)
	put(len(spec.Inputs))
	for i, ti := range spec.Inputs {
		put(slices.Index(fuzzDTypes, ti.DType))
		put(len(ti.Shape))
		for _, d := range ti.Shape {
			switch d {
			case 8:
				put(249)
			case 16:
				put(250)
			case 1 << 62:
				put(251)
			case math.MaxInt64:
				put(252)
			case 0:
				put(253)
			case 1 << 40:
				put(254)
			default:
				put(int(d - 1))
			}
		}
		c, ok := spec.Consts[i]
		if !ok {
			put(1) // not constant
			continue
		}
		put(0) // constant
		put(1) // of the right length
		for _, v := range c.Ints {
			put(fuzzByte(v))
		}
		for _, v := range c.Floats {
			put(int(v * 4))
		}
	}
	put(len(spec.Attrs))
	names := slices.Sorted(maps.Keys(spec.Attrs))
	for _, name := range names {
		a := spec.Attrs[name]
		put(slices.Index(fuzzAttrs, name))
		switch a.Kind() {
		case kernels.AttrInt:
			if v := a.Int(); v > math.MaxInt64-256 {
				put(1)
				put(int(math.MaxInt64 - v))
			} else {
				put(0)
				put(fuzzByte(v))
			}
		case kernels.AttrInts:
			put(2)
			put(len(a.Ints()))
			for _, v := range a.Ints() {
				put(fuzzByte(v))
			}
		case kernels.AttrFloat:
			put(3)
			put(int(a.Float() * 4))
		default:
			put(4)
			put(slices.Index(fuzzStrings, a.Str()))
		}
	}
	put(spec.NumOutputs)
	return p
}

// TestFuzzSeedsReadBackAsWritten checks that FuzzGet's seeds are the specs they were written
// from: fuzzSpec reads each fuzzProg program back as its spec, so the int64 extremes reach Get
// in every constant and integer attribute the seeds name.
func TestFuzzSeedsReadBackAsWritten(t *testing.T) {
	ops := kernels.SupportedOps()
	seeds := fuzzExtremeSeeds(fuzzBaseSpecs())
	require.Greater(t, len(seeds), 20*len(fuzzExtremes))
	for _, want := range seeds {
		got := fuzzSpec(fuzzProg(want, ops), ops)
		require.Equal(t, want.Op, got.Op)
		require.Equal(t, want.Opset, got.Opset, "%s", want.Op)
		require.Equal(t, want.Inputs, fixShapes(got.Inputs), "%s", want.Op)
		for i, c := range want.Consts {
			require.Equal(t, c.Ints, got.Consts[i].Ints, "%s: constant %d", want.Op, i)
		}
		require.Len(t, got.Consts, len(want.Consts), "%s", want.Op)
		for name, a := range want.Attrs {
			require.Equal(t, a.String(), got.Attrs[name].String(), "%s: attribute %s", want.Op, name)
		}
		require.Len(t, got.Attrs, len(want.Attrs), "%s", want.Op)
	}
}

// fixShapes returns infos with empty shapes as nil, as info writes a scalar's.
func fixShapes(infos []kernels.TensorInfo) []kernels.TensorInfo {
	for i := range infos {
		if len(infos[i].Shape) == 0 {
			infos[i].Shape = nil
		}
	}
	return infos
}
