package cudadrv

// Raw handles as a backend hands them out. They are opaque numbers: the cuda backend's are the
// driver's pointers, the sim's are table indices. Zero is never a valid handle.
type (
	RawContext   uintptr // CUcontext
	RawStream    uintptr // CUstream
	RawEvent     uintptr // CUevent
	RawModule    uintptr // CUmodule
	RawFunction  uintptr // CUfunction
	RawGraph     uintptr // CUgraph
	RawGraphExec uintptr // CUgraphExec
	RawBLAS      uintptr // cublasHandle_t
)

// DevicePtr is a device address (CUdeviceptr). Arithmetic on it is byte arithmetic.
type DevicePtr uint64

// Dim3 is a grid or block extent.
type Dim3 struct{ X, Y, Z uint32 }

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// The device attributes the project reads.
const (
	AttrMultiprocessorCount    DeviceAttribute = 16
	AttrComputeCapabilityMajor DeviceAttribute = 75
	AttrComputeCapabilityMinor DeviceAttribute = 76
)

// StreamFlags are CUstream_flags.
type StreamFlags uint32

// StreamNonBlocking makes a stream that does not synchronize with the legacy default stream.
const StreamNonBlocking StreamFlags = 0x1

// EventFlags are CUevent_flags.
type EventFlags uint32

// Event flags, with the driver's values.
const (
	EventDefault       EventFlags = 0x0
	EventBlockingSync  EventFlags = 0x1
	EventDisableTiming EventFlags = 0x2
)

// HostAllocFlags are the cuMemHostAlloc flags.
type HostAllocFlags uint32

// Host allocation flags, with the driver's values.
const (
	// HostAllocPortable pins the memory for every context, not only the current one.
	HostAllocPortable HostAllocFlags = 0x01
	// HostAllocDeviceMap maps the memory into the device address space: its device address
	// comes from MemHostGetDevicePointer, and stream work and kernels may read and write it.
	HostAllocDeviceMap HostAllocFlags = 0x02
	// HostAllocWriteCombined allocates write-combined memory (fast for the device to read,
	// slow for the host to read).
	HostAllocWriteCombined HostAllocFlags = 0x04
)

// HostRegisterFlags are the cuMemHostRegister flags.
type HostRegisterFlags uint32

// Host registration flags, with the driver's values.
const (
	HostRegisterPortable HostRegisterFlags = 0x01
	HostRegisterReadOnly HostRegisterFlags = 0x08
)

// CaptureMode is a CUstreamCaptureMode.
type CaptureMode int32

// Capture modes, with the driver's values.
const (
	CaptureModeGlobal      CaptureMode = 0
	CaptureModeThreadLocal CaptureMode = 1
	CaptureModeRelaxed     CaptureMode = 2
)

// CaptureStatus is a CUstreamCaptureStatus.
type CaptureStatus int32

// Capture statuses, with the driver's values.
const (
	CaptureStatusNone        CaptureStatus = 0
	CaptureStatusActive      CaptureStatus = 1
	CaptureStatusInvalidated CaptureStatus = 2
)

// String names the status as the driver does.
func (s CaptureStatus) String() string {
	switch s {
	case CaptureStatusNone:
		return "CU_STREAM_CAPTURE_STATUS_NONE"
	case CaptureStatusActive:
		return "CU_STREAM_CAPTURE_STATUS_ACTIVE"
	case CaptureStatusInvalidated:
		return "CU_STREAM_CAPTURE_STATUS_INVALIDATED"
	}
	return "CUstreamCaptureStatus(?)"
}

// InstantiateFlags are CUgraphInstantiate_flags.
type InstantiateFlags uint64

// Instantiate flags, with the driver's values.
const (
	InstantiateAutoFreeOnLaunch InstantiateFlags = 1
	InstantiateUpload           InstantiateFlags = 2
	InstantiateDeviceLaunch     InstantiateFlags = 4
	InstantiateUseNodePriority  InstantiateFlags = 8
)

// BLASOp is a cublasOperation_t.
type BLASOp int32

// Transpose choices for GEMM operands.
const (
	OpN BLASOp = 0 // as stored
	OpT BLASOp = 1 // transposed
)

// MathMode is a cublasMath_t.
type MathMode int32

// Math modes, with the library's values.
const (
	MathDefault           MathMode = 0
	MathTF32TensorOp      MathMode = 3
	MathDisallowReduction MathMode = 16
)

// BLASDataType is a cudaDataType_t: the element type of the matrices of a GemmEx call.
type BLASDataType int32

// The matrix element types GemmEx takes, with the library's values.
const (
	BLASFloat32  BLASDataType = 0  // CUDA_R_32F
	BLASFloat16  BLASDataType = 2  // CUDA_R_16F
	BLASBFloat16 BLASDataType = 14 // CUDA_R_16BF
)

