package paging

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// EnvDoubleBuffer is the environment variable that turns prefill double buffering on for
// residencies whose config leaves the gate to the environment: "1" (or "true", "on", "yes").
const EnvDoubleBuffer = "CUDAEP_PREFILL_DOUBLE_BUFFER"

// DoubleBufferFromEnv reports whether EnvDoubleBuffer turns double buffering on.
func DoubleBufferFromEnv() bool {
	switch strings.ToLower(os.Getenv(EnvDoubleBuffer)) {
	case "1", "true", "on", "yes":
		return true
	}
	return false
}

// Gate says whether a Residency routes weights through the double buffer.
type Gate int8

// The gate settings. The zero value leaves the choice to the environment.
const (
	// GateFromEnv enables double buffering when EnvDoubleBuffer says so (off by default),
	// as read when the residency is created.
	GateFromEnv Gate = iota
	// GateOn enables it regardless of the environment.
	GateOn
	// GateOff disables it regardless of the environment.
	GateOff
)

// DeclineReason says why a Residency did not route a weight through the double buffer.
type DeclineReason int

// The decline reasons.
const (
	// DeclineNone is the zero reason: the weight was routed, nothing was declined.
	DeclineNone DeclineReason = iota
	// DeclineDisabled: double buffering is off (the default).
	DeclineDisabled
	// DeclineBoundary: the weight's boundary is not eligible for paging.
	DeclineBoundary
	// DeclineOversize: the layer is larger than the pipeline's slots (sized by the first
	// eligible layer) or than half the residency's device byte budget.
	DeclineOversize
	// DeclinePoolCapacity: two staging buffers for the layer exceed the pinned pool's
	// retention cap.
	DeclinePoolCapacity
	// DeclineBusy: every slot holds a layer not yet released, or is quarantined (see
	// Decline.Quarantined and Residency.Recover).
	DeclineBusy
)

// String names the reason.
func (r DeclineReason) String() string {
	switch r {
	case DeclineNone:
		return "none"
	case DeclineDisabled:
		return "disabled"
	case DeclineBoundary:
		return "boundary"
	case DeclineOversize:
		return "oversize"
	case DeclinePoolCapacity:
		return "pool capacity"
	case DeclineBusy:
		return "busy"
	}
	return fmt.Sprintf("DeclineReason(%d)", int(r))
}

// Decline is the outcome of Residency.Prefetch: the zero Decline (Reason DeclineNone) means
// the weight was routed through the double buffer; any other is a typed refusal, and the
// caller loads the weight the ordinary way. A decline is a normal result, not a failure: it is
// returned beside a nil error. It never builds the pipeline when it is not built yet, and never
// changes a built one.
type Decline struct {
	Reason   DeclineReason // why; DeclineNone when routed
	Layer    LayerID       // the layer declined
	Boundary Boundary      // the weight's boundary (DeclineBoundary)
	// LayerBytes and Capacity are the layer's image size and the most a layer may have
	// (DeclineOversize, DeclinePoolCapacity).
	LayerBytes, Capacity uint64
	// Quarantined is the number of slots quarantined when the layer was declined
	// (DeclineBusy): Residency.Recover puts them back in service.
	Quarantined int
	Err         error // the underlying error (DeclinePoolCapacity, DeclineBusy)
}

// Declined reports whether the weight was declined (Reason is not DeclineNone).
func (d Decline) Declined() bool { return d.Reason != DeclineNone }

// String names the layer and the reason with its figures.
func (d Decline) String() string {
	if !d.Declined() {
		return fmt.Sprintf("paging: layer %d routed", d.Layer)
	}
	s := fmt.Sprintf("paging: layer %d declined: %s", d.Layer, d.Reason)
	switch d.Reason {
	case DeclineBoundary:
		s += fmt.Sprintf(" (%s weights are not paged)", d.Boundary)
	case DeclineOversize, DeclinePoolCapacity:
		s += fmt.Sprintf(" (%d bytes, capacity %d)", d.LayerBytes, d.Capacity)
	case DeclineBusy:
		if d.Quarantined > 0 {
			s += fmt.Sprintf(" (%d slot(s) quarantined: Recover puts them back in service)", d.Quarantined)
		}
	}
	return s
}

