package graphs

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// Gate is the capture gate of one device. Captures hold it shared, from before
// begin-capture until end-capture has returned; drains ([Gate.Drain]) hold it exclusively,
// so that a device-synchronizing call never runs while a capture of the device is live (it
// would invalidate the capture) and no capture begins while one runs.
//
// A drain that is waiting keeps new captures out (so a stream of captures cannot starve it),
// except on a thread that already holds a capture: a thread's nested captures never wait.
// A drain requested on a thread that holds a capture is refused ([ErrDrainInCapture]).
//
// All methods are safe for concurrent use. Get the gate of a device with [GateFor], or make
// a private one with [NewGate] for lifecycles that share nothing with the rest of the
// process.
type Gate struct {
	mu       sync.Mutex
	captures int                 // live capture holds, over all threads
	holders  map[int]*gateHolder // by OS thread id
	draining bool                // a drain's function is running
	waiting  int                 // drains waiting for captures to end
	changed  chan struct{}       // closed and replaced when the gate loosens with sleepers
	sleepers int                 // goroutines blocked (or about to block) on changed

	onDrainWait func() // test hook: a drain is about to wait behind live captures
}

// gateHolder is one thread's capture holds.
type gateHolder struct {
	holds    int
	poisoned bool // a drain was refused on this thread during its captures
}

// NewGate returns a gate that no other lifecycle shares.
func NewGate() *Gate {
	return &Gate{holders: map[int]*gateHolder{}, changed: make(chan struct{})}
}

// gates is the process-wide registry behind GateFor.
var gates struct {
	sync.Mutex
	m map[gateKey]*Gate
}

// gateKey identifies a device: the backend instance and the ordinal.
type gateKey struct {
	backend any
	ordinal int
}

// GateFor returns the capture gate of ctx's device: the same *Gate for every context,
// lifecycle and provider on that device in this process.
//
// # Notes
//
// A device is identified by its backend instance and ordinal, so two simulated devices never
// share a gate and every context of one real device does. Gates live as long as the process
// (one small object per device) unless [ForgetGates] drops them with their backend. A nil ctx
// gets a fresh private gate.
func GateFor(ctx *cudadrv.Context) *Gate {
	if ctx == nil || ctx.Device() == nil {
		return NewGate()
	}
	var id any = ctx.Backend()
	if v := reflect.ValueOf(id); !v.IsValid() || !v.Comparable() {
		// A backend that cannot be a map key is identified by its name: more sharing than
		// needed, never less.
		id = ctx.Backend().Name()
	}
	key := gateKey{backend: id, ordinal: ctx.Device().Ordinal()}
	gates.Lock()
	defer gates.Unlock()
	if gates.m == nil {
		gates.m = map[gateKey]*Gate{}
	}
	g := gates.m[key]
	if g == nil {
		g = NewGate()
		gates.m[key] = g
	}
	return g
}

// ForgetGates drops the gates of every device of backend from the registry behind [GateFor],
// so that a closed backend is not kept alive by it. Call it when the backend is closed: a
// lifecycle still holding one of its gates keeps using it.
func ForgetGates(backend any) {
	gates.Lock()
	defer gates.Unlock()
	for k := range gates.m {
		if k.backend == backend {
			delete(gates.m, k)
		}
	}
}

// GateCount returns the number of device gates the registry holds, for leak tests.
func GateCount() int {
	gates.Lock()
	defer gates.Unlock()
	return len(gates.m)
}

// WaitingDrains returns the number of drains waiting for live captures to end.
func (g *Gate) WaitingDrains() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// LiveCaptures returns the number of captures holding the gate now.
func (g *Gate) LiveCaptures() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.captures
}

// Drain runs fn (typically a context or stream synchronize) once no capture of the device is
// live, holding the gate exclusively while fn runs: captures that want to begin meanwhile
// wait for it. It blocks for as long as captures stay live; see [Gate.DrainContext] to bound
// the wait.
//
// # Errors
//
// On a thread that holds a live capture of this gate, Drain does not run fn and returns an
// error wrapping [ErrDrainInCapture]; that capture's End will then fail, so abort it.
// Otherwise Drain returns what fn returns.
//
// # Notes
//
// fn runs with the gate held exclusively: it must not begin a capture, nor wait for a
// goroutine that is beginning one (Begin waits for the drain). A capture that is never ended
// (neither End nor Abort) keeps every later drain of the device waiting.
func (g *Gate) Drain(fn func() error) error {
	return g.DrainContext(context.Background(), fn)
}

// DrainContext is [Gate.Drain] with a context that bounds the wait for live captures; when
// ctx ends first, fn does not run and ctx's error is returned.
func (g *Gate) DrainContext(ctx context.Context, fn func() error) error {
	tid := gettid()
	g.mu.Lock()
	if h := g.holders[tid]; h != nil {
		h.poisoned = true
		g.mu.Unlock()
		return fmt.Errorf("%w: OS thread %d holds %d live capture(s) of this device", ErrDrainInCapture, tid, h.holds)
	}
	g.waiting++
	for g.captures > 0 || g.draining {
		ch, hook := g.changed, g.onDrainWait
		g.sleepers++
		g.mu.Unlock()
		if hook != nil {
			hook()
		}
		select {
		case <-ch:
			g.mu.Lock()
			g.sleepers--
		case <-ctx.Done():
			g.mu.Lock()
			g.sleepers--
			g.waiting--
			g.loosenLocked() // captures held back by this drain may go
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	g.waiting--
	g.draining = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.draining = false
		g.loosenLocked()
		g.mu.Unlock()
	}()
	return fn()
}

// acquire takes a shared capture hold for the OS thread tid, waiting while a drain runs or
// waits, unless the thread already holds a capture.
func (g *Gate) acquire(tid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		if h := g.holders[tid]; h != nil {
			h.holds++
			g.captures++
			return
		}
		if !g.draining && g.waiting == 0 {
			g.holders[tid] = &gateHolder{holds: 1}
			g.captures++
			return
		}
		ch := g.changed
		g.sleepers++
		g.mu.Unlock()
		<-ch
		g.mu.Lock()
		g.sleepers--
	}
}

// release drops one capture hold of thread tid and reports whether a drain was refused on
// that thread while it held the gate.
func (g *Gate) release(tid int) (poisoned bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.holders[tid]
	if h == nil {
		return false
	}
	poisoned = h.poisoned
	h.holds--
	g.captures--
	if h.holds == 0 {
		delete(g.holders, tid)
	}
	g.loosenLocked()
	return poisoned
}

// poisoned reports whether a drain was refused on thread tid during its current holds.
func (g *Gate) poisoned(tid int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.holders[tid]
	return h != nil && h.poisoned
}

// loosenLocked wakes every waiter to recheck the gate. g.mu is held. Every waiter counted
// itself in sleepers under g.mu before it let go of the lock, so with none there is nobody to
// wake and the channel is kept: an uncontended drain allocates nothing.
func (g *Gate) loosenLocked() {
	if g.sleepers == 0 {
		return
	}
	close(g.changed)
	g.changed = make(chan struct{})
}
