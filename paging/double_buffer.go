package paging

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// LayerID names a layer within one prefill (typically its index).
type LayerID uint64

// SlotState is where one slot of a DoubleBuffer is in its cycle:
// Free → Filling → Ready → InUse → Draining → Filling (reuse) …, or Quarantined after a failed
// fill, and from there back to Free only through DoubleBuffer.Recover.
type SlotState int

// The slot states.
const (
	// SlotFree holds no layer: it never held one, or Recover reset it after a quarantine (every
	// copy and fence it had outstanding complete).
	SlotFree SlotState = iota
	// SlotFilling holds a layer whose copy is queued and not known to have completed.
	SlotFilling
	// SlotReady holds a layer whose copy has completed, not yet consumed.
	SlotReady
	// SlotInUse holds a layer the compute stream has been fenced on (Wait) and may be reading.
	SlotInUse
	// SlotDraining holds a released or cancelled layer: its release fence is recorded, and a
	// fill that reuses the slot is ordered after it.
	SlotDraining
	// SlotQuarantined failed a fill (or the fence or release of its layer) and is not handed out
	// again until Recover resets it.
	SlotQuarantined
)

// String names the state.
func (s SlotState) String() string {
	switch s {
	case SlotFree:
		return "free"
	case SlotFilling:
		return "filling"
	case SlotReady:
		return "ready"
	case SlotInUse:
		return "in use"
	case SlotDraining:
		return "draining"
	case SlotQuarantined:
		return "quarantined"
	}
	return fmt.Sprintf("SlotState(%d)", int(s))
}

// Ticket is the claim on one prefetched layer: it names the pipeline, the slot and the slot's
// generation at the time of the prefetch. A ticket whose slot has since been claimed for
// another layer is stale and is refused. Tickets are small values; copying one does not copy
// the claim.
type Ticket struct {
	pipeline uint64
	layer    LayerID
	slot     int
	gen      uint64
}

// Layer is the layer the ticket was issued for.
func (t Ticket) Layer() LayerID { return t.layer }

// Slot is the slot index the layer was prefetched into.
func (t Ticket) Slot() int { return t.slot }

// Generation is the slot generation the ticket is valid for.
func (t Ticket) Generation() uint64 { return t.gen }

// SlotView is a consumed layer's device bytes: Len bytes at Ptr, in the slot's stable buffer.
// It is valid for kernels queued on the compute stream after Wait and before Release.
type SlotView struct {
	Ptr   cudadrv.DevicePtr // the slot's stable buffer
	Len   uint64            // the layer's image size
	Layer LayerID           // the layer it holds
	Slot  int               // the slot index
	Path  Path              // how the bytes were moved
	// Fallback says why the layer was staged after trying zero-copy (Path is PathFallback);
	// nil for any other path. Shared and read-only.
	Fallback *Fallback
}

// Fallback is one fill that tried zero-copy, failed to register its file extents with the
// driver, and staged the layer (or the rest of it) instead: the bytes are exact, the copy only
// slower. A Fallback is immutable once reported.
type Fallback struct {
	Layer   LayerID   // the layer filled
	Slot    int       // the slot it was filled into
	Mapping MappingID // the file whose extent could not be registered
	// Reason is the registration error's text, such as "cudadrv: cuMemHostRegister_v2:
	// CUDA_ERROR_NOT_PERMITTED (800)", kept so that a host reading metrics sees the cause.
	Reason string
	Err    error // the registration error itself (errors.As finds a *cudadrv.Error)
}

// String names the layer, slot, file and reason.
func (f *Fallback) String() string {
	return fmt.Sprintf("layer %d (slot %d) staged after zero-copy failed on mapping %d: %s", f.Layer, f.Slot, f.Mapping, f.Reason)
}

