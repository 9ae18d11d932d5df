package kernels

import (
	"slices"
	"strings"

	"github.com/cudaep/cudaep/cudadrv"
)

// The ops of the "cudaep" domain: fusions of op chains that exporters emit, which a graph
// rewrite (package ep) replaces with one node. Their kernels are in cuda/elementwise.cu.

func init() {
	builders["cudaep.RotateHalf"] = builder{inputNames: []string{"X", "cos", "sin"}, build: buildRotateHalf}
	builders["cudaep.SiluMul"] = builder{inputNames: []string{"A", "B"}, build: buildSiluMul}
	builders["cudaep.WherePair"] = builder{inputNames: []string{"condition", "X0", "Y0", "X1", "Y1"}, build: buildWherePair}
	builders["cudaep.RotateHalfPair"] = builder{inputNames: []string{"X0", "X1", "cos", "sin"}, build: buildRotateHalfPair}
}

// fusedEntries lists the entry points of the cudaep ops in ptx/elementwise.ptx.
func fusedEntries() []string {
	e := typedEntries([]string{"cudaep_rotate_half", "cudaep_rotate_half2", "cudaep_silu_mul"}, floatTypes)
	for _, size := range []string{"b8", "b16", "b32", "b64"} {
		e = append(e, "cudaep_where_update2_"+size)
	}
	return e
}

// wherePairKernel is cudaep.WherePair(condition, X0, Y0, X1, Y1) → (Z0, Z1): Z0 = Where(
// condition, X0, Y0) and Z1 = Where(condition, X1, Y1), X1 of X0's dtype and shape and Y1 of
// Y0's (a decode step's key and value cache updates, which read one position mask). When each
// output is in place on its own Y (or each on its own X: InPlace), one launch of
// cudaep_where_update2_<size>(z0, z1, c, src0, src1, n, dims[4], cStrides[4], srcStrides[4],
// when), grid (Where's, 2), stores both updates; otherwise each Where runs as Where does.
type wherePairKernel struct {
	kernelBase
	w       [2]*whereKernel
	update2 *cudadrv.Function
	ins     [2][3]Tensor // each Where's inputs (scratch)
	args    cudadrv.KernelArgs
}

// buildWherePair builds cudaep.WherePair (any opset of the cudaep domain): two Wheres as Where
// (opset 16) takes them, over one condition.
func buildWherePair(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(5, 5); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	for i := 1; i <= 2; i++ {
		if a, b := s.Inputs[i], s.Inputs[i+2]; !a.Equal(b) {
			return nil, s.errorf("%s is %s and %s is %s; they must have one dtype and shape", s.input(i), a, s.input(i+2), b)
		}
	}
	k := &wherePairKernel{}
	var outs []TensorInfo
	for p := range 2 {
		spec := Spec{Op: "Where", Opset: 16, Inputs: []TensorInfo{s.Inputs[0], s.Inputs[1+2*p], s.Inputs[2+2*p]}}
		w, err := buildWhere(l, opSpec{Spec: &spec, inputNames: []string{"condition", "X", "Y"}})
		if err != nil {
			return nil, s.errorf("Where %d of the pair: %v", p, err)
		}
		k.w[p] = w.(*whereKernel)
		outs = append(outs, w.Outputs()[0])
	}
	k.kernelBase = newBase(l, s, outs...)
	k.update2 = l.function("cudaep_where_update2_" + s.Inputs[1].DType.sizeSuffix())
	return k, nil
}

// Execute queues both Wheres: one launch when both are in place on the same operand.
func (k *wherePairKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	for p := range 2 {
		k.ins[p] = [3]Tensor{inputs[0], inputs[1+2*p], inputs[2+2*p]}
	}
	w := k.w[0]
	if op := k.pairedOperand(outputs); op != 0 {
		a := &k.args
		a.Reset()
		a.Ptr(outputs[0].Ptr).Ptr(outputs[1].Ptr).Ptr(inputs[0].Ptr).Ptr(k.ins[0][3-op].Ptr).Ptr(k.ins[1][3-op].Ptr)
		w.updateArgs(a, op)
		grid := w.grid
		grid.Y = 2
		return k.lib.rt.Stream.Launch(k.update2, grid, linearBlock, 0, a)
	}
	for p := range 2 {
		if err := k.w[p].Execute(k.ins[p][:], outputs[p:p+1]); err != nil {
			return err
		}
	}
	return nil
}

