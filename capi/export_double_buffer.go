package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// CudaEpCreateDoubleBuffer builds a directly driven pipeline (see cudaep.h).
//
//export CudaEpCreateDoubleBuffer
func CudaEpCreateDoubleBuffer(provider C.CudaEpProvider, slotBytes C.uint64_t, mode C.int32_t, outDoubleBuffer *C.CudaEpDoubleBuffer) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outDoubleBuffer == nil {
		return statusOf(argError("out_double_buffer is NULL"))
	}
	if slotBytes == 0 {
		return statusOf(argError("slot_bytes is 0"))
	}
	var m ep.TransferMode
	switch mode {
	case C.CUDAEP_TRANSFER_ZERO_COPY:
		m = ep.ModeZeroCopy
	case C.CUDAEP_TRANSFER_STAGING:
		m = ep.ModeStaging
	default:
		return statusOf(argError("mode is %d, not a CudaEpTransferMode", int32(mode)))
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	db, err := c.p.NewDoubleBuffer(uint64(slotBytes), m)
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	h, err := insertChild(doubleBufferTable, &doubleBufferObject{child: c, db: db}, (*doubleBufferObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outDoubleBuffer = C.CudaEpDoubleBuffer(h)
	return nil
}

// CudaEpReleaseDoubleBuffer releases a double buffer handle (see cudaep.h).
//
//export CudaEpReleaseDoubleBuffer
func CudaEpReleaseDoubleBuffer(doubleBuffer C.CudaEpDoubleBuffer) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(doubleBufferTable.Remove(handles.Handle(doubleBuffer)))
}

// CudaEpDoubleBufferGetCapacity returns the slot size (see cudaep.h).
//
//export CudaEpDoubleBufferGetCapacity
func CudaEpDoubleBufferGetCapacity(doubleBuffer C.CudaEpDoubleBuffer, outBytes *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outBytes == nil {
		return statusOf(argError("out_bytes is NULL"))
	}
	var n uint64
	if err := with(doubleBufferTable, handles.Handle(doubleBuffer), func(d *doubleBufferObject) error {
		n = d.db.Capacity()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outBytes = C.uint64_t(n)
	return nil
}

// CudaEpDoubleBufferGetSlotState returns a slot's state (see cudaep.h).
//
//export CudaEpDoubleBufferGetSlotState
func CudaEpDoubleBufferGetSlotState(doubleBuffer C.CudaEpDoubleBuffer, slot C.uint32_t, outState *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outState == nil {
		return statusOf(argError("out_state is NULL"))
	}
	if slot >= ep.DoubleBufferSlots {
		return statusOf(argError("slot %d: a double buffer has slots 0 and 1", uint32(slot)))
	}
	var s ep.SlotState
	if err := with(doubleBufferTable, handles.Handle(doubleBuffer), func(d *doubleBufferObject) error {
		s = d.db.SlotState(int(slot))
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outState = C.int32_t(s)
	return nil
}

// CudaEpDoubleBufferGetMetrics fills a CudaEpDoubleBufferMetrics (see cudaep.h).
//
//export CudaEpDoubleBufferGetMetrics
func CudaEpDoubleBufferGetMetrics(doubleBuffer C.CudaEpDoubleBuffer, metrics *C.CudaEpDoubleBufferMetrics) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(metrics), "metrics", C.sizeof_CudaEpDoubleBufferMetrics}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	var m ep.DoubleBufferMetrics
	if err := with(doubleBufferTable, handles.Handle(doubleBuffer), func(d *doubleBufferObject) error {
		m = d.db.Metrics()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	v := C.CudaEpDoubleBufferMetrics{
		layers_prefetched: C.uint64_t(m.LayersPrefetched), layers_consumed: C.uint64_t(m.LayersConsumed),
		layers_released: C.uint64_t(m.LayersReleased), cancelled: C.uint64_t(m.Cancelled),
		stale_rejected: C.uint64_t(m.StaleRejected), poisoned: C.uint64_t(m.Poisoned),
		slot_reuses: C.uint64_t(m.SlotReuses), drained_at_close: C.uint64_t(m.DrainedAtClose),
		bytes_prefetched: C.uint64_t(m.BytesPrefetched), zero_copy_layers: C.uint64_t(m.ZeroCopyLayers),
		staging_layers: C.uint64_t(m.StagingLayers), fallback_layers: C.uint64_t(m.FallbackLayers),
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}

// CudaEpDoubleBufferPrefetch queues a layer into a slot and returns its ticket (see cudaep.h).
//
//export CudaEpDoubleBufferPrefetch
func CudaEpDoubleBufferPrefetch(doubleBuffer C.CudaEpDoubleBuffer, layer C.uint64_t, weight C.CudaEpLazyWeight, outTicket *C.CudaEpTicket) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outTicket == nil {
		return statusOf(argError("out_ticket is NULL"))
	}
	lease, err := doubleBufferTable.Acquire(handles.Handle(doubleBuffer))
	if err != nil {
		return statusOf(err)
	}
	dbo := lease.Value()
	var t ep.Ticket
	err = with(lazyWeightTable, handles.Handle(weight), func(w *lazyWeightObject) (err error) {
		if err := w.sameProvider(dbo.p, "weight"); err != nil {
			return err
		}
		t, err = dbo.db.Prefetch(ep.LayerID(layer), w.w)
		return err
	})
	if err != nil {
		_ = lease.Release()
		return statusOf(err)
	}
	to := &ticketObject{dbo: dbo, lease: lease, ticket: t}
	h, err := insertChild(ticketTable, to, (*ticketObject).finalize)
	if err != nil {
		// The layer is queued but nobody can name it now: abandon it so its slot is reusable.
		_ = dbo.db.Cancel(t)
		return statusOf(err)
	}
	*outTicket = C.CudaEpTicket(h)
	return nil
}

// CudaEpDoubleBufferWaitLayer fences the compute stream on a ticket's upload (see cudaep.h).
//
//export CudaEpDoubleBufferWaitLayer
func CudaEpDoubleBufferWaitLayer(ticket C.CudaEpTicket, outDevicePtr *C.uint64_t, outBytes *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	switch {
	case outDevicePtr == nil:
		return statusOf(argError("out_device_ptr is NULL"))
	case outBytes == nil:
		return statusOf(argError("out_bytes is NULL"))
	}
	var v ep.SlotView
	if err := with(ticketTable, handles.Handle(ticket), func(t *ticketObject) (err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if v, err = t.dbo.db.Wait(t.ticket); err != nil {
			return err
		}
		t.view, t.inView = v, true
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outDevicePtr = C.uint64_t(v.Ptr)
	*outBytes = C.uint64_t(v.Len)
	return nil
}

// ticketOp runs a ticket's release or cancel and ends its view on success.
func ticketOp(ticket C.CudaEpTicket, op func(*ep.DoubleBuffer, ep.Ticket) error) error {
	return with(ticketTable, handles.Handle(ticket), func(t *ticketObject) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := op(t.dbo.db, t.ticket); err != nil {
			return err
		}
		t.inView = false
		return nil
	})
}

// CudaEpDoubleBufferReleaseLayer releases a waited-for layer's slot (see cudaep.h).
//
//export CudaEpDoubleBufferReleaseLayer
func CudaEpDoubleBufferReleaseLayer(ticket C.CudaEpTicket) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(ticketOp(ticket, (*ep.DoubleBuffer).Release))
}

// CudaEpDoubleBufferCancelLayer abandons a ticket's layer (see cudaep.h).
//
//export CudaEpDoubleBufferCancelLayer
func CudaEpDoubleBufferCancelLayer(ticket C.CudaEpTicket) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(ticketOp(ticket, (*ep.DoubleBuffer).Cancel))
}

// CudaEpTicketGetInfo fills a CudaEpTicketInfo (see cudaep.h).
//
//export CudaEpTicketGetInfo
func CudaEpTicketGetInfo(ticket C.CudaEpTicket, info *C.CudaEpTicketInfo) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(info), "info", C.sizeof_CudaEpTicketInfo}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	var v C.CudaEpTicketInfo
	if err := with(ticketTable, handles.Handle(ticket), func(t *ticketObject) error {
		v.slot = C.uint32_t(t.ticket.Slot())
		v.layer = C.uint64_t(t.ticket.Layer())
		v.generation = C.uint64_t(t.ticket.Generation())
		return nil
	}); err != nil {
		return statusOf(err)
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}

// CudaEpReleaseTicket releases a ticket handle (see cudaep.h).
//
//export CudaEpReleaseTicket
func CudaEpReleaseTicket(ticket C.CudaEpTicket) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(ticketTable.Remove(handles.Handle(ticket)))
}
