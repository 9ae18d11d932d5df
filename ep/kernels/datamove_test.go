package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// iota returns 1, 2, …, n rounded to dt (distinct for the sizes used with float16).
func iota(dt kernels.DType, n int64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = roundTo(dt, float64(i+1))
	}
	return v
}

// coords returns the row-major coordinates of flat index i in shape.
func coords(i int64, shape []int64) []int64 {
	c := make([]int64, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		c[d] = i % shape[d]
		i /= shape[d]
	}
	return c
}

func flat(c, shape []int64) int64 {
	f := int64(0)
	for d, x := range c {
		f = f*shape[d] + x
	}
	return f
}

func TestTransposeAnyPermutation(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		shape []int64
		perm  []int64
	}{
		{[]int64{2, 3, 4}, []int64{0, 2, 1}},
		{[]int64{2, 3, 4}, []int64{2, 0, 1}},
		{[]int64{2, 3, 4}, nil}, // default: reversed
		{[]int64{3, 5, 7, 2}, []int64{0, 2, 1, 3}},
		{[]int64{31, 33}, []int64{1, 0}},
		{[]int64{2, 1, 3, 2, 2, 3, 2}, []int64{6, 5, 4, 3, 2, 1, 0}}, // 7-D, a dimension of 1 merged away
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%v/%v", dt, c.shape, c.perm), func(t *testing.T) {
				f := f.sub(t)
				var attrs map[string]kernels.Attribute
				perm := c.perm
				if perm != nil {
					attrs = map[string]kernels.Attribute{"perm": kernels.IntsAttr(perm...)}
				} else {
					for i := range c.shape {
						perm = append([]int64{int64(i)}, perm...)
					}
				}
				x := iota(dt, numel(c.shape))
				if dt == kernels.Bool {
					for i := range x {
						x[i] = float64(i % 2)
					}
				}
				k, got := f.runTyped(kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.shape...)}, Attrs: attrs}, x)
				out := make([]int64, len(perm))
				for i, p := range perm {
					out[i] = c.shape[p]
				}
				require.Equal(t, []kernels.TensorInfo{info(dt, out...)}, k.Outputs())
				ref := make([]float64, len(x))
				for i := range ref {
					oc := coords(int64(i), out)
					ic := make([]int64, len(oc))
					for j, p := range perm {
						ic[p] = oc[j]
					}
					ref[i] = x[flat(ic, c.shape)]
				}
				assert.Equal(t, ref, got)
			})
		}
	}
}

func TestSliceWithConstantInputs(t *testing.T) {
	f := newFixture(t)
	shape := []int64{4, 10, 5}
	cases := []struct {
		name                      string
		starts, ends, axes, steps []int64
		out                       []int64
		pick                      func(c []int64) []int64 // output coordinates to input coordinates
		attrs                     bool
	}{
		{"one axis", []int64{2}, []int64{7}, []int64{1}, nil, []int64{4, 5, 5}, func(c []int64) []int64 { return []int64{c[0], c[1] + 2, c[2]} }, false},
		{"negative indices and steps", []int64{-3, 1}, []int64{1000, -1}, []int64{-1, 1}, []int64{1, 3}, []int64{4, 3, 3},
			func(c []int64) []int64 { return []int64{c[0], 1 + 3*c[1], 2 + c[2]} }, false},
		{"default axes, clamped start", []int64{-100, 0}, []int64{3, 10}, nil, nil, []int64{3, 10, 5}, func(c []int64) []int64 { return c }, false},
		{"opset 9 attributes", []int64{1}, []int64{3}, []int64{2}, nil, []int64{4, 10, 2}, func(c []int64) []int64 { return []int64{c[0], c[1], c[2] + 1} }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			dt := kernels.Float32
			x := iota(dt, numel(shape))
			spec := kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, shape...)}, Consts: map[int]kernels.Const{}}
			inputs := [][]float64{x}
			if c.attrs {
				spec.Opset = 9
				spec.Attrs = map[string]kernels.Attribute{"starts": kernels.IntsAttr(c.starts...), "ends": kernels.IntsAttr(c.ends...), "axes": kernels.IntsAttr(c.axes...)}
			} else {
				lists := [][]int64{c.starts, c.ends, c.axes, c.steps}
				for i, l := range lists {
					if l == nil {
						if i == 2 && c.steps != nil {
							t.Fatal("test case: steps without axes")
						}
						break
					}
					spec.Inputs = append(spec.Inputs, info(kernels.Int64, int64(len(l))))
					spec.Consts[i+1] = kernels.IntsConst(l...)
					v := make([]float64, len(l))
					for j, x := range l {
						v[j] = float64(x)
					}
					inputs = append(inputs, v)
				}
			}
			k, got := f.runTyped(spec, inputs...)
			require.Equal(t, []kernels.TensorInfo{info(dt, c.out...)}, k.Outputs())
			ref := make([]float64, numel(c.out))
			for i := range ref {
				ref[i] = x[flat(c.pick(coords(int64(i), c.out)), shape)]
			}
			assert.Equal(t, ref, got)
		})
	}
}

