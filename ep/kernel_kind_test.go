package ep_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
)

func TestIsNonZeroTellsNonZeroKernelsApart(t *testing.T) {
	p := newProvider(t)
	nz := getKernel(t, p, "NonZero", 13, f32(4))
	relu := getKernel(t, p, "Relu", 14, f32(4))
	assert.True(t, nz.IsNonZero())
	assert.False(t, relu.IsNonZero())
	_, err := relu.NonZeroCount(ep.Tensor{TensorInfo: ep.TensorInfo{DType: kernels.Int64, Shape: []int64{1}}})
	assert.ErrorContains(t, err, "is not a NonZero kernel")
}
