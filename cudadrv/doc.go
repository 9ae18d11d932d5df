// Package cudadrv is the CUDA driver surface as Go types, over a real or a simulated device.
//
// Everything above this package (graphs, paging, ep) talks to the GPU only through the types
// here: [Driver], [Device], [Context], [Stream], [Event], [Module], [Function], [Graph],
// [GraphExec], [BLAS], pinned, mapped and registered host memory, the [CompletionWord] a
// host waits on without a driver call, and the [Error] values that carry a CUresult's number
// and name.
//
// # Backends
//
// The types are thin, concrete wrappers over a [Backend]: a flat, handle-based interface with
// one method per driver entry point. Two implementations exist:
//
//   - cudadrv/cuda loads libcuda.so.1 (and cuBLAS and NVRTC) through purego, without cgo.
//   - cudadrv/sim is a pure-Go simulated device, faithful where the project depends on
//     semantics (asynchronous in-order streams, events, bounds-checked memory, stream capture
//     and its invalidation rules, graphs, fault injection).
//
// The wrappers add what both backends share: errors naming the operation, allocation counters,
// the sticky-error rule and destroy-exactly-once handles.
//
// # Sharing
//
// CUDA's driver is one per process, so every library in it sees the same devices and primary
// contexts. [AcquireShared] gives Go code the same rule for backends opened in-process (the
// simulated device above all): ep opens its backends there, and code that calls the driver
// beside ep's providers acquires the same driver by name and retains the same primary contexts.
//
// # Threads
//
// A CUDA context is current per OS thread. Callers bind a [Context] with [Context.Bind] on a
// thread that is locked to its goroutine (runtime.LockOSThread) before any other call on that
// thread; thread-local stream capture must begin and end on one OS thread.
package cudadrv
