package graphs

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// Lifecycle owns the graph executables captured for one slot of one stream: the capture
// state machine, the installed segments, their retained resources and the lock-free replay
// epoch.
//
// Capture, end, abort, reset and close are serialized by a mutex; replay takes no lock and
// allocates nothing: it admits itself into an epoch (installed generation plus a count of
// admitted replays), launches the immutable published segments, and leaves. Reset retires the
// generation first, waits for the admitted replays, and only then destroys anything, so no
// launch of a generation is enqueued after its Reset returns.
//
// All methods are safe for concurrent use. Methods that call the driver need the stream's
// context bound on the calling OS thread (cudadrv.Context.Bind); Begin, End and Abort of one
// capture must run on one locked OS thread. Close a Lifecycle to destroy what it holds.
type Lifecycle struct {
	stream *cudadrv.Stream
	owner  Owner
	slot   Slot
	gate   *Gate
	guard  *streamGuard

	mu sync.Mutex
	st lifecycleState // guarded by mu

	// The replay epoch. installed is the published generation (0: none); active counts the
	// replays admitted and not yet left. A replay increments active before rechecking
	// installed, so it either sees the retirement and backs out or is covered by the wait
	// of the Reset that retired it.
	replay    atomic.Pointer[replaySet]
	installed atomic.Uint64
	active    atomic.Int64
	closed    atomic.Bool

	lockAcquisitions atomic.Uint64
	captures         atomic.Uint64
	launches         atomic.Uint64
	instantiations   atomic.Uint64
	updates          atomic.Uint64
	updateRefusals   atomic.Uint64

	cleanupMu  sync.Mutex
	cleanupErr error

	hooks *testHooks // set by tests before any concurrent use
}

// lifecycleState is what the mutex guards.
type lifecycleState struct {
	capturing    bool
	captureTid   int         // the OS thread that began the live capture
	captureToken Token       // the generation the live capture appends to
	captureRes   retainedSet // resources provisionally held by the live capture

	installation   Token // zero: none
	nextGeneration uint64
	segments       []*segment // installed, in capture order

	// targets are the executables of the generation a Recapture retired, kept (with their
	// resources already released) for in-place update by the segment of the same index.
	targets []*segment
	closed  bool
}

// testHooks let the package's tests stop a replay or reset at an exact point.
type testHooks struct {
	beforeLaunch func() // a replay is admitted and about to launch a segment
	afterLaunch  func() // a replay launched a segment
	resetWaits   func() // a retirement found admitted replays and is about to wait for them
}

// Stats are a lifecycle's counters, for tests and benchmarks.
type Stats struct {
	// LockAcquisitions counts acquisitions of the lifecycle mutex. Replay takes none.
	LockAcquisitions uint64
	// Captures counts completed captures: segments installed by End.
	Captures uint64
	// ReplayLaunches counts segment executables launched by Replay and ReplaySegment.
	ReplayLaunches uint64
	// Instantiations counts executables made with cuGraphInstantiate.
	Instantiations uint64
	// Updates counts retired executables updated in place (cuGraphExecUpdate) after a
	// Recapture instead of being re-instantiated.
	Updates uint64
	// UpdateRefusals counts in-place updates the driver refused (topology changed), each
	// followed by an instantiation.
	UpdateRefusals uint64
}

// NewLifecycle returns an empty lifecycle for slot on stream, owned by owner. It does not
// own the stream: destroy the stream after closing the lifecycle.
//
// Lifecycles that share a stream must come from one [Slots], which makes them refuse to
// replay into, or synchronize during, each other's captures; a lone Lifecycle assumes the
// stream is its own.
//
// # Errors
//
// A nil stream, zero owner or invalid slot wraps [ErrInvalidArgument].
func NewLifecycle(stream *cudadrv.Stream, owner Owner, slot Slot, cfg Config) (*Lifecycle, error) {
	return newLifecycle(stream, owner, slot, cfg, newStreamGuard())
}

