package graphs

import (
	"errors"
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

// Begin audits nodes, then begins recording a segment on the lifecycle's stream
// (cuStreamBeginCapture, thread-local mode) and returns the token of the generation it
// belongs to.
//
// With no installation, continuation must be the zero Token and Begin starts a new
// generation. With one installed, continuation must be its token, and the segment is
// appended to it (segmented capture) when End returns. The work enqueued on the stream until
// End is recorded, not run.
//
// Begin takes the capture gate of the device before begin-capture (waiting for a running
// drain) and records the calling OS thread: End or Abort must follow on the same thread, so
// lock the goroutine to its thread first (runtime.LockOSThread).
//
// Begin takes ownership of every element of resources on every path: the distinct ones
// (by identity) are released after the graph that embeds them is destroyed, or at once when
// Begin or End fails; a second reference to a resource already in the list is surplus and is
// released before Begin returns.
//
// # Errors
//
//   - The audit rejects an Unsupported node: [ErrRejected] ("rejected before
//     begin_capture", naming the node and reason); the stream never entered capture.
//   - A capture is live on the lifecycle or on its shared stream: [ErrCaptureActive].
//   - continuation does not name the installation: [ErrTokenMismatch] naming both, or
//     [ErrNotInstalled] when it names a generation and none is installed.
//   - begin-capture fails: the driver's error, wrapped; the gate is released and a new
//     generation with no segment is dropped.
func (l *Lifecycle) Begin(continuation Token, nodes []Node, resources []Resource) (Token, error) {
	return l.begin("begin", continuation, nodes, resources, false)
}

// Recapture retires the installed generation named by token and begins capturing its
// successor, keeping the retired executables so that End updates them in place
// (cuGraphExecUpdate) instead of instantiating new ones.
//
// Use it when a step must be recaptured (its buffers moved, its parameters changed) but its
// topology is probably unchanged: the segment of index i captured in the new generation
// updates the retired segment i when the driver accepts the update, and falls back to a
// fresh instantiation when it refuses (the topology differs); [Stats] counts both. Updating is
// an order of magnitude cheaper than instantiating (measured on an H200: 13 µs vs 143 µs for
// 32 kernels).
//
// Recapture is Reset followed by Begin with the zero Token, done under one lock and one hold
// of the stream: replays of the retired token fail from the moment Recapture starts, and the
// new token is returned. The retired generation's resources are released before Recapture
// returns (after its stream has drained); its executables stay alive, unlaunchable, until
// they are updated, or destroyed by End's fallback, a failed begin-capture, Reset, Close or
// the next Recapture.
//
// The thread, gate and resource rules are Begin's.
//
// # Errors
//
// Begin's errors; a token that is not the installation is [ErrTokenMismatch] or
// [ErrNotInstalled], and leaves everything as it was. When begin-capture itself fails, the
// old generation is already retired.
func (l *Lifecycle) Recapture(token Token, nodes []Node, resources []Resource) (Token, error) {
	return l.begin("recapture", token, nodes, resources, true)
}

func (l *Lifecycle) begin(op string, cont Token, nodes []Node, resources []Resource, recapture bool) (Token, error) {
	var release []Resource
	defer func() { releaseAll(release) }() // runs after the unlock below
	if err := Audit(nodes); err != nil {
		release = nonNil(resources)
		return Token{}, fmt.Errorf("graphs: %s slot %v: %w", op, l.slot, err)
	}
	tid := gettid()

	l.lock()
	defer l.mu.Unlock()
	st := &l.st
	if err := l.checkBeginLocked(op, cont, recapture); err != nil {
		release = nonNil(resources)
		return Token{}, err
	}
	var taken retainedSet
	dup, err := taken.take(resources)
	if err != nil {
		release = nonNil(resources)
		return Token{}, fmt.Errorf("graphs: %s slot %v: %w", op, l.slot, err)
	}
	release = dup
	if err := l.guard.acquire(leaseCapture, l.slot); err != nil {
		release = append(release, taken.drain()...)
		return Token{}, fmt.Errorf("graphs: %s slot %v: %w", op, l.slot, err)
	}

	if recapture {
		retired, err := l.retireForUpdateLocked()
		release = append(release, retired...)
		if err != nil {
			l.guard.release()
			release = append(release, taken.drain()...)
			return Token{}, fmt.Errorf("graphs: %s slot %v: %w", op, l.slot, err)
		}
	}

	// Surplus references and the retired generation's resources are released now, before
	// begin-capture: freeing memory on this thread during its own thread-local capture
	// would invalidate the capture.
	releaseAll(release)
	release = nil

	tok := st.installation
	if tok.IsZero() {
		if st.nextGeneration == math.MaxUint64 {
			l.guard.release()
			release = append(release, taken.drain()...)
			return Token{}, fmt.Errorf("graphs: %s slot %v: installation generation overflow", op, l.slot)
		}
		tok = Token{owner: l.owner, slot: l.slot, generation: st.nextGeneration}
		st.nextGeneration++
		st.installation = tok
	}

	// The gate is taken before cuStreamBeginCapture: taking it afterwards would leave a
	// window in which the capture is live and a drain elsewhere could invalidate it.
	l.gate.acquire(tid)
	if err := l.stream.BeginCapture(cudadrv.CaptureModeThreadLocal); err != nil {
		l.gate.release(tid)
		l.guard.release()
		release = append(release, taken.drain()...)
		if len(st.segments) == 0 {
			st.installation = Token{}
		}
		var cleanup error
		if recapture {
			// No generation will update the retired executables now.
			cleanup = l.destroyTargetsLocked()
		}
		return Token{}, errors.Join(fmt.Errorf("graphs: %s slot %v: begin stream capture: %w", op, l.slot, err), cleanup)
	}
	st.capturing = true
	st.captureTid = tid
	st.captureToken = tok
	st.captureRes = taken
	return tok, nil
}

// checkBeginLocked validates a Begin or Recapture against the state.
func (l *Lifecycle) checkBeginLocked(op string, cont Token, recapture bool) error {
	st := &l.st
	switch {
	case st.closed:
		return fmt.Errorf("%w: %s slot %v", ErrClosed, op, l.slot)
	case st.capturing:
		return fmt.Errorf("%w: %s slot %v: capture of %v is live", ErrCaptureActive, op, l.slot, st.captureToken)
	case st.installation.IsZero() && (recapture || !cont.IsZero()):
		return fmt.Errorf("%w: %s slot %v: token %v names no installed generation", ErrNotInstalled, op, l.slot, cont)
	case cont != st.installation:
		return mismatch(op, l.slot, st.installation, cont)
	}
	return nil
}

// retireForUpdateLocked retires the installed generation and turns its segments into update
// targets. It destroys the targets of an earlier Recapture that were not used, drains the
// stream, and returns the resources to release. It runs under the stream lease, before
// begin-capture.
func (l *Lifecycle) retireForUpdateLocked() ([]Resource, error) {
	st := &l.st
	l.retireLocked()
	errs := []error{l.destroyTargetsLocked()}
	var release []Resource
	for _, s := range st.segments {
		release = append(release, s.resources...)
		s.resources = nil
	}
	st.targets, st.segments = st.segments, nil
	st.installation = Token{}
	// A replay admitted before the retirement may still be queued: the retired
	// executables' resources are released only once it has run.
	if err := l.stream.Synchronize(); err != nil {
		errs = append(errs, fmt.Errorf("graphs: synchronize the stream of retired executables: %w", err))
	}
	return release, errors.Join(errs...)
}

// destroyTargetsLocked destroys the update targets a Recapture kept. Their resources were
// released when they were retired.
func (l *Lifecycle) destroyTargetsLocked() error {
	var errs []error
	for _, t := range l.st.targets {
		if t != nil {
			errs = append(errs, t.destroyHandles())
		}
	}
	l.st.targets = nil
	return errors.Join(errs...)
}

// End ends the live capture (cuStreamEndCapture), makes it executable (an in-place update of
// a Recapture's retired executable, else cuGraphInstantiate with node priority), uploads it,
// appends it to the installed segments and publishes the new replay set atomically. The gate
// is released once end-capture has returned, on every path.
//
// # Errors
//
//   - No capture is live: [ErrNotCapturing]. Another thread than Begin's: [ErrWrongThread]
//     (the capture stays live; end it from its own thread). A token that is not the live
//     capture's: [ErrTokenMismatch] naming both.
//   - end-capture, instantiate or upload fails, or a drain was refused during the capture
//     ([ErrCaptureInvalidated]): the lifecycle is idle again, nothing was installed, no
//     graph or executable leaked and the capture's resources are released. Segments
//     installed earlier stay installed.
//   - end-capture fails without ending the capture (the stream still reports capturing):
//     the capture stays live with its gate hold and resources, so that Abort can end it.
func (l *Lifecycle) End(token Token) error {
	tid := gettid()
	var release []Resource
	defer func() { releaseAll(release) }()
	l.lock()
	defer l.mu.Unlock()
	st := &l.st
	if err := l.checkCaptureLocked("end", token, tid); err != nil {
		return err
	}
	graph, err := l.stream.EndCapture()
	if err != nil && l.stillCapturing() {
		// end-capture failed without ending the capture (a wrong-thread or injected
		// failure): the capture, its gate hold and its resources stay, for Abort.
		return fmt.Errorf("graphs: end capture of %v failed and the capture is still live (abort it): %w", token, err)
	}
	st.capturing = false
	res := st.captureRes.drain()
	poisoned := l.gate.release(tid)
	l.guard.endCapturePhase()
	defer l.guard.release()
	if err != nil {
		release = res
		return fmt.Errorf("graphs: end capture of %v: %w", token, err)
	}
	if poisoned {
		release = res
		return errors.Join(
			fmt.Errorf("%w: end capture of %v", ErrCaptureInvalidated, token),
			graph.Destroy())
	}

	index := len(st.segments)
	var target *segment
	if index < len(st.targets) {
		target, st.targets[index] = st.targets[index], nil
	}
	exec, err := l.executable(graph, target)
	if err != nil {
		release = res
		return errors.Join(fmt.Errorf("graphs: end capture of %v: instantiate: %w", token, err), graph.Destroy())
	}
	seg := &segment{exec: exec, graph: graph, resources: res}
	if err := exec.Upload(l.stream); err != nil {
		cleanup := seg.destroyHandles()
		sync := l.stream.Synchronize()
		release = res
		return errors.Join(fmt.Errorf("graphs: end capture of %v: upload: %w", token, err), cleanup, sync)
	}
	st.segments = append(st.segments, seg)
	// The set is published before the generation, so a replay admitted at this
	// generation finds it.
	l.replay.Store(&replaySet{token: token, segments: append([]*segment(nil), st.segments...)})
	l.installed.Store(token.generation)
	l.captures.Add(1)
	return nil
}

// executable makes the executable for g: an in-place update of target when it has one and
// the driver accepts, else a new instantiation. target is consumed either way.
func (l *Lifecycle) executable(g *cudadrv.Graph, target *segment) (*cudadrv.GraphExec, error) {
	if target != nil {
		ok, err := target.exec.Update(g)
		if ok {
			l.updates.Add(1)
			if err := target.graph.Destroy(); err != nil {
				l.noteCleanup(fmt.Errorf("graphs: destroy the graph of an updated executable: %w", err))
			}
			return target.exec, nil
		}
		if err != nil {
			l.noteCleanup(fmt.Errorf("graphs: update executable in place: %w", err))
		} else {
			l.updateRefusals.Add(1)
		}
		if err := target.destroyHandles(); err != nil {
			l.noteCleanup(err)
		}
	}
	exec, err := g.Instantiate(cudadrv.InstantiateUseNodePriority)
	if err != nil {
		return nil, err
	}
	l.instantiations.Add(1)
	return exec, nil
}

// checkCaptureLocked validates End or Abort against the live capture, before any driver call.
func (l *Lifecycle) checkCaptureLocked(op string, token Token, tid int) error {
	st := &l.st
	switch {
	case !st.capturing:
		return fmt.Errorf("%w: %s slot %v with token %v", ErrNotCapturing, op, l.slot, token)
	case st.captureTid != tid:
		return fmt.Errorf("%w: %s slot %v: capture began on OS thread %d, %s called on OS thread %d",
			ErrWrongThread, op, l.slot, st.captureTid, op, tid)
	case token != st.captureToken:
		return mismatch(op, l.slot, st.captureToken, token)
	}
	return nil
}

// stillCapturing reports whether the lifecycle's stream is still in capture mode after a
// failed end-capture. A failed query counts as still capturing: the safe assumption.
func (l *Lifecycle) stillCapturing() bool {
	st, err := l.stream.CaptureStatus()
	return err != nil || st != cudadrv.CaptureStatusNone
}

// Abort ends a live capture that failed mid-record and discards it: it calls end-capture even
// when the capture was invalidated (that is what takes the stream out of capture mode; an
// invalidated capture's error is expected and swallowed), destroys any half-recorded graph,
// releases the gate and the capture's resources, and leaves the lifecycle idle. Segments
// installed earlier stay installed; Reset after Abort succeeds.
//
// With no capture live, Abort does nothing and returns nil.
//
// # Errors
//
// A token of another owner or slot, or (during a capture) of another generation:
// [ErrTokenMismatch]. Another thread than Begin's: [ErrWrongThread], nothing done. A stream
// still capturing after end-capture: the driver's error.
func (l *Lifecycle) Abort(token Token) error {
	tid := gettid()
	var release []Resource
	defer func() { releaseAll(release) }()
	l.lock()
	defer l.mu.Unlock()
	st := &l.st
	if token.owner != l.owner || token.slot != l.slot {
		return mismatch("abort", l.slot, st.installation, token)
	}
	if !st.capturing {
		return nil
	}
	if err := l.checkCaptureLocked("abort", token, tid); err != nil {
		return err
	}
	graph, endErr := l.stream.EndCapture()
	if endErr != nil && l.stillCapturing() {
		// Nothing ended: keep the capture (and its gate hold) so that Abort can be retried.
		return fmt.Errorf("graphs: abort capture of %v: end capture failed and the stream is still capturing: %w", token, endErr)
	}
	st.capturing = false
	release = st.captureRes.drain()
	l.gate.release(tid)
	l.guard.release()
	if endErr != nil && cudadrv.ResultOf(endErr) != cudadrv.ErrorStreamCaptureInvalidated {
		// The stream left capture mode, which is what Abort is for; an unexpected error on
		// the way is kept for CleanupErr.
		l.noteCleanup(fmt.Errorf("graphs: abort capture of %v: end capture: %w", token, endErr))
	}
	if graph != nil {
		if err := graph.Destroy(); err != nil {
			return fmt.Errorf("graphs: abort capture of %v: destroy the half-recorded graph: %w", token, err)
		}
	}
	return nil
}
