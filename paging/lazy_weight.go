package paging

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// DType is a tensor element type, numbered as ONNX's TensorProto.DataType.
type DType int32

// The element types a lazy weight may have.
const (
	Float32      DType = 1
	Uint8        DType = 2
	Int8         DType = 3
	Uint16       DType = 4
	Int16        DType = 5
	Int32        DType = 6
	Int64        DType = 7
	Bool         DType = 9
	Float16      DType = 10
	Float64      DType = 11
	Uint32       DType = 12
	Uint64       DType = 13
	BFloat16     DType = 16
	Float8E4M3FN DType = 17
	Float8E5M2   DType = 19
	Uint4        DType = 21
	Int4         DType = 22
)

var dtypeInfo = map[DType]struct {
	name string
	bits uint64
}{
	Float32: {"float32", 32}, Uint8: {"uint8", 8}, Int8: {"int8", 8}, Uint16: {"uint16", 16},
	Int16: {"int16", 16}, Int32: {"int32", 32}, Int64: {"int64", 64}, Bool: {"bool", 8},
	Float16: {"float16", 16}, Float64: {"float64", 64}, Uint32: {"uint32", 32},
	Uint64: {"uint64", 64}, BFloat16: {"bfloat16", 16}, Float8E4M3FN: {"float8e4m3fn", 8},
	Float8E5M2: {"float8e5m2", 8}, Uint4: {"uint4", 4}, Int4: {"int4", 4},
}

// Bits is the element size in bits, or 0 for a type this package does not know.
func (d DType) Bits() uint64 { return dtypeInfo[d].bits }

// String names the type, e.g. "float16".
func (d DType) String() string {
	if i, ok := dtypeInfo[d]; ok {
		return i.name
	}
	return fmt.Sprintf("DType(%d)", int32(d))
}

// Boundary is the kind of operator that consumes a weight, which decides whether the weight
// may be paged through the double buffer and how its byte count is defined.
type Boundary int

// The boundaries.
const (
	// BoundaryMatMul is a dense MatMul/Gemm operand, sized by its element count. It is
	// eligible for paging: a prefill reads each layer's dense weights in one pass, which is
	// what streaming them one layer ahead of compute serves.
	BoundaryMatMul Boundary = iota + 1
	// BoundaryGather is an embedding table read by Gather at data-dependent rows for every
	// token; not eligible for paging (it stays resident).
	BoundaryGather
	// BoundaryBlockQuantizedMoe is a whole layer of block-quantized mixture-of-experts weights,
	// consumed as one opaque device image: eligible for paging, packed (it may declare its own
	// byte count).
	BoundaryBlockQuantizedMoe
	// BoundaryBlockQuantizedMatMul is a block-quantized dense weight consumed as one packed
	// image: eligible for paging, packed.
	BoundaryBlockQuantizedMatMul
)

// String names the boundary as the operator it stands for.
func (b Boundary) String() string {
	switch b {
	case BoundaryMatMul:
		return "MatMul"
	case BoundaryGather:
		return "Gather"
	case BoundaryBlockQuantizedMoe:
		return "BlockQuantizedMoe"
	case BoundaryBlockQuantizedMatMul:
		return "BlockQuantizedMatMul"
	}
	return fmt.Sprintf("Boundary(%d)", int(b))
}

// Pageable reports whether weights at this boundary may be streamed through the double buffer.
func (b Boundary) Pageable() bool {
	return b == BoundaryMatMul || b == BoundaryBlockQuantizedMoe || b == BoundaryBlockQuantizedMatMul
}

// Packed reports whether the boundary's format declares its own byte count, which then need
// not equal element count × element size (block scales, packed nibbles, padding).
func (b Boundary) Packed() bool {
	return b == BoundaryBlockQuantizedMoe || b == BoundaryBlockQuantizedMatMul
}

func (b Boundary) valid() bool { return b >= BoundaryMatMul && b <= BoundaryBlockQuantizedMatMul }

// WeightSpec describes a lazy weight for NewLazyWeight.
type WeightSpec struct {
	Boundary Boundary // the consuming operator kind
	DType    DType    // the element type
	// Shape is the logical shape; an empty shape is a scalar.
	Shape []int64
	// ByteCount is the image size a packed boundary declares; leave it 0 to size the image by
	// element count × element size. Dense boundaries must leave it 0.
	ByteCount uint64
	// Regions are the external-data ranges whose concatenation, in order, is the image.
	Regions []Region
}

// LazyWeight is a weight that lives in memory-mapped external-data files until it is paged:
// its type, shape and boundary, and the ordered regions whose concatenation is its device
// image. It is immutable and safe for concurrent use.
type LazyWeight struct {
	boundary Boundary
	dtype    DType
	shape    []int64
	regions  []Region
	bytes    uint64
}

