package kernels_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// patterned returns n distinct non-zero values of dt (bool: alternating 1 and 0).
func patterned(dt kernels.DType, n int64, seed int64) []float64 {
	v := make([]float64, n)
	for i := range v {
		switch dt {
		case kernels.Bool:
			v[i] = float64((int64(i) + seed) % 2)
		case kernels.Float16, kernels.BFloat16:
			v[i] = roundTo(dt, float64((int64(i)+seed)%200+1))
		default:
			v[i] = float64(int64(i)*7 + seed*1000 + 1)
		}
	}
	return v
}

func TestConcatAnyAxis(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		shapes [][]int64
		axis   int64
		opset  int
	}{
		{[][]int64{{2}, {3}}, 0, 13},
		{[][]int64{{2, 3}, {2, 5}, {2, 1}}, 1, 13},
		{[][]int64{{2, 3}, {4, 3}}, -2, 13},
		{[][]int64{{2, 3, 4}, {2, 2, 4}, {2, 7, 4}}, 1, 13},
		{[][]int64{{3, 2, 8}, {3, 2, 8}}, -1, 13}, // 16-byte rows for 4-byte types
		{[][]int64{{5, 3}, {5, 4}}, 0 + 1, 1},     // opset 1: axis defaults to 1 (given here)
		{[][]int64{{4, 2}, {4, 6}}, 99, 3},        // opset 3 without the attribute: axis 1
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%v/axis%d/opset%d", dt, c.shapes, c.axis, c.opset), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: "Concat", Opset: c.opset}
				if c.axis != 99 {
					spec.Attrs = map[string]kernels.Attribute{"axis": kernels.IntAttr(c.axis)}
				}
				var inputs [][]float64
				for i, sh := range c.shapes {
					spec.Inputs = append(spec.Inputs, info(dt, sh...))
					inputs = append(inputs, patterned(dt, numel(sh), int64(i+1)))
				}
				axis := int(c.axis)
				if c.axis == 99 {
					axis = 1
				}
				rank := len(c.shapes[0])
				if axis < 0 {
					axis += rank
				}
				out := append([]int64{}, c.shapes[0]...)
				out[axis] = 0
				for _, sh := range c.shapes {
					out[axis] += sh[axis]
				}
				k, got := f.runTyped(spec, inputs...)
				require.Equal(t, []kernels.TensorInfo{info(dt, out...)}, k.Outputs())
				ref := make([]float64, numel(out))
				for i := range ref {
					oc := coords(int64(i), out)
					at := oc[axis]
					for j, sh := range c.shapes {
						if at < sh[axis] {
							ic := append([]int64{}, oc...)
							ic[axis] = at
							ref[i] = inputs[j][flat(ic, sh)]
							break
						}
						at -= sh[axis]
					}
				}
				assert.Equal(t, ref, got)
			})
		}
	}
}