func TestExpandBroadcastsToTheConstantShape(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.BFloat16, kernels.Int32} {
		for _, c := range []struct{ in, shape, out []int64 }{
			{[]int64{3, 1}, []int64{2, 1, 6}, []int64{2, 3, 6}},
			{[]int64{1, 5}, []int64{4, 1}, []int64{4, 5}}, // a 1 in the shape keeps the input's dimension
			{nil, []int64{3, 3}, []int64{3, 3}},
		} {
			t.Run(fmt.Sprintf("%s/%v to %v", dt, c.in, c.shape), func(t *testing.T) {
				f := f.sub(t)
				x := iota(dt, numel(c.in))
				spec := kernels.Spec{Op: "Expand", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.in...), info(kernels.Int64, int64(len(c.shape)))},
					Consts: map[int]kernels.Const{1: kernels.IntsConst(c.shape...)}}
				sv := make([]float64, len(c.shape))
				for i, d := range c.shape {
					sv[i] = float64(d)
				}
				k, got := f.runTyped(spec, x, sv)
				require.Equal(t, []kernels.TensorInfo{info(dt, c.out...)}, k.Outputs())
				ref, _, _ := kernels.RefBinary("Add", x, c.in, make([]float64, numel(c.shape)), c.shape)
				assert.Equal(t, ref, got)
			})
		}
	}
}

func TestReshapeSqueezeUnsqueezeCopy(t *testing.T) {
	f := newFixture(t)
	i64 := func(v ...int64) kernels.Const { return kernels.IntsConst(v...) }
	cases := []struct {
		name string
		spec kernels.Spec
		out  []int64
	}{
		{"reshape 0 and -1", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Float16, 2, 3, 4), info(kernels.Int64, 2)},
			Consts: map[int]kernels.Const{1: i64(0, -1)}}, []int64{2, 12}},
		{"reshape allowzero", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Float32, 2, 3, 4), info(kernels.Int64, 3)},
			Consts: map[int]kernels.Const{1: i64(4, 6, 1)}, Attrs: map[string]kernels.Attribute{"allowzero": kernels.IntAttr(1)}}, []int64{4, 6, 1}},
		{"squeeze axes input", kernels.Spec{Op: "Squeeze", Opset: 13, Inputs: []kernels.TensorInfo{info(kernels.Int64, 1, 3, 1, 2), info(kernels.Int64, 1)},
			Consts: map[int]kernels.Const{1: i64(-2)}}, []int64{1, 3, 2}},
		{"squeeze all ones", kernels.Spec{Op: "Squeeze", Opset: 13, Inputs: []kernels.TensorInfo{info(kernels.Float32, 1, 3, 1, 2)}}, []int64{3, 2}},
		{"squeeze attribute", kernels.Spec{Op: "Squeeze", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Float32, 1, 3, 1, 2)},
			Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(0)}}, []int64{3, 1, 2}},
		{"unsqueeze unsorted axes", kernels.Spec{Op: "Unsqueeze", Opset: 13, Inputs: []kernels.TensorInfo{info(kernels.BFloat16, 3, 4), info(kernels.Int64, 2)},
			Consts: map[int]kernels.Const{1: i64(3, 0)}}, []int64{1, 3, 4, 1}},
		{"unsqueeze attribute", kernels.Spec{Op: "Unsqueeze", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Float32, 3, 4)},
			Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(-1)}}, []int64{3, 4, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			dt := c.spec.Inputs[0].DType
			x := iota(dt, c.spec.Inputs[0].NumElements())
			inputs := [][]float64{x}
			if len(c.spec.Inputs) == 2 {
				v := make([]float64, c.spec.Inputs[1].NumElements())
				for i, a := range c.spec.Consts[1].Ints {
					v[i] = float64(a)
				}
				inputs = append(inputs, v)
			}
			k, got := f.runTyped(c.spec, inputs...)
			require.Equal(t, []kernels.TensorInfo{info(dt, c.out...)}, k.Outputs())
			assert.Equal(t, x, got)
		})
	}
}

func TestShapeOpsRefuseWithClearErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"reshape shape not constant", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2, 3), info(kernels.Int64, 1)}},
			[]string{"Reshape", "input 1 (shape) must be a constant"}},
		{"reshape count", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2, 3), info(kernels.Int64, 1)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(5)}},
			[]string{"Reshape", "[5] gives 5 elements", "has 6"}},
		{"reshape two -1", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2, 3), info(kernels.Int64, 2)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(-1, -1)}},
			[]string{"-1 more than once"}},
		{"slice ends not constant", kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4), info(kernels.Int64, 1), info(kernels.Int64, 1)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(0)}},
			[]string{"Slice", "input 2 (ends) must be a constant"}},
		{"slice empty", kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4), info(kernels.Int64, 1), info(kernels.Int64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(3), 2: kernels.IntsConst(1)}},
			[]string{"Slice", "is empty"}},
		{"squeeze a dimension of 3", kernels.Spec{Op: "Squeeze", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(1, 3), info(kernels.Int64, 1)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(1)}},
			[]string{"Squeeze", "dimension 3", "only dimensions of 1"}},
		{"unsqueeze without axes", kernels.Spec{Op: "Unsqueeze", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(3)}},
			[]string{"Unsqueeze", "axes are required"}},
		{"transpose perm", kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 3)}, Attrs: map[string]kernels.Attribute{"perm": kernels.IntsAttr(0, 0)}},
			[]string{"Transpose", "not a permutation"}},
		{"expand shape", kernels.Spec{Op: "Expand", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 3), info(kernels.Int64, 1)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(4)}},
			[]string{"Expand", "does not broadcast"}},
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
