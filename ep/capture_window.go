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

// ErrThreadCaptures is returned by a call on a provider from an OS thread that captures for
// another provider (of any device) when the call would touch the driver: a thread-local
// capture is a property of the OS thread, and an allocation, free, module load, event or
// stream query or wait the thread makes in any context invalidates it. Nothing was done; the
// capture is unharmed. Make the call on another thread, or end or abort the capture first.
//
// errors.Is also matches it with ErrCaptureLive: either way, a live capture refused the call.
var ErrThreadCaptures error = threadCapturesError{}

// threadCapturesError is ErrThreadCaptures' type, which matches ErrCaptureLive too.
type threadCapturesError struct{}

func (threadCapturesError) Error() string {
	return "ep: the calling OS thread captures for another provider"
}

// Is matches ErrCaptureLive.
func (threadCapturesError) Is(target error) bool { return target == ErrCaptureLive }

// capturing is the process-wide registry of the OS threads that capture: for each, the
// provider it captures for and the other providers whose deferred work waits for that capture
// to end. Every entry point that would touch the driver consults it (Provider.enterWindow),
// whichever provider it names, so a thread's capture is one window for every provider the
// thread touches.
var capturing struct {
	live atomic.Int32 // entries in m; while 0 no entry point looks further
	mu   sync.RWMutex // lookups (every entry point while a capture is live) share it
	m    map[int64]*threadCapture
}

// threadCapture is one capturing thread's entry in capturing.
type threadCapture struct {
	p       *Provider   // the provider the thread captures for
	waiting []*Provider // providers with work deferred until this capture ends
}

// threadCapturer returns the provider the calling OS thread captures for, or nil. It is one
// atomic load while no thread of the process captures, and allocates nothing.
func threadCapturer() *Provider {
	if capturing.live.Load() == 0 {
		return nil
	}
	return capturerOf(int64(graphs.ThreadID()))
}

// capturerOf returns the provider OS thread tid captures for, or nil.
func capturerOf(tid int64) *Provider {
	capturing.mu.RLock()
	defer capturing.mu.RUnlock()
	if c := capturing.m[tid]; c != nil {
		return c.p
	}
	return nil
}

// registerCapture records that OS thread tid captures for p.
func registerCapture(tid int64, p *Provider) {
	capturing.mu.Lock()
	defer capturing.mu.Unlock()
	if capturing.m == nil {
		capturing.m = map[int64]*threadCapture{}
	}
	if capturing.m[tid] == nil {
		capturing.live.Add(1)
	}
	capturing.m[tid] = &threadCapture{p: p}
}

// unregisterCapture forgets OS thread tid's capture and returns the providers whose deferred
// work waited for it.
func unregisterCapture(tid int64) []*Provider {
	capturing.mu.Lock()
	defer capturing.mu.Unlock()
	c := capturing.m[tid]
	if c == nil {
		return nil
	}
	delete(capturing.m, tid)
	capturing.live.Add(-1)
	return c.waiting
}

// awaitThreadCapture makes q's deferred work run when the calling thread's capture (for
// another provider) ends. It reports false when the thread does not capture.
func awaitThreadCapture(q *Provider) bool {
	tid := int64(graphs.ThreadID())
	capturing.mu.Lock()
	defer capturing.mu.Unlock()
	c := capturing.m[tid]
	if c == nil {
		return false
	}
	for _, w := range c.waiting {
		if w == q {
			return true
		}
	}
	c.waiting = append(c.waiting, q)
	return true
}

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
// (releaseLater, releaseChecked) and runs once the capture ends, whether the capture is the
// provider's own or that of the thread making the release (a thread that captures for
// another provider). What a release checks, it checks at the call, so the queued work can
// only fail in the driver; such a failure is counted (DeferredFailures), never reported
// through a later call.
type window struct {
	mu         sync.RWMutex
	capture    atomic.Int64 // OS thread id of the live capture's thread; 0: none. Written under mu held exclusively.
	closed     bool         // written under mu held exclusively
	closeLater bool         // Close was called on a capturing thread: teardown waits for its capture (under mu)

	deferMu    sync.Mutex
	deferred   []func() error // driver work of releases made during a capture
	deferCount atomic.Uint64  // releases deferred by a capture, for tests
	failCount  atomic.Uint64  // deferred work that failed
	lastFail   error          // the latest of those failures (under deferMu)
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
	if a != accessQuery && capturing.live.Load() != 0 {
		if c := threadCapturer(); c != nil && c != p {
			e.leave()
			return entry{}, p.capturesElsewhere(what, c)
		}
	}
	return e, nil
}

// refuseForeignCapture is the capture registry's rule for the entry points that do not enter
// the window (Replay, ReplaySegment): on a thread that captures for another provider they are
// refused before the driver is touched. It is one atomic load while no thread captures.
func (p *Provider) refuseForeignCapture(what string) error {
	if capturing.live.Load() == 0 {
		return nil
	}
	if c := threadCapturer(); c != nil && c != p {
		return p.capturesElsewhere(what, c)
	}
	return nil
}

