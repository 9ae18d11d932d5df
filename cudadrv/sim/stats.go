package sim

import "github.com/cudaep/cudaep/cudadrv"

// Stats counts the live objects of a Device, for leak checks in tests.
type Stats struct {
	Contexts          int    // live primary contexts
	Allocations       int    // live device allocations
	AllocatedBytes    uint64 // their requested sizes, summed
	PinnedHostBuffers int    // live MemHostAlloc buffers
	RegisteredRanges  int    // live MemHostRegister ranges
	Streams           int    // live created streams (legacy streams not counted)
	Events            int
	Modules           int
	Graphs            int
	GraphExecs        int
	BLASHandles       int
	Captures          int // captures begun and not yet ended
}

// Stats returns the current counts. Safe for concurrent use.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{
		Contexts:          len(d.contexts),
		Allocations:       len(d.mem.live),
		AllocatedBytes:    d.mem.liveBytes,
		PinnedHostBuffers: len(d.mem.pinned),
		RegisteredRanges:  len(d.mem.registered),
		Streams:           len(d.streams),
		Events:            len(d.events),
		Modules:           len(d.modules),
		Graphs:            len(d.graphs),
		GraphExecs:        len(d.execs),
		BLASHandles:       len(d.blas),
		Captures:          len(d.captures),
	}
}

// GraphExecFlags returns the flags the executable graph e was instantiated with, and whether
// e exists. Safe for concurrent use.
func (d *Device) GraphExecFlags(e cudadrv.RawGraphExec) (cudadrv.InstantiateFlags, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	x := d.execs[e]
	if x == nil {
		return 0, false
	}
	return x.flags, true
}

// Calls returns how many calls of the entry point op (one of the Op* constants) were made on
// d since New, failed ones included: tests use it to see which driver calls a layer above
// made (say, a stream synchronization or none). An unknown op counts 0. Safe for concurrent
// use.
func (d *Device) Calls(op string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}