// String names the type as CUDA does.
func (t BLASDataType) String() string {
	switch t {
	case BLASFloat32:
		return "CUDA_R_32F"
	case BLASFloat16:
		return "CUDA_R_16F"
	case BLASBFloat16:
		return "CUDA_R_16BF"
	}
	return "cudaDataType(?)"
}

// GemmParams describes one GEMM (BatchCount 0 or 1) or strided-batched GEMM in cuBLAS's
// column-major convention: C = Alpha·op(A)·op(B) + Beta·C with op(A) M×K, op(B) K×N, C M×N.
// Backends read Alpha and Beta through pointers into this struct, so callers on a hot path
// keep one GemmParams on the heap and reuse it (no allocation per call).
type GemmParams struct {
	TransA, TransB BLASOp
	M, N, K        int
	Alpha, Beta    float32
	A, B, C        DevicePtr
	LDA, LDB, LDC  int
	// Strided-batched only: element strides between consecutive matrices and the count.
	StrideA, StrideB, StrideC int64
	BatchCount                int
	// Type is the element type of A, B and C for GemmEx and GemmStridedBatchedEx (the Sgemm
	// calls ignore it: their matrices are float32). Products accumulate in float32 whatever
	// the type (CUBLAS_COMPUTE_32F), on tensor cores for float16 and bfloat16.
	Type BLASDataType
}

