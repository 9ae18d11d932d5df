//go:build !cudaep_phases

package partition

// A run's phases (see phases_timed.go): in the shipped library they cost nothing; a build
// with the cudaep_phases tag times them.

// phaseClock is the timing of one Run: free in this build.
type phaseClock struct{}

func startPhases() phaseClock                  { return phaseClock{} }
func (phaseClock) mark(phase)                  {}
func (phaseClock) done(pt *Partition, ok bool) {}
func (pt *Partition) reportPhases()            {}

// TimeCopy starts timing one of the host's copies between host and device memory (its data
// transfer, between runs); the returned func ends it. Free unless built with cudaep_phases.
func TimeCopy(fromGPU, toGPU bool) func() { return func() {} }
