package paging

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// Path is how a fill moved a layer's bytes to its slot.
type Path int

// The paths.
const (
	// PathStaging copied the file bytes into pinned staging memory on the host, then H2D.
	PathStaging Path = iota + 1
	// PathZeroCopy registered the layer's page-aligned file extents read-only with the driver
	// and copied H2D from them directly.
	PathZeroCopy
	// PathFallback tried zero-copy, could not register an extent (a driver error, or the
	// register cap with every registration in use), and staged the rest of the layer.
	PathFallback
)

// String names the path.
func (p Path) String() string {
	switch p {
	case PathStaging:
		return "staging"
	case PathZeroCopy:
		return "zero-copy"
	case PathFallback:
		return "zero-copy→staging fallback"
	}
	return fmt.Sprintf("Path(%d)", int(p))
}

// FillRequest is one layer to be copied into a slot.
type FillRequest struct {
	Layer  LayerID      // the layer
	Weight *LazyWeight  // its weight
	Source RegionSource // where its regions live
	// Reuse says the slot held an earlier layer: the copy must be ordered after that layer's
	// release fence (the compute that read it).
	Reuse bool
	// Segments are the weight's regions already resolved through Source, in image order.
	Segments []Segment
}

// FillResult is what a Transfer's successful Fill reports.
type FillResult struct {
	Path Path // how the bytes are moved
	// Fallback is why a PathFallback fill staged instead of copying zero-copy (nil for any
	// other path).
	Fallback *Fallback
}

// Transfer does a DoubleBuffer's device work: it owns the slots' device buffers and moves
// layer images into them, ordered against the consumer. The DoubleBuffer serializes its calls
// and guarantees the state machine's order: Admit, Reserve, then per slot Fill, [FillDone …],
// Fence, Release, Fill (reuse) …, Recover after a failure quarantined the slot, and finally
// Close.
type Transfer interface {
	// Admit is the capacity gate, checked before anything is reserved: it declines (with a
	// typed error) slots of slotBytes that the transfer cannot serve.
	Admit(slotBytes uint64, slots int) error
	// Reserve allocates slots stable buffers of slotBytes each. After a failure the
	// DoubleBuffer calls Close to free what was reserved.
	Reserve(slotBytes uint64, slots int) error
	// SlotPtr returns slot's device address, the same for its whole life.
	SlotPtr(slot int) cudadrv.DevicePtr
	// Fill queues req's image into slot (after the slot's release fence when req.Reuse) and
	// returns the path taken. It must not block on the device copy. An error makes the
	// DoubleBuffer quarantine the slot.
	Fill(slot int, req *FillRequest) (FillResult, error)
	// FillDone reports, without blocking, whether slot's last fill has completed; an error
	// means it failed (the slot is quarantined).
	FillDone(slot int) (bool, error)
	// Fence makes the consumer's later work wait for slot's last fill, without blocking the
	// host.
	Fence(slot int) error
	// Release records slot's release fence after the consumer's work queued so far.
	Release(slot int) error
	// Recover makes a quarantined slot fillable again, as if it had never held a layer: it
	// waits (blocking the host) for every copy the failed fill queued and every fence of the
	// slot still outstanding, and drops what they held. After an error the slot stays
	// quarantined.
	Recover(slot int) error
	// Close waits for every outstanding copy and fence and frees everything.
	Close() error
}

// TransferMode chooses how a CUDATransfer moves bytes.
type TransferMode int

// The modes.
const (
	// ModeZeroCopy (the default, the "auto" path) copies from the layer's file extents
	// registered with the driver (kept registered by the pool across fills), and stages
	// through pinned memory whatever it cannot register: a registration error, the register
	// cap with every registration in use, or a source that is not a MappingSource. Each such
	// fill is reported as PathFallback with its reason.
	ModeZeroCopy TransferMode = iota
	// ModeStaging always copies through pinned staging memory.
	ModeStaging
	// ModeZeroCopyOnly copies from registered file extents only: a fill that cannot register
	// them fails (its slot is quarantined) instead of staging. It reserves no staging memory.
	ModeZeroCopyOnly
)

