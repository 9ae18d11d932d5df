package cuda

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// Backend is cudadrv.Backend over the real CUDA driver. It is safe for concurrent use; every
// context-dependent call uses the context current on the calling OS thread (see the package
// documentation). A Backend is never closed: the libraries it loaded stay loaded for the life of
// the process, as unloading the CUDA driver under live contexts is not safe.
type Backend struct {
	drv driverTable

	// The lazily loaded libraries. Readers load the pointer (no lock, no allocation); the
	// first user loads the library under libMu and publishes the table.
	libMu sync.Mutex
	blas  atomic.Pointer[cublasTable]
	rtc   atomic.Pointer[nvrtcTable]
}

var _ cudadrv.Backend = (*Backend)(nil)

// Open loads libcuda.so.1, resolves every driver entry point the package uses and calls
// cuInit(0).
//
// # Errors
//
// When no driver library can be loaded, the error names what was tried, suggests the provider
// option backend=sim, and wraps a *cudadrv.LibraryError. A driver that lacks an entry point
// (older than CUDA 12.0) is refused with the missing symbol named. A failing cuInit (no device,
// a broken install) returns its *cudadrv.Error wrapped with the same advice.
func Open() (*Backend, error) {
	b := &Backend{}
	if err := openDriver(&b.drv); err != nil {
		return nil, err
	}
	if err := b.Init(); err != nil {
		return nil, fmt.Errorf("cuda: the CUDA driver loaded but did not initialize; %s: %w", errSuggestSim, err)
	}
	return b, nil
}

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// Init calls cuInit(0). Open already did; calling it again is harmless.
func (b *Backend) Init() error {
	return cudadrv.NewError("cuInit", b.drv.cuInit(0))
}