func newLifecycle(stream *cudadrv.Stream, owner Owner, slot Slot, cfg Config, guard *streamGuard) (*Lifecycle, error) {
	switch {
	case stream == nil:
		return nil, fmt.Errorf("%w: nil stream", ErrInvalidArgument)
	case owner == 0:
		return nil, fmt.Errorf("%w: zero owner", ErrInvalidArgument)
	case !slot.Valid():
		return nil, fmt.Errorf("%w: invalid slot", ErrInvalidArgument)
	}
	gate := cfg.gate
	if gate == nil {
		gate = GateFor(stream.Context())
	}
	l := &Lifecycle{stream: stream, owner: owner, slot: slot, gate: gate, guard: guard}
	l.st.nextGeneration = 1
	guard.join(l)
	return l, nil
}

// Owner returns the lifecycle's owner.
func (l *Lifecycle) Owner() Owner { return l.owner }

// Slot returns the lifecycle's slot.
func (l *Lifecycle) Slot() Slot { return l.slot }

// Stream returns the stream the lifecycle captures and replays on.
func (l *Lifecycle) Stream() *cudadrv.Stream { return l.stream }

// Gate returns the capture gate the lifecycle's captures hold.
func (l *Lifecycle) Gate() *Gate { return l.gate }

func (l *Lifecycle) lock() {
	l.lockAcquisitions.Add(1)
	l.mu.Lock()
}

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