// String names the mode.
func (m TransferMode) String() string {
	switch m {
	case ModeZeroCopy:
		return "zero-copy"
	case ModeStaging:
		return "staging"
	case ModeZeroCopyOnly:
		return "zero-copy only"
	}
	return fmt.Sprintf("TransferMode(%d)", int(m))
}

// DefaultStagingChunkBytes is the default of CUDATransferConfig.StagingChunkBytes. The H2D
// copy of a staged layer's last chunk follows its host copy unoverlapped; 4 MiB chunks, which
// halve that tail, measured slower than 8 MiB on the H200 (the host copy itself slowed).
const DefaultStagingChunkBytes = 8 << 20

// CUDATransferConfig configures a CUDATransfer. Context, CopyStream, ComputeStream and Pool are
// required; the transfer does not own them.
type CUDATransferConfig struct {
	Context *cudadrv.Context // the context everything is made in
	// CopyStream carries the H2D copies; ComputeStream is the consumer that Fence orders and
	// Release records on.
	CopyStream, ComputeStream *cudadrv.Stream
	// Pool provides pinned staging memory and the zero-copy registration registry; its
	// retention cap is the capacity gate.
	Pool *StagingPool
	Mode TransferMode // zero-copy (default) or staging
	// CopyWorkers caps the goroutines that copy file bytes into staging memory (0: chosen
	// from the size, at most 16 and GOMAXPROCS; one copies about 6 GB/s, 16 about 35 GB/s).
	CopyWorkers int
	// RegisterChunkBytes is the most bytes registered per driver call on the zero-copy path,
	// aligned to it in the file; each chunk's copy is queued as soon as it is registered,
	// overlapping the next registration (0: the pool's, StagingPoolConfig.RegisterChunkBytes,
	// so that fills find what StagingPool.RegisterFile registered in whole ranges).
	RegisterChunkBytes uint64
	// StagingChunkBytes is the granularity at which staged bytes are copied H2D as soon as
	// they land in staging memory (0: DefaultStagingChunkBytes).
	StagingChunkBytes uint64
}

// TransferMetrics count a CUDATransfer's work.
type TransferMetrics struct {
	ZeroCopyBytes        uint64        // bytes copied from registered file extents
	StagedBytes          uint64        // bytes copied through staging memory
	RegistrationFailures uint64        // registration errors (or cap refusals) that made a fill fall back or fail
	StagingWait          time.Duration // host time spent waiting for a staging buffer's previous copy
	HostCopy             time.Duration // host time spent copying file bytes into staging memory
}

type cudaSlot struct {
	buf      *cudadrv.DeviceBuffer
	copied   *cudadrv.Event // recorded on the copy stream after each fill
	released *cudadrv.Event // recorded on the compute stream at each release

	fillRecorded    bool // copied holds the latest fill's completion
	fillPending     bool // … not yet seen complete
	syncCopyOnDrain bool // a fill failed before recording copied: drain the whole copy stream
	fenced          bool // the compute stream was fenced on the slot and not released since
	releaseRecorded bool

	staging     *StagingBuffer
	stagingBusy bool        // copies queued from staging may still be reading it
	regs        []*regEntry // registrations that queued copies may still be reading
}

// CUDATransfer is the Transfer of a real (or simulated) device: two device buffers, an H2D
// path through pinned staging memory or zero-copy from registered file extents, and events for
// the two-directional fences. See CUDATransferConfig.
//
// Every method calls the driver on the calling goroutine's OS thread, bound to the transfer's
// context for the call. Registrations are unregistered once the copy reading them has
// completed, observed without blocking on later calls, or by Close.
type CUDATransfer struct {
	cfg   CUDATransferConfig
	mu    sync.Mutex
	slots []cudaSlot
	size  uint64

	metrics TransferMetrics
	closed  bool
}