// ResidencyConfig configures a Residency. Context, CopyStream, ComputeStream and Pool are
// required and not owned by the residency.
type ResidencyConfig struct {
	Context *cudadrv.Context // the provider's context
	// CopyStream carries the H2D copies; ComputeStream runs the kernels that read the weights.
	CopyStream, ComputeStream *cudadrv.Stream
	Pool                      *StagingPool // the provider's pinned staging pool
	// BudgetBytes caps the device bytes the pipeline holds (its two slots); 0 means no budget.
	BudgetBytes uint64
	// SlotBytes, when not 0, sizes the pipeline's slots and has NewResidency build it at once
	// (when the gate is on): slots, events and staging buffers are reserved before the first
	// prefill, and a layer larger than SlotBytes is declined DeclineOversize. When 0 the
	// pipeline is built at the first eligible Prefetch, sized by that layer.
	SlotBytes uint64
	// DoubleBuffer is the default-off gate (see Gate).
	DoubleBuffer Gate
	// Mode, CopyWorkers, RegisterChunkBytes and StagingChunkBytes configure the pipeline's
	// CUDATransfer.
	Mode               TransferMode
	CopyWorkers        int
	RegisterChunkBytes uint64
	StagingChunkBytes  uint64
}

// ResidencyStats count a Residency's routing and paging.
type ResidencyStats struct {
	Routed           uint64 // prefetches queued through the pipeline
	Consumed         uint64 // layers paged (PagedWeights handed out)
	Released         uint64 // PagedWeights released
	Cancelled        uint64 // routed layers cancelled before paging
	DeclinedOversize uint64 // DeclineOversize declines
	DeclinedBusy     uint64 // DeclineBusy declines
	FillErrors       uint64 // fills that failed (each quarantined a slot)
	Quarantines      uint64 // slots quarantined so far, recovered or not (Metrics.Poisoned)
	Quarantined      int    // slots quarantined now
	Recovered        uint64 // quarantined slots put back in service by Recover
	ZeroCopyLayers   uint64 // fills by PathZeroCopy
	StagingLayers    uint64 // fills by PathStaging
	FallbackLayers   uint64 // fills by PathFallback
	// LastFallback is the latest fill that fell back from zero-copy to staging, with the layer
	// and the registration error's text; nil when none did. PagedWeight.Path and
	// PagedWeight.Fallback give each layer's own.
	LastFallback *Fallback
	// Layers is the path of the latest paging of every layer paged so far, with the reason
	// of each fallback. The map is the caller's copy.
	Layers map[LayerID]LayerPath
	// Registered describes the external-data extents the staging pool keeps registered with
	// the driver (shared by every pipeline of the pool).
	Registered RegistrationStats
}

// LayerPath is how a layer's latest paging moved its bytes.
type LayerPath struct {
	Path  Path   // the fill's path
	Bytes uint64 // the layer's image size
	// Fallback says why a PathFallback fill staged (nil for any other path).
	Fallback *Fallback
}

type pendingLayer struct {
	ticket Ticket
	weight *LazyWeight
}

// Residency routes a provider's lazy weights through one prefill double buffer on a device
// byte budget: Prefetch one layer ahead, Page the current one, release the PagedWeight when
// its kernels are queued. Weights that do not qualify get a typed *Decline. The pipeline is
// built on the first eligible layer and sized by it.
//
// Several residencies may share a context, streams and staging pool; each has its own
// pipeline and never sees another's bytes. A Residency is safe for concurrent use. Close it
// when the prefill is done; PagedWeights still held keep it alive until they are released.
//
// # Quarantine
//
// A failed fill quarantines its slot (Prefetch or Page returns the *FillError) and the
// residency goes on with the other slot; with both quarantined, every Prefetch declines
// DeclineBusy with Decline.Quarantined = 2. Quarantine lasts until the host calls Recover:
// the residency never retries on its own, so the host decides when a failing device is tried
// again.
type Residency struct {
	cfg     ResidencyConfig
	enabled bool

	mu      sync.Mutex
	db      *DoubleBuffer
	pending map[LayerID]pendingLayer
	stats   ResidencyStats
	layers  map[LayerID]LayerPath
	paged   int // PagedWeights not yet released
	closed  bool
	down    bool // pipeline torn down
}

