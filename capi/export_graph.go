package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// slotOf decodes a (slot_kind, slot_key) pair.
func slotOf(kind C.int32_t, key C.int64_t) (ep.Slot, error) {
	switch kind {
	case C.CUDAEP_SLOT_PRIMARY, C.CUDAEP_SLOT_VERIFY:
		if key != 0 {
			return ep.Slot{}, argError("slot_key is %d; it must be 0 for the primary and verify slots", int64(key))
		}
		if kind == C.CUDAEP_SLOT_PRIMARY {
			return ep.Primary, nil
		}
		return ep.Verify, nil
	case C.CUDAEP_SLOT_KEYED:
		return ep.Keyed(int64(key)), nil
	}
	return ep.Slot{}, argError("slot_kind is %d, not a CudaEpSlotKind", int32(kind))
}

// withSlot decodes the slot, then runs f on the provider.
func withSlot(provider C.CudaEpProvider, kind C.int32_t, key C.int64_t, f func(p *ep.Provider, s ep.Slot) error) error {
	slot, err := slotOf(kind, key)
	if err != nil {
		return err
	}
	return withProvider(handles.Handle(provider), func(p *ep.Provider) error { return f(p, slot) })
}

// unleasedProvider returns the provider h names without taking a lease on it, for the hot
// exports whose ep calls are safe against a concurrent Close of the provider (Replay,
// ReplaySegment: the graph layer's admission; SynchronizeCompute: the capture window), so a
// host that releases the handle meanwhile gets an error from ep, never a crash, and the call
// saves the lease's two atomic read-modify-writes. The *ep.Provider stays a valid Go value
// whatever happens to its handle.
func unleasedProvider(h handles.Handle) (*ep.Provider, error) {
	return providerTable.Get(h)
}

// captureArgs leases the kernels and buffers of a capture call, checking they are p's.
type captureArgs struct {
	kernelLeases []handles.Lease[*kernelObject]
	bufferLeases []handles.Lease[*bufferObject]
}

func (a *captureArgs) release() {
	for i := range a.kernelLeases {
		_ = a.kernelLeases[i].Release()
	}
	for i := range a.bufferLeases {
		_ = a.bufferLeases[i].Release()
	}
}

func (a *captureArgs) decode(p *ep.Provider, ks []C.CudaEpKernel, bs []C.CudaEpBuffer) ([]*ep.Kernel, []*ep.Buffer, error) {
	kernels := make([]*ep.Kernel, len(ks))
	for i, h := range ks {
		l, err := kernelTable.Acquire(handles.Handle(h))
		if err != nil {
			return nil, nil, fmt.Errorf("kernels[%d]: %w", i, err)
		}
		a.kernelLeases = append(a.kernelLeases, l)
		ko := l.Value()
		if err := ko.sameProvider(p, fmt.Sprintf("kernels[%d]", i)); err != nil {
			return nil, nil, err
		}
		kernels[i] = ko.k
	}
	buffers := make([]*ep.Buffer, len(bs))
	for i, h := range bs {
		l, err := bufferTable.Acquire(handles.Handle(h))
		if err != nil {
			return nil, nil, fmt.Errorf("retain[%d]: %w", i, err)
		}
		a.bufferLeases = append(a.bufferLeases, l)
		bo := l.Value()
		if err := bo.sameProvider(p, fmt.Sprintf("retain[%d]", i)); err != nil {
			return nil, nil, err
		}
		buffers[i] = bo.buf
	}
	return kernels, buffers, nil
}

// beginCapture is CudaEpBeginCapture and CudaEpRecapture.
func beginCapture(provider C.CudaEpProvider, kind C.int32_t, key C.int64_t, kernels *C.cudaep_ckernel, numKernels C.size_t,
	retain *C.cudaep_cbuffer, numRetain C.size_t, recapture bool) error {
	ks, err := cArray((*C.CudaEpKernel)(unsafe.Pointer(kernels)), uint64(numKernels), maxArray, "kernels")
	if err != nil {
		return err
	}
	bs, err := cArray((*C.CudaEpBuffer)(unsafe.Pointer(retain)), uint64(numRetain), maxArray, "retain")
	if err != nil {
		return err
	}
	slot, err := slotOf(kind, key)
	if err != nil {
		return err
	}
	lease, err := providerTable.Acquire(handles.Handle(provider))
	if err != nil {
		return err
	}
	defer func() { _ = lease.Release() }()
	p := lease.Value()
	var args captureArgs
	defer args.release()
	goKernels, buffers, err := args.decode(p, ks, bs)
	if err != nil {
		return err
	}
	if recapture {
		err = p.Recapture(slot, goKernels, buffers)
	} else {
		err = p.BeginCapture(slot, goKernels, buffers)
	}
	if err == nil {
		stateOf(p).holdCapture(lease.Clone())
	}
	return err
}

// endCapture runs EndCapture or AbortCapture and, once no capture is live, gives back the
// capture's lease on the provider.
func endCapture(provider C.CudaEpProvider, kind C.int32_t, key C.int64_t, end func(*ep.Provider, ep.Slot) error) error {
	return withSlot(provider, kind, key, func(p *ep.Provider, s ep.Slot) error {
		err := end(p, s)
		return errors.Join(err, stateOf(p).endCapture(p))
	})
}

