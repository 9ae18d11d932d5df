package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// ortMemory is the device memory ORT allocates through CudaEp's allocators (tensors that stay on
// the device between partitions, outputs, bound inputs): one provider per device ordinal owns
// the buffers, and partition's Memory index finds the buffer holding any address ORT hands back
// (and keeps freed allocations for reuse); partitions' runs read and write ORT's tensors in
// place through it.
var ortMemory struct {
	mu sync.Mutex
	// backend is the backend of the devices CudaEp last listed (setDeviceBackend), whose
	// memory the providers below hold: the memory of a simulated device is the simulator's
	// even on a machine with a GPU.
	backend    string
	providers  map[int]*ep.Provider
	index      partition.Memory
	allocators int // allocators ORT holds
	// pinned are the live pinned host allocations by address; freed ones are kept for reuse in
	// pinnedFree (pinning is slow).
	pinned     map[uintptr]pinnedBuf
	pinnedFree partition.FreeList[pinnedBuf]
	// Factories released (ORT unregistered the library) while allocators were still held:
	// their devices and memory infos are released with the last allocator, since a session
	// that outlives the unregistering still uses them.
	retired []*factory
}

// allocator is what an OrtAllocator of CudaEp stands for: a device ordinal, and whether it
// allocates pinned host memory of the device instead of device memory.
type allocator struct {
	ordinal int
	pinned  bool
}

// pinnedBuf is one pinned host allocation. The simulator's pinned memory is Go memory, which C
// (ORT) may hold only while it is pinned for the Go runtime too (pin; a no-op for the driver's
// memory on the cuda backend).
type pinnedBuf struct {
	ordinal int
	buf     *ep.PinnedBuffer
	pin     *runtime.Pinner
}

func (b pinnedBuf) release() {
	b.pin.Unpin()
	_ = b.buf.Release()
}

const kindAllocator handles.Kind = 23

var allocatorTable = handles.NewTable(handles.Config[*allocator]{Kind: kindAllocator, Name: "ORT allocator"})

// deviceProvider returns the provider that owns device memory of ordinal, making it on first
// use on the backend the factory offered the device on.
func deviceProvider(ordinal int) (*ep.Provider, error) {
	ortMemory.mu.Lock()
	defer ortMemory.mu.Unlock()
	if p := ortMemory.providers[ordinal]; p != nil {
		return p, nil
	}
	if ortMemory.backend == "" {
		return nil, fmt.Errorf("%w: CudaEp listed no device, so it has no device memory (see %s)", errInvalid, EnvBackend)
	}
	opts := ep.DefaultOptions()
	opts.Backend, opts.DeviceID = ortMemory.backend, ordinal
	p, err := ep.New(opts)
	if err != nil {
		return nil, err
	}
	if ortMemory.providers == nil {
		ortMemory.providers = map[int]*ep.Provider{}
	}
	ortMemory.providers[ordinal] = p
	return p, nil
}

// setDeviceBackend records the backend of the devices a factory listed, for the providers of
// their memory. A listing of another backend than the one whose providers hold memory now
// (a library registered again with another CUDAEP_BACKEND while ORT still holds allocations)
// keeps the first: memory never moves between backends.
func setDeviceBackend(backend string) {
	ortMemory.mu.Lock()
	defer ortMemory.mu.Unlock()
	if len(ortMemory.providers) == 0 {
		ortMemory.backend = backend
	}
}