func TestConcatSkipsInputsEmptyAlongTheAxis(t *testing.T) {
	// A key/value cache before the first decode step: [1,2,0,16] joined with [1,2,1,16].
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			f := f.sub(t)
			past, cur := info(dt, 1, 2, 0, 16), info(dt, 1, 2, 1, 16)
			k := f.get(kernels.Spec{Op: "Concat", Opset: 17, Inputs: []kernels.TensorInfo{past, cur, past},
				Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(-2)}})
			require.Equal(t, []kernels.TensorInfo{info(dt, 1, 2, 1, 16)}, k.Outputs())
			x := patterned(dt, 32, 3)
			empty := kernels.Tensor{TensorInfo: past} // no address: an empty tensor is never read
			outs := f.outputs(k)
			require.NoError(t, k.Execute([]kernels.Tensor{empty, f.uploadTyped(dt, cur.Shape, x), empty}, outs))
			assert.Equal(t, x, f.downloadTyped(outs[0]))
		})
	}
	_, err := f.lib.Get(kernels.Spec{Op: "Concat", Opset: 17, Inputs: []kernels.TensorInfo{f32Info(2, 0), f32Info(2, 0)},
		Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.ErrorContains(t, err, "every input is empty along axis 1")
	_, err = f.lib.Get(kernels.Spec{Op: "Concat", Opset: 17, Inputs: []kernels.TensorInfo{f32Info(0, 2), f32Info(1, 2)},
		Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.ErrorContains(t, err, "only the concatenation axis 1 may be 0")
}

func TestSplitSizes(t *testing.T) {
	f := newFixture(t)
	shape := []int64{4, 6, 8}
	cases := []struct {
		name  string
		spec  kernels.Spec
		axis  int
		sizes []int64
	}{
		{"equal by NumOutputs", kernels.Spec{Op: "Split", Opset: 13, NumOutputs: 3, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}}, 1, []int64{2, 2, 2}},
		{"constant split input", kernels.Spec{Op: "Split", Opset: 13, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(-1)},
			Inputs: []kernels.TensorInfo{{}, info(kernels.Int64, 3)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(1, 4, 3)}}, 2, []int64{1, 4, 3}},
		{"split attribute", kernels.Spec{Op: "Split", Opset: 11, Attrs: map[string]kernels.Attribute{"split": kernels.IntsAttr(3, 1)}}, 0, []int64{3, 1}},
		{"num_outputs, last smaller", kernels.Spec{Op: "Split", Opset: 18, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(2), "num_outputs": kernels.IntAttr(3)}}, 2, []int64{3, 3, 2}},
		{"default axis, equal", kernels.Spec{Op: "Split", Opset: 11, NumOutputs: 2}, 0, []int64{2, 2}},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.BFloat16, kernels.Int32} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				spec := c.spec
				x := patterned(dt, numel(shape), 3)
				inputs := [][]float64{x}
				if len(spec.Inputs) == 2 {
					spec.Inputs = []kernels.TensorInfo{info(dt, shape...), spec.Inputs[1]}
					v := make([]float64, len(c.sizes))
					for i, s := range c.sizes {
						v[i] = float64(s)
					}
					inputs = append(inputs, v)
				} else {
					spec.Inputs = []kernels.TensorInfo{info(dt, shape...)}
				}
				k, outs := f.runAll(spec, inputs...)
				require.Len(t, outs, len(c.sizes))
				at := int64(0)
				for j, size := range c.sizes {
					oshape := append([]int64{}, shape...)
					oshape[c.axis] = size
					require.Equal(t, info(dt, oshape...), k.Outputs()[j])
					ref := make([]float64, numel(oshape))
					for i := range ref {
						ic := coords(int64(i), oshape)
						ic[c.axis] += at
						ref[i] = x[flat(ic, shape)]
					}
					assert.Equal(t, ref, outs[j], "output %d", j)
					at += size
				}
			})
		}
	}
}

