package kernels

import (
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["Reshape"] = builder{inputNames: []string{"data", "shape"}, build: buildReshape}
	builders["Squeeze"] = builder{inputNames: []string{"data", "axes"}, build: buildSqueeze}
	builders["Unsqueeze"] = builder{inputNames: []string{"data", "axes"}, build: buildUnsqueeze}
	builders["Expand"] = builder{inputNames: []string{"input", "shape"}, build: buildExpand}
	builders["Transpose"] = builder{inputNames: []string{"data"}, build: buildTranspose}
	builders["Slice"] = builder{inputNames: []string{"data", "starts", "ends", "axes", "steps"}, build: buildSlice}
}

// stridedCopyKernel writes its contiguous output from its first input read through strides:
// the cudaep_expand_<size>(out, in, n, dims[6], strides[6]) kernel, which Expand, Transpose and
// Slice share. The input is read from its address plus offset bytes.
type stridedCopyKernel struct {
	kernelBase
	fn      *cudadrv.Function
	n       uint64
	offset  cudadrv.DevicePtr
	dims    [maxBroadcastDims]int64
	strides [maxBroadcastDims]int64
	grid    cudadrv.Dim3
	args    cudadrv.KernelArgs
}

// newStridedCopy builds a stridedCopyKernel for an output of info out whose element at
// coordinates c (of dims) is the input's element offset + Σ c·strides (in elements): offset is
// non-negative, and a stride is negative where a Slice walks an axis backwards. It merges
// dimensions and refuses more than maxBroadcastDims after merging.
func newStridedCopy(l *Library, s opSpec, out TensorInfo, dims, strides []int64, offset int64) (Kernel, error) {
	if err := s.checkOutput(out.Shape); err != nil {
		return nil, err
	}
	layout := mergeDims(dims, strides)
	if len(layout.dims) > maxBroadcastDims {
		return nil, s.errorf("the output %s needs %d dimensions after merging neighbours; at most %d are supported", out, len(layout.dims), maxBroadcastDims)
	}
	k := &stridedCopyKernel{kernelBase: newBase(l, s, out), fn: l.function("cudaep_expand_" + out.DType.sizeSuffix())}
	k.n = uint64(out.NumElements())
	k.offset = cudadrv.DevicePtr(offset * int64(out.DType.Size()))
	k.dims, k.strides = layout.padded(0)
	k.grid = linearGrid(k.n)
	return k, nil
}

// Execute queues the strided copy.
func (k *stridedCopyKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr + k.offset).U64(k.n)
	for _, d := range k.dims {
		a.I64(d)
	}
	for _, st := range k.strides {
		a.I64(st)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// checkIntsInput refuses a shape or axes input i that is not int64, or not of rank 1 when
// vector (rank 0 or 1 otherwise).
func (s opSpec) checkIntsInput(i int, vector bool) error {
	minRank, maxRank := 0, 1
	if vector {
		minRank = 1
	}
	return s.checkInput(i, []DType{Int64}, minRank, maxRank)
}

// buildReshape builds Reshape (opset 5 on, shape a constant input): 0 copies the input's
// dimension (unless allowzero=1, opset 14), -1 is inferred. The output is a copy.
func buildReshape(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(5, "earlier opsets took the shape as an attribute"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkIntsInput(1, true); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"allowzero": AttrInt}); err != nil {
		return nil, err
	}
	shape, err := s.constInts(1, "Reshape's output shape is its values")
	if err != nil {
		return nil, err
	}
	allowZero := s.intAttr("allowzero", 0) == 1
	in := s.Inputs[0]
	n := in.NumElements() // checkInput bounded it: 1 to 2^40
	out := make([]int64, len(shape))
	infer := -1
	known := int64(1)
	for i, d := range shape {
		switch {
		case d == 0 && !allowZero:
			if i >= len(in.Shape) {
				return nil, s.errorf("%s holds 0 at position %d, but the data has rank %d (0 copies the data's dimension)", s.input(1), i, len(in.Shape))
			}
			out[i] = in.Shape[i]
		case d == -1:
			if infer >= 0 {
				return nil, s.errorf("%s %v holds -1 more than once", s.input(1), shape)
			}
			infer = i
			continue
		case d <= 0:
			return nil, s.errorf("%s %v holds %d; dimensions must be positive, 0 or -1 (empty tensors are not supported)", s.input(1), shape, d)
		default:
			out[i] = d
		}
		// The known dimensions are positive, so their product only grows: past n it can
		// never come back to it (and it must not wrap around int64 on the way).
		if out[i] > n || known > n/out[i] {
			return nil, s.errorf("%s %v gives more elements than the data %s has (%d): dimension %d at position %d", s.input(1), shape, in, n, out[i], i)
		}
		known *= out[i]
	}
	if infer >= 0 {
		if n%known != 0 {
			return nil, s.errorf("%s %v cannot reshape %s: %d elements are not a multiple of %d", s.input(1), shape, in, n, known)
		}
		out[infer] = n / known
		known *= out[infer]
	}
	if known != n {
		return nil, s.errorf("%s %v gives %d elements; the data %s has %d", s.input(1), shape, known, in, n)
	}
	return newCopy(l, s, TensorInfo{DType: in.DType, Shape: out}), nil
}