// cudaepOrtCreateAllocator makes an allocator of device memory for a CudaEp memory info.
//
//export cudaepOrtCreateAllocator
func cudaepOrtCreateAllocator(f *C.CudaEpOrtFactory, info *C.OrtMemoryInfo, out **C.OrtAllocator) (st *C.OrtStatus) {
	defer recoverInto(&st)
	*out = nil
	var isGPU, isPinned, devType, memType C.int
	var id C.int32_t
	var vendor C.uint32_t
	var name *C.char
	if err := errorOf(C.cudaep_ort_memory_info_device(info, &isGPU, &isPinned, &id, &devType, &vendor, &memType, &name), "read a memory info"); err != nil {
		return statusOf(err)
	}
	if isGPU == 0 && isPinned == 0 {
		return statusOf(fmt.Errorf("%w: CudaEp allocates only its own device memory, not %q (device type %d, vendor %#x, memory type %d, device %d)",
			errInvalid, goString(name), int(devType), uint32(vendor), int(memType), int(id)))
	}
	if _, err := deviceProvider(int(id)); err != nil {
		return statusOf(err)
	}
	h, err := allocatorTable.Insert(&allocator{ordinal: int(id), pinned: isPinned != 0})
	if err != nil {
		return statusOf(err)
	}
	ortMemory.mu.Lock()
	ortMemory.allocators++
	ortMemory.mu.Unlock()
	var a *C.CudaEpOrtAllocator
	if err := errorOf(C.cudaep_ort_new_allocator(C.uint64_t(h), id, isPinned, &a), "make an allocator"); err != nil {
		_ = allocatorTable.Remove(h)
		allocatorGone()
		return statusOf(err)
	}
	*out = &a.a
	return nil
}

// cudaepOrtReleaseAllocator releases an allocator (its memory was freed through it).
//
//export cudaepOrtReleaseAllocator
func cudaepOrtReleaseAllocator(a *C.CudaEpOrtAllocator) {
	defer recoverQuietly()
	if a == nil {
		return
	}
	_ = allocatorTable.Remove(handles.Handle(a.handle))
	C.cudaep_ort_free_allocator(a)
	allocatorGone()
}

// allocatorGone counts an allocator released; the last one releases what retired factories
// left for it.
func allocatorGone() {
	ortMemory.mu.Lock()
	ortMemory.allocators--
	var retired []*factory
	if ortMemory.allocators == 0 {
		retired, ortMemory.retired = ortMemory.retired, nil
	}
	ortMemory.mu.Unlock()
	if len(retired) > 0 {
		for _, f := range retired {
			_ = f.close()
		}
		closeDeviceMemory()
	}
}

// retireFactory releases a factory's devices and memory infos, and the device memory's
// providers, now, or with the last allocator when sessions still hold allocators.
func retireFactory(f *factory) {
	ortMemory.mu.Lock()
	if ortMemory.allocators > 0 {
		ortMemory.retired = append(ortMemory.retired, f)
		ortMemory.mu.Unlock()
		return
	}
	ortMemory.mu.Unlock()
	_ = f.close()
	closeDeviceMemory()
}

// cudaepOrtAlloc allocates size bytes of device memory; NULL when it cannot (ORT reports it).
//
//export cudaepOrtAlloc
func cudaepOrtAlloc(h C.uint64_t, size C.size_t) (ptr unsafe.Pointer) {
	defer func() {
		if recover() != nil {
			ptr = nil
		}
	}()
	a, err := allocatorTable.Get(handles.Handle(h))
	if err != nil {
		return nil
	}
	p, err := deviceProvider(a.ordinal)
	if err != nil {
		return nil
	}
	n := uint64(size)
	if n == 0 {
		n = 1
	}
	if a.pinned {
		return allocPinned(p, a.ordinal, n)
	}
	d, ok := ortMemory.index.Reuse(a.ordinal, n)
	if !ok {
		b, err := p.Alloc(n, ep.DefaultAlignment)
		if err != nil {
			return nil
		}
		d = partition.NewAllocation(b, n, a.ordinal)
	}
	ortMemory.index.Add(d)
	// A device address, not Go memory: ORT never dereferences it (its memory info says GPU).
	return C.cudaep_ort_ptr(C.uint64_t(d.Base))
}

// cudaepOrtFree frees an allocation made by cudaepOrtAlloc (ignoring anything else).
//
//export cudaepOrtFree
func cudaepOrtFree(h C.uint64_t, p unsafe.Pointer) {
	defer recoverQuietly()
	if freePinned(uintptr(p)) {
		return
	}
	ortMemory.index.Free(uint64(uintptr(p)))
}

