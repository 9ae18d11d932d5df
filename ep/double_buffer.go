package ep

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/paging"
)

// The double buffer's own types are the paging package's; the aliases let a Go host drive
// one through ep alone.
type (
	// Ticket is the claim on one prefetched layer of a DoubleBuffer.
	Ticket = paging.Ticket
	// SlotView is a waited-for layer's device bytes in a DoubleBuffer slot.
	SlotView = paging.SlotView
	// SlotState is where a DoubleBuffer slot is in its cycle.
	SlotState = paging.SlotState
	// TransferMode chooses how a DoubleBuffer moves bytes: paging.ModeZeroCopy (the default)
	// or paging.ModeStaging.
	TransferMode = paging.TransferMode
	// DoubleBufferMetrics count what a DoubleBuffer did.
	DoubleBufferMetrics = paging.Metrics
)

// DoubleBuffer is a two-slot prefill pipeline a host drives directly, ticket by ticket,
// instead of through the provider's residency (PrefetchWeight/PageWeight): the same state
// machine, on the provider's copy and compute streams, drawing pinned staging memory from the
// provider's pool and reading the external-data files the provider opened. Each DoubleBuffer
// has its own slots and never sees another pipeline's (or the residency's) bytes.
//
// The loop is: Prefetch(N+1) before consuming N; Wait(N) (enqueue-only: the compute stream
// is fenced on N's copy); queue N's kernels on the slot view; Release(N). Cancel abandons a
// layer without quarantining its slot. A ticket whose slot was reused since is refused with a
// *paging.StaleGenerationError (errors.Is paging.ErrStaleGeneration), never served another
// layer's bytes.
//
// A DoubleBuffer is safe for concurrent use. The provider's Close closes one left open. During
// a capture on the provider its calls that touch the device are refused with ErrCaptureLive
// (Close and Cancel are deferred), and on an OS thread that captures for another provider with
// ErrThreadCaptures; calls from other threads on a provider that does not capture are not
// affected by a capture elsewhere (they synchronize nothing the capture depends on).
type DoubleBuffer struct {
	p  *Provider
	db *paging.DoubleBuffer
}

