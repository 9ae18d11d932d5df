// Command capi is libcudaep.so: the C ABI declared in include/cudaep.h, built with
// go build -buildmode=c-shared (see the Makefile; a linker version script exports only the
// CudaEp* symbols).
//
// Each export is a thin shim: it recovers panics into a CUDAEP_FAIL status, decodes and
// checks its arguments, looks handles up in the typed tables of package handles, calls
// package ep, maps any error to a status in one place (codeOf), and writes its out-parameters
// only once everything has succeeded. No Go pointer is ever handed to C: objects cross as
// 64-bit handles, strings are copied in with C.GoString and out into caller buffers, and
// statuses are allocated in the C heap (status.c).
//
// The cgo preambles include capi/cudaep.h, a byte-identical copy of include/cudaep.h that the
// Makefile makes in this directory (Go's build cache does not see headers outside a package;
// the copy is not tracked by git: run make, or `make header-copy`, before go build or go vet
// of this package). Because the header is included, the C compiler rejects any export whose
// signature drifts from its declaration.
package main

// The ONNX Runtime plugin EP (CreateEpFactories, ReleaseEpFactory) is linked into the same
// library.
import _ "github.com/cudaep/cudaep/capi/ort" // the ORT plugin EP's entry points

// main is never run: a c-shared library's main package needs one.
func main() {}