// Metrics count what a DoubleBuffer did. Every counter only grows; LastFallback is replaced by
// each later fallback.
type Metrics struct {
	LayersPrefetched uint64 // fills queued successfully
	LayersConsumed   uint64 // Waits that fenced the compute stream
	LayersReleased   uint64 // Releases
	Cancelled        uint64 // Cancels of a filling, ready or in-use layer
	StaleRejected    uint64 // tickets refused for a stale generation
	Poisoned         uint64 // failed fills, fences or releases (each quarantined its slot)
	Recovered        uint64 // quarantined slots that Recover reset to free
	SlotReuses       uint64 // fills ordered after an earlier layer's release fence
	DrainedAtClose   uint64 // layers still filling, ready or in use when Close drained them
	BytesPrefetched  uint64 // image bytes of the fills queued successfully
	ZeroCopyLayers   uint64 // fills that copied from registered file extents only
	StagingLayers    uint64 // fills that went through pinned staging only
	FallbackLayers   uint64 // fills that tried zero-copy and staged after a registration error
	// LastFallback is the latest of those fills and why it fell back; nil when none did.
	LastFallback *Fallback
}

type slot struct {
	state      SlotState
	gen        uint64
	layer      LayerID
	bytes      uint64
	path       Path
	fallback   *Fallback // why the layer's fill fell back to staging, if it did
	failure    error     // the *FillError that quarantined the slot
	releaseSeq uint64    // order of the release, to reuse the oldest draining slot first
	// fencePending marks a draining slot whose release fence is not recorded yet (ReleaseLater,
	// CancelLater): it is not claimed for a fill until the fence is recorded.
	fencePending bool
	// pins keep the files of the slot's fills from being unmapped (see MmapSource.Close) until
	// the slot's latest fill is known complete: the copy stream is in order, so that fill
	// completing means every earlier one did, and its registrations were dropped with it.
	pins []*filePin
}

// pipelineIDs numbers pipelines so that a ticket from one is refused by another.
var pipelineIDs atomic.Uint64

// DoubleBuffer is the two-slot prefill pipeline: it streams layer N+1 into one slot while
// layer N is consumed from the other, over a Transfer that does the device work. It is the
// generic state machine; it knows nothing of CUDA beyond device addresses.
//
// The caller's loop is: Prefetch(N+1) before consuming N; Wait(N) (enqueue-only: the
// compute stream is fenced on N's copy, the host does not block); queue N's kernels; Release(N)
// (records the release fence that a later reuse of the slot waits for). Cancel abandons a
// layer at any point before its release without quarantining the slot.
//
// # Quarantine
//
// A slot whose fill (or fence, or release) failed is quarantined: its layer is never served
// and the slot is not handed out again, while the pipeline keeps serving with the other slot.
// Quarantine lasts until the host calls Recover, which waits for whatever the failure left
// outstanding on the slot and returns it to SlotFree. The pipeline never recovers on its own:
// a device that keeps failing is not retried behind the host's back, and a host that wants to
// retry calls Recover when it chooses (after each failure, or once both slots are out).
//
// A DoubleBuffer is safe for concurrent use; its methods serialize. Close it to drain and free
// its slots; closing it closes its Transfer.
type DoubleBuffer struct {
	id        uint64
	t         Transfer
	capacity  uint64
	mu        sync.Mutex
	slots     []slot
	releases  uint64
	metrics   Metrics
	closed    bool
	closeErr  error
	closeOnce sync.Once
}

// SlotCount is the number of slots in a DoubleBuffer.
const SlotCount = 2

// NewDoubleBuffer builds a pipeline of SlotCount slots of slotBytes each over t, which it
// owns from then on.
//
// The capacity gate runs first (t.Admit): a layer too large for the transfer's resources, such
// as two staging buffers under the pinned pool's retention cap, is declined with the
// transfer's error (a *PoolCapacityError for CUDATransfer) before anything is reserved. Then
// t.Reserve allocates the slots.
func NewDoubleBuffer(t Transfer, slotBytes uint64) (*DoubleBuffer, error) {
	if t == nil {
		return nil, errors.New("paging: nil transfer")
	}
	if slotBytes == 0 {
		return nil, errors.New("paging: slot size must be greater than zero")
	}
	if err := t.Admit(slotBytes, SlotCount); err != nil {
		return nil, err
	}
	if err := t.Reserve(slotBytes, SlotCount); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return &DoubleBuffer{
		id:       pipelineIDs.Add(1),
		t:        t,
		capacity: slotBytes,
		slots:    make([]slot, SlotCount),
	}, nil
}

