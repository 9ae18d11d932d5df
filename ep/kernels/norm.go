package kernels

import (
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	entries := typedEntries([]string{"cudaep_layernorm", "cudaep_bias_gelu_tanh"}, floatTypes)
	for _, v := range normVariants {
		entries = append(entries, typedEntries([]string{"cudaep_layernorm_" + v}, floatTypes)...)
	}
	modules = append(modules, ptxModule{"ptx/norm.ptx", entries})
	builders["LayerNormalization"] = builder{inputNames: []string{"X", "Scale", "B"}, build: buildLayerNorm}
	builders["SimplifiedLayerNormalization"] = builder{inputNames: []string{"X", "scale"}, build: buildSimplifiedLayerNorm}
	builders["com.microsoft.SkipLayerNormalization"] = builder{inputNames: []string{"input", "skip", "gamma", "beta", "bias"}, build: skipNormBuilder(false)}
	builders["com.microsoft.SkipSimplifiedLayerNormalization"] = builder{inputNames: []string{"input", "skip", "gamma", "bias"}, build: skipNormBuilder(true)}
	builders["com.microsoft.FastGelu"] = builder{inputNames: []string{"X", "bias"}, build: buildFastGelu}
}

// defaultEpsilon is the epsilon of every normalization op when the attribute is absent.
const defaultEpsilon = 1e-5

// normKernel is every normalization op, one launch of cudaep_layernorm_<t>(y, mean, inv, sum,
// x, skip, gamma, beta, bias, rows, length, skipRows, eps, simplified), or of a register kernel
// cudaep_layernorm_<r>_<t> with the same arguments (normRegsVariant says when): the input viewed
// as rows × length, normalized per row with one block per row. The index fields say which input
// or output feeds each argument (-1: absent, a null pointer).
type normKernel struct {
	kernelBase
	fn                      *cudadrv.Function // the kernel for 16-byte aligned tensors
	oldFn                   *cudadrv.Function // cudaep_layernorm_<t>, for any alignment
	rows, length, skipRows  uint64
	eps                     float32
	simplified              bool
	variant                 string // "old" or one of normVariants
	skip, gamma, beta, bias int    // input indices
	meanOut, invOut, sumOut int    // output indices
	grid, block, oldBlock   cudadrv.Dim3
	args                    cudadrv.KernelArgs
}

// newNorm returns a normKernel over input 0 (rows × length) with every index absent; the
// builders fill in theirs.
func newNorm(l *Library, s opSpec, rows, length int64, eps float32, simplified bool, outs ...TensorInfo) *normKernel {
	dt := s.Inputs[0].DType
	k := &normKernel{kernelBase: newBase(l, s, outs...), oldFn: l.function("cudaep_layernorm_" + dt.suffix())}
	k.rows, k.length, k.skipRows = uint64(rows), uint64(length), 1
	k.eps, k.simplified = eps, simplified
	k.skip, k.gamma, k.beta, k.bias = -1, -1, -1, -1
	k.meanOut, k.invOut, k.sumOut = -1, -1, -1
	units, v := k.length, uint64(16/dt.Size())
	packs := k.length%v == 0 && k.length > 0
	if packs {
		units = k.length / v // the kernels move 16-byte packs then
	}
	k.grid = cudadrv.Dim3{X: uint32(min(k.rows, maxSoftmaxRowBlocks)), Y: 1, Z: 1}
	k.oldBlock = cudadrv.Dim3{X: min(rowThreads(units), maxNormThreads), Y: 1, Z: 1}
	k.fn, k.block, k.variant = k.oldFn, k.oldBlock, "old"
	if packs {
		if variant, threads := normRegsVariant(units); variant != "" {
			k.fn, k.variant = l.function("cudaep_layernorm_"+variant+"_"+dt.suffix()), variant
			k.block = cudadrv.Dim3{X: threads, Y: 1, Z: 1}
		}
	}
	return k
}

// normVariants are the register-resident layernorm kernels: rN keeps up to N 16-byte packs of
// the row per thread (cuda/norm.cu's layernorm_regs).
var normVariants = []string{"r2", "r4", "r8"}

