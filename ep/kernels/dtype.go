package kernels

import "strconv"

// DType is an element type, numbered as ONNX's TensorProto.DataType.
type DType int32

// The element types the package knows, with their ONNX numbers. Which op accepts which type is
// in the package documentation's support matrix.
const (
	Float32  DType = 1  // TensorProto.FLOAT
	Uint8    DType = 2  // TensorProto.UINT8 (MatMulNBits' packed weights and zero points only)
	Int32    DType = 6  // TensorProto.INT32
	Int64    DType = 7  // TensorProto.INT64
	Bool     DType = 9  // TensorProto.BOOL, one byte per element
	Float16  DType = 10 // TensorProto.FLOAT16
	Float64  DType = 11 // TensorProto.DOUBLE
	BFloat16 DType = 16 // TensorProto.BFLOAT16
)

// Size returns the size of one element in bytes, or 0 for a type the package does not know.
func (d DType) Size() int {
	switch d {
	case Bool, Uint8:
		return 1
	case Float16, BFloat16:
		return 2
	case Float32, Int32:
		return 4
	case Int64, Float64:
		return 8
	}
	return 0
}

// Valid reports whether the package knows d.
func (d DType) Valid() bool { return d.Size() != 0 }

// String returns the type's lower-case name ("float32", "bfloat16", …), or "dtype(N)" for an
// unknown number.
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Uint8:
		return "uint8"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case Float16:
		return "float16"
	case Float64:
		return "float64"
	case BFloat16:
		return "bfloat16"
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// The dtype groups the ops accept.
var (
	floatTypes   = []DType{Float32, Float16, BFloat16}
	intTypes     = []DType{Int32, Int64}
	arithTypes   = []DType{Float32, Float16, BFloat16, Int32, Int64}
	compareTypes = []DType{Float32, Float16, BFloat16, Int32, Int64}
	castTypes    = []DType{Float32, Float16, BFloat16, Int32, Int64, Bool}
	anyTypes     = []DType{Float32, Float16, BFloat16, Float64, Int32, Int64, Bool}
)

// suffix is the kernel-name suffix of d: f32, f16, bf16, i32, i64, b8 (bool).
func (d DType) suffix() string {
	switch d {
	case Float32:
		return "f32"
	case Float16:
		return "f16"
	case BFloat16:
		return "bf16"
	case Int32:
		return "i32"
	case Int64:
		return "i64"
	case Bool:
		return "b8"
	case Uint8:
		return "u8"
	}
	return "f64"
}

// sizeSuffix is the suffix of the kernels that only move elements of d's size: b8, b16, b32,
// b64.
func (d DType) sizeSuffix() string {
	switch d.Size() {
	case 1:
		return "b8"
	case 2:
		return "b16"
	case 4:
		return "b32"
	}
	return "b64"
}