// Capacity is the size of each slot in bytes: the largest layer the pipeline takes.
func (d *DoubleBuffer) Capacity() uint64 { return d.capacity }

// Transfer returns the pipeline's transfer.
func (d *DoubleBuffer) Transfer() Transfer { return d.t }

// SlotPtr returns the stable device address of slot i (the same for every layer it holds).
func (d *DoubleBuffer) SlotPtr(i int) cudadrv.DevicePtr { return d.t.SlotPtr(i) }

// Metrics returns a snapshot of the counters.
func (d *DoubleBuffer) Metrics() Metrics {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.metrics
}

// Quarantined returns the number of quarantined slots.
func (d *DoubleBuffer) Quarantined() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, s := range d.slots {
		if s.state == SlotQuarantined {
			n++
		}
	}
	return n
}

// SlotState returns slot i's state. A filling slot whose copy has completed is reported (and
// from then on treated) as ready; one whose copy failed is quarantined. An index outside
// [0, SlotCount) has no slot and reports SlotQuarantined (never usable).
func (d *DoubleBuffer) SlotState(i int) SlotState {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i < 0 || i >= len(d.slots) {
		return SlotQuarantined
	}
	if d.slots[i].state == SlotFilling && !d.closed {
		_ = d.pollLocked(i)
	}
	return d.slots[i].state
}

// LastSlotState is SlotState without asking the transfer: slot i's state as the pipeline last
// saw it, so a filling slot whose copy has completed since still reads SlotFilling. It makes no
// driver call, for a caller on an OS thread where one would be refused (a thread that
// captures a CUDA graph: an event query there invalidates the capture).
func (d *DoubleBuffer) LastSlotState(i int) SlotState {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i < 0 || i >= len(d.slots) {
		return SlotQuarantined
	}
	return d.slots[i].state
}

// pollLocked advances a filling slot to ready when its copy completed, or quarantines it when
// the copy failed (returning the *FillError).
func (d *DoubleBuffer) pollLocked(i int) error {
	done, err := d.t.FillDone(i)
	if err != nil {
		return d.quarantineLocked(i, err)
	}
	if done {
		d.slots[i].state = SlotReady
	}
	return nil
}

func (d *DoubleBuffer) quarantineLocked(i int, err error) error {
	s := &d.slots[i]
	s.state = SlotQuarantined
	d.metrics.Poisoned++
	s.failure = &FillError{Layer: s.layer, Slot: i, Err: err}
	return s.failure
}

// Recover resets every quarantined slot to SlotFree, so that the pipeline can use both slots
// again after failed fills, and returns how many it reset. For each slot it first waits, on
// the host, for what the failure left outstanding: the copies the failed fill had queued, and
// the compute and release fences of a layer whose release failed. Tickets issued for the
// slot's failed layer become stale (a *StaleGenerationError). Counters are kept: Poisoned
// still counts the failures, Recovered counts the slots reset.
//
// # Errors
//
// ErrClosed after Close. A slot whose outstanding work cannot be waited for (a faulted
// context, say) stays quarantined; its error names the slot, and the other slot is still
// reset.
func (d *DoubleBuffer) Recover() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, ErrClosed
	}
	n := 0
	var errs []error
	for i := range d.slots {
		s := &d.slots[i]
		if s.state != SlotQuarantined {
			continue
		}
		if err := d.t.Recover(i); err != nil {
			errs = append(errs, fmt.Errorf("paging: recover slot %d (quarantined by layer %d): %w", i, s.layer, err))
			continue
		}
		d.unpinLocked(i)
		s.gen++ // the failed layer's tickets are stale from now on
		s.state, s.bytes, s.path, s.fallback, s.failure = SlotFree, 0, 0, nil, nil
		d.metrics.Recovered++
		n++
	}
	return n, errors.Join(errs...)
}

// reapPinsLocked releases the file pins of every slot whose latest fill is known to have
// completed, querying the transfer without blocking. A filling slot found complete becomes
// ready; one whose copy failed is quarantined (as SlotState would). Quarantined slots keep
// their pins until Recover or Close has waited for their copies.
func (d *DoubleBuffer) reapPinsLocked() {
	for i := range d.slots {
		s := &d.slots[i]
		if len(s.pins) == 0 || s.state == SlotQuarantined {
			continue
		}
		if s.state == SlotFilling {
			if d.pollLocked(i) != nil || s.state != SlotReady {
				continue
			}
		} else if done, err := d.t.FillDone(i); err != nil || !done {
			continue
		}
		d.unpinLocked(i)
	}
}

