package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

// simTensor is a typed view of n elements of device memory in a simulated kernel, read and
// written as float64 (float types) or int64 (integer and bool types) the way the CUDA kernels
// convert: float16 and bfloat16 through float32, stores rounded to float32 first and then to
// the 16-bit type (as the kernels compute in float32 and convert on store).
type simTensor struct {
	dt   DType
	f32  []float32
	f64  []float64
	u16  []uint16
	i32  []int32
	i64  []int64
	b8   []byte
	size int
}

// simView returns the view of n elements of dt at p.
func simView(l *cudadrv.KernelLaunch, p cudadrv.DevicePtr, dt DType, n int) (simTensor, error) {
	t := simTensor{dt: dt, size: n}
	var err error
	switch dt {
	case Float32:
		t.f32, err = l.Float32s(p, n)
	case Float64:
		t.f64, err = l.Float64s(p, n)
	case Float16, BFloat16:
		t.u16, err = l.Uint16s(p, n)
	case Int32:
		t.i32, err = l.Int32s(p, n)
	case Int64:
		t.i64, err = l.Int64s(p, n)
	case Bool:
		t.b8, err = l.Bytes(p, uint64(n))
	default:
		err = fmt.Errorf("%s: no view of dtype %s", l.Name, dt)
	}
	return t, err
}

// float returns element i as a float64.
func (t simTensor) float(i int64) float64 {
	switch t.dt {
	case Float32:
		return float64(t.f32[i])
	case Float64:
		return t.f64[i]
	case Float16:
		return float64(cudadrv.Float16Value(t.u16[i]))
	case BFloat16:
		return float64(cudadrv.BFloat16Value(t.u16[i]))
	case Int32:
		return float64(t.i32[i])
	case Int64:
		return float64(t.i64[i])
	}
	if t.b8[i] != 0 {
		return 1
	}
	return 0
}

// int returns element i as an int64 (a float truncated toward zero, saturating, NaN 0, as
// cvt.rzi does).
func (t simTensor) int(i int64) int64 {
	switch t.dt {
	case Int32:
		return int64(t.i32[i])
	case Int64:
		return t.i64[i]
	case Bool:
		return int64(t.b8[i])
	}
	return truncInt64(t.float(i))
}

// truncInt64 is a float's value truncated toward zero, saturated to int64, NaN 0.
func truncInt64(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= 9.223372036854775807e18:
		return math.MaxInt64
	case v <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(v)
}

// nonzero reports whether element i is not zero (NaN is not zero).
func (t simTensor) nonzero(i int64) bool {
	switch t.dt {
	case Int32, Int64, Bool:
		return t.int(i) != 0
	}
	return t.float(i) != 0
}

// setFloat stores v rounded as the kernels round it (to float32, then to the 16-bit type).
func (t simTensor) setFloat(i int64, v float64) {
	f := float32(v)
	switch t.dt {
	case Float32:
		t.f32[i] = f
	case Float64:
		t.f64[i] = v
	case Float16:
		t.u16[i] = cudadrv.Float16Bits(f)
	case BFloat16:
		t.u16[i] = cudadrv.BFloat16Bits(f)
	default:
		panic("kernels: setFloat on an integer view")
	}
}

// setInt stores an integer into an integer or bool view (int32 keeps the low 32 bits).
func (t simTensor) setInt(i int64, v int64) {
	switch t.dt {
	case Int32:
		t.i32[i] = int32(v)
	case Int64:
		t.i64[i] = v
	case Bool:
		t.b8[i] = 0
		if v != 0 {
			t.b8[i] = 1
		}
	default:
		panic("kernels: setInt on a float view")
	}
}

// copyElem copies element j of src into element i of t (same dtype): the bits move unchanged.
func (t simTensor) copyElem(i int64, src simTensor, j int64) {
	switch t.dt {
	case Float32:
		t.f32[i] = src.f32[j]
	case Float64:
		t.f64[i] = src.f64[j]
	case Float16, BFloat16:
		t.u16[i] = src.u16[j]
	case Int32:
		t.i32[i] = src.i32[j]
	case Int64:
		t.i64[i] = src.i64[j]
	default:
		t.b8[i] = src.b8[j]
	}
}

// sizeType is a dtype of each element size, for the kernels that only move elements.
func sizeType(suffix string) DType {
	switch suffix {
	case "b8":
		return Bool
	case "b16":
		return Float16
	case "b32":
		return Int32
	}
	return Int64
}

// typeOfSuffix is the dtype of a kernel-name suffix.
func typeOfSuffix(suffix string) DType {
	for _, d := range castTypes {
		if d.suffix() == suffix {
			return d
		}
	}
	return Float64
}
