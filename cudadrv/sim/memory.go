package sim

import (
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// Device address layout.
const (
	// AddressBase is the first device address the simulator hands out.
	AddressBase cudadrv.DevicePtr = 0x7f0000000000
	// AllocationAlignment is the alignment of every device allocation, and the granule its
	// size is rounded up to for MemGetInfo and the out-of-memory check.
	AllocationAlignment = 256
	// guardGap is unmapped address space left after every allocation, so that an access
	// running off its end never lands in the next one.
	guardGap = 4096
	// UninitializedWord is the 32-bit little-endian pattern fresh device allocations are
	// filled with (a float32 NaN), as device memory is not zeroed by cuMemAlloc. Allocations
	// larger than poisonLimit are left zeroed so that they cost no host memory until touched.
	UninitializedWord = 0xFFBADBAD
	poisonLimit       = 64 << 20
	// freedKept is how many freed allocations are remembered to name them in access errors.
	freedKept = 1024
)

// AccessError describes a device-memory access outside a single live allocation, or a
// misaligned typed view (see cudadrv.AccessError, which it is). Kernels receive it from the
// Launch views and return it; the launch then faults its context (see Options.Kernels).
// Enqueue-time range checks use it as the detail of CUDA_ERROR_INVALID_VALUE.
type AccessError = cudadrv.AccessError

// allocation is one live or freed device allocation.
type allocation struct {
	base    cudadrv.DevicePtr
	size    uint64
	rounded uint64
	data    []byte // nil once freed
	ctx     *context
}

// hostRange is a pinned host allocation or a registered host range.
type hostRange struct {
	start, end uintptr
	buf        []byte // keeps the memory alive while registered
	flags      cudadrv.HostRegisterFlags
	mapped     *allocation // the device address range of a HostAllocDeviceMap allocation, else nil
}

// memory is the device address space and the host-memory registry. Guarded by d.mu.
type memory struct {
	next       cudadrv.DevicePtr
	live       []*allocation // sorted by base (addresses only grow, so appending keeps it sorted)
	liveBytes  uint64
	freed      [freedKept]*allocation
	freedNext  int
	pinned     map[uintptr]*hostRange // MemHostAlloc'd buffers by start address
	registered map[uintptr]*hostRange // MemHostRegister'ed ranges by start address
	// mapped are the device address ranges of pinned host memory allocated with
	// HostAllocDeviceMap, sorted by base: allocations whose data is the host buffer itself,
	// outside live (they are not device memory: MemGetInfo, Stats and context teardown do not
	// count them).
	mapped []*allocation
}

func (m *memory) init() {
	m.next = AddressBase
	m.pinned = map[uintptr]*hostRange{}
	m.registered = map[uintptr]*hostRange{}
}

// index returns the index of the live allocation with the greatest base <= p, or -1.
func (m *memory) index(p cudadrv.DevicePtr) int { return search(m.live, p) }

// search returns the index of the allocation of list (sorted by base) with the greatest base
// <= p, or -1.
func search(list []*allocation, p cudadrv.DevicePtr) int {
	lo, hi := 0, len(list)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if list[mid].base <= p {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// holds returns the offset of p in list[i] when that allocation holds all of [p, p+n).
func holds(list []*allocation, i int, p cudadrv.DevicePtr, n uint64) (uint64, bool) {
	if i < 0 {
		return 0, false
	}
	a := list[i]
	off := uint64(p - a.base)
	return off, off < a.size && n <= a.size-off
}

// find returns the live allocation, or mapped host range, holding all of [p, p+n), or an
// *AccessError.
func (m *memory) find(p cudadrv.DevicePtr, n uint64) (*allocation, uint64, error) {
	i := m.index(p)
	if off, ok := holds(m.live, i, p, n); ok {
		return m.live[i], off, nil
	}
	if len(m.mapped) > 0 {
		j := search(m.mapped, p)
		if off, ok := holds(m.mapped, j, p, n); ok {
			return m.mapped[j], off, nil
		}
	}
	return nil, 0, m.describe(p, n, i)
}

// describe builds the AccessError for [p, p+n) given the index of the nearest live allocation
// at or below p.
func (m *memory) describe(p cudadrv.DevicePtr, n uint64, i int) *AccessError {
	e := &AccessError{Addr: p, Len: n}
	if i >= 0 && p < m.live[i].base+cudadrv.DevicePtr(m.live[i].size) {
		e.Base, e.Size = m.live[i].base, m.live[i].size
		return e
	}
	for _, a := range m.freed {
		if a != nil && p >= a.base && p < a.base+cudadrv.DevicePtr(a.size) {
			e.Base, e.Size, e.Freed = a.base, a.size, true
			return e
		}
	}
	if i >= 0 {
		e.Base, e.Size = m.live[i].base, m.live[i].size
	}
	return e
}

// view returns the bytes [p, p+n) of one live allocation. It takes d.mu.
func (d *Device) view(p cudadrv.DevicePtr, n uint64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, off, err := d.mem.find(p, n)
	if err != nil {
		return nil, err
	}
	return a.data[off : off+n : off+n], nil
}

// checkRange validates [p, p+n) at enqueue, as the driver validates copy ranges. d.mu held.
func (d *Device) checkRange(op string, what string, p cudadrv.DevicePtr, n uint64) error {
	if _, _, err := d.mem.find(p, n); err != nil {
		return fail(op, cudadrv.ErrorInvalidValue, "%s: %v", what, err)
	}
	return nil
}

// freeContext drops every allocation of c. d.mu is held.
func (m *memory) freeContext(c *context) {
	kept := m.live[:0]
	for _, a := range m.live {
		if a.ctx == c {
			m.retire(a)
			continue
		}
		kept = append(kept, a)
	}
	for i := len(kept); i < len(m.live); i++ {
		m.live[i] = nil
	}
	m.live = kept
	c.gpu.used = 0
}

// retire records a as freed.
func (m *memory) retire(a *allocation) {
	m.liveBytes -= a.size
	m.remember(a)
}

// remember keeps a freed allocation or mapped range, to name it in later access errors.
func (m *memory) remember(a *allocation) {
	a.data = nil
	m.freed[m.freedNext] = a
	m.freedNext = (m.freedNext + 1) % freedKept
}

// MemAlloc allocates size bytes of device memory at a fresh, 256-byte-aligned address that
// is never handed out again. The memory is filled with UninitializedWord (see there).
//
// # Errors
//
// CUDA_ERROR_INVALID_VALUE for size 0; CUDA_ERROR_OUT_OF_MEMORY past Options.TotalMemory;
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED where a live capture prohibits it (capture.go).
func (d *Device) MemAlloc(size uint64) (cudadrv.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemAlloc)
	if err != nil {
		return 0, err
	}
	if err := d.checkUnsafe(OpMemAlloc); err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, fail(OpMemAlloc, cudadrv.ErrorInvalidValue, "allocation size is 0")
	}
	rounded := (size + AllocationAlignment - 1) &^ (AllocationAlignment - 1)
	if rounded < size || c.gpu.used+rounded > d.opts.TotalMemory || c.gpu.used+rounded < c.gpu.used {
		return 0, fail(OpMemAlloc, cudadrv.ErrorOutOfMemory, "%d bytes requested, %d of %d in use", size, c.gpu.used, d.opts.TotalMemory)
	}
	words := make([]uint64, (size+7)/8)
	if size <= poisonLimit {
		for i := range words {
			words[i] = UninitializedWord | UninitializedWord<<32
		}
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), size)
	a := &allocation{base: d.mem.next, size: size, rounded: rounded, data: data[:size:size], ctx: c}
	d.mem.next += cudadrv.DevicePtr(rounded + guardGap)
	d.mem.live = append(d.mem.live, a)
	d.mem.liveBytes += size
	c.gpu.used += rounded
	return a.base, nil
}