func (d *DoubleBuffer) unpinLocked(i int) {
	for _, p := range d.slots[i].pins {
		p.release()
	}
	d.slots[i].pins = nil
}

// pollPins is the callback a pinned file's Close uses to ask whether the fills reading it have
// completed since the pipeline last looked.
func (d *DoubleBuffer) pollPins() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.reapPinsLocked()
	}
}

// Prefetch queues layer's image (w's regions read from src, concatenated) into a slot and
// returns its ticket. It does not wait for the copy.
//
// The regions are resolved (and, for a Preparer source, checked against the files) before a
// slot is claimed: a bad region, a truncated file or an image larger than Capacity is an error
// with no device work done and no slot touched. A free slot is preferred; otherwise the
// draining slot released longest ago is reused and the fill is ordered after its release fence.
//
// With an *MmapSource, the files the layer is read from stay pinned from here until the fill
// is known to have completed (MmapSource.Close refuses to unmap them meanwhile).
//
// # Errors
//
//   - ErrClosed after Close.
//   - *LayerSizeError when the image exceeds Capacity.
//   - *RegionError, *TruncatedError or the source's error for a region that cannot be read.
//   - ErrNoFreeSlot when every slot is filling, ready, in use or quarantined.
//   - *FillError when the transfer failed: the claimed slot is quarantined.
func (d *DoubleBuffer) Prefetch(layer LayerID, w *LazyWeight, src RegionSource) (Ticket, error) {
	if w == nil || src == nil {
		return Ticket{}, errors.New("paging: prefetch needs a weight and a source")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Ticket{}, ErrClosed
	}
	if w.bytes > d.capacity {
		return Ticket{}, &LayerSizeError{Layer: layer, LayerBytes: w.bytes, Capacity: d.capacity}
	}
	d.reapPinsLocked()
	// Pin the files before resolving: the segments point into their mappings.
	var pin *filePin
	if ps, ok := src.(*MmapSource); ok {
		var err error
		if pin, err = ps.pin(w.regions, layer, d.pollPins); err != nil {
			return Ticket{}, err
		}
	}
	segs, err := resolveSegments(w, src)
	if err == nil && d.claimLocked() < 0 {
		err = fmt.Errorf("%w for layer %d: slots are %s", ErrNoFreeSlot, layer, d.statesLocked())
	}
	if err != nil {
		pin.release()
		return Ticket{}, err
	}
	i := d.claimLocked()
	s := &d.slots[i]
	reuse := s.state == SlotDraining
	s.gen++
	s.state, s.layer, s.bytes, s.path, s.fallback = SlotFilling, layer, w.bytes, 0, nil
	if pin != nil {
		// Held even when the fill fails: part of it may have been queued.
		s.pins = append(s.pins, pin)
	}
	req := &FillRequest{Layer: layer, Weight: w, Source: src, Reuse: reuse, Segments: segs}
	res, err := d.t.Fill(i, req)
	if err != nil {
		return Ticket{}, d.quarantineLocked(i, err)
	}
	s.path, s.fallback = res.Path, res.Fallback
	d.metrics.LayersPrefetched++
	d.metrics.BytesPrefetched += w.bytes
	if reuse {
		d.metrics.SlotReuses++
	}
	switch res.Path {
	case PathZeroCopy:
		d.metrics.ZeroCopyLayers++
	case PathFallback:
		d.metrics.FallbackLayers++
		if res.Fallback != nil {
			d.metrics.LastFallback = res.Fallback
		}
	default:
		d.metrics.StagingLayers++
	}
	return Ticket{pipeline: d.id, layer: layer, slot: i, gen: s.gen}, nil
}