// pairedOperand returns the operand (1: X, 2: Y) both outputs are in place on, from k.ins,
// else 0.
func (k *wherePairKernel) pairedOperand(outputs []Tensor) int {
	op := k.w[0].inPlaceOperand(k.ins[0][:], outputs[0:1])
	if op == 0 || k.w[1].inPlaceOperand(k.ins[1][:], outputs[1:2]) != op {
		return 0
	}
	return op
}

// inPlace reports whether output may be input's memory: output 0 X0 or Y0, output 1 X1 or Y1,
// as Where allows.
func (k *wherePairKernel) inPlace(output, input int) bool {
	if output < 0 || output > 1 || input < 1+2*output || input > 2+2*output {
		return false
	}
	return k.w[output].inPlace(0, input-2*output)
}

// rotateHalfKernel is cudaep.RotateHalf, one launch of cudaep_rotate_half_<t>(y, x, cos, sin,
// rows, half, dims[6], cosStrides[6], sinStrides[6]) on linearGrid over the work items (16-byte
// packs of a row's first half when half is a whole number of them).
type rotateHalfKernel struct {
	kernelBase
	fn         *cudadrv.Function
	rows, half uint64
	dims       [maxBroadcastDims]int64
	cosStrides [maxBroadcastDims]int64
	sinStrides [maxBroadcastDims]int64
	grid       cudadrv.Dim3
	args       cudadrv.KernelArgs
}

// buildRotateHalf builds cudaep.RotateHalf (any opset of the cudaep domain), the Hugging Face
// rotary embedding that torch.onnx exports as Mul(x, cos), Slice, Slice, Neg, Concat, Mul(·,
// sin), Add:
//
//	Y[…, i] = X[…, i] · cos[…, i] + R[…, i] · sin[…, i],
//	R[…, i] = −X[…, i + D/2] for i < D/2, X[…, i − D/2] from D/2 on.
//
// X is float32, float16 or bfloat16 of rank >= 1 with an even last dimension D; cos and sin
// have X's dtype and last dimension and shapes that broadcast to X's (numpy rules, the result
// exactly X's shape: e.g. X [B, H, S, D] with cos and sin [1, 1, S, D] or [S, D]). Y has X's
// shape and dtype; each element is computed in float32 and rounded once. At most six
// dimensions of cos and sin's broadcast may remain after merging neighbours (more is refused).
// Execute may run in place (Y the X buffer).
func buildRotateHalf(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(3, 3); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	rank := len(x.Shape)
	d := x.Shape[rank-1]
	if d%2 != 0 {
		return nil, s.errorf("%s has shape %s; its last dimension %d must be even (its halves are rotated into each other)", s.input(0), shapeString(x.Shape), d)
	}
	strides := make([][]int64, 2)
	for i := 1; i <= 2; i++ {
		if err := s.checkInput(i, floatTypes, 1, anyRank); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		sh := s.Inputs[i].Shape
		if last := sh[len(sh)-1]; last != d {
			return nil, s.errorf("%s has shape %s; its last dimension must be %s's, %d", s.input(i), shapeString(sh), s.input(0), d)
		}
		if out, ok := BroadcastShapes(x.Shape, sh); !ok || !slices.Equal(out, x.Shape) {
			return nil, s.errorf("%s has shape %s, which does not broadcast to %s's shape %s (numpy rules, the result being %s's shape)",
				s.input(i), shapeString(sh), s.input(0), shapeString(x.Shape), s.input(0))
		}
		strides[i-1] = broadcastStrides(sh, x.Shape)[:rank-1]
	}
	layout := mergeDims(x.Shape[:rank-1], strides...)
	if len(layout.dims) > maxBroadcastDims {
		return nil, s.errorf("broadcasting %s and %s over %s's shape %s needs %d dimensions after merging neighbours; at most %d are supported",
			s.input(1), s.input(2), s.input(0), shapeString(x.Shape), len(layout.dims), maxBroadcastDims)
	}
	k := &rotateHalfKernel{kernelBase: newBase(l, s, cloneInfo(x)), fn: l.function("cudaep_rotate_half_" + x.DType.suffix())}
	k.rows, k.half = uint64(product(x.Shape[:rank-1])), uint64(d/2)
	k.dims, k.cosStrides = layout.padded(0)
	_, k.sinStrides = layout.padded(1)
	items := k.rows * k.half
	if v := uint64(16 / x.DType.Size()); k.half%v == 0 {
		items /= v
	}
	k.grid = linearGrid(items)
	return k, nil
}