// NewDoubleBuffer builds a direct pipeline of two slots of slotBytes each, moving bytes with
// mode (paging.ModeZeroCopy registers the files' extents and falls back to staging;
// paging.ModeStaging always stages).
//
// # Errors
//
// The arguments are checked first, capture or not: a zero slotBytes or an unknown mode wraps
// ErrInvalidArgument, and the capacity gate declines slots too large for two staging buffers
// (each slotBytes in whole host pages) under the pool's retention cap (option
// staging_pool_cap_bytes) with a *paging.PoolCapacityError (errors.Is paging.ErrDeclined),
// naming the sizes, before anything is reserved. Then the capture window (ErrCaptureLive,
// ErrThreadCaptures). Device exhaustion is the driver's CUDA_ERROR_OUT_OF_MEMORY.
func (p *Provider) NewDoubleBuffer(slotBytes uint64, mode TransferMode) (*DoubleBuffer, error) {
	if slotBytes == 0 {
		return nil, fmt.Errorf("%w: double buffer: slot size is 0", ErrInvalidArgument)
	}
	t, err := paging.NewCUDATransfer(paging.CUDATransferConfig{
		Context: p.ctx, CopyStream: p.copy, ComputeStream: p.compute, Pool: p.weights.pool, Mode: mode,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: double buffer: %w", ErrInvalidArgument, err)
	}
	// The gate needs no device: it answers before the window, so a capture does not hide it.
	if err := t.Admit(slotBytes, paging.SlotCount); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	e, err := p.enter("create a double buffer", accessDriver)
	if err != nil {
		return nil, errors.Join(err, t.Close()) // nothing reserved: Close makes no driver call
	}
	defer e.leave()
	db, err := paging.NewDoubleBuffer(t, slotBytes)
	if err != nil {
		return nil, err
	}
	d := &DoubleBuffer{p: p, db: db}
	p.owned.add(d)
	return d, nil
}

// Prefetch queues layer's image (w's regions, read from the provider's external-data files)
// into a free slot on the copy stream and returns its ticket. It does not wait for the copy.
// Errors are paging.DoubleBuffer.Prefetch's (ErrNoFreeSlot when both slots are taken, a
// *paging.LayerSizeError for an image larger than Capacity, …); the argument errors (a nil
// weight, an image larger than Capacity, a region of a mapping no longer open) come before the
// capture window's.
func (d *DoubleBuffer) Prefetch(layer LayerID, w *LazyWeight) (Ticket, error) {
	if err := d.p.checkWeight("prefetch a layer", w); err != nil {
		return Ticket{}, err
	}
	if c := d.db.Capacity(); w.Bytes() > c {
		return Ticket{}, &paging.LayerSizeError{Layer: layer, LayerBytes: w.Bytes(), Capacity: c}
	}
	e, err := d.p.enter("prefetch a layer", accessDriver)
	if err != nil {
		return Ticket{}, err
	}
	defer e.leave()
	return d.db.Prefetch(layer, w, d.p.weights.files)
}

// Wait fences the compute stream on the ticket's copy (the host does not block) and returns
// the layer's device bytes, valid for work queued before Release or Cancel.
func (d *DoubleBuffer) Wait(t Ticket) (SlotView, error) {
	e, err := d.p.enter("wait for a layer", accessDriver)
	if err != nil {
		return SlotView{}, err
	}
	defer e.leave()
	return d.db.Wait(t)
}

// Release records the slot's release fence after the compute work queued so far and frees it
// for a later layer. The ticket must have been waited for.
func (d *DoubleBuffer) Release(t Ticket) error {
	e, err := d.p.enter("release a layer", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	return d.db.Release(t)
}

// Cancel abandons the ticket's layer (filling, ready or in use) and frees its slot without
// quarantine.
//
// Cancels succeed during a capture: on the provider, or on an OS thread that captures for
// another provider, the ticket is checked and its layer abandoned at the call (it cannot be
// waited for, released or cancelled again), and the slot's release fence is recorded when that
// capture ends; the slot is not reused before.
//
// # Errors
//
// paging.DoubleBuffer.Cancel's (a stale ticket, a layer already released or cancelled), at
// the call and with nothing changed, capture or not.
func (d *DoubleBuffer) Cancel(t Ticket) error {
	return d.p.releaseChecked("cancel a layer", func() (func() error, error) {
		return d.db.CancelLater(t)
	})
}

// Recover puts the slots quarantined by failed fills back in service and returns how many it
// recovered; the failed layers' tickets become stale.
func (d *DoubleBuffer) Recover() (int, error) {
	e, err := d.p.enter("recover quarantined slots", accessDriver)
	if err != nil {
		return 0, err
	}
	defer e.leave()
	return d.db.Recover()
}

// Capacity is the size of each slot in bytes: the largest layer the pipeline takes.
func (d *DoubleBuffer) Capacity() uint64 { return d.db.Capacity() }

// SlotState returns slot i's state (paging.SlotQuarantined for an index outside [0, 2)).
//
// On an OS thread that captures (for any provider) it reports the state the pipeline last saw
// without asking the driver whether a filling slot's copy has completed (an event query there
// would invalidate the capture): such a slot reads paging.SlotFilling until a call on another
// thread, or after the capture, looks again.
func (d *DoubleBuffer) SlotState(i int) SlotState {
	if threadCapturer() != nil {
		return d.db.LastSlotState(i)
	}
	return d.db.SlotState(i)
}

// Quarantined returns the number of quarantined slots.
func (d *DoubleBuffer) Quarantined() int { return d.db.Quarantined() }

// Metrics returns a snapshot of the pipeline's counters.
func (d *DoubleBuffer) Metrics() DoubleBufferMetrics { return d.db.Metrics() }

// Close drains the pipeline (layers still filling, ready or in use get their release fence),
// waits for every outstanding copy and frees the slots. Outstanding tickets become invalid.
// It is idempotent and returns the first call's result. During a capture on the provider, or
// on an OS thread that captures for another provider, the drain waits until that capture ends
// (it would invalidate the capture) and Close returns nil.
func (d *DoubleBuffer) Close() error {
	return d.p.releaseLater("close a double buffer", func() error {
		d.p.owned.remove(d)
		return d.db.Close()
	})
}