// allocPinned hands ORT n bytes of pinned host memory of the device: a freed allocation of that
// size when one is kept, else a new one.
func allocPinned(p *ep.Provider, ordinal int, n uint64) unsafe.Pointer {
	ortMemory.mu.Lock()
	b, ok := ortMemory.pinnedFree.Take(partition.SizeKey{Ordinal: ordinal, Size: n})
	ortMemory.mu.Unlock()
	if !ok {
		pb, err := p.AllocPinned(n)
		if err != nil {
			return nil
		}
		b = pinnedBuf{ordinal: ordinal, buf: pb, pin: new(runtime.Pinner)}
		b.pin.Pin(unsafe.SliceData(pb.Bytes()))
	}
	ptr := unsafe.Pointer(unsafe.SliceData(b.buf.Bytes()))
	addr := uintptr(ptr)
	ortMemory.mu.Lock()
	if ortMemory.pinned == nil {
		ortMemory.pinned = map[uintptr]pinnedBuf{}
	}
	ortMemory.pinned[addr] = b
	ortMemory.mu.Unlock()
	return ptr
}

// freePinned takes back a pinned allocation (kept for reuse up to partition.MaxCachedBytes); false when
// addr is not one.
func freePinned(addr uintptr) bool {
	ortMemory.mu.Lock()
	b, ok := ortMemory.pinned[addr]
	if !ok {
		ortMemory.mu.Unlock()
		return false
	}
	delete(ortMemory.pinned, addr)
	keep := ortMemory.pinnedFree.Keep(partition.SizeKey{Ordinal: b.ordinal, Size: uint64(len(b.buf.Bytes()))}, b)
	ortMemory.mu.Unlock()
	if !keep {
		b.release()
	}
	return true
}

// deviceTensor is a tensor's memory as ORT describes it.
type deviceTensor struct {
	data   unsafe.Pointer
	bytes  uint64
	onGPU  bool
	device int
}

func valueMemory(v *C.OrtValue) (deviceTensor, error) {
	var data unsafe.Pointer
	var bytes C.size_t
	var onGPU C.int
	var id C.int32_t
	if err := errorOf(C.cudaep_ort_value_memory(v, &data, &bytes, &onGPU, &id), "read a tensor's memory"); err != nil {
		return deviceTensor{}, err
	}
	return deviceTensor{data: data, bytes: uint64(bytes), onGPU: onGPU != 0, device: int(id)}, nil
}

// cudaepOrtCopyTensors copies tensors between host memory and CudaEp device memory (ORT's
// data transfer). A copy ORT gives a CudaEp stream is queued on that stream: a copy between
// device tensors returns at once, ordered after the stream's work; copies from or to host
// memory return once the host memory may be reused or read. A copy without a stream completes
// before this returns.
//
//export cudaepOrtCopyTensors
func cudaepOrtCopyTensors(src, dst **C.OrtValue, streams **C.OrtSyncStream, n C.size_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	srcs, dsts := unsafe.Slice(src, int(n)), unsafe.Slice(dst, int(n))
	var ss []*C.OrtSyncStream
	if streams != nil {
		ss = unsafe.Slice(streams, int(n))
	}
	for i := range srcs {
		var on *syncStream
		if ss != nil {
			on = streamOf(ss[i])
		}
		if err := copyTensor(srcs[i], dsts[i], on); err != nil {
			return statusOf(fmt.Errorf("copy tensor %d of %d: %w", i, int(n), err))
		}
	}
	return nil
}

