package kernels_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// forceVariant forces baseline v of family for the rest of test t.
func forceVariant(t *testing.T, family, v string) {
	prev := kernels.ForceVariant(family, v)
	t.Cleanup(func() { kernels.ForceVariant(family, prev) })
}

// hasFunction reports whether the loaded PTX has entry point name (the kernels newer than the
// committed PTX are optional; the library builds the baseline without them).
func hasFunction(f *fixture, name string) bool { return kernels.LibraryFunction(f.lib, name) != nil }

// TestLayerNormBaselineAgainstReference runs the normalization tests with the two-pass kernel
// ("old") forced, the baseline the op benchmark times beside the register kernels.
func TestLayerNormBaselineAgainstReference(t *testing.T) {
	forceVariant(t, "layernorm", "old")
	k := newFixture(t).get(kernels.Spec{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{info(kernels.Float32, 2, 4096), info(kernels.Float32, 4096)}})
	require.Equal(t, "old", kernels.KernelVariant(k))
	TestLayerNormAgainstReference(t)
	TestSimplifiedLayerNormAgainstReference(t)
	TestSkipLayerNormsAgainstReference(t)
}

// TestLayerNormKernelSelection: a row of P 16-byte packs gets the register kernel with the
// fewest packs per thread r in {2, 4, 8} whose ceil(P/r) threads (whole warps) are at most 128,
// the two-pass kernel past 1024 packs, for rows that are not whole packs and for tensors not
// 16-byte aligned; each choice computes LayerNormalization, SimplifiedLayerNormalization and
// SkipSimplifiedLayerNormalization as the reference does.
func TestLayerNormKernelSelection(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		packs   int64 // whole packs per row; -1: a row of 64 packs and one element more
		variant string
		threads uint32
	}{
		{16, "r2", 32}, {256, "r2", 128}, {257, "r4", 96}, {512, "r4", 128},
		{513, "r8", 96}, {1024, "r8", 128}, {1025, "old", 0}, {-1, "old", 0},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		per := int64(16 / dt.Size())
		for _, c := range cases {
			h := c.packs * per
			if c.packs < 0 {
				h = 64*per + 1
			}
			for _, op := range []string{"LayerNormalization", "SimplifiedLayerNormalization", "com.microsoft.SkipSimplifiedLayerNormalization"} {
				for _, misaligned := range []bool{false, true} {
					if misaligned && c.variant == "old" {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/%d/misaligned%v", op, dt, h, misaligned), func(t *testing.T) {
						f := f.sub(t)
						rows := int64(3)
						shape := []int64{rows, h}
						spec := kernels.Spec{Op: op, Opset: 17, Inputs: []kernels.TensorInfo{info(dt, shape...)}}
						x := f.randomTyped(dt, rows*h)
						vals := [][]float64{x}
						if op == "com.microsoft.SkipSimplifiedLayerNormalization" {
							spec.Opset = 1
							spec.Inputs = append(spec.Inputs, info(dt, shape...))
							vals = append(vals, f.randomTyped(dt, rows*h))
						}
						gamma := f.randomTyped(dt, h)
						spec.Inputs = append(spec.Inputs, info(dt, h))
						vals = append(vals, gamma)
						var beta []float64
						if op == "LayerNormalization" {
							beta = f.randomTyped(dt, h)
							spec.Inputs = append(spec.Inputs, info(dt, h))
							vals = append(vals, beta)
						}
						k := f.get(spec)
						want := c.variant
						if want != "old" && !hasFunction(f, "cudaep_layernorm_"+want+"_"+suffix(dt)) {
							want = "old"
						}
						require.Equal(t, want, kernels.KernelVariant(k))
						if want != "old" {
							assert.Equal(t, c.threads, kernels.NormBlock(k), "threads per row")
						}
						// Misaligned: every tensor one element past an aligned address.
						shift := int64(0)
						if misaligned {
							shift = 1
						}
						ins := make([]kernels.Tensor, len(vals))
						for i, v := range vals {
							ins[i] = f.uploadShifted(spec.Inputs[i], v, shift)
						}
						outs := make([]kernels.Tensor, len(k.Outputs()))
						for i, o := range k.Outputs() {
							outs[i] = f.allocShifted(o, shift)
							f.poison(outs[i])
						}
						if misaligned {
							assert.Equal(t, "old", kernels.LaunchVariant(k, ins, outs))
						} else {
							assert.Equal(t, want, kernels.LaunchVariant(k, ins, outs))
						}
						require.NoError(t, k.Execute(ins, outs))
						in := x
						if len(spec.Inputs) == 3 && op != "LayerNormalization" { // x + skip
							in = make([]float64, len(x))
							for i := range x {
								in[i] = x[i] + vals[1][i]
							}
						}
						y, _, _ := kernels.RefLayerNorm(in, shape, 1, gamma, beta, float64(float32(1e-5)), op != "LayerNormalization")
						requireClose64(t, f.downloadTyped(outs[0]), y, boundFor(dt), "Y")
					})
				}
			}
		}
	}
}

