package ep

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/graphs"
)

// ErrCaptureLive is returned by a call that a live capture on the provider forbids: any call
// that would touch the driver from another thread than the capturing one (its work would be
// recorded into the graph, or its synchronization would invalidate the capture), and any call
// on the capturing thread other than the work it records (a driver allocation, module load,
// query or wait invalidates a thread-local capture). Nothing was done.
var ErrCaptureLive = errors.New("ep: a capture is live on the provider")

// access is what an entry point does with the driver, which decides what a live capture
// allows.
type access uint8

const (
	// accessDriver: driver work that must not run during a capture (allocations, host copies,
	// waits, loads, replays, resets). Refused on every thread while a capture is live.
	accessDriver access = iota
	// accessRecord: work enqueued on the compute stream that a capture records (kernels,
	// memset, device copies, user launches). The capturing thread's is recorded; any other
	// thread's is refused.
	accessRecord
	// accessQuery: reads that are safe during a capture (capture status, memory info). Never
	// refused by a capture.
	accessQuery
)

// window is the provider's one rule for the capture window, enforced in one place: every entry
// point that touches the driver enters it (Provider.enter), holding it shared for the call.
// BeginCapture holds it exclusively from before cuStreamBeginCapture until the capture is
// marked live, so a host copy's enqueue and synchronize, a replay's admission or any other
// call is wholly before or wholly after the capture begins; EndCapture and AbortCapture hold
// it exclusively while the capture ends. Close holds it exclusively, so it waits for calls in
// flight and refuses later ones.
//
// Releases never fail because of a capture: what they would do to the driver is queued
// (releaseLater) and runs once the capture ends.
type window struct {
	mu      sync.RWMutex
	capture atomic.Int64 // OS thread id of the live capture's thread; 0: none. Written under mu held exclusively.
	closed  bool         // written under mu held exclusively

	deferMu    sync.Mutex
	deferred   []func() error // driver work of releases made during the capture
	deferErr   error          // the first error of deferred work, returned by Close
	deferCount atomic.Uint64  // releases deferred by a capture, for tests
}

// entry is a call inside the window; leave ends it. It is a value so that entering
// allocates nothing.
type entry struct {
	w      *window
	locked bool // the window is held shared
	thread bool // the goroutine was locked to its OS thread by the entry
}

// leave ends the call: it gives up the shared hold and unlocks the OS thread if the entry
// locked it.
func (e entry) leave() {
	if e.locked {
		e.w.mu.RUnlock()
	}
	if e.thread {
		runtime.UnlockOSThread()
	}
}

// enter locks the calling goroutine to its OS thread, takes the window shared, applies the
// capture rule for a, and makes the provider's context current on the thread. Every entry point
// that talks to the driver calls it (or enterUnbound) first (CUDA contexts are per thread, and
// a C host may call from any thread) and calls leave when done. what names the call in errors.
func (p *Provider) enter(what string, a access) (entry, error) {
	// The bind and the driver calls it is for must run on one OS thread.
	runtime.LockOSThread()
	e, err := p.enterWindow(what, a)
	if err != nil {
		runtime.UnlockOSThread()
		return entry{}, err
	}
	e.thread = true
	if err := p.ctx.Bind(); err != nil {
		e.leave()
		return entry{}, p.bindFailed(what, err)
	}
	return e, nil
}

// bindFailed is the error of a failed bind; kept out of line so that entering allocates
// nothing.
func (p *Provider) bindFailed(what string, err error) error {
	return fmt.Errorf("ep: %s: bind context: %w", what, err)
}

// enterUnbound is enter without the bind, for two kinds of entry point:
//
//   - those that make no driver call (Synchronize, which is deferred);
//   - the hot calls whose every driver call names the provider's own stream or executables
//     (Replay, ReplaySegment, SynchronizeCompute). A call on such a handle cannot run in
//     another context than the handle's: when the context current on the thread is not the
//     provider's (the host or another provider bound its own, or none is bound), the driver
//     either runs it in the handle's context anyway or refuses it before enqueueing anything.
//     They make their call without binding and, only when it fails with nothing enqueued,
//     bind and call once more (rebound).
//
// Binding costs a driver call (cuCtxSetCurrent: 0.02–0.03 µs of the driver's own on the H200,
// and the price of a call from Go on top), and so would checking whether the context is current (cuCtxGetCurrent), while a
// cache of what cudaep bound last on a thread cannot see a host binding its own context there:
// trying first is the only way to skip the bind that is never wrong.
//
// Nor does it lock the goroutine to its OS thread (two runtime calls a step saved): a call
// that binds nothing leaves no per-thread state behind, and rebound locks the thread for the
// bind and the call it retries. It must not be used for accessRecord, whose rule compares the
// calling thread with the capturing one.
func (p *Provider) enterUnbound(what string, a access) (entry, error) {
	return p.enterWindow(what, a)
}

// enterWindow takes the window shared and applies the capture rule for a; enter and
// enterUnbound are it with and without the thread lock and the bind.
func (p *Provider) enterWindow(what string, a access) (entry, error) {
	w := &p.win
	w.mu.RLock()
	e := entry{w: w, locked: true}
	if w.closed {
		e.leave()
		return entry{}, fmt.Errorf("%w: cannot %s", ErrClosed, what)
	}
	if tid := w.capture.Load(); tid != 0 && a != accessQuery {
		if a != accessRecord || tid != int64(graphs.ThreadID()) {
			e.leave()
			return entry{}, p.captureLive(what, tid)
		}
	}
	return e, nil
}

