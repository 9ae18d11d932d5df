package kernels

import (
	"strconv"
	"strings"
)

// AttrKind is the type of an Attribute's value.
type AttrKind uint8

// The attribute kinds, as ONNX's AttributeProto names them.
const (
	AttrInt    AttrKind = iota + 1 // INT
	AttrFloat                      // FLOAT
	AttrInts                       // INTS
	AttrString                     // STRING
	AttrTensor                     // TENSOR (a constant tensor, e.g. ConstantOfShape's value)
)

// String returns the kind's ONNX name ("int", "float", "ints", "string").
func (k AttrKind) String() string {
	switch k {
	case AttrInt:
		return "int"
	case AttrFloat:
		return "float"
	case AttrInts:
		return "ints"
	case AttrString:
		return "string"
	case AttrTensor:
		return "tensor"
	}
	return "none"
}

// Attribute is one node attribute: a small, immutable typed value. Make one with IntAttr,
// FloatAttr, IntsAttr, StringAttr or TensorAttr; the zero Attribute has no kind and is refused
// by every op.
type Attribute struct {
	kind AttrKind
	i    int64
	f    float32
	ints []int64
	s    string
	t    TensorInfo
	c    Const
}

// IntAttr returns an int attribute.
func IntAttr(v int64) Attribute { return Attribute{kind: AttrInt, i: v} }

// FloatAttr returns a float attribute.
func FloatAttr(v float32) Attribute { return Attribute{kind: AttrFloat, f: v} }

// IntsAttr returns an ints attribute holding a copy of v.
func IntsAttr(v ...int64) Attribute {
	return Attribute{kind: AttrInts, ints: append([]int64{}, v...)}
}

// StringAttr returns a string attribute.
func StringAttr(v string) Attribute { return Attribute{kind: AttrString, s: v} }

// TensorAttr returns a tensor attribute of info holding a copy of value, one entry per element
// as the Const of an input of info would hold it (Ints for integer and bool tensors, Floats for
// floating-point ones). The ops that take one check it.
func TensorAttr(info TensorInfo, value Const) Attribute {
	return Attribute{kind: AttrTensor, t: cloneInfo(info), c: cloneConst(value)}
}

// cloneConst returns a deep copy of c.
func cloneConst(c Const) Const {
	var out Const
	if c.Ints != nil {
		out.Ints = append([]int64{}, c.Ints...)
	}
	if c.Floats != nil {
		out.Floats = append([]float64{}, c.Floats...)
	}
	return out
}

// Kind returns the value's type.
func (a Attribute) Kind() AttrKind { return a.kind }

// Int returns the value of an int attribute, 0 for other kinds.
func (a Attribute) Int() int64 { return a.i }

// Float returns the value of a float attribute, 0 for other kinds.
func (a Attribute) Float() float32 { return a.f }

// Ints returns a copy of the value of an ints attribute, nil for other kinds.
func (a Attribute) Ints() []int64 {
	if a.kind != AttrInts {
		return nil
	}
	return append([]int64{}, a.ints...)
}

// Str returns the value of a string attribute, "" for other kinds.
func (a Attribute) Str() string { return a.s }

// Tensor returns a copy of the info and value of a tensor attribute; other kinds give zero
// values.
func (a Attribute) Tensor() (TensorInfo, Const) {
	if a.kind != AttrTensor {
		return TensorInfo{}, Const{}
	}
	return cloneInfo(a.t), cloneConst(a.c)
}

// String formats the attribute as kind(value), e.g. int(1) or string("tanh").
func (a Attribute) String() string {
	switch a.kind {
	case AttrInt:
		return "int(" + strconv.FormatInt(a.i, 10) + ")"
	case AttrFloat:
		return "float(" + strconv.FormatFloat(float64(a.f), 'g', -1, 32) + ")"
	case AttrInts:
		parts := make([]string, len(a.ints))
		for i, v := range a.ints {
			parts[i] = strconv.FormatInt(v, 10)
		}
		return "ints(" + strings.Join(parts, ",") + ")"
	case AttrString:
		return "string(" + strconv.Quote(a.s) + ")"
	case AttrTensor:
		return "tensor(" + a.t.String() + ")"
	}
	return "none()"
}