// MemFree frees an allocation by its base address. Like the driver it is synchronizing: it
// first waits for the work queued in the context. A later access to the freed range faults,
// naming the freed allocation.
//
// # Errors
//
// CUDA_ERROR_INVALID_VALUE for an address that is not the base of a live allocation (zero,
// inside an allocation, or already freed); CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED where a live
// capture prohibits it.
func (d *Device) MemFree(p cudadrv.DevicePtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpMemFree)
	if err != nil {
		return err
	}
	if err := d.checkUnsafe(OpMemFree); err != nil {
		return err
	}
	i := d.mem.index(p)
	if i < 0 || d.mem.live[i].base != p {
		return fail(OpMemFree, cudadrv.ErrorInvalidValue, "%#x is not the base of a live allocation: %v", uint64(p), d.mem.describe(p, 1, i))
	}
	if err := d.drainContext(OpMemFree, c); err != nil && cudadrv.ResultOf(err) == cudadrv.ErrorDeinitialized {
		return err
	}
	// The wait released d.mu; the allocation may have been freed meanwhile.
	i = d.mem.index(p)
	if i < 0 || d.mem.live[i].base != p {
		return fail(OpMemFree, cudadrv.ErrorInvalidValue, "%#x was freed concurrently", uint64(p))
	}
	a := d.mem.live[i]
	n := len(d.mem.live)
	copy(d.mem.live[i:], d.mem.live[i+1:])
	d.mem.live[n-1] = nil
	d.mem.live = d.mem.live[:n-1]
	a.ctx.gpu.used -= a.rounded
	d.mem.retire(a)
	return stickyOf(OpMemFree, c)
}