func TestGatherAnyAxisAndNegativeIndices(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		data, idxShape []int64
		idx            []int64
		axis           int64
	}{
		{[]int64{5, 4, 3, 2}, []int64{3}, []int64{0, 1, 3}, 0},
		{[]int64{5, 4, 3, 2}, []int64{3}, []int64{0, 1, 3}, 1},
		{[]int64{3, 3}, []int64{1, 2}, []int64{0, 2}, 1},
		{[]int64{10}, []int64{3}, []int64{0, -9, -10}, 0},
		{[]int64{6, 8}, []int64{2, 2}, []int64{5, -1, 0, 3}, -2}, // 16-byte rows of 4-byte types (8 elements of 2)
		{[]int64{4, 5}, nil, []int64{-2}, 0},                     // a scalar index drops the axis
		{[]int64{7, 64}, []int64{4}, []int64{6, 0, 7, -8}, 0},    // 7 and -8 are out of range: zero rows, a data fault
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
		for _, it := range []kernels.DType{kernels.Int64, kernels.Int32} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/%v/%v/axis%d", dt, it, c.data, c.idx, c.axis), func(t *testing.T) {
					f := f.sub(t)
					x := patterned(dt, numel(c.data), 5)
					idx := make([]float64, len(c.idx))
					for i, v := range c.idx {
						idx[i] = float64(v)
					}
					spec := kernels.Spec{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.data...), info(it, c.idxShape...)},
						Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(c.axis)}}
					k, got := f.runTyped(spec, x, idx)
					axis := int(c.axis)
					if axis < 0 {
						axis += len(c.data)
					}
					out := append(append(append([]int64{}, c.data[:axis]...), c.idxShape...), c.data[axis+1:]...)
					requireInfos(t, []kernels.TensorInfo{info(dt, out...)}, k.Outputs())
					ref := make([]float64, numel(out))
					for i := range ref {
						oc := coords(int64(i), out)
						j := c.idx[flat(oc[axis:axis+len(c.idxShape)], c.idxShape)]
						if j < 0 {
							j += c.data[axis]
						}
						if j < 0 || j >= c.data[axis] {
							continue // zero
						}
						ic := append(append(append([]int64{}, oc[:axis]...), j), oc[axis+len(c.idxShape):]...)
						ref[i] = x[flat(ic, c.data)]
					}
					assert.Equal(t, ref, got)
					// An index outside [-dim, dim) is a data fault; negative ones inside are not.
					fault := f.takeFault()
					var bad []int64
					for _, j := range c.idx {
						if j < -c.data[axis] || j >= c.data[axis] {
							bad = append(bad, j)
						}
					}
					if len(bad) == 0 {
						assert.Nil(t, fault)
						return
					}
					require.NotNil(t, fault, "indices %v outside [-%d, %d) are reported", bad, c.data[axis], c.data[axis])
					assert.Equal(t, kernels.FaultID(k), fault.ID)
					assert.Equal(t, "indices", fault.InputName)
					assert.Contains(t, bad, fault.Value, "the first offending index (any thread's)")
				})
			}
		}
	}
}

func TestTriluUpperAndLower(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Int64, kernels.Float16, kernels.Bool} {
		for _, c := range []struct {
			shape []int64
			k     *int64
			upper int64
		}{
			{[]int64{4, 5}, nil, 1}, {[]int64{4, 5}, nil, 0}, {[]int64{2, 3, 3}, i64p(-1), 1}, {[]int64{3, 1, 5}, i64p(2), 0},
			{[]int64{4, 5}, i64p(7), 1}, {[]int64{4, 5}, i64p(-7), 0}, {[]int64{6, 4}, i64p(-2), 0},
		} {
			k := int64(0)
			if c.k != nil {
				k = *c.k
			}
			t.Run(fmt.Sprintf("%s/%v/k%d/upper%d", dt, c.shape, k, c.upper), func(t *testing.T) {
				f := f.sub(t)
				x := patterned(dt, numel(c.shape), 1)
				if dt == kernels.Bool {
					for i := range x {
						x[i] = 1
					}
				}
				spec := kernels.Spec{Op: "Trilu", Opset: 14, Inputs: []kernels.TensorInfo{info(dt, c.shape...)}}
				if c.upper == 0 {
					spec.Attrs = map[string]kernels.Attribute{"upper": kernels.IntAttr(0)}
				}
				inputs := [][]float64{x}
				if c.k != nil {
					spec.Inputs = append(spec.Inputs, info(kernels.Int64))
					spec.Consts = map[int]kernels.Const{1: kernels.IntsConst(k)}
					inputs = append(inputs, []float64{float64(k)})
				}
				_, got := f.runTyped(spec, inputs...)
				ref := make([]float64, len(x))
				rank := len(c.shape)
				for i := range ref {
					cc := coords(int64(i), c.shape)
					r, col := cc[rank-2], cc[rank-1]
					if (c.upper == 1 && col-r >= k) || (c.upper == 0 && col-r <= k) {
						ref[i] = x[i]
					}
				}
				assert.Equal(t, ref, got)
			})
		}
	}
}

func i64p(v int64) *int64 { return &v }