// allocShifted returns a device tensor of info whose address is shift elements past an
// aligned allocation.
func (f *fixture) allocShifted(info kernels.TensorInfo, shift int64) kernels.Tensor {
	n := info.NumElements()
	t := f.alloc(kernels.TensorInfo{DType: info.DType, Shape: []int64{n + shift}})
	return kernels.Tensor{TensorInfo: info, Ptr: t.Ptr + cudadrv.DevicePtr(shift*int64(info.DType.Size()))}
}

// uploadShifted is uploadTyped at an address shift elements past an aligned allocation.
func (f *fixture) uploadShifted(info kernels.TensorInfo, vals []float64, shift int64) kernels.Tensor {
	t := f.allocShifted(info, shift)
	require.NoError(f.t, f.env.Context.CopyHtoD(t.Ptr, encode(info.DType, vals)))
	return t
}

// TestTransposeVariantsAgainstReference runs the batched 2-D transposes (last two axes
// swapped, plain 2-D included) on shapes with whole and partial tiles, odd and even sides, and
// a batch, against the reference: by default pair8 for 2-byte elements and pair4 for 4-byte
// ones with even sides, tile64 otherwise and for addresses not aligned to two elements (when
// the PTX has them); with "nd" forced, the general tiled transpose; with "swizzle<G>" forced,
// the pairs with their tiles in groups of G row tiles (where the PTX has them).
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
	for _, forced := range []string{"", "nd", "swizzle1", "swizzle3", "swizzle8"} {
		for _, c := range cases {
			for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.Int64, kernels.Bool} {
				for _, misaligned := range []bool{false, true} {
					t.Run(fmt.Sprintf("%q/%s/%v/%v/misaligned%v", forced, dt, c.shape, c.perm, misaligned), func(t *testing.T) {
						forceVariant(t, "transpose2d", forced)
						f := f.sub(t)
						x := patterned(dt, numel(c.shape), 4)
						k := f.get(kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, c.shape...)},
							Attrs: map[string]kernels.Attribute{"perm": kernels.IntsAttr(c.perm...)}})
						require.Equal(t, "tiled", kernels.TransposePath(k))
						rows, cols := c.shape[len(c.shape)-2], c.shape[len(c.shape)-1]
						size := dt.Size()
						want := "tile64"
						if rows%2 == 0 && cols%2 == 0 && size == 2 {
							want = "pair8"
						} else if rows%2 == 0 && cols%2 == 0 && size == 4 {
							want = "pair4"
						}
						if forced == "nd" || !hasFunction(f, fmt.Sprintf("cudaep_transpose2d_%s_b%d", want, 8*size)) ||
							!hasFunction(f, fmt.Sprintf("cudaep_transpose2d_tile64_b%d", 8*size)) {
							want = "nd"
						}
						pair := want == "pair4" || want == "pair8"
						if g, ok := strings.CutPrefix(forced, "swizzle"); ok && pair && hasFunction(f, fmt.Sprintf("cudaep_transpose2d_%ss_b%d", want, 8*size)) {
							want += "s" + g
						}
						require.Equal(t, want, kernels.KernelVariant(k))
						shift := int64(0)
						if misaligned {
							shift = 1
						}
						in := f.uploadShifted(info(dt, c.shape...), x, shift)
						out := f.allocShifted(k.Outputs()[0], shift)
						f.poison(out)
						launched := want
						if misaligned && pair {
							launched = "tile64"
						}
						assert.Equal(t, launched, kernels.LaunchVariant(k, []kernels.Tensor{in}, []kernels.Tensor{out}))
						require.NoError(t, k.Execute([]kernels.Tensor{in}, []kernels.Tensor{out}))
						shape := make([]int64, len(c.perm))
						for i, p := range c.perm {
							shape[i] = c.shape[p]
						}
						ref := make([]float64, len(x))
						for i := range ref {
							oc := coords(int64(i), shape)
							ic := make([]int64, len(oc))
							for j, p := range c.perm {
								ic[p] = oc[j]
							}
							ref[i] = x[flat(ic, c.shape)]
						}
						assert.Equal(t, ref, f.downloadTyped(out))
					})
				}
			}
		}
	}
}

