package kernels

import (
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["MatMul"] = builder{inputNames: []string{"A", "B"}, build: buildMatMul}
	builders["Gemm"] = builder{inputNames: []string{"A", "B", "C"}, build: buildGemm}
}

// Row-major through column-major cuBLAS: a row-major R×C matrix is the column-major C×R
// matrix with leading dimension C, i.e. its transpose. So Y = A·B (row-major, M×N) is computed
// as Yᵀ = Bᵀ·Aᵀ: cuBLAS's first operand is ONNX's B, its second ONNX's A, with m = N, n = M,
// and no data is moved.

// gemmCall is one cuBLAS call of a kernel: its parameters (pointers filled in by Execute) and
// the byte offsets of its operands from the tensors' base addresses.
type gemmCall struct {
	p                cudadrv.GemmParams
	aOff, bOff, yOff cudadrv.DevicePtr // ONNX A, ONNX B, output
}

// run fills in the addresses and queues the call: SGEMM for float32 (which honours the TF32
// math mode), GemmEx with float32 accumulation for float16 and bfloat16.
func (c *gemmCall) run(h *cudadrv.BLAS, a, b, y cudadrv.DevicePtr) error {
	c.p.A, c.p.B, c.p.C = b+c.bOff, a+c.aOff, y+c.yOff
	switch {
	case c.p.Type != cudadrv.BLASFloat32 && c.p.BatchCount > 1:
		return h.GemmStridedBatchedEx(&c.p)
	case c.p.Type != cudadrv.BLASFloat32:
		return h.GemmEx(&c.p)
	case c.p.BatchCount > 1:
		return h.SgemmStridedBatched(&c.p)
	}
	return h.Sgemm(&c.p)
}

// blasType is the cuBLAS matrix type of a float dtype.
func blasType(d DType) cudadrv.BLASDataType {
	switch d {
	case Float16:
		return cudadrv.BLASFloat16
	case BFloat16:
		return cudadrv.BLASBFloat16
	}
	return cudadrv.BLASFloat32
}

// matmulKernel is MatMul: one GEMM, or strided-batched GEMMs over the broadcast batch, planned
// at Get time; or, when A has one row (gemvApplies), the GEMV kernel, with the GEMMs kept for
// a B whose address the GEMV cannot load from.
type matmulKernel struct {
	kernelBase
	calls   []gemmCall
	gemv    *gemvPlan // nil: cuBLAS only
	variant string    // "gemv" or "cublas" (variants.go, family "matmul")
}

func checkBLAS(l *Library, s opSpec) error {
	if l.rt.BLAS == nil {
		return s.errorf("the Library's Runtime has no cuBLAS handle, which %s needs", s.Op)
	}
	return nil
}

// checkBLASSizes refuses matrix extents cuBLAS cannot take: its sizes and leading dimensions
// are 32-bit.
func checkBLASSizes(s opSpec, m, k, n int64) error {
	if max(m, k, n) > math.MaxInt32 {
		return s.errorf("matrix extents M=%d, K=%d, N=%d exceed cuBLAS's 32-bit sizes", m, k, n)
	}
	return nil
}

