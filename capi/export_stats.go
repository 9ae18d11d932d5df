package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/capi/ort"
	"github.com/cudaep/cudaep/ep"
)

// CudaEpProviderGetStats fills a CudaEpProviderStats (see cudaep.h).
//
//export CudaEpProviderGetStats
func CudaEpProviderGetStats(provider C.CudaEpProvider, stats *C.CudaEpProviderStats) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(stats), "stats", C.sizeof_CudaEpProviderStats}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	var s ep.Stats
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		s = p.Stats()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	v := C.CudaEpProviderStats{
		device_allocs: C.uint64_t(s.Allocs), device_frees: C.uint64_t(s.Frees),
		device_live_bytes: C.uint64_t(s.LiveBytes),
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}

// ortStatsFirstSize is sizeof(CudaEpOrtStats) in its first released layout (ABI 3): a caller
// built against it gets the counters it knows.
const ortStatsFirstSize = 112

// CudaEpGetOrtStats fills a CudaEpOrtStats with the ONNX Runtime adapter's counters (see
// cudaep.h).
//
//export CudaEpGetOrtStats
func CudaEpGetOrtStats(stats *C.CudaEpOrtStats) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(stats), "stats", ortStatsFirstSize}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	s := ort.GetStats()
	v := C.CudaEpOrtStats{
		sessions: C.uint32_t(s.Sessions), partitions: C.uint64_t(s.Partitions),
		weight_file_bytes: C.uint64_t(s.WeightFileBytes), weight_ort_bytes: C.uint64_t(s.WeightORTBytes),
		paged_layers: C.uint64_t(s.PagedLayers), paged_bytes: C.uint64_t(s.PagedBytes),
		runs: C.uint64_t(s.Runs), captures: C.uint64_t(s.Captures), replays: C.uint64_t(s.Replays),
		device_live_bytes: C.uint64_t(s.DeviceLiveBytes), device_cached_bytes: C.uint64_t(s.DeviceCachedBytes),
		sync_streams: C.uint64_t(s.SyncStreams), stream_runs: C.uint64_t(s.StreamRuns),
		notifications: C.uint64_t(s.Notifications),
		fused_nodes:   C.uint64_t(s.FusedNodes), values_in_place: C.uint64_t(s.ValuesInPlace),
		values_copied: C.uint64_t(s.ValuesCopied),
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}

// CudaEpSynchronize is the deferred synchronization hook: it checks the handle only (see
// cudaep.h).
//
//export CudaEpSynchronize
func CudaEpSynchronize(provider C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withProvider(handles.Handle(provider), (*ep.Provider).Synchronize))
}

// CudaEpForceSynchronize drains the device (see cudaep.h).
//
//export CudaEpForceSynchronize
func CudaEpForceSynchronize(provider C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withProvider(handles.Handle(provider), (*ep.Provider).ForceSynchronize))
}

// CudaEpSynchronizeCompute waits for the provider's compute stream (see cudaep.h).
//
//export CudaEpSynchronizeCompute
func CudaEpSynchronizeCompute(provider C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	p, err := unleasedProvider(handles.Handle(provider)) // see there: safe against a concurrent Close
	if err != nil {
		return statusOf(err)
	}
	return statusOf(p.SynchronizeCompute())
}

// CudaEpDrainForUnmap drains the device before host memory is unmapped (see cudaep.h).
//
//export CudaEpDrainForUnmap
func CudaEpDrainForUnmap(provider C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withProvider(handles.Handle(provider), (*ep.Provider).DrainForUnmap))
}
