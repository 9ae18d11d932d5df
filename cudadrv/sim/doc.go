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
//
// Kernels are Go functions registered with [RegisterKernel] under their PTX entry names; a
// PTX module is loaded by parsing its entry declarations. cuBLAS SGEMM is implemented in Go
// with cuBLAS's column-major semantics. NVRTC is not available.
//
// Stream capture records work as graph nodes instead of running it, with CUDA's rules for
// capture modes, invalidation, wrong-thread ends, isolation, fork and join; graphs replay
// against live memory. See capture.go for the exact list of calls a live capture prohibits.
//
// Tests can inject failures into any entry point ([Device.InjectFault]), model copy
// bandwidth and kernel duration ([Options]), and read live-object counters ([Device.Stats]).
package sim
