package ep

import "github.com/cudaep/cudaep/paging"

// The paging package's values a host passes through ep (the types are aliased beside the
// functions that take them: residency.go, double_buffer.go).
type (
	// Region is a byte range of an opened external-data file.
	Region = paging.Region
	// WeightDType is a lazy weight's element type (ONNX TensorProto numbering).
	WeightDType = paging.DType
	// Boundary is the kind of operator boundary a lazy weight feeds (MatMul, Gather, …); it
	// decides whether the weight may be paged.
	Boundary = paging.Boundary
)

// Transfer modes of a DoubleBuffer.
const (
	// ModeZeroCopy registers the files' extents with the driver and copies from them, falling
	// back to staging on a registration error.
	ModeZeroCopy = paging.ModeZeroCopy
	// ModeStaging always copies through pinned staging memory.
	ModeStaging = paging.ModeStaging
	// ModeZeroCopyOnly copies from registered extents only: a layer that cannot be
	// registered fails its fill instead of staging. It reserves no staging memory.
	ModeZeroCopyOnly = paging.ModeZeroCopyOnly
)

// DoubleBufferSlots is the number of slots of a DoubleBuffer.
const DoubleBufferSlots = paging.SlotCount

// Decline says why paging declined a layer (the host loads it the ordinary way); its Reason is
// DeclineNone when the layer was routed.
type Decline = paging.Decline

// DeclineReason is why a layer was declined.
type DeclineReason = paging.DeclineReason

// DeclineNone is the Reason of a routed layer.
const DeclineNone = paging.DeclineNone

// Fallback records why a zero-copy fill fell back to staging: the layer, the slot, the mapping
// and the driver's registration error.
type Fallback = paging.Fallback
