// Package paging streams layer weights from memory-mapped external-data files to the GPU one
// layer ahead of compute, through a two-slot double buffer under a device byte budget.
//
// # Pieces
//
//   - [MmapSource] maps ONNX external-data files read-only and shared (MAP_SHARED, PROT_READ)
//     and resolves [Region]s of them to bytes, bounds-checked.
//   - [LazyWeight] describes one weight that lives in such files: dtype, shape, [Boundary] and
//     an ordered list of regions whose concatenation is the weight's device image.
//   - [DoubleBuffer] is the generic two-slot state machine (tickets, generations, fences,
//     cancellation, quarantine and its explicit recovery) over a [Transfer]; [CUDATransfer] is the real one, moving the
//     bytes either through the pinned [StagingPool] or zero-copy from registered file extents.
//   - [Residency] routes a provider's lazy weights through one pipeline with typed [Decline]s,
//     hands out [PagedWeight]s and keeps statistics.
//   - The [StagingPool] keeps file extents registered with the driver across fills (and
//     [StagingPool.RegisterFile] registers a whole file when it is opened), under a cap on
//     registered bytes, so that a prefill copies from registered memory at the link's rate
//     instead of registering every layer again.
//
// # Threads
//
// Every driver call is made on the calling goroutine's OS thread, which this package locks and
// binds to the pipeline's context for the duration of the call (CUDA contexts are current per
// OS thread). Host-side copies into pinned staging memory fan out over short-lived goroutines
// that never touch the driver.
package paging