// TestElementwiseVariantsMatchTheDefault runs the same-shape float kernels with each variant
// of family "elementwise" forced ("flat": one pack a thread; "v4": 128-thread blocks of four
// packs a thread, where the PTX has it) on sizes with whole and partial blocks and a tail
// after the last whole pack, at aligned and misaligned addresses, and checks each output bit
// for bit against the default grid-stride kernel's on the same inputs.
func TestElementwiseVariantsMatchTheDefault(t *testing.T) {
	f := newFixture(t)
	for _, forced := range []string{"flat", "v4"} {
		for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
			per := int64(16 / dt.Size())
			for _, n := range []int64{1, per - 1, 3 * per, 512*per + 5, 2 * 512 * per, 3*512*per + 2*per + 3} {
				for _, op := range []string{"Add", "Div", "Pow", "Sigmoid"} {
					for _, misaligned := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/%s/%s/%d/misaligned%v", forced, op, dt, n, misaligned), func(t *testing.T) {
							f := f.sub(t)
							spec := kernels.Spec{Op: op, Opset: 14, Inputs: []kernels.TensorInfo{info(dt, n), info(dt, n)}}
							if op == "Sigmoid" {
								spec.Inputs = spec.Inputs[:1]
							}
							shift := int64(0)
							if misaligned {
								shift = 1
							}
							ins := make([]kernels.Tensor, len(spec.Inputs))
							for i, in := range spec.Inputs {
								vals := f.randomTyped(dt, n)
								if op == "Pow" && i == 0 {
									for j := range vals {
										vals[j] = math.Abs(vals[j])
									}
								}
								ins[i] = f.uploadShifted(in, vals, shift)
							}
							def := f.get(spec)
							require.Equal(t, "stride", kernels.KernelVariant(def))
							forceVariant(t, "elementwise", forced)
							k := f.get(spec)
							want := forced
							if forced == "v4" && !hasFunction(f, fmt.Sprintf("cudaep_%s_v4_%s", strings.ToLower(op), suffixOf(dt))) {
								want = "stride"
							}
							require.Equal(t, want, kernels.KernelVariant(k))
							outs := make([][]byte, 2)
							for i, kk := range []kernels.Kernel{def, k} {
								out := f.allocShifted(info(dt, n), shift)
								f.poison(out)
								require.NoError(t, kk.Execute(ins, []kernels.Tensor{out}))
								outs[i] = f.download(out)
							}
							assert.Equal(t, outs[0], outs[1], "bit for bit")
						})
					}
				}
			}
		}
	}
}

// suffixOf is the kernel-name suffix of a float dtype.
func suffixOf(dt kernels.DType) string {
	return map[kernels.DType]string{kernels.Float32: "f32", kernels.Float16: "f16", kernels.BFloat16: "bf16"}[dt]
}