// axesOf returns the axes of Squeeze or Unsqueeze: the attribute before opset 13, the constant
// input from 13; present is false when neither is given. Axes are normalized against rank
// and must be distinct.
func axesOf(s opSpec, rank int) (axes []int, present bool, err error) {
	var raw []int64
	if s.Opset < 13 {
		if err := s.checkInputCount(1, 1); err != nil {
			return nil, false, err
		}
		if err := s.checkAttrs(map[string]AttrKind{"axes": AttrInts}); err != nil {
			return nil, false, err
		}
		a, ok := s.Attrs["axes"]
		if !ok {
			return nil, false, nil
		}
		raw = a.Ints()
	} else {
		if err := s.checkInputCount(1, 2); err != nil {
			return nil, false, err
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, false, err
		}
		if len(s.Inputs) < 2 {
			return nil, false, nil
		}
		if err := s.checkIntsInput(1, true); err != nil {
			return nil, false, err
		}
		raw, err = s.constInts(1, s.Op+"'s output shape depends on its axes")
		if err != nil {
			return nil, false, err
		}
	}
	axes = make([]int, len(raw))
	for i, a := range raw {
		if a < -int64(rank) || a >= int64(rank) {
			return nil, true, s.errorf("axis %d is outside [%d, %d]", a, -rank, rank-1)
		}
		if a < 0 {
			a += int64(rank)
		}
		if slices.Contains(axes[:i], int(a)) {
			return nil, true, s.errorf("axes %v name axis %d twice", raw, a)
		}
		axes[i] = int(a)
	}
	return axes, true, nil
}

// buildSqueeze builds Squeeze (opset 1 on): the axes given, or every dimension of 1. The
// output is a copy.
func buildSqueeze(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 2); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	axes, present, err := axesOf(s, len(in.Shape))
	if err != nil {
		return nil, err
	}
	var out []int64
	for i, d := range in.Shape {
		drop := d == 1
		if present {
			drop = slices.Contains(axes, i)
			if drop && d != 1 {
				return nil, s.errorf("axis %d of %s has dimension %d; only dimensions of 1 can be squeezed", i, in, d)
			}
		}
		if !drop {
			out = append(out, d)
		}
	}
	return newCopy(l, s, TensorInfo{DType: in.DType, Shape: out}), nil
}

