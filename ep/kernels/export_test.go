package kernels

import (
	"io/fs"
	"os"

	"github.com/cudaep/cudaep/cudadrv"
)

// The bridge from the black-box tests to what they check but callers never need.

// Reference implementations (reference.go).
var (
	RefBinary    = refBinary
	RefUnary     = refUnary
	RefSoftmax   = refSoftmax
	RefMatMul    = refMatMul
	RefGemm      = refGemm
	RefNonZero   = refNonZero
	RefLayerNorm = refLayerNorm
	RefReduce    = refReduce
)

// LibraryFunction returns a resolved entry point of l, for raw-launch baselines.
func LibraryFunction(l *Library, name string) *cudadrv.Function { return l.function(name) }

// ModuleEntries returns each embedded PTX file's entry list.
func ModuleEntries() map[string][]string {
	m := map[string][]string{}
	for _, mod := range modules {
		m[mod.file] = append([]string{}, mod.entries...)
	}
	return m
}

// ForceVariant makes later Gets of a kernel family build its baseline v ("nd", "old", "stride";
// variants.go; "" is the family's rule) and returns what was forced before.
func ForceVariant(family, v string) string { return forceVariant(family, v) }

// LaunchVariant returns the kernel that k's Execute launches for these tensors: the
// register layernorm, the batched 2-D transpose or the GEMV KernelVariant names, or its
// fallback for addresses it cannot use ("old", "tile64", "cublas"); "update" for a Where whose
// output is its X or Y, "update2" for a cudaep.WherePair whose outputs both are; KernelVariant
// for other kernels.
func LaunchVariant(k Kernel, inputs, outputs []Tensor) string {
	switch k := k.(type) {
	case *transpose2dKernel:
		return k.launchVariant(inputs, outputs)
	case *normKernel:
		return k.launchVariant(inputs, outputs)
	case *matmulKernel:
		if k.gemv != nil && !usable(inputs[1].Ptr) {
			return "cublas"
		}
	case *matMulGroupKernel:
		return "gemv"
	case *whereKernel:
		if k.inPlaceOperand(inputs, outputs) != 0 {
			return "update"
		}
	case *wherePairKernel:
		for p := range 2 {
			k.ins[p] = [3]Tensor{inputs[0], inputs[1+2*p], inputs[2+2*p]}
		}
		if k.pairedOperand(outputs) != 0 {
			return "update2"
		}
	}
	return KernelVariant(k)
}

// NormBlock returns a normalization kernel's block width (threads per row) for aligned tensors.
func NormBlock(k Kernel) uint32 { return k.(*normKernel).block.X }

// KernelVariant returns the variant a Transpose, normalization, same-shape float binary,
// MatMul or MatMulNBits kernel runs: "nd" for the general tiled transpose, the batched 2-D
// transpose's variant, the normalization's variant, the binary's grid ("flat", "stride"),
// MatMul's "gemv" or "cublas", MatMulNBits' "gemv", "mma" or "dequant"; "" for other kernels.
func KernelVariant(k Kernel) string {
	switch k := k.(type) {
	case *transposeKernel:
		return "nd"
	case *transpose2dKernel:
		return k.variant
	case *normKernel:
		return k.variant
	case *binaryKernel:
		return k.variant
	case *matmulKernel:
		return k.variant
	case *nbitsKernel:
		return k.variant
	case *nbitsGroupKernel:
		return k.subs[0].variant
	}
	return ""
}

// NBitsPlan returns a MatMulNBits kernel's decode geometry (its grid, and warps a column for
// "gemv" or warps a block for "mma") and prefill tiling (columns a tile, GEMM calls); zeros for
// what its path does not use.
func NBitsPlan(k Kernel) (grid cudadrv.Dim3, wpc, tile uint64, gemms int) {
	if g, ok := k.(*nbitsGroupKernel); ok {
		return g.grid, g.subs[0].wpc, 0, 0
	}
	n := k.(*nbitsKernel)
	return n.grid, n.wpc, n.tile, len(n.calls)
}

// NBitsBlock returns a MatMulNBits kernel's (or group's) decode block: 256 threads for
// "gemv", 32·kw for "mma" (kw: NBitsPlan's wpc); zero for the prefill.
func NBitsBlock(k Kernel) cudadrv.Dim3 {
	if g, ok := k.(*nbitsGroupKernel); ok {
		return g.subs[0].block
	}
	return k.(*nbitsKernel).block
}

