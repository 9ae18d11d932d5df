package kernels

import (
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

// anyRank is the rank limit of ops whose rank is not otherwise constrained.
const anyRank = 64

// The elementwise ops by kernel-name stem. Binary float ops compute in float32 on float32,
// float16 and bfloat16 data; Add, Sub, Mul and Div also take int32 and int64 (intStems);
// comparisons give bool; unary ops are float only.
var (
	binaryStems  = map[string]string{"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}
	intStems     = map[string]string{"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
	compareStems = map[string]string{"Equal": "equal", "Less": "less", "Greater": "greater"}
	unaryStems   = map[string]string{
		"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Neg": "neg", "Abs": "abs", "Sqrt": "sqrt",
		"Reciprocal": "reciprocal", "Exp": "exp", "Log": "log", "Erf": "erf", "Sin": "sin", "Cos": "cos",
	}
)

// unaryOpsets is the first opset each unary op's current definition (no consumed_inputs, and
// float16 and bfloat16 where it has them) applies from; earlier opsets are refused.
var unaryOpsets = map[string]int{
	"Relu": 6, "Sigmoid": 6, "Tanh": 6, "Neg": 6, "Abs": 6, "Sqrt": 6, "Reciprocal": 6, "Exp": 6,
	"Log": 6, "Erf": 9, "Sin": 7, "Cos": 7,
}

func init() {
	for op, stem := range binaryStems {
		types := floatTypes
		if _, ok := intStems[op]; ok {
			types = arithTypes
		}
		builders[op] = builder{inputNames: []string{"A", "B"}, build: binaryBuilder(stem, types, false)}
	}
	builders["Pow"] = builder{inputNames: []string{"X", "Y"}, build: binaryBuilder("pow", floatTypes, false)}
	for op, stem := range compareStems {
		types := compareTypes
		if op == "Equal" {
			types = append(append([]DType{}, compareTypes...), Bool)
		}
		builders[op] = builder{inputNames: []string{"A", "B"}, build: binaryBuilder(stem, types, true)}
	}
	for op, stem := range unaryStems {
		builders[op] = builder{inputNames: []string{"X"}, build: unaryBuilder(stem, unaryOpsets[op])}
	}
	builders["Gelu"] = builder{inputNames: []string{"X"}, build: buildGelu}
	builders["Identity"] = builder{inputNames: []string{"input"}, build: buildIdentity}
	builders["Where"] = builder{inputNames: []string{"condition", "X", "Y"}, build: buildWhere}
}

// maxGridX is the largest grid extent along x.
const maxGridX = 1<<31 - 1

// sameShapeGrid returns the grid of the same-shape float binary kernel cudaep_<stem>_<t> over
// n elements of dt, and its name (variants.go, family "elementwise"). By default that is
// "flat": one 16-byte pack a thread, ceil(packs/256) blocks of 256 threads with no cap, so the
// kernel's grid-stride loop runs once (on the H200, 2.5% above the capped grid for Add at
// 256 MiB, level with PyTorch). The old geometry, "stride" (linearGrid: at most maxBlocks
// blocks, the loop covering the rest), is what a test can force as the baseline, and what a
// tensor too large for a flat grid gets. Both are correct for any alignment: the kernel's
// element-at-a-time path loops over the same grid.
func sameShapeGrid(dt DType, n uint64) (grid cudadrv.Dim3, variant string) {
	per := uint64(16 / dt.Size())
	blocks := ((n+per-1)/per + blockThreads - 1) / blockThreads
	if forcedVariant("elementwise") == "stride" || blocks > maxGridX {
		return linearGrid(n), "stride"
	}
	return cudadrv.Dim3{X: uint32(max(blocks, 1)), Y: 1, Z: 1}, "flat"
}

// elementwiseEntries lists the entry points of ptx/elementwise.ptx.
func elementwiseEntries() []string {
	var e []string
	for _, stem := range sortedValues(binaryStems) {
		for _, t := range floatTypes {
			e = append(e, "cudaep_"+stem+"_"+t.suffix(), "cudaep_"+stem+"_bcast_"+t.suffix())
		}
	}
	for _, stem := range sortedValues(intStems) {
		for _, t := range intTypes {
			e = append(e, "cudaep_"+stem+"_"+t.suffix(), "cudaep_"+stem+"_bcast_"+t.suffix())
		}
	}
	for _, stem := range sortedValues(compareStems) {
		types := compareTypes
		if stem == "equal" {
			types = append(append([]DType{}, compareTypes...), Bool)
		}
		for _, t := range types {
			e = append(e, "cudaep_"+stem+"_"+t.suffix(), "cudaep_"+stem+"_bcast_"+t.suffix())
		}
	}
	for _, stem := range append(sortedValues(unaryStems), "gelu", "gelu_tanh") {
		for _, t := range floatTypes {
			e = append(e, "cudaep_"+stem+"_"+t.suffix())
		}
	}
	for _, size := range []string{"b8", "b16", "b32", "b64"} {
		e = append(e, "cudaep_where_"+size, "cudaep_where_update_"+size, "cudaep_expand_"+size)
	}
	return append(e, fusedEntries()...)
}

// binaryKernel is a binary op with numpy broadcasting. When both inputs have the output's
// shape it launches the plain kernel cudaep_<stem>_<t>(out, a, b, n), the float ones on
// sameShapeGrid's flat grid; otherwise cudaep_<stem>_bcast_<t>(out, a, b, n, dims[6],
// aStrides[6], bStrides[6]) over the merged iteration space, on linearGrid. Integer Div's
// kernels take the fault word and the kernel's id after those (a divisor of 0 is a data
// fault).
type binaryKernel struct {
	kernelBase
	fn       *cudadrv.Function
	n        uint64
	same     bool
	faults   bool   // the kernel records data faults (integer Div)
	variant  string // the same-shape float kernels' grid, "flat" or "stride": see sameShapeGrid
	dims     [maxBroadcastDims]int64
	aStrides [maxBroadcastDims]int64
	bStrides [maxBroadcastDims]int64
	grid     cudadrv.Dim3
	args     cudadrv.KernelArgs
}

// binaryBuilder builds the binary op with kernel stem over dtypes; boolOut ops (comparisons)
// output bool, the others the inputs' dtype.
func binaryBuilder(stem string, dtypes []DType, boolOut bool) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		if err := s.checkOpset(7, "numpy broadcasting; earlier opsets used the broadcast and axis attributes"); err != nil {
			return nil, err
		}
		if err := s.checkInputCount(2, 2); err != nil {
			return nil, err
		}
		for i := range 2 {
			if err := s.checkInput(i, dtypes, 0, anyRank); err != nil {
				return nil, err
			}
		}
		if err := s.checkSameDType(0, 1); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, err
		}
		dt := s.Inputs[0].DType
		if err := s.checkTypeOpset(dt); err != nil {
			return nil, err
		}
		if boolOut {
			if err := checkCompareOpset(s, dt); err != nil {
				return nil, err
			}
		}
		a, b := s.Inputs[0].Shape, s.Inputs[1].Shape
		out, ok := BroadcastShapes(a, b)
		if !ok {
			return nil, s.errorf("%s shape %s and %s shape %s do not broadcast (numpy rules: right-aligned dimensions must be equal or 1)", s.input(0), shapeString(a), s.input(1), shapeString(b))
		}
		if err := s.checkOutput(out); err != nil {
			return nil, err
		}
		layout := mergeDims(out, broadcastStrides(a, out), broadcastStrides(b, out))
		if len(layout.dims) > maxBroadcastDims {
			return nil, s.errorf("broadcasting %s with %s needs %d dimensions after merging neighbours; at most %d are supported", shapeString(a), shapeString(b), len(layout.dims), maxBroadcastDims)
		}
		outType := dt
		if boolOut {
			outType = Bool
		}
		k := &binaryKernel{kernelBase: newBase(l, s, TensorInfo{DType: outType, Shape: out})}
		k.n = uint64(k.outs[0].NumElements())
		k.grid = linearGrid(k.n)
		k.same = layout.contiguous(0) && layout.contiguous(1)
		if k.same {
			k.fn = l.function("cudaep_" + stem + "_" + dt.suffix())
			if !boolOut && isFloat(dt) {
				k.grid, k.variant = sameShapeGrid(dt, k.n)
			}
		} else {
			k.fn = l.function("cudaep_" + stem + "_bcast_" + dt.suffix())
			k.dims, k.aStrides = layout.padded(0)
			_, k.bStrides = layout.padded(1)
			if !boolOut {
				k.grid = packedGrid(k.n, k.dims[maxBroadcastDims-1], dt.Size())
			}
		}
		if stem == "div" && !isFloat(dt) {
			k.faults = true
			if err := k.registerFaults(s.inputNames, func(int, int64) string { return "an integer division by zero" }); err != nil {
				return nil, err
			}
		}
		return k, nil
	}
}