// buildUnsqueeze builds Unsqueeze (opset 1 on): a dimension of 1 at each axis of the output.
// The output is a copy.
func buildUnsqueeze(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 2); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	// The axes index the output, whose rank is the input's plus their count.
	n := 0
	if s.Opset < 13 {
		if a, ok := s.Attrs["axes"]; ok && a.Kind() == AttrInts {
			n = len(a.Ints())
		}
	} else if len(s.Inputs) == 2 {
		n = int(s.Inputs[1].NumElements())
	}
	rank := len(in.Shape) + n
	axes, present, err := axesOf(s, rank)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, s.errorf("the axes are required")
	}
	out := make([]int64, 0, rank)
	next := 0
	for i := range rank {
		if slices.Contains(axes, i) {
			out = append(out, 1)
		} else {
			out = append(out, in.Shape[next])
			next++
		}
	}
	return newCopy(l, s, TensorInfo{DType: in.DType, Shape: out}), nil
}

// buildExpand builds Expand (opset 8 on, shape a constant input): the input broadcast with
// the shape, numpy style (either side may be 1).
func buildExpand(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(8, "Expand entered ONNX in opset 8"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkIntsInput(1, true); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	shape, err := s.constInts(1, "Expand's output shape depends on its values")
	if err != nil {
		return nil, err
	}
	for _, d := range shape {
		if d <= 0 {
			return nil, s.errorf("%s %v holds %d; dimensions must be positive", s.input(1), shape, d)
		}
	}
	in := s.Inputs[0]
	out, ok := BroadcastShapes(in.Shape, shape)
	if !ok {
		return nil, s.errorf("%s does not broadcast with %s %v (numpy rules)", in, s.input(1), shape)
	}
	return newStridedCopy(l, s, TensorInfo{DType: in.DType, Shape: out}, out, broadcastStrides(in.Shape, out), 0)
}

// buildTranspose builds Transpose (opset 1 on): perm (default: reversed axes) permutes the
// dimensions; the output is gathered through the permuted strides.
func buildTranspose(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"perm": AttrInts}); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	rank := len(in.Shape)
	perm := make([]int64, rank)
	for i := range perm {
		perm[i] = int64(rank - 1 - i)
	}
	if a, ok := s.Attrs["perm"]; ok {
		perm = a.Ints()
		seen := make([]bool, rank)
		if len(perm) != rank {
			return nil, s.errorf(`attribute "perm" %v has %d entries for an input of rank %d`, perm, len(perm), rank)
		}
		for _, p := range perm {
			if p < 0 || p >= int64(rank) || seen[p] {
				return nil, s.errorf(`attribute "perm" %v is not a permutation of 0..%d`, perm, rank-1)
			}
			seen[p] = true
		}
	}
	own := contiguousStrides(in.Shape)
	out := make([]int64, rank)
	strides := make([]int64, rank)
	for i, p := range perm {
		out[i] = in.Shape[p]
		strides[i] = own[p]
	}
	info := TensorInfo{DType: in.DType, Shape: out}
	layout := mergeDims(out, strides)
	if k, err := newTranspose2D(l, s, info, layout); k != nil || err != nil {
		return k, err
	}
	n := len(layout.dims)
	if n >= 2 && n <= maxBroadcastDims && layout.strides[0][n-1] != 1 {
		// The output's last dimension is not the input's innermost one: a tiled transpose
		// keeps both the reads and the writes coalesced.
		if a := slices.Index(layout.strides[0], 1); a >= 0 {
			if err := s.checkOutput(out); err != nil {
				return nil, err
			}
			k := &transposeKernel{kernelBase: newBase(l, s, info), fn: l.function("cudaep_transpose_" + in.DType.sizeSuffix())}
			k.dims, k.strides = layout.padded(0)
			k.a = uint32(a + maxBroadcastDims - n)
			tile := transposeTile(in.DType)
			tiles := uint64(1)
			for i, d := range k.dims {
				switch {
				case i == int(k.a) || i == maxBroadcastDims-1:
					tiles *= (uint64(d) + tile - 1) / tile
				default:
					tiles *= uint64(d)
				}
			}
			k.grid = cudadrv.Dim3{X: uint32(min(tiles, maxTransposeBlocks)), Y: 1, Z: 1}
			return k, nil
		}
	}
	return newStridedCopy(l, s, info, out, strides, 0)
}

