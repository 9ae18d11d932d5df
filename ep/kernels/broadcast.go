package kernels

// maxBroadcastDims is the most dimensions a broadcasting kernel takes, after merging: the
// kernels get every dimension and stride as a separate 64-bit argument, and cuLaunchKernel
// arguments are capped at cudadrv.MaxKernelArgs (3 pointers + n + 3×6 = 22).
const maxBroadcastDims = 6

// BroadcastShapes returns the numpy (ONNX multidirectional) broadcast of the shapes, or false when they do not
// broadcast (two dimensions differ and neither is 1).
func BroadcastShapes(shapes ...[]int64) ([]int64, bool) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			switch {
			case d == out[off+i] || d == 1:
			case out[off+i] == 1:
				out[off+i] = d
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// contiguousStrides returns the row-major element strides of shape.
func contiguousStrides(shape []int64) []int64 {
	strides := make([]int64, len(shape))
	st := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = st
		st *= shape[i]
	}
	return strides
}

// broadcastStrides returns the element strides of a contiguous tensor of shape seen through
// out (which shape broadcasts to): right-aligned, 0 along every dimension the tensor repeats.
func broadcastStrides(shape, out []int64) []int64 {
	own := contiguousStrides(shape)
	strides := make([]int64, len(out))
	off := len(out) - len(shape)
	for i, d := range shape {
		if d != 1 {
			strides[off+i] = own[i]
		}
	}
	return strides
}

// stridedLayout is an iteration space (dims, outermost first) and, for each operand, its
// element stride along each dimension. The output is contiguous over dims.
type stridedLayout struct {
	dims    []int64
	strides [][]int64
}

// mergeDims returns the layout with dimensions of extent 1 dropped and neighbours merged
// wherever every operand walks them as one (outer stride == inner stride × inner extent), so
// that e.g. [4,5,6] + [4,5,6] is one dimension of 120 and [8,3,4] + [4] is [24,4]. An empty
// iteration space becomes one dimension of extent 1.
func mergeDims(dims []int64, strides ...[]int64) stridedLayout {
	var l stridedLayout
	l.strides = make([][]int64, len(strides))
	for i, d := range dims {
		if d == 1 {
			continue
		}
		if n := len(l.dims); n > 0 {
			merge := true
			for k := range strides {
				if l.strides[k][n-1] != strides[k][i]*d {
					merge = false
					break
				}
			}
			if merge {
				l.dims[n-1] *= d
				for k := range strides {
					l.strides[k][n-1] = strides[k][i]
				}
				continue
			}
		}
		l.dims = append(l.dims, d)
		for k := range strides {
			l.strides[k] = append(l.strides[k], strides[k][i])
		}
	}
	if len(l.dims) == 0 {
		l.dims = []int64{1}
		for k := range strides {
			l.strides[k] = []int64{0}
		}
	}
	return l
}

// contiguous reports whether operand k walks the layout contiguously (it has the output's
// layout).
func (l stridedLayout) contiguous(k int) bool {
	st := int64(1)
	for i := len(l.dims) - 1; i >= 0; i-- {
		if l.dims[i] != 1 && l.strides[k][i] != st {
			return false
		}
		st *= l.dims[i]
	}
	return true
}

// padded returns the layout's dims and operand k's strides as fixed arrays of
// maxBroadcastDims entries, right-aligned and padded in front with extent 1 and stride 0, as
// the broadcasting kernels take them. The caller has checked len(l.dims) <= maxBroadcastDims.
func (l stridedLayout) padded(k int) (dims, strides [maxBroadcastDims]int64) {
	off := maxBroadcastDims - len(l.dims)
	for i := 0; i < off; i++ {
		dims[i] = 1
	}
	copy(dims[off:], l.dims)
	copy(strides[off:], l.strides[k])
	return dims, strides
}