// NewResidency checks cfg and returns a residency. With cfg.SlotBytes set and the gate on, it
// builds the pipeline now (two slots of SlotBytes, their events and staging buffers);
// otherwise nothing is allocated until the first eligible layer is prefetched.
//
// # Errors
//
// A missing context, stream or pool, or an unknown gate. With SlotBytes set: a slot larger
// than half the budget, a *PoolCapacityError when two staging buffers of SlotBytes exceed the
// pool's retention cap, or the driver's error while building (nothing stays allocated).
func NewResidency(cfg ResidencyConfig) (*Residency, error) {
	switch {
	case cfg.Context == nil:
		return nil, errors.New("paging: residency needs a context")
	case cfg.CopyStream == nil || cfg.ComputeStream == nil:
		return nil, errors.New("paging: residency needs a copy stream and a compute stream")
	case cfg.Pool == nil:
		return nil, errors.New("paging: residency needs a staging pool")
	case cfg.DoubleBuffer < GateFromEnv || cfg.DoubleBuffer > GateOff:
		return nil, fmt.Errorf("paging: unknown gate %d", int(cfg.DoubleBuffer))
	case cfg.SlotBytes > 0 && cfg.BudgetBytes > 0 && cfg.SlotBytes > cfg.BudgetBytes/SlotCount:
		return nil, fmt.Errorf("paging: slots of %d bytes exceed half the residency budget of %d bytes", cfg.SlotBytes, cfg.BudgetBytes)
	}
	enabled := cfg.DoubleBuffer == GateOn || (cfg.DoubleBuffer == GateFromEnv && DoubleBufferFromEnv())
	r := &Residency{cfg: cfg, enabled: enabled, pending: map[LayerID]pendingLayer{}, layers: map[LayerID]LayerPath{}}
	if enabled && cfg.SlotBytes > 0 {
		if err := r.buildLocked(cfg.SlotBytes); err != nil {
			return nil, fmt.Errorf("paging: reserve the residency's slots of %d bytes: %w", cfg.SlotBytes, err)
		}
	}
	return r, nil
}

// Enabled reports whether the gate routes weights through the double buffer.
func (r *Residency) Enabled() bool { return r.enabled }

// Active reports whether the pipeline has been built (and not torn down).
func (r *Residency) Active() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.db != nil && !r.down
}

// Prefetch routes layer's weight through the double buffer: it queues the copy of its image
// into a free slot and returns the zero Decline, or returns a Decline saying why the caller
// must load it the ordinary way; either way with a nil error. Prefetching a layer already
// pending with the same weight routes nothing new and returns the zero Decline.
//
// Declines, in the order checked: DeclineDisabled, DeclineBoundary, DeclineOversize (a layer
// larger than half the budget before the pipeline exists, or than its slots after),
// DeclinePoolCapacity (building), DeclineBusy. None builds or changes the pipeline.
//
// # Errors
//
// Errors are failures only, never declines, and come with the zero Decline: ErrClosed; a
// *RegionError, *TruncatedError or source error for a region that cannot be read (before any
// device work); a *FillError when the copy failed (its slot is quarantined; the pipeline keeps
// serving with the other); a driver error while building.
func (r *Residency) Prefetch(layer LayerID, w *LazyWeight, src RegionSource) (Decline, error) {
	if w == nil || src == nil {
		return Decline{}, errors.New("paging: prefetch needs a weight and a source")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Decline{}, ErrClosed
	}
	if !r.enabled {
		return Decline{Reason: DeclineDisabled, Layer: layer}, nil
	}
	if !w.Pageable() {
		return Decline{Reason: DeclineBoundary, Layer: layer, Boundary: w.Boundary()}, nil
	}
	if p, ok := r.pending[layer]; ok {
		if p.weight == w {
			return Decline{}, nil
		}
		return Decline{}, fmt.Errorf("paging: layer %d is already prefetched with another weight", layer)
	}
	if r.db == nil {
		if b := r.cfg.BudgetBytes; b > 0 && w.Bytes() > b/SlotCount {
			r.stats.DeclinedOversize++
			return Decline{Reason: DeclineOversize, Layer: layer, LayerBytes: w.Bytes(), Capacity: b / SlotCount}, nil
		}
		// A bad region or a truncated file is reported before the first device allocation.
		if _, err := resolveSegments(w, src); err != nil {
			return Decline{}, err
		}
		if err := r.buildLocked(w.Bytes()); err != nil {
			var pc *PoolCapacityError
			if errors.As(err, &pc) {
				return Decline{Reason: DeclinePoolCapacity, Layer: layer, LayerBytes: w.Bytes(),
					Capacity: pc.MaxLayerBytes(), Err: err}, nil
			}
			return Decline{}, err
		}
	}
	if c := r.db.Capacity(); w.Bytes() > c {
		r.stats.DeclinedOversize++
		return Decline{Reason: DeclineOversize, Layer: layer, LayerBytes: w.Bytes(), Capacity: c}, nil
	}
	t, err := r.db.Prefetch(layer, w, src)
	switch {
	case errors.Is(err, ErrNoFreeSlot):
		r.stats.DeclinedBusy++
		return Decline{Reason: DeclineBusy, Layer: layer, Quarantined: r.db.Quarantined(), Err: err}, nil
	case errors.As(err, new(*FillError)):
		r.stats.FillErrors++
		return Decline{}, err
	case err != nil:
		return Decline{}, err
	}
	r.pending[layer] = pendingLayer{ticket: t, weight: w}
	r.stats.Routed++
	return Decline{}, nil
}