// maxTransposeBlocks caps the tiled transpose's grid; its grid-stride loop covers the rest.
const maxTransposeBlocks = 65536

// transposeBlock is the tiled transpose's block: 32×8 threads move a tile.
var transposeBlock = cudadrv.Dim3{X: 32, Y: 8, Z: 1}

// transposeTile is the side of the tiled transpose's square tiles for elements of dt, as
// cuda/datamove.cu instantiates them: 128 for 1- and 2-byte elements, 64 for wider ones.
func transposeTile(dt DType) uint64 {
	if dt.Size() <= 2 {
		return 128
	}
	return 64
}

// transposeKernel is a Transpose whose output's last dimension is not the input's innermost:
// cudaep_transpose_<size>(out, in, dims[6], strides[6], a) moves square tiles of (dimension a,
// the input-contiguous one, and the last dimension) through shared memory.
type transposeKernel struct {
	kernelBase
	fn            *cudadrv.Function
	dims, strides [maxBroadcastDims]int64
	a             uint32
	grid          cudadrv.Dim3
	args          cudadrv.KernelArgs
}

// Execute queues the transpose.
func (k *transposeKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr)
	for _, d := range k.dims {
		a.I64(d)
	}
	for _, st := range k.strides {
		a.I64(st)
	}
	a.U32(k.a)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, transposeBlock, 0, a)
}

// buildSlice builds Slice: opset 10 on with constant starts, ends and (optional) axes and
// steps inputs, or opsets 1 to 9 with the attributes. Starts and ends are clamped as ONNX says
// (negative values count from the end; for a negative step, which walks the axis backwards,
// start is clamped to [0, dim-1] and end to [-1, dim-1]); a slice that would be empty is
// refused (empty tensors are not supported), and so is a step of 0.
func buildSlice(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 5); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 1, anyRank); err != nil {
		return nil, err
	}
	in := s.Inputs[0]
	rank := len(in.Shape)
	var starts, ends, axes, steps []int64
	if s.Opset < 10 {
		if err := s.checkInputCount(1, 1); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(map[string]AttrKind{"starts": AttrInts, "ends": AttrInts, "axes": AttrInts}); err != nil {
			return nil, err
		}
		a, okA := s.Attrs["starts"]
		b, okB := s.Attrs["ends"]
		if !okA || !okB {
			return nil, s.errorf(`attributes "starts" and "ends" are required`)
		}
		starts, ends = a.Ints(), b.Ints()
		if ax, ok := s.Attrs["axes"]; ok {
			axes = ax.Ints()
		}
	} else {
		if err := s.checkInputCount(3, 5); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, err
		}
		lists := [][]int64{nil, nil, nil, nil}
		for i := 1; i < len(s.Inputs); i++ {
			if err := s.checkInput(i, []DType{Int32, Int64}, 1, 1); err != nil {
				return nil, err
			}
			v, err := s.constInts(i, "Slice's output shape depends on its values")
			if err != nil {
				return nil, err
			}
			lists[i-1] = v
		}
		starts, ends, axes, steps = lists[0], lists[1], lists[2], lists[3]
	}
	if len(ends) != len(starts) || (axes != nil && len(axes) != len(starts)) || (steps != nil && len(steps) != len(starts)) {
		return nil, s.errorf("starts %v, ends %v, axes %v and steps %v must have the same length", starts, ends, axes, steps)
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	out := append([]int64{}, in.Shape...)
	step := make([]int64, rank)
	first := make([]int64, rank)
	for i := range step {
		step[i] = 1
	}
	seen := make([]bool, rank)
	for i, a := range axes {
		if a < -int64(rank) || a >= int64(rank) {
			return nil, s.errorf("axis %d is outside [%d, %d]", a, -rank, rank-1)
		}
		if a < 0 {
			a += int64(rank)
		}
		if seen[a] {
			return nil, s.errorf("axes %v name axis %d twice", axes, a)
		}
		seen[a] = true
		st := int64(1)
		if steps != nil {
			st = steps[i]
		}
		if st == 0 {
			return nil, s.errorf("step 0 on axis %d: steps must not be 0", a)
		}
		d := in.Shape[a]
		var b, e, count int64
		if st > 0 {
			b, e = clampSliceIndex(starts[i], d, 0, d), clampSliceIndex(ends[i], d, 0, d)
		} else {
			b, e = clampSliceIndex(starts[i], d, 0, d-1), clampSliceIndex(ends[i], d, -1, d-1)
		}
		if e == b || (e < b) == (st > 0) {
			return nil, s.errorf("the slice [%d:%d:%d] of axis %d (dimension %d) is empty; empty tensors are not supported", starts[i], ends[i], st, a, d)
		}
		// ceil(|e − b| / |st|) without forming |e − b| + |st| − 1 or −st, which overflow
		// for steps near ±2^63: 0 <= |e − b| − 1 < 2^40 here, and a quotient by a negative
		// step is the negated one, truncated toward zero alike.
		if st > 0 {
			count = (e-b-1)/st + 1
		} else {
			count = 1 - (b-e-1)/st
		}
		if count == 1 {
			st = 1 // one element: the step is never taken (and times a stride it could overflow)
		}
		out[a] = count
		step[a], first[a] = st, b
	}
	own := contiguousStrides(in.Shape)
	strides := make([]int64, rank)
	offset := int64(0)
	for i := range rank {
		strides[i] = own[i] * step[i]
		offset += own[i] * first[i]
	}
	return newStridedCopy(l, s, TensorInfo{DType: in.DType, Shape: out}, out, strides, offset)
}

