package kernels

import "sync"

// Kernel variants: kernels of one op family that the op benchmark (TestOpBenchTable) and the
// tests time and check side by side. Library.Get picks a family's kernel by a rule of its own
// (datamove.go, norm.go, elementwise.go); a test can force the baseline that the rule replaced,
// so that one run measures the old kernel beside the new one on the same tensors.
//
// The families, their kernels and the baseline a test can force:
//
//   - "transpose2d" (Transpose that swaps the last two axes of a batch of matrices, plain 2-D
//     included): "pair8" (2-byte elements), "pair4" (4-byte), "tile64" (other sizes, odd
//     sides, addresses the pairs cannot use) (cudaep_transpose2d_<kernel>_<size>; see
//     cuda/datamove.cu). Baseline "nd": the general tiled transpose, cudaep_transpose_<size>.
//   - "layernorm" (every normalization op): "r2", "r4", "r8" (cudaep_layernorm_<kernel>_<t>,
//     the row in registers, at most 128 threads a row; see cuda/norm.cu). Baseline "old":
//     cudaep_layernorm_<t>, one block per row, two passes over the row, which also serves
//     rows the register kernels do not take.
//   - "elementwise" (the same-shape float binaries Add, Sub, Mul, Div and Pow: cudaep_<op>_<t>,
//     one kernel for both geometries; see cuda/elementwise.cu): "flat", one 16-byte pack a
//     thread, ceil(packs/256) blocks of 256 threads, not capped (elementwise.go
//     sameShapeGrid). Baseline "stride": the same kernel on linearGrid, at most 8192 blocks,
//     its grid-stride loop covering the rest. The unary ops keep linearGrid (flat lost for
//     float16 Sigmoid on the H200) and have no variant.
//   - "matmul" (MatMul with one row of A and a matrix B of whole 16-byte rows: gemvApplies in
//     gemv.go): "gemv", cudaep_gemv_<t> (see cuda/gemv.cu). Baseline "cublas": the cuBLAS
//     GEMM every other MatMul runs (cublasGemmEx for float16 and bfloat16, cublasSgemm for
//     float32), which a B the GEMV cannot load from also gets.
//   - "matmulnbits" (com.microsoft.MatMulNBits and cudaep.MatMulNBitsGroup; see
//     matmul_nbits.go): "mma", the tensor-core decode kernel cudaep_mmnb_mma_q4_f16, for 1 to 8
//     rows of float16 A by 4-bit weights with zero points absent or packed, block_size >= 32
//     and K a multiple of 32 (nbitsMMAApplies); "gemv", the decode kernel
//     cudaep_mmnb_gemv_q<bits>_<t>, for every other case of fewer than 16 rows of A; "dequant",
//     the prefill's cudaep_mmnb_dequant_q<bits>_<t> and cuBLAS, for more. "gemv" and "dequant"
//     may be forced for any row count (tests check each path on the other's shapes, and
//     "gemv" beside "mma" on the same tensors); "mma" only where it applies (elsewhere forcing
//     it leaves the rule's choice).
//   - "attention" (ONNX's Attention of 16 query rows or more; see onnx_attention.go): "flash",
//     cudaep_attn_flash<D>_<t> on tensor cores, for float16 and bfloat16 data of head size 64
//     or 128 on devices of compute capability 8.0 or later (flashFunction). Baseline
//     "prefill": cudaep_attn_prefill_<t>, float32 arithmetic, which every other prefill gets.

// forced holds the variant forced per family; see forceVariant.
var forced struct {
	sync.Mutex
	m map[string]string
}

// forceVariant makes later Gets of family build baseline v ("nd" for "transpose2d", "old" for
// "layernorm", "stride" for "elementwise", "cublas" for "matmul", "gemv", "mma" or "dequant"
// for "matmulnbits", "prefill" for "attention"; "" goes back to the rule) and returns what was
// forced before; other names are ignored. For tests and the op benchmark only
// (export_test.go); safe for concurrent use, but it affects every Library of the process.
func forceVariant(family, v string) (previous string) {
	forced.Lock()
	defer forced.Unlock()
	previous = forced.m[family]
	if forced.m == nil {
		forced.m = map[string]string{}
	}
	if v == "" {
		delete(forced.m, family)
	} else {
		forced.m[family] = v
	}
	return previous
}

// forcedVariant returns the variant forced for family, "" when none is.
func forcedVariant(family string) string {
	forced.Lock()
	defer forced.Unlock()
	return forced.m[family]
}
