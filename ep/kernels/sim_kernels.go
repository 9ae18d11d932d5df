package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// SimKernels returns the Go bodies of the library's PTX entry points (cuda/*.cu), by entry
// name, for a backend that runs kernels in Go: pass them to the simulator as
// sim.Options{Kernels: kernels.SimKernels()}. They have the same names and argument lists as
// the CUDA kernels and the element arithmetic of reference.go. Each checks what the CUDA kernel
// relies on (consistent sizes, block shapes its warp reductions need) and fails the launch, as
// a faulting kernel would, when the Go side passed something else.
//
// Each call returns a new map, which the caller owns. The bodies are safe for concurrent use.
func SimKernels() map[string]cudadrv.KernelBody {
	m := map[string]cudadrv.KernelBody{}
	for op, entry := range map[string]string{"Add": "cudaep_add", "Sub": "cudaep_sub", "Mul": "cudaep_mul", "Div": "cudaep_div"} {
		f := refBinaryOps[op]
		m[entry+"_f32"] = func(l *cudadrv.KernelLaunch) error { return simBinarySame(l, f) }
		m[entry+"_bcast_f32"] = func(l *cudadrv.KernelLaunch) error { return simBinaryBcast(l, f) }
	}
	for op, entry := range map[string]string{
		"Relu": "cudaep_relu_f32", "Sigmoid": "cudaep_sigmoid_f32", "Tanh": "cudaep_tanh_f32",
		"Gelu": "cudaep_gelu_f32", "GeluTanh": "cudaep_gelu_tanh_f32",
	} {
		f := refUnaryOps[op]
		m[entry] = func(l *cudadrv.KernelLaunch) error { return simUnary(l, f) }
	}
	m["cudaep_expand_f32"] = simExpand
	m["cudaep_softmax_rows_f32"] = simSoftmaxRows
	m["cudaep_softmax_cols_f32"] = simSoftmaxCols
	m["cudaep_nonzero_f32"] = func(l *cudadrv.KernelLaunch) error {
		return simNonZero(l, func(n int) (func(int) bool, error) {
			x, err := l.Float32s(l.PtrArg(0), n)
			return func(i int) bool { return x[i] != 0 }, err
		})
	}
	m["cudaep_nonzero_i32"] = func(l *cudadrv.KernelLaunch) error {
		return simNonZero(l, func(n int) (func(int) bool, error) {
			x, err := l.Int32s(l.PtrArg(0), n)
			return func(i int) bool { return x[i] != 0 }, err
		})
	}
	m["cudaep_nonzero_i64"] = func(l *cudadrv.KernelLaunch) error {
		return simNonZero(l, func(n int) (func(int) bool, error) {
			x, err := l.Int64s(l.PtrArg(0), n)
			return func(i int) bool { return x[i] != 0 }, err
		})
	}
	m["cudaep_nonzero_b8"] = func(l *cudadrv.KernelLaunch) error {
		return simNonZero(l, func(n int) (func(int) bool, error) {
			x, err := l.Bytes(l.PtrArg(0), uint64(n))
			return func(i int) bool { return x[i] != 0 }, err
		})
	}
	return m
}

// simViews returns float32 views of count elements at each pointer argument in args.
func simViews(l *cudadrv.KernelLaunch, count []int, args ...int) ([][]float32, error) {
	views := make([][]float32, len(args))
	for i, a := range args {
		v, err := l.Float32s(l.PtrArg(a), count[i])
		if err != nil {
			return nil, err
		}
		views[i] = v
	}
	return views, nil
}

// simBinarySame is cudaep_<op>_f32(out, a, b, n).
func simBinarySame(l *cudadrv.KernelLaunch, f func(a, b float64) float64) error {
	n := int(l.U64Arg(3))
	v, err := simViews(l, []int{n, n, n}, 0, 1, 2)
	if err != nil {
		return err
	}
	out, a, b := v[0], v[1], v[2]
	for i := range out {
		out[i] = float32(f(float64(a[i]), float64(b[i])))
	}
	return nil
}

// simLayout reads maxBroadcastDims dimensions starting at argument first, then one stride
// array of maxBroadcastDims per operand, and checks that the dimensions multiply to n.
func simLayout(l *cudadrv.KernelLaunch, n uint64, first, operands int) (dims [maxBroadcastDims]int64, strides [][maxBroadcastDims]int64, err error) {
	strides = make([][maxBroadcastDims]int64, operands)
	total := uint64(1)
	for i := range dims {
		dims[i] = l.I64Arg(first + i)
		if dims[i] < 1 {
			return dims, nil, fmt.Errorf("%s: dimension %d is %d", l.Name, i, dims[i])
		}
		total *= uint64(dims[i])
		for k := range strides {
			strides[k][i] = l.I64Arg(first + (k+1)*maxBroadcastDims + i)
			if strides[k][i] < 0 {
				return dims, nil, fmt.Errorf("%s: negative stride", l.Name)
			}
		}
	}
	if total != n {
		return dims, nil, fmt.Errorf("%s: dimensions %v hold %d elements, n is %d", l.Name, dims, total, n)
	}
	return dims, strides, nil
}

// simExtent is the number of elements an operand with strides spans over dims.
func simExtent(dims, strides [maxBroadcastDims]int64) int {
	last := int64(0)
	for i, d := range dims {
		last += (d - 1) * strides[i]
	}
	return int(last + 1)
}