// Recover puts the pipeline's quarantined slots back in service (see DoubleBuffer.Recover)
// and returns how many it reset; 0 when none was quarantined or the pipeline is not built. It
// blocks the host until the copies and fences the failures left outstanding have completed.
// A layer still pending on a reset slot is forgotten: Page returns ErrNotPrefetched for it.
// The counters are kept: FillErrors and Quarantines still count the failures, Recovered the
// slots reset.
//
// # Errors
//
// ErrClosed; a slot whose outstanding work cannot be waited for stays quarantined and its
// error is returned (the other slot is still reset).
func (r *Residency) Recover() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	if r.db == nil || r.down {
		return 0, nil
	}
	var stuck []LayerID
	for layer, p := range r.pending {
		if r.db.SlotState(p.ticket.Slot()) == SlotQuarantined {
			stuck = append(stuck, layer)
		}
	}
	n, err := r.db.Recover()
	for _, layer := range stuck {
		if r.db.SlotState(r.pending[layer].ticket.Slot()) == SlotFree {
			delete(r.pending, layer)
		}
	}
	r.stats.Recovered += uint64(n)
	return n, err
}

func (r *Residency) buildLocked(slotBytes uint64) error {
	t, err := NewCUDATransfer(CUDATransferConfig{
		Context: r.cfg.Context, CopyStream: r.cfg.CopyStream, ComputeStream: r.cfg.ComputeStream,
		Pool: r.cfg.Pool, Mode: r.cfg.Mode, CopyWorkers: r.cfg.CopyWorkers,
		RegisterChunkBytes: r.cfg.RegisterChunkBytes, StagingChunkBytes: r.cfg.StagingChunkBytes,
	})
	if err != nil {
		return err
	}
	db, err := NewDoubleBuffer(t, slotBytes)
	if err != nil {
		return err
	}
	r.db = db
	return nil
}

// Page consumes a prefetched layer: the compute stream is fenced on its copy (enqueue-only)
// and the returned PagedWeight points at its bytes in the slot. Release the PagedWeight once
// the kernels that read it are queued; until then the slot is not reused and the residency
// stays alive.
//
// # Errors
//
// ErrClosed; ErrNotPrefetched for a layer that was not routed (or was already paged or
// cancelled); a *FillError when its fill failed (the slot is quarantined).
func (r *Residency) Page(layer LayerID) (*PagedWeight, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	p, ok := r.pending[layer]
	if !ok {
		return nil, fmt.Errorf("%w: layer %d", ErrNotPrefetched, layer)
	}
	delete(r.pending, layer)
	view, err := r.db.Wait(p.ticket)
	if err != nil {
		if errors.As(err, new(*FillError)) {
			r.stats.FillErrors++
		}
		return nil, err
	}
	r.stats.Consumed++
	r.paged++
	r.layers[layer] = LayerPath{Path: view.Path, Bytes: view.Len, Fallback: view.Fallback}
	return &PagedWeight{r: r, ticket: p.ticket, view: view, weight: p.weight}, nil
}

// Cancel abandons a routed layer that was not paged: its slot is freed for reuse without
// quarantine. Cancelling a layer that is not pending returns ErrNotPrefetched.
func (r *Residency) Cancel(layer LayerID) error {
	fence, err := r.CancelLater(layer)
	if err != nil || fence == nil {
		return err
	}
	return fence()
}

// CancelLater is Cancel in two halves (see DoubleBuffer.CancelLater): it checks and abandons
// the layer now, so that it is no longer pending (Page and a second Cancel refuse it), and
// returns fence, the driver half, to run exactly once when the compute stream may be used
// again (nil when there is nothing to record: the layer's slot was quarantined).
//
// # Errors
//
// ErrClosed; ErrNotPrefetched for a layer that is not pending (nothing changes).
func (r *Residency) CancelLater(layer LayerID) (fence func() error, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	p, ok := r.pending[layer]
	if !ok {
		return nil, fmt.Errorf("%w: layer %d", ErrNotPrefetched, layer)
	}
	delete(r.pending, layer)
	fence, err = r.db.CancelLater(p.ticket)
	if err != nil {
		return nil, err
	}
	r.stats.Cancelled++
	return fence, nil
}