// buildMatMul builds MatMul with numpy matmul semantics: a 1-D A is a row [1,K] and a 1-D B a
// column [K,1] (the unit dimension is dropped from the output), and the batch dimensions
// (all but the last two) broadcast. A product of one row of A (every dimension but the last
// 1) with a matrix B whose rows are whole 16-byte packs runs the GEMV kernel (gemv.go);
// every other product cuBLAS.
func buildMatMul(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	for i := range 2 {
		if err := s.checkInput(i, floatTypes, 1, anyRank); err != nil {
			return nil, err
		}
	}
	if err := s.checkSameDType(0, 1); err != nil {
		return nil, err
	}
	dt := s.Inputs[0].DType
	if err := s.checkTypeOpset(dt); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	if err := checkBLAS(l, s); err != nil {
		return nil, err
	}
	a, b := s.Inputs[0].Shape, s.Inputs[1].Shape
	if len(a) == 1 {
		a = []int64{1, a[0]}
	}
	if len(b) == 1 {
		b = []int64{b[0], 1}
	}
	m, k, k2, n := a[len(a)-2], a[len(a)-1], b[len(b)-2], b[len(b)-1]
	if k != k2 {
		return nil, s.errorf("input 0 (A) shape %s and input 1 (B) shape %s: inner dimensions %d and %d differ", shapeString(s.Inputs[0].Shape), shapeString(s.Inputs[1].Shape), k, k2)
	}
	aBatch, bBatch := a[:len(a)-2], b[:len(b)-2]
	batch, ok := BroadcastShapes(aBatch, bBatch)
	if !ok {
		return nil, s.errorf("batch dimensions %s of input 0 (A) and %s of input 1 (B) do not broadcast", shapeString(aBatch), shapeString(bBatch))
	}
	out := append([]int64{}, batch...)
	if len(s.Inputs[0].Shape) > 1 {
		out = append(out, m)
	}
	if len(s.Inputs[1].Shape) > 1 {
		out = append(out, n)
	}
	if err := s.checkOutput(out); err != nil {
		return nil, err
	}
	if err := checkBLASSizes(s, m, k, n); err != nil {
		return nil, err
	}
	calls, ok := planMatMul(batch, broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch), m, k, n, dt)
	if !ok {
		return nil, s.errorf("broadcasting the batch dimensions %s of input 0 (A) with %s of input 1 (B) needs more than %d separate GEMM calls", shapeString(aBatch), shapeString(bBatch), maxGemmCalls)
	}
	kern := &matmulKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: out}), calls: calls, variant: "cublas"}
	if gemvApplies(s.Inputs[0].Shape, s.Inputs[1].Shape, dt) {
		g, err := newGemvPlan(l, gemvPlain, dt, k, n)
		if err != nil {
			return nil, err
		}
		kern.gemv, kern.variant = g, "gemv"
	}
	return kern, nil
}

// maxGemmCalls caps the cuBLAS calls one MatMul may queue per Execute; a batch broadcast that
// needs more is refused at Get.
const maxGemmCalls = 4096

// planMatMul returns the cuBLAS calls for a batched row-major product of dt matrices: batch is
// the broadcast batch shape, aStr and bStr the operands' strides along it in matrices (0 where
// repeated).
//
// When B is one matrix shared by every batch and A's matrices are contiguous, the batch folds
// into M: one GEMM of (batch·M)×K by K×N. Otherwise the batch is split at the outermost
// dimension from which both operands' matrices are evenly spaced over the remaining flat
// index; each outer index is one strided-batched GEMM (stride 0 for a repeated operand), or a
// plain GEMM when nothing is left to batch. It returns false when that takes more than
// maxGemmCalls calls.
func planMatMul(batch, aStr, bStr []int64, m, k, n int64, dt DType) ([]gemmCall, bool) {
	size := int64(dt.Size())
	total := int64(1)
	for _, d := range batch {
		total *= d
	}
	base := gemmCall{p: cudadrv.GemmParams{
		TransA: cudadrv.OpN, TransB: cudadrv.OpN,
		M: int(n), N: int(m), K: int(k), Alpha: 1, Beta: 0,
		LDA: int(n), LDB: int(k), LDC: int(n), Type: blasType(dt),
	}}
	aStep, aEven := progression(batch, aStr, 0)
	bStep, bEven := progression(batch, bStr, 0)
	if total == 1 || (aEven && aStep == 1 && bEven && bStep == 0 && total*m <= math.MaxInt32) {
		base.p.N = int(total * m)
		return []gemmCall{base}, true
	}
	from := len(batch)
	for i := range batch {
		_, aEven := progression(batch, aStr, i)
		_, bEven := progression(batch, bStr, i)
		if aEven && bEven {
			from = i
			break
		}
	}
	chunk := int64(1)
	for _, d := range batch[from:] {
		chunk *= d
	}
	if total/chunk > maxGemmCalls {
		return nil, false
	}
	aStep, _ = progression(batch, aStr, from)
	bStep, _ = progression(batch, bStr, from)
	calls := make([]gemmCall, 0, total/chunk)
	idx := make([]int64, from)
	for start := int64(0); start < total; start += chunk {
		var aOff, bOff int64
		for i, c := range idx {
			aOff += c * aStr[i]
			bOff += c * bStr[i]
		}
		c := base
		c.aOff = cudadrv.DevicePtr(aOff * m * k * size)
		c.bOff = cudadrv.DevicePtr(bOff * k * n * size)
		c.yOff = cudadrv.DevicePtr(start * m * n * size)
		if chunk > 1 {
			c.p.BatchCount = int(chunk)
			c.p.StrideA = bStep * k * n
			c.p.StrideB = aStep * m * k
			c.p.StrideC = m * n
		}
		calls = append(calls, c)
		for i := from - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < batch[i] {
				break
			}
			idx[i] = 0
		}
	}
	return calls, true
}