func TestShapeRangeConstantOfShape(t *testing.T) {
	f := newFixture(t)
	i64 := kernels.IntsConst
	cases := []struct {
		name string
		spec kernels.Spec
		out  kernels.TensorInfo
		want []float64
	}{
		{"shape", kernels.Spec{Op: "Shape", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(3, 4, 5)}}, info(kernels.Int64, 3), []float64{3, 4, 5}},
		{"shape start end", kernels.Spec{Op: "Shape", Opset: 15, Inputs: []kernels.TensorInfo{f32Info(3, 4, 5)},
			Attrs: map[string]kernels.Attribute{"start": kernels.IntAttr(-2), "end": kernels.IntAttr(10)}}, info(kernels.Int64, 2), []float64{4, 5}},
		{"shape of rank 11", kernels.Spec{Op: "Shape", Opset: 15, Inputs: []kernels.TensorInfo{info(kernels.Bool, 2, 1, 3, 1, 1, 4, 1, 1, 5, 1, 6)}},
			info(kernels.Int64, 11), []float64{2, 1, 3, 1, 1, 4, 1, 1, 5, 1, 6}},
		{"range float", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{f32Info(), f32Info(), f32Info()},
			Consts: map[int]kernels.Const{0: kernels.FloatsConst(1), 1: kernels.FloatsConst(5), 2: kernels.FloatsConst(0.5)}},
			f32Info(8), []float64{1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}},
		{"range int32 negative delta", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int32), info(kernels.Int32), info(kernels.Int32)},
			Consts: map[int]kernels.Const{0: i64(10), 1: i64(6), 2: i64(-3)}}, info(kernels.Int32, 2), []float64{10, 7}},
		{"range int64", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int64), info(kernels.Int64), info(kernels.Int64)},
			Consts: map[int]kernels.Const{0: i64(-3), 1: i64(4), 2: i64(2)}}, info(kernels.Int64, 4), []float64{-3, -1, 1, 3}},
		{"constant of shape default", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 2)},
			Consts: map[int]kernels.Const{0: i64(2, 3)}}, f32Info(2, 3), make([]float64, 6)},
		{"constant of shape int32", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 1)},
			Consts: map[int]kernels.Const{0: i64(5)}, Attrs: map[string]kernels.Attribute{"value": kernels.TensorAttr(info(kernels.Int32, 1), i64(-7))}},
			info(kernels.Int32, 5), []float64{-7, -7, -7, -7, -7}},
		{"constant of shape float16 scalar", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 0)},
			Attrs: map[string]kernels.Attribute{"value": kernels.TensorAttr(info(kernels.Float16, 1), kernels.FloatsConst(1.5))}},
			info(kernels.Float16), []float64{1.5}},
		{"constant of shape bool", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 2)},
			Consts: map[int]kernels.Const{0: i64(3, 2)}, Attrs: map[string]kernels.Attribute{"value": kernels.TensorAttr(info(kernels.Bool, 1), i64(1))}},
			info(kernels.Bool, 3, 2), []float64{1, 1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			k := f.get(c.spec)
			requireInfos(t, []kernels.TensorInfo{c.out}, k.Outputs())
			ins := make([]kernels.Tensor, len(c.spec.Inputs))
			for i, in := range c.spec.Inputs {
				ins[i] = f.alloc(in)
				if cv, ok := c.spec.Consts[i]; ok {
					vals := cv.Floats
					if vals == nil {
						for _, v := range cv.Ints {
							vals = append(vals, float64(v))
						}
					}
					ins[i] = f.uploadTyped(in.DType, in.Shape, vals)
				}
			}
			outs := f.outputs(k)
			require.NoError(t, k.Execute(ins, outs))
			assert.Equal(t, c.want, f.downloadTyped(outs[0]))
		})
	}
}

