package kernels

import (
	"fmt"
	"math"

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
	for op, stem := range binaryStems {
		f := refBinaryOps[op]
		for _, dt := range floatTypes {
			m["cudaep_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				return simBinarySame(l, dt, dt, func(out, a, b simTensor, i int64) { out.setFloat(i, f(a.float(i), b.float(i))) })
			}
			m["cudaep_"+stem+"_bcast_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				return simBinaryBcast(l, dt, dt, func(out simTensor, i int64, a simTensor, ai int64, b simTensor, bi int64) {
					out.setFloat(i, f(a.float(ai), b.float(bi)))
				})
			}
		}
	}
	for op, stem := range intStems {
		f := refIntOps[op]
		for _, dt := range intTypes {
			// Div records a zero divisor in the fault word, its arguments after the others
			// (4 for the same-shape kernel, 22 with the broadcast layout).
			record := func(l *cudadrv.KernelLaunch, arg int, zero bool, err error) error {
				if err == nil && zero && stem == "div" {
					err = simRecordFault(l, arg, 1, 0)
				}
				return err
			}
			m["cudaep_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				zero := false
				err := simBinarySame(l, dt, dt, func(out, a, b simTensor, i int64) {
					zero = zero || b.int(i) == 0
					out.setInt(i, f(a.int(i), b.int(i)))
				})
				return record(l, 4, zero, err)
			}
			m["cudaep_"+stem+"_bcast_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				zero := false
				err := simBinaryBcast(l, dt, dt, func(out simTensor, i int64, a simTensor, ai int64, b simTensor, bi int64) {
					zero = zero || b.int(bi) == 0
					out.setInt(i, f(a.int(ai), b.int(bi)))
				})
				return record(l, 4+3*maxBroadcastDims, zero, err)
			}
		}
	}
	for op, stem := range compareStems {
		ff, fi := refCompareOps[op], refCompareInts[op]
		types := compareTypes
		if stem == "equal" {
			types = append(append([]DType{}, compareTypes...), Bool)
		}
		for _, dt := range types {
			cmp := func(a simTensor, ai int64, b simTensor, bi int64) bool { return ff(a.float(ai), b.float(bi)) }
			if !isFloat(dt) {
				cmp = func(a simTensor, ai int64, b simTensor, bi int64) bool { return fi(a.int(ai), b.int(bi)) }
			}
			set := func(out simTensor, i int64, v bool) {
				out.b8[i] = 0
				if v {
					out.b8[i] = 1
				}
			}
			m["cudaep_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				return simBinarySame(l, dt, Bool, func(out, a, b simTensor, i int64) { set(out, i, cmp(a, i, b, i)) })
			}
			m["cudaep_"+stem+"_bcast_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				return simBinaryBcast(l, dt, Bool, func(out simTensor, i int64, a simTensor, ai int64, b simTensor, bi int64) {
					set(out, i, cmp(a, ai, b, bi))
				})
			}
		}
	}
	unary := map[string]string{"gelu": "Gelu", "gelu_tanh": "GeluTanh"}
	for op, stem := range unaryStems {
		unary[stem] = op
	}
	for stem, op := range unary {
		f := refUnaryOps[op]
		for _, dt := range floatTypes {
			m["cudaep_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simUnary(l, dt, f) }
		}
	}
	for _, size := range []string{"b8", "b16", "b32", "b64"} {
		dt := sizeType(size)
		m["cudaep_expand_"+size] = func(l *cudadrv.KernelLaunch) error { return simExpand(l, dt) }
		m["cudaep_where_"+size] = func(l *cudadrv.KernelLaunch) error { return simWhere(l, dt) }
		m["cudaep_where_update_"+size] = func(l *cudadrv.KernelLaunch) error { return simWhereUpdate(l, dt) }
		m["cudaep_where_update2_"+size] = func(l *cudadrv.KernelLaunch) error { return simWhereUpdate2(l, dt) }
	}
	for _, dt := range floatTypes {
		m["cudaep_softmax_rows_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simSoftmaxRows(l, dt) }
		m["cudaep_softmax_cols_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simSoftmaxCols(l, dt) }
	}
	for _, from := range castTypes {
		for _, to := range castTypes {
			m["cudaep_cast_"+from.suffix()+"_"+to.suffix()] = func(l *cudadrv.KernelLaunch) error { return simCast(l, from, to) }
		}
	}
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
	for _, add := range simKernelSets {
		add(m)
	}
	m["cudaep_nonzero_b8"] = func(l *cudadrv.KernelLaunch) error {
		return simNonZero(l, func(n int) (func(int) bool, error) {
			x, err := l.Bytes(l.PtrArg(0), uint64(n))
			return func(i int) bool { return x[i] != 0 }, err
		})
	}
	return m
}

// simKernelSets add the Go bodies of the modules that files other than this one own (norm,
// reduce, datamove); each such file appends its function from an init function.
var simKernelSets []func(m map[string]cudadrv.KernelBody)

// simViewsOf returns views of the pointer arguments args, of the given dtypes and counts.
func simViewsOf(l *cudadrv.KernelLaunch, args []int, dts []DType, counts []int) ([]simTensor, error) {
	views := make([]simTensor, len(args))
	for i, a := range args {
		v, err := simView(l, l.PtrArg(a), dts[i], counts[i])
		if err != nil {
			return nil, err
		}
		views[i] = v
	}
	return views, nil
}

// simBinarySame is cudaep_<stem>_<t>(out, a, b, n). The CUDA kernel is a grid-stride loop over
// 16-byte packs, correct on any grid, so the body checks no geometry; the library launches the
// float ones on sameShapeGrid's flat grid (one pack a thread, not capped) by default and on
// linearGrid (at most maxBlocks blocks) for the "stride" baseline, the others on linearGrid.
func simBinarySame(l *cudadrv.KernelLaunch, in, out DType, f func(out, a, b simTensor, i int64)) error {
	n := int(l.U64Arg(3))
	v, err := simViewsOf(l, []int{0, 1, 2}, []DType{out, in, in}, []int{n, n, n})
	if err != nil {
		return err
	}
	for i := range int64(n) {
		f(v[0], v[1], v[2], i)
	}
	return nil
}

// simLayout reads maxBroadcastDims dimensions starting at argument first, then one stride
// array of maxBroadcastDims per operand, and checks that the dimensions multiply to n and that
// no stride is negative.
func simLayout(l *cudadrv.KernelLaunch, n uint64, first, operands int) (dims [maxBroadcastDims]int64, strides [][maxBroadcastDims]int64, err error) {
	dims, strides, err = simLayoutSigned(l, n, first, operands)
	for k := range strides {
		for _, st := range strides[k] {
			if err == nil && st < 0 {
				err = fmt.Errorf("%s: negative stride", l.Name)
			}
		}
	}
	return dims, strides, err
}

// simLayoutSigned is simLayout for kernels whose strides may be negative (the strided copy of
// a Slice with negative steps).
func simLayoutSigned(l *cudadrv.KernelLaunch, n uint64, first, operands int) (dims [maxBroadcastDims]int64, strides [][maxBroadcastDims]int64, err error) {
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

// simBinaryBcast is cudaep_<stem>_bcast_<t>(out, a, b, n, dims[6], aStrides[6], bStrides[6]).
func simBinaryBcast(l *cudadrv.KernelLaunch, in, out DType, f func(out simTensor, i int64, a simTensor, ai int64, b simTensor, bi int64)) error {
	n := l.U64Arg(3)
	dims, strides, err := simLayout(l, n, 4, 2)
	if err != nil {
		return err
	}
	v, err := simViewsOf(l, []int{0, 1, 2}, []DType{out, in, in}, []int{int(n), simExtent(dims, strides[0]), simExtent(dims, strides[1])})
	if err != nil {
		return err
	}
	simWalk(dims, strides, func(i int, offs []int64) { f(v[0], int64(i), v[1], offs[0], v[2], offs[1]) })
	return nil
}

// simExpand is cudaep_expand_<size>(out, in, n, dims[6], strides[6]); a negative stride reads
// below the input address.
func simExpand(l *cudadrv.KernelLaunch, dt DType) error {
	n := l.U64Arg(2)
	dims, strides, err := simLayoutSigned(l, n, 3, 1)
	if err != nil {
		return err
	}
	lo, hi := int64(0), int64(0)
	for i, d := range dims {
		if st := strides[0][i]; st < 0 {
			lo += (d - 1) * st
		} else {
			hi += (d - 1) * st
		}
	}
	out, err := simView(l, l.PtrArg(0), dt, int(n))
	if err != nil {
		return err
	}
	in, err := simView(l, l.PtrArg(1)-cudadrv.DevicePtr(-lo*int64(dt.Size())), dt, int(hi-lo+1))
	if err != nil {
		return err
	}
	simWalk(dims, strides, func(i int, offs []int64) { out.copyElem(int64(i), in, offs[0]-lo) })
	return nil
}

// simWhere is cudaep_where_<size>(out, c, x, y, n, dims[4], cStrides[4], xStrides[4],
// yStrides[4]); the four dimensions are padded to the six simLayout's walk takes.
func simWhere(l *cudadrv.KernelLaunch, dt DType) error {
	dims, strides, err := simWhereLayout(l, 5, 3)
	if err != nil {
		return err
	}
	n := l.U64Arg(4)
	v, err := simViewsOf(l, []int{0, 1, 2, 3}, []DType{dt, Bool, dt, dt},
		[]int{int(n), simExtent(dims, strides[0]), simExtent(dims, strides[1]), simExtent(dims, strides[2])})
	if err != nil {
		return err
	}
	simWalk(dims, strides, func(i int, offs []int64) {
		if v[1].b8[offs[0]] != 0 {
			v[0].copyElem(int64(i), v[2], offs[1])
		} else {
			v[0].copyElem(int64(i), v[3], offs[2])
		}
	})
	return nil
}

// simWhereUpdate is cudaep_where_update_<size>(out, c, src, n, dims[4], cStrides[4],
// srcStrides[4], when): out[i] = src[i] where c[i] == when, the other elements left as they are.
func simWhereUpdate(l *cudadrv.KernelLaunch, dt DType) error {
	return simWhereUpdates(l, dt, 4, []int{0}, 1, []int{2})
}

// simWhereUpdate2 is cudaep_where_update2_<size>(out0, out1, c, src0, src1, n, dims[4],
// cStrides[4], srcStrides[4], when), grid (blocks, 2): cudaep_where_update_<size> of (out0,
// src0) and of (out1, src1).
func simWhereUpdate2(l *cudadrv.KernelLaunch, dt DType) error {
	if l.Grid.Y != 2 {
		return fmt.Errorf("%s: grid %v; the pair needs y = 2", l.Name, l.Grid)
	}
	return simWhereUpdates(l, dt, 6, []int{0, 1}, 2, []int{3, 4})
}

// simWhereUpdates runs the update kernels' problems: out[p] (argument outs[p]) updated from
// srcs[p], the condition at argument c, the dimensions from argument first on.
func simWhereUpdates(l *cudadrv.KernelLaunch, dt DType, first int, outs []int, c int, srcs []int) error {
	dims, strides, err := simWhereLayout(l, first, 2)
	if err != nil {
		return err
	}
	n := l.U64Arg(first - 1)
	when := l.U32Arg(first + 3*maxWhereDims)
	if when > 1 {
		return fmt.Errorf("%s: when is %d, not 0 or 1", l.Name, when)
	}
	for p := range outs {
		v, err := simViewsOf(l, []int{outs[p], c, srcs[p]}, []DType{dt, Bool, dt},
			[]int{int(n), simExtent(dims, strides[0]), simExtent(dims, strides[1])})
		if err != nil {
			return err
		}
		simWalk(dims, strides, func(i int, offs []int64) {
			if (v[1].b8[offs[0]] != 0) == (when == 1) {
				v[0].copyElem(int64(i), v[2], offs[1])
			}
		})
	}
	return nil
}

// simWhereLayout reads the Where kernels' dimensions (from argument first on, n just before)
// and the strides of their ops operands after them, padded to the six dimensions simLayout's
// walk takes, and checks them against n.
func simWhereLayout(l *cudadrv.KernelLaunch, first, ops int) ([maxBroadcastDims]int64, [][maxBroadcastDims]int64, error) {
	n := l.U64Arg(first - 1)
	var dims [maxBroadcastDims]int64
	strides := make([][maxBroadcastDims]int64, ops)
	off := maxBroadcastDims - maxWhereDims
	total := uint64(1)
	for i := range dims {
		dims[i] = 1
	}
	for i := range maxWhereDims {
		dims[off+i] = l.I64Arg(first + i)
		if dims[off+i] < 1 {
			return dims, nil, fmt.Errorf("%s: dimension %d is %d", l.Name, i, dims[off+i])
		}
		total *= uint64(dims[off+i])
		for k := range ops {
			strides[k][off+i] = l.I64Arg(first + (k+1)*maxWhereDims + i)
			if strides[k][off+i] < 0 {
				return dims, nil, fmt.Errorf("%s: negative stride", l.Name)
			}
		}
	}
	if total != n {
		return dims, nil, fmt.Errorf("%s: dimensions %v hold %d elements, n is %d", l.Name, dims, total, n)
	}
	return dims, strides, nil
}

// simUnary is cudaep_<op>_<t>(out, x, n).
func simUnary(l *cudadrv.KernelLaunch, dt DType, f func(x float64) float64) error {
	n := int(l.U64Arg(2))
	v, err := simViewsOf(l, []int{0, 1}, []DType{dt, dt}, []int{n, n})
	if err != nil {
		return err
	}
	for i := range int64(n) {
		// The kernels compute in float32: round the input's result there first.
		v[0].setFloat(i, float64(float32(f(v[1].float(i)))))
	}
	return nil
}

// simCast is cudaep_cast_<from>_<to>(out, x, n), with the conversions of cast.cu.
func simCast(l *cudadrv.KernelLaunch, from, to DType) error {
	n := int(l.U64Arg(2))
	v, err := simViewsOf(l, []int{0, 1}, []DType{to, from}, []int{n, n})
	if err != nil {
		return err
	}
	out, x := v[0], v[1]
	for i := range int64(n) {
		switch {
		case to == Bool:
			out.setInt(i, b2i(x.nonzero(i)))
		case isFloat(to) && isFloat(from):
			out.setFloat(i, float64(float32(x.float(i))))
		case isFloat(to):
			out.setFloat(i, float64(float32(x.int(i)))) // int64 → float32 rounds once
		case to == Int32 && isFloat(from):
			out.setInt(i, int64(truncInt32(x.float(i))))
		default:
			out.setInt(i, x.int(i))
		}
	}
	return nil
}

// truncInt32 is cvt.rzi.s32.f32: truncation toward zero, saturated to int32, NaN 0.
func truncInt32(v float64) int32 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt32:
		return math.MaxInt32
	case v <= math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// simWarpBlock checks a block shape the warp-level reductions accept: one-dimensional, a
// whole number of warps, at most 1024 threads.
func simWarpBlock(l *cudadrv.KernelLaunch) error {
	if b := l.Block; b.Y != 1 || b.Z != 1 || b.X%32 != 0 || b.X > 1024 {
		return fmt.Errorf("%s: block %v: the kernel needs a one-dimensional block of whole warps", l.Name, b)
	}
	return nil
}

// simSoftmaxLine is the float32 softmax of one line of length elements (element j at at(j))
// written through set, as the kernels compute it: m the line's max (max.f32, which skips
// NaN), s the sum of expf(x − m), then expf(x − m) · (1/s). With threads > 0 (the rows
// kernel's block) each thread combines its elements and the block its threads'
// (simBlockReduce); with 0 one thread walks the line in order (the cols kernel).
func simSoftmaxLine(length int, at func(j int) float32, set func(j int, v float32), threads int) {
	exp := func(v float32) float32 { return float32(math.Exp(float64(v))) }
	var m, s float32
	if threads == 0 {
		m = float32(math.Inf(-1))
		for j := range length {
			m = simFmaxf(m, at(j))
		}
		for j := range length {
			s += exp(at(j) - m)
		}
	} else {
		part := make([]float32, threads)
		for t := range part {
			part[t] = float32(math.Inf(-1))
		}
		simThreadWalk(length, threads, 1, func(t, j int) { part[t] = simFmaxf(part[t], at(j)) })
		m = simBlockReduce(part, float32(math.Inf(-1)), simFmaxf)
		clear(part)
		simThreadWalk(length, threads, 1, func(t, j int) { part[t] += exp(at(j) - m) })
		s = simBlockReduce(part, 0, simSumOp)
	}
	inv := 1 / s
	for j := range length {
		set(j, exp(at(j)-m)*inv)
	}
}

// simSoftmax normalizes the lines of [outer, length, inner] in x into out: one block of
// threads per line (threads 0: one thread per line, the cols kernel).
func simSoftmax(l *cudadrv.KernelLaunch, dt DType, outer, length, inner uint64, threads int) error {
	total := int(outer * length * inner)
	v, err := simViewsOf(l, []int{0, 1}, []DType{dt, dt}, []int{total, total})
	if err != nil {
		return err
	}
	out, x := v[0], v[1]
	line := make([]float32, length)
	for o := uint64(0); o < outer; o++ {
		for in := uint64(0); in < inner; in++ {
			base := o*length*inner + in
			for j := range line {
				line[j] = float32(x.float(int64(base + uint64(j)*inner)))
			}
			simSoftmaxLine(len(line), func(j int) float32 { return line[j] }, func(j int, y float32) {
				out.setFloat(int64(base+uint64(j)*inner), float64(y))
			}, threads)
		}
	}
	return nil
}

// simSoftmaxRows is cudaep_softmax_rows_<t>(out, x, rows, length).
func simSoftmaxRows(l *cudadrv.KernelLaunch, dt DType) error {
	if err := simWarpBlock(l); err != nil {
		return err
	}
	return simSoftmax(l, dt, l.U64Arg(2), l.U64Arg(3), 1, int(l.Block.X))
}

// simSoftmaxCols is cudaep_softmax_cols_<t>(out, x, outer, length, inner).
func simSoftmaxCols(l *cudadrv.KernelLaunch, dt DType) error {
	return simSoftmax(l, dt, l.U64Arg(2), l.U64Arg(3), l.U64Arg(4), 0)
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