// CudaEpBeginCapture audits kernels and begins capturing a slot (see cudaep.h).
//
//export CudaEpBeginCapture
func CudaEpBeginCapture(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, kernels *C.cudaep_ckernel, numKernels C.size_t,
	retain *C.cudaep_cbuffer, numRetain C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(beginCapture(provider, slotKind, slotKey, kernels, numKernels, retain, numRetain, false))
}

// CudaEpRecapture retires a slot's graph and captures its successor (see cudaep.h).
//
//export CudaEpRecapture
func CudaEpRecapture(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, kernels *C.cudaep_ckernel, numKernels C.size_t,
	retain *C.cudaep_cbuffer, numRetain C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(beginCapture(provider, slotKind, slotKey, kernels, numKernels, retain, numRetain, true))
}

// CudaEpEndCapture ends and installs a slot's capture (see cudaep.h).
//
//export CudaEpEndCapture
func CudaEpEndCapture(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(endCapture(provider, slotKind, slotKey, (*ep.Provider).EndCapture))
}

// CudaEpAbortCapture discards a slot's failed capture (see cudaep.h).
//
//export CudaEpAbortCapture
func CudaEpAbortCapture(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(endCapture(provider, slotKind, slotKey, (*ep.Provider).AbortCapture))
}

// CudaEpReplay launches a slot's segments (see cudaep.h).
//
//export CudaEpReplay
func CudaEpReplay(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	slot, err := slotOf(slotKind, slotKey)
	if err != nil {
		return statusOf(err)
	}
	p, err := unleasedProvider(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(p.Replay(slot))
}

// CudaEpReplaySegment launches one segment of a slot (see cudaep.h).
//
//export CudaEpReplaySegment
func CudaEpReplaySegment(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, index C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	slot, err := slotOf(slotKind, slotKey)
	if err != nil {
		return statusOf(err)
	}
	p, err := unleasedProvider(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	if uint64(index) > math.MaxInt32 {
		return statusOf(argError("segment index %d: past any installed segment", uint64(index)))
	}
	return statusOf(p.ReplaySegment(slot, int(index)))
}

// CudaEpResetGraph resets a slot (see cudaep.h).
//
//export CudaEpResetGraph
func CudaEpResetGraph(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, outHadGraph *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	var had bool
	if err := withSlot(provider, slotKind, slotKey, func(p *ep.Provider, s ep.Slot) (err error) {
		had, err = p.ResetGraph(s)
		return err
	}); err != nil {
		return statusOf(err)
	}
	if outHadGraph != nil {
		*outHadGraph = cBool(had)
	}
	return nil
}

// CudaEpHasExecutable says whether a slot can replay (see cudaep.h).
//
//export CudaEpHasExecutable
func CudaEpHasExecutable(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, outHas *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outHas == nil {
		return statusOf(argError("out_has is NULL"))
	}
	var has bool
	if err := withSlot(provider, slotKind, slotKey, func(p *ep.Provider, s ep.Slot) error {
		has = p.HasExecutable(s)
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outHas = cBool(has)
	return nil
}

// CudaEpGetSegmentCount returns a slot's installed segments (see cudaep.h).
//
//export CudaEpGetSegmentCount
func CudaEpGetSegmentCount(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, outCount *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outCount == nil {
		return statusOf(argError("out_count is NULL"))
	}
	var n int
	if err := withSlot(provider, slotKind, slotKey, func(p *ep.Provider, s ep.Slot) error {
		n = p.SegmentCount(s)
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outCount = C.size_t(n)
	return nil
}

// CudaEpGetCaptureStatus returns the compute stream's capture status (see cudaep.h).
//
//export CudaEpGetCaptureStatus
func CudaEpGetCaptureStatus(provider C.CudaEpProvider, outStatus *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outStatus == nil {
		return statusOf(argError("out_status is NULL"))
	}
	var status int32
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		s, err := p.CaptureStatus()
		status = int32(s)
		return err
	}); err != nil {
		return statusOf(err)
	}
	*outStatus = C.int32_t(status)
	return nil
}

// CudaEpGetGraphStats fills a slot's CudaEpGraphStats (see cudaep.h).
//
//export CudaEpGetGraphStats
func CudaEpGetGraphStats(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t, stats *C.CudaEpGraphStats) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(stats), "stats", C.sizeof_CudaEpGraphStats}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	var gs ep.GraphStats
	if err := withSlot(provider, slotKind, slotKey, func(p *ep.Provider, s ep.Slot) (err error) {
		gs, err = p.GraphStats(s)
		return err
	}); err != nil {
		return statusOf(err)
	}
	v := C.CudaEpGraphStats{
		lock_acquisitions: C.uint64_t(gs.LockAcquisitions), captures: C.uint64_t(gs.Captures),
		replay_launches: C.uint64_t(gs.ReplayLaunches), instantiations: C.uint64_t(gs.Instantiations),
		updates: C.uint64_t(gs.Updates), update_refusals: C.uint64_t(gs.UpdateRefusals),
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}
