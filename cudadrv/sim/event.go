package sim

import (
	"time"

	"github.com/cudaep/cudaep/cudadrv"
)

// eventInterprocess is CU_EVENT_INTERPROCESS, valid only with CU_EVENT_DISABLE_TIMING.
const eventInterprocess cudadrv.EventFlags = 0x4

// event is a CUevent. Its state is its most recent record. Guarded by d.mu.
type event struct {
	handle cudadrv.RawEvent
	ctx    *context
	flags  cudadrv.EventFlags

	// The most recent record outside a capture: the stream and position of the record
	// operation, and the worker's clock when it ran. recStream is nil if there is none.
	recStream *stream
	recPos    uint64
	at        time.Time

	// The most recent record inside a capture, when that is the most recent record at all:
	// the capture, the recording stream's version and its dependencies at the time.
	captured *capture
	capBy    *stream
	capVer   uint64
	capDeps  map[*stream]uint64
}

// complete reports whether e's most recent record has run. d.mu is held.
func (e *event) complete() bool { return e.recStream == nil || e.recStream.done >= e.recPos }

func (d *Device) event(op string, h cudadrv.RawEvent) (*event, error) {
	e := d.events[h]
	if e == nil {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "event %#x does not exist (destroyed or never created)", uintptr(h))
	}
	return e, nil
}

// EventCreate creates an event; flags combine EventBlockingSync, EventDisableTiming and
// CU_EVENT_INTERPROCESS (which needs EventDisableTiming).
func (d *Device) EventCreate(flags cudadrv.EventFlags) (cudadrv.RawEvent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpEventCreate)
	if err != nil {
		return 0, err
	}
	if flags&^(cudadrv.EventBlockingSync|cudadrv.EventDisableTiming|eventInterprocess) != 0 ||
		(flags&eventInterprocess != 0 && flags&cudadrv.EventDisableTiming == 0) {
		return 0, fail(OpEventCreate, cudadrv.ErrorInvalidValue, "invalid event flags %#x", uint32(flags))
	}
	e := &event{handle: cudadrv.RawEvent(d.handle()), ctx: c, flags: flags}
	d.events[e.handle] = e
	return e.handle, nil
}

// EventDestroy destroys an event; records still queued complete harmlessly.
func (d *Device) EventDestroy(h cudadrv.RawEvent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpEventDestroy)
	if err != nil {
		return err
	}
	if _, err := d.event(OpEventDestroy, h); err != nil {
		return err
	}
	delete(d.events, h)
	return stickyOf(OpEventDestroy, c)
}

// EventRecord records e on stream s: the event completes when s's worker reaches the record,
// which then takes the worker's clock. On a capturing stream the record is an ordering point
// of the capture (not a node) and the event becomes a captured event.
func (d *Device) EventRecord(h cudadrv.RawEvent, sh cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpEventRecord)
	if err != nil {
		return err
	}
	e, err := d.event(OpEventRecord, h)
	if err != nil {
		return err
	}
	s, err := d.stream(OpEventRecord, c, sh)
	if err != nil {
		return err
	}
	if e.ctx != c {
		return fail(OpEventRecord, cudadrv.ErrorInvalidHandle, "event %#x belongs to another context", uintptr(h))
	}
	if cp := s.capture; cp != nil {
		if cp.invalid != "" {
			return cp.invalidatedError(OpEventRecord)
		}
		e.recStream, e.recPos = nil, 0
		e.captured, e.capBy, e.capVer = cp, s, s.capVer
		e.capDeps = make(map[*stream]uint64, len(s.capDeps))
		for k, v := range s.capDeps {
			e.capDeps[k] = v
		}
		return nil
	}
	if s.legacy {
		if err := d.checkImplicit(OpEventRecord, c); err != nil {
			return err
		}
	}
	e.captured, e.capBy, e.capDeps = nil, nil, nil
	e.recStream = s
	e.recPos = d.enqueue(s, &op{kind: opRecord, event: e})
	e.at = time.Time{}
	return nil
}

// capturedEventError refuses a query or synchronization of an event last recorded in a
// capture, invalidating that capture if it is still live. d.mu is held.
func capturedEventError(op string, e *event) error {
	if !e.captured.ended {
		e.captured.invalidate(op + " of an event recorded in the capture")
	}
	return fail(op, cudadrv.ErrorCapturedEvent, "the event was last recorded in a stream capture")
}

// EventQuery returns nil when the event's most recent record has run (or it was never
// recorded) and CUDA_ERROR_NOT_READY otherwise.
func (d *Device) EventQuery(h cudadrv.RawEvent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.enter(OpEventQuery)
	if err != nil {
		return err
	}
	e, err := d.event(OpEventQuery, h)
	if err != nil {
		return err
	}
	if e.captured != nil {
		return capturedEventError(OpEventQuery, e)
	}
	if err := d.checkUnsafe(OpEventQuery); err != nil {
		return err
	}
	if !e.complete() {
		return cudadrv.NewError(OpEventQuery, cudadrv.ErrorNotReady)
	}
	return nil
}

