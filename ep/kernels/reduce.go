package kernels

import "github.com/cudaep/cudaep/cudadrv"

func init() {
	modules = append(modules, ptxModule{"ptx/reduce.ptx", typedEntries([]string{
		"cudaep_reduce_rows_sum", "cudaep_reduce_strided_sum", "cudaep_reduce_rows_max", "cudaep_reduce_strided_max"}, floatTypes)})
	builders["ReduceSum"] = builder{inputNames: []string{"data", "axes"}, build: reduceBuilder("sum", false, 13)}
	builders["ReduceMean"] = builder{inputNames: []string{"data", "axes"}, build: reduceBuilder("sum", true, 18)}
	builders["ReduceMax"] = builder{inputNames: []string{"data", "axes"}, build: reduceBuilder("max", false, 18)}
}

// maxReduceGroups is the most runs of kept, and of reduced, dimensions the strided reduction
// kernel takes (its arguments hold three of each).
const maxReduceGroups = 3

// reduceKernel is ReduceSum, ReduceMean or ReduceMax over float data, accumulated in float32.
// When the reduced dimensions are the innermost ones, each output reduces a contiguous row
// with one block (cudaep_reduce_rows_<op>_<t>(out, x, rows, length, scale)); otherwise one
// thread per output walks the reduced dimensions through strides
// (cudaep_reduce_strided_<op>_<t>(out, x, n, kd[3], ks[3], rd[3], rs[3], scale)). ReduceMean is
// the sum times scale = 1/count.
type reduceKernel struct {
	kernelBase
	fn          *cudadrv.Function
	rows        bool
	n, length   uint64 // rows mode: rows and row length; strided: outputs
	kd, ks      [maxReduceGroups]int64
	rd, rs      [maxReduceGroups]int64
	scale       float32
	grid, block cudadrv.Dim3
	args        cudadrv.KernelArgs
}

// isEmptyVector reports whether input i is a 1-D tensor of no elements: its value (an empty
// list) is known from its shape, constant or not.
func (s opSpec) isEmptyVector(i int) bool {
	in := s.Inputs[i]
	return len(in.Shape) == 1 && in.Shape[0] == 0
}