// retireLocked unpublishes the installed generation and waits until every replay admitted
// into it has left. From its return on, no launch of the generation can be enqueued.
func (l *Lifecycle) retireLocked() {
	gen := l.st.installation.generation
	if gen != 0 {
		l.installed.CompareAndSwap(gen, 0)
	}
	if l.active.Load() != 0 && l.hooks != nil && l.hooks.resetWaits != nil {
		l.hooks.resetWaits()
	}
	for l.active.Load() != 0 {
		runtime.Gosched()
	}
	l.replay.Store(nil)
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

// Reset retires the installed generation named by token, waits until every replay admitted
// into it has finished enqueueing, destroys each segment's executable and graph exactly once,
// synchronizes the stream, and only then releases the resources the segments retained. No
// launch of the generation is enqueued after Reset returns. It reports whether any segment
// was installed (a generation whose every capture failed or was aborted has none).
//
// # Errors
//
//   - Nothing installed: [ErrNotInstalled]. A token of another owner, slot or generation:
//     [ErrTokenMismatch] naming both; nothing is touched.
//   - A capture is live on the lifecycle or its shared stream: [ErrCaptureActive]; abort
//     or end it first.
//   - Destroying or synchronizing fails: the driver's error, after the reset completed.
func (l *Lifecycle) Reset(token Token) (bool, error) {
	var release []Resource
	defer func() { releaseAll(release) }()
	l.lock()
	defer l.mu.Unlock()
	st := &l.st
	switch {
	case st.closed:
		return false, fmt.Errorf("%w: reset slot %v", ErrClosed, l.slot)
	case st.installation.IsZero():
		return false, fmt.Errorf("%w: reset slot %v with token %v", ErrNotInstalled, l.slot, token)
	case token != st.installation:
		return false, mismatch("reset", l.slot, st.installation, token)
	case st.capturing:
		return false, fmt.Errorf("%w: reset slot %v: capture of %v is live; end or abort it first", ErrCaptureActive, l.slot, st.captureToken)
	}
	if err := l.guard.acquire(leaseSync, l.slot); err != nil {
		return false, fmt.Errorf("graphs: reset slot %v: %w", l.slot, err)
	}
	defer l.guard.release()
	had := len(st.segments) > 0
	var err error
	release, err = l.dropAllLocked()
	st.installation = Token{}
	return had, err
}

// dropAllLocked retires the installation, destroys every segment and target, drains the
// stream and returns the resources to release. It runs under a stream lease.
func (l *Lifecycle) dropAllLocked() ([]Resource, error) {
	st := &l.st
	l.retireLocked()
	var errs []error
	var release []Resource
	for _, s := range append(st.segments, st.targets...) {
		if s == nil {
			continue
		}
		errs = append(errs, s.destroyHandles())
		release = append(release, s.resources...)
		s.resources = nil
	}
	st.segments, st.targets = nil, nil
	// Queued replays may still read the resources' memory: wait for the stream's tail
	// before any owner can return an embedded address to the allocator.
	if err := l.stream.Synchronize(); err != nil {
		errs = append(errs, fmt.Errorf("graphs: synchronize before releasing retained resources: %w", err))
	}
	return release, errors.Join(errs...)
}

// Close destroys everything the lifecycle holds (as Reset does, in the same order) and makes
// every later call fail with [ErrClosed] (replays with [ErrNotInstalled]).
//
// # Errors
//
// A live capture: [ErrCaptureActive] (abort it from its thread first). A second Close:
// [ErrClosed]. Destroy or synchronize failures, after the close completed.
func (l *Lifecycle) Close() error {
	var release []Resource
	defer func() { releaseAll(release) }()
	l.lock()
	defer l.mu.Unlock()
	st := &l.st
	switch {
	case st.closed:
		return fmt.Errorf("%w: close slot %v", ErrClosed, l.slot)
	case st.capturing:
		return fmt.Errorf("%w: close slot %v: capture of %v is live; abort it first", ErrCaptureActive, l.slot, st.captureToken)
	}
	if err := l.guard.acquire(leaseSync, l.slot); err != nil {
		return fmt.Errorf("graphs: close slot %v: %w", l.slot, err)
	}
	defer l.guard.release()
	var err error
	release, err = l.dropAllLocked()
	st.installation = Token{}
	st.closed = true
	l.closed.Store(true)
	l.guard.leave(l)
	return err
}

// Current returns the installed generation's token, if there is one. A generation exists
// from its first Begin until Reset, even while its first capture is live or after it failed.
func (l *Lifecycle) Current() (Token, bool) {
	l.lock()
	defer l.mu.Unlock()
	return l.st.installation, !l.st.installation.IsZero()
}

// Capturing reports whether a capture of this lifecycle is live.
func (l *Lifecycle) Capturing() bool {
	l.lock()
	defer l.mu.Unlock()
	return l.st.capturing
}

// HasExecutable reports whether token's generation is installed with at least one segment,
// so that Replay(token) would launch. It takes no lock.
func (l *Lifecycle) HasExecutable(token Token) bool {
	set := l.replay.Load()
	return set != nil && set.token == token && len(set.segments) > 0 &&
		l.installed.Load() == token.generation
}

// SegmentCount returns the number of segments installed under token: 1 for a whole-step
// capture, one per captured run for a segmented one, 0 for any other token. It takes no lock.
func (l *Lifecycle) SegmentCount(token Token) int {
	if set := l.replay.Load(); set != nil && set.token == token {
		return len(set.segments)
	}
	return 0
}

// HoldsSingleCapture reports whether exactly one whole-step segment is installed under
// token. Retaining a graph across a contents-only rewind (and replaying it bare) is sound only
// then: a segmented capture interleaves eager seam nodes a bare replay would not run.
func (l *Lifecycle) HoldsSingleCapture(token Token) bool {
	return l.SegmentCount(token) == 1
}

// CaptureStatus returns the capture status of the lifecycle's stream, as the driver reports
// it.
func (l *Lifecycle) CaptureStatus() (cudadrv.CaptureStatus, error) {
	return l.stream.CaptureStatus()
}

// Stats returns a snapshot of the lifecycle's counters.
func (l *Lifecycle) Stats() Stats {
	return Stats{
		LockAcquisitions: l.lockAcquisitions.Load(),
		Captures:         l.captures.Load(),
		ReplayLaunches:   l.launches.Load(),
		Instantiations:   l.instantiations.Load(),
		Updates:          l.updates.Load(),
		UpdateRefusals:   l.updateRefusals.Load(),
	}
}

// CleanupErr returns the first error met while destroying a retired object on a path that
// had already succeeded (the graph of an executable updated in place, a refused update's
// executable), or nil. Such failures do not fail the call that met them; they mean the
// context is in trouble.
func (l *Lifecycle) CleanupErr() error {
	l.cleanupMu.Lock()
	defer l.cleanupMu.Unlock()
	return l.cleanupErr
}

func (l *Lifecycle) noteCleanup(err error) {
	l.cleanupMu.Lock()
	defer l.cleanupMu.Unlock()
	if l.cleanupErr == nil {
		l.cleanupErr = err
	}
}

// mismatch is the error for a token that is not the one expected.
func mismatch(op string, slot Slot, installed, supplied Token) error {
	return fmt.Errorf("%w: %s slot %v: installed %v, supplied %v", ErrTokenMismatch, op, slot, installed, supplied)
}

// nonNil returns rs without its nil elements.
func nonNil(rs []Resource) []Resource {
	out := make([]Resource, 0, len(rs))
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}
