// Package sim is a pure-Go simulated CUDA device that implements cudadrv.Backend faithfully
// enough for everything above cudadrv to run and be tested without a GPU.
//
// # What is simulated
//
// A [Device] holds one or more simulated GPUs. Each has a primary context (retained and
// released with a reference count) that is made current per OS thread with CtxSetCurrent,
// exactly as the driver does: a call that needs a context fails with
// CUDA_ERROR_INVALID_CONTEXT on a thread that has none bound.
//
// Streams are asynchronous in-order queues, each drained by its own worker goroutine; the
// legacy stream 0 is one more such queue that synchronizes implicitly with blocking streams.
// Events order work across streams and carry the worker's clock for elapsed times.
//
// Device memory is Go memory behind fake, 256-byte-aligned addresses starting at
// [AddressBase]. Addresses are never reused, so a stale pointer stays detectable, and every
// access is bounds-checked against a single live allocation: copies and memsets with a bad
// range fail at enqueue with CUDA_ERROR_INVALID_VALUE, and a kernel that touches memory
// outside an allocation faults the context with the sticky CUDA_ERROR_ILLEGAL_ADDRESS.
// Pinned host memory allocated with HostAllocDeviceMap gets a device address range of its own
// (MemHostGetDevicePointer) through which stream work and kernels reach the host buffer
// itself; StreamWriteValue32 stores a 32-bit value there (or in device memory) atomically when
// its stream reaches it, so a host spinning on the word with sync/atomic sees the stream's
// earlier work done.
//
// Several GPUs (Options.Devices) share one address space, each with its own primary context,
// streams and memory budget. Options.PeerAccess says which pairs can reach each other (every
// pair by default); CtxEnablePeerAccess enables a pair per context, and MemcpyPeerAsync copies
// between contexts only once the destination has enabled access to the source (stricter than
// the driver, which would stage the copy itself: see peer.go).
//
// Kernels are Go functions under their PTX entry names, handed to [New] in [Options].Kernels
// (or registered process-wide with [RegisterKernel], for tests); a PTX module is loaded by
// parsing its entry declarations. cuBLAS SGEMM is implemented in Go with cuBLAS's column-major
// semantics. NVRTC is not available.
//
// Stream capture records work as graph nodes instead of running it, with CUDA's rules for
// capture modes, invalidation, wrong-thread ends, isolation, fork and join (below); graphs
// replay against live memory, and launches of one executable are ordered behind each other.
//
// Tests can inject failures into any entry point ([Device.InjectFault]), model copy
// bandwidth and kernel duration ([Options]), and read live-object counters ([Device.Stats])
// and per-entry-point call counts ([Device.Calls]).
//
// # Stream capture
//
// While a stream captures, work enqueued on it (kernels, copies, memsets, GEMMs, graph
// launches, 32-bit value writes) is appended to the capture as graph nodes instead of running; event records and
// waits inside the capture only order it. A captured host copy keeps its host slice and
// reads or writes it when the graph replays.
//
// A live capture (begun, not yet ended, active or invalidated) prohibits:
//
//   - StreamSynchronize and StreamQuery of a capturing stream, from any thread and in every
//     mode: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated.
//   - CtxSynchronize from any thread while any capture of the context is live, in every mode:
//     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the captures are invalidated. (Measured on
//     the H200 for a thread-local capture and another thread; for a relaxed capture the
//     simulator is strict, since the context sync would synchronize the capturing stream.)
//   - "Potentially unsafe" calls: MemAlloc, MemFree, MemHostAlloc, MemFreeHost,
//     MemHostRegister, MemHostUnregister, the synchronous MemcpyHtoD/DtoH/DtoD and MemsetD8,
//     StreamSynchronize/StreamQuery of a stream that does not capture, EventSynchronize,
//     EventQuery, ModuleLoadData, ModuleUnload and BLASCreate/BLASDestroy (which allocate and
//     free the handle's workspace). They fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
//     (cuBLAS: CUBLAS_STATUS_NOT_INITIALIZED from BLASCreate, CUBLAS_STATUS_INTERNAL_ERROR from
//     BLASDestroy) and invalidate the prohibiting captures when made on the thread that began
//     a Global or ThreadLocal capture, or on any thread while a Global capture is live (every
//     thread is in the default global interaction mode, as the Backend has no
//     cuThreadExchangeStreamCaptureMode). The prohibition is the thread's, in whatever context
//     it makes the call: on the capturing thread an allocation for another context (another
//     device's included) invalidates the capture too. Relaxed captures prohibit none of them.
//     From another thread a ThreadLocal capture allows them all, as measured on the H200.
//   - Legacy-stream work (sync copies, StreamSynchronize(0), launches on stream 0) while a
//     blocking stream (created without StreamNonBlocking) captures:
//     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and the capture is invalidated.
//   - EventQuery/EventSynchronize/EventElapsedTime of an event last recorded in a capture:
//     CUDA_ERROR_CAPTURED_EVENT (the capture, if live, is invalidated).
//   - StreamWaitEvent on a capturing stream for an event recorded outside the capture:
//     CUDA_ERROR_STREAM_CAPTURE_ISOLATION, and the capture is invalidated.
//
// Once invalidated, enqueues on the capture's streams fail with
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, StreamCaptureStatus reports Invalidated, and
// StreamEndCapture returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph while ending the
// capture, so the stream is usable again.
package sim
