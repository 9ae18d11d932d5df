package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

func TestBinaryOpsBroadcastAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		a, b []int64
		path string
	}{
		{"same shape", []int64{3, 5, 7}, []int64{3, 5, 7}, "same"},
		{"odd length", []int64{1031}, []int64{1031}, "same"},
		{"scalar right", []int64{4, 6}, nil, "bcast"},
		{"scalar left", nil, []int64{4, 6}, "bcast"},
		{"row", []int64{5, 9}, []int64{9}, "bcast"},
		{"column", []int64{5, 9}, []int64{5, 1}, "bcast"},
		{"outer product", []int64{5, 1}, []int64{1, 9}, "bcast"},
		{"4-D with ones", []int64{2, 1, 3, 1}, []int64{1, 4, 1, 5}, "bcast"},
		{"leading ones", []int64{1, 1, 7, 3}, []int64{7, 3}, "same"},
		{"six merged dimensions", []int64{2, 1, 2, 1, 2, 1}, []int64{1, 2, 1, 2, 1, 2}, "bcast"},
		{"rows of odd length", []int64{3, 1001}, []int64{1, 1001}, "bcast"},
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		for _, c := range cases {
			t.Run(op+"/"+c.name, func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: op, Opset: 14, Inputs: []kernels.TensorInfo{f32Info(c.a...), f32Info(c.b...)}}
				a := f.random(spec.Inputs[0].NumElements())
				b := f.random(spec.Inputs[1].NumElements())
				k, got := f.runF32(spec, a, b)
				ref, shape, ok := kernels.RefBinary(op, to64(a), c.a, to64(b), c.b)
				require.True(t, ok)
				assert.Equal(t, []kernels.TensorInfo{f32Info(shape...)}, k.Outputs())
				assert.Equal(t, c.path, kernels.ElementwisePath(k), "kernel path")
				requireClose(t, got, ref, boundElementwise, k.Name())
			})
		}
	}
}

func TestBinaryOpInPlace(t *testing.T) {
	f := newFixture(t)
	shape := []int64{17, 33}
	spec := kernels.Spec{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(shape...), f32Info(shape...)}}
	k := f.get(spec)
	a, b := f.random(17*33), f.random(17*33)
	ta, tb := f.uploadF32(shape, a), f.uploadF32(shape, b)
	require.NoError(t, k.Execute([]kernels.Tensor{ta, tb}, []kernels.Tensor{ta}))
	ref, _, _ := kernels.RefBinary("Mul", to64(a), shape, to64(b), shape)
	requireClose(t, f.downloadF32(ta), ref, boundElementwise, "in-place Mul")
}

func TestActivationsAgainstReference(t *testing.T) {
	f := newFixture(t)
	ops := []struct {
		op, ref string
		opset   int
		attrs   map[string]kernels.Attribute
	}{
		{"Relu", "Relu", 14, nil},
		{"Sigmoid", "Sigmoid", 13, nil},
		{"Tanh", "Tanh", 13, nil},
		{"Gelu", "Gelu", 20, nil},
		{"Gelu", "Gelu", 20, map[string]kernels.Attribute{"approximate": kernels.StringAttr("none")}},
		{"Gelu", "GeluTanh", 20, map[string]kernels.Attribute{"approximate": kernels.StringAttr("tanh")}},
	}
	for _, o := range ops {
		for _, shape := range [][]int64{{1}, {7, 13}, {4099}, {2, 3, 4, 5}} {
			t.Run(fmt.Sprintf("%s/%s/%v", o.op, o.ref, shape), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: o.op, Opset: o.opset, Inputs: []kernels.TensorInfo{f32Info(shape...)}, Attrs: o.attrs}
				x := f.random(spec.Inputs[0].NumElements())
				x[0] = max(x[0], -x[0]) // one positive input at least: Relu of all negatives is all zeros
				k, got := f.runF32(spec, x)
				assert.Equal(t, []kernels.TensorInfo{f32Info(shape...)}, k.Outputs())
				requireClose(t, got, kernels.RefUnary(o.ref, to64(x)), boundElementwise, k.Name())
			})
		}
	}
}

func TestGeluApproximationsDiffer(t *testing.T) {
	// The two Gelu variants must reach different kernels: on inputs where the formulas
	// differ by far more than float32 rounding, their outputs differ.
	f := newFixture(t)
	x := []float32{-2.5, -1.7, 1.3, 2.2, -0.9, 1.9}
	run := func(approx string) []float32 {
		spec := kernels.Spec{Op: "Gelu", Opset: 20, Inputs: []kernels.TensorInfo{f32Info(6)},
			Attrs: map[string]kernels.Attribute{"approximate": kernels.StringAttr(approx)}}
		_, got := f.runF32(spec, x)
		return got
	}
	assert.Greater(t, relDiff(run("tanh"), run("none")), 1e-4)
}

func TestIdentityCopiesEveryDType(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16, kernels.Float64, kernels.Int32, kernels.Int64, kernels.Bool} {
		t.Run(dt.String(), func(t *testing.T) {
			f := f.sub(t)
			info := kernels.TensorInfo{DType: dt, Shape: []int64{3, 37}}
			data := make([]byte, info.Bytes())
			for i := range data {
				data[i] = byte(1 + f.rng.IntN(250))
			}
			k := f.get(kernels.Spec{Op: "Identity", Opset: 21, Inputs: []kernels.TensorInfo{info}})
			in := f.upload(info, data)
			outs := f.outputs(k)
			require.NoError(t, k.Execute([]kernels.Tensor{in}, outs))
			assert.Equal(t, data, f.download(outs[0]))
			assert.True(t, k.CaptureSupport().IsSupported())
		})
	}
}
