package main

import (
	"sync"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// providerState is what the C layer remembers about a provider beyond ep.Provider: the lease a
// live capture holds on the provider's handle entry (handle bookkeeping only). It lives from
// the provider's first capture until its finalizer.
type providerState struct {
	mu      sync.Mutex
	capture handles.Lease[*ep.Provider] // held from a successful begin until the capture ends
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

// finalizeProvider is the provider table's finalizer, run when the provider's handle, its calls
// and its children are all gone: it forgets the provider's state and closes it (ep's Close
// gives back whatever the children left: modules after the graphs that launch them, double
// buffers, paged weights).
func finalizeProvider(p *ep.Provider) error {
	states.Delete(p)
	return p.Close()
}
