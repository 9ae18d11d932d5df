package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// runAll gets the kernel for spec, uploads inputs (in each input's dtype), poisons fresh
// outputs, executes and returns the kernel and every output's values.
func (f *fixture) runAll(spec kernels.Spec, inputs ...[]float64) (kernels.Kernel, [][]float64) {
	f.t.Helper()
	k := f.get(spec)
	ins := make([]kernels.Tensor, len(inputs))
	for i, in := range inputs {
		ins[i] = f.uploadTyped(spec.Inputs[i].DType, spec.Inputs[i].Shape, in)
	}
	outs := f.outputs(k)
	require.NoError(f.t, k.Execute(ins, outs))
	vals := make([][]float64, len(outs))
	for i, o := range outs {
		vals[i] = f.downloadTyped(o)
	}
	return k, vals
}

// shifted returns n random values (±[0.1, 2)) plus offset, rounded to dt: rows with a large
// mean, whose variance a one-pass float32 sum of squares would lose.
func (f *fixture) shifted(dt kernels.DType, n int64, offset float64) []float64 {
	v := f.randomTyped(dt, n)
	for i := range v {
		v[i] = roundTo(dt, v[i]+offset)
	}
	return v
}

// statsBound is the bound for the float32 InvStdDev outputs: computed in float32 from the
// same (rounded) inputs as the float64 reference.
const statsBound = 1e-5

// requireMeanClose checks float32 row means against the float64 reference with an absolute
// bound of 1e-5 times the mean magnitude of the row's values: a mean of values of both signs
// can be near 0, where a relative bound would measure only the float32 sum's rounding (rows
// of 20000 values in ±[0.1, 2) gave 8e-5 relative on the H200, 8e-7 absolute).
func requireMeanClose(t *testing.T, got, ref, rows []float64, what string) {
	t.Helper()
	require.Len(t, got, len(ref), what)
	length := len(rows) / len(ref)
	for r := range ref {
		scale := 0.0
		for _, v := range rows[r*length : (r+1)*length] {
			scale += math.Abs(v)
		}
		scale /= float64(length)
		require.False(t, math.IsNaN(got[r]), "%s %d was not written", what, r)
		require.InDelta(t, ref[r], got[r], 1e-5*scale, "%s %d (row magnitude %.3g)", what, r, scale)
	}
}

func TestLayerNormAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		shape  []int64
		axis   int64
		eps    float32
		bias   bool
		offset float64
	}{
		{[]int64{2, 3, 4, 5}, -1, 1e-5, true, 0},
		{[]int64{3, 4}, 0, 1e-5, true, 0},
		{[]int64{2, 3, 5}, -2, 0.1, false, 0},
		{[]int64{4, 64}, 1, 1e-5, true, 0},    // whole 16-byte packs per row
		{[]int64{3, 37}, -1, 1e-5, true, 0},   // odd rows
		{[]int64{2, 3000}, 1, 1e-5, true, 0},  // many threads per row
		{[]int64{2, 20000}, 1, 1e-5, true, 0}, // more packs than the registers keep: re-read
		{[]int64{5, 256}, 1, 1e-5, false, 50}, // a large mean
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%v/axis%d/eps%g/bias%v/offset%g", dt, c.shape, c.axis, c.eps, c.bias, c.offset), func(t *testing.T) {
				f := f.sub(t)
				axis := int(c.axis)
				if axis < 0 {
					axis += len(c.shape)
				}
				norm := c.shape[axis:]
				x := f.shifted(dt, numel(c.shape), c.offset)
				gamma, beta := f.randomTyped(dt, numel(norm)), f.randomTyped(dt, numel(norm))
				spec := kernels.Spec{Op: "LayerNormalization", Opset: 17,
					Inputs: []kernels.TensorInfo{info(dt, c.shape...), info(dt, norm...)},
					Attrs:  map[string]kernels.Attribute{"axis": kernels.IntAttr(c.axis), "epsilon": kernels.FloatAttr(c.eps)}}
				inputs := [][]float64{x, gamma}
				var b []float64
				if c.bias {
					spec.Inputs = append(spec.Inputs, info(dt, norm...))
					inputs = append(inputs, beta)
					b = beta
				}
				k, outs := f.runAll(spec, inputs...)
				stats := make([]int64, len(c.shape))
				for i := range stats {
					stats[i] = 1
					if i < axis {
						stats[i] = c.shape[i]
					}
				}
				require.Equal(t, []kernels.TensorInfo{info(dt, c.shape...), info(kernels.Float32, stats...), info(kernels.Float32, stats...)}, k.Outputs())
				y, mean, inv := kernels.RefLayerNorm(x, c.shape, axis, gamma, b, float64(float32(c.eps)), false)
				requireClose64(t, outs[0], y, boundFor(dt), "Y")
				requireMeanClose(t, outs[1], mean, x, "Mean")
				requireClose64(t, outs[2], inv, statsBound, "InvStdDev")
			})
		}
	}
}

func TestSimplifiedLayerNormAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range []struct {
			shape []int64
			axis  int64
		}{{[]int64{2, 3, 8}, -1}, {[]int64{3, 35}, 1}, {[]int64{2, 4, 6}, 1}, {[]int64{4, 4096}, -1}} {
			t.Run(fmt.Sprintf("%s/%v/axis%d", dt, c.shape, c.axis), func(t *testing.T) {
				f := f.sub(t)
				axis := int(c.axis)
				if axis < 0 {
					axis += len(c.shape)
				}
				norm := c.shape[axis:]
				x, scale := f.randomTyped(dt, numel(c.shape)), f.randomTyped(dt, numel(norm))
				spec := kernels.Spec{Op: "SimplifiedLayerNormalization", Opset: 17,
					Inputs: []kernels.TensorInfo{info(dt, c.shape...), info(dt, norm...)},
					Attrs:  map[string]kernels.Attribute{"axis": kernels.IntAttr(c.axis), "epsilon": kernels.FloatAttr(1e-6)}}
				k, outs := f.runAll(spec, x, scale)
				require.Len(t, k.Outputs(), 2, "Y and inv_std_var")
				y, _, inv := kernels.RefLayerNorm(x, c.shape, axis, scale, nil, float64(float32(1e-6)), true)
				requireClose64(t, outs[0], y, boundFor(dt), "Y")
				requireClose64(t, outs[1], inv, statsBound, "inv_std_var")
			})
		}
	}
}

func TestSkipLayerNormsAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, simplified := range []bool{false, true} {
		op := "com.microsoft.SkipLayerNormalization"
		if simplified {
			op = "com.microsoft.SkipSimplifiedLayerNormalization"
		}
		for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
			for _, c := range []struct {
				input, skip []int64
				beta, bias  bool
			}{
				{[]int64{2, 3, 16}, []int64{2, 3, 16}, true, true},
				{[]int64{2, 3, 16}, []int64{1, 3, 16}, false, true},
				{[]int64{2, 3, 13}, []int64{3, 13}, true, false},
				{[]int64{4, 24}, []int64{4, 24}, false, false},
				{[]int64{2, 2, 1024}, []int64{2, 2, 1024}, true, true},
			} {
				if simplified && c.beta && !c.bias {
					continue // SkipSimplified has no beta: its fourth input is the bias
				}
				t.Run(fmt.Sprintf("%s/%s/%v+%v/beta%v/bias%v", op, dt, c.input, c.skip, c.beta, c.bias), func(t *testing.T) {
					f := f.sub(t)
					h := c.input[len(c.input)-1]
					x, skip := f.randomTyped(dt, numel(c.input)), f.randomTyped(dt, numel(c.skip))
					gamma, beta, bias := f.randomTyped(dt, h), f.randomTyped(dt, h), f.randomTyped(dt, h)
					spec := kernels.Spec{Op: op, Opset: 1, Inputs: []kernels.TensorInfo{info(dt, c.input...), info(dt, c.skip...), info(dt, h)},
						Attrs: map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(1e-5)}}
					inputs := [][]float64{x, skip, gamma}
					var b []float64
					if c.beta && !simplified {
						spec.Inputs = append(spec.Inputs, info(dt, h))
						inputs = append(inputs, beta)
						b = beta
					}
					if c.bias {
						if !simplified && !c.beta {
							// SkipLayerNormalization's bias is its fifth input: beta is left out
							// by an empty name, which a kernel spec cannot say; give beta as zeros.
							spec.Inputs = append(spec.Inputs, info(dt, h))
							inputs = append(inputs, make([]float64, h))
							b = make([]float64, h)
						}
						spec.Inputs = append(spec.Inputs, info(dt, h))
						inputs = append(inputs, bias)
					}
					k, outs := f.runAll(spec, inputs...)
					stats := append(append([]int64{}, c.input[:len(c.input)-1]...), 1)
					require.Equal(t, []kernels.TensorInfo{info(dt, c.input...), info(kernels.Float32, stats...), info(kernels.Float32, stats...), info(dt, c.input...)}, k.Outputs())
					// The sum as the kernel forms it: in float32, then normalized unrounded.
					sum := make([]float64, len(x))
					for i := range sum {
						s := float32(x[i]) + float32(skip[i%len(skip)])
						if c.bias {
							s += float32(bias[i%int(h)])
						}
						sum[i] = float64(s)
					}
					y, mean, inv := kernels.RefLayerNorm(sum, c.input, len(c.input)-1, gamma, b, float64(float32(1e-5)), simplified)
					rounded := make([]float64, len(sum))
					for i, s := range sum {
						rounded[i] = roundTo(dt, s)
					}
					requireClose64(t, outs[0], y, boundFor(dt), "output")
					if simplified {
						for i, m := range outs[1] {
							require.Zero(t, m, "mean %d of a simplified normalization", i)
						}
					} else {
						requireMeanClose(t, outs[1], mean, sum, "mean")
					}
					requireClose64(t, outs[2], inv, statsBound, "inv_std_var")
					assert.Equal(t, rounded, outs[3], "input_skip_bias_sum")
				})
			}
		}
	}
}

func TestFastGeluAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range []struct {
			shape []int64
			bias  bool
		}{{[]int64{3, 5}, true}, {[]int64{2, 4, 64}, true}, {[]int64{7, 33}, false}, {[]int64{1000}, true}} {
			t.Run(fmt.Sprintf("%s/%v/bias%v", dt, c.shape, c.bias), func(t *testing.T) {
				f := f.sub(t)
				h := c.shape[len(c.shape)-1]
				x, bias := f.randomTyped(dt, numel(c.shape)), f.randomTyped(dt, h)
				spec := kernels.Spec{Op: "com.microsoft.FastGelu", Opset: 1, Inputs: []kernels.TensorInfo{info(dt, c.shape...)}}
				inputs := [][]float64{x}
				sum := append([]float64{}, x...)
				if c.bias {
					spec.Inputs = append(spec.Inputs, info(dt, h))
					inputs = append(inputs, bias)
					for i := range sum {
						sum[i] = float64(float32(x[i]) + float32(bias[i%int(h)]))
					}
				}
				_, got := f.runTyped(spec, inputs...)
				requireClose64(t, got, kernels.RefUnary("GeluTanh", sum), boundFor(dt), "FastGelu")
			})
		}
	}
}

func TestNormOpsRefuseWithClearErrors(t *testing.T) {
	f := newFixture(t)
	f32 := kernels.Float32
	ln := func(opset int, attrs map[string]kernels.Attribute, inputs ...kernels.TensorInfo) kernels.Spec {
		return kernels.Spec{Op: "LayerNormalization", Opset: opset, Inputs: inputs, Attrs: attrs}
	}
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"opset", ln(16, nil, info(f32, 2, 4), info(f32, 4)), []string{"LayerNormalization (opset 16)", "opset >= 17"}},
		{"axis", ln(17, map[string]kernels.Attribute{"axis": kernels.IntAttr(2)}, info(f32, 2, 4), info(f32, 4)),
			[]string{`"axis" is 2`, "[-2, 1]"}},
		{"stash type", ln(17, map[string]kernels.Attribute{"stash_type": kernels.IntAttr(0)}, info(f32, 2, 4), info(f32, 4)),
			[]string{`"stash_type" is 0`, "only 1"}},
		{"scale shape", ln(17, nil, info(f32, 2, 4), info(f32, 2)), []string{"input 1 (Scale)", "shape [2]", "normalized shape [4]"}},
		{"scale dtype", ln(17, nil, info(f32, 2, 4), info(kernels.Float16, 4)), []string{"input 1 (Scale) is float16", "same dtype"}},
		{"negative epsilon", ln(17, map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(-1)}, info(f32, 2, 4), info(f32, 4)),
			[]string{`"epsilon" is -1`}},
		{"skip shape", kernels.Spec{Op: "com.microsoft.SkipLayerNormalization", Opset: 1,
			Inputs: []kernels.TensorInfo{info(f32, 2, 3, 8), info(f32, 2, 1, 8), info(f32, 8)}},
			[]string{"input 1 (skip)", "shape [2,1,8]", "trailing dimensions"}},
		{"skip input rank", kernels.Spec{Op: "com.microsoft.SkipSimplifiedLayerNormalization", Opset: 1,
			Inputs: []kernels.TensorInfo{info(f32, 8), info(f32, 8), info(f32, 8)}},
			[]string{"input 0 (input) has rank 1", "ranks 2 to 3"}},
		{"gamma", kernels.Spec{Op: "com.microsoft.SkipLayerNormalization", Opset: 1,
			Inputs: []kernels.TensorInfo{info(f32, 2, 8), info(f32, 2, 8), info(f32, 4)}},
			[]string{"input 2 (gamma)", "normalized shape [8]"}},
		{"fast gelu bias", kernels.Spec{Op: "com.microsoft.FastGelu", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 2, 8), info(f32, 4)}},
			[]string{"input 1 (bias)", "last dimension, 8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.lib.Get(c.spec)
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