var _ Transfer = (*CUDATransfer)(nil)

// NewCUDATransfer checks cfg and returns a transfer with nothing reserved yet.
func NewCUDATransfer(cfg CUDATransferConfig) (*CUDATransfer, error) {
	switch {
	case cfg.Context == nil:
		return nil, errors.New("paging: transfer needs a context")
	case cfg.CopyStream == nil || cfg.ComputeStream == nil:
		return nil, errors.New("paging: transfer needs a copy stream and a compute stream")
	case cfg.Pool == nil:
		return nil, errors.New("paging: transfer needs a staging pool")
	case cfg.Pool.Context() != cfg.Context:
		return nil, errors.New("paging: staging pool belongs to another context")
	case cfg.Mode != ModeZeroCopy && cfg.Mode != ModeStaging && cfg.Mode != ModeZeroCopyOnly:
		return nil, fmt.Errorf("paging: unknown transfer mode %d", int(cfg.Mode))
	case cfg.RegisterChunkBytes > 1<<40:
		return nil, fmt.Errorf("paging: register chunk of %d bytes is too large (at most 1 TiB)", cfg.RegisterChunkBytes)
	}
	if cfg.RegisterChunkBytes == 0 {
		cfg.RegisterChunkBytes = cfg.Pool.chunk
	}
	cfg.RegisterChunkBytes = max(alignUp(cfg.RegisterChunkBytes, pageSize), pageSize)
	if cfg.StagingChunkBytes == 0 {
		cfg.StagingChunkBytes = DefaultStagingChunkBytes
	}
	if cfg.CopyWorkers <= 0 {
		cfg.CopyWorkers = min(16, runtime.GOMAXPROCS(0))
	}
	return &CUDATransfer{cfg: cfg}, nil
}

// Metrics returns a snapshot of the transfer's counters.
func (t *CUDATransfer) Metrics() TransferMetrics {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.metrics
}

// Admit declines slots of slotBytes when the pool cannot retain two such staging buffers at
// once (a *PoolCapacityError), before anything is reserved. The gate applies in zero-copy mode
// too, since any fill may fall back to staging; ModeZeroCopyOnly never stages and skips it.
func (t *CUDATransfer) Admit(slotBytes uint64, slots int) error {
	if t.cfg.Mode != ModeZeroCopyOnly && !t.cfg.Pool.CanRetainConcurrent(slotBytes, slots) {
		return t.cfg.Pool.capacityError(slotBytes)
	}
	return nil
}