// checkCompareOpset refuses a comparison dtype the op's opset did not list: Equal took
// floating-point inputs from opset 11, Less and Greater integers from opset 9.
func checkCompareOpset(s opSpec, dt DType) error {
	float := isFloat(dt)
	switch {
	case s.Op == "Equal" && float && s.Opset < 11:
		return s.errorf("%s inputs need opset >= 11 for Equal", dt)
	case s.Op != "Equal" && !float && s.Opset < 9:
		return s.errorf("%s inputs need opset >= 9 for %s", dt, s.Op)
	}
	return nil
}

// sortedValues returns m's values sorted.
func sortedValues(m map[string]string) []string {
	v := make([]string, 0, len(m))
	for _, x := range m {
		v = append(v, x)
	}
	slices.Sort(v)
	return v
}

// checkSameDType refuses inputs i and j of different dtypes.
func (s opSpec) checkSameDType(i, j int) error {
	if a, b := s.Inputs[i].DType, s.Inputs[j].DType; a != b {
		return s.errorf("%s is %s and %s is %s; they must have the same dtype", s.input(i), a, s.input(j), b)
	}
	return nil
}

// checkTypeOpset refuses bfloat16 below opset 13, where ONNX's ops did not list it (ONNX
// Runtime would not load such a model either).
func (s opSpec) checkTypeOpset(dt DType) error {
	if dt == BFloat16 && s.Opset < 13 {
		return s.errorf("bfloat16 needs opset >= 13 for %s", s.Op)
	}
	return nil
}

