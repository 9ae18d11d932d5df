package cuda

import (
	"math"
	"runtime"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// validHostAllocFlags are the cuMemHostAlloc flags: CU_MEMHOSTALLOC_PORTABLE, _DEVICEMAP and
// _WRITECOMBINED.
const validHostAllocFlags = cudadrv.HostAllocPortable | cudadrv.HostAllocDeviceMap | cudadrv.HostAllocWriteCombined

// MemAlloc allocates size bytes of device memory in the current context. A size of 0 is
// refused by the driver (ErrorInvalidValue).
func (b *Backend) MemAlloc(size uint64) (cudadrv.DevicePtr, error) {
	var p cudadrv.DevicePtr
	if err := cudadrv.NewError("cuMemAlloc_v2", b.drv.cuMemAlloc_v2(&p, uintptr(size))); err != nil {
		return 0, err
	}
	return p, nil
}

// MemFree frees device memory from MemAlloc. The driver synchronizes as needed.
func (b *Backend) MemFree(p cudadrv.DevicePtr) error {
	return cudadrv.NewError("cuMemFree_v2", b.drv.cuMemFree_v2(p))
}

// MemHostAlloc allocates size bytes of page-locked (pinned) host memory, portable across
// contexts (CU_MEMHOSTALLOC_PORTABLE: a pool outlives any one context binding), and returns it
// as a slice. It is MemHostAllocFlags(size, cudadrv.HostAllocPortable).
//
// # Ownership
//
// The slice's memory belongs to the driver, not to Go: the garbage collector neither scans nor
// frees it, and it stays valid until MemFreeHost is given this same slice. Using it afterwards
// is a use-after-free. Allocation is slow (about 0.45 s per 512 MiB): build pools once.
//
// # Errors
//
// A size of 0 or one that does not fit an int is ErrorInvalidValue.
func (b *Backend) MemHostAlloc(size uint64) ([]byte, error) {
	return b.MemHostAllocFlags(size, cudadrv.HostAllocPortable)
}

// MemHostAllocFlags is MemHostAlloc with the cuMemHostAlloc flags given; its ownership rules
// are MemHostAlloc's. With cudadrv.HostAllocDeviceMap the memory is also mapped into the device
// address space (MemHostGetDevicePointer returns its device address).
//
// # Errors
//
// MemHostAlloc's, and unknown flag bits: ErrorInvalidValue.
func (b *Backend) MemHostAllocFlags(size uint64, flags cudadrv.HostAllocFlags) ([]byte, error) {
	if size == 0 || size > math.MaxInt || flags&^validHostAllocFlags != 0 {
		return nil, cudadrv.NewError("cuMemHostAlloc", cudadrv.ErrorInvalidValue)
	}
	// p receives a driver address; an unsafe.Pointer may hold a non-Go address (the
	// collector ignores it). It escapes through the wrapper: one allocation on this cold call.
	var p unsafe.Pointer
	if err := cudadrv.NewError("cuMemHostAlloc", b.drv.cuMemHostAlloc(unsafe.Pointer(&p), uintptr(size), uint32(flags))); err != nil {
		return nil, err
	}
	// Safe: the driver returned size bytes of host memory at p, valid until cuMemFreeHost.
	return unsafe.Slice((*byte)(p), int(size)), nil
}

// MemHostGetDevicePointer returns the device address of p's first byte, which must lie in
// memory from MemHostAllocFlags with cudadrv.HostAllocDeviceMap (cuMemHostGetDevicePointer_v2,
// flags 0). With unified addressing the address may equal the host address; callers use the
// one returned.
//
// # Errors
//
// An empty slice is ErrorInvalidValue, as is memory that is not mapped pinned memory.
func (b *Backend) MemHostGetDevicePointer(p []byte) (cudadrv.DevicePtr, error) {
	if len(p) == 0 {
		return 0, cudadrv.NewError("cuMemHostGetDevicePointer_v2", cudadrv.ErrorInvalidValue)
	}
	// d escapes through the wrapper: one allocation on this cold call. p's memory is the
	// driver's (outside the Go heap); the driver only reads the address.
	var d cudadrv.DevicePtr
	r := b.drv.cuMemHostGetDevicePointer_v2(&d, unsafe.Pointer(unsafe.SliceData(p)), 0)
	if err := cudadrv.NewError("cuMemHostGetDevicePointer_v2", r); err != nil {
		return 0, err
	}
	return d, nil
}

// MemFreeHost frees memory from MemHostAlloc; p must be the slice MemHostAlloc returned (its
// first byte is the allocation's base). An empty slice is ErrorInvalidValue.
func (b *Backend) MemFreeHost(p []byte) error {
	if len(p) == 0 {
		return cudadrv.NewError("cuMemFreeHost", cudadrv.ErrorInvalidValue)
	}
	return cudadrv.NewError("cuMemFreeHost", b.drv.cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(p))))
}

