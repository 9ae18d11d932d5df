package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// reduceSpec is a Reduce op's spec with axes as the attribute (opsets before axesInput) or as
// a constant input.
func reduceSpec(op string, opset int, x kernels.TensorInfo, axes []int64, keepdims int64) (kernels.Spec, [][]float64) {
	spec := kernels.Spec{Op: op, Opset: opset, Inputs: []kernels.TensorInfo{x}, Attrs: map[string]kernels.Attribute{"keepdims": kernels.IntAttr(keepdims)}}
	var extra [][]float64
	axesInput := 18
	if op == "ReduceSum" {
		axesInput = 13
	}
	if axes == nil {
		return spec, nil
	}
	if opset < axesInput {
		spec.Attrs["axes"] = kernels.IntsAttr(axes...)
		return spec, nil
	}
	spec.Inputs = append(spec.Inputs, info(kernels.Int64, int64(len(axes))))
	spec.Consts = map[int]kernels.Const{1: kernels.IntsConst(axes...)}
	v := make([]float64, len(axes))
	for i, a := range axes {
		v[i] = float64(a)
	}
	return spec, append(extra, v)
}

// requireInfos checks a kernel's outputs against want with TensorInfo.Equal (a scalar's shape
// may be nil or empty).
func requireInfos(t *testing.T, want, got []kernels.TensorInfo) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].Equal(got[i]), "output %d is %s, want %s", i, got[i], want[i])
	}
}

func TestReduceOpsAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		shape []int64
		axes  []int64
		path  string
	}{
		{[]int64{3, 2, 2}, []int64{1}, "strided"},
		{[]int64{3, 2, 2}, nil, "rows"},
		{[]int64{3, 2, 2}, []int64{-1}, "rows"},
		{[]int64{4, 5, 6}, []int64{0, 2}, "strided"},
		{[]int64{2, 3, 4, 5}, []int64{3, 1}, "strided"},
		{[]int64{64, 1000}, []int64{1}, "rows"},
		{[]int64{7, 1032}, []int64{-1}, "rows"}, // whole 16-byte packs, and an odd pack count per thread
		{[]int64{1000, 64}, []int64{0}, "strided"},
		{[]int64{2, 1, 3}, []int64{1}, "copy"},
		{[]int64{5}, []int64{0}, "rows"},
	}
	for _, op := range []string{"ReduceSum", "ReduceMean", "ReduceMax"} {
		for _, opset := range []int{11, 18} {
			for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
				if dt == kernels.BFloat16 && opset < 13 {
					continue
				}
				for _, c := range cases {
					for _, keep := range []int64{1, 0} {
						t.Run(fmt.Sprintf("%s/opset%d/%s/%v/axes%v/keep%d", op, opset, dt, c.shape, c.axes, keep), func(t *testing.T) {
							f := f.sub(t)
							x := f.randomTyped(dt, numel(c.shape))
							spec, extra := reduceSpec(op, opset, info(dt, c.shape...), c.axes, keep)
							k, got := f.runTyped(spec, append([][]float64{x}, extra...)...)
							assert.Equal(t, c.path, kernels.ReducePath(k))
							var axes []int
							for _, a := range c.axes {
								if a < 0 {
									a += int64(len(c.shape))
								}
								axes = append(axes, int(a))
							}
							refOp := map[string]string{"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max"}[op]
							ref, shape := kernels.RefReduce(refOp, x, c.shape, axes, keep == 1)
							requireInfos(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
							// A sum's rounding error grows with its terms' magnitudes, not with the
							// sum, which random terms may cancel: measure it against the reduction
							// of |x| (a max has no such error).
							norm := ref
							if op != "ReduceMax" {
								abs := make([]float64, len(x))
								for i, v := range x {
									abs[i] = math.Abs(v)
								}
								norm, _ = kernels.RefReduce(refOp, abs, c.shape, axes, keep == 1)
							}
							requireCloseScaled(t, got, ref, norm, boundFor(dt), op)
						})
					}
				}
			}
		}
	}
}

