package cudadrv

import (
	"fmt"
	"math"
	"unsafe"
)

// KernelBody is the Go body of a kernel, for a backend that runs kernels in Go instead of on a
// GPU (the simulator, cudadrv/sim, takes them by PTX entry name in sim.Options.Kernels). It is
// called once per launch, on the launching stream's worker goroutine, and covers the whole
// grid itself (l.Grid and l.Block give the extents). It reads its arguments and device memory
// through l, which is valid only during the call and must not be used from other goroutines.
//
// # Errors
//
// Returning an error faults the launch, as a faulting kernel would: an *AccessError from one of
// l's views is an illegal (or misaligned) address, an error carrying a sticky Result is that
// result, anything else a launch failure. The backend says how it reports them.
//
// # Notes
//
// The type lives here, not in the simulator, so that packages that provide bodies (ep/kernels)
// depend on the driver surface only: which backend runs the bodies is their caller's choice.
type KernelBody func(l *KernelLaunch) error

// KernelMemory is the device memory a KernelBody reaches through its KernelLaunch. A backend
// that runs bodies implements it over its own memory.
type KernelMemory interface {
	// View returns the n bytes at p as a slice aliasing device memory, valid while the kernel
	// runs. [p, p+n) must lie inside one live allocation; otherwise View returns an
	// *AccessError describing the access, which the body should return.
	View(p DevicePtr, n uint64) ([]byte, error)
}

// AccessError describes a device-memory access outside a single live allocation, or a
// misaligned typed view. Kernel bodies receive it from their KernelLaunch's views and return
// it; a backend also uses it to describe bad ranges it refuses.
type AccessError struct {
	Addr DevicePtr // first byte accessed
	Len  uint64    // bytes accessed
	// Base and Size name the allocation the access starts in, or else the nearest live one
	// below it; Size is zero when there is none.
	Base DevicePtr
	Size uint64
	// Freed says Base and Size name an allocation that was already freed.
	Freed bool
	// Misaligned says the address is not a multiple of Align, the element size of the view.
	Misaligned bool
	Align      uint64
}

// Error describes the access and the allocation it missed.
func (e *AccessError) Error() string {
	switch {
	case e.Misaligned:
		return fmt.Sprintf("misaligned access at %#x: %d-byte elements need %d-byte alignment", uint64(e.Addr), e.Align, e.Align)
	case e.Freed:
		return fmt.Sprintf("access [%#x, +%d) falls in freed allocation (base %#x, size %d)", uint64(e.Addr), e.Len, uint64(e.Base), e.Size)
	case e.Size == 0:
		return fmt.Sprintf("access [%#x, +%d) touches no allocation", uint64(e.Addr), e.Len)
	}
	return fmt.Sprintf("access [%#x, +%d) is outside allocation (base %#x, size %d)", uint64(e.Addr), e.Len, uint64(e.Base), e.Size)
}

// KernelLaunch is what a KernelBody sees of its launch: the configuration, the argument words
// and bounds-checked views of device memory. Backends make one with NewKernelLaunch.
type KernelLaunch struct {
	// Name is the kernel's entry point name.
	Name string
	// Grid and Block are the launch extents.
	Grid, Block Dim3
	// SharedMem is the dynamic shared memory size in bytes (not backed by memory: bodies use
	// Go locals).
	SharedMem uint32

	mem   KernelMemory
	nargs int
	args  [MaxKernelArgs]uint64
}

// NewKernelLaunch returns the launch a backend hands a KernelBody: the configuration, a copy of
// args (the 8-byte argument words, at most MaxKernelArgs; more are dropped) and the memory its
// views read. It returns a value so that a backend can keep one KernelLaunch per worker and
// overwrite it for each launch without allocating.
func NewKernelLaunch(mem KernelMemory, name string, grid, block Dim3, sharedMem uint32, args []uint64) KernelLaunch {
	l := KernelLaunch{Name: name, Grid: grid, Block: block, SharedMem: sharedMem, mem: mem}
	l.nargs = copy(l.args[:], args)
	return l
}

// Threads returns the total number of threads in the grid.
func (l *KernelLaunch) Threads() uint64 {
	return uint64(l.Grid.X) * uint64(l.Grid.Y) * uint64(l.Grid.Z) *
		uint64(l.Block.X) * uint64(l.Block.Y) * uint64(l.Block.Z)
}

// NumArgs returns the number of arguments.
func (l *KernelLaunch) NumArgs() int { return l.nargs }

