package ep

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// Synchronize is the host's "wait for the provider" hook, deferred by design: it returns at
// once and does nothing, because every result the host reads goes through CopyToHost, which
// waits for exactly the work it needs. Use ForceSynchronize for a real drain.
func (p *Provider) Synchronize() error {
	e, err := p.enterUnbound("synchronize", accessQuery)
	if err != nil {
		return err
	}
	e.leave()
	return nil
}

// ForceSynchronize waits until all work of the device is done. It first waits for every live
// capture on the device to end (a device synchronization would invalidate it), holding the
// device's capture gate while it drains.
//
// # Errors
//
// While a capture is live on this provider it is refused with ErrCaptureLive, on every
// thread (it would invalidate the capture); captures of other providers on the device are
// waited for. A drain on a thread that captures for another provider is refused with an error
// wrapping graphs.ErrDrainInCapture, and that capture must be aborted. Bad device data met by
// a kernel is reported after the drain (see SynchronizeCompute).
func (p *Provider) ForceSynchronize() error {
	e, err := p.enter("force a device synchronization", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := p.gate.Drain(p.ctx.Synchronize); err != nil {
		return fmt.Errorf("ep: force synchronize: %w", err)
	}
	return p.takeDataFault()
}

// DrainForUnmap is ForceSynchronize under the name a host uses before unmapping host memory
// that queued device work may still read (a weight file's mapping, a registered buffer).
func (p *Provider) DrainForUnmap() error { return p.ForceSynchronize() }

// CopyToDevice copies src into b at byte offset off, ordered after all work queued on the
// compute stream, and returns once src may be reused.
//
// A copy of up to 64 KiB is staged: the bytes go into pinned host memory the provider keeps,
// and CopyToDevice returns once the copy out of it is queued, without waiting for the device
// (later work on the compute stream, and CopyToHost, see the bytes; a reader on another stream
// must order itself after the compute stream: SynchronizeCompute, or a fence). A larger copy is
// made from src and waited for.
//
// # Errors
//
// A released buffer or a range outside it is refused before the driver is called, as is a
// copy while a capture is live on the provider (ErrCaptureLive). The enqueue and the wait are
// one step with respect to BeginCapture: a capture begins before the copy or after it ends.
func (p *Provider) CopyToDevice(b *Buffer, off uint64, src []byte) error {
	if n := len(src); n > 0 && n <= uploadSlotBytes {
		if err := b.check(off, uint64(n)); err != nil {
			return err
		}
		e, err := p.enter("copy host memory to the device", accessDriver)
		if err != nil {
			return err
		}
		defer e.leave()
		return p.stagedCopyToDevice(b.ptr+cudadrv.DevicePtr(off), src)
	}
	return p.hostCopy(b, off, uint64(len(src)), func(dst cudadrv.DevicePtr) error {
		return p.compute.CopyHtoDAsync(dst, src)
	})
}

// CopyToHost copies len(dst) bytes from b at byte offset off into dst, after all work queued
// on the compute stream: it forces the drain the read needs (a synchronization of the compute
// stream, not of the device). Errors are CopyToDevice's; bad device data met by a kernel of
// the awaited work is reported after the copy, which is done (see SynchronizeCompute).
func (p *Provider) CopyToHost(dst []byte, b *Buffer, off uint64) error {
	return p.hostCopy(b, off, uint64(len(dst)), func(src cudadrv.DevicePtr) error {
		return p.compute.CopyDtoHAsync(dst, src)
	})
}

// Memset sets n bytes of b at byte offset off to value, in order on the compute stream. It
// does not wait (it reads no host memory), and it may be captured.
//
// During a capture it is recorded when called on the capturing thread and refused with
// ErrCaptureLive on any other.
func (p *Provider) Memset(b *Buffer, off, n uint64, value byte) error {
	if err := b.check(off, n); err != nil {
		return err
	}
	e, err := p.enter("set device memory", accessRecord)
	if err != nil {
		return err
	}
	defer e.leave()
	return p.compute.Memset8Async(b.ptr+cudadrv.DevicePtr(off), value, n)
}

// CopyBuffer copies n bytes from src at srcOff to dst at dstOff on the compute stream, without
// waiting; it may be captured (on the capturing thread; any other is refused with
// ErrCaptureLive during a capture).
func (p *Provider) CopyBuffer(dst *Buffer, dstOff uint64, src *Buffer, srcOff, n uint64) error {
	if err := dst.check(dstOff, n); err != nil {
		return err
	}
	if err := src.check(srcOff, n); err != nil {
		return err
	}
	e, err := p.enter("copy between device buffers", accessRecord)
	if err != nil {
		return err
	}
	defer e.leave()
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
	e, err := p.enter("copy between host and device", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := enqueue(b.ptr + cudadrv.DevicePtr(off)); err != nil {
		return err
	}
	if err := p.compute.Synchronize(); err != nil {
		return err
	}
	return p.takeDataFault()
}