// clampSliceIndex resolves a Slice start or end against dimension d: negative values count
// from the end, and the result is clamped to [lo, hi].
func clampSliceIndex(v, d, lo, hi int64) int64 {
	if v < 0 {
		v += d // v >= MinInt64 and d > 0: no overflow
	}
	return min(max(v, lo), hi)
}

// transpose2dKernel is a Transpose that swaps the last two axes of a batch of matrices (plain
// 2-D included), the transformer's case: cudaep_transpose2d_<variant>_<size>(out, in, batch,
// rows, cols) reads batch × rows × cols and writes batch × cols × rows, on a grid of (column
// tiles, row tiles, batch) 32×8-thread blocks. A pair kernel needs its two addresses to be
// multiples of two elements; Execute launches fallback (tile64) when they are not.
type transpose2dKernel struct {
	kernelBase
	variant           string
	fn, fallback      *cudadrv.Function
	align             uint64 // fn's address alignment, bytes
	batch, rows, cols uint32
	grid, fallbackGrd cudadrv.Dim3
	args              cudadrv.KernelArgs
}

// transpose2dVariants are the batched 2-D transpose's kernels (cuda/datamove.cu), and
// transpose2dRows the input rows of one tile of each; a tile is 32 input columns wide (64 for
// the pair kernels).
var (
	transpose2dVariants = []string{"tile64", "pair4", "pair8"}
	transpose2dRows     = map[string]uint64{"tile64": 64, "pair4": 64, "pair8": 128}
)

// batched2D reports whether a merged Transpose layout (output dimensions, input strides)
// swaps the last two axes of batch matrices of rows × cols (input shape), and returns them.
func batched2D(layout stridedLayout) (batch, rows, cols int64, ok bool) {
	d, st := layout.dims, layout.strides[0]
	switch {
	case len(d) == 2 && st[0] == 1 && st[1] == d[0]:
		return 1, d[1], d[0], true
	case len(d) == 3 && st[1] == 1 && st[2] == d[1] && st[0] == d[1]*d[2]:
		return d[0], d[2], d[1], true
	}
	return 0, 0, 0, false
}