// normPacks is the most packs per thread of each register kernel.
var normPacks = map[string]uint64{"r2": 2, "r4": 4, "r8": 8}

// normRegsThreads is the most threads a register kernel gives a row. On the H200 (256 MiB of
// rows of 4096) the register kernels ran at 0.82 of peak with 128 threads per row (float32
// r8, float16 r4) and at 0.63-0.67 with 64, 256 or 512; r8 with 625 threads did not launch
// (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many registers for the block).
const normRegsThreads = 128

// normRegsVariant picks the register layernorm for rows of packs 16-byte packs and its block:
// the fewest packs per thread r in {2, 4, 8} that holds the row in at most normRegsThreads
// threads, the block ceil(packs / r) rounded up to whole warps. It returns "" (the two-pass
// kernel) for rows of more than 8·normRegsThreads packs, or when a test forced "old"
// (variants.go). Rows that are not whole packs and tensors not 16-byte aligned take the
// two-pass kernel too (newNorm, Execute).
func normRegsVariant(packs uint64) (string, uint32) {
	if forcedVariant("layernorm") == "old" {
		return "", 0
	}
	for _, v := range normVariants {
		if threads := (packs + normPacks[v] - 1) / normPacks[v]; threads <= normRegsThreads {
			return v, uint32(max(32, (threads+31)/32*32))
		}
	}
	return "", 0
}

// maxNormThreads caps the normalization kernel's block: the largest block it was run with on
// the H200 (longer rows loop over more packs per thread). Wider blocks were not measured to
// help, and a block the kernel's register count does not fit would fail to launch.
const maxNormThreads = 256

// checkEpsilon reads the epsilon attribute and refuses a negative or non-finite one.
func (s opSpec) checkEpsilon() (float32, error) {
	eps := s.floatAttr("epsilon", defaultEpsilon)
	if !(eps >= 0) || eps > 1e30 {
		return 0, s.errorf(`attribute "epsilon" is %g; it must be a finite value >= 0`, eps)
	}
	return eps, nil
}

// checkNormAxis reads the axis attribute (default -1) against rank and returns it
// normalized, after refusing stash_type values other than 1 (float32 statistics).
func (s opSpec) checkNormAxis(rank int) (int, error) {
	if st := s.intAttr("stash_type", 1); st != 1 {
		return 0, s.errorf(`attribute "stash_type" is %d; only 1 (float32 statistics) is supported`, st)
	}
	axis := s.intAttr("axis", -1)
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, s.errorf(`attribute "axis" is %d; for %s of rank %d it must be in [%d, %d]`, axis, s.input(0), rank, -rank, rank-1)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// checkParam refuses a per-element parameter input i (Scale, B, gamma, beta, bias) that does
// not have X's dtype or does not hold exactly the normalized shape (leading 1s aside).
func (s opSpec) checkParam(i int, normalized []int64) error {
	if err := s.checkInput(i, floatTypes, 0, anyRank); err != nil {
		return err
	}
	if err := s.checkSameDType(0, i); err != nil {
		return err
	}
	if got, want := trimOnes(s.Inputs[i].Shape), trimOnes(normalized); !slices.Equal(got, want) {
		return s.errorf("%s has shape %s; it must have the normalized shape %s (broadcasting it is not supported)", s.input(i), shapeString(s.Inputs[i].Shape), shapeString(normalized))
	}
	return nil
}

// trimOnes returns shape without its leading dimensions of 1.
func trimOnes(shape []int64) []int64 {
	for len(shape) > 0 && shape[0] == 1 {
		shape = shape[1:]
	}
	return shape
}

// statsShape is the shape of the Mean and InvStdDev outputs: X's dimensions before axis, 1
// from axis on.
func statsShape(shape []int64, axis int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[i] = 1
		if i < axis {
			out[i] = d
		}
	}
	return out
}