// rebound is the slow path of the calls entered with enterUnbound: their driver call failed
// having enqueued nothing (first), perhaps only because another context, or none, was current
// on the thread. It binds the provider's context and calls again, once. When the second call
// succeeds, a sticky error that the first recorded in the context was not the context's (a
// faulted context fails every call) and is retracted. what names the call in errors.
func (p *Provider) rebound(what string, first error, again func() error) error {
	// The bind and the call it is for must run on one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.ctx.Bind(); err != nil {
		return p.bindFailed(what, err)
	}
	err := again()
	if err == nil {
		p.ctx.RetractSticky(first)
	}
	return err
}

// captureLive is the refusal of what during the capture of OS thread tid; kept out of line so
// that enter allocates nothing.
func (p *Provider) captureLive(what string, tid int64) error {
	if tid == int64(graphs.ThreadID()) {
		return fmt.Errorf("%w: cannot %s inside a capture: on the capturing thread it would invalidate the capture; end or abort the capture first", ErrCaptureLive, what)
	}
	return fmt.Errorf("%w: cannot %s inside a capture: OS thread %d captures on the provider's stream; end or abort the capture first", ErrCaptureLive, what, tid)
}

// enterExclusive locks the OS thread, takes the window exclusively and binds the context, for
// the calls that change whether a capture is live. The returned function undoes it.
func (p *Provider) enterExclusive(what string) (func(), error) {
	runtime.LockOSThread()
	w := &p.win
	w.mu.Lock()
	leave := func() {
		w.mu.Unlock()
		runtime.UnlockOSThread()
	}
	if w.closed {
		leave()
		return nil, fmt.Errorf("%w: cannot %s", ErrClosed, what)
	}
	if err := p.ctx.Bind(); err != nil {
		leave()
		return nil, p.bindFailed(what, err)
	}
	return leave, nil
}

// beginWindow runs begin (which begins a capture on this OS thread) with the window held
// exclusively, and marks the capture live when it succeeds.
func (p *Provider) beginWindow(what string, begin func() error) error {
	leave, err := p.enterExclusive(what)
	if err != nil {
		return err
	}
	defer leave()
	if tid := p.win.capture.Load(); tid != 0 {
		return p.captureLive(what, tid)
	}
	if err := begin(); err != nil {
		return err
	}
	p.win.capture.Store(int64(graphs.ThreadID()))
	return nil
}

// endWindow runs end (EndCapture or AbortCapture of the live capture). On the capturing thread
// it holds the window exclusively and, once the capture is over, marks it ended and runs the
// releases deferred during it. On any other thread end runs with the window shared, so the
// graph layer reports what is wrong (no capture, another thread's capture).
func (p *Provider) endWindow(what string, end func() error) error {
	if tid := p.win.capture.Load(); tid == 0 || tid != int64(graphs.ThreadID()) {
		e, err := p.enter(what, accessQuery)
		if err != nil {
			return err
		}
		defer e.leave()
		return end()
	}
	leave, err := p.enterExclusive(what)
	if err != nil {
		return err
	}
	err = end()
	ended := !p.slots.Capturing()
	if ended {
		p.win.capture.Store(0)
	}
	leave()
	if ended {
		p.runDeferred()
	}
	return err
}

// releaseLater runs release (the driver work of giving something back) now, or, while a
// capture is live on the provider, queues it to run when the capture ends: a release never
// fails because of a capture and never breaks one. After Close it does nothing and succeeds:
// Close already gave back what the provider owned.
func (p *Provider) releaseLater(what string, release func() error) error {
	e, err := p.enter(what, accessQuery)
	if errors.Is(err, ErrClosed) {
		return nil // Close gave back everything the provider owned
	}
	if err != nil {
		return err
	}
	defer e.leave()
	if p.win.capture.Load() != 0 {
		p.win.deferMu.Lock()
		p.win.deferred = append(p.win.deferred, release)
		p.win.deferMu.Unlock()
		p.win.deferCount.Add(1)
		return nil
	}
	return release()
}

// runDeferred runs the releases queued during the capture that just ended. An error is kept
// for Close to report: the call that deferred it has returned long ago.
func (p *Provider) runDeferred() {
	p.win.deferMu.Lock()
	queue := p.win.deferred
	p.win.deferred = nil
	p.win.deferMu.Unlock()
	if len(queue) == 0 {
		return
	}
	e, err := p.enter("run releases deferred by a capture", accessQuery)
	if err != nil {
		p.noteDeferred(err)
		return
	}
	defer e.leave()
	for _, release := range queue {
		p.noteDeferred(release())
	}
}

// drainDeferred runs whatever is still queued; Close calls it with the window held.
func (p *Provider) drainDeferred() error {
	p.win.deferMu.Lock()
	queue := p.win.deferred
	p.win.deferred = nil
	p.win.deferMu.Unlock()
	for _, release := range queue {
		p.noteDeferred(release())
	}
	p.win.deferMu.Lock()
	defer p.win.deferMu.Unlock()
	return p.win.deferErr
}

func (p *Provider) noteDeferred(err error) {
	if err == nil {
		return
	}
	p.win.deferMu.Lock()
	if p.win.deferErr == nil {
		p.win.deferErr = fmt.Errorf("ep: a release deferred by a capture failed: %w", err)
	}
	p.win.deferMu.Unlock()
}

// CaptureLive reports whether a capture is live on the provider (begun and not yet ended or
// aborted). It is one atomic load.
func (p *Provider) CaptureLive() bool { return p.win.capture.Load() != 0 }

// DeferredReleases counts the releases that a live capture deferred until it ended.
func (p *Provider) DeferredReleases() uint64 { return p.win.deferCount.Load() }