// progression reports whether, over the batch dimensions from the given one inwards, an
// operand with strides str (in matrices) sits at step·t for the flat index t of those
// dimensions, and returns step.
func progression(batch, str []int64, from int) (step int64, ok bool) {
	span := int64(1)
	found := false
	for d := len(batch) - 1; d >= from; d-- {
		if batch[d] == 1 {
			continue
		}
		if !found {
			step, found = str[d], true
		} else if str[d] != step*span {
			return 0, false
		}
		span *= batch[d]
	}
	return step, true
}

// Execute queues the GEMV, or the planned GEMMs when there is none or B's address does not
// suit it.
func (k *matmulKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	if k.gemv != nil && usable(inputs[1].Ptr) {
		return k.gemv.launch(k.lib.rt.Stream, gemvRow{a: inputs[0].Ptr}, []cudadrv.DevicePtr{outputs[0].Ptr}, []cudadrv.DevicePtr{inputs[1].Ptr})
	}
	h := k.lib.rt.BLAS
	for i := range k.calls {
		if err := k.calls[i].run(h, inputs[0].Ptr, inputs[1].Ptr, outputs[0].Ptr); err != nil {
			return err
		}
	}
	return nil
}

// gemmKernel is Gemm: Y = alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A (M×K) and
// B' = transB ? Bᵀ : B (K×N). C, when present and beta is not 0, is first written into Y
// (a copy when it is already M×N, the expand kernel when it broadcasts) and the GEMM then
// accumulates onto Y with beta; otherwise the GEMM runs with beta 0 and never reads Y.
type gemmKernel struct {
	kernelBase
	call gemmCall
	cMode
	expand  *cudadrv.Function
	n       uint64
	size    uint64 // element size in bytes
	dims    [maxBroadcastDims]int64
	strides [maxBroadcastDims]int64
	grid    cudadrv.Dim3
	args    cudadrv.KernelArgs
}

// cMode is how a Gemm brings C into Y.
type cMode uint8

const (
	cNone   cMode = iota // no C, or beta == 0
	cCopy                // C is M×N: copy it
	cExpand              // C broadcasts to M×N: the expand kernel
)

var gemmAttrs = map[string]AttrKind{"alpha": AttrFloat, "beta": AttrFloat, "transA": AttrInt, "transB": AttrInt}

