package sim

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/cudaep/cudaep/cudadrv"
)

// The capture rules the simulator enforces are listed in the package documentation (doc.go).

// capture is one capture sequence, shared by its origin stream and the streams that joined.
type capture struct {
	ctx     *context
	origin  *stream
	mode    cudadrv.CaptureMode
	tid     int // OS thread that began it
	invalid string
	ended   bool
	nodes   []op
	members map[*stream]struct{}
}

// invalidate marks cp invalidated (keeping the first reason).
func (cp *capture) invalidate(reason string) {
	if cp.invalid == "" {
		cp.invalid = reason
	}
}

// invalidatedError is op's error on a stream of an invalidated capture.
func (cp *capture) invalidatedError(op string) error {
	return fail(op, cudadrv.ErrorStreamCaptureInvalidated, "the stream capture was invalidated by %s", cp.invalid)
}

func (cp *capture) hasBlockingMember() bool {
	for s := range cp.members {
		if s.blocking() {
			return true
		}
	}
	return false
}

// join adds s to cp (a fork).
func (cp *capture) join(s *stream) {
	cp.members[s] = struct{}{}
	s.capture, s.capVer, s.capDeps = cp, 0, map[*stream]uint64{}
}

// leave removes s from cp.
func (cp *capture) leave(s *stream) {
	delete(cp.members, s)
	s.capture, s.capVer, s.capDeps = nil, 0, nil
}

// orderAfter records that s's later captured work depends on e's captured record.
func (s *stream) orderAfter(e *event) {
	if s.capDeps == nil {
		s.capDeps = map[*stream]uint64{}
	}
	if e.capBy != s && s.capDeps[e.capBy] < e.capVer {
		s.capDeps[e.capBy] = e.capVer
	}
	for k, v := range e.capDeps {
		if k != s && s.capDeps[k] < v {
			s.capDeps[k] = v
		}
	}
}

// endCapture ends cp for all its streams. d.mu is held.
func (d *Device) endCapture(cp *capture) {
	for s := range cp.members {
		cp.leave(s)
	}
	cp.ended = true
	delete(d.captures, cp)
}

// invalidateWhere invalidates the live captures of c that match and returns how many there
// were. d.mu is held.
func (d *Device) invalidateWhere(c *context, match func(*capture) bool, reason string) int {
	n := 0
	for cp := range d.captures {
		if cp.ctx == c && match(cp) {
			cp.invalidate(reason)
			n++
		}
	}
	return n
}

// checkUnsafe refuses a potentially unsafe call that a live capture prohibits on this thread,
// invalidating the prohibiting captures. d.mu is held.
//
// The prohibition belongs to the calling thread, not to a context: a thread-local capture
// prohibits the unsafe calls its thread makes in every context (another device's included),
// and a global capture those of every thread, as the driver documents for
// cuStreamBeginCapture's modes.
func (d *Device) checkUnsafe(op string) error {
	if len(d.captures) == 0 {
		return nil
	}
	tid := unix.Gettid()
	var first *capture
	n := 0
	for cp := range d.captures {
		if cp.mode == cudadrv.CaptureModeGlobal || (cp.mode == cudadrv.CaptureModeThreadLocal && cp.tid == tid) {
			cp.invalidate(op + " during the capture")
			if first == nil {
				first = cp
			}
			n++
		}
	}
	if n > 0 {
		return fail(op, cudadrv.ErrorStreamCaptureUnsupported, "not permitted during a live %s stream capture begun on OS thread %d; %d capture(s) now invalidated", captureModeName(first.mode), first.tid, n)
	}
	return nil
}

// record appends o to the capture of s. d.mu is held.
func (d *Device) record(opName string, s *stream, o *op) error {
	cp := s.capture
	if cp.invalid != "" {
		return cp.invalidatedError(opName)
	}
	cp.nodes = append(cp.nodes, *o)
	s.capVer++
	return nil
}

// StreamBeginCapture starts capturing stream s in mode.
//
// # Errors
//
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED on the legacy stream; CUDA_ERROR_ILLEGAL_STATE if s
// already captures; CUDA_ERROR_INVALID_VALUE for an unknown mode.
func (d *Device) StreamBeginCapture(h cudadrv.RawStream, mode cudadrv.CaptureMode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamBeginCapture)
	if err != nil {
		return err
	}
	s, err := d.stream(OpStreamBeginCapture, c, h)
	if err != nil {
		return err
	}
	if s.legacy {
		return fail(OpStreamBeginCapture, cudadrv.ErrorStreamCaptureUnsupported, "the legacy stream cannot be captured")
	}
	switch mode {
	case cudadrv.CaptureModeGlobal, cudadrv.CaptureModeThreadLocal, cudadrv.CaptureModeRelaxed:
	default:
		return fail(OpStreamBeginCapture, cudadrv.ErrorInvalidValue, "unknown capture mode %d", int32(mode))
	}
	if s.capture != nil {
		return fail(OpStreamBeginCapture, cudadrv.ErrorIllegalState, "the stream is already capturing")
	}
	cp := &capture{ctx: c, origin: s, mode: mode, tid: unix.Gettid(), members: map[*stream]struct{}{}}
	cp.join(s)
	d.captures[cp] = struct{}{}
	return nil
}

