package ep

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// TestCheckTensorsTakesAnAbsentInput: an optional input a node leaves out before one it gives
// is the zero TensorInfo in the spec and the zero Tensor at Execute; any other tensor at a zero
// address is refused.
func TestCheckTensorsTakesAnAbsentInput(t *testing.T) {
	x := TensorInfo{DType: Float32, Shape: []int64{4}}
	ins := []Tensor{{TensorInfo: x, Ptr: 0x1000}, {}, {TensorInfo: x, Ptr: 0x2000}}
	want := []TensorInfo{x, {}, x}
	require.NoError(t, checkTensors("node", ins, want, nil, nil))

	ins[1] = Tensor{TensorInfo: x}
	err := checkTensors("node", ins, want, nil, nil)
	assert.ErrorIs(t, err, kernels.ErrTensorMismatch, "a present tensor where the input is absent")

	ins[1], want[1] = Tensor{TensorInfo: x}, x
	err = checkTensors("node", ins, want, nil, nil)
	assert.ErrorIs(t, err, kernels.ErrTensorMismatch)
	assert.ErrorContains(t, err, "zero device address", "a present input needs its bytes")
}
