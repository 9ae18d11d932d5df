package ep

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// Version is the library version.
const Version = "0.1.0"

// Sentinel errors of the provider. Errors returned by Provider methods wrap one of these, an
// *OptionError, or a driver error from cudadrv (*cudadrv.Error, *cudadrv.LibraryError, …).
var (
	// ErrNoDevice: the requested device ordinal does not exist (the message names the count),
	// or no device is present.
	ErrNoDevice = errors.New("ep: no such device")
	// ErrClosed: the provider was closed.
	ErrClosed = errors.New("ep: provider closed")
	// ErrInvalidArgument: a value the call cannot take (the message names it); nothing was
	// done.
	ErrInvalidArgument = errors.New("ep: invalid argument")
)

// DeviceInfo describes the provider's device.
type DeviceInfo struct {
	Ordinal         int
	Name            string
	Major, Minor    int // compute capability
	TotalMemory     uint64
	FreeMemory      uint64 // at the time Device was called
	Multiprocessors int
}

// Provider is a CUDA execution provider on one device. All methods are safe for concurrent use
// unless their documentation says otherwise. Close releases everything it owns.
type Provider struct {
	opts       Options
	drv        *cudadrv.Driver // the process's shared driver of the backend (backend.go)
	dev        *cudadrv.Device
	ctx        *cudadrv.Context
	autoReason string

	compute *cudadrv.Stream // kernels, graph capture and replay; highest priority
	copy    *cudadrv.Stream // weight paging uploads; lowest priority
	blas    *cudadrv.BLAS   // bound to compute
	lib     *kernels.Library
	slots   *graphs.Slots // graph slots on compute
	gate    *graphs.Gate  // the device's capture gate, shared with every provider on it
	weights weights       // external data, staging pool and residency

	// How SynchronizeCompute waits (wait.go): word is the compute stream's completion word
	// in spin mode, nil in block mode. Set by start, read-only afterwards.
	word       *cudadrv.CompletionWord
	waitMode   string
	waitReason string
	spinBudget time.Duration

	peer     peerSide    // events, staging and peer access of copies between devices (peer.go)
	uploads  uploads     // pinned staging of small copies to the device (upload.go)
	win      window      // the capture window every entry point goes through
	owned    owned       // modules and double buffers Close gives back
	closed   atomic.Bool // set by Close, for the calls that do not touch the driver
	closeErr error       // guarded by win.mu
}

// New creates a provider with opts (see Options for the keys and defaults).
//
// # Errors
//
// Invalid options return an *OptionError. With backend "cuda" and no loadable CUDA driver the
// error names what was tried and suggests backend=sim. A DeviceID at or past the device count
// wraps ErrNoDevice and names the count.
func New(opts Options) (*Provider, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	drv, reason, err := acquireBackend(opts.Backend)
	if err != nil {
		return nil, err
	}
	ctx, dev, err := openDevice(drv, opts.DeviceID)
	if err != nil {
		return nil, errors.Join(err, releaseBackend(drv))
	}
	p := &Provider{opts: opts, drv: drv, dev: dev, ctx: ctx, autoReason: reason, gate: graphs.GateFor(ctx)}
	if err := p.start(); err != nil {
		return nil, errors.Join(err, p.teardown())
	}
	return p, nil
}

// openDevice retains the primary context of device ordinal id.
func openDevice(drv *cudadrv.Driver, id int) (*cudadrv.Context, *cudadrv.Device, error) {
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, nil, fmt.Errorf("ep: count devices: %w", err)
	}
	if id >= n {
		return nil, nil, fmt.Errorf("%w: device_id %d is out of range: %d device(s) present on the %s backend",
			ErrNoDevice, id, n, drv.Name())
	}
	dev, err := drv.Device(id)
	if err != nil {
		return nil, nil, fmt.Errorf("ep: open device %d: %w", id, err)
	}
	ctx, err := dev.RetainPrimaryContext()
	if err != nil {
		return nil, nil, fmt.Errorf("ep: retain primary context of device %d: %w", id, err)
	}
	return ctx, dev, nil
}