// hostStart returns the address of p's first byte.
func hostStart(p []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(p))) }

// overlapping returns a pinned or registered range overlapping [start, end), or nil.
func (m *memory) overlapping(start, end uintptr) *hostRange {
	for _, set := range []map[uintptr]*hostRange{m.pinned, m.registered} {
		for _, r := range set {
			if start < r.end && r.start < end {
				return r
			}
		}
	}
	return nil
}

// MemHostAlloc returns size bytes of (simulated) page-locked host memory, zeroed; it stays
// registered until MemFreeHost. It is MemHostAllocFlags(size, cudadrv.HostAllocPortable).
func (d *Device) MemHostAlloc(size uint64) ([]byte, error) {
	return d.MemHostAllocFlags(size, cudadrv.HostAllocPortable)
}

// validHostAllocFlags are PORTABLE, DEVICEMAP and WRITECOMBINED.
const validHostAllocFlags = cudadrv.HostAllocPortable | cudadrv.HostAllocDeviceMap | cudadrv.HostAllocWriteCombined

// MemHostAllocFlags returns size bytes of (simulated) page-locked host memory, zeroed and
// 8-byte aligned, registered until MemFreeHost. With cudadrv.HostAllocDeviceMap it also gets a
// device address range of its own (MemHostGetDevicePointer), never reused, through which
// stream work and kernels read and write the host buffer itself, bounds-checked like device
// memory. Portability and write-combining change nothing on the simulator.
//
// # Errors
//
// CUDA_ERROR_INVALID_VALUE for size 0 or unknown flags; CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
// where a live capture prohibits it (capture.go).
func (d *Device) MemHostAllocFlags(size uint64, flags cudadrv.HostAllocFlags) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.enter(OpMemHostAlloc)
	if err != nil {
		return nil, err
	}
	if err := d.checkUnsafe(OpMemHostAlloc); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fail(OpMemHostAlloc, cudadrv.ErrorInvalidValue, "allocation size is 0")
	}
	if flags&^validHostAllocFlags != 0 {
		return nil, fail(OpMemHostAlloc, cudadrv.ErrorInvalidValue, "unknown flags %#x", uint32(flags))
	}
	// Backed by words so that aligned 32- and 64-bit accesses (atomics included) are aligned
	// in Go memory too, as they are in the driver's page-aligned allocations.
	words := make([]uint64, (size+7)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), size)[:size:size]
	start := hostStart(buf)
	r := &hostRange{start: start, end: start + uintptr(size), buf: buf}
	if flags&cudadrv.HostAllocDeviceMap != 0 {
		rounded := (size + AllocationAlignment - 1) &^ (AllocationAlignment - 1)
		r.mapped = &allocation{base: d.mem.next, size: size, rounded: rounded, data: buf}
		d.mem.next += cudadrv.DevicePtr(rounded + guardGap)
		d.mem.mapped = append(d.mem.mapped, r.mapped)
	}
	d.mem.pinned[start] = r
	return buf, nil
}

