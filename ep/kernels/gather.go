package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["Gather"] = builder{inputNames: []string{"data", "indices"}, build: buildGather}
	builders["Trilu"] = builder{inputNames: []string{"input", "k"}, build: buildTrilu}
}

// gatherKernel is Gather: cudaep_gather_<unit>_<i32|i64>(out, data, indices, outer, nidx,
// axisDim, inner, fault, id), data viewed as [outer, axisDim, inner] and the output as [outer,
// nidx, inner], in the widest unit (up to 16 bytes) that the inner rows and the addresses
// allow. An index outside [-axisDim, axisDim) is recorded in the Library's fault word.
type gatherKernel struct {
	kernelBase
	fns                [5]*cudadrv.Function
	outer, nidx, inner uint64 // inner in bytes
	axisDim            int64
	unit               uint64 // widest unit inner allows; Execute narrows it for the addresses
	args               cudadrv.KernelArgs
}

// buildGather builds Gather (opset 1 on): data of any type, int32 or int64 indices given at
// run time (negative ones count from the end, as in ONNX Runtime), along axis (default 0). An
// index outside [-dim, dim) is an error in ONNX (ONNX Runtime's CPU execution provider stops
// with one): the kernel records it as a data fault (Library.TakeFault) and gives zeros in its
// output rows, never reading outside data.
func buildGather(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"axis": AttrInt}); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 1, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkInput(1, intTypes, 0, anyRank); err != nil {
		return nil, err
	}
	data, idx := s.Inputs[0], s.Inputs[1]
	zero := int64(0)
	axis, err := s.concatAxis(len(data.Shape), &zero)
	if err != nil {
		return nil, err
	}
	out := append(append(append([]int64{}, data.Shape[:axis]...), idx.Shape...), data.Shape[axis+1:]...)
	if err := s.checkOutput(out); err != nil {
		return nil, err
	}
	k := &gatherKernel{kernelBase: newBase(l, s, TensorInfo{DType: data.DType, Shape: out})}
	k.outer, k.nidx = uint64(product(data.Shape[:axis])), uint64(idx.NumElements())
	k.inner = uint64(product(data.Shape[axis+1:])) * uint64(data.DType.Size())
	k.axisDim = data.Shape[axis]
	k.unit, _ = unitFor(k.inner)
	for i, u := range unitSuffixes {
		k.fns[i] = l.function("cudaep_gather_" + u + "_" + idx.DType.suffix())
	}
	dim := k.axisDim
	if err := k.registerFaults(s.inputNames, func(int, int64) string {
		return fmt.Sprintf("outside [%d, %d) (axis %d of data has %d elements)", -dim, dim, axis, dim)
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// Execute queues the gather.
func (k *gatherKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	u, i := unitFor(k.unit, uint64(inputs[0].Ptr), uint64(outputs[0].Ptr))
	inner := k.inner / u
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).U64(k.outer).U64(k.nidx).I64(k.axisDim).U64(inner)
	k.faultArgs(a)
	return k.lib.rt.Stream.Launch(k.fns[i], linearGrid(k.outer*k.nidx*inner), linearBlock, 0, a)
}

// triluKernel is Trilu: cudaep_trilu_<size>(out, in, n, rows, cols, k, upper) over the input's
// last two dimensions.
type triluKernel struct {
	kernelBase
	fn         *cudadrv.Function
	n          uint64
	rows, cols uint64
	k          int64
	upper      uint32
	grid       cudadrv.Dim3
	args       cudadrv.KernelArgs
}

// buildTrilu builds Trilu (opset 14): the upper (upper=1, the default) or lower triangle of
// each matrix of the last two dimensions, from diagonal k (a constant scalar input, default
// 0); the rest is zero.
func buildTrilu(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(14, "Trilu entered ONNX in opset 14"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(1, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"upper": AttrInt}); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 2, anyRank); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	diag := int64(0)
	if len(s.Inputs) == 2 {
		if err := s.checkInput(1, []DType{Int64}, 0, 1); err != nil {
			return nil, err
		}
		if n := s.Inputs[1].NumElements(); n != 1 {
			return nil, s.errorf("%s has %d elements; it must be one value", s.input(1), n)
		}
		v, err := s.constInts(1, "the kernel takes the diagonal when it is built")
		if err != nil {
			return nil, err
		}
		diag = v[0]
	}
	rank := len(in.Shape)
	k := &triluKernel{kernelBase: newBase(l, s, cloneInfo(in)), fn: l.function("cudaep_trilu_" + in.DType.sizeSuffix())}
	k.n = uint64(in.NumElements())
	k.rows, k.cols = uint64(in.Shape[rank-2]), uint64(in.Shape[rank-1])
	k.k = diag
	if s.intAttr("upper", 1) != 0 {
		k.upper = 1
	}
	k.grid = linearGrid(k.n)
	return k, nil
}

// Execute queues the mask.
func (k *triluKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).U64(k.n).U64(k.rows).U64(k.cols).I64(k.k).U32(k.upper)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}
