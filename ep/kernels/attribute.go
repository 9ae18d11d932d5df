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
	}
	return "none"
}

// Attribute is one node attribute: a small, immutable typed value. Make one with IntAttr,
// FloatAttr, IntsAttr or StringAttr; the zero Attribute has no kind and is refused by every op.
type Attribute struct {
	kind AttrKind
	i    int64
	f    float32
	ints []int64
	s    string
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
	}
	return "none()"
}
