package sim

import (
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// streamLegacyHandle is CU_STREAM_LEGACY, accepted like the null stream.
const streamLegacyHandle cudadrv.RawStream = 1

// stream is an asynchronous in-order queue drained by one worker goroutine.
//
// Positions count operations: enq is how many were queued, done how many completed, so the
// operation queued as number p has completed once done >= p. Everything is guarded by d.mu.
type stream struct {
	handle   cudadrv.RawStream
	ctx      *context
	flags    cudadrv.StreamFlags
	priority int
	legacy   bool

	q         ring
	enq, done uint64
	wake      *sync.Cond // on d.mu: work queued or stopping
	stopping  bool
	exited    bool

	// waitedLegacy is the legacy-stream position this blocking stream already waits for.
	waitedLegacy uint64

	capture *capture           // the live capture this stream belongs to, nil when not capturing
	capVer  uint64             // operations this stream recorded into its capture
	capDeps map[*stream]uint64 // for each capture member, the version this stream is ordered after

	launch *Launch // reused by the worker for every kernel it runs (overwritten per launch)
}

// blocking reports whether s synchronizes implicitly with the legacy stream.
func (s *stream) blocking() bool { return !s.legacy && s.flags&cudadrv.StreamNonBlocking == 0 }

// newStream creates s and starts its worker. d.mu is held.
func (d *Device) newStream(c *context, flags cudadrv.StreamFlags, priority int, legacy bool) *stream {
	s := &stream{ctx: c, flags: flags, priority: priority, legacy: legacy}
	s.wake = sync.NewCond(&d.mu)
	s.launch = new(Launch)
	if !legacy {
		s.handle = cudadrv.RawStream(d.handle())
		d.streams[s.handle] = s
		c.streams[s] = struct{}{}
	}
	d.workers.Add(1)
	go d.work(s)
	return s
}

// stopStream drains s, stops its worker and forgets it. d.mu is held (released while waiting).
func (d *Device) stopStream(s *stream) {
	for s.done < s.enq && !d.closed {
		d.cond.Wait()
	}
	s.stopping = true
	s.wake.Signal()
	for !s.exited {
		d.cond.Wait()
	}
	if !s.legacy {
		delete(d.streams, s.handle)
		delete(s.ctx.streams, s)
	}
}

// waitStream waits until s has completed position pos. d.mu is held (released while waiting).
func (d *Device) waitStream(op string, s *stream, pos uint64) error {
	for s.done < pos && !d.closed {
		d.cond.Wait()
	}
	if d.closed {
		return fail(op, cudadrv.ErrorDeinitialized, "the simulated device was closed while waiting")
	}
	return nil
}

// stream resolves a stream handle in c: 0 and CU_STREAM_LEGACY are c's legacy stream.
func (d *Device) stream(op string, c *context, h cudadrv.RawStream) (*stream, error) {
	if h == 0 || h == streamLegacyHandle {
		return c.legacy, nil
	}
	s := d.streams[h]
	if s == nil {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "stream %#x does not exist (destroyed or never created)", uintptr(h))
	}
	if s.ctx != c {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "stream %#x belongs to another context", uintptr(h))
	}
	return s, nil
}

// StreamCreate creates a stream. flags is 0 or StreamNonBlocking; priority is clamped to
// [GreatestStreamPriority, LeastStreamPriority] as CUDA does.
func (d *Device) StreamCreate(flags cudadrv.StreamFlags, priority int) (cudadrv.RawStream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamCreate)
	if err != nil {
		return 0, err
	}
	if flags&^cudadrv.StreamNonBlocking != 0 {
		return 0, fail(OpStreamCreate, cudadrv.ErrorInvalidValue, "unknown stream flags %#x", uint32(flags))
	}
	priority = min(max(priority, GreatestStreamPriority), LeastStreamPriority)
	return d.newStream(c, flags, priority, false).handle, nil
}

// StreamDestroy waits for the stream's queued work, stops its worker and invalidates the
// handle. Destroying a capturing stream ends (and discards) its capture.
func (d *Device) StreamDestroy(h cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpStreamDestroy)
	if err != nil {
		return err
	}
	if h == 0 || h == streamLegacyHandle {
		return fail(OpStreamDestroy, cudadrv.ErrorInvalidHandle, "the legacy stream cannot be destroyed")
	}
	s, serr := d.stream(OpStreamDestroy, c, h)
	if serr != nil {
		return serr
	}
	if s.capture != nil {
		cp := s.capture
		cp.invalidate("the capturing stream was destroyed")
		if cp.origin == s {
			d.endCapture(cp)
		} else {
			cp.leave(s)
		}
	}
	d.stopStream(s)
	return stickyOf(OpStreamDestroy, c)
}

// StreamSynchronize waits for the stream's queued work.
//
// # Errors
//
// On a capturing stream (from any thread, in any mode) it fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture. On another stream it is a
// potentially unsafe call (see capture.go). On the legacy stream while a blocking stream of
// the context captures, it fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates that
// capture.
func (d *Device) StreamSynchronize(h cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamSynchronize)
	if err != nil {
		return err
	}
	s, err := d.stream(OpStreamSynchronize, c, h)
	if err != nil {
		return err
	}
	if err := d.checkSyncCapture(OpStreamSynchronize, s); err != nil {
		return err
	}
	if err := d.waitStream(OpStreamSynchronize, s, s.enq); err != nil {
		return err
	}
	if c.sticky != nil {
		return c.stickyError(OpStreamSynchronize)
	}
	return nil
}

// StreamQuery returns nil when the stream's queued work is done and CUDA_ERROR_NOT_READY when
// not; on a capturing stream it fails like StreamSynchronize.
func (d *Device) StreamQuery(h cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamQuery)
	if err != nil {
		return err
	}
	s, err := d.stream(OpStreamQuery, c, h)
	if err != nil {
		return err
	}
	if err := d.checkSyncCapture(OpStreamQuery, s); err != nil {
		return err
	}
	if s.done < s.enq {
		return cudadrv.NewError(OpStreamQuery, cudadrv.ErrorNotReady)
	}
	return nil
}

// checkSyncCapture refuses (and invalidates) a synchronization of s that conflicts with a
// live capture. d.mu is held.
func (d *Device) checkSyncCapture(op string, s *stream) error {
	if s.capture != nil {
		s.capture.invalidate(op + " of the capturing stream")
		return fail(op, cudadrv.ErrorStreamCaptureUnsupported, "the stream is capturing; the capture is now invalidated")
	}
	if err := d.checkUnsafe(op); err != nil {
		return err
	}
	if s.legacy {
		return d.checkImplicit(op, s.ctx)
	}
	return nil
}

// checkImplicit refuses (and invalidates) legacy-stream work that would synchronize implicitly
// with a capturing blocking stream of c. d.mu is held.
func (d *Device) checkImplicit(op string, c *context) error {
	n := d.invalidateWhere(c, func(cp *capture) bool { return cp.hasBlockingMember() }, op+" on the legacy stream while a blocking stream captures")
	if n > 0 {
		return fail(op, cudadrv.ErrorStreamCaptureImplicit, "the legacy stream synchronizes with a capturing blocking stream; the capture is now invalidated")
	}
	return nil
}
