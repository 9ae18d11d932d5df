package ep

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cudaep/cudaep/paging"
)

// Weight paging types are the paging package's; the aliases let a Go host use them through ep.
type (
	// MappingID identifies an opened external-data file.
	MappingID = paging.MappingID
	// LayerID identifies a layer in the residency.
	LayerID = paging.LayerID
	// WeightSpec describes a lazy weight: dtype, shape, boundary and regions.
	WeightSpec = paging.WeightSpec
	// LazyWeight is a weight that lives in external-data files until paged.
	LazyWeight = paging.LazyWeight
	// RegionSource resolves a weight's regions to host bytes (LazyWeight.AppendImage's source).
	RegionSource = paging.RegionSource
	// PagedWeight is a weight's device image in a double-buffer slot.
	PagedWeight = paging.PagedWeight
	// ResidencyStats are the residency's counters.
	ResidencyStats = paging.ResidencyStats
	// LayerPath is how a layer's latest paging moved its bytes (in ResidencyStats.Layers).
	LayerPath = paging.LayerPath
	// RegistrationStats describe the external-data extents kept registered with the driver
	// (ResidencyStats.Registered).
	RegistrationStats = paging.RegistrationStats
	// RegisterReport is what registering an external-data file when it was opened did.
	RegisterReport = paging.RegisterReport
)

// weights is the provider's weight paging: its external-data mappings, its pinned staging pool
// (built once, kept for the provider's life) and its residency.
type weights struct {
	files     *paging.MmapSource
	pool      *paging.StagingPool
	residency *paging.Residency
	mode      paging.TransferMode // the residency's, from the paging_path option

	mu         sync.Mutex
	registered map[MappingID]RegisterReport // RegisterFile at open, per file
}

// transferMode maps the paging_path option to the transfer mode.
func transferMode(path string) paging.TransferMode {
	switch path {
	case PagingStaging:
		return paging.ModeStaging
	case PagingZeroCopy:
		return paging.ModeZeroCopyOnly
	}
	return paging.ModeZeroCopy
}

// startWeights builds the provider's weight paging from its options. No pinned memory is
// taken until a layer is routed, unless residency_slot_bytes reserves the pipeline now.
func (p *Provider) startWeights() error {
	pool, err := paging.NewStagingPoolWith(p.ctx, paging.StagingPoolConfig{
		RetentionCap: p.opts.StagingPoolCapBytes, RegisterCap: p.opts.RegisterCapBytes,
	})
	if err != nil {
		return fmt.Errorf("ep: staging pool: %w", err)
	}
	p.weights.pool = pool
	p.weights.files = paging.NewMmapSource()
	p.weights.registered = map[MappingID]RegisterReport{}
	p.weights.mode = transferMode(p.opts.pagingPath())
	gate := paging.GateFromEnv
	if p.opts.PrefillDoubleBuffer {
		gate = paging.GateOn
	}
	if b, s := p.opts.ResidencyBudgetBytes, p.opts.ResidencySlotBytes; b > 0 && s > b/paging.SlotCount {
		return fmt.Errorf("%w: ep: option %s=%d exceeds half of %s=%d (the residency holds two slots)",
			ErrInvalidArgument, OptionResidencySlotBytes, s, OptionResidencyBudgetBytes, b)
	}
	p.weights.residency, err = paging.NewResidency(paging.ResidencyConfig{
		Context: p.ctx, CopyStream: p.copy, ComputeStream: p.compute, Pool: pool,
		BudgetBytes: p.opts.ResidencyBudgetBytes, DoubleBuffer: gate, Mode: p.weights.mode,
		SlotBytes: p.opts.ResidencySlotBytes,
	})
	if err != nil {
		return fmt.Errorf("ep: residency (option %s=%d): %w", OptionResidencySlotBytes, p.opts.ResidencySlotBytes, err)
	}
	return nil
}

// stopWeights closes the residency, the pool and the mappings, in that order.
func (w *weights) stop() []error {
	var errs []error
	if w.residency != nil {
		errs = append(errs, ignoreClosed(w.residency.Close()))
	}
	if w.pool != nil {
		errs = append(errs, w.pool.Close())
	}
	if w.files != nil {
		errs = append(errs, w.files.CloseAll())
	}
	return errs
}