// MemHostRegister page-locks the host memory of p and maps it for the device, so that copies
// from it run at pinned speed without a staging copy.
//
// # Notes
//
// Pass page-aligned extents of MAP_SHARED mappings (file-backed weights), or other memory that
// the process keeps mapped and in place until MemHostUnregister. Never register a MAP_PRIVATE
// mapping: registering one did not return within minutes on the lent H200 and left the
// machine unhealthy. Go-heap memory must not be registered either (its pages are shared with
// other objects the collector may free).
//
// # Errors
//
// An empty slice is ErrorInvalidValue; memory already registered is
// ErrorHostMemoryAlreadyRegistered.
func (b *Backend) MemHostRegister(p []byte, flags cudadrv.HostRegisterFlags) error {
	if len(p) == 0 {
		return cudadrv.NewError("cuMemHostRegister_v2", cudadrv.ErrorInvalidValue)
	}
	// Safe: p's memory is outside the Go heap (a mapping the caller keeps alive), and the
	// driver keeps only the address, which stays valid until MemHostUnregister.
	r := b.drv.cuMemHostRegister_v2(unsafe.Pointer(unsafe.SliceData(p)), uintptr(len(p)), uint32(flags))
	return cudadrv.NewError("cuMemHostRegister_v2", r)
}

// MemHostUnregister undoes MemHostRegister; p starts where the registered slice started. An
// empty slice is ErrorInvalidValue; memory not registered is ErrorHostMemoryNotRegistered.
func (b *Backend) MemHostUnregister(p []byte) error {
	if len(p) == 0 {
		return cudadrv.NewError("cuMemHostUnregister", cudadrv.ErrorInvalidValue)
	}
	return cudadrv.NewError("cuMemHostUnregister", b.drv.cuMemHostUnregister(unsafe.Pointer(unsafe.SliceData(p))))
}

// The copies below take host memory as slices. An empty slice copies nothing and returns nil
// without calling the driver (the driver too treats a zero-byte copy as done), so its data
// pointer, which may be nil or point past an allocation, is never handed over.
//
// Each passes unsafe.Pointer(unsafe.SliceData(s)) to a generated wrapper, which keeps the
// slice's memory alive and in place until the driver call returns (callargs.go). Slices of
// pinned or registered memory are outside the Go heap and cost nothing; a Go-heap slice's
// backing array is already on the heap (escape analysis puts it there once it is used here),
// so no call allocates.

// MemcpyHtoD copies src to device memory at dst and returns when the copy is done.
func (b *Backend) MemcpyHtoD(dst cudadrv.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return cudadrv.NewError("cuMemcpyHtoD_v2",
		b.drv.cuMemcpyHtoD_v2(dst, unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src))))
}

// MemcpyDtoH copies len(dst) bytes from device memory at src into dst and returns when done.
func (b *Backend) MemcpyDtoH(dst []byte, src cudadrv.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return cudadrv.NewError("cuMemcpyDtoH_v2",
		b.drv.cuMemcpyDtoH_v2(unsafe.Pointer(unsafe.SliceData(dst)), src, uintptr(len(dst))))
}

// MemcpyDtoD copies size bytes between device addresses and returns when done.
func (b *Backend) MemcpyDtoD(dst, src cudadrv.DevicePtr, size uint64) error {
	return cudadrv.NewError("cuMemcpyDtoD_v2", b.drv.cuMemcpyDtoD_v2(dst, src, uintptr(size)))
}

