package kernels

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Spec describes one operator instance to Library.Get: the node's name, the ONNX op type
// (default domain; an op of another domain is named "<domain>.<op type>", e.g.
// "com.microsoft.FastGelu"), the opset
// the model imports for the op's domain, the input tensors' dtypes and shapes in ONNX input order, the
// node's attributes by name, and the values of the inputs that are constant. Get copies what
// it keeps, so the caller may reuse a Spec.
type Spec struct {
	// Name is the ONNX node's name (optional): every error Get returns for the spec names it,
	// and so does a DataFault of the kernel.
	Name  string
	Op    string
	Opset int
	// Inputs are the input tensors in ONNX order. An optional input the node leaves out before
	// one it gives (ONNX's empty input name) is the zero TensorInfo, and the zero Tensor at
	// Execute; only the inputs the support matrix calls optional may be absent so
	// (MatMulNBits' zero_points and g_idx), and trailing ones the node leaves out are simply
	// not listed.
	Inputs []TensorInfo
	Attrs  map[string]Attribute
	// Consts holds, by input index, the values of inputs known when the kernel is built (ONNX
	// initializers). Ops whose output shape depends on an input's values (Reshape's shape,
	// Slice's starts, ends, axes and steps, Expand's shape, Split's split, the axes input of
	// the Reduce ops, Squeeze and Unsqueeze, Range, ConstantOfShape, Trilu's k, Tile's
	// repeats) read that input here, and Get refuses them, naming the input, when it is
	// absent. Other ops, and other inputs, ignore their entries. Execute still receives every
	// input as a tensor, and a constant one must hold the values given here.
	//
	// Get checks every entry: the index names an input, and the Const holds one value per
	// element of that input, in Ints for an integer (uint8, int32, int64) or bool input and in
	// Floats for a floating-point one (see Const).
	Consts map[int]Const
	// NumOutputs is the number of outputs the node declares, for the ops whose output count
	// nothing else gives (Split without a split input or num_outputs attribute); 0 means
	// unknown, and such an op is refused.
	NumOutputs int
}

// Const is the value of a constant input, row-major, one entry per element: integer and bool
// inputs (uint8, int32, int64, bool as 0 or 1) fill Ints, floating-point inputs (float32,
// float16, bfloat16, float64) fill Floats, converted exactly to float64. The other field
// stays nil. Make one with IntsConst or FloatsConst.
type Const struct {
	Ints   []int64
	Floats []float64
}

// IntsConst returns the Const of an integer or bool input holding a copy of v.
func IntsConst(v ...int64) Const { return Const{Ints: append([]int64{}, v...)} }

// FloatsConst returns the Const of a floating-point input holding a copy of v.
func FloatsConst(v ...float64) Const { return Const{Floats: append([]float64{}, v...)} }

// absent reports whether in is an optional input the node leaves out: the zero TensorInfo.
func absent(in TensorInfo) bool { return in.DType == 0 && len(in.Shape) == 0 }

// isFloat reports whether d is a floating-point type.
func isFloat(d DType) bool { return d == Float32 || d == Float16 || d == BFloat16 || d == Float64 }

// checkConsts refuses a Consts entry that names no input or does not match its input's dtype
// and element count.
func (s opSpec) checkConsts() error {
	for i, c := range s.Consts {
		if i < 0 || i >= len(s.Inputs) {
			return s.errorf("Consts has an entry for input %d, but the op has %d inputs", i, len(s.Inputs))
		}
		in := s.Inputs[i]
		if absent(in) {
			return s.errorf("Consts has an entry for %s, which is absent", s.input(i))
		}
		for _, d := range in.Shape {
			if d < 0 {
				return s.errorf("%s is constant but has the dynamic shape %s", s.input(i), shapeString(in.Shape))
			}
		}
		n := in.NumElements()
		if n < 0 {
			return s.errorf("%s is constant but its shape %s has an element count that overflows int64", s.input(i), shapeString(in.Shape))
		}
		vals, field, other := len(c.Ints), "Ints", len(c.Floats)
		if isFloat(in.DType) {
			vals, field, other = len(c.Floats), "Floats", len(c.Ints)
		}
		if other != 0 {
			return s.errorf("the constant value of %s (%s) must be in Const.%s", s.input(i), in, field)
		}
		if int64(vals) != n {
			return s.errorf("the constant value of %s (%s) has %d values in Const.%s, want %d", s.input(i), in, vals, field, n)
		}
	}
	return nil
}

// constInts returns the values of integer input i, which the op needs at Get (why says what
// for); an input that is not in Consts is refused, naming it.
func (s opSpec) constInts(i int, why string) ([]int64, error) {
	c, ok := s.Consts[i]
	if !ok {
		return nil, s.errorf("%s must be a constant (an initializer, given in Spec.Consts) because %s", s.input(i), why)
	}
	if c.Ints == nil && s.Inputs[i].NumElements() > 0 {
		return nil, s.errorf("%s has dtype %s; integer values are needed", s.input(i), s.Inputs[i].DType)
	}
	return c.Ints, nil
}

// constFloats returns the values of input i converted to float64 (integer inputs too), or
// false when it is not constant.
func (s opSpec) constFloats(i int) ([]float64, bool) {
	c, ok := s.Consts[i]
	if !ok {
		return nil, false
	}
	if c.Floats != nil {
		return c.Floats, true
	}
	out := make([]float64, len(c.Ints))
	for j, v := range c.Ints {
		out[j] = float64(v)
	}
	return out, true
}

// ErrUnsupported is wrapped by every error Library.Get returns for an op, opset, dtype, shape
// or attribute combination the package cannot run. The message names the op, the offending
// input or attribute and what is supported.
var ErrUnsupported = errors.New("kernels: unsupported")