// DriverVersion returns the driver's CUDA version as 1000·major + 10·minor (13000 for 13.0).
func (b *Backend) DriverVersion() (int, error) {
	// The out-parameters of cold calls escape to the heap through the wrappers (one small
	// allocation); they are read only after the call returns.
	var v int32
	if err := cudadrv.NewError("cuDriverGetVersion", b.drv.cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices.
func (b *Backend) DeviceCount() (int, error) {
	var n int32
	if err := cudadrv.NewError("cuDeviceGetCount", b.drv.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// device returns the CUdevice of an ordinal.
func (b *Backend) device(ordinal int) (int32, error) {
	if ordinal < 0 || ordinal > math.MaxInt32 {
		return 0, &cudadrv.Error{Op: "cuDeviceGet", Result: cudadrv.ErrorInvalidDevice,
			Detail: fmt.Sprintf("ordinal %d", ordinal)}
	}
	var dev int32
	if err := cudadrv.NewError("cuDeviceGet", b.drv.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return 0, err
	}
	return dev, nil
}

// deviceNameMax is the name buffer's size; CUDA device names are far shorter.
const deviceNameMax = 256

// DeviceName returns the device's marketing name, such as "NVIDIA H200".
func (b *Backend) DeviceName(ordinal int) (string, error) {
	dev, err := b.device(ordinal)
	if err != nil {
		return "", err
	}
	buf := make([]byte, deviceNameMax)
	// The driver writes at most len(buf) bytes, NUL included, into buf during the call.
	if err := cudadrv.NewError("cuDeviceGetName", b.drv.cuDeviceGetName(&buf[0], int32(len(buf)), dev)); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// DeviceAttribute returns one attribute of the device.
func (b *Backend) DeviceAttribute(ordinal int, attr cudadrv.DeviceAttribute) (int, error) {
	dev, err := b.device(ordinal)
	if err != nil {
		return 0, err
	}
	var v int32
	if err := cudadrv.NewError("cuDeviceGetAttribute", b.drv.cuDeviceGetAttribute(&v, attr, dev)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceTotalMem returns the device's memory size in bytes.
func (b *Backend) DeviceTotalMem(ordinal int) (uint64, error) {
	dev, err := b.device(ordinal)
	if err != nil {
		return 0, err
	}
	var n uintptr
	if err := cudadrv.NewError("cuDeviceTotalMem_v2", b.drv.cuDeviceTotalMem_v2(&n, dev)); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// PrimaryCtxRetain retains the device's primary context and returns it; it is not made
// current. Each retain is balanced by one PrimaryCtxRelease.
func (b *Backend) PrimaryCtxRetain(ordinal int) (cudadrv.RawContext, error) {
	dev, err := b.device(ordinal)
	if err != nil {
		return 0, err
	}
	var ctx cudadrv.RawContext
	if err := cudadrv.NewError("cuDevicePrimaryCtxRetain", b.drv.cuDevicePrimaryCtxRetain(&ctx, dev)); err != nil {
		return 0, err
	}
	return ctx, nil
}

// PrimaryCtxRelease releases one retain of the device's primary context.
func (b *Backend) PrimaryCtxRelease(ordinal int) error {
	dev, err := b.device(ordinal)
	if err != nil {
		return err
	}
	return cudadrv.NewError("cuDevicePrimaryCtxRelease_v2", b.drv.cuDevicePrimaryCtxRelease_v2(dev))
}

// CtxSetCurrent makes ctx current on the calling OS thread (0 unbinds). The caller keeps its
// goroutine locked to the thread for as long as it relies on the binding.
func (b *Backend) CtxSetCurrent(ctx cudadrv.RawContext) error {
	f := cframe{fn: b.drv.addr[symCtxSetCurrent], a: [maxCCallArgs]uintptr{uintptr(ctx)}}
	return cudadrv.NewError("cuCtxSetCurrent", cudadrv.Result(ccall(&f)))
}

// CtxGetCurrent returns the context current on the calling OS thread, 0 when none is.
func (b *Backend) CtxGetCurrent() (cudadrv.RawContext, error) {
	var ctx cudadrv.RawContext
	if err := cudadrv.NewError("cuCtxGetCurrent", b.drv.cuCtxGetCurrent(&ctx)); err != nil {
		return 0, err
	}
	return ctx, nil
}

// CtxSynchronize waits for all work in the current context. Inside a live stream capture it
// fails with ErrorStreamCaptureUnsupported and invalidates the capture, as the driver does.
func (b *Backend) CtxSynchronize() error {
	f := cframe{fn: b.drv.addr[symCtxSynchronize]}
	return cudadrv.NewError("cuCtxSynchronize", cudadrv.Result(ccall(&f)))
}

// MemGetInfo returns the free and total device memory of the current context's device.
func (b *Backend) MemGetInfo() (free, total uint64, err error) {
	// One two-word heap block for both out-parameters: a single allocation.
	out := new([2]uintptr)
	if err := cudadrv.NewError("cuMemGetInfo_v2", b.drv.cuMemGetInfo_v2(&out[0], &out[1])); err != nil {
		return 0, 0, err
	}
	return uint64(out[0]), uint64(out[1]), nil
}

// StreamPriorityRange returns the current context's stream priorities: least is the lowest
// priority (numerically greatest), greatest the highest.
func (b *Backend) StreamPriorityRange() (least, greatest int, err error) {
	out := new([2]int32)
	if err := cudadrv.NewError("cuCtxGetStreamPriorityRange", b.drv.cuCtxGetStreamPriorityRange(&out[0], &out[1])); err != nil {
		return 0, 0, err
	}
	return int(out[0]), int(out[1]), nil
}

// Types the generated wrappers refer to that cudadrv does not declare.
type (
	// graphNode is a CUgraphNode.
	graphNode uintptr

	// nvrtcProgram is an nvrtcProgram handle.
	nvrtcProgram uintptr

	// nvrtcResult is an nvrtcResult status; zero is success.
	nvrtcResult int32
)

// graphExecUpdateResultInfo is CUgraphExecUpdateResultInfo (cuda.h, CUDA 12+):
//
//	typedef struct CUgraphExecUpdateResultInfo_st {
//	    CUgraphExecUpdateResult result;  // enum, 4 bytes, then 4 bytes of padding
//	    CUgraphNode errorNode;
//	    CUgraphNode errorFromNode;
//	} CUgraphExecUpdateResultInfo;
//
// 24 bytes on 64-bit targets; a test pins the offsets.
type graphExecUpdateResultInfo struct {
	result        int32
	_             int32
	errorNode     graphNode
	errorFromNode graphNode
}

// cString returns the bytes of buf up to its first NUL as a string.
func cString(buf []byte) string {
	for i, c := range buf {
		if c == 0 {
			return string(buf[:i])
		}
	}
	return string(buf)
}

// goStringMax bounds the scan of a C string the package did not allocate.
const goStringMax = 1 << 16

// goString copies the NUL-terminated C string at p (memory outside Go, such as a library's
// static message table) into a Go string; nil gives "".
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	// Safe: p points at a NUL-terminated string that the library keeps alive for the life of
	// the process; we read byte by byte up to the NUL and never past goStringMax.
	for n < goStringMax && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
