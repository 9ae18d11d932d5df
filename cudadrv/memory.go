package cudadrv

import (
	"errors"
	"sync/atomic"
)

// DeviceBuffer is one device allocation. Free it exactly once; a second Free returns
// ErrDestroyed. It is safe for concurrent use, but freeing while work that uses it is queued is
// the caller's error, as with the driver.
type DeviceBuffer struct {
	ctx   *Context
	ptr   DevicePtr
	size  uint64
	freed atomic.Bool
}

// Alloc allocates size bytes of device memory (cuMemAlloc). A zero size is ErrorInvalidValue,
// as in the driver.
func (c *Context) Alloc(size uint64) (*DeviceBuffer, error) {
	p, err := c.b.MemAlloc(size)
	if err != nil {
		return nil, c.note(err)
	}
	c.count.deviceAllocs.Add(1)
	c.count.deviceLive.Add(size)
	return &DeviceBuffer{ctx: c, ptr: p, size: size}, nil
}

// Ptr is the buffer's device address.
func (b *DeviceBuffer) Ptr() DevicePtr { return b.ptr }

// Size is the buffer's size in bytes.
func (b *DeviceBuffer) Size() uint64 { return b.size }

// Free returns the memory to the driver.
func (b *DeviceBuffer) Free() error {
	if !b.freed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := b.ctx.b.MemFree(b.ptr); err != nil {
		return b.ctx.note(err)
	}
	b.ctx.count.deviceFrees.Add(1)
	b.ctx.count.deviceLive.Add(^(b.size - 1))
	return nil
}

// HostBuffer is page-locked (pinned) host memory from the driver. Its bytes are not Go-managed
// on the cuda backend: they stay valid until Free, and must not be used after.
type HostBuffer struct {
	ctx   *Context
	bytes []byte
	dptr  DevicePtr // the device address of bytes[0] when mapped (AllocHostMapped); else 0
	freed atomic.Bool
}

// AllocHost allocates size bytes of pinned host memory (cuMemHostAlloc). It is slow (the
// measured cost is about 0.45 s per 512 MiB): build pools once and keep them.
func (c *Context) AllocHost(size uint64) (*HostBuffer, error) {
	b, err := c.b.MemHostAlloc(size)
	if err != nil {
		return nil, c.note(err)
	}
	c.count.pinnedAllocs.Add(1)
	c.count.pinnedLive.Add(size)
	return &HostBuffer{ctx: c, bytes: b}, nil
}

// AllocHostMapped allocates size bytes of pinned host memory that is also mapped into the
// device address space, for every context (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP |
// CU_MEMHOSTALLOC_PORTABLE), and looks up its device address
// (cuMemHostGetDevicePointer_v2): DevicePtr. Stream work and kernels write it over the bus and
// the host reads it in place, without a copy or a synchronization. Free it like AllocHost's.
//
// # Notes
//
// The host sees device writes to it as they land; reading a value the device is still writing
// is a race unless both sides use aligned 32- or 64-bit words and the host reads them
// atomically (sync/atomic), as CompletionWord does.
func (c *Context) AllocHostMapped(size uint64) (*HostBuffer, error) {
	b, err := c.b.MemHostAllocFlags(size, HostAllocDeviceMap|HostAllocPortable)
	if err != nil {
		return nil, c.note(err)
	}
	dptr, err := c.b.MemHostGetDevicePointer(b)
	if err != nil {
		return nil, errors.Join(c.note(err), c.note(c.b.MemFreeHost(b)))
	}
	c.count.pinnedAllocs.Add(1)
	c.count.pinnedLive.Add(size)
	return &HostBuffer{ctx: c, bytes: b, dptr: dptr}, nil
}

// Bytes returns the buffer's memory.
func (h *HostBuffer) Bytes() []byte { return h.bytes }

// DevicePtr returns the device address of the buffer's first byte when it was allocated with
// AllocHostMapped, and 0 otherwise.
func (h *HostBuffer) DevicePtr() DevicePtr { return h.dptr }

// Free returns the memory to the driver; a second Free returns ErrDestroyed.
func (h *HostBuffer) Free() error {
	if !h.freed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := h.ctx.b.MemFreeHost(h.bytes); err != nil {
		return h.ctx.note(err)
	}
	h.ctx.count.pinnedFrees.Add(1)
	h.ctx.count.pinnedLive.Add(^(uint64(len(h.bytes)) - 1))
	return nil
}

// Registration is a host range registered with the driver (page-locked in place), so copies
// from it run at pinned speed.
type Registration struct {
	ctx   *Context
	bytes []byte
	done  atomic.Bool
}

// RegisterHost page-locks b in place (cuMemHostRegister). For file-backed memory, register
// only MAP_SHARED mappings, never MAP_PRIVATE ones (that hung a machine); pass
// HostRegisterReadOnly for mappings opened PROT_READ.
func (c *Context) RegisterHost(b []byte, flags HostRegisterFlags) (*Registration, error) {
	if len(b) == 0 {
		return nil, &Error{Op: "cuMemHostRegister_v2", Result: ErrorInvalidValue, Detail: "empty host range"}
	}
	if err := c.b.MemHostRegister(b, flags); err != nil {
		return nil, c.note(err)
	}
	c.count.registrations.Add(1)
	c.count.registeredLive.Add(uint64(len(b)))
	return &Registration{ctx: c, bytes: b}, nil
}

// Bytes returns the registered range.
func (r *Registration) Bytes() []byte { return r.bytes }

// Unregister unpins the range; a second call returns ErrDestroyed.
func (r *Registration) Unregister() error {
	if !r.done.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := r.ctx.b.MemHostUnregister(r.bytes); err != nil {
		return r.ctx.note(err)
	}
	r.ctx.count.unregistrations.Add(1)
	r.ctx.count.registeredLive.Add(^(uint64(len(r.bytes)) - 1))
	return nil
}

// CopyHtoD copies src to device memory at dst and returns when done (cuMemcpyHtoD).
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.note(c.b.MemcpyHtoD(dst, src))
}

// CopyDtoH copies len(dst) bytes from device memory at src and returns when done.
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.note(c.b.MemcpyDtoH(dst, src))
}

// CopyDtoD copies size bytes between device addresses and returns when done.
func (c *Context) CopyDtoD(dst, src DevicePtr, size uint64) error {
	if size == 0 {
		return nil
	}
	return c.note(c.b.MemcpyDtoD(dst, src, size))
}

// Memset8 sets count bytes at dst to value and returns when done.
func (c *Context) Memset8(dst DevicePtr, value byte, count uint64) error {
	if count == 0 {
		return nil
	}
	return c.note(c.b.MemsetD8(dst, value, count))
}

// errNilStream is returned for a nil *Stream argument.
var errNilStream = errors.New("cudadrv: nil stream")
