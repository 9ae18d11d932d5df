package kernels

import (
	"fmt"
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	var e []string
	for _, u := range unitSuffixes {
		e = append(e, "cudaep_copy2d_"+u)
		for _, it := range intTypes {
			e = append(e, "cudaep_gather_"+u+"_"+it.suffix())
		}
	}
	for _, size := range []string{"b8", "b16", "b32", "b64"} {
		e = append(e, "cudaep_trilu_"+size, "cudaep_fill_"+size, "cudaep_transpose_"+size)
	}
	e = append(e, "cudaep_write8_b64", "cudaep_range_f32", "cudaep_range_f64", "cudaep_range_i32", "cudaep_range_i64")
	for _, size := range []string{"b8", "b16", "b32", "b64"} {
		e = append(e, "cudaep_transpose2d_tile64_"+size)
	}
	e = append(e, "cudaep_transpose2d_pair8_b16", "cudaep_transpose2d_pair4_b32")
	modules = append(modules, ptxModule{"ptx/datamove.ptx", e})
	builders["Concat"] = builder{inputNames: []string{"inputs"}, build: buildConcat}
	builders["Split"] = builder{inputNames: []string{"input", "split"}, build: buildSplit}
}

// unitSuffixes name the copy kernels by the bytes they move per element: 1, 2, 4, 8 and 16.
var unitSuffixes = []string{"b8", "b16", "b32", "b64", "b128"}

// unitFor returns the widest unit (16, 8, 4, 2 or 1 bytes) that divides every value, and
// its index in unitSuffixes.
func unitFor(values ...uint64) (uint64, int) {
	for i := len(unitSuffixes) - 1; i > 0; i-- {
		u := uint64(1) << i
		ok := true
		for _, v := range values {
			if v%u != 0 {
				ok = false
				break
			}
		}
		if ok {
			return u, i
		}
	}
	return 1, 0
}

// copyPiece is one pitched 2-D copy: rows rows of colBytes bytes from input src at srcOff,
// rows srcPitch bytes apart, to output dst at dstOff, rows dstPitch bytes apart.
type copyPiece struct {
	src, dst                           int
	srcOff, dstOff                     uint64
	rows, colBytes, srcPitch, dstPitch uint64
	unit                               uint64 // widest unit the sizes allow; Execute narrows it for the addresses
}

// piecesKernel runs a list of pitched copies with cudaep_copy2d_<unit>(dst, src, rows, cols,
// dstPitch, srcPitch), each in the widest unit that its sizes and addresses allow: Concat (one
// piece per input) and Split (one per output).
type piecesKernel struct {
	kernelBase
	pieces []copyPiece
	fns    [5]*cudadrv.Function
	args   cudadrv.KernelArgs
}

func newPieces(l *Library, s opSpec, pieces []copyPiece, outs ...TensorInfo) *piecesKernel {
	k := &piecesKernel{kernelBase: newBase(l, s, outs...), pieces: pieces}
	for i, u := range unitSuffixes {
		k.fns[i] = l.function("cudaep_copy2d_" + u)
	}
	for i := range k.pieces {
		p := &k.pieces[i]
		p.unit, _ = unitFor(p.colBytes, p.srcPitch, p.dstPitch, p.srcOff, p.dstOff)
	}
	return k
}

