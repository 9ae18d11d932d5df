package kernels_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

func TestAddAboveTwoToTheThirtyOneElementsOnTheGPU(t *testing.T) {
	// More than 2^31 elements (4 GiB of float16 per tensor): the broadcast kernel's 64-bit
	// index path. The simulator would need the same host memory again, so this runs on a GPU.
	if drivertest.BackendName() != "cuda" {
		t.Skip("needs 8.6 GB of device memory: runs with CUDAEP_TEST_BACKEND=cuda")
	}
	f := newFixture(t)
	const cols = 64
	const rows = (1<<31)/cols + 3
	a := make([]byte, rows*cols*2)
	for i := 0; i < rows*cols; i++ {
		binary.LittleEndian.PutUint16(a[2*i:], cudadrv.Float16Bits(float32(i%1024)))
	}
	b := make([]float64, cols)
	for j := range b {
		b[j] = float64(j) * 0.5 // exact in float16; sums above 1024 round, as the reference does
	}
	spec := kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Float16, rows, cols), info(kernels.Float16, cols)}}
	k := f.get(spec)
	require.Equal(t, "bcast", kernels.ElementwisePath(k))
	ta := f.upload(spec.Inputs[0], a)
	a = nil
	tb := f.uploadTyped(kernels.Float16, []int64{cols}, b)
	out := f.outputs(k)
	require.NoError(t, k.Execute([]kernels.Tensor{ta, tb}, out))
	got := f.download(out[0])
	for i := 0; i < rows*cols; i++ {
		want := cudadrv.Float16Bits(float32(i%1024) + float32(b[i%cols]))
		if g := binary.LittleEndian.Uint16(got[2*i:]); g != want {
			require.Failf(t, "wrong element", "element %d is %#04x, want %#04x", i, g, want)
		}
	}
}
