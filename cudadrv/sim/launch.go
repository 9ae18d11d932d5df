package sim

import (
	"math"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// Launch is what a KernelFunc sees of its launch: the configuration, the argument words and
// bounds-checked views of device memory. It is valid only during the kernel call (the worker
// reuses it) and must not be used from other goroutines.
type Launch struct {
	// Name is the kernel's entry point name.
	Name string
	// Grid and Block are the launch extents.
	Grid, Block cudadrv.Dim3
	// SharedMem is the dynamic shared memory size in bytes (not backed by memory: kernels use
	// Go locals).
	SharedMem uint32

	d     *Device
	nargs int
	args  [cudadrv.MaxKernelArgs]uint64
}

func (l *Launch) set(o *op) {
	l.Name, l.Grid, l.Block, l.SharedMem = o.fn.name, o.grid, o.block, o.shared
	l.nargs, l.args = o.nargs, o.args
}

func (l *Launch) clear() { l.Name, l.nargs = "", 0 }

// Threads returns the total number of threads in the grid.
func (l *Launch) Threads() uint64 {
	return uint64(l.Grid.X) * uint64(l.Grid.Y) * uint64(l.Grid.Z) *
		uint64(l.Block.X) * uint64(l.Block.Y) * uint64(l.Block.Z)
}

// NumArgs returns the number of arguments.
func (l *Launch) NumArgs() int { return l.nargs }

// Arg returns argument i as its 8-byte word (a 4-byte argument in the low half), or 0 when i
// is out of range.
func (l *Launch) Arg(i int) uint64 {
	if i < 0 || i >= l.nargs {
		return 0
	}
	return l.args[i]
}

// PtrArg returns argument i as a device pointer.
func (l *Launch) PtrArg(i int) cudadrv.DevicePtr { return cudadrv.DevicePtr(l.Arg(i)) }

// U64Arg returns argument i as a uint64.
func (l *Launch) U64Arg(i int) uint64 { return l.Arg(i) }

// I64Arg returns argument i as an int64.
func (l *Launch) I64Arg(i int) int64 { return int64(l.Arg(i)) }

// U32Arg returns argument i as a uint32.
func (l *Launch) U32Arg(i int) uint32 { return uint32(l.Arg(i)) }

// I32Arg returns argument i as an int32.
func (l *Launch) I32Arg(i int) int32 { return int32(uint32(l.Arg(i))) }

// F32Arg returns argument i as a float32.
func (l *Launch) F32Arg(i int) float32 { return math.Float32frombits(uint32(l.Arg(i))) }

// F64Arg returns argument i as a float64.
func (l *Launch) F64Arg(i int) float64 { return math.Float64frombits(l.Arg(i)) }

// Bytes returns the n bytes at p as a view into device memory. The range must lie inside one
// live allocation; otherwise the error is an *AccessError naming the access and the
// allocation, which the kernel should return.
func (l *Launch) Bytes(p cudadrv.DevicePtr, n uint64) ([]byte, error) { return l.d.view(p, n) }

// typed returns a view of n elements of type T at p, checking alignment and bounds.
func typed[T any](d *Device, p cudadrv.DevicePtr, n int) ([]T, error) {
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
	b, err := d.view(p, uint64(n)*size)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// Float32s returns n float32s at p (4-byte aligned) as a view into device memory; see Bytes.
func (l *Launch) Float32s(p cudadrv.DevicePtr, n int) ([]float32, error) {
	return typed[float32](l.d, p, n)
}

// Float64s returns n float64s at p (8-byte aligned); see Bytes.
func (l *Launch) Float64s(p cudadrv.DevicePtr, n int) ([]float64, error) {
	return typed[float64](l.d, p, n)
}

// Int32s returns n int32s at p (4-byte aligned); see Bytes.
func (l *Launch) Int32s(p cudadrv.DevicePtr, n int) ([]int32, error) { return typed[int32](l.d, p, n) }

// Uint32s returns n uint32s at p (4-byte aligned); see Bytes.
func (l *Launch) Uint32s(p cudadrv.DevicePtr, n int) ([]uint32, error) {
	return typed[uint32](l.d, p, n)
}

// Int64s returns n int64s at p (8-byte aligned); see Bytes.
func (l *Launch) Int64s(p cudadrv.DevicePtr, n int) ([]int64, error) { return typed[int64](l.d, p, n) }

// Uint16s returns n uint16s at p (2-byte aligned), e.g. the bits of half-precision values;
// see Bytes.
func (l *Launch) Uint16s(p cudadrv.DevicePtr, n int) ([]uint16, error) {
	return typed[uint16](l.d, p, n)
}