// Execute queues out = A op B.
func (k *binaryKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).U64(k.n)
	if !k.same {
		for _, d := range k.dims {
			a.I64(d)
		}
		for _, st := range k.aStrides {
			a.I64(st)
		}
		for _, st := range k.bStrides {
			a.I64(st)
		}
	}
	if k.faults {
		k.faultArgs(a)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// inPlace reports whether the output may be input op's memory: an operand of the output's
// dtype and shape, read by the thread that writes each element, before it writes it.
func (k *binaryKernel) inPlace(output, op int) bool {
	return output == 0 && (op == 0 || op == 1) && k.ins[op].Equal(k.outs[0])
}

// unaryKernel is a float op launched as cudaep_<stem>_<t>(out, x, n) on linearGrid (the flat
// grid of the binaries, sameShapeGrid, lost for float16 Sigmoid on the H200).
type unaryKernel struct {
	kernelBase
	fn   *cudadrv.Function
	n    uint64
	grid cudadrv.Dim3
	args cudadrv.KernelArgs
}

func unaryBuilder(stem string, opset int) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		if err := s.checkOpset(opset, "earlier opsets had the consumed_inputs attribute or other types"); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, err
		}
		return newUnary(l, s, stem)
	}
}

// newUnary validates the single float input and builds the kernel.
func newUnary(l *Library, s opSpec, stem string) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 0, anyRank); err != nil {
		return nil, err
	}
	dt := s.Inputs[0].DType
	if err := s.checkTypeOpset(dt); err != nil {
		return nil, err
	}
	k := &unaryKernel{kernelBase: newBase(l, s, cloneInfo(s.Inputs[0])), fn: l.function("cudaep_" + stem + "_" + dt.suffix())}
	k.n = uint64(s.Inputs[0].NumElements())
	k.grid = linearGrid(k.n)
	return k, nil
}

