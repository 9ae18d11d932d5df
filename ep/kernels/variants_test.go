package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// forceVariant forces variant v of family for the rest of test t.
func forceVariant(t *testing.T, family, v string) {
	prev := kernels.ForceVariant(family, v)
	t.Cleanup(func() { kernels.ForceVariant(family, prev) })
}

// TestNormVariantsAgainstReference runs the normalization tests with each layernorm kernel
// variant forced, after checking that a row of 4096 gets the variant when the loaded PTX has
// its entry point (PTX made before the variant was added builds the old kernel).
func TestNormVariantsAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, v := range append([]string{"old"}, kernels.NormVariants...) {
		t.Run(v, func(t *testing.T) {
			forceVariant(t, "layernorm", v)
			for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
				k := f.sub(t).get(kernels.Spec{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{info(dt, 2, 4096), info(dt, 4096)}})
				want := v
				if v != "old" && kernels.LibraryFunction(f.lib, "cudaep_layernorm_"+v+"_"+suffixOf(dt)) == nil {
					want = "old"
				}
				assert.Equal(t, want, kernels.KernelVariant(k), dt.String())
			}
			TestLayerNormAgainstReference(t)
			TestSimplifiedLayerNormAgainstReference(t)
			TestSkipLayerNormsAgainstReference(t)
		})
	}
}

// suffixOf is the kernel name suffix of a float type.
func suffixOf(dt kernels.DType) string {
	switch dt {
	case kernels.Float16:
		return "f16"
	case kernels.BFloat16:
		return "bf16"
	}
	return "f32"
}

// TestTransposeVariantsAgainstReference runs the batched 2-D transposes (last two axes
// swapped, plain 2-D included) with each variant forced, on shapes with whole and partial
// tiles, odd and even sides, and a batch, against the reference; a variant that does not
// apply (pairs of 1- or 8-byte elements, odd sides) or whose entry point the PTX lacks gets
// the default, and "nd" the general tiled transpose.
func TestTransposeVariantsAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ shape, perm []int64 }{
		{[]int64{67, 45}, []int64{1, 0}},
		{[]int64{130, 258}, []int64{1, 0}},
		{[]int64{256, 128}, []int64{1, 0}}, // whole tiles only
		{[]int64{3, 40, 70}, []int64{0, 2, 1}},
		{[]int64{3, 130, 66}, []int64{0, 2, 1}},
		{[]int64{2, 3, 64, 100}, []int64{0, 1, 3, 2}}, // two batch axes merge into one
		{[]int64{1, 4, 33}, []int64{0, 2, 1}},         // a batch of 1 merges away
	}
	for _, v := range append([]string{"", "nd"}, kernels.TransposeVariants...) {
		for _, c := range cases {
			for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
				t.Run(fmt.Sprintf("%s/%s/%v/%v", v, dt, c.shape, c.perm), func(t *testing.T) {
					forceVariant(t, "transpose2d", v)
					f := f.sub(t)
					x := patterned(dt, numel(c.shape), 4)
					k, got := f.runTyped(kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.shape...)},
						Attrs: map[string]kernels.Attribute{"perm": kernels.IntsAttr(c.perm...)}}, x)
					require.Equal(t, "tiled", kernels.TransposePath(k))
					rows, cols := c.shape[len(c.shape)-2], c.shape[len(c.shape)-1]
					pair := v == "pair4" || v == "pair8"
					switch {
					case v == "nd":
						assert.Equal(t, "nd", kernels.KernelVariant(k))
					case v != "" && (!pair || (dt.Size() == 2 || dt.Size() == 4) && rows%2 == 0 && cols%2 == 0) &&
						kernels.LibraryFunction(f.lib, fmt.Sprintf("cudaep_transpose2d_%s_b%d", v, 8*dt.Size())) != nil:
						assert.Equal(t, v, kernels.KernelVariant(k))
					}
					out := make([]int64, len(c.perm))
					for i, p := range c.perm {
						out[i] = c.shape[p]
					}
					ref := make([]float64, len(x))
					for i := range ref {
						oc := coords(int64(i), out)
						ic := make([]int64, len(oc))
						for j, p := range c.perm {
							ic[p] = oc[j]
						}
						ref[i] = x[flat(ic, c.shape)]
					}
					assert.Equal(t, ref, got)
				})
			}
		}
	}
}
