package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// runNonZero executes NonZero on data (of info) and returns the kernel, the count it read
// back and the first rank·count indices.
func runNonZero(f *fixture, info kernels.TensorInfo, data []byte) (*kernels.NonZeroKernel, int64, []int64) {
	f.t.Helper()
	k, ok := f.get(kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{info}}).(*kernels.NonZeroKernel)
	require.True(f.t, ok, "NonZero's kernel is a *NonZeroKernel")
	rank := int64(len(info.Shape))
	require.Equal(f.t, []kernels.TensorInfo{
		{DType: kernels.Int64, Shape: []int64{rank, info.NumElements()}},
		{DType: kernels.Int64, Shape: []int64{1}},
	}, k.Outputs())
	in := f.upload(info, data)
	outs := f.outputs(k)
	require.NoError(f.t, k.Execute([]kernels.Tensor{in}, outs))
	nnz, err := k.Count(outs[1])
	require.NoError(f.t, err)
	shape, err := k.ReadShape(outs[1])
	require.NoError(f.t, err)
	require.Equal(f.t, []int64{rank, nnz}, shape)
	all := bytesI64(f.download(outs[0]))
	return k, nnz, all[:rank*nnz]
}

func TestNonZeroKnownPattern(t *testing.T) {
	f := newFixture(t)
	// 3×4, non-zeros at (0,1) (0,3) (1,0) (2,2) (2,3); a NaN counts, -0 does not.
	x := []float32{
		0, 1.5, 0, -2,
		7, 0, float32(math.Copysign(0, -1)), 0,
		0, 0, float32(math.NaN()), 0.25,
	}
	_, nnz, idx := runNonZero(f, f32Info(3, 4), drivertest.Float32Bytes(x))
	assert.Equal(t, int64(5), nnz)
	assert.Equal(t, []int64{
		0, 0, 1, 2, 2, // rows
		1, 3, 0, 2, 3, // columns
	}, idx)
}

func TestNonZeroDTypesAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		dt    kernels.DType
		shape []int64
	}{
		{kernels.Float32, []int64{5, 7, 300}}, // several 1024-element tiles
		{kernels.Float32, []int64{1031}},
		{kernels.Int32, []int64{4, 1, 9, 2}},
		{kernels.Int64, []int64{2, 3, 2, 3, 2, 3, 2, 3}},
		{kernels.Bool, []int64{33, 65}},
	} {
		t.Run(fmt.Sprintf("%s%v", c.dt, c.shape), func(t *testing.T) {
			f := f.sub(t)
			info := kernels.TensorInfo{DType: c.dt, Shape: c.shape}
			n := info.NumElements()
			flags := make([]bool, n)
			data := make([]byte, info.Bytes())
			for i := range flags {
				flags[i] = f.rng.IntN(10) < 7
				var v uint64
				if flags[i] {
					v = 1 + f.rng.Uint64N(1000)
				}
				switch c.dt {
				case kernels.Float32:
					binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(v)*0.37))
				case kernels.Int32:
					binary.LittleEndian.PutUint32(data[4*i:], uint32(-int32(v)))
				case kernels.Int64:
					binary.LittleEndian.PutUint64(data[8*i:], v<<33)
				case kernels.Bool:
					data[i] = byte(min(v, 1))
				}
			}
			want := kernels.RefNonZero(flags, c.shape)
			_, nnz, idx := runNonZero(f, info, data)
			assert.Equal(t, int64(len(want))/int64(len(c.shape)), nnz)
			assert.Equal(t, want, idx)
		})
	}
}

func TestNonZeroIsNotCapturable(t *testing.T) {
	f := newFixture(t)
	k := f.get(kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4)}})
	cs := k.CaptureSupport()
	assert.False(t, cs.IsSupported())
	assert.Contains(t, cs.Reason(), "device-to-host")
	assert.Equal(t, kernels.NonZeroReason, cs.Reason())

	relu := f.get(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(4)}})
	err := graphs.Audit([]graphs.Node{relu, k})
	require.ErrorIs(t, err, graphs.ErrRejected)
	assert.Contains(t, err.Error(), "rejected before begin_capture")
	assert.Contains(t, err.Error(), k.Name())
	assert.NoError(t, graphs.Audit([]graphs.Node{relu}))
}

func TestNonZeroCountRefusesWrongTensor(t *testing.T) {
	f := newFixture(t)
	k := f.get(kernels.Spec{Op: "NonZero", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(4)}}).(*kernels.NonZeroKernel)
	wrong := f.alloc(kernels.TensorInfo{DType: kernels.Int32, Shape: []int64{1}})
	_, err := k.Count(wrong)
	assert.ErrorIs(t, err, kernels.ErrTensorMismatch)
}
