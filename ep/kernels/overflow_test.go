package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// TestGetRefusesValuesThatOverflowInt64 gives Get constants and attributes whose shape, length
// or step arithmetic overflows int64 (Slice steps of ±MaxInt64 and MinInt64, a Reshape whose
// known dimensions multiply past 2^63, split sizes and Concat inputs that add up past it, a
// Cast target beyond int32): each is refused with an error wrapping ErrUnsupported that names
// the op and the value, never a panic and never a kernel built from a wrapped-around number.
func TestGetRefusesValuesThatOverflowInt64(t *testing.T) {
	f := newFixture(t)
	i64 := kernels.Int64
	f32 := kernels.Float32
	slice := func(shape []int64, starts, ends, axes, steps int64) kernels.Spec {
		return kernels.Spec{Op: "Slice", Opset: 13,
			Inputs: []kernels.TensorInfo{info(f32, shape...), info(i64, 1), info(i64, 1), info(i64, 1), info(i64, 1)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(starts), 2: kernels.IntsConst(ends), 3: kernels.IntsConst(axes), 4: kernels.IntsConst(steps)}}
	}
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"reshape [4] to [2^62,4,-1]", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 4), info(i64, 3)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1<<62, 4, -1)}},
			[]string{"Reshape (opset 14)", "input 1 (shape)", "4611686018427387904", "more elements than the data"}},
		{"reshape [4] to [2^62,8]", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 4), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1<<62, 8)}},
			[]string{"Reshape", "4611686018427387904", "more elements than the data"}},
		{"reshape [4] to [MaxInt64,-1]", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 4), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(math.MaxInt64, -1)}},
			[]string{"Reshape", "9223372036854775807", "more elements than the data"}},
		{"slice step MaxInt64", slice([]int64{4, 6}, 1, 6, 1, math.MaxInt64), nil},
		{"slice step -MaxInt64", slice([]int64{4, 6}, 5, -7, 1, -math.MaxInt64), nil},
		{"slice step MinInt64 reversed", slice([]int64{4, 6}, math.MaxInt64, math.MinInt64, 1, math.MinInt64), nil},
		{"split sizes wrapping to the axis", kernels.Spec{Op: "Split", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 4, 2), info(i64, 3)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(math.MaxInt64, math.MaxInt64, 6)}},
			[]string{"Split (opset 13)", "9223372036854775807", "add up to more than", "axis 0"}},
		{"split attribute wrapping", kernels.Spec{Op: "Split", Opset: 11, Inputs: []kernels.TensorInfo{info(f32, 4, 2)},
			Attrs: map[string]kernels.Attribute{"split": kernels.IntsAttr(math.MaxInt64, 1, 4)}},
			[]string{"Split (opset 11)", "add up to more than"}},
		{"concat inputs wrapping", kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, math.MaxInt64), info(f32, math.MaxInt64), info(f32, 3)},
			Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(0)}},
			[]string{"Concat (opset 13)", "input 0 (inputs)", "9223372036854775807", "more than 2^40 elements"}},
		{"concat of 2^40 pieces", kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 1<<40), info(f32, 1<<40)},
			Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(0)}},
			[]string{"Concat", "the output", "more than 2^40 elements"}},
		{"cast to beyond int32", kernels.Spec{Op: "Cast", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 2)},
			Attrs: map[string]kernels.Attribute{"to": kernels.IntAttr(1<<32 + 1)}},
			[]string{"Cast", `"to" is 4294967297`}},
		{"expand to 2^62 × 4", kernels.Spec{Op: "Expand", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, 1, 1), info(i64, 2)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(1<<62, 4)}},
			[]string{"Expand", "the output", "more than 2^40 elements"}},
		{"constant of shape 2^62 × 4", kernels.Spec{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{info(i64, 2)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(1<<62, 4)}},
			[]string{"ConstantOfShape", "more than 2^40 elements"}},
		{"range of MinInt64 to MaxInt64", kernels.Spec{Op: "Range", Opset: 11, Inputs: []kernels.TensorInfo{info(i64), info(i64), info(i64)},
			Consts: map[int]kernels.Const{0: kernels.IntsConst(math.MinInt64), 1: kernels.IntsConst(math.MaxInt64), 2: kernels.IntsConst(1)}},
			[]string{"Range", "more than 2^40"}},
		{"constant of an overflowing shape", kernels.Spec{Op: "Reshape", Opset: 14, Inputs: []kernels.TensorInfo{info(f32, 4), info(i64, 1<<32, 1<<32)},
			Consts: map[int]kernels.Const{1: kernels.IntsConst()}},
			[]string{"Reshape", "input 1 (shape)", "[4294967296,4294967296]", "overflows int64"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var k kernels.Kernel
			var err error
			require.NotPanics(t, func() { k, err = f.lib.Get(c.spec) })
			if c.want == nil {
				// A slice whose step passes every element but the first: one element, at start.
				require.NoError(t, err)
				require.Equal(t, []kernels.TensorInfo{info(kernels.Float32, 4, 1)}, k.Outputs())
				return
			}
			require.Error(t, err)
			assert.Nil(t, k)
			assert.ErrorIs(t, err, kernels.ErrUnsupported)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestSliceWithHugeStepsTakesOneElement runs the Slices whose steps are the int64 extremes: a
// step of MaxInt64 from 1 (or -MaxInt64 from 5, MinInt64 from the end) passes every element of
// the axis but the first, so each takes exactly one, the one at start (ORT's CPU EP gives
// the same).
func TestSliceWithHugeStepsTakesOneElement(t *testing.T) {
	f := newFixture(t)
	i64 := kernels.Int64
	x := make([]float32, 24)
	for i := range x {
		x[i] = float32(i + 1)
	}
	xt := f.uploadF32([]int64{4, 6}, x)
	for _, c := range []struct {
		name             string
		start, end, step int64
		column           int
	}{
		{"MaxInt64", 1, 6, math.MaxInt64, 1},
		{"-MaxInt64", 5, -7, -math.MaxInt64, 5},
		{"MinInt64", math.MaxInt64, math.MinInt64, math.MinInt64, 5},
		{"MinInt64+1", -2, math.MinInt64 + 1, math.MinInt64 + 1, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			spec := kernels.Spec{Op: "Slice", Opset: 13,
				Inputs: []kernels.TensorInfo{info(kernels.Float32, 4, 6), info(i64, 1), info(i64, 1), info(i64, 1), info(i64, 1)},
				Consts: map[int]kernels.Const{1: kernels.IntsConst(c.start), 2: kernels.IntsConst(c.end), 3: kernels.IntsConst(1), 4: kernels.IntsConst(c.step)}}
			k, err := f.lib.Get(spec)
			require.NoError(t, err)
			require.Equal(t, []kernels.TensorInfo{info(kernels.Float32, 4, 1)}, k.Outputs())
			consts := []kernels.Tensor{
				f.upload(info(i64, 1), i64Bytes([]int64{c.start})),
				f.upload(info(i64, 1), i64Bytes([]int64{c.end})),
				f.upload(info(i64, 1), i64Bytes([]int64{1})),
				f.upload(info(i64, 1), i64Bytes([]int64{c.step})),
			}
			y := f.alloc(info(kernels.Float32, 4, 1))
			require.NoError(t, k.Execute(append([]kernels.Tensor{xt}, consts...), []kernels.Tensor{y}))
			want := make([]float32, 4)
			for r := range want {
				want[r] = x[r*6+c.column]
			}
			assert.Equal(t, want, f.downloadF32(y))
		})
	}
}

// TestTensorInfoSizesDoNotWrap checks that NumElements and Bytes report an overflowing or
// unknown shape as -1 instead of a wrapped-around count.
func TestTensorInfoSizesDoNotWrap(t *testing.T) {
	for _, c := range []struct {
		shape        []int64
		n, bytesOf32 int64
	}{
		{nil, 1, 4},
		{[]int64{2, 3}, 6, 24},
		{[]int64{0, -1}, -1, -1},
		{[]int64{-1, -1}, -1, -1},
		{[]int64{1 << 62, 4}, -1, -1},
		{[]int64{1 << 32, 1 << 32}, -1, -1},
		{[]int64{1 << 62, 0}, 0, 0},
		{[]int64{1 << 61, 2}, 1 << 62, -1},
		{[]int64{math.MaxInt64}, math.MaxInt64, -1},
	} {
		ti := kernels.TensorInfo{DType: kernels.Float32, Shape: c.shape}
		assert.Equal(t, c.n, ti.NumElements(), "%v", c.shape)
		assert.Equal(t, c.bytesOf32, ti.Bytes(), "%v", c.shape)
	}
}

// TestGetTurnsAPanicIntoAnError checks Get's last line of defence: a builder that panics (a
// defect, like the divisions by a wrapped-around zero this file's other tests guard against)
// declines its node with an error wrapping ErrUnsupported that names the op, and the Library
// keeps building other kernels.
func TestGetTurnsAPanicIntoAnError(t *testing.T) {
	f := newFixture(t)
	kernels.WithPanickingOp("cudaep_test.Panics", "runtime error: integer divide by zero", func() {
		var err error
		require.NotPanics(t, func() {
			_, err = f.lib.Get(kernels.Spec{Op: "cudaep_test.Panics", Opset: 3, Inputs: []kernels.TensorInfo{f32Info(2)}})
		})
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.ErrorIs(t, err, kernels.ErrPanicked)
		assert.Contains(t, err.Error(), "cudaep_test.Panics (opset 3)")
		assert.Contains(t, err.Error(), "integer divide by zero")
	})
	k, err := f.lib.Get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(2)}})
	require.NoError(t, err)
	assert.NotNil(t, k)
}