// MemHostGetDevicePointer returns the device address of p's first byte, which must lie in a
// pinned allocation made with cudadrv.HostAllocDeviceMap (CUDA_ERROR_INVALID_VALUE otherwise,
// and for an empty slice).
func (d *Device) MemHostGetDevicePointer(p []byte) (cudadrv.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.enter(OpMemHostGetDevicePointer); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, fail(OpMemHostGetDevicePointer, cudadrv.ErrorInvalidValue, "empty host range")
	}
	start := hostStart(p)
	for _, r := range d.mem.pinned {
		if start < r.start || start >= r.end {
			continue
		}
		if r.mapped == nil {
			return 0, fail(OpMemHostGetDevicePointer, cudadrv.ErrorInvalidValue, "the pinned allocation was made without CU_MEMHOSTALLOC_DEVICEMAP")
		}
		return r.mapped.base + cudadrv.DevicePtr(start-r.start), nil
	}
	return 0, fail(OpMemHostGetDevicePointer, cudadrv.ErrorInvalidValue, "%#x is not in pinned memory from cuMemHostAlloc", start)
}

// MemFreeHost frees memory from MemHostAlloc or MemHostAllocFlags; p must start at the
// buffer's first byte. A mapped buffer's device address range is retired with it: a later
// access through it faults, naming the freed range.
func (d *Device) MemFreeHost(p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpMemFreeHost)
	if err != nil {
		return err
	}
	if err := d.checkUnsafe(OpMemFreeHost); err != nil {
		return err
	}
	r := d.mem.pinned[hostStart(p)]
	if len(p) == 0 || r == nil {
		return fail(OpMemFreeHost, cudadrv.ErrorInvalidValue, "the slice does not start a pinned host allocation")
	}
	delete(d.mem.pinned, hostStart(p))
	if a := r.mapped; a != nil {
		i := search(d.mem.mapped, a.base)
		d.mem.mapped = append(d.mem.mapped[:i], d.mem.mapped[i+1:]...)
		d.mem.remember(a)
	}
	return stickyOf(OpMemFreeHost, c)
}

// validHostRegisterFlags are PORTABLE, DEVICEMAP, IOMEMORY and READ_ONLY.
const validHostRegisterFlags = 0x0f

// MemHostRegister page-locks p.
//
// # Errors
//
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED when p overlaps a registered range or a pinned
// allocation; CUDA_ERROR_INVALID_VALUE for an empty slice or unknown flags.
func (d *Device) MemHostRegister(p []byte, flags cudadrv.HostRegisterFlags) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.enter(OpMemHostRegister)
	if err != nil {
		return err
	}
	if err := d.checkUnsafe(OpMemHostRegister); err != nil {
		return err
	}
	if len(p) == 0 {
		return fail(OpMemHostRegister, cudadrv.ErrorInvalidValue, "empty range")
	}
	if flags&^validHostRegisterFlags != 0 {
		return fail(OpMemHostRegister, cudadrv.ErrorInvalidValue, "unknown flags %#x", uint32(flags))
	}
	start := hostStart(p)
	end := start + uintptr(len(p))
	if r := d.mem.overlapping(start, end); r != nil {
		return fail(OpMemHostRegister, cudadrv.ErrorHostMemoryAlreadyRegistered, "[%#x, +%d) overlaps page-locked range [%#x, +%d)", start, len(p), r.start, r.end-r.start)
	}
	d.mem.registered[start] = &hostRange{start: start, end: end, buf: p, flags: flags}
	return nil
}

