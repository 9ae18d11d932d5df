package kernels

import (
	"errors"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["Shape"] = builder{inputNames: []string{"data"}, build: buildShape}
	builders["Range"] = builder{inputNames: []string{"start", "limit", "delta"}, build: buildRange}
	builders["ConstantOfShape"] = builder{inputNames: []string{"input"}, build: buildConstantOfShape}
}

// shapeKernel is Shape: its output, the input's dimensions start to end, is known when the
// kernel is built; Execute writes it with cudaep_write8_b64(out, n, v0, …, v7) launches of up
// to eight values each. The input is not read.
type shapeKernel struct {
	kernelBase
	fn     *cudadrv.Function
	values []int64
	args   cudadrv.KernelArgs
}

// buildShape builds Shape (opset 1 on; start and end from opset 15, negative ones counting
// from the end, clamped to the rank). A result of no dimensions (a scalar input, or start at
// or after end) is refused: empty tensors are not supported.
func buildShape(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	allowed := map[string]AttrKind{}
	if s.Opset >= 15 {
		allowed["start"], allowed["end"] = AttrInt, AttrInt
	}
	if err := s.checkAttrs(allowed); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	shape := s.Inputs[0].Shape
	rank := int64(len(shape))
	clamp := func(v int64) int64 {
		if v < 0 {
			v += rank
		}
		return min(max(v, 0), rank)
	}
	start, end := clamp(s.intAttr("start", 0)), clamp(s.intAttr("end", rank))
	if start >= end {
		return nil, s.errorf("the shape %s from %d to %d is empty; empty tensors are not supported", shapeString(shape), start, end)
	}
	values := append([]int64{}, shape[start:end]...)
	k := &shapeKernel{kernelBase: newBase(l, s, TensorInfo{DType: Int64, Shape: []int64{int64(len(values))}}), fn: l.function("cudaep_write8_b64"), values: values}
	return k, nil
}

// writeListBlock is the block of the list-writing kernel: one warp, one value per thread.
var writeListBlock = cudadrv.Dim3{X: 32, Y: 1, Z: 1}

// Execute queues the writes.
func (k *shapeKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	return writeInt64s(k.lib.rt.Stream, k.fn, &k.args, outputs[0].Ptr, k.values)
}

// writeInt64s queues the launches of fn (cudaep_write8_b64) that write values at out.
func writeInt64s(st *cudadrv.Stream, fn *cudadrv.Function, a *cudadrv.KernelArgs, out cudadrv.DevicePtr, values []int64) error {
	one := cudadrv.Dim3{X: 1, Y: 1, Z: 1}
	for at := 0; at < len(values); at += 8 {
		chunk := values[at:min(at+8, len(values))]
		a.Reset()
		a.Ptr(out + cudadrv.DevicePtr(8*at)).U64(uint64(len(chunk)))
		for i := range 8 {
			v := int64(0)
			if i < len(chunk) {
				v = chunk[i]
			}
			a.I64(v)
		}
		if err := st.Launch(fn, one, writeListBlock, 0, a); err != nil {
			return err
		}
	}
	return nil
}

// rangeKernel is Range: cudaep_range_<t>(out, n, start, delta) with float64 start and delta
// for float types and int64 for integer ones.
type rangeKernel struct {
	kernelBase
	fn           *cudadrv.Function
	n            uint64
	float        bool
	fStart, fDel float64
	iStart, iDel int64
	grid         cudadrv.Dim3
	args         cudadrv.KernelArgs
}