// claimLocked picks the slot for a new fill: a free one first, else the draining one released
// longest ago; -1 when none.
func (d *DoubleBuffer) claimLocked() int {
	best := -1
	for i := range d.slots {
		switch d.slots[i].state {
		case SlotFree:
			return i
		case SlotDraining:
			if d.slots[i].fencePending {
				continue // not reusable before its release fence is recorded
			}
			if best < 0 || d.slots[i].releaseSeq < d.slots[best].releaseSeq {
				best = i
			}
		}
	}
	return best
}

func (d *DoubleBuffer) statesLocked() string {
	s := ""
	for i := range d.slots {
		if i > 0 {
			s += ", "
		}
		s += d.slots[i].state.String()
	}
	return s
}

// checkLocked validates a ticket against the pipeline and its slot's generation.
func (d *DoubleBuffer) checkLocked(t Ticket) (*slot, error) {
	if d.closed {
		return nil, ErrClosed
	}
	if t.pipeline != d.id || t.slot < 0 || t.slot >= len(d.slots) {
		return nil, fmt.Errorf("%w: ticket for layer %d", ErrForeignTicket, t.layer)
	}
	s := &d.slots[t.slot]
	if s.gen != t.gen {
		d.metrics.StaleRejected++
		return nil, &StaleGenerationError{Layer: t.layer, Slot: t.slot, TicketGen: t.gen, CurrentGen: s.gen}
	}
	if s.state == SlotQuarantined {
		if s.failure != nil {
			return nil, s.failure
		}
		return nil, fmt.Errorf("%w: slot %d of layer %d", ErrQuarantined, t.slot, t.layer)
	}
	return s, nil
}

// Wait makes the compute stream wait for the ticket's copy and returns the layer's device
// bytes. It only enqueues the fence: the host does not block on the copy. Waiting again on a
// ticket already in use returns the same view.
//
// # Errors
//
// ErrClosed; ErrForeignTicket; a *StaleGenerationError when the slot was reused for another
// layer (never that layer's bytes); ErrQuarantined or a *FillError when the fill failed; a
// *SlotStateError for a released or cancelled ticket.
func (d *DoubleBuffer) Wait(t Ticket) (SlotView, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.checkLocked(t)
	if err != nil {
		return SlotView{}, err
	}
	view := SlotView{Ptr: d.t.SlotPtr(t.slot), Len: s.bytes, Layer: s.layer, Slot: t.slot, Path: s.path, Fallback: s.fallback}
	switch s.state {
	case SlotInUse:
		return view, nil
	case SlotFilling:
		if err := d.pollLocked(t.slot); err != nil {
			return SlotView{}, err
		}
	case SlotReady:
	default:
		return SlotView{}, &SlotStateError{Op: "wait", Layer: t.layer, Slot: t.slot, State: s.state}
	}
	if err := d.t.Fence(t.slot); err != nil {
		// Without the fence the compute stream could read a partial image: never serve it.
		return SlotView{}, d.quarantineLocked(t.slot, err)
	}
	s.state = SlotInUse
	d.metrics.LayersConsumed++
	return view, nil
}

// Release records the release fence after the compute work queued so far and frees the slot
// for reuse: a later fill into it is ordered after the fence. The ticket must be in use
// (waited for); the host does not block.
//
// # Errors
//
// As Wait, and a *SlotStateError for a ticket that was not waited for or already released.
func (d *DoubleBuffer) Release(t Ticket) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.checkLocked(t)
	if err != nil {
		return err
	}
	if s.state != SlotInUse {
		return &SlotStateError{Op: "release", Layer: t.layer, Slot: t.slot, State: s.state}
	}
	if err := d.drainLocked(t.slot); err != nil {
		return err
	}
	d.metrics.LayersReleased++
	d.reapPinsLocked()
	return nil
}

// ReleaseLater is Release in two halves, for a caller that may not touch the device now (a
// CUDA graph capture is live on the compute stream, or on the calling thread): it checks the
// ticket as Release does and releases the layer now (the ticket cannot be released, cancelled
// or waited for again, and the slot reads SlotDraining), and returns fence, the driver half,
// which records the slot's release fence. The caller runs fence exactly once, when the compute
// stream may be used again; until then no fill claims the slot. If the fence cannot be
// recorded, fence quarantines the slot and returns the error. After Close, fence does nothing
// (Close recorded the fence).
//
// # Errors
//
// Release's, with nothing changed.
func (d *DoubleBuffer) ReleaseLater(t Ticket) (fence func() error, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.checkLocked(t)
	if err != nil {
		return nil, err
	}
	if s.state != SlotInUse {
		return nil, &SlotStateError{Op: "release", Layer: t.layer, Slot: t.slot, State: s.state}
	}
	d.metrics.LayersReleased++
	return d.drainLaterLocked(t), nil
}

