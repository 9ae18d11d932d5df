package graphs

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// leaseKind is what a lifecycle holds a stream for.
type leaseKind uint8

const (
	leaseNone    leaseKind = iota
	leaseCapture           // begin-capture through end-capture: replays on the stream are refused
	leaseSync              // host-side stream work (synchronize, instantiate, upload)
)

// streamGuard serializes, per stream, the lifecycles that share it: at most one capture at a
// time, no stream synchronize while a capture is live (it would invalidate it), and no
// replay enqueued into a live capture (it would be recorded into the other slot's graph).
// Replays check it lock-free through capturing, in the same reader epoch as the generation.
type streamGuard struct {
	mu      sync.Mutex
	cond    sync.Cond
	lease   leaseKind
	holder  Slot
	members []*Lifecycle

	// capturing is set (before the wait for admitted replays) while a capture lease is held
	// in its capture phase. Replays recheck it after entering their epoch.
	capturing atomic.Bool
}

func newStreamGuard() *streamGuard {
	g := &streamGuard{}
	g.cond.L = &g.mu
	return g
}

func (g *streamGuard) join(l *Lifecycle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = append(g.members, l)
}

func (g *streamGuard) leave(l *Lifecycle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, m := range g.members {
		if m == l {
			g.members = append(g.members[:i], g.members[i+1:]...)
			return
		}
	}
}

// acquire takes the stream for slot. A capture lease held by another slot refuses both kinds
// (ErrCaptureActive); a sync lease is waited for. A capture lease blocks new replays on the
// stream and waits until every replay already admitted has finished enqueueing.
func (g *streamGuard) acquire(kind leaseKind, slot Slot) error {
	g.mu.Lock()
	for g.lease == leaseSync {
		g.cond.Wait()
	}
	if g.lease == leaseCapture {
		holder := g.holder
		g.mu.Unlock()
		return fmt.Errorf("%w: slot %v is capturing on the shared stream", ErrCaptureActive, holder)
	}
	g.lease, g.holder = kind, slot
	if kind != leaseCapture {
		g.mu.Unlock()
		return nil
	}
	g.capturing.Store(true)
	members := append([]*Lifecycle(nil), g.members...)
	g.mu.Unlock()
	for _, m := range members {
		for m.active.Load() != 0 {
			runtime.Gosched()
		}
	}
	return nil
}

// endCapturePhase turns a capture lease into a sync lease once end-capture has returned:
// replays may run again, other lifecycles' captures and syncs still wait.
func (g *streamGuard) endCapturePhase() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.capturing.Store(false)
	g.lease = leaseSync
}

// release gives the stream back.
func (g *streamGuard) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.capturing.Store(false)
	g.lease = leaseNone
	g.cond.Broadcast()
}