// opSpec wraps a Spec with the helpers the op builders share to validate it and to report
// refusals in one format.
type opSpec struct {
	*Spec
	inputNames []string
	id         uint32 // the kernel's FaultID, given by Get (0 for a kernel built inside another's builder)
}

// errorf returns an ErrUnsupported error prefixed with the node's name (when the spec has one),
// the op and the opset.
func (s opSpec) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s%s (opset %d): %s", ErrUnsupported, nodePrefix(s.Name), s.Op, s.Opset, fmt.Sprintf(format, args...))
}

// nodePrefix is "node 'name': " for a named node, "" otherwise.
func nodePrefix(name string) string {
	if name == "" {
		return ""
	}
	return "node '" + name + "': "
}

// input names input i for messages: "input 1 (B)".
func (s opSpec) input(i int) string {
	if i < len(s.inputNames) {
		return fmt.Sprintf("input %d (%s)", i, s.inputNames[i])
	}
	return fmt.Sprintf("input %d", i)
}

// checkOpset refuses opsets below min.
func (s opSpec) checkOpset(min int, why string) error {
	if s.Opset < min {
		return s.errorf("opset %d is not supported: %s needs opset >= %d (%s)", s.Opset, s.Op, min, why)
	}
	return nil
}

// checkInputCount refuses an input count outside [min, max].
func (s opSpec) checkInputCount(min, max int) error {
	n := len(s.Inputs)
	if n >= min && n <= max {
		return nil
	}
	want := fmt.Sprint(min)
	if max != min {
		want = fmt.Sprintf("%d or %d", min, max)
	}
	return s.errorf("got %d inputs, want %s (%s)", n, want, strings.Join(s.inputNames[:max], ", "))
}

// checkInput refuses input i unless its dtype is one of dtypes and its shape is dense, has no
// zero or negative dimension and a rank in [minRank, maxRank].
func (s opSpec) checkInput(i int, dtypes []DType, minRank, maxRank int) error {
	in := s.Inputs[i]
	if !slices.Contains(dtypes, in.DType) {
		names := make([]string, len(dtypes))
		for j, d := range dtypes {
			names[j] = d.String()
		}
		return s.errorf("%s has dtype %s; %s supports %s", s.input(i), in.DType, s.Op, strings.Join(names, ", "))
	}
	for _, d := range in.Shape {
		if d <= 0 {
			return s.errorf("%s has shape %s; every dimension must be positive (dynamic and empty tensors are not supported)", s.input(i), shapeString(in.Shape))
		}
	}
	if err := s.checkElements(s.input(i), in.Shape); err != nil {
		return err
	}
	if r := len(in.Shape); r < minRank || r > maxRank {
		return s.errorf("%s has rank %d (shape %s); %s supports ranks %d to %d", s.input(i), r, shapeString(in.Shape), s.Op, minRank, maxRank)
	}
	return nil
}

// maxElements bounds the element count of any tensor (2^40, beyond any device's memory), so
// that sizes, offsets and byte counts stay far from int64 overflow.
const maxElements = 1 << 40

// checkElements refuses a shape with more than maxElements elements. Its dimensions should be
// positive (the callers have checked them); one that is not is refused too, naming it, so that
// a wrapped-around or empty extent never reaches a division.
func (s opSpec) checkElements(what string, shape []int64) error {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return s.errorf("%s has shape %s; its dimension %d is not positive (empty and dynamic tensors are not supported)", what, shapeString(shape), d)
		}
		if d > maxElements || n > maxElements/d {
			return s.errorf("%s has shape %s, more than 2^40 elements", what, shapeString(shape))
		}
		n *= d
	}
	return nil
}

// mulInt64 returns a·b and whether it fits int64 (false: the product overflows).
func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if (c < 0) != ((a < 0) != (b < 0)) || c/b != a {
		return c, false
	}
	return c, true
}

// addInt64 returns a+b and whether it fits int64 (false: the sum overflows).
func addInt64(a, b int64) (int64, bool) {
	c := a + b
	if (a > 0 && b > 0 && c < 0) || (a < 0 && b < 0 && c >= 0) {
		return c, false
	}
	return c, true
}

// checkOutput refuses an inferred output shape with more than maxElements elements.
func (s opSpec) checkOutput(shape []int64) error {
	return s.checkElements("the output", shape)
}

// checkAttrs refuses attributes not in allowed and attributes of the wrong kind.
func (s opSpec) checkAttrs(allowed map[string]AttrKind) error {
	for name, a := range s.Attrs {
		kind, ok := allowed[name]
		if !ok {
			names := make([]string, 0, len(allowed))
			for n := range allowed {
				names = append(names, n)
			}
			slices.Sort(names)
			known := "none"
			if len(names) > 0 {
				known = strings.Join(names, ", ")
			}
			return s.errorf("attribute %q is not supported; supported attributes: %s", name, known)
		}
		if a.Kind() != kind {
			return s.errorf("attribute %q is %s, want a %s", name, a, kind)
		}
	}
	return nil
}

// intAttr returns attribute name or def when absent; checkAttrs has validated its kind.
func (s opSpec) intAttr(name string, def int64) int64 {
	if a, ok := s.Attrs[name]; ok {
		return a.Int()
	}
	return def
}

// floatAttr returns attribute name or def when absent.
func (s opSpec) floatAttr(name string, def float32) float32 {
	if a, ok := s.Attrs[name]; ok {
		return a.Float()
	}
	return def
}

// stringAttr returns attribute name or def when absent.
func (s opSpec) stringAttr(name string, def string) string {
	if a, ok := s.Attrs[name]; ok {
		return a.Str()
	}
	return def
}