// drainLaterLocked marks the ticket's slot draining with its fence pending and returns the
// function that records the fence.
func (d *DoubleBuffer) drainLaterLocked(t Ticket) func() error {
	s := &d.slots[t.slot]
	s.state, s.fencePending = SlotDraining, true
	return func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		s := &d.slots[t.slot]
		if d.closed || s.gen != t.gen || !s.fencePending {
			return nil // Close recorded it
		}
		s.fencePending = false
		if err := d.drainLocked(t.slot); err != nil {
			return err
		}
		d.reapPinsLocked()
		return nil
	}
}

// drainLocked records slot i's release fence and marks it draining; a failure quarantines it
// (without the fence, reusing the slot could overwrite bytes a kernel still reads).
func (d *DoubleBuffer) drainLocked(i int) error {
	if err := d.t.Release(i); err != nil {
		return d.quarantineLocked(i, err)
	}
	d.releases++
	d.slots[i].state = SlotDraining
	d.slots[i].releaseSeq = d.releases
	return nil
}

// Cancel abandons the ticket's layer — filling, ready or in use — and frees its slot for reuse
// without quarantining it: the release fence is recorded (after any compute already queued on
// the slot) and a later fill is ordered after it and after the abandoned copy. Cancelling a
// layer whose slot was quarantined is a no-op.
//
// # Errors
//
// As Wait, and a *SlotStateError for a ticket already released or cancelled.
func (d *DoubleBuffer) Cancel(t Ticket) error {
	fence, err := d.CancelLater(t)
	if err != nil || fence == nil {
		return err
	}
	return fence()
}

// CancelLater is Cancel in two halves, as ReleaseLater is Release's: it checks the ticket as
// Cancel does and abandons the layer now (the slot reads SlotDraining and no fill claims it
// before its fence), and returns fence, which records the slot's release fence; run it exactly
// once, when the compute stream may be used again. Cancelling a layer whose slot was
// quarantined changes nothing and returns a nil fence.
//
// # Errors
//
// Cancel's, with nothing changed.
func (d *DoubleBuffer) CancelLater(t Ticket) (fence func() error, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.checkLocked(t)
	if errors.Is(err, ErrQuarantined) && t.pipeline == d.id && !d.closed {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch s.state {
	case SlotFilling, SlotReady, SlotInUse:
	default:
		return nil, &SlotStateError{Op: "cancel", Layer: t.layer, Slot: t.slot, State: s.state}
	}
	d.metrics.Cancelled++
	return d.drainLaterLocked(t), nil
}

// Close drains the pipeline: layers still filling, ready or in use get their release fence
// recorded, then the transfer waits for every outstanding copy and fence and frees the slots.
// Every outstanding ticket becomes invalid. Later calls return ErrClosed; Close itself is
// idempotent and returns the first call's result.
func (d *DoubleBuffer) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		var errs []error
		for i := range d.slots {
			switch s := &d.slots[i]; {
			case s.state == SlotFilling || s.state == SlotReady || s.state == SlotInUse:
				if err := d.t.Release(i); err != nil {
					errs = append(errs, fmt.Errorf("paging: release slot %d at close: %w", i, err))
				}
				s.state = SlotDraining
				d.metrics.DrainedAtClose++
			case s.state == SlotDraining && s.fencePending:
				// Released or cancelled with its fence deferred: record it now.
				s.fencePending = false
				if err := d.t.Release(i); err != nil {
					errs = append(errs, fmt.Errorf("paging: release slot %d at close: %w", i, err))
				}
			}
		}
		d.closed = true
		errs = append(errs, d.t.Close())
		// The transfer waited for every copy and undid every registration: no file is in use.
		for i := range d.slots {
			d.unpinLocked(i)
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}
