package kernels

import "sync"

// Kernel variants: alternative kernels for one op family that are compiled into the PTX next
// to the default one so that the op benchmark (TestOpBenchTable) can time them side by side on
// the same tensors and check their outputs against each other, before one becomes the only
// kernel. Their entry points are ptxModule.optional: a Library whose PTX lacks one builds the
// family's other kernel instead.
//
// The variant families and names:
//
//   - "transpose2d" (Transpose that swaps the last two axes of a batch of matrices, plain 2-D
//     included): "nd" (the general tiled transpose, cudaep_transpose_<size>), "tile32",
//     "tile64", "pair4", "pair8" (cudaep_transpose2d_<variant>_<size>; see cuda/datamove.cu).
//   - "layernorm" (every normalization op): "old" (cudaep_layernorm_<t>, one block per row,
//     two passes over the row), "r2", "r4", "r8", "r4cs" (cudaep_layernorm_<variant>_<t>, the
//     row in registers; see cuda/norm.cu).
//
// Library.Get picks the default of a family unless a test forced another with forceVariant.

// forced holds the variant forced per family; see forceVariant.
var forced struct {
	sync.Mutex
	m map[string]string
}

// forceVariant makes later Gets build variant v of family (one of the names above; "" goes
// back to the default) and returns the variant that was forced before. A variant that does not
// apply to a spec (a pair transpose of 8-byte elements, a register layernorm of rows that are
// not whole 16-byte packs) or whose entry point the PTX lacks gets the default. For tests and
// the op benchmark only (export_test.go); safe for concurrent use, but it affects every
// Library of the process.
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