func TestReduceEmptyAxes(t *testing.T) {
	f := newFixture(t)
	x := f.randomTyped(kernels.Float32, 12)
	shape := []int64{3, 2, 2}
	empty := info(kernels.Int64, 0)
	// An axes input of no elements needs no constant value: its shape says it is empty.
	for _, c := range []struct {
		name string
		spec kernels.Spec
		out  []int64
		ref  []float64
	}{
		{"noop", kernels.Spec{Op: "ReduceSum", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(shape...), empty},
			Attrs: map[string]kernels.Attribute{"noop_with_empty_axes": kernels.IntAttr(1)}}, shape, x},
		{"all", kernels.Spec{Op: "ReduceSum", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(shape...), empty}}, []int64{1, 1, 1}, nil},
		{"no input, noop", kernels.Spec{Op: "ReduceMax", Opset: 18, Inputs: []kernels.TensorInfo{f32Info(shape...)},
			Attrs: map[string]kernels.Attribute{"noop_with_empty_axes": kernels.IntAttr(1), "keepdims": kernels.IntAttr(0)}}, shape, x},
		{"no input, all, scalar", kernels.Spec{Op: "ReduceMean", Opset: 18, Inputs: []kernels.TensorInfo{f32Info(shape...)},
			Attrs: map[string]kernels.Attribute{"keepdims": kernels.IntAttr(0)}}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			k := f.get(c.spec)
			requireInfos(t, []kernels.TensorInfo{f32Info(c.out...)}, k.Outputs())
			ins := []kernels.Tensor{f.uploadTyped(kernels.Float32, shape, x)}
			if len(c.spec.Inputs) == 2 {
				ins = append(ins, f.alloc(empty))
			}
			outs := f.outputs(k)
			require.NoError(t, k.Execute(ins, outs))
			got := f.downloadTyped(outs[0])
			ref := c.ref
			if ref == nil {
				op := map[string]string{"ReduceSum": "sum", "ReduceMean": "mean"}[c.spec.Op]
				ref, _ = kernels.RefReduce(op, x, shape, nil, true)
			}
			requireClose64(t, got, ref, boundElementwise, c.name)
		})
	}
}

func TestReduceMaxPropagatesNaN(t *testing.T) {
	f := newFixture(t)
	x := f.randomTyped(kernels.Float32, 2*300)
	x[7] = math.NaN()
	for _, axes := range [][]int64{{1}, {0}} {
		t.Run(fmt.Sprint(axes), func(t *testing.T) {
			f := f.sub(t)
			spec, _ := reduceSpec("ReduceMax", 13, f32Info(2, 300), axes, 0)
			_, got := f.runTyped(spec, x)
			ref, _ := kernels.RefReduce("max", x, []int64{2, 300}, []int{int(axes[0])}, false)
			for i := range ref {
				if math.IsNaN(ref[i]) {
					assert.True(t, math.IsNaN(got[i]), "output %d: %v, want NaN", i, got[i])
				} else {
					assert.Equal(t, ref[i], got[i], "output %d", i)
				}
			}
		})
	}
}

func TestReduceRefusesWithClearErrors(t *testing.T) {
	f := newFixture(t)
	x := f32Info(2, 3, 4)
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"axes not constant", kernels.Spec{Op: "ReduceSum", Opset: 13, Inputs: []kernels.TensorInfo{x, info(kernels.Int64, 1)}},
			[]string{"ReduceSum (opset 13)", "input 1 (axes) must be a constant"}},
		{"axis range", kernels.Spec{Op: "ReduceMean", Opset: 13, Inputs: []kernels.TensorInfo{x}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(3)}},
			[]string{"axis 3 is outside [-3, 2]"}},
		{"duplicate axis", kernels.Spec{Op: "ReduceMax", Opset: 13, Inputs: []kernels.TensorInfo{x}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(1, -2)}},
			[]string{"name axis 1 twice"}},
		{"axes attribute from 18", kernels.Spec{Op: "ReduceMean", Opset: 18, Inputs: []kernels.TensorInfo{x}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(1)}},
			[]string{`attribute "axes" is not supported`}},
		{"integer data", kernels.Spec{Op: "ReduceSum", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int32, 4)}},
			[]string{"int32", "supports float32, float16, bfloat16"}},
		{"too many runs", kernels.Spec{Op: "ReduceSum", Opset: 11, Inputs: []kernels.TensorInfo{f32Info(2, 2, 2, 2, 2, 2, 2, 2)},
			Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(0, 2, 4, 6)}}, []string{"at most 3 runs"}},
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