// EventSynchronize waits for the event's most recent record.
func (d *Device) EventSynchronize(h cudadrv.RawEvent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.enter(OpEventSynchronize)
	if err != nil {
		return err
	}
	e, err := d.event(OpEventSynchronize, h)
	if err != nil {
		return err
	}
	if e.captured != nil {
		return capturedEventError(OpEventSynchronize, e)
	}
	if err := d.checkUnsafe(OpEventSynchronize); err != nil {
		return err
	}
	if e.recStream != nil {
		if err := d.waitStream(OpEventSynchronize, e.recStream, e.recPos); err != nil {
			return err
		}
	}
	return stickyOf(OpEventSynchronize, e.ctx)
}

// EventElapsedTime returns the milliseconds between two completed events, from the workers'
// clocks.
//
// # Errors
//
// CUDA_ERROR_INVALID_HANDLE if either event was created with EventDisableTiming or was never
// recorded; CUDA_ERROR_NOT_READY if either has not completed; CUDA_ERROR_CAPTURED_EVENT if
// either was last recorded in a capture.
func (d *Device) EventElapsedTime(start, end cudadrv.RawEvent) (float32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.enter(OpEventElapsedTime); err != nil {
		return 0, err
	}
	var ev [2]*event
	for i, h := range [2]cudadrv.RawEvent{start, end} {
		e, err := d.event(OpEventElapsedTime, h)
		if err != nil {
			return 0, err
		}
		if e.flags&cudadrv.EventDisableTiming != 0 {
			return 0, fail(OpEventElapsedTime, cudadrv.ErrorInvalidHandle, "event %#x was created with CU_EVENT_DISABLE_TIMING", uintptr(h))
		}
		if e.captured != nil {
			return 0, capturedEventError(OpEventElapsedTime, e)
		}
		if e.recStream == nil {
			return 0, fail(OpEventElapsedTime, cudadrv.ErrorInvalidHandle, "event %#x was never recorded", uintptr(h))
		}
		ev[i] = e
	}
	if !ev[0].complete() || !ev[1].complete() {
		return 0, cudadrv.NewError(OpEventElapsedTime, cudadrv.ErrorNotReady)
	}
	return float32(ev[1].at.Sub(ev[0].at).Seconds() * 1000), nil
}

// StreamWaitEvent makes stream s wait, before its later work, for the event's most recent
// record at the time of the call.
//
// During capture: on a capturing stream, an event recorded in the same capture orders the
// capture (no node); one recorded outside it fails with CUDA_ERROR_STREAM_CAPTURE_ISOLATION
// and invalidates the capture. A non-capturing stream that waits on an event recorded in a
// live capture joins that capture (a fork); the capture's origin must wait for its last work
// (a join) before StreamEndCapture.
func (d *Device) StreamWaitEvent(sh cudadrv.RawStream, h cudadrv.RawEvent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamWaitEvent)
	if err != nil {
		return err
	}
	s, err := d.stream(OpStreamWaitEvent, c, sh)
	if err != nil {
		return err
	}
	e, err := d.event(OpStreamWaitEvent, h)
	if err != nil {
		return err
	}
	if cp := s.capture; cp != nil {
		switch {
		case cp.invalid != "":
			return cp.invalidatedError(OpStreamWaitEvent)
		case e.captured == cp:
			s.orderAfter(e)
			return nil
		case e.captured != nil || e.recStream != nil:
			cp.invalidate("wait on an event recorded outside the capture")
			return fail(OpStreamWaitEvent, cudadrv.ErrorStreamCaptureIsolation, "the event was recorded outside this capture; the capture is now invalidated")
		}
		return nil
	}
	if cp := e.captured; cp != nil {
		if cp.ended {
			return fail(OpStreamWaitEvent, cudadrv.ErrorCapturedEvent, "the event was last recorded in a stream capture that has ended")
		}
		if s.legacy {
			cp.invalidate("the legacy stream waited on a captured event")
			return fail(OpStreamWaitEvent, cudadrv.ErrorStreamCaptureImplicit, "the legacy stream cannot join a capture; the capture is now invalidated")
		}
		if cp.invalid != "" {
			return cp.invalidatedError(OpStreamWaitEvent)
		}
		cp.join(s)
		s.orderAfter(e)
		return nil
	}
	if s.legacy {
		if err := d.checkImplicit(OpStreamWaitEvent, c); err != nil {
			return err
		}
	}
	if e.recStream != nil && !e.complete() && e.recStream != s {
		d.enqueue(s, &op{kind: opWait, target: e.recStream, pos: e.recPos})
	}
	return nil
}