func TestIntegerArithmetic(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Int32, kernels.Int64} {
		maxV, minV := float64(math.MaxInt32), float64(math.MinInt32)
		if dt == kernels.Int64 {
			maxV, minV = float64(1<<62), float64(-1<<62)
		}
		a := []float64{7, -7, 7, -7, 0, maxV, minV, 5, 100, -100, minV, 3}
		b := []float64{2, 2, -2, -2, 3, 1, -1, 0, 7, 7, 1, -1}
		for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
			for _, shapes := range [][2][]int64{{{12}, {12}}, {{3, 4}, {4}}, {{2, 1, 6}, {2, 6}}} {
				t.Run(fmt.Sprintf("%s/%s/%v", dt, op, shapes), func(t *testing.T) {
					f := f.sub(t)
					bv := b[:numel(shapes[1])]
					spec := kernels.Spec{Op: op, Opset: 14, Inputs: []kernels.TensorInfo{info(dt, shapes[0]...), info(dt, shapes[1]...)}}
					k, got := f.runTyped(spec, a, bv)
					out := k.Outputs()[0].Shape
					for i := range got {
						oc := coords(int64(i), out)
						x := int64(a[bcastFlat(oc, shapes[0])])
						y := int64(bv[bcastFlat(oc, shapes[1])])
						want := kernels.RefIntOp(op, x, y)
						if dt == kernels.Int32 {
							want = int64(int32(want))
						}
						assert.Equal(t, float64(want), got[i], "element %d: %d %s %d", i, x, op, y)
					}
					// A zero divisor is a data fault (ONNX Runtime's CPU EP stops there); 0 is
					// still the element's memory-safe value.
					fault := f.takeFault()
					if op == "Div" && slices.Contains(bv, 0) {
						require.NotNil(t, fault, "an integer division by zero is reported")
						assert.Equal(t, kernels.FaultID(k), fault.ID)
						assert.Equal(t, 1, fault.Input)
						assert.Equal(t, "B", fault.InputName)
						assert.Equal(t, int64(0), fault.Value)
						assert.ErrorContains(t, fault, "input 'B' holds 0, an integer division by zero")
					} else {
						assert.Nil(t, fault)
					}
				})
			}
		}
	}
	// The wrapped and defined cases, spelled out.
	assert.Equal(t, int64(-3), kernels.RefIntOp("Div", -7, 2), "truncated toward zero")
	assert.Equal(t, int64(0), kernels.RefIntOp("Div", 5, 0), "x / 0 is 0")
	assert.Equal(t, int64(math.MinInt64), kernels.RefIntOp("Div", math.MinInt64, -1), "MinInt64 / -1 wraps")
	assert.Equal(t, int64(math.MinInt64), kernels.RefIntOp("Add", math.MaxInt64, 1), "MaxInt64 + 1 wraps")
}

// bcastFlat is the flat index in a tensor of shape of the element numpy broadcasting puts at
// output coordinates oc.
func bcastFlat(oc, shape []int64) int64 {
	c := append([]int64{}, oc[len(oc)-len(shape):]...)
	for i, d := range shape {
		if d == 1 {
			c[i] = 0
		}
	}
	return flat(c, shape)
}

func TestSliceNegativeSteps(t *testing.T) {
	f := newFixture(t)
	shape := []int64{20, 10, 5}
	cases := []struct {
		starts, ends, axes, steps []int64
	}{
		{[]int64{20, 10, 4}, []int64{0, 0, 1}, []int64{0, 1, 2}, []int64{-1, -3, -2}},
		{[]int64{-1}, []int64{math.MinInt64}, []int64{1}, []int64{-1}}, // the whole axis reversed
		{[]int64{3, 0}, []int64{-100, 5}, []int64{2, 0}, []int64{-2, 2}},
		{[]int64{8}, []int64{2}, []int64{0}, []int64{-4}},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Int64, kernels.BFloat16} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%v:%v:%v:%v", dt, c.starts, c.ends, c.axes, c.steps), func(t *testing.T) {
				f := f.sub(t)
				x := patterned(dt, numel(shape), 2)
				spec := kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, shape...)}, Consts: map[int]kernels.Const{}}
				inputs := [][]float64{x}
				for i, l := range [][]int64{c.starts, c.ends, c.axes, c.steps} {
					spec.Inputs = append(spec.Inputs, info(kernels.Int64, int64(len(l))))
					spec.Consts[i+1] = kernels.IntsConst(l...)
					v := make([]float64, len(l))
					for j, e := range l {
						v[j] = float64(e)
					}
					inputs = append(inputs, v)
				}
				k, got := f.runTyped(spec, inputs...)
				// Reference: numpy-style index lists per axis.
				picks := make([][]int64, len(shape))
				for d := range shape {
					for i := range shape[d] {
						picks[d] = append(picks[d], i)
					}
				}
				for i, a := range c.axes {
					d := shape[a]
					st, b, e := c.steps[i], c.starts[i], c.ends[i]
					if b < 0 {
						b += d
					}
					if e < 0 && e != math.MinInt64 {
						e += d
					}
					var list []int64
					if st > 0 {
						b, e = min(max(b, 0), d), min(max(e, 0), d)
						for j := b; j < e; j += st {
							list = append(list, j)
						}
					} else {
						b, e = min(max(b, 0), d-1), min(max(e, -1), d-1)
						for j := b; j > e; j += st {
							list = append(list, j)
						}
					}
					picks[a] = list
				}
				out := make([]int64, len(shape))
				for d := range out {
					out[d] = int64(len(picks[d]))
				}
				require.Equal(t, []kernels.TensorInfo{info(dt, out...)}, k.Outputs())
				ref := make([]float64, numel(out))
				for i := range ref {
					oc := coords(int64(i), out)
					ic := make([]int64, len(oc))
					for d, cc := range oc {
						ic[d] = picks[d][cc]
					}
					ref[i] = x[flat(ic, shape)]
				}
				assert.Equal(t, ref, got)
			})
		}
	}
}

