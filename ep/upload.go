package ep

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// Small host-to-device copies (a decode step's token ids and positions, a few bytes each) are
// staged: CopyToDevice copies the bytes into a slot of pinned host memory and queues the copy
// out of the slot, then returns without waiting for the device. From pageable memory the driver
// stages the bytes itself but may wait for the stream, and CopyToDevice then had to wait for the
// copy: on the H200, from C, an 8-byte copy from pageable memory plus a stream synchronization
// took 5.8–6.7 µs, the staged copy and its slot's event 1.6–2.8 µs
// (bench/experiments/pdl_layer.cu).

const (
	// uploadSlotBytes is the largest copy CopyToDevice stages; larger ones are copied from
	// the caller's memory and waited for.
	uploadSlotBytes = 64 << 10
	// uploadSlots is how many staged copies may be queued at once; the next one waits for the
	// oldest to be done with its slot.
	uploadSlots = 8
)

// uploads is a provider's pinned staging for small copies to the device: uploadSlots slots of
// uploadSlotBytes, used in turn, each with an event recorded on the compute stream after the
// copy that reads it. Made on the first staged copy; freed by Close once the compute stream
// has no copy left to run.
type uploads struct {
	mu     sync.Mutex
	host   *cudadrv.HostBuffer
	read   [uploadSlots]*cudadrv.Event // recorded after the copy out of each slot
	queued [uploadSlots]bool           // read was recorded and not yet waited for
	next   int
}

// stagedCopyToDevice is CopyToDevice for a copy of 1 to uploadSlotBytes bytes: it returns once
// the copy is queued from a pinned slot. Called inside the window, with the context bound.
func (p *Provider) stagedCopyToDevice(dst cudadrv.DevicePtr, src []byte) error {
	u := &p.uploads
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.host == nil {
		if err := u.open(p.ctx); err != nil {
			return err
		}
	}
	i := u.next
	if u.queued[i] {
		if err := u.read[i].Synchronize(); err != nil {
			return fmt.Errorf("ep: copy to device: wait for staging slot %d: %w", i, err)
		}
		u.queued[i] = false
	}
	slot := u.host.Bytes()[i*uploadSlotBytes:]
	copy(slot, src)
	if err := p.compute.CopyHtoDAsync(dst, slot[:len(src)]); err != nil {
		return err
	}
	u.next = (i + 1) % uploadSlots
	if err := u.read[i].Record(p.compute); err != nil {
		// Without the event nothing says when the slot is read: wait for the copy instead.
		return p.compute.Synchronize()
	}
	u.queued[i] = true
	return nil
}

// open allocates the slots and their events.
func (u *uploads) open(ctx *cudadrv.Context) error {
	var events [uploadSlots]*cudadrv.Event
	for i := range events {
		e, err := ctx.NewEvent(cudadrv.EventDisableTiming)
		if err != nil {
			return errors.Join(fmt.Errorf("ep: copy to device: create a staging event: %w", err), destroyEvents(events[:i]))
		}
		events[i] = e
	}
	hb, err := ctx.AllocHost(uploadSlots * uploadSlotBytes)
	if err != nil {
		return errors.Join(fmt.Errorf("ep: copy to device: allocate %d bytes of pinned staging: %w", uploadSlots*uploadSlotBytes, err),
			destroyEvents(events[:]))
	}
	u.host, u.read = hb, events
	return nil
}

// close waits for the copies still reading the slots, then frees the slots and their events.
// The provider's context is bound.
func (u *uploads) close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.host == nil {
		return nil
	}
	var errs []error
	for i, q := range u.queued {
		if q {
			errs = append(errs, u.read[i].Synchronize())
		}
	}
	errs = append(errs, destroyEvents(u.read[:]), u.host.Free())
	u.host, u.read, u.queued, u.next = nil, [uploadSlots]*cudadrv.Event{}, [uploadSlots]bool{}, 0
	return errors.Join(errs...)
}

// destroyEvents destroys the events that are not nil.
func destroyEvents(events []*cudadrv.Event) error {
	var errs []error
	for _, e := range events {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	return errors.Join(errs...)
}
