package cudadrv

import (
	"math"
	"unsafe"
)

// MaxKernelArgs is the most arguments a KernelArgs holds.
const MaxKernelArgs = 24

// KernelArgs is the argument list of one kernel launch: up to MaxKernelArgs scalar arguments
// of at most 8 bytes each (device pointers, integers, floats), in declaration order.
//
// A KernelArgs is reused across launches (Reset, then add again) so that launching allocates
// nothing; keep it on the heap (inside a long-lived struct, or from new). It is not safe for
// concurrent use. Adding past MaxKernelArgs is remembered and reported by the launch.
type KernelArgs struct {
	words    [MaxKernelArgs]uint64
	ptrs     [MaxKernelArgs]unsafe.Pointer
	n        int
	overflow bool
}

// Reset empties the list.
func (a *KernelArgs) Reset() { a.n, a.overflow = 0, false }

func (a *KernelArgs) push(w uint64) *KernelArgs {
	if a.n == MaxKernelArgs {
		a.overflow = true
		return a
	}
	a.words[a.n] = w
	a.n++
	return a
}

// Ptr appends a device pointer argument.
func (a *KernelArgs) Ptr(p DevicePtr) *KernelArgs { return a.push(uint64(p)) }

// U32 appends a 32-bit unsigned argument.
func (a *KernelArgs) U32(v uint32) *KernelArgs { return a.push(uint64(v)) }

// I32 appends a 32-bit signed argument.
func (a *KernelArgs) I32(v int32) *KernelArgs { return a.push(uint64(uint32(v))) }

// U64 appends a 64-bit unsigned argument.
func (a *KernelArgs) U64(v uint64) *KernelArgs { return a.push(v) }

// I64 appends a 64-bit signed argument.
func (a *KernelArgs) I64(v int64) *KernelArgs { return a.push(uint64(v)) }

// F32 appends a float argument.
func (a *KernelArgs) F32(v float32) *KernelArgs { return a.push(uint64(math.Float32bits(v))) }

// F64 appends a double argument.
func (a *KernelArgs) F64(v float64) *KernelArgs { return a.push(math.Float64bits(v)) }

// Len is the number of arguments.
func (a *KernelArgs) Len() int { return a.n }

// Overflowed reports whether more than MaxKernelArgs arguments were added since Reset.
func (a *KernelArgs) Overflowed() bool { return a.overflow }

// Word returns argument i as its 8-byte little-endian word (a 4-byte argument sits in the low
// half). The sim backend's kernels read their arguments this way.
func (a *KernelArgs) Word(i int) uint64 { return a.words[i] }

// Words returns a copy of the argument words.
func (a *KernelArgs) Words() []uint64 { return append([]uint64(nil), a.words[:a.n]...) }

// ParamArray returns the address of a void*[Len()] array whose entries point at the argument
// words, as cuLaunchKernel's kernelParams wants. The array lives inside a, so it stays valid
// while a is alive and unchanged; the caller keeps a alive across the driver call
// (runtime.KeepAlive). The words are little-endian, so a 4-byte argument is read from the low
// half of its word, which is what the kernel expects on x86-64 and arm64.
func (a *KernelArgs) ParamArray() unsafe.Pointer {
	for i := 0; i < a.n; i++ {
		a.ptrs[i] = unsafe.Pointer(&a.words[i])
	}
	return unsafe.Pointer(&a.ptrs[0])
}