// Stats returns the residency's counters and whether its pipeline was ever built (the seed's
// "no pipeline, no stats": the counters are all zero then, except DeclinedOversize from the
// budget).
func (r *Residency) Stats() (ResidencyStats, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Registered = r.cfg.Pool.RegistrationStats()
	s.Layers = make(map[LayerID]LayerPath, len(r.layers))
	for l, p := range r.layers {
		s.Layers[l] = p
	}
	if r.db == nil {
		return s, false
	}
	m := r.db.Metrics()
	s.ZeroCopyLayers, s.StagingLayers, s.FallbackLayers = m.ZeroCopyLayers, m.StagingLayers, m.FallbackLayers
	s.Quarantines, s.LastFallback = m.Poisoned, m.LastFallback
	s.Quarantined = r.db.Quarantined()
	return s, true
}

// Pipeline returns the residency's double buffer, or nil before the first eligible layer. It
// is for inspection (metrics, slot states); driving it directly bypasses the residency's
// bookkeeping.
func (r *Residency) Pipeline() *DoubleBuffer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.db
}

// Close ends the residency: later calls return ErrClosed. When no PagedWeight is outstanding
// the pipeline is drained and freed now, including layers prefetched and never paged, and the
// result is returned. Otherwise the teardown happens when the last PagedWeight is released,
// and that Release returns its result. A second Close returns ErrClosed.
func (r *Residency) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.closed = true
	clear(r.pending)
	if r.paged > 0 {
		return nil
	}
	return r.teardownLocked()
}

func (r *Residency) teardownLocked() error {
	if r.down || r.db == nil {
		r.down = true
		return nil
	}
	r.down = true
	return r.db.Close()
}

// PagedWeight is a layer's weight in a pipeline slot, valid for kernels queued on the compute
// stream until Release. It keeps its residency alive: a residency closed while PagedWeights
// are outstanding tears down when the last is released. Safe for concurrent use.
type PagedWeight struct {
	r        *Residency
	ticket   Ticket
	view     SlotView
	weight   *LazyWeight
	released bool // guarded by r.mu
}

// Ptr is the device address of the weight's image.
func (p *PagedWeight) Ptr() cudadrv.DevicePtr { return p.view.Ptr }

// Len is the image size in bytes.
func (p *PagedWeight) Len() uint64 { return p.view.Len }

// Layer is the layer the weight was paged for.
func (p *PagedWeight) Layer() LayerID { return p.view.Layer }

// Weight is the lazy weight paged.
func (p *PagedWeight) Weight() *LazyWeight { return p.weight }

// Path is how its bytes were moved.
func (p *PagedWeight) Path() Path { return p.view.Path }

// Fallback is why the weight was staged after trying zero-copy (Path is PathFallback: the
// layer, the file and the registration error's text), or nil for any other path.
func (p *PagedWeight) Fallback() *Fallback { return p.view.Fallback }

// Released reports whether Release was called.
func (p *PagedWeight) Released() bool {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.released
}

// Release records the slot's release fence after the compute work queued so far, freeing the
// slot for a later layer. When the residency was closed and this was the last outstanding
// PagedWeight, the pipeline is torn down and the result returned. A second Release returns
// ErrReleased.
func (p *PagedWeight) Release() error {
	work, err := p.ReleaseLater()
	if work != nil {
		err = errors.Join(err, work())
	}
	return err
}

// ReleaseLater is Release in two halves, for a caller that may not touch the device now (a
// CUDA graph capture is live): it releases the weight now (Released reports true, a second
// release returns ErrReleased, the slot reads draining and is not reused before its fence) and
// returns work, the driver half: it records the slot's release fence and, when the residency
// was closed and this was the last outstanding PagedWeight, tears the pipeline down. Run work
// exactly once, when the compute stream may be used again. work is nil only with
// ErrReleased; with any other error work must still run (it gives back the residency's hold).
func (p *PagedWeight) ReleaseLater() (work func() error, err error) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.released {
		return nil, ErrReleased
	}
	p.released = true
	fence, err := r.db.ReleaseLater(p.ticket)
	if err == nil {
		r.stats.Released++
	}
	return func() error {
		var errs []error
		if fence != nil {
			errs = append(errs, fence())
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.paged--
		if r.closed && r.paged == 0 {
			errs = append(errs, r.teardownLocked())
		}
		return errors.Join(errs...)
	}, err
}