// MemHostUnregister unregisters the range registered with p's first byte.
func (d *Device) MemHostUnregister(p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpMemHostUnregister)
	if err != nil {
		return err
	}
	if err := d.checkUnsafe(OpMemHostUnregister); err != nil {
		return err
	}
	if len(p) == 0 || d.mem.registered[hostStart(p)] == nil {
		return fail(OpMemHostUnregister, cudadrv.ErrorHostMemoryNotRegistered, "no registered range starts at this slice")
	}
	delete(d.mem.registered, hostStart(p))
	return stickyOf(OpMemHostUnregister, c)
}

// syncOp runs o on the legacy stream and waits for it, as the driver's synchronous copies and
// memsets do. d.mu is held.
func (d *Device) syncOp(opName string, c *context, o *op) error {
	if err := d.checkUnsafe(opName); err != nil {
		return err
	}
	if err := d.checkImplicit(opName, c); err != nil {
		return err
	}
	d.enqueue(c.legacy, o)
	if err := d.waitStream(opName, c.legacy, c.legacy.enq); err != nil {
		return err
	}
	return stickyOf(opName, c)
}

// asyncOp queues o on stream h, or records it when the stream captures. d.mu is held.
func (d *Device) asyncOp(opName string, c *context, h cudadrv.RawStream, o *op) error {
	s, err := d.stream(opName, c, h)
	if err != nil {
		return err
	}
	if s.capture != nil {
		return d.record(opName, s, o)
	}
	if s.legacy {
		if err := d.checkImplicit(opName, c); err != nil {
			return err
		}
	}
	d.enqueue(s, o)
	return nil
}

// MemcpyHtoD copies src to dst and waits. dst..dst+len(src) must lie in one allocation.
func (d *Device) MemcpyHtoD(dst cudadrv.DevicePtr, src []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyHtoD)
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyHtoD, "destination", dst, uint64(len(src))); err != nil {
		return err
	}
	return d.syncOp(OpMemcpyHtoD, c, &op{kind: opHtoD, dst: dst, host: src})
}

// MemcpyDtoH copies len(dst) bytes from src and waits.
func (d *Device) MemcpyDtoH(dst []byte, src cudadrv.DevicePtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyDtoH)
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyDtoH, "source", src, uint64(len(dst))); err != nil {
		return err
	}
	return d.syncOp(OpMemcpyDtoH, c, &op{kind: opDtoH, src: src, host: dst})
}

// MemcpyDtoD copies size bytes between device ranges and waits.
func (d *Device) MemcpyDtoD(dst, src cudadrv.DevicePtr, size uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyDtoD)
	if err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyDtoD, "source", src, size); err != nil {
		return err
	}
	if err := d.checkRange(OpMemcpyDtoD, "destination", dst, size); err != nil {
		return err
	}
	if err := d.checkCrossDevice(OpMemcpyDtoD, dst, src); err != nil {
		return err
	}
	return d.syncOp(OpMemcpyDtoD, c, &op{kind: opDtoD, dst: dst, src: src, size: size})
}

// MemcpyHtoDAsync queues a copy of src to dst on stream s; src is read when the copy runs
// (at replay time for a captured copy), so it must stay unchanged until then.
func (d *Device) MemcpyHtoDAsync(dst cudadrv.DevicePtr, src []byte, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyHtoDAsync)
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyHtoDAsync, "destination", dst, uint64(len(src))); err != nil {
		return err
	}
	o := op{kind: opHtoD, dst: dst, host: src}
	return d.asyncOp(OpMemcpyHtoDAsync, c, s, &o)
}

// MemcpyDtoHAsync queues a copy of len(dst) bytes from src into dst on stream s; dst is
// written when the copy runs.
func (d *Device) MemcpyDtoHAsync(dst []byte, src cudadrv.DevicePtr, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyDtoHAsync)
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyDtoHAsync, "source", src, uint64(len(dst))); err != nil {
		return err
	}
	o := op{kind: opDtoH, src: src, host: dst}
	return d.asyncOp(OpMemcpyDtoHAsync, c, s, &o)
}