// reduceBuilder builds a Reduce op with kernel stem stem ("sum" or "max"), times 1/count when
// mean. The axes are the attribute below axesInputOpset and the optional constant input 1
// from it on; no axes (absent or empty) reduce everything, or, with noop_with_empty_axes=1
// (from axesInputOpset), copy the input. keepdims (default 1) keeps reduced dimensions as 1.
func reduceBuilder(stem string, mean bool, axesInputOpset int) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		var raw []int64
		present := false
		noop := false
		if s.Opset < axesInputOpset {
			if err := s.checkInputCount(1, 1); err != nil {
				return nil, err
			}
			if err := s.checkAttrs(map[string]AttrKind{"axes": AttrInts, "keepdims": AttrInt}); err != nil {
				return nil, err
			}
			if a, ok := s.Attrs["axes"]; ok {
				raw, present = a.Ints(), true
			}
		} else {
			if err := s.checkInputCount(1, 2); err != nil {
				return nil, err
			}
			if err := s.checkAttrs(map[string]AttrKind{"keepdims": AttrInt, "noop_with_empty_axes": AttrInt}); err != nil {
				return nil, err
			}
			noop = s.intAttr("noop_with_empty_axes", 0) == 1
			if len(s.Inputs) == 2 && !s.isEmptyVector(1) {
				if err := s.checkIntsInput(1, true); err != nil {
					return nil, err
				}
				v, err := s.constInts(1, s.Op+"'s output shape depends on its axes")
				if err != nil {
					return nil, err
				}
				raw, present = v, true
			}
		}
		if err := s.checkInput(0, floatTypes, 0, anyRank); err != nil {
			return nil, err
		}
		x := s.Inputs[0]
		if err := s.checkTypeOpset(x.DType); err != nil {
			return nil, err
		}
		rank := len(x.Shape)
		reduced := make([]bool, rank)
		for _, a := range raw {
			if a < -int64(rank) || a >= int64(rank) {
				return nil, s.errorf("axis %d is outside [%d, %d] for %s", a, -rank, rank-1, x)
			}
			if a < 0 {
				a += int64(rank)
			}
			if reduced[a] {
				return nil, s.errorf("axes %v name axis %d twice", raw, a)
			}
			reduced[a] = true
		}
		if !present || len(raw) == 0 {
			if noop {
				return newCopy(l, s, cloneInfo(x)), nil
			}
			for i := range reduced {
				reduced[i] = true
			}
		}
		keep := s.intAttr("keepdims", 1) != 0
		var out []int64
		count := int64(1)
		for i, d := range x.Shape {
			switch {
			case !reduced[i]:
				out = append(out, d)
			case keep:
				out = append(out, 1)
			}
			if reduced[i] {
				count *= d
			}
		}
		outInfo := TensorInfo{DType: x.DType, Shape: out}
		// Runs of kept and of reduced dimensions, extent-1 dimensions dropped: the input is
		// contiguous, so neighbours of one kind walk as one dimension.
		type group struct {
			extent, stride int64
			reduced        bool
		}
		var groups []group
		strides := contiguousStrides(x.Shape)
		for i, d := range x.Shape {
			if d == 1 {
				continue
			}
			if n := len(groups); n > 0 && groups[n-1].reduced == reduced[i] {
				groups[n-1].extent *= d
				groups[n-1].stride = strides[i]
				continue
			}
			groups = append(groups, group{extent: d, stride: strides[i], reduced: reduced[i]})
		}
		nReduced := 0
		for _, g := range groups {
			if g.reduced {
				nReduced++
			}
		}
		if nReduced == 0 {
			// Every reduced dimension has extent 1: each output is its one input element.
			return newCopy(l, s, outInfo), nil
		}
		k := &reduceKernel{kernelBase: newBase(l, s, outInfo), scale: 1}
		if mean {
			k.scale = float32(1 / float64(count))
		}
		dt := x.DType
		last := groups[len(groups)-1]
		if last.reduced && nReduced == 1 {
			k.rows = true
			k.fn = l.function("cudaep_reduce_rows_" + stem + "_" + dt.suffix())
			k.n, k.length = uint64(x.NumElements()/last.extent), uint64(last.extent)
			units := k.length
			if v := uint64(16 / dt.Size()); k.length%v == 0 {
				units = k.length / v
			}
			k.grid = cudadrv.Dim3{X: uint32(min(k.n, maxSoftmaxRowBlocks)), Y: 1, Z: 1}
			k.block = cudadrv.Dim3{X: rowThreads(units), Y: 1, Z: 1}
			return k, nil
		}
		var kept, red []group
		for _, g := range groups {
			if g.reduced {
				red = append(red, g)
			} else {
				kept = append(kept, g)
			}
		}
		if len(kept) > maxReduceGroups || len(red) > maxReduceGroups {
			return nil, s.errorf("axes %v of %s alternate kept and reduced dimensions %d and %d times; at most %d runs of each are supported", raw, x, len(kept), len(red), maxReduceGroups)
		}
		k.fn = l.function("cudaep_reduce_strided_" + stem + "_" + dt.suffix())
		k.n = uint64(outInfo.NumElements())
		for i := range maxReduceGroups {
			k.kd[i], k.rd[i] = 1, 1
		}
		fill := func(dims, strs *[maxReduceGroups]int64, gs []group) {
			off := maxReduceGroups - len(gs)
			for i, g := range gs {
				dims[off+i], strs[off+i] = g.extent, g.stride
			}
		}
		fill(&k.kd, &k.ks, kept)
		fill(&k.rd, &k.rs, red)
		k.grid, k.block = linearGrid(k.n), linearBlock
		return k, nil
	}
}

// Execute queues the reduction.
func (k *reduceKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr)
	if k.rows {
		a.U64(k.n).U64(k.length)
	} else {
		a.U64(k.n)
		for _, v := range &k.kd {
			a.I64(v)
		}
		for _, v := range &k.ks {
			a.I64(v)
		}
		for _, v := range &k.rd {
			a.I64(v)
		}
		for _, v := range &k.rs {
			a.I64(v)
		}
	}
	a.F32(k.scale)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, k.block, 0, a)
}