// inPlace reports whether the output may be the input's memory: always (the same dtype and
// shape, each element read by the thread that writes it).
func (k *unaryKernel) inPlace(output, op int) bool { return output == 0 && op == 0 }

// buildGelu builds Gelu (opset 20): approximate "none" is x·Φ(x) with the error function,
// "tanh" the tanh approximation.
func buildGelu(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(20, "Gelu entered the default domain in opset 20"); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"approximate": AttrString}); err != nil {
		return nil, err
	}
	switch approx := s.stringAttr("approximate", "none"); approx {
	case "none":
		return newUnary(l, s, "gelu")
	case "tanh":
		return newUnary(l, s, "gelu_tanh")
	default:
		return nil, s.errorf(`attribute "approximate" is %q; supported: "none", "tanh"`, approx)
	}
}

// Execute queues out = f(x).
func (k *unaryKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).U64(k.n)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// identityKernel copies its input with one device-to-device copy on the stream (a memcpy node
// when captured).
type identityKernel struct {
	kernelBase
	bytes uint64
}

func buildIdentity(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, anyTypes, 0, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	return newCopy(l, s, cloneInfo(s.Inputs[0])), nil
}

// newCopy returns a kernel whose output (of out's info, with the input's bytes) is a copy of
// its first input: Identity, and the shape-only ops (Reshape, Squeeze, Unsqueeze).
func newCopy(l *Library, s opSpec, out TensorInfo) *identityKernel {
	k := &identityKernel{kernelBase: newBase(l, s, out)}
	k.bytes = uint64(s.Inputs[0].Bytes())
	return k
}

// Execute queues the copy; an output that is the input needs none.
func (k *identityKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	if outputs[0].Ptr == inputs[0].Ptr {
		return nil
	}
	return k.lib.rt.Stream.CopyDtoDAsync(outputs[0].Ptr, inputs[0].Ptr, k.bytes)
}

// maxWhereDims is the most dimensions Where takes after merging (its kernel gets a stride per
// dimension for each of three operands, within cudadrv.MaxKernelArgs).
const maxWhereDims = 4

// whereKernel is Where(condition, X, Y) with three-way numpy broadcasting, by element size:
// cudaep_where_<size>(out, c, x, y, n, dims[4], cStrides[4], xStrides[4], yStrides[4]). When
// the output is the memory of X or Y (in place: InPlace), it launches
// cudaep_where_update_<size>(out, c, src, n, dims[4], cStrides[4], srcStrides[4], when), which
// stores only the elements taken from the other operand (src): a key/value cache updated in
// place at one position stores that position's row, not the whole cache.
type whereKernel struct {
	kernelBase
	fn, update *cudadrv.Function
	n          uint64
	dims       [maxWhereDims]int64
	strides    [3][maxWhereDims]int64
	grid       cudadrv.Dim3
	args       cudadrv.KernelArgs
}