// buildLayerNorm builds LayerNormalization (opset 17): X normalized over its dimensions from
// axis on, times Scale, plus B (optional); outputs Y and the float32 Mean and InvStdDev
// (stash_type 1), which the kernel always writes.
func buildLayerNorm(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(17, "LayerNormalization entered ONNX in opset 17"); err != nil {
		return nil, err
	}
	if err := s.checkInputCount(2, 3); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"axis": AttrInt, "epsilon": AttrFloat, "stash_type": AttrInt}); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	axis, err := s.checkNormAxis(len(x.Shape))
	if err != nil {
		return nil, err
	}
	eps, err := s.checkEpsilon()
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(s.Inputs); i++ {
		if err := s.checkParam(i, x.Shape[axis:]); err != nil {
			return nil, err
		}
	}
	stats := TensorInfo{DType: Float32, Shape: statsShape(x.Shape, axis)}
	k := newNorm(l, s, product(x.Shape[:axis]), product(x.Shape[axis:]), eps, false, cloneInfo(x), stats, cloneInfo(stats))
	k.gamma, k.meanOut, k.invOut = 1, 1, 2
	if len(s.Inputs) == 3 {
		k.beta = 2
	}
	return k, nil
}

// buildSimplifiedLayerNorm builds SimplifiedLayerNormalization (ONNX Runtime's RMSNorm, in the
// default domain): Y = X / sqrt(mean(X²) + epsilon) · scale over the dimensions from axis on;
// outputs Y and the float32 inv_std_var.
func buildSimplifiedLayerNorm(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"axis": AttrInt, "epsilon": AttrFloat, "stash_type": AttrInt}); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	if err := s.checkTypeOpset(x.DType); err != nil {
		return nil, err
	}
	axis, err := s.checkNormAxis(len(x.Shape))
	if err != nil {
		return nil, err
	}
	eps, err := s.checkEpsilon()
	if err != nil {
		return nil, err
	}
	if err := s.checkParam(1, x.Shape[axis:]); err != nil {
		return nil, err
	}
	stats := TensorInfo{DType: Float32, Shape: statsShape(x.Shape, axis)}
	k := newNorm(l, s, product(x.Shape[:axis]), product(x.Shape[axis:]), eps, true, cloneInfo(x), stats)
	k.gamma, k.invOut = 1, 1
	return k, nil
}

// skipNormBuilder builds com.microsoft's SkipLayerNormalization (inputs input, skip, gamma,
// beta, bias) or, simplified, SkipSimplifiedLayerNormalization (input, skip, gamma, bias):
// the sum input + skip + bias normalized over the last dimension. The outputs are output, the
// float32 mean (0 when simplified) and inv_std_var of shape input.shape[:-1] + [1], and
// input_skip_bias_sum; the kernel writes all four.
func skipNormBuilder(simplified bool) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		maxInputs := 5
		if simplified {
			maxInputs = 4
		}
		if err := s.checkInputCount(3, maxInputs); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(map[string]AttrKind{"epsilon": AttrFloat}); err != nil {
			return nil, err
		}
		if err := s.checkInput(0, floatTypes, 2, 3); err != nil {
			return nil, err
		}
		x := s.Inputs[0]
		rank := len(x.Shape)
		hidden := x.Shape[rank-1]
		eps, err := s.checkEpsilon()
		if err != nil {
			return nil, err
		}
		if err := s.checkInput(1, floatTypes, 1, 3); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, 1); err != nil {
			return nil, err
		}
		skip := trimOnes(s.Inputs[1].Shape)
		if len(skip) == 0 || len(skip) > rank || !slices.Equal(skip, x.Shape[rank-len(skip):]) {
			return nil, s.errorf("%s has shape %s; for input shape %s it must be the input's trailing dimensions (leading 1s allowed), e.g. %s or %s",
				s.input(1), shapeString(s.Inputs[1].Shape), shapeString(x.Shape), shapeString(x.Shape), shapeString(x.Shape[rank-2:]))
		}
		for i := 2; i < len(s.Inputs); i++ {
			if err := s.checkInput(i, floatTypes, 1, 1); err != nil {
				return nil, err
			}
			if err := s.checkParam(i, x.Shape[rank-1:]); err != nil {
				return nil, err
			}
		}
		stats := TensorInfo{DType: Float32, Shape: statsShape(x.Shape, rank-1)}
		k := newNorm(l, s, product(x.Shape[:rank-1]), hidden, eps, simplified, cloneInfo(x), stats, cloneInfo(stats), cloneInfo(x))
		k.skip, k.gamma, k.meanOut, k.invOut, k.sumOut = 1, 2, 1, 2, 3
		k.skipRows = uint64(product(skip) / hidden)
		switch {
		case simplified && len(s.Inputs) == 4:
			k.bias = 3
		case !simplified && len(s.Inputs) >= 4:
			k.beta = 3
			if len(s.Inputs) == 5 {
				k.bias = 4
			}
		}
		return k, nil
	}
}