// Backend is the flat driver surface a device implementation provides: one method per driver
// entry point, raw handles in and out, host memory as byte slices. The wrappers in this package
// are the API; Backend is what cudadrv/cuda and cudadrv/sim implement.
//
// Errors are *Error (driver), *BLASError (cuBLAS), *CompileError (NVRTC), *LibraryError
// (a library that could not be loaded) or wrap ErrUnsupported. A method that succeeds returns
// a nil error and, on the hot calls (LaunchKernel, the *Async copies, EventRecord,
// GraphLaunch, StreamWriteValue32, Sgemm, GemmEx), allocates nothing.
//
// Host slices passed to asynchronous copies must stay alive and unchanged until the stream
// work that reads or writes them has completed; the backend keeps no reference after that.
// Methods may be called from any goroutine; calls that need a context use the one current on
// the calling OS thread (CtxSetCurrent), exactly as the driver does.
type Backend interface {
	// Name is "cuda" or "sim".
	Name() string

	Init() error
	DriverVersion() (int, error)
	DeviceCount() (int, error)
	DeviceName(ordinal int) (string, error)
	DeviceAttribute(ordinal int, attr DeviceAttribute) (int, error)
	DeviceTotalMem(ordinal int) (uint64, error)

	// DeviceCanAccessPeer reports whether device ordinal can access the memory of device peer
	// directly (cuDeviceCanAccessPeer). A device and itself answer false, as the driver does.
	DeviceCanAccessPeer(ordinal, peer int) (bool, error)

	PrimaryCtxRetain(ordinal int) (RawContext, error)
	PrimaryCtxRelease(ordinal int) error
	CtxSetCurrent(ctx RawContext) error
	CtxGetCurrent() (RawContext, error)
	CtxSynchronize() error
	// CtxEnablePeerAccess lets the current context access the memory of peer, a context of
	// another device (cuCtxEnablePeerAccess, flags 0). Enabling a pair that is enabled returns
	// an *Error with ErrorPeerAccessAlreadyEnabled, as the driver does (Context.EnablePeerAccess
	// takes that for success); a pair the devices cannot form, ErrorPeerAccessUnsupported.
	CtxEnablePeerAccess(peer RawContext) error
	MemGetInfo() (free, total uint64, err error)
	StreamPriorityRange() (least, greatest int, err error)

	StreamCreate(flags StreamFlags, priority int) (RawStream, error)
	StreamDestroy(s RawStream) error
	StreamSynchronize(s RawStream) error
	// StreamQuery returns nil when all work is done, an *Error with ErrorNotReady when not.
	StreamQuery(s RawStream) error
	StreamWaitEvent(s RawStream, e RawEvent) error
	// StreamWriteValue32 queues a write of value to the 4-byte-aligned device address addr on
	// s (cuStreamWriteValue32_v2 with CU_STREAM_WRITE_VALUE_DEFAULT): it happens after all
	// earlier work of s, behind a memory fence that makes that work's writes visible first. On
	// a capturing stream it is recorded as a graph node. It is a hot call: it allocates
	// nothing.
	StreamWriteValue32(s RawStream, addr DevicePtr, value uint32) error

	EventCreate(flags EventFlags) (RawEvent, error)
	EventDestroy(e RawEvent) error
	EventRecord(e RawEvent, s RawStream) error
	// EventQuery returns nil when the event has completed, ErrorNotReady when not.
	EventQuery(e RawEvent) error
	EventSynchronize(e RawEvent) error
	EventElapsedTime(start, end RawEvent) (milliseconds float32, err error)

	MemAlloc(size uint64) (DevicePtr, error)
	MemFree(p DevicePtr) error
	// MemHostAlloc returns page-locked host memory of size bytes; the slice's memory is not
	// Go-managed on the cuda backend and stays valid until MemFreeHost. It is
	// MemHostAllocFlags(size, HostAllocPortable).
	MemHostAlloc(size uint64) ([]byte, error)
	// MemHostAllocFlags is MemHostAlloc with the cuMemHostAlloc flags given; memory from it is
	// freed with MemFreeHost too.
	MemHostAllocFlags(size uint64, flags HostAllocFlags) ([]byte, error)
	// MemHostGetDevicePointer returns the device address of p's first byte, which must lie in
	// memory allocated with HostAllocDeviceMap (cuMemHostGetDevicePointer_v2).
	MemHostGetDevicePointer(p []byte) (DevicePtr, error)
	MemFreeHost(p []byte) error
	MemHostRegister(p []byte, flags HostRegisterFlags) error
	MemHostUnregister(p []byte) error

	MemcpyHtoD(dst DevicePtr, src []byte) error
	MemcpyDtoH(dst []byte, src DevicePtr) error
	MemcpyDtoD(dst, src DevicePtr, size uint64) error
	MemcpyHtoDAsync(dst DevicePtr, src []byte, s RawStream) error
	MemcpyDtoHAsync(dst []byte, src DevicePtr, s RawStream) error
	MemcpyDtoDAsync(dst, src DevicePtr, size uint64, s RawStream) error
	// MemcpyPeerAsync queues on s a copy of size bytes from src, device memory of srcCtx, to
	// dst, device memory of dstCtx (cuMemcpyPeerAsync); the contexts may be of two devices.
	// It is a hot call: it allocates nothing.
	MemcpyPeerAsync(dst DevicePtr, dstCtx RawContext, src DevicePtr, srcCtx RawContext, size uint64, s RawStream) error
	MemsetD8(dst DevicePtr, value byte, count uint64) error
	MemsetD8Async(dst DevicePtr, value byte, count uint64, s RawStream) error
	MemsetD32Async(dst DevicePtr, value uint32, count uint64, s RawStream) error

	// ModuleLoadData loads PTX text or a cubin image.
	ModuleLoadData(image []byte) (RawModule, error)
	ModuleUnload(m RawModule) error
	ModuleGetFunction(m RawModule, name string) (RawFunction, error)
	LaunchKernel(f RawFunction, grid, block Dim3, sharedMem uint32, s RawStream, args *KernelArgs) error

	StreamBeginCapture(s RawStream, mode CaptureMode) error
	StreamEndCapture(s RawStream) (RawGraph, error)
	StreamCaptureStatus(s RawStream) (CaptureStatus, error)
	GraphNodeCount(g RawGraph) (int, error)
	GraphInstantiate(g RawGraph, flags InstantiateFlags) (RawGraphExec, error)
	GraphUpload(e RawGraphExec, s RawStream) error
	GraphLaunch(e RawGraphExec, s RawStream) error
	// GraphExecUpdate updates e in place from g; an *Error with ErrorGraphExecUpdateFailure
	// means the topology differs and e must be re-instantiated.
	GraphExecUpdate(e RawGraphExec, g RawGraph) error
	GraphExecDestroy(e RawGraphExec) error
	GraphDestroy(g RawGraph) error

	BLASCreate() (RawBLAS, error)
	BLASDestroy(h RawBLAS) error
	BLASSetStream(h RawBLAS, s RawStream) error
	BLASSetMathMode(h RawBLAS, mode MathMode) error
	Sgemm(h RawBLAS, p *GemmParams) error
	SgemmStridedBatched(h RawBLAS, p *GemmParams) error
	// GemmEx and GemmStridedBatchedEx are Sgemm and SgemmStridedBatched over matrices of
	// p.Type with float32 accumulation (cublasGemmEx, cublasGemmStridedBatchedEx).
	GemmEx(h RawBLAS, p *GemmParams) error
	GemmStridedBatchedEx(h RawBLAS, p *GemmParams) error

	// CompilePTX compiles CUDA C source to PTX with NVRTC. On a compile error it returns a
	// *CompileError carrying the log.
	CompilePTX(source, name string, options []string) ([]byte, error)
}