// ErrInvalidWeight matches every error NewLazyWeight returns.
var ErrInvalidWeight = errors.New("paging: invalid lazy weight")

// NewLazyWeight validates spec and returns the weight. The spec's slices are copied.
//
// # Errors
//
// An error matching ErrInvalidWeight and naming the problem when the boundary or dtype is
// unknown, a dimension is negative, there are no regions, a region is empty or its
// offset+length overflows, or the image size disagrees with the shape: the regions' total must
// equal element count × element size (rounded up to whole bytes for 4-bit types), unless the
// boundary is packed and declares ByteCount, which must then equal the regions' total.
func NewLazyWeight(spec WeightSpec) (*LazyWeight, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidWeight, fmt.Sprintf(format, args...))
	}
	if !spec.Boundary.valid() {
		return nil, bad("unknown boundary %d", int(spec.Boundary))
	}
	if spec.DType.Bits() == 0 {
		return nil, bad("unsupported dtype %s", spec.DType)
	}
	if len(spec.Regions) == 0 {
		return nil, bad("%s weight has no regions", spec.Boundary)
	}
	var total uint64
	for i, r := range spec.Regions {
		if r.Len == 0 {
			return nil, bad("region %d (mapping %d, offset %d) is empty", i, r.Mapping, r.Offset)
		}
		if _, ok := r.End(); !ok {
			return nil, bad("region %d (mapping %d): offset %d + length %d overflows", i, r.Mapping, r.Offset, r.Len)
		}
		var carry uint64
		total, carry = bits.Add64(total, r.Len, 0)
		if carry != 0 {
			return nil, bad("regions total more than 2^64 bytes")
		}
	}
	elems := uint64(1)
	for i, d := range spec.Shape {
		if d < 0 {
			return nil, bad("dimension %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 {
			return nil, bad("shape %v has more than 2^64 elements", spec.Shape)
		}
		elems = lo
	}
	switch {
	case spec.ByteCount != 0 && !spec.Boundary.Packed():
		return nil, bad("%s is not a packed format and cannot declare a byte count (%d)", spec.Boundary, spec.ByteCount)
	case spec.ByteCount != 0:
		if spec.ByteCount != total {
			return nil, bad("%s declares %d bytes but its regions hold %d", spec.Boundary, spec.ByteCount, total)
		}
	default:
		hi, bitCount := bits.Mul64(elems, spec.DType.Bits())
		if hi != 0 {
			return nil, bad("shape %v of %s overflows", spec.Shape, spec.DType)
		}
		want := bitCount/8 + min(bitCount%8, 1)
		if want != total {
			return nil, bad("shape %v of %s is %d bytes but its regions hold %d", spec.Shape, spec.DType, want, total)
		}
	}
	return &LazyWeight{
		boundary: spec.Boundary,
		dtype:    spec.DType,
		shape:    append([]int64{}, spec.Shape...),
		regions:  append([]Region(nil), spec.Regions...),
		bytes:    total,
	}, nil
}

// Boundary returns the consuming operator kind.
func (w *LazyWeight) Boundary() Boundary { return w.boundary }

// DType returns the element type.
func (w *LazyWeight) DType() DType { return w.dtype }

// Shape returns a copy of the shape.
func (w *LazyWeight) Shape() []int64 { return append([]int64{}, w.shape...) }

// Regions returns a copy of the regions, in image order.
func (w *LazyWeight) Regions() []Region { return append([]Region(nil), w.regions...) }

// Bytes is the size of the device image: the regions' total length.
func (w *LazyWeight) Bytes() uint64 { return w.bytes }

// Pageable reports whether the weight may be streamed through the double buffer (its
// boundary's property, never a model name).
func (w *LazyWeight) Pageable() bool { return w.boundary.Pageable() }

// AppendImage appends the weight's device image — its regions' bytes concatenated in order —
// to dst and returns the extended slice. It is the reference for what a paged slot must hold.
func (w *LazyWeight) AppendImage(dst []byte, src RegionSource) ([]byte, error) {
	for _, r := range w.regions {
		b, err := src.RegionBytes(r)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b...)
	}
	return dst, nil
}

// String describes the weight, e.g. "BlockQuantizedMoe uint8[4194304] (4194304 bytes in 2 regions)".
func (w *LazyWeight) String() string {
	dims := make([]string, len(w.shape))
	for i, d := range w.shape {
		dims[i] = fmt.Sprint(d)
	}
	return fmt.Sprintf("%s %s[%s] (%d bytes in %d regions)", w.boundary, w.dtype, strings.Join(dims, ","), w.bytes, len(w.regions))
}