// Reserve allocates the slots' device buffers and events and acquires their staging buffers
// (in every mode but ModeZeroCopyOnly: a zero-copy fill that falls back stages without
// allocating pinned memory inside a prefill), so that no fill sets anything up.
func (t *CUDATransfer) Reserve(slotBytes uint64, slots int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if t.slots != nil {
		return errors.New("paging: transfer already reserved")
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return err
	}
	defer b.done()
	t.size = slotBytes
	t.slots = make([]cudaSlot, slots)
	for i := range t.slots {
		s := &t.slots[i]
		if s.buf, err = t.cfg.Context.Alloc(slotBytes); err != nil {
			return fmt.Errorf("paging: allocate slot %d of %d bytes: %w", i, slotBytes, err)
		}
		if s.copied, err = t.cfg.Context.NewEvent(cudadrv.EventDisableTiming); err != nil {
			return err
		}
		if s.released, err = t.cfg.Context.NewEvent(cudadrv.EventDisableTiming); err != nil {
			return err
		}
		if t.cfg.Mode != ModeZeroCopyOnly {
			if s.staging, err = t.cfg.Pool.Acquire(slotBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// SlotPtr returns slot's device address (0 before Reserve or for a bad index).
func (t *CUDATransfer) SlotPtr(slot int) cudadrv.DevicePtr {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slot < 0 || slot >= len(t.slots) || t.slots[slot].buf == nil {
		return 0
	}
	return t.slots[slot].buf.Ptr()
}

func (t *CUDATransfer) slot(i int) (*cudaSlot, error) {
	if t.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(t.slots) {
		return nil, fmt.Errorf("paging: no slot %d", i)
	}
	return &t.slots[i], nil
}

// reapLocked unregisters the registrations of every fill whose copy has completed, without
// blocking. It is called on every entry point so that registrations do not outlive their
// copies for long.
func (t *CUDATransfer) reapLocked() {
	for i := range t.slots {
		s := &t.slots[i]
		if !s.fillPending || s.syncCopyOnDrain {
			continue
		}
		if done, err := s.copied.Query(); err == nil && done {
			s.fillPending = false
			t.dropRegsLocked(s)
		}
	}
}

func (t *CUDATransfer) dropRegsLocked(s *cudaSlot) error {
	if len(s.regs) == 0 {
		return nil
	}
	err := t.cfg.Pool.regs.release(s.regs)
	s.regs = nil
	return err
}

// Fill queues req's image into slot. See Transfer.
func (t *CUDATransfer) Fill(slot int, req *FillRequest) (FillResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.slot(slot)
	if err != nil {
		return FillResult{}, err
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return FillResult{}, err
	}
	defer b.done()
	t.reapLocked()
	if s.syncCopyOnDrain {
		return FillResult{}, errors.New("paging: slot's previous fill failed")
	}
	if req.Reuse && s.releaseRecorded {
		if err := t.cfg.CopyStream.WaitEvent(s.released); err != nil {
			return FillResult{}, err
		}
	}
	// The previous fill's registrations stay held until this fill's completion: the copy
	// stream is in order, so this fill completing implies the previous one did.
	res, ferr := t.fillLocked(slot, s, req)
	if rerr := s.copied.Record(t.cfg.CopyStream); rerr != nil {
		s.syncCopyOnDrain = true
		return FillResult{}, errors.Join(ferr, rerr)
	}
	s.fillRecorded, s.fillPending = true, true
	return res, ferr
}

func (t *CUDATransfer) fillLocked(slot int, s *cudaSlot, req *FillRequest) (FillResult, error) {
	dst := s.buf.Ptr()
	ms, zeroCopy := req.Source.(MappingSource)
	if t.cfg.Mode == ModeStaging {
		return FillResult{Path: PathStaging}, t.stageLocked(s, dst, req.Segments, 0, 0)
	}
	if !zeroCopy {
		if t.cfg.Mode == ModeZeroCopyOnly {
			return FillResult{}, fmt.Errorf("paging: layer %d: zero-copy only, and its source is not a MappingSource", req.Layer)
		}
		return FillResult{Path: PathStaging}, t.stageLocked(s, dst, req.Segments, 0, 0)
	}
	k, pos, err := t.zeroCopyLocked(s, dst, ms, req.Segments)
	if err == nil {
		return FillResult{Path: PathZeroCopy}, nil
	}
	var regErr *registrationError
	if !errors.As(err, &regErr) {
		return FillResult{Path: PathZeroCopy}, err
	}
	t.metrics.RegistrationFailures++
	if t.cfg.Mode == ModeZeroCopyOnly {
		return FillResult{Path: PathZeroCopy}, fmt.Errorf("paging: layer %d: zero-copy only, and mapping %d could not be registered: %w", req.Layer, regErr.mapping, regErr.err)
	}
	fb := &Fallback{Layer: req.Layer, Slot: slot, Mapping: regErr.mapping, Reason: regErr.Error(), Err: regErr.err}
	return FillResult{Path: PathFallback, Fallback: fb}, t.stageLocked(s, dst, req.Segments, k, pos)
}

// registrationError marks the errors of the zero-copy path that fall back to staging, with
// the mapping whose extent could not be registered.
type registrationError struct {
	mapping MappingID
	err     error
}

func (e *registrationError) Error() string { return e.err.Error() }
func (e *registrationError) Unwrap() error { return e.err }

// zeroCopyLocked queues each chunk of the segments' page-aligned extents straight from the
// registrations covering it, registering what no registration covers yet (kept after the copy
// when the source can tell the pool when the file is unmapped, see registrationHolder). On a
// registration error it returns the segment index and offset within it where staging must
// take over.
func (t *CUDATransfer) zeroCopyLocked(s *cudaSlot, dst cudadrv.DevicePtr, ms MappingSource, segs []Segment) (int, uint64, error) {
	chunk := t.cfg.RegisterChunkBytes
	holder, persist := ms.(registrationHolder)
	var held MappingID
	for k, sg := range segs {
		mem, err := ms.Mapping(sg.Region.Mapping)
		if err != nil {
			return k, 0, &registrationError{sg.Region.Mapping, err}
		}
		if persist && (k == 0 || held != sg.Region.Mapping) {
			// The fill has the file pinned: it cannot be unmapped before the registrations
			// are known to its source.
			if err := holder.holdRegistrations(sg.Region.Mapping, &t.cfg.Pool.regs); err != nil {
				return k, 0, &registrationError{sg.Region.Mapping, err}
			}
			held = sg.Region.Mapping
		}
		start, end := sg.Region.Offset, sg.Region.Offset+sg.Region.Len
		if end > uint64(len(mem)) || &mem[start] != &sg.Src[0] {
			// The source's region bytes are not a view of its mapping: never register
			// anything else than the bytes copied.
			return k, 0, &registrationError{sg.Region.Mapping, fmt.Errorf("paging: mapping %d does not hold the region's bytes", sg.Region.Mapping)}
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
		for pos := start; pos < end; {
			next := min(end, alignDown(pos, chunk)+chunk)
			lo, hi := alignDown(pos, pageSize), min(alignUp(next, pageSize), uint64(len(mem)))
			entries, err := t.cfg.Pool.regs.acquire(mem[lo:hi:hi], base+uintptr(lo), !persist, true)
			if err != nil {
				return k, pos - start, &registrationError{sg.Region.Mapping, err}
			}
			s.regs = append(s.regs, entries...)
			for _, e := range entries {
				// Copy the part of [pos, next) this registration covers, from the
				// registration's own bytes (a copy must not straddle registrations).
				a := max(e.lo, base+uintptr(pos))
				z := min(e.hi, base+uintptr(next))
				if a >= z {
					continue
				}
				src := e.reg.Bytes()[a-e.lo : z-e.lo]
				at := sg.DstOffset + uint64(a-base) - start
				if err := t.cfg.CopyStream.CopyHtoDAsync(dst+cudadrv.DevicePtr(at), src); err != nil {
					return k, pos - start, err
				}
				t.metrics.ZeroCopyBytes += uint64(z - a)
			}
			pos = next
		}
	}
	return len(segs), 0, nil
}

// stageLocked copies the image from segment k, offset pos within it, to the end through the
// slot's staging buffer and queues the H2D copies as the host copy progresses.
func (t *CUDATransfer) stageLocked(s *cudaSlot, dst cudadrv.DevicePtr, segs []Segment, k int, pos uint64) error {
	if k >= len(segs) {
		return nil
	}
	if s.staging == nil {
		st, err := t.cfg.Pool.Acquire(t.size)
		if err != nil {
			return err
		}
		s.staging = st
	}
	if s.stagingBusy && s.fillRecorded {
		// The host is about to overwrite staging memory that the slot's previous fill copied
		// from: wait for that copy (long done in a steady pipeline: it preceded the compute
		// that was released before this slot could be reused).
		start := time.Now()
		err := s.copied.Synchronize()
		t.metrics.StagingWait += time.Since(start)
		if err != nil {
			return err
		}
	}
	s.stagingBusy = true
	start := time.Now()
	n, err := stageCopy(s.staging.Bytes(), segs, k, pos, t.cfg.StagingChunkBytes, t.cfg.CopyWorkers,
		func(lo, hi uint64) error {
			return t.cfg.CopyStream.CopyHtoDAsync(dst+cudadrv.DevicePtr(lo), s.staging.Bytes()[lo:hi])
		})
	t.metrics.HostCopy += time.Since(start)
	t.metrics.StagedBytes += n
	return err
}

// FillDone reports whether slot's last fill has completed, without blocking. See Transfer.
func (t *CUDATransfer) FillDone(slot int) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.slot(slot)
	if err != nil {
		return false, err
	}
	if !s.fillPending {
		return true, nil
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return false, err
	}
	defer b.done()
	done, err := s.copied.Query()
	if err != nil || !done {
		return false, err
	}
	s.fillPending = false
	return true, t.dropRegsLocked(s)
}

// Fence makes the compute stream wait for slot's last fill (cuStreamWaitEvent; the host does
// not block).
func (t *CUDATransfer) Fence(slot int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.slot(slot)
	if err != nil {
		return err
	}
	if !s.fillRecorded {
		return fmt.Errorf("paging: slot %d has no fill to fence on", slot)
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return err
	}
	defer b.done()
	t.reapLocked()
	if err := t.cfg.ComputeStream.WaitEvent(s.copied); err != nil {
		return err
	}
	s.fenced = true
	return nil
}

// Release records slot's release fence on the compute stream.
func (t *CUDATransfer) Release(slot int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.slot(slot)
	if err != nil {
		return err
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return err
	}
	defer b.done()
	t.reapLocked()
	if err := s.released.Record(t.cfg.ComputeStream); err != nil {
		return err
	}
	s.releaseRecorded, s.fenced = true, false
	return nil
}

// Recover waits for everything slot's failed fill, fence or release left outstanding and makes
// the slot fillable again. See Transfer.
func (t *CUDATransfer) Recover(slot int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.slot(slot)
	if err != nil {
		return err
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return err
	}
	defer b.done()
	if s.syncCopyOnDrain {
		// The fill failed before its completion event was recorded: the copy stream itself
		// is the only witness of the copies it had queued.
		if err := t.cfg.CopyStream.Synchronize(); err != nil {
			return err
		}
	} else if s.fillRecorded {
		if err := s.copied.Synchronize(); err != nil {
			return err
		}
	}
	if s.fenced {
		// Consumed and its release failed: the compute stream may still read the buffer.
		if err := t.cfg.ComputeStream.Synchronize(); err != nil {
			return err
		}
	}
	if s.releaseRecorded {
		if err := s.released.Synchronize(); err != nil {
			return err
		}
	}
	if err := t.dropRegsLocked(s); err != nil {
		return err
	}
	s.syncCopyOnDrain, s.fillPending, s.fenced, s.stagingBusy = false, false, false, false
	return nil
}

// Close waits for every slot's outstanding copy and release fence, unregisters what the copies
// read, returns the staging buffers to the pool and frees the device buffers and events. A
// second Close returns ErrClosed.
func (t *CUDATransfer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.closed = true
	if len(t.slots) == 0 {
		return nil
	}
	b, err := bind(t.cfg.Context)
	if err != nil {
		return err
	}
	defer b.done()
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := range t.slots {
		s := &t.slots[i]
		if s.syncCopyOnDrain {
			note(t.cfg.CopyStream.Synchronize())
		}
		if s.fenced {
			// Consumed and never released (its release failed): the compute stream may still
			// read the buffer.
			note(t.cfg.ComputeStream.Synchronize())
		}
	}
	for i := range t.slots {
		s := &t.slots[i]
		if s.copied != nil {
			if s.fillRecorded {
				note(s.copied.Synchronize())
			}
			note(s.copied.Destroy())
		}
		if s.released != nil {
			if s.releaseRecorded {
				note(s.released.Synchronize())
			}
			note(s.released.Destroy())
		}
		note(t.dropRegsLocked(s))
		if s.staging != nil {
			note(s.staging.Release())
		}
		if s.buf != nil {
			note(s.buf.Free())
		}
	}
	return errors.Join(errs...)
}