// Execute queues Y = X · cos + rotate_half(X) · sin. Y may be X itself; it must not overlap
// X otherwise, nor cos or sin.
func (k *rotateHalfKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).U64(k.rows).U64(k.half)
	for _, d := range k.dims {
		a.I64(d)
	}
	for _, st := range k.cosStrides {
		a.I64(st)
	}
	for _, st := range k.sinStrides {
		a.I64(st)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// rotateHalfPairKernel is cudaep.RotateHalfPair(X0, X1, cos, sin) → (Y0, Y1): cudaep.RotateHalf
// of X0 and of X1 with one cos and sin (a decode step's query and key), in one launch of
// cudaep_rotate_half2_<t>(y0, y1, x0, x1, cos, sin, rows0, rows1, half), grid (blocks, 2).
type rotateHalfPairKernel struct {
	kernelBase
	r    [2]*rotateHalfKernel
	fn   *cudadrv.Function
	grid cudadrv.Dim3
	args cudadrv.KernelArgs
}

// buildRotateHalfPair builds cudaep.RotateHalfPair (any opset of the cudaep domain): X0 and X1
// of one dtype and last dimension, each with cos and sin as cudaep.RotateHalf takes them, and
// cos and sin one row for every row of both (their elements the last dimension's count: a
// decode step's one position); Y0 and Y1 have X0's and X1's shapes. Execute may run in place
// (each Y its X).
func buildRotateHalfPair(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(4, 4); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	k := &rotateHalfPairKernel{}
	var outs []TensorInfo
	for p := range 2 {
		spec := Spec{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []TensorInfo{s.Inputs[p], s.Inputs[2], s.Inputs[3]}}
		r, err := buildRotateHalf(l, opSpec{Spec: &spec, inputNames: []string{"X", "cos", "sin"}})
		if err != nil {
			return nil, s.errorf("rotation %d of the pair: %v", p, err)
		}
		k.r[p] = r.(*rotateHalfKernel)
		outs = append(outs, r.Outputs()[0])
	}
	if a, b := s.Inputs[0], s.Inputs[1]; a.DType != b.DType || a.Shape[len(a.Shape)-1] != b.Shape[len(b.Shape)-1] {
		return nil, s.errorf("%s is %s and %s is %s; they must have one dtype and last dimension", s.input(0), a, s.input(1), b)
	}
	d := s.Inputs[0].Shape[len(s.Inputs[0].Shape)-1]
	for i := 2; i <= 3; i++ {
		if n := s.Inputs[i].NumElements(); n != d {
			return nil, s.errorf("%s has shape %s; a pair takes one row of %d elements for every row of both", s.input(i), shapeString(s.Inputs[i].Shape), d)
		}
	}
	k.kernelBase = newBase(l, s, outs...)
	k.fn = l.function("cudaep_rotate_half2_" + s.Inputs[0].DType.suffix())
	k.grid = k.r[0].grid
	k.grid.X = max(k.grid.X, k.r[1].grid.X)
	k.grid.Y = 2
	return k, nil
}

// Execute queues both rotations in one launch. Each Y may be its X; they must not overlap
// otherwise, nor cos or sin.
func (k *rotateHalfPairKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(outputs[1].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).Ptr(inputs[3].Ptr)
	a.U64(k.r[0].rows).U64(k.r[1].rows).U64(k.r[0].half)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// buildSiluMul builds cudaep.SiluMul (any opset of the cudaep domain), a gated MLP's
// Sigmoid(A), Mul(A, ·), Mul(·, B): Y = A · sigmoid(A) · B, elementwise, in float32 with one
// rounding on store. A and B are float32, float16 or bfloat16 of one dtype and the same shape
// (no broadcasting); Y has their shape and dtype. It is a same-shape float binary: one launch
// of cudaep_silu_mul_<t>(y, a, b, n) on sameShapeGrid's grid, and Execute may run in place.
func buildSiluMul(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	for i := range 2 {
		if err := s.checkInput(i, floatTypes, 0, anyRank); err != nil {
			return nil, err
		}
	}
	if err := s.checkSameDType(0, 1); err != nil {
		return nil, err
	}
	a, b := s.Inputs[0], s.Inputs[1]
	if !slices.Equal(a.Shape, b.Shape) {
		return nil, s.errorf("%s has shape %s and %s has shape %s; they must be the same (SiluMul does not broadcast)",
			s.input(0), shapeString(a.Shape), s.input(1), shapeString(b.Shape))
	}
	k := &binaryKernel{kernelBase: newBase(l, s, cloneInfo(a)), fn: l.function("cudaep_silu_mul_" + a.DType.suffix()), same: true}
	k.n = uint64(a.NumElements())
	k.grid, k.variant = sameShapeGrid(a.DType, k.n)
	return k, nil
}

// matMulGroupKernel is cudaep.MatMulGroup and the groups with a prologue
// (cudaep.NormMatMulGroup, cudaep.SkipNormMatMulGroup, cudaep.SiluMulMatMulGroup): the MatMuls
// of one row with each of their matrices, in one GEMV launch (gemvPlan) that computes the row
// first when the group has a prologue.
type matMulGroupKernel struct {
	kernelBase
	gemv   *gemvPlan
	rowIns int                          // the inputs the row is computed from; the matrices follow them
	skip   bool                         // gemvRMSNorm: input 1 is the skip row
	sum    bool                         // gemvRMSNorm: the last output is the sum of the row and the skip
	eps    float32                      // gemvRMSNorm's epsilon
	ys, bs [gemvGroup]cudadrv.DevicePtr // Execute's addresses (no allocation per launch)
}

// matMulGroupOp describes one of the group ops: its prologue and the names of the inputs the
// row is computed from.
type matMulGroupOp struct {
	pro     gemvPrologue
	rowIns  []string
	skipSum bool // the skip row is input 1 and the row's sum may be a last output
}

func init() {
	for op, g := range map[string]matMulGroupOp{
		"cudaep.MatMulGroup":         {gemvPlain, []string{"A"}, false},
		"cudaep.NormMatMulGroup":     {gemvRMSNorm, []string{"X", "scale"}, false},
		"cudaep.SkipNormMatMulGroup": {gemvRMSNorm, []string{"X", "skip", "scale"}, true},
		"cudaep.SiluMulMatMulGroup":  {gemvSilu, []string{"A", "B"}, false},
	} {
		names := append(slices.Clone(g.rowIns), "B0", "B1", "B2", "B3")
		builders[op] = builder{inputNames: names, build: func(l *Library, s opSpec) (Kernel, error) { return buildMatMulGroup(l, s, g) }}
	}
}

// buildMatMulGroup builds a group op (any opset of the cudaep domain): Y_i = MatMul(A, B_i)
// with ONNX MatMul's shapes and dtypes for 1 <= n <= 4 matrices B_i, in one GEMV launch. It is
// the decode step's q, k and v projections (or gate and up) of one hidden state: A must have
// one row (every dimension but the last 1), and each B_i must take MatMul's GEMV path (a
// matrix of A's dtype whose rows are whole 16-byte packs: N_i a multiple of 8 for float16 and
// bfloat16, 4 for float32), because the group exists to give that launch every matrix's
// column tiles. Anything else is refused (the graph keeps its ops). The ops and their row A:
//
//   - cudaep.MatMulGroup(A, B0, …): A as given.
//   - cudaep.NormMatMulGroup(X, scale, B0, …), attribute epsilon (default 1e-5): A =
//     SimplifiedLayerNormalization(X, scale) over X's last axis, rounded to X's dtype as that
//     op's output would be.
//   - cudaep.SkipNormMatMulGroup(X, skip, scale, B0, …), attribute epsilon: A =
//     SimplifiedLayerNormalization(X + skip, scale), skip of X's shape; with n + 1 outputs the
//     last is X + skip (com.microsoft.SkipSimplifiedLayerNormalization's fourth output).
//   - cudaep.SiluMulMatMulGroup(A, B, W0, …): the row is cudaep.SiluMul(A, B) = A·sigmoid(A)·B,
//     B of A's shape; the matrices are W_i.
//
// The row's inputs have the matrices' dtype; scale has the row's length.
func buildMatMulGroup(l *Library, s opSpec, op matMulGroupOp) (Kernel, error) {
	r := len(op.rowIns)
	if n := len(s.Inputs); n < r+1 || n > r+gemvGroup {
		return nil, s.errorf("got %d inputs, want %s and 1 to %d matrices", n, strings.Join(op.rowIns, ", "), gemvGroup)
	}
	attrs := map[string]AttrKind(nil)
	if op.pro == gemvRMSNorm {
		attrs = map[string]AttrKind{"epsilon": AttrFloat}
	}
	if err := s.checkAttrs(attrs); err != nil {
		return nil, err
	}
	n := len(s.Inputs) - r
	outs := n
	if op.skipSum && s.NumOutputs == n+1 {
		outs = n + 1
	}
	if s.NumOutputs > 0 && s.NumOutputs != outs {
		return nil, s.errorf("%d matrices make %d outputs; the node has %d", n, outs, s.NumOutputs)
	}
	a := s.Inputs[0]
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	for i := 1; i < r; i++ {
		if err := s.checkInput(i, floatTypes, 1, anyRank); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		want := a.Shape
		if op.pro == gemvRMSNorm && i == r-1 {
			want = a.Shape[len(a.Shape)-1:] // scale: the row's length
		}
		if !slices.Equal(s.Inputs[i].Shape, want) {
			return nil, s.errorf("%s has shape %s; it must be %s", s.input(i), shapeString(s.Inputs[i].Shape), shapeString(want))
		}
	}
	k := &matMulGroupKernel{rowIns: r, skip: op.skipSum, sum: outs > n}
	if op.pro == gemvRMSNorm {
		eps, err := s.checkEpsilon()
		if err != nil {
			return nil, err
		}
		k.eps = eps
	}
	var infos []TensorInfo
	var ns []int64
	for i := r; i < len(s.Inputs); i++ {
		part, err := buildMatMul(l, opSpec{Spec: &Spec{Op: "MatMul", Opset: 13, Inputs: []TensorInfo{a, s.Inputs[i]}},
			inputNames: []string{"A", "B"}})
		if err != nil {
			return nil, s.errorf("%s and %s: %v", s.input(0), s.input(i), err)
		}
		m := part.(*matmulKernel)
		if m.gemv == nil {
			return nil, s.errorf("%s %s and %s %s do not take the GEMV path (A with one row, B a matrix of whole 16-byte rows)",
				s.input(0), shapeString(a.Shape), s.input(i), shapeString(s.Inputs[i].Shape))
		}
		infos = append(infos, m.Outputs()[0])
		ns = append(ns, int64(m.gemv.ns[0]))
	}
	if k.sum {
		infos = append(infos, cloneInfo(a))
	}
	g, err := newGemvPlan(l, op.pro, a.DType, a.Shape[len(a.Shape)-1], ns...)
	if err != nil {
		return nil, err
	}
	k.kernelBase, k.gemv = newBase(l, s, infos...), g
	return k, nil
}

// Execute queues Y_i = A · B_i for the group, A computed by its prologue, in one GEMV launch
// (a B_i that is not 16-byte aligned is read element by element). The outputs must not
// overlap the inputs.
func (k *matMulGroupKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	n := len(inputs) - k.rowIns
	row := gemvRow{a: inputs[0].Ptr, eps: k.eps}
	switch {
	case k.gemv.pro == gemvSilu:
		row.a2 = inputs[1].Ptr
	case k.gemv.pro == gemvRMSNorm && k.skip:
		row.a2, row.gamma = inputs[1].Ptr, inputs[2].Ptr
	case k.gemv.pro == gemvRMSNorm:
		row.gamma = inputs[1].Ptr
	}
	if k.sum {
		row.sum = outputs[n].Ptr
	}
	for i := range n {
		k.ys[i], k.bs[i] = outputs[i].Ptr, inputs[k.rowIns+i].Ptr
	}
	return k.gemv.launch(k.lib.rt.Stream, row, k.ys[:n], k.bs[:n])
}
