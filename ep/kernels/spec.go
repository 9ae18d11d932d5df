package kernels

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Spec describes one operator instance to Library.Get: the ONNX op type (default domain), the
// opset the model imports, the input tensors' dtypes and shapes in ONNX input order, and the
// node's attributes by name. Get copies what it keeps, so the caller may reuse a Spec.
type Spec struct {
	Op     string
	Opset  int
	Inputs []TensorInfo
	Attrs  map[string]Attribute
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
}

// errorf returns an ErrUnsupported error prefixed with the op and opset.
func (s opSpec) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s (opset %d): %s", ErrUnsupported, s.Op, s.Opset, fmt.Sprintf(format, args...))
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

// checkElements refuses a shape (of positive dimensions) with more than maxElements elements.
func (s opSpec) checkElements(what string, shape []int64) error {
	n := int64(1)
	for _, d := range shape {
		if d > maxElements || n > maxElements/d {
			return s.errorf("%s has shape %s, more than 2^40 elements", what, shapeString(shape))
		}
		n *= d
	}
	return nil
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