// concatAxis reads and normalizes the axis attribute of Concat and Split against rank (def
// when absent, nil def: required).
func (s opSpec) concatAxis(rank int, def *int64) (int, error) {
	a, ok := s.Attrs["axis"]
	if !ok {
		if def == nil {
			return 0, s.errorf(`attribute "axis" is required`)
		}
		a = IntAttr(*def)
	}
	axis := a.Int()
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, s.errorf(`attribute "axis" is %d; for rank %d it must be in [%d, %d]`, axis, rank, -rank, rank-1)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// buildConcat builds Concat (any opset; axis required from opset 4, default 1 before): the
// inputs, of one dtype and rank and equal dimensions but along axis, joined along axis. An input
// may be empty along axis (a key/value cache before its first step): it adds nothing. The
// output must not be empty.
func buildConcat(l *Library, s opSpec) (Kernel, error) {
	if len(s.Inputs) == 0 {
		return nil, s.errorf("Concat needs at least one input")
	}
	if err := s.checkAttrs(map[string]AttrKind{"axis": AttrInt}); err != nil {
		return nil, err
	}
	first := s.Inputs[0]
	rank := len(first.Shape)
	if rank == 0 {
		return nil, s.errorf("%s is a scalar; Concat joins tensors of rank 1 or more", s.input(0))
	}
	var def *int64
	if s.Opset < 4 {
		one := int64(1)
		def = &one
	}
	axis, err := s.concatAxis(rank, def)
	if err != nil {
		return nil, err
	}
	out := append([]int64{}, first.Shape...)
	out[axis] = 0
	for i, in := range s.Inputs {
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		if !slices.Contains(anyTypes, in.DType) {
			return nil, s.errorf("%s has dtype %s, which Concat does not support", s.input(i), in.DType)
		}
		if len(in.Shape) != rank {
			return nil, s.errorf("%s has rank %d; every input must have rank %d like input 0", s.input(i), len(in.Shape), rank)
		}
		for d, n := range in.Shape {
			if n < 0 || (n == 0 && d != axis) {
				return nil, s.errorf("%s has shape %s; only the concatenation axis %d may be 0 (dynamic and other empty tensors are not supported)", s.input(i), shapeString(in.Shape), axis)
			}
			if d != axis && n != first.Shape[d] {
				return nil, s.errorf("%s has shape %s and input 0 has %s; they may differ only along axis %d", s.input(i), shapeString(in.Shape), shapeString(first.Shape), axis)
			}
		}
		if in.Shape[axis] > 0 {
			if err := s.checkElements(s.input(i), in.Shape); err != nil {
				return nil, err
			}
		}
		// Each extent is at most 2^40 and there are fewer than 2^23 inputs before the sum
		// passes 2^63; checkOutput refuses a sum past 2^40 below, so stop there.
		out[axis] += in.Shape[axis]
		if out[axis] > maxElements {
			return nil, s.errorf("the inputs up to %s add up to %d along axis %d: the output would have more than 2^40 elements", s.input(i), out[axis], axis)
		}
	}
	if out[axis] == 0 {
		return nil, s.errorf("every input is empty along axis %d; empty outputs are not supported", axis)
	}
	if err := s.checkOutput(out); err != nil {
		return nil, err
	}
	size := uint64(first.DType.Size())
	outer, inner := uint64(product(out[:axis])), uint64(product(out[axis+1:]))*size
	var pieces []copyPiece
	at := uint64(0)
	for i, in := range s.Inputs {
		cols := uint64(in.Shape[axis]) * inner
		if cols == 0 {
			continue // an input empty along axis: nothing to copy
		}
		pieces = append(pieces, copyPiece{src: i, dst: 0, dstOff: at, rows: outer, colBytes: cols, srcPitch: cols, dstPitch: uint64(out[axis]) * inner})
		at += cols
	}
	return newPieces(l, s, pieces, TensorInfo{DType: first.DType, Shape: out}), nil
}

// maxSplitOutputs bounds the outputs of one Split (each a tensor the host binds), so that a
// count from a corrupt model cannot make Get build an unbounded list of pieces.
const maxSplitOutputs = 1 << 16

// buildSplit builds Split: the input cut along axis (default 0) into pieces of the sizes in
// split (the attribute before opset 13, a constant input from 13), or into NumOutputs (or,
// from opset 18, num_outputs) pieces of equal size, the last one smaller when the dimension
// does not divide.
func buildSplit(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 2); err != nil {
		return nil, err
	}
	allowed := map[string]AttrKind{"axis": AttrInt}
	switch {
	case s.Opset < 13:
		allowed["split"] = AttrInts
	case s.Opset >= 18:
		allowed["num_outputs"] = AttrInt
	}
	if err := s.checkAttrs(allowed); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 1, anyRank); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	zero := int64(0)
	axis, err := s.concatAxis(len(in.Shape), &zero)
	if err != nil {
		return nil, err
	}
	dim := in.Shape[axis]
	var split []int64
	switch {
	case s.Opset < 13:
		if err := s.checkInputCount(1, 1); err != nil {
			return nil, err
		}
		if a, ok := s.Attrs["split"]; ok {
			split = a.Ints()
		}
	case len(s.Inputs) == 2:
		if err := s.checkIntsInput(1, true); err != nil {
			return nil, err
		}
		if split, err = s.constInts(1, "Split's output shapes are its values"); err != nil {
			return nil, err
		}
	}
	if split == nil {
		n := int64(s.NumOutputs)
		if a, ok := s.Attrs["num_outputs"]; ok {
			n = a.Int()
			if len(s.Inputs) == 2 {
				return nil, s.errorf(`attribute "num_outputs" and %s are both given; give one`, s.input(1))
			}
		}
		if n < 1 {
			return nil, s.errorf("the number of outputs is unknown: give the split sizes, num_outputs (opset 18) or Spec.NumOutputs")
		}
		if n > dim {
			return nil, s.errorf("%d outputs from axis %d of %s (dimension %d): every piece must have a positive size (empty tensors are not supported)",
				n, axis, in, dim)
		}
		if n > maxSplitOutputs {
			return nil, s.errorf("%d outputs: Split makes at most %d", n, maxSplitOutputs)
		}
		chunk := dim / n
		if s.Opset >= 18 {
			chunk = (dim + n - 1) / n
		} else if dim%n != 0 {
			return nil, s.errorf("axis %d of %s (dimension %d) does not split into %d equal parts", axis, in, dim, n)
		}
		for i := range n {
			split = append(split, min(chunk, dim-i*chunk))
		}
	}
	if len(split) > maxSplitOutputs {
		return nil, s.errorf("%d split sizes: Split makes at most %d outputs", len(split), maxSplitOutputs)
	}
	total := int64(0)
	for _, v := range split {
		if v <= 0 {
			return nil, s.errorf("split sizes %v hold %d; every piece must have a positive size (empty tensors are not supported)", split, v)
		}
		if v > dim-total {
			// Checked before adding: a sum of positive sizes past dim could wrap around
			// int64 and come back to it.
			return nil, s.errorf("split sizes %v add up to more than axis %d of %s has (%d): the size %d does not fit", split, axis, in, dim, v)
		}
		total += v
	}
	if total != dim {
		return nil, s.errorf("split sizes %v add up to %d; axis %d of %s has %d", split, total, axis, in, dim)
	}
	if s.NumOutputs > 0 && s.NumOutputs != len(split) {
		return nil, s.errorf("split sizes %v make %d outputs; the node has %d", split, len(split), s.NumOutputs)
	}
	size := uint64(in.DType.Size())
	outer, inner := uint64(product(in.Shape[:axis])), uint64(product(in.Shape[axis+1:]))*size
	pieces := make([]copyPiece, len(split))
	outs := make([]TensorInfo, len(split))
	at := uint64(0)
	for i, v := range split {
		shape := append([]int64{}, in.Shape...)
		shape[axis] = v
		outs[i] = TensorInfo{DType: in.DType, Shape: shape}
		cols := uint64(v) * inner
		pieces[i] = copyPiece{src: 0, dst: i, srcOff: at, rows: outer, colBytes: cols, srcPitch: uint64(dim) * inner, dstPitch: cols}
		at += cols
	}
	return newPieces(l, s, pieces, outs...), nil
}

// Execute queues one copy per piece.
func (k *piecesKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	for i := range k.pieces {
		p := &k.pieces[i]
		src, dst := inputs[p.src].Ptr+cudadrv.DevicePtr(p.srcOff), outputs[p.dst].Ptr+cudadrv.DevicePtr(p.dstOff)
		u, idx := unitFor(p.unit, uint64(src), uint64(dst))
		a := &k.args
		a.Reset()
		a.Ptr(dst).Ptr(src).U64(p.rows).U64(p.colBytes / u).U64(p.dstPitch / u).U64(p.srcPitch / u)
		if err := k.lib.rt.Stream.Launch(k.fns[idx], linearGrid(p.rows*(p.colBytes/u)), linearBlock, 0, a); err != nil {
			return fmt.Errorf("%s: piece %d: %w", k.name, i, err)
		}
	}
	return nil
}