// MemcpyHtoDAsync queues a copy of src to dst on s. It is a hot call: it allocates nothing.
// src must stay alive and unchanged until the copy has completed (from pageable memory the
// driver may stage it before returning; from pinned memory it reads it later).
func (b *Backend) MemcpyHtoDAsync(dst cudadrv.DevicePtr, src []byte, s cudadrv.RawStream) error {
	if len(src) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(src))
	escape(p)
	f := cframe{fn: b.drv.addr[symMemcpyHtoDAsync], a: [maxCCallArgs]uintptr{uintptr(dst), uintptr(p), uintptr(len(src)), uintptr(s)}}
	r := ccall(&f)
	runtime.KeepAlive(p)
	return cudadrv.NewError("cuMemcpyHtoDAsync_v2", cudadrv.Result(r))
}

// MemcpyDtoHAsync queues a copy of len(dst) bytes from src into dst on s. It is a hot call: it
// allocates nothing. dst must stay alive, and not be read, until the copy has completed.
func (b *Backend) MemcpyDtoHAsync(dst []byte, src cudadrv.DevicePtr, s cudadrv.RawStream) error {
	if len(dst) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(dst))
	escape(p)
	f := cframe{fn: b.drv.addr[symMemcpyDtoHAsync], a: [maxCCallArgs]uintptr{uintptr(p), uintptr(src), uintptr(len(dst)), uintptr(s)}}
	r := ccall(&f)
	runtime.KeepAlive(p)
	return cudadrv.NewError("cuMemcpyDtoHAsync_v2", cudadrv.Result(r))
}

// MemcpyDtoDAsync queues a device-to-device copy of size bytes on s. It is a hot call: it
// allocates nothing.
func (b *Backend) MemcpyDtoDAsync(dst, src cudadrv.DevicePtr, size uint64, s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symMemcpyDtoDAsync], a: [maxCCallArgs]uintptr{uintptr(dst), uintptr(src), uintptr(size), uintptr(s)}}
	return cudadrv.NewError("cuMemcpyDtoDAsync_v2", cudadrv.Result(ccall(&f)))
}

// MemsetD8 sets count bytes at dst to value and returns when they are set.
//
// cuMemsetD8 on device memory only queues the memset on the legacy default stream and
// returns (the driver API's "synchronous" memsets are asynchronous with respect to the host
// unless the target is pinned host memory), and a non-blocking stream does not wait for the
// legacy stream: a kernel launched on one right after could run before the memset, which the
// H200 showed once (TestKernelLaunchWritesEveryElement read the NaN poison the memset was to
// write before the kernel). So the legacy stream is synchronized after the memset, as the
// simulated device and cudadrv.Context.Memset8's contract ("returns when done") have it.
// Synchronizing the legacy stream does not invalidate a thread-local capture on another
// stream (DESIGN.md).
func (b *Backend) MemsetD8(dst cudadrv.DevicePtr, value byte, count uint64) error {
	if err := cudadrv.NewError("cuMemsetD8_v2", b.drv.cuMemsetD8_v2(dst, value, uintptr(count))); err != nil {
		return err
	}
	f := cframe{fn: b.drv.addr[symStreamSynchronize]} // stream 0: the legacy default stream
	return cudadrv.NewError("cuStreamSynchronize", cudadrv.Result(ccall(&f)))
}

// MemsetD8Async queues setting count bytes at dst to value on s.
func (b *Backend) MemsetD8Async(dst cudadrv.DevicePtr, value byte, count uint64, s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symMemsetD8Async], a: [maxCCallArgs]uintptr{uintptr(dst), uintptr(value), uintptr(count), uintptr(s)}}
	return cudadrv.NewError("cuMemsetD8Async", cudadrv.Result(ccall(&f)))
}

// MemsetD32Async queues setting count 32-bit words at dst (4-byte aligned) to value on s.
func (b *Backend) MemsetD32Async(dst cudadrv.DevicePtr, value uint32, count uint64, s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symMemsetD32Async], a: [maxCCallArgs]uintptr{uintptr(dst), uintptr(value), uintptr(count), uintptr(s)}}
	return cudadrv.NewError("cuMemsetD32Async", cudadrv.Result(ccall(&f)))
}
