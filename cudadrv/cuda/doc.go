// Package cuda implements cudadrv.Backend over the real CUDA driver, cuBLAS and NVRTC, loaded
// with purego (no cgo).
//
// [Open] loads libcuda.so.1, resolves every driver entry point the package uses and calls
// cuInit. cuBLAS (libcublas.so.13, then .12) and NVRTC (libnvrtc.so.13, then .12) are loaded
// on first use, searched on the loader path, then in $CUDA_HOME/lib64, then in
// /usr/local/cuda/lib64; a library that cannot be found is reported as a *cudadrv.LibraryError
// naming every place tried. Loaded libraries stay loaded for the life of the process.
//
// # Symbol tables
//
// The entry points are declared once, as C prototypes, in driver.prototypes,
// cublas.prototypes and nvrtc.prototypes, and expanded by go generate (internal/mkcuda) into
// typed wrappers over purego.SyscallN in zdriver.go, zcublas.go and znvrtc.go. SyscallN is the
// cheapest purego path (no reflection), but a plain variadic call to it allocates its argument
// list on every call; the wrappers pass a pooled argument array instead and keep pointer
// arguments alive and in place by hand (callargs.go explains how). The hot calls (LaunchKernel,
// the *Async copies, EventRecord, GraphLaunch, Sgemm, SgemmStridedBatched) pass only pointers
// to memory already on the heap or outside Go, and so allocate nothing; tests assert it, on the
// real driver and, without a GPU, on a stand-in driver table.
//
// # Threads and contexts
//
// A CUDA context is current per OS thread, and the backend binds nothing itself: every call
// that needs a context uses the one current on the calling thread. Callers lock their
// goroutine to its thread (runtime.LockOSThread) and call [Backend.CtxSetCurrent] before other
// calls on that thread; thread-local stream capture must begin and end on the same thread.
// The Backend holds no per-thread state and may be shared by any number of goroutines.
//
// # Go memory and the driver
//
// Every call site that hands an address to C is reviewed like unsafe code (cgocheck does not
// see purego calls) and says why it is safe. The general rules: a Go pointer given to a wrapper
// is moved to the heap by escape analysis and kept alive until the C function returns, and Go's
// heap does not move objects, so the address C sees stays valid for the call; Go memory the driver
// may still read after the call returns (asynchronous copies) is the caller's to keep alive, as
// cudadrv.Backend documents; memory the driver owns (pinned host memory) is exposed as a slice
// made with unsafe.Slice and is never seen by the Go garbage collector.
package cuda
