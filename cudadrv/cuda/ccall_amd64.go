//go:build linux && amd64

package cuda

import "unsafe"

// runtime_cgocall is the runtime's call into C (what cgo and purego use): it enters a system
// call, runs fn(arg) on the system stack with the C calling convention and returns. The frame
// is passed as a uintptr, as cgo does, so that it stays on the caller's stack: the compiler
// keeps an object whose address is converted in the argument list of a body-less function
// alive, and in place, until the call returns.
//
//go:linkname runtime_cgocall runtime.cgocall
func runtime_cgocall(fn uintptr, arg uintptr) int32

// ccallTrampolineABI0 is the address of ccallTrampoline (ccall_amd64.s).
var ccallTrampolineABI0 uintptr

// ccall calls f.fn with f.a as its integer arguments and stores and returns its result.
// Unused argument slots must be zero or anything: the callee reads only its own.
func ccall(f *cframe) uintptr {
	c := startCall()
	runtime_cgocall(ccallTrampolineABI0, uintptr(unsafe.Pointer(f)))
	c.done(f.fn)
	return f.r
}
