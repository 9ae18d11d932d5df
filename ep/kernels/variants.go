package kernels

import "sync"

// Kernel variants: kernels of one op family that the op benchmark (TestOpBenchTable) and the
// tests time and check side by side. Library.Get picks a family's kernel by a rule of its own
// (datamove.go, norm.go, elementwise.go); a test can force the baseline that the rule replaced,
// or a candidate still being measured, so that one run times them beside the default kernel on
// the same tensors. The new kernels' entry points are optionalEntries: a Library whose PTX
// lacks one builds the default kernel instead.
//
// The families, their kernels and the variants a test can force:
//
//   - "transpose2d" (Transpose that swaps the last two axes of a batch of matrices, plain 2-D
//     included): "pair8" (2-byte elements), "pair4" (4-byte), "tile64" (other sizes, odd
//     sides, addresses the pairs cannot use) (cudaep_transpose2d_<kernel>_<size>; see
//     cuda/datamove.cu). Baseline "nd": the general tiled transpose, cudaep_transpose_<size>.
//     Being measured: "swizzle<G>" (G in 1..64), the pairs with their tiles taken in groups of
//     G row tiles (cudaep_transpose2d_pair8s_b16, _pair4s_b32; kernel names pair8s<G>,
//     pair4s<G>), for shapes the rule gives a pair kernel.
//   - "elementwise" (same-shape float binaries and unary ops): default "stride", a grid-stride
//     loop over 16-byte packs on at most 8192 blocks of 256 threads. Being measured: "flat",
//     the same kernels on one pack a thread (no loop), and "v4", PyTorch's layout
//     (cudaep_<op>_v4_<t>, 128-thread blocks of four packs a thread, all loads first; built for
//     the float binaries and Sigmoid; elementwise.go sameShapeLaunch).
//   - "layernorm" (every normalization op): "r2", "r4", "r8" (cudaep_layernorm_<kernel>_<t>,
//     the row in registers, at most 128 threads a row; see cuda/norm.cu). Baseline "old":
//     cudaep_layernorm_<t>, one block per row, two passes over the row, which also serves
//     rows the register kernels do not take.

// forced holds the variant forced per family; see forceVariant.
var forced struct {
	sync.Mutex
	m map[string]string
}

// forceVariant makes later Gets of family build variant v ("nd" or "swizzle<G>" for
// "transpose2d", "old" for "layernorm", "flat" or "v4" for "elementwise"; "" goes back to the
// rule) and returns what was forced before; a name the family does not know builds the
// rule's kernel. For tests and the op benchmark only (export_test.go); safe for concurrent use, but
// it affects every Library of the process.
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
