package kernels

import "github.com/cudaep/cudaep/cudadrv"

func init() {
	builders["Softmax"] = builder{inputNames: []string{"input"}, build: buildSoftmax}
}

// softmaxKernel normalizes exp(x) along one axis of extent length, viewing the input as
// [outer, length, inner]. With inner == 1 each row is contiguous and one block reduces it
// (cudaep_softmax_rows_<t>(out, x, rows, length)); otherwise one thread walks each column
// (cudaep_softmax_cols_<t>(out, x, outer, length, inner)), adjacent threads on adjacent
// addresses.
type softmaxKernel struct {
	kernelBase
	fn                   *cudadrv.Function
	outer, length, inner uint64
	grid, block          cudadrv.Dim3
	args                 cudadrv.KernelArgs
}

// maxSoftmaxRowBlocks caps the rows kernel's grid; its grid-stride loop covers the rest.
const maxSoftmaxRowBlocks = 65536

// buildSoftmax builds Softmax. From opset 13 it normalizes along axis (default -1); before,
// the input is coerced to 2-D at axis (default 1) and each row of the flattened trailing
// dimensions is normalized.
func buildSoftmax(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	dt := s.Inputs[0].DType
	if err := s.checkTypeOpset(dt); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"axis": AttrInt}); err != nil {
		return nil, err
	}
	shape := s.Inputs[0].Shape
	rank := int64(len(shape))
	def := int64(-1)
	if s.Opset < 13 {
		def = 1
	}
	axis := s.intAttr("axis", def)
	if axis < -rank || axis >= rank {
		return nil, s.errorf(`attribute "axis" is %d; for input 0 (input) of rank %d it must be in [%d, %d]`, axis, rank, -rank, rank-1)
	}
	if axis < 0 {
		axis += rank
	}
	outer, length, inner := int64(1), int64(1), int64(1)
	for i, d := range shape {
		switch {
		case int64(i) < axis:
			outer *= d
		case int64(i) == axis || s.Opset < 13:
			length *= d
		default:
			inner *= d
		}
	}
	k := &softmaxKernel{kernelBase: newBase(l, s, cloneInfo(s.Inputs[0]))}
	k.outer, k.length, k.inner = uint64(outer), uint64(length), uint64(inner)
	if inner == 1 {
		k.fn = l.function("cudaep_softmax_rows_" + dt.suffix())
		k.grid = cudadrv.Dim3{X: uint32(min(k.outer, maxSoftmaxRowBlocks)), Y: 1, Z: 1}
		k.block = cudadrv.Dim3{X: rowThreads(k.length), Y: 1, Z: 1}
	} else {
		k.fn = l.function("cudaep_softmax_cols_" + dt.suffix())
		k.grid, k.block = linearGrid(k.outer*k.inner), linearBlock
	}
	return k, nil
}

// rowThreads picks the rows kernel's block size: about four elements per thread, a whole
// number of warps, from 32 to 1024 threads.
func rowThreads(length uint64) uint32 {
	t := uint64(32)
	for t < 1024 && t*4 < length {
		t *= 2
	}
	return uint32(t)
}

// Execute queues the softmax.
func (k *softmaxKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr)
	if k.inner == 1 {
		a.U64(k.outer).U64(k.length)
	} else {
		a.U64(k.outer).U64(k.length).U64(k.inner)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, k.block, 0, a)
}
