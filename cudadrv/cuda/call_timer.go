//go:build !cudaep_phases

package cuda

// callClock times ccall's driver calls in a measurement build (call_timer_timed.go); here it
// is free.
type callClock struct{}

func startCall() callClock     { return callClock{} }
func (callClock) done(uintptr) {}

// dumpGraph writes a graph's DOT description in a measurement build; here it does nothing.
func dumpGraph(uintptr) {}
