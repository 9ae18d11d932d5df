package kernels

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cudaep/cudaep/cudadrv"
)

// TensorInfo is a tensor's element type and shape. Shapes are row-major and dense; a nil or
// empty Shape is a scalar (one element).
type TensorInfo struct {
	DType DType
	Shape []int64
}

// NumElements returns the product of the dimensions (1 for a scalar, 0 when a dimension is
// 0), or -1 when a dimension is negative (unknown) or the product overflows int64: a count
// that wrapped around never passes for a small one. Library.Get refuses such shapes.
func (ti TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range ti.Shape {
		if d < 0 {
			return -1
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0
	}
	for _, d := range ti.Shape {
		var ok bool
		if n, ok = mulInt64(n, d); !ok {
			return -1
		}
	}
	return n
}

// Bytes returns the tensor's size in bytes, or -1 when NumElements is -1 or the size overflows
// int64.
func (ti TensorInfo) Bytes() int64 {
	n := ti.NumElements()
	if n < 0 {
		return -1
	}
	b, ok := mulInt64(n, int64(ti.DType.Size()))
	if !ok {
		return -1
	}
	return b
}

// Rank returns the number of dimensions.
func (ti TensorInfo) Rank() int { return len(ti.Shape) }

// String formats the info as dtype[d0,d1,…], e.g. "float32[2,3]".
func (ti TensorInfo) String() string { return ti.DType.String() + shapeString(ti.Shape) }

// Equal reports whether ti and o have the same dtype and shape. It allocates nothing.
func (ti TensorInfo) Equal(o TensorInfo) bool {
	if ti.DType != o.DType || len(ti.Shape) != len(o.Shape) {
		return false
	}
	for i, d := range ti.Shape {
		if o.Shape[i] != d {
			return false
		}
	}
	return true
}

// product returns the product of dims (1 for none). The callers pass dimensions of a shape
// checkElements has bounded, so it cannot overflow.
func product(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

func shapeString(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

func cloneInfo(ti TensorInfo) TensorInfo {
	return TensorInfo{DType: ti.DType, Shape: append([]int64{}, ti.Shape...)}
}

// Tensor is a dense, contiguous, row-major tensor in device memory: its info plus the device
// address of element 0. There is deliberately no strides field: the kernels support only
// contiguous tensors, so a strided view must be made contiguous (copied) before it is passed.
// The memory belongs to the caller; kernels only read inputs and write outputs during the
// stream work that Execute queues.
type Tensor struct {
	TensorInfo
	Ptr cudadrv.DevicePtr
}

// ErrTensorMismatch is wrapped by the error Kernel.Execute returns when its tensors differ from
// what Library.Get was given (count, dtype, shape), or the device address of a tensor that has
// elements is zero or not a multiple of the element size (a misaligned access faults the
// device, and on a real GPU the fault is sticky: it poisons the context of every provider on
// the device). An empty tensor (an op that takes one: Concat) may have any address, zero too:
// it is never read; so may an absent optional input (the zero TensorInfo, see Spec.Inputs).
// Nothing is queued then.
var ErrTensorMismatch = errors.New("kernels: tensor mismatch")

// checkTensors validates tensors against the infos a kernel was built for. It allocates only
// when it fails.
func checkTensors(kernel, role string, got []Tensor, want []TensorInfo) error {
	if len(got) != len(want) {
		return fmt.Errorf("%w: %s: %d %ss, want %d", ErrTensorMismatch, kernel, len(got), role, len(want))
	}
	for i := range got {
		if !got[i].TensorInfo.Equal(want[i]) {
			return fmt.Errorf("%w: %s: %s %d is %s, want %s", ErrTensorMismatch, kernel, role, i, got[i].TensorInfo, want[i])
		}
		if got[i].NumElements() == 0 || absent(want[i]) {
			continue // never read or written: its address does not matter
		}
		if got[i].Ptr == 0 {
			return fmt.Errorf("%w: %s: %s %d has a zero device address", ErrTensorMismatch, kernel, role, i)
		}
		if size := cudadrv.DevicePtr(got[i].DType.Size()); size > 1 && got[i].Ptr%size != 0 {
			return fmt.Errorf("%w: %s: %s %d at device address %#x is not aligned to its %d-byte %s elements",
				ErrTensorMismatch, kernel, role, i, uint64(got[i].Ptr), size, got[i].DType)
		}
	}
	return nil
}
