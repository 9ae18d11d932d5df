//go:build !cudaep_phases

package ort

// Compute's phases (see phases_timed.go): in the shipped library they cost nothing; a build
// with the cudaep_phases tag times them.

// phaseClock is the timing of one Compute: free in this build.
type phaseClock struct{}

func startPhases() phaseClock                  { return phaseClock{} }
func (phaseClock) mark(phase)                  {}
func (phaseClock) done(pt *partition, ok bool) {}
func (pt *partition) reportPhases()            {}
func timeCopy(fromGPU, toGPU bool) func()      { return func() {} }
