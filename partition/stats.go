package partition

import "sync/atomic"

// Counts are what the process's partitions have done since the library was loaded, for a
// host's statistics.
type Counts struct {
	// WeightFileBytes counts the bytes read from external-data files (resident loads and paged
	// layers, which are read again at every run); WeightHostBytes the bytes of in-memory
	// initializers copied from the host's values.
	WeightFileBytes, WeightHostBytes uint64
	// PagedLayers and PagedBytes count the layers streamed through double buffers during runs.
	PagedLayers, PagedBytes uint64
	// Runs counts partition runs, StreamRuns those the host gave a stream of its own (they
	// return with their work queued, unwaited); Captures and Replays the CUDA graphs captured
	// and replayed.
	Runs, StreamRuns, Captures, Replays uint64
	// FusedNodes counts the graph nodes compiled partitions run inside fused kernels, or do not
	// run at all because they repeat an earlier node (Fuse). ValuesInPlace counts the inputs
	// and outputs runs read or wrote in the host's device tensors directly; ValuesCopied those
	// copied through a plan's own buffers (host tensors, and device ones a run could not use in
	// place).
	FusedNodes, ValuesInPlace, ValuesCopied uint64
}

// counters are the cumulative counts behind Counts.
var counters struct {
	weightFileBytes, weightHostBytes atomic.Uint64
	pagedLayers, pagedBytes          atomic.Uint64
	runs, streamRuns                 atomic.Uint64
	captures, replays                atomic.Uint64
	fusedNodes, inPlace, copied      atomic.Uint64
}

// Totals returns the process's partition counts now.
func Totals() Counts {
	return Counts{
		WeightFileBytes: counters.weightFileBytes.Load(), WeightHostBytes: counters.weightHostBytes.Load(),
		PagedLayers: counters.pagedLayers.Load(), PagedBytes: counters.pagedBytes.Load(),
		Runs: counters.runs.Load(), StreamRuns: counters.streamRuns.Load(),
		Captures: counters.captures.Load(), Replays: counters.replays.Load(),
		FusedNodes: counters.fusedNodes.Load(), ValuesInPlace: counters.inPlace.Load(), ValuesCopied: counters.copied.Load(),
	}
}