func TestTransposeTiledPath(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		shape, perm []int64
	}{
		{[]int64{67, 45}, []int64{1, 0}},
		{[]int64{3, 40, 70}, []int64{0, 2, 1}},
		{[]int64{5, 33, 2, 31}, []int64{3, 1, 0, 2}},
		{[]int64{130, 257}, []int64{1, 0}},       // several tiles each way, partial last ones
		{[]int64{3, 129, 200}, []int64{2, 0, 1}}, // a batch dimension between the tiled ones
	} {
		for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
			t.Run(fmt.Sprintf("%s/%v/%v", dt, c.shape, c.perm), func(t *testing.T) {
				f := f.sub(t)
				x := patterned(dt, numel(c.shape), 4)
				k, got := f.runTyped(kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.shape...)},
					Attrs: map[string]kernels.Attribute{"perm": kernels.IntsAttr(c.perm...)}}, x)
				assert.Equal(t, "tiled", kernels.TransposePath(k))
				out := make([]int64, len(c.perm))
				for i, p := range c.perm {
					out[i] = c.shape[p]
				}
				ref := make([]float64, len(x))
				for i := range ref {
					oc := coords(int64(i), out)
					ic := make([]int64, len(oc))
					for j, p := range c.perm {
						ic[p] = oc[j]
					}
					ref[i] = x[flat(ic, c.shape)]
				}
				assert.Equal(t, ref, got)
			})
		}
	}
}

func TestAssembleOpsRefuseWithClearErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"concat shapes", kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 3), f32Info(3, 3)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}},
			[]string{"input 1 has shape [3,3]", "only along axis 1"}},
		{"concat axis required", kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 3)}}, []string{`"axis" is required`}},
		{"concat dtypes", kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2), info(kernels.Int64, 2)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(0)}},
			[]string{"same dtype"}},
		{"split count unknown", kernels.Spec{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(6)}}, []string{"number of outputs is unknown"}},
		{"split sum", kernels.Spec{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(6), info(kernels.Int64, 2)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(2, 3)}},
			[]string{"add up to 5", "has 6"}},
		{"split not constant", kernels.Spec{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(6), info(kernels.Int64, 2)}}, []string{"input 1 (split) must be a constant"}},
		{"split uneven", kernels.Spec{Op: "Split", Opset: 13, NumOutputs: 4, Inputs: []kernels.TensorInfo{f32Info(6)}}, []string{"does not split into 4 equal parts"}},
		{"gather index type", kernels.Spec{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(6), f32Info(2)}}, []string{"input 1 (indices) has dtype float32"}},
		{"gather axis", kernels.Spec{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(6), info(kernels.Int64, 2)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}},
			[]string{`"axis" is 1`}},
		{"trilu k not constant", kernels.Spec{Op: "Trilu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(3, 3), info(kernels.Int64)}}, []string{"input 1 (k) must be a constant"}},
		{"trilu rank", kernels.Spec{Op: "Trilu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(3)}}, []string{"rank 1", "ranks 2 to"}},
		{"shape empty", kernels.Spec{Op: "Shape", Opset: 15, Inputs: []kernels.TensorInfo{f32Info(2, 3)}, Attrs: map[string]kernels.Attribute{"start": kernels.IntAttr(2)}},
			[]string{"is empty"}},
		{"range not constant", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{f32Info(), f32Info(), f32Info()}}, []string{"input 0 (start) must be a constant"}},
		{"range empty", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int64), info(kernels.Int64), info(kernels.Int64)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(5), 1: kernels.IntsConst(1), 2: kernels.IntsConst(1)}}, []string{"range is empty"}},
		{"range delta 0", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(kernels.Int64), info(kernels.Int64), info(kernels.Int64)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(5), 1: kernels.IntsConst(1), 2: kernels.IntsConst(0)}}, []string{"delta is 0"}},
		{"constant of shape zero", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 2)}, Consts: map[int]kernels.Const{0: kernels.IntsConst(2, 0)}},
			[]string{"holds 0"}},
		{"constant of shape value", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(kernels.Int64, 1)}, Consts: map[int]kernels.Const{0: kernels.IntsConst(2)},
			Attrs: map[string]kernels.Attribute{"value": kernels.TensorAttr(f32Info(2), kernels.FloatsConst(1, 2))}}, []string{`"value" is float32[2]`, "one element"}},
		{"slice step 0", kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4), info(kernels.Int64, 1), info(kernels.Int64, 1), info(kernels.Int64, 1), info(kernels.Int64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(3), 2: kernels.IntsConst(0), 3: kernels.IntsConst(0), 4: kernels.IntsConst(0)}}, []string{"step 0"}},
		{"slice empty backwards", kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4), info(kernels.Int64, 1), info(kernels.Int64, 1), info(kernels.Int64, 1), info(kernels.Int64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1), 2: kernels.IntsConst(3), 3: kernels.IntsConst(0), 4: kernels.IntsConst(-1)}}, []string{"is empty"}},
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

// TestSplitRefusesMoreOutputsThanTheDimension: a node (or a corrupt model) asking for more
// pieces than the axis has elements is refused, naming the count, however large the count; so
// is one asking for more than 65536 pieces.
func TestSplitRefusesMoreOutputsThanTheDimension(t *testing.T) {
	f := newFixture(t)
	for _, n := range []int64{5, math.MaxInt32, math.MaxInt64 - 48} {
		specs := []kernels.Spec{{Op: "Split", Opset: 18, Attrs: map[string]kernels.Attribute{"num_outputs": kernels.IntAttr(n)}}}
		if n <= math.MaxInt32 {
			specs = append(specs, kernels.Spec{Op: "Split", Opset: 13, NumOutputs: int(n)})
		}
		for _, spec := range specs {
			spec.Inputs = []kernels.TensorInfo{info(kernels.Float32, 4, 2)}
			_, err := f.lib.Get(spec)
			require.ErrorIs(t, err, kernels.ErrUnsupported, "%d outputs, opset %d", n, spec.Opset)
			assert.Contains(t, err.Error(), fmt.Sprintf("%d outputs from axis 0", n))
		}
	}
	// Pieces of one element each, as many as the axis has, past the bound on outputs.
	_, err := f.lib.Get(kernels.Spec{Op: "Split", Opset: 18, Inputs: []kernels.TensorInfo{info(kernels.Float32, 1<<40)},
		Attrs: map[string]kernels.Attribute{"num_outputs": kernels.IntAttr(1 << 40)}})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.Contains(t, err.Error(), "Split makes at most 65536")
	_, err = f.lib.Get(kernels.Spec{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{info(kernels.Float32, 1<<17), info(kernels.Int64, 1<<17)},
		Consts: map[int]kernels.Const{1: kernels.IntsConst(slices.Repeat([]int64{1}, 1<<17)...)}})
	require.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.Contains(t, err.Error(), "Split makes at most 65536")
}