// buildRange builds Range (opset 11): start, limit and delta are constant scalars of one type
// (float32, float64, int32 or int64); the output holds start + i·delta for i from 0 while it is
// short of limit, max(ceil((limit − start) / delta), 0) values. A delta of 0 and an empty
// result are refused.
func buildRange(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(11, "Range entered ONNX in opset 11"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(3, 3); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	types := []DType{Float32, Float64, Int32, Int64}
	for i := range 3 {
		if err := s.checkInput(i, types, 0, 1); err != nil {
			return nil, err
		}
		if n := s.Inputs[i].NumElements(); n != 1 {
			return nil, s.errorf("%s has %d elements; it must be a scalar", s.input(i), n)
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		if _, ok := s.Consts[i]; !ok {
			return nil, s.errorf("%s must be a constant (an initializer, given in Spec.Consts) because Range's output shape depends on its values", s.input(i))
		}
	}
	dt := s.Inputs[0].DType
	k := &rangeKernel{kernelBase: kernelBase{}, fn: l.function("cudaep_range_" + dt.suffix())}
	var n int64
	if isFloat(dt) {
		k.float = true
		v := [3]float64{}
		for i := range 3 {
			f, _ := s.constFloats(i)
			v[i] = f[0]
		}
		start, limit, delta := v[0], v[1], v[2]
		if delta == 0 || math.IsNaN(start+limit+delta) || math.IsInf(start+limit+delta, 0) {
			return nil, s.errorf("start %g, limit %g and delta %g: delta must be non-zero and all finite", start, limit, delta)
		}
		count := math.Ceil((limit - start) / delta)
		if count > maxElements {
			return nil, s.errorf("start %g, limit %g and delta %g give %g values, more than 2^40", start, limit, delta, count)
		}
		n = int64(max(count, 0))
		k.fStart, k.fDel = start, delta
	} else {
		start, limit, delta := s.Consts[0].Ints[0], s.Consts[1].Ints[0], s.Consts[2].Ints[0]
		if delta == 0 {
			return nil, s.errorf("delta is 0")
		}
		// ceil((limit − start) / delta) without overflow: the operands are int32 or int64
		// values, whose difference fits a float64 exactly enough to bound, then exact below.
		diff := float64(limit) - float64(start)
		if c := math.Ceil(diff / float64(delta)); c > maxElements {
			return nil, s.errorf("start %d, limit %d and delta %d give %g values, more than 2^40", start, limit, delta, c)
		}
		d := limit - start
		if (d > 0) != (limit > start) {
			return nil, s.errorf("limit %d − start %d overflows int64", limit, start)
		}
		q := d / delta
		if d%delta != 0 && (d < 0) == (delta < 0) {
			q++
		}
		n = max(q, 0)
		k.iStart, k.iDel = start, delta
	}
	if n == 0 {
		return nil, s.errorf("the range is empty; empty tensors are not supported")
	}
	if n > maxElements {
		// The float64 bound above may round a count just past 2^40 down to it.
		return nil, s.errorf("the range has %d values, more than 2^40", n)
	}
	k.kernelBase = newBase(l, s, TensorInfo{DType: dt, Shape: []int64{n}})
	k.n = uint64(n)
	k.grid = linearGrid(k.n)
	return k, nil
}

// Execute queues the range.
func (k *rangeKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).U64(k.n)
	if k.float {
		a.F64(k.fStart).F64(k.fDel)
	} else {
		a.I64(k.iStart).I64(k.iDel)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// fillKernel is ConstantOfShape: cudaep_fill_<size>(out, n, bits) writes the value's bits into
// every element.
type fillKernel struct {
	kernelBase
	fn   *cudadrv.Function
	n    uint64
	bits uint64
	grid cudadrv.Dim3
	args cudadrv.KernelArgs
}

// buildConstantOfShape builds ConstantOfShape (opset 9): an output of the shape held by the
// constant int64 input (an empty shape gives a scalar) filled with the value attribute, a
// one-element tensor attribute (default float32 0) whose dtype the output takes.
func buildConstantOfShape(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(9, "ConstantOfShape entered ONNX in opset 9"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"value": AttrTensor}); err != nil {
		return nil, err
	}
	var shape []int64
	if s.isEmptyVector(0) {
		if dt := s.Inputs[0].DType; dt != Int64 {
			return nil, s.errorf("%s has dtype %s; ConstantOfShape supports int64", s.input(0), dt)
		}
	} else {
		if err := s.checkIntsInput(0, true); err != nil {
			return nil, err
		}
		v, err := s.constInts(0, "ConstantOfShape's output shape is its values")
		if err != nil {
			return nil, err
		}
		for _, d := range v {
			if d <= 0 {
				return nil, s.errorf("%s %v holds %d; dimensions must be positive (empty tensors are not supported)", s.input(0), v, d)
			}
		}
		shape = v
	}
	if err := s.checkOutput(shape); err != nil {
		return nil, err
	}
	dt, bits := Float32, uint64(0)
	if a, ok := s.Attrs["value"]; ok {
		vi, vc := a.Tensor()
		if vi.NumElements() != 1 || len(vi.Shape) > 1 {
			return nil, s.errorf(`attribute "value" is %s; it must hold one element`, vi)
		}
		if !vi.DType.Valid() {
			return nil, s.errorf(`attribute "value" has unknown dtype number %d`, int32(vi.DType))
		}
		var err error
		if bits, err = constBits(vi.DType, vc); err != nil {
			return nil, s.errorf(`attribute "value": %v`, err)
		}
		dt = vi.DType
	}
	k := &fillKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: shape}), fn: l.function("cudaep_fill_" + dt.sizeSuffix()), bits: bits}
	k.n = uint64(product(shape))
	k.grid = linearGrid(k.n)
	return k, nil
}

// constBits returns the bits of a one-element value of dt as the device stores them.
func constBits(dt DType, c Const) (uint64, error) {
	if isFloat(dt) {
		if len(c.Floats) != 1 {
			return 0, errors.New("a floating-point value needs one entry in Const.Floats")
		}
		f := c.Floats[0]
		switch dt {
		case Float32:
			return uint64(math.Float32bits(float32(f))), nil
		case Float16:
			return uint64(cudadrv.Float16Bits(float32(f))), nil
		case BFloat16:
			return uint64(cudadrv.BFloat16Bits(float32(f))), nil
		}
		return math.Float64bits(f), nil
	}
	if len(c.Ints) != 1 {
		return 0, errors.New("an integer or bool value needs one entry in Const.Ints")
	}
	v := c.Ints[0]
	switch dt {
	case Bool:
		if v != 0 {
			return 1, nil
		}
		return 0, nil
	case Int32:
		return uint64(uint32(int32(v))), nil
	}
	return uint64(v), nil
}

// Execute queues the fill.
func (k *fillKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).U64(k.n).U64(k.bits)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}
