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
		{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(8, 16), f32Info(4, 16), f32Info(8, 1)}, Attrs: map[string]kernels.Attribute{"transB": kernels.IntAttr(1)}},
		{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(64, 32)}},
	}
	for _, spec := range specs {
		k := f.get(spec)
		ins := make([]kernels.Tensor, len(spec.Inputs))
		for i, in := range spec.Inputs {
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
		require.NoError(t, f.stream.Synchronize())
	}
}