func ignoreClosed(err error) error {
	if errors.Is(err, paging.ErrClosed) {
		return nil
	}
	return err
}

// OpenExternalData maps an ONNX external-data file read-only (MAP_SHARED, PROT_READ) and
// returns its id for the regions of lazy weights. The file stays mapped until the provider is
// closed. Opening a file that is already open (by any path to it) returns its id again.
//
// With the prefill double buffer on and paging_path auto or zero_copy, the file is also
// registered with the driver now, in ranges, up to register_cap_bytes, so that its prefills
// copy from registered pages without registering anything (ExternalDataRegistration reports
// what was done). A registration failure, or a capture live on the provider, does not fail
// the open: the fills register what they need, or stage it.
//
// # Errors
//
// A missing, unreadable or empty file is an error naming the path, before any device work.
func (p *Provider) OpenExternalData(path string) (MappingID, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	id, err := p.weights.files.Open(path)
	if err != nil {
		return 0, fmt.Errorf("ep: open external data: %w", err)
	}
	if p.weights.residency.Enabled() && p.weights.mode != paging.ModeStaging {
		p.registerExternalData(id)
	}
	return id, nil
}

// registerExternalData registers the opened file id with the driver and keeps the report.
func (p *Provider) registerExternalData(id MappingID) {
	rep := RegisterReport{Mapping: id}
	e, err := p.enter("register external data", accessDriver)
	if err == nil {
		rep, err = p.weights.pool.RegisterFile(p.weights.files, id)
		e.leave()
	}
	if err != nil && rep.Stopped == "" {
		rep.Stopped = err.Error()
	}
	p.weights.mu.Lock()
	p.weights.registered[id] = rep
	p.weights.mu.Unlock()
}

// ExternalDataRegistration reports what registering the opened file id with the driver did
// when OpenExternalData opened it (the latest open, for a file opened more than once), and
// false when it was not registered at open (the prefill double buffer was off, paging_path was
// staging, or id is not an open file). A report whose Stopped is not empty says why the
// registration stopped before the end of the file.
func (p *Provider) ExternalDataRegistration(id MappingID) (RegisterReport, bool) {
	p.weights.mu.Lock()
	defer p.weights.mu.Unlock()
	rep, ok := p.weights.registered[id]
	return rep, ok
}

