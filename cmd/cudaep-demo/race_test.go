//go:build race

package main

// raceEnabled: the race detector's instrumentation makes the simulated device's worker
// goroutines allocate while the demo counts process-wide heap allocations, so a -race run
// cannot show the zero the product has.
const raceEnabled = true