func buildGemm(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(7, "earlier opsets used the broadcast attribute"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(2, 3); err != nil {
		return nil, err
	}
	for i := range 2 {
		if err := s.checkInput(i, floatTypes, 2, 2); err != nil {
			return nil, err
		}
	}
	if err := s.checkSameDType(0, 1); err != nil {
		return nil, err
	}
	if len(s.Inputs) == 3 {
		if err := s.checkInput(2, floatTypes, 0, 2); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, 2); err != nil {
			return nil, err
		}
	}
	dt := s.Inputs[0].DType
	if err := s.checkTypeOpset(dt); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(gemmAttrs); err != nil {
		return nil, err
	}
	if err := checkBLAS(l, s); err != nil {
		return nil, err
	}
	transA, transB := s.intAttr("transA", 0), s.intAttr("transB", 0)
	for _, t := range []struct {
		name string
		v    int64
	}{{"transA", transA}, {"transB", transB}} {
		if t.v != 0 && t.v != 1 {
			return nil, s.errorf("attribute %q is %d; supported: 0, 1", t.name, t.v)
		}
	}
	alpha, beta := s.floatAttr("alpha", 1), s.floatAttr("beta", 1)
	a, b := s.Inputs[0].Shape, s.Inputs[1].Shape
	m, k := a[0], a[1]
	if transA == 1 {
		m, k = k, m
	}
	k2, n := b[0], b[1]
	if transB == 1 {
		k2, n = n, k2
	}
	if k != k2 {
		return nil, s.errorf("input 0 (A) shape %s (transA=%d) and input 1 (B) shape %s (transB=%d): inner dimensions %d and %d differ", shapeString(a), transA, shapeString(b), transB, k, k2)
	}
	if err := checkBLASSizes(s, m, k, n); err != nil {
		return nil, err
	}
	y := []int64{m, n}
	if err := s.checkOutput(y); err != nil {
		return nil, err
	}
	g := &gemmKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: y}), size: uint64(dt.Size())}
	g.call.p = cudadrv.GemmParams{
		TransA: cudadrv.OpN, TransB: cudadrv.OpN,
		M: int(n), N: int(m), K: int(k), Alpha: alpha, Beta: 0,
		LDA: int(n), LDB: int(k), LDC: int(n), Type: blasType(dt),
	}
	if transB == 1 {
		g.call.p.TransA, g.call.p.LDA = cudadrv.OpT, int(k)
	}
	if transA == 1 {
		g.call.p.TransB, g.call.p.LDB = cudadrv.OpT, int(m)
	}
	if len(s.Inputs) == 3 {
		c := s.Inputs[2].Shape
		if !unidirectional(c, y) {
			return nil, s.errorf("input 2 (C) shape %s does not broadcast to the output shape %s (unidirectional: right-aligned dimensions must equal the output's or be 1)", shapeString(c), shapeString(y))
		}
		if beta != 0 {
			g.call.p.Beta = beta
			layout := mergeDims(y, broadcastStrides(c, y))
			if layout.contiguous(0) {
				g.cMode = cCopy
				g.n = uint64(m * n)
			} else {
				g.cMode = cExpand
				g.expand = l.function("cudaep_expand_" + dt.sizeSuffix())
				g.n = uint64(m * n)
				g.dims, g.strides = layout.padded(0)
				g.grid = linearGrid(g.n)
			}
		}
	}
	return g, nil
}

// unidirectional reports whether shape broadcasts to target without changing target.
func unidirectional(shape, target []int64) bool {
	if len(shape) > len(target) {
		return false
	}
	off := len(target) - len(shape)
	for i, d := range shape {
		if d != 1 && d != target[off+i] {
			return false
		}
	}
	return true
}

// Execute queues C into Y (when used) and the GEMM.
func (g *gemmKernel) Execute(inputs, outputs []Tensor) error {
	if err := g.check(inputs, outputs); err != nil {
		return err
	}
	y := outputs[0].Ptr
	st := g.lib.rt.Stream
	switch g.cMode {
	case cCopy:
		if err := st.CopyDtoDAsync(y, inputs[2].Ptr, g.n*g.size); err != nil {
			return err
		}
	case cExpand:
		a := &g.args
		a.Reset()
		a.Ptr(y).Ptr(inputs[2].Ptr).U64(g.n)
		for _, d := range g.dims {
			a.I64(d)
		}
		for _, st := range g.strides {
			a.I64(st)
		}
		if err := st.Launch(g.expand, g.grid, linearBlock, 0, a); err != nil {
			return err
		}
	}
	return g.call.run(g.lib.rt.BLAS, inputs[0].Ptr, inputs[1].Ptr, y)
}