// start creates what the provider owns on its context: the streams, the cuBLAS handle, the
// kernel library and the graph slots. On error, teardown releases whatever was made.
func (p *Provider) start() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.ctx.Bind(); err != nil {
		return fmt.Errorf("ep: bind context: %w", err)
	}
	least, greatest, err := p.ctx.StreamPriorityRange()
	if err != nil {
		return fmt.Errorf("ep: stream priorities: %w", err)
	}
	if p.compute, err = p.ctx.NewStream(cudadrv.StreamNonBlocking, greatest); err != nil {
		return fmt.Errorf("ep: create compute stream: %w", err)
	}
	if p.copy, err = p.ctx.NewStream(cudadrv.StreamNonBlocking, least); err != nil {
		return fmt.Errorf("ep: create copy stream: %w", err)
	}
	if p.blas, err = p.compute.NewBLAS(); err != nil {
		return fmt.Errorf("ep: create cuBLAS handle: %w", err)
	}
	mode := cudadrv.MathDefault
	if p.opts.TF32 {
		mode = cudadrv.MathTF32TensorOp
	}
	if err := p.blas.SetMathMode(mode); err != nil {
		return fmt.Errorf("ep: set cuBLAS math mode: %w", err)
	}
	if p.lib, err = kernels.NewLibrary(kernels.Runtime{Context: p.ctx, Stream: p.compute, BLAS: p.blas, TF32: p.opts.TF32}); err != nil {
		return fmt.Errorf("ep: load kernels: %w", err)
	}
	if p.slots, err = graphs.NewSlots(p.compute, graphs.NewOwner(), graphs.Config{}.WithGate(p.gate)); err != nil {
		return fmt.Errorf("ep: graph slots: %w", err)
	}
	if err := p.startWait(); err != nil {
		return err
	}
	return p.startWeights()
}

// teardown destroys what start made, in reverse order, then releases the context. It is
// called once, by Close or by a failed New.
func (p *Provider) teardown() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var errs []error
	if p.ctx.Bind() == nil {
		p.drainDeferred() // a failure is counted (DeferredFailures), not this call's
		errs = append(errs, p.owned.closeDoubleBuffers(), p.owned.releasePaged())
		errs = append(errs, p.weights.stop()...)
		if p.slots != nil {
			errs = append(errs, p.slots.Close())
		}
		errs = append(errs, p.owned.unloadModules()) // after the graphs that may launch them
		if p.lib != nil {
			errs = append(errs, p.lib.Close())
		}
		if p.blas != nil {
			errs = append(errs, p.blas.Destroy())
		}
		for _, s := range []*cudadrv.Stream{p.copy, p.compute} {
			if s != nil {
				errs = append(errs, s.Destroy())
			}
		}
		errs = append(errs, p.peer.close())    // after the stream that reads the staging slots
		errs = append(errs, p.uploads.close()) // likewise
		errs = append(errs, p.closeWord())     // after the stream that writes it
	}
	errs = append(errs, p.ctx.Release())
	errs = append(errs, releaseBackend(p.drv))
	return errors.Join(errs...)
}

// Options returns the options the provider was created with.
func (p *Provider) Options() Options { return p.opts }

// BackendName is the backend in use: "cuda" or "sim".
//
// # Notes
//
// The provider runs in the primary context of its device (Device().Ordinal), on the process's
// shared driver of its backend: code that makes driver calls of its own beside the provider, on
// its buffers or stream (a benchmark's raw baselines), acquires that driver with
// cudadrv.AcquireShared(BackendName(), nil, nil) and retains the same primary context.
func (p *Provider) BackendName() string { return p.drv.Name() }

// AutoReason says why backend=auto chose the backend it did, or "" for an explicit backend.
func (p *Provider) AutoReason() string { return p.autoReason }

// Device describes the provider's device; FreeMemory is read now.
func (p *Provider) Device() DeviceInfo {
	major, minor := p.dev.ComputeCapability()
	info := DeviceInfo{
		Ordinal: p.dev.Ordinal(), Name: p.dev.Name(), Major: major, Minor: minor,
		TotalMemory: p.dev.TotalMemory(), Multiprocessors: p.dev.Multiprocessors(),
	}
	if e, err := p.enter("read free memory", accessQuery); err == nil {
		if free, _, err := p.ctx.MemInfo(); err == nil {
			info.FreeMemory = free
		}
		e.leave()
	}
	return info
}

// Close waits for the calls in flight, runs the releases a capture deferred, and destroys the
// graph slots, the kernels, the streams and the context; later calls fail with ErrClosed.
// Buffers still held become unusable: release them before Close. Once it has closed the
// provider it is idempotent: later calls return the first result.
//
// On an OS thread that captures for another provider, the teardown (which frees memory and
// destroys streams: driver calls that would invalidate that capture) waits until the capture
// ends: Close marks the provider closed at once (later calls fail with ErrClosed), returns
// nil, and the capture's EndCapture or AbortCapture tears the provider down. A failure of
// that teardown is counted by DeferredFailures.
//
// # Errors
//
// While a capture is live on the provider, Close is refused with ErrCaptureLive and closes
// nothing: end or abort the capture (on its thread), then close. A failure of the releases a
// capture deferred is not reported here (see DeferredFailures).
func (p *Provider) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.win.mu.Lock()
	defer p.win.mu.Unlock()
	if p.win.closed {
		return p.closeErr
	}
	if tid := p.win.capture.Load(); tid != 0 {
		return p.captureLive("close the provider", tid)
	}
	p.win.closed = true
	p.closed.Store(true)
	if threadCapturer() != nil && awaitThreadCapture(p) {
		p.win.closeLater = true
		return nil
	}
	p.closeErr = p.teardown()
	return p.closeErr
}
