package ep

import "github.com/cudaep/cudaep/paging"

// The boundaries a lazy weight may feed (WeightSpec.Boundary): the kind of operator that
// consumes it, which decides whether the residency may page it.
//
// A weight's element type (WeightSpec.DType, a WeightDType) is numbered as ONNX's
// TensorProto.DataType, as a kernel tensor's DType is, so a host names it with the same
// constants: WeightDType(Float32) is float32.
const (
	// BoundaryMatMul is a dense MatMul/Gemm operand, sized by its element count: pageable.
	BoundaryMatMul = paging.BoundaryMatMul
	// BoundaryGather is an embedding table read by Gather at data-dependent rows for every
	// token: not pageable (it stays resident).
	BoundaryGather = paging.BoundaryGather
	// BoundaryBlockQuantizedMoe is a whole layer of block-quantized mixture-of-experts
	// weights, one opaque device image that may declare its own byte count: pageable.
	BoundaryBlockQuantizedMoe = paging.BoundaryBlockQuantizedMoe
	// BoundaryBlockQuantizedMatMul is a block-quantized dense weight consumed as one packed
	// image: pageable.
	BoundaryBlockQuantizedMatMul = paging.BoundaryBlockQuantizedMatMul
)
