package ep

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// ErrCaptureLive is returned by host copies while the compute stream is capturing: they would
// be recorded into the graph (or need a host synchronization that invalidates it).
var ErrCaptureLive = errors.New("ep: the compute stream is capturing")

// Synchronize is the host's "wait for the provider" hook, deferred by design: it returns at
// once and does nothing, because every result the host reads goes through CopyToHost, which
// waits for exactly the work it needs. Use ForceSynchronize for a real drain.
func (p *Provider) Synchronize() error {
	if p.closed.Load() {
		return ErrClosed
	}
	return nil
}

// ForceSynchronize waits until all work of the device is done. It first waits for every live
// capture on the device to end (a device synchronization would invalidate it), holding the
// device's capture gate while it drains.
//
// # Errors
//
// On a thread that is capturing, the drain is refused (it would deadlock or invalidate the
// capture): the error wraps graphs.ErrDrainInCapture, and that capture must be aborted.
func (p *Provider) ForceSynchronize() error {
	leave, err := p.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := p.gate.Drain(p.ctx.Synchronize); err != nil {
		return fmt.Errorf("ep: force synchronize: %w", err)
	}
	return nil
}

// SynchronizeCompute waits for the work queued on the provider's compute stream (kernels,
// replays, copies) — not for the whole device, and without the capture gate, so it costs one
// stream synchronization. It is how a host waits for a replayed step.
//
// # Errors
//
// While the compute stream is capturing it is refused with ErrCaptureLive (synchronizing a
// capturing stream would invalidate the capture).
func (p *Provider) SynchronizeCompute() error {
	leave, err := p.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := p.refuseDuringCapture("synchronize the compute stream"); err != nil {
		return err
	}
	return p.compute.Synchronize()
}

// refuseDuringCapture returns ErrCaptureLive, naming what, while a graph slot captures on the
// compute stream (the only way the provider's private compute stream enters capture). It is
// an atomic load, not a driver query: it sits on the path of every host copy and wait.
func (p *Provider) refuseDuringCapture(what string) error {
	if p.slots.Capturing() {
		return fmt.Errorf("%w: cannot %s inside a capture; end or abort the capture first", ErrCaptureLive, what)
	}
	return nil
}

// DrainForUnmap is ForceSynchronize under the name a host uses before unmapping host memory
// that queued device work may still read (a weight file's mapping, a registered buffer).
func (p *Provider) DrainForUnmap() error { return p.ForceSynchronize() }

// CopyToDevice copies src into b at byte offset off, ordered after all work queued on the
// compute stream, and returns once src may be reused.
//
// # Errors
//
// A released buffer or a range outside it is refused before the driver is called, as is a
// copy while the compute stream is capturing (ErrCaptureLive).
func (p *Provider) CopyToDevice(b *Buffer, off uint64, src []byte) error {
	return p.hostCopy(b, off, uint64(len(src)), func(dst cudadrv.DevicePtr) error {
		return p.compute.CopyHtoDAsync(dst, src)
	})
}

// CopyToHost copies len(dst) bytes from b at byte offset off into dst, after all work queued
// on the compute stream: it forces the drain the read needs (a synchronization of the compute
// stream, not of the device). Errors are CopyToDevice's.
func (p *Provider) CopyToHost(dst []byte, b *Buffer, off uint64) error {
	return p.hostCopy(b, off, uint64(len(dst)), func(src cudadrv.DevicePtr) error {
		return p.compute.CopyDtoHAsync(dst, src)
	})
}

// Memset sets n bytes of b at byte offset off to value, in order on the compute stream. It
// does not wait (it reads no host memory), and it may be captured.
func (p *Provider) Memset(b *Buffer, off, n uint64, value byte) error {
	if err := b.check(off, n); err != nil {
		return err
	}
	leave, err := p.enter()
	if err != nil {
		return err
	}
	defer leave()
	return p.compute.Memset8Async(b.ptr+cudadrv.DevicePtr(off), value, n)
}

// CopyBuffer copies n bytes from src at srcOff to dst at dstOff on the compute stream, without
// waiting; it may be captured.
func (p *Provider) CopyBuffer(dst *Buffer, dstOff uint64, src *Buffer, srcOff, n uint64) error {
	if err := dst.check(dstOff, n); err != nil {
		return err
	}
	if err := src.check(srcOff, n); err != nil {
		return err
	}
	leave, err := p.enter()
	if err != nil {
		return err
	}
	defer leave()
	return p.compute.CopyDtoDAsync(dst.ptr+cudadrv.DevicePtr(dstOff), src.ptr+cudadrv.DevicePtr(srcOff), n)
}

// hostCopy runs one host↔device copy on the compute stream and waits for the stream.
func (p *Provider) hostCopy(b *Buffer, off, n uint64, enqueue func(cudadrv.DevicePtr) error) error {
	if err := b.check(off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	leave, err := p.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := p.refuseDuringCapture("copy between host and device"); err != nil {
		return err
	}
	if err := enqueue(b.ptr + cudadrv.DevicePtr(off)); err != nil {
		return err
	}
	return p.compute.Synchronize()
}