// CloseExternalData gives up one reference to an opened external-data file (each
// OpenExternalData of the path took one) and unmaps it at the last. Lazy weights naming the id
// fail afterwards with an error saying the mapping was closed.
//
// The file's pages kept registered with the driver are unregistered before it is unmapped.
//
// # Errors
//
// An id that is not open (never opened, or closed) is an argument error (a *paging.RegionError),
// reported first, capture or not. While a layer from the file is in flight the close is
// refused with an error wrapping paging.ErrFileBusy and nothing changes (release or cancel the
// layer, then close). During a capture on the provider, or on an OS thread that captures for
// another provider, it is refused with ErrCaptureLive or ErrThreadCaptures (unregistering
// calls the driver).
func (p *Provider) CloseExternalData(id MappingID) error {
	if _, err := p.weights.files.Size(id); err != nil {
		return fmt.Errorf("ep: close external data %d: %w", id, err)
	}
	e, err := p.enter("close external data", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := p.weights.files.Close(id); err != nil {
		return fmt.Errorf("ep: close external data %d: %w", id, err)
	}
	p.weights.mu.Lock()
	if _, open := p.weights.files.Size(id); open != nil {
		delete(p.weights.registered, id)
	}
	p.weights.mu.Unlock()
	return nil
}

// RecoverWeights puts the residency's quarantined slots (left by failed fills) back in
// service and returns how many it recovered; stats keep counting the quarantines.
func (p *Provider) RecoverWeights() (int, error) {
	e, err := p.enter("recover quarantined weight slots", accessDriver)
	if err != nil {
		return 0, err
	}
	defer e.leave()
	return p.weights.residency.Recover()
}

// checkWeight is the argument check of a prefetch, made before the capture window: w must not
// be nil and its regions must lie in files the provider has open (a mapping closed since the
// weight was made is a *paging.RegionError).
func (p *Provider) checkWeight(what string, w *LazyWeight) error {
	if w == nil {
		return fmt.Errorf("%w: %s: nil weight", ErrInvalidArgument, what)
	}
	for _, r := range w.Regions() {
		if _, err := p.weights.files.RegionBytes(r); err != nil {
			return fmt.Errorf("ep: %s: %w", what, err)
		}
	}
	return nil
}

// NewLazyWeight validates spec against the opened files and returns the weight. Every region
// must lie inside its file.
func (p *Provider) NewLazyWeight(spec WeightSpec) (*LazyWeight, error) {
	w, err := paging.NewLazyWeight(spec)
	if err != nil {
		return nil, err
	}
	for _, r := range w.Regions() {
		if _, err := p.weights.files.RegionBytes(r); err != nil {
			return nil, fmt.Errorf("ep: lazy weight: %w", err)
		}
	}
	return w, nil
}

// PrefetchWeight queues the upload of layer's weight into a free double-buffer slot on the
// copy stream, one layer ahead of compute. It returns the zero Decline (Reason DeclineNone)
// when routed, or a Decline saying why the host must load the layer the ordinary way:
// DeclineDisabled (the prefill double buffer is off: option prefill_double_buffer or
// CUDAEP_PREFILL_DOUBLE_BUFFER=1), DeclineBoundary, DeclineOversize, DeclinePoolCapacity or
// DeclineBusy. A decline comes with a nil error; the error reports real failures only.
func (p *Provider) PrefetchWeight(layer LayerID, w *LazyWeight) (Decline, error) {
	if err := p.checkWeight("prefetch a weight", w); err != nil {
		return Decline{}, err
	}
	e, err := p.enter("prefetch a weight", accessDriver)
	if err != nil {
		return Decline{}, err
	}
	defer e.leave()
	return p.weights.residency.Prefetch(layer, w, p.weights.files)
}

// PageWeight returns the device image of a prefetched layer. The compute stream waits for the
// upload (no host synchronization); release the PagedWeight once the kernels reading it are
// queued, so its slot can take the next layer.
func (p *Provider) PageWeight(layer LayerID) (*PagedWeight, error) {
	e, err := p.enter("page a weight", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	w, err := p.weights.residency.Page(layer)
	if err != nil {
		return nil, err
	}
	p.owned.add(w)
	return w, nil
}

// CancelWeight drops a prefetched layer that will not be paged, freeing its slot without
// quarantine.
//
// During a capture on the provider, or on an OS thread that captures for another provider,
// the cancel succeeds (the layer is no longer pending: PageWeight and a second cancel refuse
// it) and the slot's release fence is recorded when that capture ends; the slot is not reused
// before.
//
// # Errors
//
// A layer that is not pending (never prefetched, declined, paged or cancelled) wraps
// paging.ErrNotPrefetched, at the call and with nothing changed, capture or not.
func (p *Provider) CancelWeight(layer LayerID) error {
	return p.releaseChecked("cancel a weight", func() (func() error, error) {
		return p.weights.residency.CancelLater(layer)
	})
}

// ReleasePagedWeight gives back w's slot: it records the slot's release fence after the compute
// work queued so far, so the slot can take a later layer. During a capture on the provider, or
// on an OS thread that captures for another provider, w is released at once and the fence is
// recorded when that capture ends (recording it now would be recorded into the graph, or
// invalidate the capture); the slot is not reused before. A second release returns
// paging.ErrReleased, capture or not.
func (p *Provider) ReleasePagedWeight(w *PagedWeight) error {
	if p.closed.Load() {
		return nil // Close released it with the residency
	}
	return p.releaseChecked("release a paged weight", func() (func() error, error) {
		work, err := w.ReleaseLater()
		if work != nil {
			p.owned.remove(w)
		}
		return work, err
	})
}

// ResidencyStats returns the residency's counters and whether its pipeline exists yet.
func (p *Provider) ResidencyStats() (ResidencyStats, bool) { return p.weights.residency.Stats() }