// StreamEndCapture ends the capture begun on s and returns its graph.
//
// # Errors
//
//   - CUDA_ERROR_ILLEGAL_STATE if s is not capturing.
//   - CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD for a Global or ThreadLocal capture ended on
//     another OS thread than it began on; as on the H200, the capture is ended without a graph.
//   - CUDA_ERROR_STREAM_CAPTURE_UNMATCHED on a stream that joined a capture begun elsewhere;
//     the capture is invalidated.
//   - CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for an invalidated capture, and
//     CUDA_ERROR_STREAM_CAPTURE_UNJOINED when a forked stream was not joined back; both end
//     the capture without a graph.
func (d *Device) StreamEndCapture(h cudadrv.RawStream) (cudadrv.RawGraph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamEndCapture)
	if err != nil {
		return 0, err
	}
	s, err := d.stream(OpStreamEndCapture, c, h)
	if err != nil {
		return 0, err
	}
	cp := s.capture
	if cp == nil {
		return 0, fail(OpStreamEndCapture, cudadrv.ErrorIllegalState, "the stream is not capturing")
	}
	if cp.origin != s {
		cp.invalidate("StreamEndCapture on a stream that joined the capture")
		return 0, fail(OpStreamEndCapture, cudadrv.ErrorStreamCaptureUnmatched, "the capture was begun on another stream; it is now invalidated")
	}
	if cp.mode != cudadrv.CaptureModeRelaxed && unix.Gettid() != cp.tid {
		// Measured on the H200 (driver 580): the refused end also ends the capture, with no
		// graph; the stream is out of capture mode afterwards.
		d.endCapture(cp)
		return 0, fail(OpStreamEndCapture, cudadrv.ErrorStreamCaptureWrongThread, "the capture began on OS thread %d, not this one (%d); it is ended without a graph", cp.tid, unix.Gettid())
	}
	if cp.invalid != "" {
		d.endCapture(cp)
		return 0, cp.invalidatedError(OpStreamEndCapture)
	}
	for m := range cp.members {
		if m != s && s.capDeps[m] < m.capVer {
			d.endCapture(cp)
			return 0, fail(OpStreamEndCapture, cudadrv.ErrorStreamCaptureUnjoined, "a stream forked into the capture was not joined back into the origin stream")
		}
	}
	d.endCapture(cp)
	g := &graph{handle: cudadrv.RawGraph(d.handle()), nodes: cp.nodes}
	d.graphs[g.handle] = g
	return g.handle, nil
}

// StreamCaptureStatus reports whether s captures. For the legacy stream while a blocking
// stream captures it fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
func (d *Device) StreamCaptureStatus(h cudadrv.RawStream) (cudadrv.CaptureStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpStreamCaptureStatus)
	if err != nil {
		return cudadrv.CaptureStatusNone, err
	}
	s, err := d.stream(OpStreamCaptureStatus, c, h)
	if err != nil {
		return cudadrv.CaptureStatusNone, err
	}
	if s.legacy {
		for cp := range d.captures {
			if cp.ctx == c && cp.hasBlockingMember() {
				return cudadrv.CaptureStatusNone, fail(OpStreamCaptureStatus, cudadrv.ErrorStreamCaptureImplicit, "a blocking stream of the context is capturing")
			}
		}
		return cudadrv.CaptureStatusNone, nil
	}
	switch {
	case s.capture == nil:
		return cudadrv.CaptureStatusNone, nil
	case s.capture.invalid != "":
		return cudadrv.CaptureStatusInvalidated, nil
	}
	return cudadrv.CaptureStatusActive, nil
}

// captureModeName names a mode for messages.
func captureModeName(m cudadrv.CaptureMode) string {
	switch m {
	case cudadrv.CaptureModeGlobal:
		return "global"
	case cudadrv.CaptureModeThreadLocal:
		return "thread-local"
	case cudadrv.CaptureModeRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("mode %d", int32(m))
}
