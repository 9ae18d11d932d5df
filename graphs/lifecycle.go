package graphs

import (
	"errors"
	"fmt"
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
	beforeEnter  func() // a replay found its generation installed and is about to enter the epoch
	admitted     func() // a replay was admitted and loaded the set it will launch
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
