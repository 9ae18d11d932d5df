package ep

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// Fence marks the point a provider's compute stream had reached when the fence was recorded:
// another provider's stream (on the same device) can wait for it without the host blocking,
// or the host can wait for it. It is how a host that runs its own streams beside cudaep's
// (ONNX Runtime's notifications, say) orders work across them. Release it when done.
type Fence struct {
	p  *Provider
	ev *cudadrv.Event
}

// StreamHandle returns the native handle of the provider's compute stream (a CUstream on the
// cuda backend; an opaque nonzero token on the simulator), for hosts that name streams by
// handle. Work the provider queues runs there, in order.
func (p *Provider) StreamHandle() uint64 { return uint64(p.compute.Raw()) }

// RecordFence records a fence after the work queued on the compute stream so far.
//
// # Errors
//
// During a capture on the provider it is refused with ErrCaptureLive (a fence recorded into a
// graph would mark nothing at run time); a closed provider; the driver's errors.
func (p *Provider) RecordFence() (*Fence, error) {
	e, err := p.enter("record a fence", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	ev, err := p.ctx.NewEvent(cudadrv.EventDisableTiming)
	if err != nil {
		return nil, fmt.Errorf("ep: record a fence: %w", err)
	}
	if err := ev.Record(p.compute); err != nil {
		return nil, errors.Join(fmt.Errorf("ep: record a fence: %w", err), ev.Destroy())
	}
	return &Fence{p: p, ev: ev}, nil
}

// WaitOn makes the compute stream of q wait for the fence: work q queues afterwards runs after
// the work the fence marks. The host does not block. q may be the fence's own provider (then
// it is a no-op) or another provider on the same device.
//
// # Errors
//
// A released fence; q closed or capturing (ErrCaptureLive); the driver's errors.
func (f *Fence) WaitOn(q *Provider) error {
	if f == nil || f.ev == nil {
		return fmt.Errorf("%w: ep: wait on a released fence", ErrInvalidArgument)
	}
	if q == f.p {
		return nil // one stream: already in order
	}
	e, err := q.enter("wait on a fence", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := q.compute.WaitEvent(f.ev); err != nil {
		return fmt.Errorf("ep: wait on a fence: %w", err)
	}
	return nil
}

// Synchronize blocks the host until the work the fence marks is done.
//
// # Errors
//
// A released fence; the driver's errors (a fault in the marked work surfaces here).
func (f *Fence) Synchronize() error {
	if f == nil || f.ev == nil {
		return fmt.Errorf("%w: ep: synchronize a released fence", ErrInvalidArgument)
	}
	e, err := f.p.enter("synchronize a fence", accessDriver)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := f.ev.Synchronize(); err != nil {
		return fmt.Errorf("ep: synchronize a fence: %w", err)
	}
	return nil
}

// Release destroys the fence's event (deferred until a live capture on the provider ends). A
// second Release, or one after the provider closed, does nothing.
func (f *Fence) Release() error {
	if f == nil || f.ev == nil {
		return nil
	}
	ev := f.ev
	f.ev = nil
	if f.p.closed.Load() {
		return nil
	}
	return f.p.releaseLater("release a fence", ev.Destroy)
}

// OrderAfter makes the work queued next on to's compute stream wait for the work queued so far
// on from's (a fence recorded on from, waited for on to, released): the host does not block.
//
// # Errors
//
// RecordFence's and WaitOn's.
func OrderAfter(to, from *Provider) error {
	f, err := from.RecordFence()
	if err != nil {
		return err
	}
	return errors.Join(f.WaitOn(to), f.Release())
}
