package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

func TestGetChecksConstantInputs(t *testing.T) {
	f := newFixture(t)
	i64 := kernels.TensorInfo{DType: kernels.Int64, Shape: []int64{3}}
	f32 := f32Info(2, 3)
	cases := []struct {
		name   string
		inputs []kernels.TensorInfo
		consts map[int]kernels.Const
		want   []string
	}{
		{"index past the inputs", []kernels.TensorInfo{f32}, map[int]kernels.Const{1: kernels.IntsConst(1)},
			[]string{"Identity", "Consts has an entry for input 1", "1 inputs"}},
		{"negative index", []kernels.TensorInfo{f32}, map[int]kernels.Const{-1: kernels.IntsConst(1)},
			[]string{"input -1"}},
		{"count", []kernels.TensorInfo{i64}, map[int]kernels.Const{0: kernels.IntsConst(1, 2)},
			[]string{"input 0 (input)", "int64[3]", "2 values in Const.Ints, want 3"}},
		{"ints for a float input", []kernels.TensorInfo{f32}, map[int]kernels.Const{0: kernels.IntsConst(1, 2, 3, 4, 5, 6)},
			[]string{"input 0 (input)", "float32[2,3]", "must be in Const.Floats"}},
		{"floats for an int input", []kernels.TensorInfo{i64}, map[int]kernels.Const{0: kernels.FloatsConst(1, 2, 3)},
			[]string{"int64[3]", "must be in Const.Ints"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.lib.Get(kernels.Spec{Op: "Identity", Opset: 16, Inputs: c.inputs, Consts: c.consts})
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	// Right entries are accepted, and ops that do not need them ignore them.
	_, err := f.lib.Get(kernels.Spec{Op: "Identity", Opset: 16, Inputs: []kernels.TensorInfo{i64}, Consts: map[int]kernels.Const{0: kernels.IntsConst(4, 5, 6)}})
	assert.NoError(t, err)
	_, err = f.lib.Get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32}, Consts: map[int]kernels.Const{0: kernels.FloatsConst(1, 2, 3, 4, 5, 6)}})
	assert.NoError(t, err)
}

func TestConstConstructorsCopy(t *testing.T) {
	v := []int64{1, 2}
	c := kernels.IntsConst(v...)
	v[0] = 9
	assert.Equal(t, []int64{1, 2}, c.Ints)
	assert.Nil(t, c.Floats)
	fv := []float64{0.5}
	fc := kernels.FloatsConst(fv...)
	fv[0] = 9
	assert.Equal(t, []float64{0.5}, fc.Floats)
	assert.Nil(t, fc.Ints)
}