// NBitsMMAWarps is nbitsMMAWarps.
func NBitsMMAWarps(k int64) int64 { return nbitsMMAWarps(k) }

// WithNBitsTileBytes runs fn with the MatMulNBits prefill's tiles bounded by n bytes of
// scratch instead of nbitsTileBytes. No test may run Get concurrently.
func WithNBitsTileBytes(n int64, fn func()) {
	defer func(old int64) { nbitsTileBytes = old }(nbitsTileBytes)
	nbitsTileBytes = n
	fn()
}

// NBitsWarpsPerColumn is nbitsWarpsPerColumn.
func NBitsWarpsPerColumn(k, bits int64) int64 { return nbitsWarpsPerColumn(k, bits) }

// RefNBitsWeights and RefMatMulNBits are the MatMulNBits references (reference.go).
var (
	RefNBitsWeights = refNBitsWeights
	RefMatMulNBits  = refMatMulNBits
)

// GemvGrid returns a MatMul kernel's GEMV grid: column tiles, chunks of K and rows a chunk;
// zeros for a kernel without the GEMV path.
func GemvGrid(k Kernel) (tiles, chunks uint32, rows uint64) {
	if g := gemvOf(k); g != nil {
		return g.grid.X, g.grid.Y, g.rows
	}
	return 0, 0, 0
}

// gemvOf returns the GEMV plan of a MatMul or cudaep.MatMulGroup kernel, nil if it has none.
func gemvOf(k Kernel) *gemvPlan {
	switch k := k.(type) {
	case *matmulKernel:
		return k.gemv
	case *matMulGroupKernel:
		return k.gemv
	}
	return nil
}

// GemvCounters returns the address of a MatMul kernel's GEMV arrival counters (one uint32 per
// column tile), 0 when it does not split K.
func GemvCounters(k Kernel) cudadrv.DevicePtr {
	if g := gemvOf(k); g != nil {
		return g.counters
	}
	return 0
}

// GemvGeometry is gemvGeometry: the GEMV grid Get plans for K × N elements of dt on a device
// of sms SMs.
func GemvGeometry(k int64, ns []int64, dt DType, sms int) (tiles, chunks, rows int64) {
	return gemvGeometry(k, ns, dt, sms)
}

// The GEMV planning's constants (gemv.go): blocks planned per SM, the granularity of a chunk's
// rows, the most chunks K is split into, and how many prologues the kernels have.
const (
	GemvBlocksPerSM = gemvBlocksPerSM
	GemvRowStep     = gemvRowStep
	GemvMaxChunks   = gemvMaxChunks
	GemvPrologues   = len(gemvEntries)
)

// GemvEntry is gemvEntry: the kernel a GEMV launch of prologue pro (0 none, 1 rmsnorm, 2 silu)
// over matrices of dt runs.
func GemvEntry(pro int, dt DType) string { return gemvEntry(gemvPrologue(pro), dt) }

// ElementwiseGrid returns the grid and block a binary or unary elementwise kernel launches on;
// zero extents for other kernels.
func ElementwiseGrid(k Kernel) (grid, block cudadrv.Dim3) {
	switch k := k.(type) {
	case *binaryKernel:
		return k.grid, linearBlock
	case *unaryKernel:
		return k.grid, linearBlock
	}
	return cudadrv.Dim3{}, cudadrv.Dim3{}
}

// EmbeddedPTX returns the embedded bytes of file.
func EmbeddedPTX(file string) ([]byte, error) { return ptxFiles.ReadFile(file) }

// GemmPlan returns, for a MatMul or Gemm kernel, the batch count of each cuBLAS call it
// queues (1 for a plain GEMM), or nil for other kernels.
func GemmPlan(k Kernel) []int {
	var calls []gemmCall
	switch k := k.(type) {
	case *matmulKernel:
		calls = k.calls
	case *gemmKernel:
		calls = []gemmCall{k.call}
	default:
		return nil
	}
	plan := make([]int, len(calls))
	for i, c := range calls {
		plan[i] = max(1, c.p.BatchCount)
	}
	return plan
}

