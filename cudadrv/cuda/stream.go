package cuda

import (
	"github.com/cudaep/cudaep/cudadrv"
)

// StreamCreate creates a stream in the current context with the given flags and priority
// (lower numbers are higher priorities; see StreamPriorityRange; the driver clamps).
func (b *Backend) StreamCreate(flags cudadrv.StreamFlags, priority int) (cudadrv.RawStream, error) {
	var s cudadrv.RawStream
	r := b.drv.cuStreamCreateWithPriority(&s, uint32(flags), clampInt32(priority))
	if err := cudadrv.NewError("cuStreamCreateWithPriority", r); err != nil {
		return 0, err
	}
	return s, nil
}

// StreamDestroy destroys s. Work already queued on it still completes.
func (b *Backend) StreamDestroy(s cudadrv.RawStream) error {
	return cudadrv.NewError("cuStreamDestroy_v2", b.drv.cuStreamDestroy_v2(s))
}

// StreamSynchronize waits until all work queued on s has completed.
func (b *Backend) StreamSynchronize(s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symStreamSynchronize], a: [maxCCallArgs]uintptr{uintptr(s)}}
	return cudadrv.NewError("cuStreamSynchronize", cudadrv.Result(ccall(&f)))
}

// StreamQuery returns nil when all work on s is done, an *cudadrv.Error with
// cudadrv.ErrorNotReady when some is still pending.
func (b *Backend) StreamQuery(s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symStreamQuery], a: [maxCCallArgs]uintptr{uintptr(s)}}
	return cudadrv.NewError("cuStreamQuery", cudadrv.Result(ccall(&f)))
}

// StreamWaitEvent makes future work on s wait for the last record of e.
func (b *Backend) StreamWaitEvent(s cudadrv.RawStream, e cudadrv.RawEvent) error {
	f := cframe{fn: b.drv.addr[symStreamWaitEvent], a: [maxCCallArgs]uintptr{uintptr(s), uintptr(e), 0}}
	return cudadrv.NewError("cuStreamWaitEvent", cudadrv.Result(ccall(&f)))
}

// streamWriteValueDefault is CU_STREAM_WRITE_VALUE_DEFAULT: the write is preceded by a memory
// fence (like __threadfence_system, scoped to the stream), so the writes of the work before it
// are visible before the value is. (The _v2 entry point does not accept
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER.)
const streamWriteValueDefault = 0x0

// StreamWriteValue32 queues a 32-bit write of value to addr on s, after all earlier work of s
// and behind a memory fence (cuStreamWriteValue32_v2, CU_STREAM_WRITE_VALUE_DEFAULT). addr is a
// device address, 4-byte aligned: of device memory, or of mapped pinned host memory from
// MemHostGetDevicePointer. It is a hot call: it allocates nothing.
func (b *Backend) StreamWriteValue32(s cudadrv.RawStream, addr cudadrv.DevicePtr, value uint32) error {
	f := cframe{fn: b.drv.addr[symStreamWriteValue32],
		a: [maxCCallArgs]uintptr{uintptr(s), uintptr(addr), uintptr(value), streamWriteValueDefault}}
	return cudadrv.NewError("cuStreamWriteValue32_v2", cudadrv.Result(ccall(&f)))
}

// EventCreate creates an event in the current context.
func (b *Backend) EventCreate(flags cudadrv.EventFlags) (cudadrv.RawEvent, error) {
	var e cudadrv.RawEvent
	if err := cudadrv.NewError("cuEventCreate", b.drv.cuEventCreate(&e, uint32(flags))); err != nil {
		return 0, err
	}
	return e, nil
}

// EventDestroy destroys e.
func (b *Backend) EventDestroy(e cudadrv.RawEvent) error {
	return cudadrv.NewError("cuEventDestroy_v2", b.drv.cuEventDestroy_v2(e))
}

// EventRecord records e at the current end of s. It is a hot call: it allocates nothing.
func (b *Backend) EventRecord(e cudadrv.RawEvent, s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symEventRecord], a: [maxCCallArgs]uintptr{uintptr(e), uintptr(s)}}
	return cudadrv.NewError("cuEventRecord", cudadrv.Result(ccall(&f)))
}

// EventQuery returns nil when e's last record has completed, cudadrv.ErrorNotReady when not.
func (b *Backend) EventQuery(e cudadrv.RawEvent) error {
	f := cframe{fn: b.drv.addr[symEventQuery], a: [maxCCallArgs]uintptr{uintptr(e)}}
	return cudadrv.NewError("cuEventQuery", cudadrv.Result(ccall(&f)))
}

// EventSynchronize waits for e's last record to complete.
func (b *Backend) EventSynchronize(e cudadrv.RawEvent) error {
	f := cframe{fn: b.drv.addr[symEventSynchronize], a: [maxCCallArgs]uintptr{uintptr(e)}}
	return cudadrv.NewError("cuEventSynchronize", cudadrv.Result(ccall(&f)))
}

// EventElapsedTime returns the time between two completed records, in milliseconds. Both
// events must have been created without EventDisableTiming.
func (b *Backend) EventElapsedTime(start, end cudadrv.RawEvent) (float32, error) {
	var ms float32
	if err := cudadrv.NewError("cuEventElapsedTime", b.drv.cuEventElapsedTime(&ms, start, end)); err != nil {
		return 0, err
	}
	return ms, nil
}

// clampInt32 narrows v to the int32 range.
func clampInt32(v int) int32 {
	switch {
	case v > 1<<31-1:
		return 1<<31 - 1
	case v < -1<<31:
		return -1 << 31
	}
	return int32(v)
}