// Arg returns argument i as its 8-byte word (a 4-byte argument in the low half), or 0 when i
// is out of range.
func (l *KernelLaunch) Arg(i int) uint64 {
	if i < 0 || i >= l.nargs {
		return 0
	}
	return l.args[i]
}

// PtrArg returns argument i as a device pointer.
func (l *KernelLaunch) PtrArg(i int) DevicePtr { return DevicePtr(l.Arg(i)) }

// U64Arg returns argument i as a uint64.
func (l *KernelLaunch) U64Arg(i int) uint64 { return l.Arg(i) }

// I64Arg returns argument i as an int64.
func (l *KernelLaunch) I64Arg(i int) int64 { return int64(l.Arg(i)) }

// U32Arg returns argument i as a uint32.
func (l *KernelLaunch) U32Arg(i int) uint32 { return uint32(l.Arg(i)) }

// I32Arg returns argument i as an int32.
func (l *KernelLaunch) I32Arg(i int) int32 { return int32(uint32(l.Arg(i))) }

// F32Arg returns argument i as a float32.
func (l *KernelLaunch) F32Arg(i int) float32 { return math.Float32frombits(uint32(l.Arg(i))) }

// F64Arg returns argument i as a float64.
func (l *KernelLaunch) F64Arg(i int) float64 { return math.Float64frombits(l.Arg(i)) }

// Bytes returns the n bytes at p as a view into device memory. The range must lie inside one
// live allocation; otherwise the error is an *AccessError naming the access and the
// allocation, which the kernel should return.
func (l *KernelLaunch) Bytes(p DevicePtr, n uint64) ([]byte, error) { return l.mem.View(p, n) }

// DeviceScalar is an element type a device-memory view may have: fixed-size numbers, whose
// every bit pattern is a value (so reinterpreting device bytes is safe).
type DeviceScalar interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// ViewOf returns n elements of type T at p in mem: p must be a multiple of T's size and the
// elements must lie inside one live allocation (n == 0 gives an empty view without a bounds
// check). Otherwise the error is an *AccessError. The view aliases device memory.
func ViewOf[T DeviceScalar](mem KernelMemory, p DevicePtr, n int) ([]T, error) {
	var zero T
	size := uint64(unsafe.Sizeof(zero))
	if n < 0 || uint64(n) > math.MaxUint64/size {
		return nil, &AccessError{Addr: p, Len: math.MaxUint64}
	}
	if uint64(p)%size != 0 {
		return nil, &AccessError{Addr: p, Len: uint64(n) * size, Misaligned: true, Align: size}
	}
	if n == 0 {
		return []T{}, nil
	}
	b, err := mem.View(p, uint64(n)*size)
	if err != nil {
		return nil, err
	}
	if uint64(len(b)) != uint64(n)*size {
		return nil, &AccessError{Addr: p, Len: uint64(n) * size}
	}
	// The backend's memory is Go memory it keeps alive for the allocation's life; the view
	// reinterprets its bytes as T, a DeviceScalar: no pointer is ever made from device bytes.
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// Float32s returns n float32s at p (4-byte aligned) as a view into device memory; see Bytes.
func (l *KernelLaunch) Float32s(p DevicePtr, n int) ([]float32, error) {
	return ViewOf[float32](l.mem, p, n)
}

// Float64s returns n float64s at p (8-byte aligned); see Bytes.
func (l *KernelLaunch) Float64s(p DevicePtr, n int) ([]float64, error) {
	return ViewOf[float64](l.mem, p, n)
}

// Int32s returns n int32s at p (4-byte aligned); see Bytes.
func (l *KernelLaunch) Int32s(p DevicePtr, n int) ([]int32, error) { return ViewOf[int32](l.mem, p, n) }

// Uint32s returns n uint32s at p (4-byte aligned); see Bytes.
func (l *KernelLaunch) Uint32s(p DevicePtr, n int) ([]uint32, error) {
	return ViewOf[uint32](l.mem, p, n)
}

// Int64s returns n int64s at p (8-byte aligned); see Bytes.
func (l *KernelLaunch) Int64s(p DevicePtr, n int) ([]int64, error) { return ViewOf[int64](l.mem, p, n) }

// Uint16s returns n uint16s at p (2-byte aligned), e.g. the bits of half-precision values;
// see Bytes.
func (l *KernelLaunch) Uint16s(p DevicePtr, n int) ([]uint16, error) {
	return ViewOf[uint16](l.mem, p, n)
}
