package ep_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/paging"
)

// TestWeightBoundariesArePagingsOwn: the boundaries a host names through ep are the ones the
// residency routes on, pageable exactly where paging says.
func TestWeightBoundariesArePagingsOwn(t *testing.T) {
	tests := []struct {
		got      ep.Boundary
		want     paging.Boundary
		pageable bool
	}{
		{ep.BoundaryMatMul, paging.BoundaryMatMul, true},
		{ep.BoundaryGather, paging.BoundaryGather, false},
		{ep.BoundaryBlockQuantizedMoe, paging.BoundaryBlockQuantizedMoe, true},
		{ep.BoundaryBlockQuantizedMatMul, paging.BoundaryBlockQuantizedMatMul, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got)
		assert.Equal(t, tt.pageable, tt.got.Pageable(), tt.got.String())
	}
}

// TestWeightDTypesShareTheKernelsNumbering: a kernel element type converts to the lazy weight
// type of the same name (both are numbered as ONNX's TensorProto.DataType), as
// weight_boundaries.go promises hosts.
func TestWeightDTypesShareTheKernelsNumbering(t *testing.T) {
	tests := []struct {
		kernel ep.DType
		weight ep.WeightDType
	}{
		{ep.Float32, paging.Float32}, {ep.Float16, paging.Float16}, {ep.BFloat16, paging.BFloat16},
		{ep.Float64, paging.Float64}, {ep.Int32, paging.Int32}, {ep.Int64, paging.Int64},
		{ep.Bool, paging.Bool},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.weight, ep.WeightDType(tt.kernel), tt.weight.String())
	}
}