// transpose2dKernelFor is the kernel a Transpose of elements of size bytes in rows × cols
// matrices gets: pairs of 2-byte elements (pair8) and of 4-byte ones (pair4) when both sides
// are even, 64-row tiles otherwise. On the H200 (256 MiB, bench/scripts/op-variants-gpu.sh) the pairs
// moved float32 at 0.83-0.86 of peak and float16 at 0.80-0.84, tile64 0.80-0.85 and 0.67-0.71,
// the general transpose 0.45 and 0.32.
func transpose2dKernelFor(size int, rows, cols int64) string {
	switch {
	case rows%2 != 0 || cols%2 != 0:
		return "tile64"
	case size == 2:
		return "pair8"
	case size == 4:
		return "pair4"
	}
	return "tile64"
}

// newTranspose2D returns the batched 2-D transpose for a merged Transpose layout, or nil (and
// no error) when the layout is not one, its dimensions do not fit the kernels' 32-bit
// arithmetic, or a test forced the general transpose ("nd", variants.go).
func newTranspose2D(l *Library, s opSpec, out TensorInfo, layout stridedLayout) (Kernel, error) {
	batch, rows, cols, ok := batched2D(layout)
	if !ok || rows >= 1<<31 || cols >= 1<<31 || batch >= 1<<32 || forcedVariant("transpose2d") == "nd" {
		return nil, nil
	}
	size := out.DType.Size()
	v := transpose2dKernelFor(size, rows, cols)
	sfx := out.DType.sizeSuffix()
	fn, fallback := l.function("cudaep_transpose2d_"+v+"_"+sfx), l.function("cudaep_transpose2d_tile64_"+sfx)
	if err := s.checkOutput(out.Shape); err != nil {
		return nil, err
	}
	k := &transpose2dKernel{kernelBase: newBase(l, s, out), variant: v, fn: fn, fallback: fallback, align: 1}
	k.batch, k.rows, k.cols = uint32(batch), uint32(rows), uint32(cols)
	k.grid = transpose2dGrid(v, batch, rows, cols)
	k.fallbackGrd = transpose2dGrid("tile64", batch, rows, cols)
	if v == "pair4" || v == "pair8" {
		k.align = 2 * uint64(size)
	}
	return k, nil
}

// maxGridYZ is the largest grid extent along y and z; the 2-D transposes loop over the rest.
const maxGridYZ = 65535

// transpose2dGrid is variant v's grid: one block per tile of a row of tiles along x, row
// tiles along y, batch along z (y and z capped at maxGridYZ).
func transpose2dGrid(v string, batch, rows, cols int64) cudadrv.Dim3 {
	width := int64(32)
	if v == "pair4" || v == "pair8" {
		width = 64
	}
	tr := int64(transpose2dRows[v])
	return cudadrv.Dim3{X: uint32((cols + width - 1) / width), Y: uint32(min((rows+tr-1)/tr, maxGridYZ)), Z: uint32(min(batch, maxGridYZ))}
}

// alignedFor tells whether the tensors' addresses suit fn (else Execute launches fallback).
func (k *transpose2dKernel) alignedFor(inputs, outputs []Tensor) bool {
	return (uint64(inputs[0].Ptr)|uint64(outputs[0].Ptr))%k.align == 0
}

// launchVariant is the kernel Execute launches for these tensors.
func (k *transpose2dKernel) launchVariant(inputs, outputs []Tensor) string {
	if !k.alignedFor(inputs, outputs) {
		return "tile64"
	}
	return k.variant
}

// Execute queues the transpose.
func (k *transpose2dKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	fn, grid := k.fn, k.grid
	if !k.alignedFor(inputs, outputs) {
		fn, grid = k.fallback, k.fallbackGrd
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).U32(k.batch).U32(k.rows).U32(k.cols)
	return k.lib.rt.Stream.Launch(fn, grid, transposeBlock, 0, a)
}
