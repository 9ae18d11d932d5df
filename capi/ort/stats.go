package ort

import (
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/partition"
)

// Stats are the ORT adapter's process-wide counters: what lives now, and what it has done
// since the library was loaded. A host reads them through the C ABI (CudaEpGetOrtStats) to
// see where its model's weights came from and that nothing is left behind.
type Stats struct {
	Sessions   int // OrtEps (sessions using CudaEp) alive
	Partitions int // compiled partitions alive

	// WeightFileBytes counts the bytes cudaep read from external-data files itself (resident
	// loads and paged layers, which are read again at every run); WeightORTBytes counts the
	// bytes of in-memory initializers copied from ORT's values.
	WeightFileBytes, WeightORTBytes uint64
	// PagedLayers and PagedBytes count the layers streamed through double buffers during runs.
	PagedLayers, PagedBytes uint64
	// Runs counts partition runs; Captures and Replays the CUDA graphs captured and replayed.
	Runs, Captures, Replays uint64

	// DeviceLiveBytes is the device memory the adapter's providers hold (sessions' weights and
	// plans, tensors ORT allocated through CudaEp's allocators, and the freed allocations kept
	// for reuse, which DeviceCachedBytes counts).
	DeviceLiveBytes, DeviceCachedBytes uint64

	// SyncStreams are the CudaEp streams ORT holds now; StreamRuns counts partition runs ORT
	// gave a CudaEp stream (they return with their work queued, unwaited); Notifications counts
	// the notifications ORT activated (fences recorded to order work across streams).
	SyncStreams               int
	StreamRuns, Notifications uint64

	// FusedNodes counts the graph nodes compiled partitions run inside fused kernels, or do not
	// run at all because they repeat an earlier node (partition.Fuse). ValuesInPlace counts the partition inputs and outputs runs read or
	// wrote in ORT's device tensors directly; ValuesCopied those copied through a plan's own
	// buffers (host tensors, and device ones a run could not use in place).
	FusedNodes, ValuesInPlace, ValuesCopied uint64
}

// counters are the adapter's own cumulative counts behind Stats; the partitions' are
// partition.Totals.
var counters struct {
	notifications atomic.Uint64
}

// live holds the sessions alive, for the device bytes they hold.
var live = struct {
	mu       sync.Mutex
	sessions map[*session]struct{}
}{sessions: map[*session]struct{}{}}

// GetStats returns the adapter's counters now.
func GetStats() Stats {
	t := partition.Totals()
	st := Stats{
		Sessions: epTable.Live(), Partitions: fusedNodeTable.Live(),
		WeightFileBytes: t.WeightFileBytes, WeightORTBytes: t.WeightHostBytes,
		PagedLayers: t.PagedLayers, PagedBytes: t.PagedBytes,
		Runs: t.Runs, Captures: t.Captures, Replays: t.Replays,
		SyncStreams: streamTable.Live(), StreamRuns: t.StreamRuns, Notifications: counters.notifications.Load(),
		FusedNodes: t.FusedNodes, ValuesInPlace: t.ValuesInPlace, ValuesCopied: t.ValuesCopied,
	}
	live.mu.Lock()
	for s := range live.sessions {
		st.DeviceLiveBytes += s.p.Stats().LiveBytes
	}
	live.mu.Unlock()
	ortMemory.mu.Lock()
	for _, p := range ortMemory.providers {
		st.DeviceLiveBytes += p.Stats().LiveBytes
	}
	ortMemory.mu.Unlock()
	st.DeviceCachedBytes = ortMemory.index.CachedBytes()
	return st
}
