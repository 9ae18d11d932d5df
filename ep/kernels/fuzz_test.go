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
// return a kernel or an error with a message, never panic, and a kernel's inputs and outputs
// must have known dtypes and shapes of at most 2^40 elements (maxElements: sizes never near
// int64 overflow); a small kernel must then run (fuzzRun).
func FuzzGet(f *testing.F) {
	ops := kernels.SupportedOps()
	f32, i64 := kernels.Float32, kernels.Int64
	attrs := func(kv ...any) map[string]kernels.Attribute {
		m := map[string]kernels.Attribute{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(kernels.Attribute)
		}
		return m
	}
	// Seeds: specs Get builds (their neighbours are what a corrupt model looks like), and two
	// it refuses.
	for _, spec := range []kernels.Spec{
		{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(f32, 3)}},
		{Op: "Cast", Opset: 19, Inputs: []kernels.TensorInfo{info(f32, 2, 3)}, Attrs: attrs("to", kernels.IntAttr(10))},
		{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(f32, 3, 4)}},
		{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, 2, 3), info(f32, 2, 3), info(f32, 1, 3)}},
		{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(3, -1)}},
		{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 6), info(i64, 1), info(i64, 1), info(i64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1), 2: kernels.IntsConst(3), 3: kernels.IntsConst(1)}},
		{Op: "Expand", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 1, 3), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(2, 3)}},
		{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{info(f32, 2, 4), info(f32, 4)}},
		{Op: "SimplifiedLayerNormalization", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 2, 4), info(f32, 4)}},
		{Op: "Attention", Opset: 23, Inputs: []kernels.TensorInfo{info(f32, 1, 2, 1, 4), info(f32, 1, 2, 3, 4), info(f32, 1, 2, 3, 4)}},
		{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 3), info(i64, 2)}, Attrs: attrs("axis", kernels.IntAttr(0))},
		{Op: "Unsqueeze", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2, 3), info(i64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(-1)}},
		{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(i64, 2)}, Consts: map[int]kernels.Const{0: kernels.IntsConst(2, 3)}},
		{Op: "Split", Opset: 18, Inputs: []kernels.TensorInfo{info(f32, 4, 2)}, Attrs: attrs("num_outputs", kernels.IntAttr(2))},
		{Op: "Split", Opset: 18, Inputs: []kernels.TensorInfo{info(f32, 4, 2)}, Attrs: attrs("num_outputs", kernels.IntAttr(math.MaxInt64-48))},
		{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{info(i64, 1<<40, 1, 1)}},
	} {
		f.Add(fuzzProg(spec, ops))
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, prog []byte) {
		spec := fuzzSpec(prog, ops)
		k, err := fx.lib.Get(spec)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, k)
		for _, ti := range append(append([]kernels.TensorInfo{}, spec.Inputs...), k.Outputs()...) {
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
	"qk_matmul_output_mode", "softmax_precision", "smooth_softmax", "mask_filter_value", "start", "end"}

// fuzzInt is the integer a byte stands for: -126 to 126 as a signed byte, and the extremes
// overflow hides in: 127 is MaxInt64, -127 (129) MinInt64 + 1 and -128 (128) MinInt64.
func fuzzInt(b int) int64 {
	switch v := int64(int8(b)); v {
	case 127:
		return math.MaxInt64
	case -127:
		return math.MinInt64 + 1
	case -128:
		return math.MinInt64
	default:
		return v
	}
}

// fuzzByte is the byte fuzzInt reads as v.
func fuzzByte(v int64) int {
	switch v {
	case math.MaxInt64:
		return 127
	case math.MinInt64 + 1:
		return 129
	case math.MinInt64:
		return 128
	default:
		return int(byte(int8(v)))
	}
}

// fuzzStrings are the values a string attribute may take.
var fuzzStrings = []string{"", "tanh", "none", "linear", "\x00"}

// fuzzDTypes are the dtypes an input may take: every known one, none and an unknown number.
var fuzzDTypes = []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Float64,
	kernels.Int64, kernels.Int32, kernels.Bool, 0, 99}

// fuzzSpec reads a Spec from prog, a byte at a time (a missing byte reads as 0): op, opset,
// input count, then per input its dtype, rank, dimensions (253: 0, 254: 2^40, 255: -1, else
// 1 to 6) and whether it is constant (then its values, a byte each (fuzzInt), with one too
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
			if ti.DType == kernels.Int64 || ti.DType == kernels.Int32 || ti.DType == kernels.Bool {
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
// to 4 and dimensions 0, 1 to 6 or 2^40, constants of at most 64 values (integers fuzzInt
// makes, floats in quarters of [-32, 31]), up to 3 attributes of fuzzAttrs (integers fuzzInt
// makes, up to 4 of them, floats in quarters, or fuzzStrings), and up to 3 outputs.
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