func copyTensor(src, dst *C.OrtValue, on *syncStream) error {
	s, err := valueMemory(src)
	if err != nil {
		return err
	}
	d, err := valueMemory(dst)
	if err != nil {
		return err
	}
	if s.bytes != d.bytes {
		return fmt.Errorf("%w: %d bytes into %d", errInvalid, s.bytes, d.bytes)
	}
	if s.bytes == 0 {
		return nil
	}
	defer partition.TimeCopy(s.onGPU, d.onGPU)()
	if on != nil {
		defer on.enter()()
	}
	// The provider whose stream orders the copy: the stream's, else the memory's owner.
	via := func(owner *ep.Provider) *ep.Provider {
		if on != nil {
			return on.p
		}
		return owner
	}
	switch {
	case !s.onGPU && d.onGPU:
		db, off, p, err := located(d)
		if err != nil {
			return err
		}
		q := via(p)
		if err := q.CopyToDevice(db.Buf, off, unsafe.Slice((*byte)(s.data), s.bytes)); err != nil || on != nil {
			return err // with ORT's stream, its notifications order the consumers
		}
		// A small copy returns once queued; the tensor's consumers may run on another
		// provider's stream (a session's), so it must be done when CopyTensors returns.
		return q.SynchronizeCompute()
	case s.onGPU && !d.onGPU:
		sb, off, p, err := located(s)
		if err != nil {
			return err
		}
		return via(p).CopyToHost(unsafe.Slice((*byte)(d.data), d.bytes), sb.Buf, off)
	case s.onGPU && d.onGPU:
		sb, soff, _, err := located(s)
		if err != nil {
			return err
		}
		db, doff, p, err := located(d)
		if err != nil {
			return err
		}
		if sb.Ordinal != db.Ordinal {
			return copyBetweenDevices(db, doff, sb, soff, s.bytes, p, on)
		}
		if err := via(p).CopyBuffer(db.Buf, doff, sb.Buf, soff, s.bytes); err != nil {
			return err
		}
		if on != nil {
			return nil // ordered on ORT's stream; ORT's notifications order its consumers
		}
		return p.SynchronizeCompute()
	}
	return errors.New("cudaep: a copy between two host tensors is not CudaEp's")
}

// copyBetweenDevices copies n bytes between CudaEp device memory of two ordinals with
// ep.CopyPeer (directly when the devices reach each other, staged through pinned memory when
// not), queued on the destination device's stream. With ORT's stream on either device, the copy
// is ordered after that stream's work and its later work after the copy, and the call returns at
// once (ORT's notifications order the consumers); otherwise it returns once the copy is done.
// dp owns the destination memory.
func copyBetweenDevices(db partition.Allocation, doff uint64, sb partition.Allocation, soff, n uint64, dp *ep.Provider, on *syncStream) error {
	via, ordered := dp, false
	if on != nil {
		if o := on.p.Options().DeviceID; o == db.Ordinal || o == sb.Ordinal {
			via, ordered = on.p, true
		}
	}
	if _, err := via.CopyPeer(db.Buf, doff, sb.Buf, soff, n); err != nil {
		return fmt.Errorf("copy from device %d to device %d: %w", sb.Ordinal, db.Ordinal, err)
	}
	if ordered {
		return nil
	}
	return dp.SynchronizeCompute()
}

// located finds the allocation holding a device tensor and the provider that owns it.
func located(t deviceTensor) (partition.Allocation, uint64, *ep.Provider, error) {
	b, off, err := ortMemory.index.Find(uint64(uintptr(t.data)), t.bytes)
	if err != nil {
		return partition.Allocation{}, 0, nil, err
	}
	p, err := deviceProvider(b.Ordinal)
	return b, off, p, err
}

// closeDeviceMemory closes the providers of device memory (the factory is going).
func closeDeviceMemory() {
	ortMemory.index.Reset()
	ortMemory.mu.Lock()
	ps := ortMemory.providers
	pinnedFree := ortMemory.pinnedFree.Drain()
	pinned := ortMemory.pinned
	ortMemory.providers, ortMemory.pinned = nil, nil
	ortMemory.mu.Unlock()
	for _, b := range pinned {
		b.release()
	}
	for _, b := range pinnedFree {
		b.release()
	}
	for _, p := range ps {
		_ = p.Close()
	}
}
