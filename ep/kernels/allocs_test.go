package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

func TestExecuteAllocatesNothing(t *testing.T) {
	f := newFixture(t)
	if f.env.Sim != nil {
		// AllocsPerRun counts every goroutine's allocations, and the sim runs kernels as Go
		// functions on the stream's worker goroutine while the loop measures.
		t.Skip("asserted on the GPU (CUDAEP_TEST_BACKEND=cuda): the sim's kernels allocate on its stream worker during the measurement")
	}
	specs := []kernels.Spec{
		{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(64, 32)}},
		{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(32)}},
		{Op: "Gelu", Opset: 20, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(8, 16, 4)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}},
		{Op: "Identity", Opset: 21, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(2, 1, 8, 16), f32Info(3, 16, 4)}},
		{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(1, 1, 1024), f32Info(1024, 64)}}, // GEMV, K split
		{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(8, 16), f32Info(4, 16), f32Info(8, 1)}, Attrs: map[string]kernels.Attribute{"transB": kernels.IntAttr(1)}},
		{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(32), f32Info(32)}},
		{Op: "com.microsoft.SkipLayerNormalization", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(4, 16, 32), f32Info(16, 32), f32Info(32)}},
		{Op: "com.microsoft.FastGelu", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(32)}},
		{Op: "ReduceSum", Opset: 11, Inputs: []kernels.TensorInfo{f32Info(64, 32)}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(1)}},
		{Op: "ReduceMean", Opset: 11, Inputs: []kernels.TensorInfo{f32Info(64, 32)}, Attrs: map[string]kernels.Attribute{"axes": kernels.IntsAttr(0)}},
		{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(64, 8), f32Info(64, 1)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}},
		{Op: "Split", Opset: 13, NumOutputs: 2, Inputs: []kernels.TensorInfo{f32Info(64, 32)}, Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(1)}},
		{Op: "Gather", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32), {DType: kernels.Int64, Shape: []int64{5}}}},
		{Op: "Trilu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
		{Op: "Shape", Opset: 15, Inputs: []kernels.TensorInfo{f32Info(2, 3, 4, 5, 6, 7, 8, 9, 10)}},
		{Op: "ConstantOfShape", Opset: 9, Inputs: []kernels.TensorInfo{{DType: kernels.Int64, Shape: []int64{2}}}, Consts: map[int]kernels.Const{0: kernels.IntsConst(64, 32)}},
		{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{{DType: kernels.Int64, Shape: []int64{64, 32}}, {DType: kernels.Int64, Shape: []int64{32}}}},
		{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(1, 4, 8, 64), f32Info(1, 1, 8, 64), f32Info(8, 64)}},
		{Op: "cudaep.RotateHalfPair", Opset: 1, NumOutputs: 2, Inputs: []kernels.TensorInfo{f32Info(1, 4, 1, 64), f32Info(1, 2, 1, 64), f32Info(64), f32Info(64)}},
		{Op: "cudaep.SiluMul", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(64, 32), f32Info(64, 32)}},
		{Op: "cudaep.WherePair", Opset: 1, NumOutputs: 2, Inputs: []kernels.TensorInfo{{DType: kernels.Bool, Shape: []int64{1, 1, 16, 1}},
			f32Info(1, 2, 1, 8), f32Info(1, 2, 16, 8), f32Info(1, 2, 1, 8), f32Info(1, 2, 16, 8)}},
		{Op: "cudaep.MatMulGroup", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(1, 1024), f32Info(1024, 64), f32Info(1024, 32)}},
		{Op: "cudaep.SkipNormMatMulGroup", Opset: 1, NumOutputs: 3, Inputs: []kernels.TensorInfo{f32Info(1, 1024), f32Info(1, 1024), f32Info(1024), f32Info(1024, 64), f32Info(1024, 32)}},
		{Op: "cudaep.SiluMulMatMulGroup", Opset: 1, Inputs: []kernels.TensorInfo{f32Info(1, 1024), f32Info(1, 1024), f32Info(1024, 64)}},
		// MatMulNBits' decode kernel and its prefill (bias broadcast, dequantization, cuBLAS).
		nbitsCase{dt: kernels.Float32, bits: 4, bs: 32, k: 1024, n: 64, lead: []int64{1}, zp: "packed", bias: true}.spec(),
		nbitsCase{dt: kernels.Float32, bits: 4, bs: 32, k: 256, n: 64, lead: []int64{32}, zp: "packed", bias: true}.spec(),
		nbitsGroupSpec([]nbitsCase{{dt: kernels.Float32, bits: 4, bs: 32, k: 1024, n: 64, lead: []int64{1}}, {dt: kernels.Float32, bits: 4, bs: 32, k: 1024, n: 16, lead: []int64{1}}}),
		// And its tensor-core decode kernel (float16, 4 bits), alone and for a group.
		nbitsCase{dt: kernels.Float16, bits: 4, bs: 32, k: 1024, n: 64, lead: []int64{1}, zp: "packed", bias: true}.spec(),
		nbitsGroupSpec([]nbitsCase{{dt: kernels.Float16, bits: 4, bs: 128, k: 1024, n: 64, lead: []int64{1}}, {dt: kernels.Float16, bits: 4, bs: 128, k: 1024, n: 16, lead: []int64{1}}}),
		// The kernels that record data faults: their two more arguments allocate nothing either
		// (the zeros their integer inputs hold here are bad data for Div and GroupQueryAttention).
		{Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{{DType: kernels.Int64, Shape: []int64{64, 32}}, {DType: kernels.Int64, Shape: []int64{32}}}},
		{Op: "Div", Opset: 14, Inputs: []kernels.TensorInfo{{DType: kernels.Int32, Shape: []int64{64}}, {DType: kernels.Int32, Shape: []int64{64}}}},
		{Op: "com.microsoft.RotaryEmbedding", Opset: 1, Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(2)},
			Inputs: []kernels.TensorInfo{f32Info(1, 4, 64), {DType: kernels.Int64, Shape: []int64{1}}, f32Info(16, 16), f32Info(16, 16)}},
		{Op: "com.microsoft.GroupQueryAttention", Opset: 1, Attrs: map[string]kernels.Attribute{"num_heads": kernels.IntAttr(2), "kv_num_heads": kernels.IntAttr(1)},
			Inputs: []kernels.TensorInfo{f32Info(1, 1, 64), f32Info(1, 1, 32), f32Info(1, 1, 32), f32Info(1, 1, 16, 32), f32Info(1, 1, 16, 32),
				{DType: kernels.Int32, Shape: []int64{1}}, {DType: kernels.Int32}}},
	}
	for _, spec := range specs {
		k := f.get(spec)
		ins := make([]kernels.Tensor, len(spec.Inputs))
		for i, in := range spec.Inputs {
			if in.DType == 0 {
				continue // an absent optional input: the zero Tensor
			}
			if in.DType != kernels.Float32 {
				ins[i] = f.alloc(in) // any values do: Gather's kernel zeroes rows of indices out of range
				require.NoError(t, f.stream.Memset8Async(ins[i].Ptr, 0, uint64(in.Bytes())))
				continue
			}
			ins[i] = f.uploadF32(in.Shape, f.random(in.NumElements()))
		}
		outs := f.outputs(k)
		require.NoError(t, k.Execute(ins, outs))
		allocs := testing.AllocsPerRun(50, func() {
			if err := k.Execute(ins, outs); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s: allocations per Execute", k.Name())
		_ = f.takeFault() // synchronizes; zero divisors and lengths are expected faults here
	}
}