// simWalk calls visit(i, offsets) for every flat output index i of dims in order, with each
// operand's element offset.
func simWalk(dims [maxBroadcastDims]int64, strides [][maxBroadcastDims]int64, visit func(i int, offs []int64)) {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	var idx [maxBroadcastDims]int64
	offs := make([]int64, len(strides))
	for i := 0; i < n; i++ {
		visit(i, offs)
		for d := maxBroadcastDims - 1; d >= 0; d-- {
			idx[d]++
			for k := range offs {
				offs[k] += strides[k][d]
			}
			if idx[d] < dims[d] {
				break
			}
			for k := range offs {
				offs[k] -= idx[d] * strides[k][d]
			}
			idx[d] = 0
		}
	}
}

// simBinaryBcast is cudaep_<op>_bcast_f32(out, a, b, n, dims[6], aStrides[6], bStrides[6]).
func simBinaryBcast(l *cudadrv.KernelLaunch, f func(a, b float64) float64) error {
	n := l.U64Arg(3)
	dims, strides, err := simLayout(l, n, 4, 2)
	if err != nil {
		return err
	}
	v, err := simViews(l, []int{int(n), simExtent(dims, strides[0]), simExtent(dims, strides[1])}, 0, 1, 2)
	if err != nil {
		return err
	}
	out, a, b := v[0], v[1], v[2]
	simWalk(dims, strides, func(i int, offs []int64) {
		out[i] = float32(f(float64(a[offs[0]]), float64(b[offs[1]])))
	})
	return nil
}

// simExpand is cudaep_expand_f32(out, in, n, dims[6], strides[6]).
func simExpand(l *cudadrv.KernelLaunch) error {
	n := l.U64Arg(2)
	dims, strides, err := simLayout(l, n, 3, 1)
	if err != nil {
		return err
	}
	v, err := simViews(l, []int{int(n), simExtent(dims, strides[0])}, 0, 1)
	if err != nil {
		return err
	}
	out, in := v[0], v[1]
	simWalk(dims, strides, func(i int, offs []int64) { out[i] = in[offs[0]] })
	return nil
}

// simUnary is cudaep_<activation>_f32(out, x, n).
func simUnary(l *cudadrv.KernelLaunch, f func(x float64) float64) error {
	n := int(l.U64Arg(2))
	v, err := simViews(l, []int{n, n}, 0, 1)
	if err != nil {
		return err
	}
	out, x := v[0], v[1]
	for i := range out {
		out[i] = float32(f(float64(x[i])))
	}
	return nil
}

// simWarpBlock checks a block shape the warp-level reductions accept: one-dimensional, a
// whole number of warps, at most 1024 threads.
func simWarpBlock(l *cudadrv.KernelLaunch) error {
	if b := l.Block; b.Y != 1 || b.Z != 1 || b.X%32 != 0 || b.X > 1024 {
		return fmt.Errorf("%s: block %v: the kernel needs a one-dimensional block of whole warps", l.Name, b)
	}
	return nil
}

// simSoftmax normalizes the lines of [outer, length, inner] in x into out.
func simSoftmax(l *cudadrv.KernelLaunch, outer, length, inner uint64) error {
	total := int(outer * length * inner)
	v, err := simViews(l, []int{total, total}, 0, 1)
	if err != nil {
		return err
	}
	out, x := v[0], v[1]
	line := make([]float64, length)
	for o := uint64(0); o < outer; o++ {
		for in := uint64(0); in < inner; in++ {
			base := o*length*inner + in
			for j := range line {
				line[j] = float64(x[base+uint64(j)*inner])
			}
			refSoftmaxLine(line, line)
			for j, y := range line {
				out[base+uint64(j)*inner] = float32(y)
			}
		}
	}
	return nil
}

// simSoftmaxRows is cudaep_softmax_rows_f32(out, x, rows, length).
func simSoftmaxRows(l *cudadrv.KernelLaunch) error {
	if err := simWarpBlock(l); err != nil {
		return err
	}
	return simSoftmax(l, l.U64Arg(2), l.U64Arg(3), 1)
}

// simSoftmaxCols is cudaep_softmax_cols_f32(out, x, outer, length, inner).
func simSoftmaxCols(l *cudadrv.KernelLaunch) error {
	return simSoftmax(l, l.U64Arg(2), l.U64Arg(3), l.U64Arg(4))
}

// simNonZero is cudaep_nonzero_<t>(x, indices, count, n, rank, dims[8]); input returns the
// predicate "element i is non-zero" over a view of n elements.
func simNonZero(l *cudadrv.KernelLaunch, input func(n int) (func(int) bool, error)) error {
	if err := simWarpBlock(l); err != nil {
		return err
	}
	n, rank := l.U64Arg(3), int(l.U32Arg(4))
	if rank < 1 || rank > maxNonZeroRank {
		return fmt.Errorf("%s: rank %d", l.Name, rank)
	}
	shape := make([]int64, rank)
	total := uint64(1)
	for i := range maxNonZeroRank {
		d := l.I64Arg(5 + i)
		if d < 1 || (i < maxNonZeroRank-rank && d != 1) {
			return fmt.Errorf("%s: dimension %d is %d for rank %d", l.Name, i, d, rank)
		}
		total *= uint64(d)
		if i >= maxNonZeroRank-rank {
			shape[i-(maxNonZeroRank-rank)] = d
		}
	}
	if total != n {
		return fmt.Errorf("%s: dimensions hold %d elements, n is %d", l.Name, total, n)
	}
	nonzero, err := input(int(n))
	if err != nil {
		return err
	}
	flags := make([]bool, n)
	for i := range flags {
		flags[i] = nonzero(i)
	}
	coords := refNonZero(flags, shape)
	count, err := l.Int64s(l.PtrArg(2), 1)
	if err != nil {
		return err
	}
	count[0] = int64(len(coords) / rank)
	if len(coords) == 0 {
		return nil
	}
	indices, err := l.Int64s(l.PtrArg(1), len(coords))
	if err != nil {
		return err
	}
	copy(indices, coords)
	return nil
}