func buildWhere(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(9, "Where entered ONNX in opset 9"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(3, 3); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, []DType{Bool}, 0, anyRank); err != nil {
		return nil, err
	}
	for i := 1; i < 3; i++ {
		if err := s.checkInput(i, castTypes, 0, anyRank); err != nil {
			return nil, err
		}
	}
	if err := s.checkSameDType(1, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	dt := s.Inputs[1].DType
	if err := s.checkTypeOpset(dt); err != nil {
		return nil, err
	}
	c, x, y := s.Inputs[0].Shape, s.Inputs[1].Shape, s.Inputs[2].Shape
	out, ok := BroadcastShapes(c, x, y)
	if !ok {
		return nil, s.errorf("shapes %s, %s and %s do not broadcast (numpy rules)", shapeString(c), shapeString(x), shapeString(y))
	}
	if err := s.checkOutput(out); err != nil {
		return nil, err
	}
	layout := mergeDims(out, broadcastStrides(c, out), broadcastStrides(x, out), broadcastStrides(y, out))
	if len(layout.dims) > maxWhereDims {
		return nil, s.errorf("broadcasting %s, %s and %s needs %d dimensions after merging neighbours; at most %d are supported", shapeString(c), shapeString(x), shapeString(y), len(layout.dims), maxWhereDims)
	}
	k := &whereKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: out}), fn: l.function("cudaep_where_" + dt.sizeSuffix()),
		update: l.function("cudaep_where_update_" + dt.sizeSuffix())}
	k.n = uint64(k.outs[0].NumElements())
	off := maxWhereDims - len(layout.dims)
	for i := range k.dims {
		k.dims[i] = 1
	}
	copy(k.dims[off:], layout.dims)
	k.grid = packedGrid(k.n, k.dims[maxWhereDims-1], dt.Size())
	for op := range 3 {
		copy(k.strides[op][off:], layout.strides[op])
	}
	return k, nil
}

// Execute queues out = condition ? X : Y, storing only what changes when the output is X or Y
// (inPlaceOperand).
func (k *whereKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	if op := k.inPlaceOperand(inputs, outputs); op != 0 {
		// The operand whose elements are stored: X when the output is Y.
		a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[3-op].Ptr)
		k.updateArgs(a, op)
		return k.lib.rt.Stream.Launch(k.update, k.grid, linearBlock, 0, a)
	}
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).U64(k.n)
	for _, d := range k.dims {
		a.I64(d)
	}
	for op := range 3 {
		for _, st := range k.strides[op] {
			a.I64(st)
		}
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// inPlaceOperand returns the input (1: X, 2: Y) whose memory the output is, when that input
// may be (inPlace), else 0. With both (X and Y the same tensor) every element is already in
// place: Y is taken, and the update stores X's element, the same value, where the condition holds.
func (k *whereKernel) inPlaceOperand(inputs, outputs []Tensor) int {
	for _, op := range []int{2, 1} {
		if outputs[0].Ptr == inputs[op].Ptr && k.inPlace(0, op) {
			return op
		}
	}
	return 0
}

// inPlace reports whether the output may be input op's memory: X or Y of the output's shape
// (no broadcasting), each element read by the thread that writes it, before it writes it.
func (k *whereKernel) inPlace(output, op int) bool {
	return output == 0 && (op == 1 || op == 2) && k.ins[op].Equal(k.outs[0])
}

// updateArgs fills a with cudaep_where_update[2]_<size>'s arguments after the pointers, for
// Where in place on operand op (inPlaceOperand): n, the dimensions, the condition's strides,
// the other operand's, and when.
func (k *whereKernel) updateArgs(a *cudadrv.KernelArgs, op int) {
	a.U64(k.n)
	for _, d := range k.dims {
		a.I64(d)
	}
	for _, o := range []int{0, 3 - op} {
		for _, st := range k.strides[o] {
			a.I64(st)
		}
	}
	a.U32(uint32(op - 1)) // when: 1 stores X where the condition holds, 0 stores Y where it does not
}

// packedGrid is the grid of a broadcasting kernel with a packed loop (cuda/elementwise.cu's
// bcast_packed): linearGrid over the output's 16-byte packs when its innermost dimension (inner,
// after merging) is a whole number of packs of size-byte elements, so that the threads are the
// packed loop's work items, else over its n elements. When the kernel cannot take packs (an
// operand not 16-byte aligned) its element loop strides over the smaller grid: slower, the same
// result. A grid over elements gave a decode step's cache update (Where over [1, 8, 2112, 64]
// bfloat16: 135168 packs) 4224 blocks of 256 threads, seven threads in eight with nothing to do.
func packedGrid(n uint64, inner int64, size int) cudadrv.Dim3 {
	if size <= 0 || size >= 16 || inner%int64(16/size) != 0 {
		return linearGrid(n)
	}
	return linearGrid(n / uint64(16/size))
}
