package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// FuzzGet feeds Library.Get the specs a corrupt or hostile model could give it (fuzzSpec): any
// supported op at any opset, zero to five inputs of any dtype (unknown ones too) and of any
// rank, with empty, unknown (-1) and huge dimensions, constants of the right or the wrong
// length, attributes the ops read with values of any kind, and any output count. Get must
// return a kernel or an error with a message, never panic, and a kernel's inputs and outputs
// must have known dtypes and shapes of at most 2^40 elements (maxElements: sizes never near
// int64 overflow).
func FuzzGet(f *testing.F) {
	f.Add([]byte{0, 18, 2, 0, 2, 3, 4, 1, 0, 2, 3, 4, 1, 0, 1})
	f.Add([]byte{7, 13, 3, 3, 1, 4, 0, 0, 1, 9, 9, 1, 2, 8, 0})
	f.Add([]byte{40, 23, 4, 0, 4, 1, 4, 1, 16, 1, 0, 4, 1, 2, 6, 16, 1, 3, 2, 0, 250, 1})
	f.Add([]byte{255, 1, 5, 6, 4, 255, 254, 253, 252, 0, 3, 1, 0, 2, 1, 3, 2})
	fx := newFixture(f)
	ops := kernels.SupportedOps()
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
	})
}

// fuzzAttrs are attribute names the ops read.
var fuzzAttrs = []string{"axis", "axes", "perm", "to", "keepdims", "epsilon", "scale", "num_heads",
	"kv_num_heads", "q_num_heads", "is_causal", "causal", "do_rotary", "interleaved", "rotary_interleaved",
	"rotary_embedding_dim", "softcap", "local_window_size", "split", "num_outputs", "starts", "ends",
	"value", "alpha", "beta", "approximate", "allowzero", "noop_with_empty_axes", "upper", "stash_type",
	"qk_matmul_output_mode", "softmax_precision", "smooth_softmax", "mask_filter_value", "start", "end"}

// fuzzDTypes are the dtypes an input may take: every known one, none and an unknown number.
var fuzzDTypes = []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Float64,
	kernels.Int64, kernels.Int32, kernels.Bool, 0, 99}

// fuzzSpec reads a Spec from prog, a byte at a time (a missing byte reads as 0): op, opset,
// input count, then per input its dtype, rank, dimensions (253: 0, 254: 2^40, 255: -1, else
// 1 to 6) and whether it is constant (then its values, as signed bytes, with one too many when
// the next byte says so); then the attributes (name, kind, value) and the output count.
func fuzzSpec(prog []byte, ops []string) kernels.Spec {
	at := 0
	next := func() int {
		b := 0
		if at < len(prog) {
			b = int(prog[at])
		}
		at++
		return b
	}
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
			v := int64(int8(next()))
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
			spec.Attrs[name] = kernels.IntAttr(int64(int8(next())))
		case 1:
			spec.Attrs[name] = kernels.IntAttr(math.MaxInt64 - int64(next()))
		case 2:
			var v []int64
			for range next() % 5 {
				v = append(v, int64(int8(next())))
			}
			spec.Attrs[name] = kernels.IntsAttr(v...)
		case 3:
			spec.Attrs[name] = kernels.FloatAttr(float32(int8(next())) / 4)
		default:
			spec.Attrs[name] = kernels.StringAttr([]string{"", "tanh", "none", "linear", "\x00"}[next()%5])
		}
	}
	spec.NumOutputs = next() % 4
	return spec
}
