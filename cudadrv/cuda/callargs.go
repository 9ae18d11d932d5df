package cuda

import (
	"sync"
	"unsafe"
)

// Why the generated wrappers do not call purego.SyscallN(fn, a, b, c) directly:
//
// SyscallN is //go:uintptrescapes, which makes the compiler treat every uintptr argument as a
// pointer that escapes. For a variadic function that includes the implicit []uintptr backing
// the argument list, so a plain call with one or more arguments allocates that array on every
// call, even when all the pointers in it already live on the heap (the package's tests measure
// it). The wrappers therefore build the argument list in a pooled, heap-resident array and pass
// it as args[:n]..., which allocates nothing.
//
// That gives up what uintptrescapes did for pointer arguments, so the wrappers restore it by
// hand, for every pointer parameter p:
//
//   - escape(p) before the call forces the caller's object to the heap, as uintptrescapes would:
//     a uintptr into a goroutine stack would dangle if the stack moved before the C call began;
//     Go's heap does not move objects.
//   - runtime.KeepAlive(p) after the call keeps the object alive until the C function has
//     returned, since the uintptr copy in the array does not.
//
// Hot calls pass only pointers to memory already on the heap or outside Go, so neither costs
// an allocation.

// maxCallArgs is the most arguments a wrapped function takes (purego.SyscallN's limit).
const maxCallArgs = 32

// callArgs is the argument list of one SyscallN call.
type callArgs [maxCallArgs]uintptr

// callArgsPool recycles argument lists. It holds uintptrs only, so stale entries keep nothing
// alive.
var callArgsPool = sync.Pool{New: func() any { return new(callArgs) }}

// getCallArgs returns an argument list for one call; putCallArgs gives it back after the call.
func getCallArgs() *callArgs { return callArgsPool.Get().(*callArgs) }

func putCallArgs(a *callArgs) { callArgsPool.Put(a) }

// escapeSink and escapeNever make escape's argument escape in the compiler's analysis while
// the store never happens at run time.
var (
	escapeSink  unsafe.Pointer
	escapeNever bool
)

// escape makes p escape to the heap in the caller's escape analysis; at run time it only
// loads one boolean.
func escape(p unsafe.Pointer) {
	if escapeNever {
		escapeSink = p
	}
}