// MemcpyDtoDAsync queues a device-to-device copy on stream s.
func (d *Device) MemcpyDtoDAsync(dst, src cudadrv.DevicePtr, size uint64, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemcpyDtoDAsync)
	if err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	if err := d.checkRange(OpMemcpyDtoDAsync, "source", src, size); err != nil {
		return err
	}
	if err := d.checkRange(OpMemcpyDtoDAsync, "destination", dst, size); err != nil {
		return err
	}
	if err := d.checkCrossDevice(OpMemcpyDtoDAsync, dst, src); err != nil {
		return err
	}
	o := op{kind: opDtoD, dst: dst, src: src, size: size}
	return d.asyncOp(OpMemcpyDtoDAsync, c, s, &o)
}

// MemsetD8 sets count bytes at dst to value and waits.
func (d *Device) MemsetD8(dst cudadrv.DevicePtr, value byte, count uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemsetD8)
	if err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if err := d.checkRange(OpMemsetD8, "destination", dst, count); err != nil {
		return err
	}
	return d.syncOp(OpMemsetD8, c, &op{kind: opMemset8, dst: dst, size: count, value: uint32(value)})
}

// MemsetD8Async queues a byte fill on stream s.
func (d *Device) MemsetD8Async(dst cudadrv.DevicePtr, value byte, count uint64, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemsetD8Async)
	if err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if err := d.checkRange(OpMemsetD8Async, "destination", dst, count); err != nil {
		return err
	}
	o := op{kind: opMemset8, dst: dst, size: count, value: uint32(value)}
	return d.asyncOp(OpMemsetD8Async, c, s, &o)
}

// MemsetD32Async queues a fill of count 32-bit words on stream s; dst must be 4-byte aligned.
func (d *Device) MemsetD32Async(dst cudadrv.DevicePtr, value uint32, count uint64, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpMemsetD32Async)
	if err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if dst%4 != 0 {
		return fail(OpMemsetD32Async, cudadrv.ErrorInvalidValue, "destination %#x is not 4-byte aligned", uint64(dst))
	}
	if count > 1<<62 {
		return fail(OpMemsetD32Async, cudadrv.ErrorInvalidValue, "count %d overflows", count)
	}
	if err := d.checkRange(OpMemsetD32Async, "destination", dst, 4*count); err != nil {
		return err
	}
	o := op{kind: opMemset32, dst: dst, size: count, value: value}
	return d.asyncOp(OpMemsetD32Async, c, s, &o)
}

// StreamWriteValue32 queues a 32-bit write of value to addr on stream s, or records it when the
// stream captures (a graph node, replayed with the graph). The write runs when the stream
// reaches it, after all earlier work of the stream, as one atomic store: a host reading a
// mapped word (MemHostAllocFlags with HostAllocDeviceMap) with sync/atomic sees it, and
// through it everything the earlier work wrote. In a faulted context it does not run.
//
// # Errors
//
// CUDA_ERROR_INVALID_VALUE for an address that is not 4-byte aligned or whose 4 bytes are not
// in one live allocation or mapped host range; at run time, a range freed meanwhile faults the
// context with CUDA_ERROR_ILLEGAL_ADDRESS.
func (d *Device) StreamWriteValue32(h cudadrv.RawStream, addr cudadrv.DevicePtr, value uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamWriteValue32)
	if err != nil {
		return err
	}
	if addr%4 != 0 {
		return fail(OpStreamWriteValue32, cudadrv.ErrorInvalidValue, "address %#x is not 4-byte aligned", uint64(addr))
	}
	if err := d.checkRange(OpStreamWriteValue32, "destination", addr, 4); err != nil {
		return err
	}
	o := op{kind: opWrite32, dst: addr, value: value}
	return d.asyncOp(OpStreamWriteValue32, c, h, &o)
}