// capturesElsewhere is the refusal of what on a thread that captures for c; kept out of line
// so that entering allocates nothing.
func (p *Provider) capturesElsewhere(what string, c *Provider) error {
	return fmt.Errorf("%w (on device %d): cannot %s inside a capture: a driver call on the capturing thread would invalidate that capture, whatever the provider or device; make the call on another thread, or end or abort the capture first",
		ErrThreadCaptures, c.dev.Ordinal(), what)
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
	if c := threadCapturer(); c != nil {
		return p.capturesElsewhere(what, c)
	}
	if err := begin(); err != nil {
		return err
	}
	tid := int64(graphs.ThreadID())
	p.win.capture.Store(tid)
	registerCapture(tid, p)
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
	var waiting []*Provider
	if ended {
		tid := p.win.capture.Swap(0)
		waiting = unregisterCapture(tid)
	}
	leave()
	if ended {
		p.runDeferred()
		for _, q := range waiting {
			q.runDeferred()
		}
	}
	return err
}

// releaseLater runs release (the driver work of giving something back) now, or, when the
// calling thread may not touch the driver (a capture is live on the provider, or the thread
// captures for another provider), queues it to run when that capture ends: a release never
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
	return p.runOrDefer(release)
}

// releaseChecked is releaseLater for a release that must be checked (and its bookkeeping
// done) at the call, so that what it defers cannot fail for a reason the caller could have
// been told: check runs now, inside the window, and returns the driver work to run now or
// later (nil for none) and the call's error. Unlike releaseLater, a closed provider is an
// error (what to release went with it).
func (p *Provider) releaseChecked(what string, check func() (func() error, error)) error {
	e, err := p.enter(what, accessQuery)
	if err != nil {
		return err
	}
	defer e.leave()
	work, err := check()
	if work != nil {
		err = errors.Join(err, p.runOrDefer(work))
	}
	return err
}

// runOrDefer runs work now, or queues it when the calling thread may not touch the driver:
// while a capture is live on p (its streams capture; the work waits for p's capture to end),
// or when the thread captures for another provider (the work waits for that capture). The
// window must be entered.
func (p *Provider) runOrDefer(work func() error) error {
	if p.win.capture.Load() != 0 {
		p.queueDeferred(work)
		return nil
	}
	if threadCapturer() != nil {
		p.queueDeferred(work)
		if awaitThreadCapture(p) {
			return nil
		}
		// Not reached: only the calling thread could have ended its capture. Run what was
		// queued rather than leave it behind.
		p.runQueued()
		return nil
	}
	return work()
}

// queueDeferred queues driver work of a release for when the capture it waits for ends.
func (p *Provider) queueDeferred(work func() error) {
	p.win.deferMu.Lock()
	p.win.deferred = append(p.win.deferred, work)
	p.win.deferMu.Unlock()
	p.win.deferCount.Add(1)
}

// runQueued runs the queued work; the window is entered (or held) by the caller.
func (p *Provider) runQueued() {
	p.win.deferMu.Lock()
	queue := p.win.deferred
	p.win.deferred = nil
	p.win.deferMu.Unlock()
	for _, work := range queue {
		p.noteDeferred(work())
	}
}

// runDeferred runs, once a capture has ended, the work it deferred: the releases queued
// during it and, for a provider closed on the capturing thread, the teardown. Work waiting
// for the provider's own capture stays queued while that capture is live. A failure is
// counted (DeferredFailures): the call that deferred the work has returned long ago.
func (p *Provider) runDeferred() {
	if p.finishClose() {
		return
	}
	p.win.deferMu.Lock()
	empty := len(p.win.deferred) == 0
	p.win.deferMu.Unlock()
	if empty {
		return
	}
	e, err := p.enter("run releases deferred by a capture", accessQuery)
	if err != nil {
		return // closed: Close ran them
	}
	defer e.leave()
	if p.win.capture.Load() != 0 || threadCapturer() != nil {
		return // a capture is live again: its end runs them
	}
	p.runQueued()
}

// finishClose tears down a provider whose Close was called on a capturing thread, now that
// the capture ended; it reports whether it did. A teardown failure is counted, not reported
// (Close returned long ago).
func (p *Provider) finishClose() bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.win.mu.Lock()
	defer p.win.mu.Unlock()
	if !p.win.closeLater {
		return false
	}
	p.win.closeLater = false
	p.noteDeferred(p.teardown())
	return true
}

// drainDeferred runs whatever is still queued; Close calls it (in teardown) with the window
// held.
func (p *Provider) drainDeferred() {
	p.runQueued()
}

// noteDeferred counts a failure of deferred work and keeps the latest.
func (p *Provider) noteDeferred(err error) {
	if err == nil {
		return
	}
	p.win.failCount.Add(1)
	p.win.deferMu.Lock()
	p.win.lastFail = fmt.Errorf("ep: a release deferred by a capture failed: %w", err)
	p.win.deferMu.Unlock()
}

// DeferredFailures reports how many pieces of work deferred by captures failed when they ran
// (in the driver: what a release could check, it checked when it was called), and the latest
// failure. No later call reports them: a device fault behind one is sticky and fails the next
// call that touches the device, and a double-buffer slot whose fence failed is quarantined.
func (p *Provider) DeferredFailures() (uint64, error) {
	p.win.deferMu.Lock()
	defer p.win.deferMu.Unlock()
	return p.win.failCount.Load(), p.win.lastFail
}

// CaptureLive reports whether a capture is live on the provider (begun and not yet ended or
// aborted). It is one atomic load.
func (p *Provider) CaptureLive() bool { return p.win.capture.Load() != 0 }

// DeferredReleases counts the releases that a live capture deferred until it ended.
func (p *Provider) DeferredReleases() uint64 { return p.win.deferCount.Load() }
