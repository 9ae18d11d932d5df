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

// Decline is what PrefetchWeight says of a layer: the zero Decline (Reason DeclineNone) when it
// was routed through the double buffer, else why paging declined it (the host loads it the
// ordinary way).
type Decline = paging.Decline

// DeclineReason is why a layer was declined (Decline.Reason).
type DeclineReason = paging.DeclineReason

// The decline reasons.
const (
	// DeclineNone is the Reason of a routed layer.
	DeclineNone = paging.DeclineNone
	// DeclineDisabled: the prefill double buffer is off (the default).
	DeclineDisabled = paging.DeclineDisabled
	// DeclineBoundary: the weight's boundary is not eligible for paging.
	DeclineBoundary = paging.DeclineBoundary
	// DeclineOversize: the layer is larger than the slots or than half the device byte budget.
	DeclineOversize = paging.DeclineOversize
	// DeclinePoolCapacity: two staging buffers for the layer exceed the pinned pool's cap.
	DeclinePoolCapacity = paging.DeclinePoolCapacity
	// DeclineBusy: every slot holds a layer not yet released, or is quarantined
	// (Provider.RecoverWeights puts quarantined slots back in service).
	DeclineBusy = paging.DeclineBusy
)

// TransferPath is how a fill moved a layer's bytes to its slot (LayerPath.Path, SlotView.Path,
// PagedWeight.Path).
type TransferPath = paging.Path

// The transfer paths.
const (
	// PathStaging copied the file bytes into pinned staging memory, then to the device.
	PathStaging = paging.PathStaging
	// PathZeroCopy copied to the device straight from the file's registered pages.
	PathZeroCopy = paging.PathZeroCopy
	// PathFallback tried zero-copy, could not register an extent and staged the rest (the
	// Fallback says why).
	PathFallback = paging.PathFallback
)

// Fallback records why a zero-copy fill fell back to staging: the layer, the slot, the mapping
// and the driver's registration error.
type Fallback = paging.Fallback
