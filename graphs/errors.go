package graphs

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them (test with errors.Is) and
// add the context: the operation, the slot and, for mismatches, both sides.
var (
	// ErrTokenMismatch means a token names another owner, slot or generation than the one
	// installed (or capturing). The error names the installed and the supplied token.
	ErrTokenMismatch = errors.New("graphs: token mismatch")

	// ErrNotInstalled means no executable is installed: nothing was captured yet, the
	// generation was reset, or the lifecycle was closed.
	ErrNotInstalled = errors.New("graphs: no executable is installed")

	// ErrRetired means the generation was retired by a concurrent Reset or Recapture after
	// the replay checked it and before it could enqueue; nothing was enqueued.
	ErrRetired = errors.New("graphs: generation was retired before replay enqueue")

	// ErrStreamCapturing means a replay was refused because a capture is live (or being
	// prepared) on the lifecycle's stream: the launch would have been recorded into it.
	ErrStreamCapturing = errors.New("graphs: stream is capturing")

	// ErrCaptureActive means a capture is live where none may be: a second capture on the
	// same lifecycle or stream, or a Reset, Recapture or Close during a capture.
	ErrCaptureActive = errors.New("graphs: capture is active")

	// ErrNotCapturing means End was called with no capture live.
	ErrNotCapturing = errors.New("graphs: capture is not active")

	// ErrWrongThread means End or Abort ran on another OS thread than the Begin of the same
	// thread-local capture. The driver was not called; end the capture from its own thread.
	ErrWrongThread = errors.New("graphs: capture must end on the OS thread that began it")

	// ErrRejected means the capturability audit refused a sequence because one of its nodes
	// cannot be captured. The stream never entered capture.
	ErrRejected = errors.New("graphs: sequence rejected before begin_capture")

	// ErrSegmentIndex means ReplaySegment named a segment that is not installed.
	ErrSegmentIndex = errors.New("graphs: segment index out of range")

	// ErrTooManySlots means a keyed slot would exceed the configured maximum number of keyed
	// lifecycles on one Slots.
	ErrTooManySlots = errors.New("graphs: too many keyed slots")

	// ErrClosed means the lifecycle or Slots was closed.
	ErrClosed = errors.New("graphs: closed")

	// ErrDrainInCapture means a drain was requested on an OS thread that holds a live capture
	// of the same device. Waiting would deadlock and draining would invalidate the capture, so
	// the drain is refused and the capture is marked invalid: its End fails with
	// ErrCaptureInvalidated, and the caller aborts it.
	ErrDrainInCapture = errors.New("graphs: device drain inside a live capture")

	// ErrCaptureInvalidated means End found its capture invalidated by a drain refused during
	// it (ErrDrainInCapture). The stream left capture mode and nothing was installed.
	ErrCaptureInvalidated = errors.New("graphs: capture was invalidated by a drain during it")

	// ErrInvalidArgument means a nil stream, zero owner, invalid slot, nil node or nil
	// resource was passed.
	ErrInvalidArgument = errors.New("graphs: invalid argument")
)

// LaunchError is the error of a replay whose launch of a segment failed: the driver's error
// (Err, wrapped) and where the replay stood. Enqueued segments stay queued; a caller that
// knows the failure cannot have been the work's (say, another context was current on the
// thread) may repeat the replay only when Enqueued is 0, or it would launch them twice.
type LaunchError struct {
	Token    Token // the generation replayed
	Segment  int   // the capture-order index of the segment whose launch failed
	Segments int   // the segments installed (Replay), or 0 for ReplaySegment
	Enqueued int   // segments this replay enqueued before the failure
	Err      error // the driver's error
}

// Error names the token and the segment, as "graphs: replay TOKEN: launch segment I of N: ERR"
// (ReplaySegment: without "of N").
func (e *LaunchError) Error() string {
	if e.Segments > 0 {
		return fmt.Sprintf("graphs: replay %v: launch segment %d of %d: %v", e.Token, e.Segment, e.Segments, e.Err)
	}
	return fmt.Sprintf("graphs: replay %v: launch segment %d: %v", e.Token, e.Segment, e.Err)
}

// Unwrap returns the driver's error.
func (e *LaunchError) Unwrap() error { return e.Err }