// Execute queues the normalization.
func (k *normKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	in := func(i int) cudadrv.DevicePtr {
		if i < 0 {
			return 0
		}
		return inputs[i].Ptr
	}
	out := func(i int) cudadrv.DevicePtr {
		if i < 0 {
			return 0
		}
		return outputs[i].Ptr
	}
	simplified := uint32(0)
	if k.simplified {
		simplified = 1
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(out(k.meanOut)).Ptr(out(k.invOut)).Ptr(out(k.sumOut))
	a.Ptr(inputs[0].Ptr).Ptr(in(k.skip)).Ptr(in(k.gamma)).Ptr(in(k.beta)).Ptr(in(k.bias))
	a.U64(k.rows).U64(k.length).U64(k.skipRows).F32(k.eps).U32(simplified)
	fn, block := k.fn, k.block
	if !k.aligned(inputs, outputs) {
		fn, block = k.oldFn, k.oldBlock
	}
	return k.lib.rt.Stream.Launch(fn, k.grid, block, 0, a)
}

// aligned tells whether every tensor the register kernel moves in 16-byte packs (Y, the sum,
// X, skip and the parameters; not the float32 statistics) starts on a 16-byte boundary.
func (k *normKernel) aligned(inputs, outputs []Tensor) bool {
	or := outputs[0].Ptr | inputs[0].Ptr
	for _, i := range [...]int{k.skip, k.gamma, k.beta, k.bias} {
		if i >= 0 {
			or |= inputs[i].Ptr
		}
	}
	if k.sumOut >= 0 {
		or |= outputs[k.sumOut].Ptr
	}
	return or%16 == 0
}

// launchVariant is the variant Execute launches for these tensors.
func (k *normKernel) launchVariant(inputs, outputs []Tensor) string {
	if !k.aligned(inputs, outputs) {
		return "old"
	}
	return k.variant
}

// biasGeluKernel is com.microsoft's FastGelu: Gelu's tanh approximation of X + bias (bias
// optional, over the last dimension): cudaep_bias_gelu_tanh_<t>(out, x, bias, n, biasLen), or
// without bias the elementwise cudaep_gelu_tanh_<t>(out, x, n).
type biasGeluKernel struct {
	kernelBase
	fn      *cudadrv.Function
	n       uint64
	biasLen uint64
	grid    cudadrv.Dim3
	args    cudadrv.KernelArgs
}

// buildFastGelu builds com.microsoft.FastGelu (opset 1 of that domain): float32, float16 or
// bfloat16 X, and an optional bias whose length is X's last dimension.
func buildFastGelu(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	k := &biasGeluKernel{kernelBase: newBase(l, s, cloneInfo(x))}
	k.n = uint64(x.NumElements())
	k.grid = linearGrid(k.n)
	if len(s.Inputs) == 1 {
		k.fn = l.function("cudaep_gelu_tanh_" + x.DType.suffix())
		return k, nil
	}
	if err := s.checkInput(1, floatTypes, 1, 1); err != nil {
		return nil, err
	}
	if err := s.checkSameDType(0, 1); err != nil {
		return nil, err
	}
	if last := x.Shape[len(x.Shape)-1]; s.Inputs[1].Shape[0] != last {
		return nil, s.errorf("%s has shape %s; it must hold X's last dimension, %d", s.input(1), shapeString(s.Inputs[1].Shape), last)
	}
	k.fn = l.function("cudaep_bias_gelu_tanh_" + x.DType.suffix())
	k.biasLen = uint64(s.Inputs[1].Shape[0])
	return k, nil
}

// Execute queues out = gelu_tanh(X + bias).
func (k *biasGeluKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	if k.biasLen == 0 {
		a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).U64(k.n)
	} else {
		a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).U64(k.n).U64(k.biasLen)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}