// ElementwisePath returns "same" or "bcast" for a binary kernel, "" for others.
func ElementwisePath(k Kernel) string {
	b, ok := k.(*binaryKernel)
	switch {
	case !ok:
		return ""
	case b.same:
		return "same"
	}
	return "bcast"
}

// UsePTXDir makes every later NewLibrary of this test binary load its modules from
// dir/ptx/*.ptx instead of the embedded files, so that PTX generated on a GPU machine can be
// tested there before it is committed (main_test.go reads CUDAEP_KERNELS_PTX_DIR).
func UsePTXDir(dir string) { ptxSource = os.DirFS(dir) }

// UsePTXSource makes every later NewLibrary of this test binary load its modules (ptx/*.ptx)
// from fsys, and returns the source used before. No test may run NewLibrary concurrently.
func UsePTXSource(fsys fs.FS) (previous fs.FS) {
	previous, ptxSource = ptxSource, fsys
	return previous
}

// EmbeddedPTXFS is the embedded PTX modules, ptx/*.ptx.
func EmbeddedPTXFS() fs.FS { return ptxFiles }

// PendingModules returns the entry lists of the pending modules (CUDA sources newer than their
// committed PTX: see pendingPTX), by PTX file.
func PendingModules() map[string][]string {
	m := map[string][]string{}
	for _, mod := range modules {
		if pendingPTX[mod.file] {
			m[mod.file] = append([]string{}, mod.entries...)
		}
	}
	return m
}

// MarkPending makes the module of PTX file pending (see pendingPTX) until restore runs, as it
// is between a change to its CUDA source and the PTX regenerated on a GPU.
func MarkPending(file string) (restore func()) {
	prev := pendingPTX[file]
	pendingPTX[file] = true
	return func() { pendingPTX[file] = prev }
}

// AvailableModules returns how many of the built-in PTX files the current PTX source holds
// (all of them but a pending module's missing file): the modules NewLibrary loads.
func AvailableModules() int {
	n := 0
	for _, mod := range modules {
		if _, err := fs.Stat(ptxSource, mod.file); err == nil {
			n++
		}
	}
	return n
}

// ReducePath returns "rows" or "strided" for a Reduce kernel, "copy" for a copy, "" for
// others.
func ReducePath(k Kernel) string {
	switch k := k.(type) {
	case *reduceKernel:
		if k.rows {
			return "rows"
		}
		return "strided"
	case *identityKernel:
		return "copy"
	}
	return ""
}

// RefIntOp is the integer arithmetic of the int32 and int64 Add, Sub, Mul and Div kernels.
func RefIntOp(op string, a, b int64) int64 { return refIntOps[op](a, b) }

// TransposePath returns "tiled" for a tiled Transpose, "strided" for the strided copy, "" for
// others.
func TransposePath(k Kernel) string {
	switch k.(type) {
	case *transposeKernel, *transpose2dKernel:
		return "tiled"
	case *stridedCopyKernel:
		return "strided"
	}
	return ""
}

// LaunchGrid returns the grid a Where or broadcasting binary kernel launches.
func LaunchGrid(k Kernel) cudadrv.Dim3 {
	switch k := k.(type) {
	case *whereKernel:
		return k.grid
	case *binaryKernel:
		return k.grid
	}
	return cudadrv.Dim3{}
}

// ErrPanicked is wrapped by the error Get returns for a panic it recovered.
var ErrPanicked = errPanicked

// WithPanickingOp registers op as an op whose builder panics with v while fn runs (to test
// Get's last line of defence), then removes it. No test may run Get concurrently.
func WithPanickingOp(op string, v any, fn func()) {
	builders[op] = builder{build: func(*Library, opSpec) (Kernel, error) { panic(v) }}
	defer delete(builders, op)
	fn()
}

// LaunchBlock returns the block width (threads) a normalization, reduction or Softmax kernel
// launches with for these tensors; 0 for other kernels.
func LaunchBlock(k Kernel, inputs, outputs []Tensor) uint32 {
	switch k := k.(type) {
	case *normKernel:
		if !k.aligned(inputs, outputs) {
			return k.oldBlock.X
		}
		return k.block.X
	case *reduceKernel:
		return k.block.X
	case *softmaxKernel:
		return k.block.X
	}
	return 0
}
