package main

import (
	"errors"
	"sync"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// providerState is what the C layer remembers about a provider beyond ep.Provider: user
// modules that must stay loaded until the provider's graphs are destroyed because a graph
// recorded a launch of theirs, and the lease a live capture holds on the provider. It lives
// from the provider's creation until its finalizer.
type providerState struct {
	mu       sync.Mutex
	deferred []*ep.UserModule
	capture  handles.Lease[*ep.Provider] // held from a successful begin until the capture ends
}

// holdCapture keeps the provider alive (not finalized) while its capture is live, so that the
// release of its last child on the capturing thread cannot tear it down mid-capture.
func (s *providerState) holdCapture(lease handles.Lease[*ep.Provider]) {
	s.mu.Lock()
	old := s.capture
	s.capture = lease
	s.mu.Unlock()
	_ = old.Release() // none in practice: one capture per provider at a time
}

// endCapture gives back the capture's lease once no capture is live on p; a finalizer it
// triggers runs now, after the capture ended.
func (s *providerState) endCapture(p *ep.Provider) error {
	if p.CaptureLive() {
		return nil
	}
	s.mu.Lock()
	lease := s.capture
	s.capture = handles.Lease[*ep.Provider]{}
	s.mu.Unlock()
	return lease.Release()
}

// states maps each live provider to its state.
var states sync.Map // *ep.Provider → *providerState

// stateOf returns p's state, making it on first use.
func stateOf(p *ep.Provider) *providerState {
	if s, ok := states.Load(p); ok {
		return s.(*providerState)
	}
	s, _ := states.LoadOrStore(p, &providerState{})
	return s.(*providerState)
}

// deferUnload keeps m loaded until the provider's teardown.
func (s *providerState) deferUnload(m *ep.UserModule) {
	s.mu.Lock()
	s.deferred = append(s.deferred, m)
	s.mu.Unlock()
}

// finalizeProvider is the provider table's finalizer, run when the provider's handle, its calls
// and its children are all gone. Modules whose launches graphs recorded are unloaded only after
// every graph slot of the provider is reset (a graph must never outlive code it launches);
// then the provider is closed.
func finalizeProvider(p *ep.Provider) error {
	s := stateOf(p)
	states.Delete(p)
	var errs []error
	if len(s.deferred) > 0 {
		slots := []ep.Slot{graphs.Primary, graphs.Verify}
		for _, key := range p.GraphKeys() {
			slots = append(slots, graphs.Keyed(key))
		}
		reset := true
		for _, slot := range slots {
			if _, err := p.ResetGraph(slot); err != nil {
				errs = append(errs, err)
				reset = false
			}
		}
		// A slot that could not be reset (a capture left live) may still hold a graph that
		// launches these modules: leave them to the context's destruction rather than unload
		// code a graph embeds.
		if reset {
			for _, m := range s.deferred {
				errs = append(errs, m.Unload())
			}
		}
	}
	errs = append(errs, p.Close())
	return errors.Join(errs...)
}
