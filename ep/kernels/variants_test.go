package kernels_test

import (
	"fmt"
	"math"
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
// the PTX has them); with "nd" forced, the general tiled transpose.
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
	for _, forced := range []string{"", "nd"} {
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
						require.Equal(t, want, kernels.KernelVariant(k))
						shift := int64(0)
						if misaligned {
							shift = 1
						}
						in := f.uploadShifted(info(dt, c.shape...), x, shift)
						out := f.allocShifted(k.Outputs()[0], shift)
						f.poison(out)
						launched := want
						if misaligned && (want == "pair4" || want == "pair8") {
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

// TestBinaryFlatGrid: a same-shape float binary (Add, Sub, Mul, Div, Pow) launches on one
// 16-byte pack a thread, ceil(packs/256) blocks of 256 threads with no cap ("flat"; 65536
// blocks for 256 MiB), and on linearGrid, at most 8192 blocks, with "stride" forced (the
// baseline the op benchmark times beside it). Integer and comparison kernels, broadcasts and
// the unary ops keep linearGrid.
func TestBinaryFlatGrid(t *testing.T) {
	f := newFixture(t)
	const mib = 1 << 20
	same := func(op string, dt kernels.DType, n int64) kernels.Spec {
		spec := kernels.Spec{Op: op, Opset: 14, Inputs: []kernels.TensorInfo{info(dt, n), info(dt, n)}}
		if op == "Less" {
			spec.Opset = 13
		}
		return spec
	}
	cases := []struct {
		name         string
		spec         kernels.Spec
		flat, stride uint32 // grid.X by default and with "stride" forced
		variant      string // KernelVariant by default ("stride" when forced, if not "")
	}{
		{"add f32 256MiB", same("Add", kernels.Float32, 256*mib/4), 65536, 8192, "flat"},
		{"add f16 256MiB", same("Add", kernels.Float16, 256*mib/2), 65536, 8192, "flat"},
		{"mul bf16 partial pack", same("Mul", kernels.BFloat16, 3*8*256+1), 4, 25, "flat"},
		{"pow f32 3x1000", kernels.Spec{Op: "Pow", Opset: 15, Inputs: []kernels.TensorInfo{info(kernels.Float32, 3, 1000), info(kernels.Float32, 3, 1000)}}, 3, 12, "flat"},
		{"div f16 one element", same("Div", kernels.Float16, 1), 1, 1, "flat"},
		{"sub f32 one block short of the cap", same("Sub", kernels.Float32, 8191*256*4), 8191, 8192, "flat"},
		{"add i32 large", same("Add", kernels.Int32, 64*mib), 8192, 8192, ""},
		{"less f32 large", same("Less", kernels.Float32, 64*mib), 8192, 8192, ""},
		{"add f32 broadcast", kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Float32, 64*1024, 1024), info(kernels.Float32, 1024)}}, 8192, 8192, ""},
		{"sigmoid f32 large", kernels.Spec{Op: "Sigmoid", Opset: 13, Inputs: []kernels.TensorInfo{info(kernels.Float32, 64*mib)}}, 8192, 8192, ""},
		{"relu f16 small", kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{info(kernels.Float16, 3000)}}, 12, 12, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			for _, forced := range []string{"", "stride"} {
				if forced != "" {
					forceVariant(t, "elementwise", forced)
				}
				k := f.get(c.spec)
				grid, block := kernels.ElementwiseGrid(k)
				want, variant := c.flat, c.variant
				if forced != "" {
					want = c.stride
					if variant != "" {
						variant = forced
					}
				}
				assert.Equal(t, cudadrv.Dim3{X: want, Y: 1, Z: 1}, grid, "grid, %q forced", forced)
				assert.Equal(t, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, block, "block, %q forced", forced)
				assert.Equal(t, variant, kernels.KernelVariant(k), "variant, %q forced", forced)
			}
		})
	}
}

// TestBinaryFlatGridMatchesStride runs the same-shape float binaries on their default flat
// grid and on the "stride" baseline's (linearGrid) on sizes with whole and partial blocks and a
// tail after the last whole pack, at aligned addresses (16-byte packs) and misaligned ones
// (one element at a time), and checks the outputs bit for bit against each other and within
// the elementwise bound against the reference.
func TestBinaryFlatGridMatchesStride(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		per := int64(16 / dt.Size())
		for _, n := range []int64{1, per - 1, 3 * per, 256*per + 5, 2 * 256 * per, 3*256*per + 2*per + 3} {
			for _, op := range []string{"Add", "Div", "Pow"} {
				for _, misaligned := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/%d/misaligned%v", op, dt, n, misaligned), func(t *testing.T) {
						f := f.sub(t)
						spec := kernels.Spec{Op: op, Opset: 15, Inputs: []kernels.TensorInfo{info(dt, n), info(dt, n)}}
						shift := int64(0)
						if misaligned {
							shift = 1
						}
						vals := [2][]float64{f.randomTyped(dt, n), f.randomTyped(dt, n)}
						if op == "Pow" {
							for j := range vals[0] {
								vals[0][j] = math.Abs(vals[0][j])
							}
						}
						ins := []kernels.Tensor{f.uploadShifted(spec.Inputs[0], vals[0], shift), f.uploadShifted(spec.Inputs[1], vals[1], shift)}
						flat := f.get(spec)
						require.Equal(t, "flat", kernels.KernelVariant(flat))
						forceVariant(t, "elementwise", "stride")
						stride := f.get(spec)
						require.Equal(t, "stride", kernels.KernelVariant(stride))
						var outs [2][]byte
						for i, k := range []kernels.Kernel{flat, stride} {
							out := f.allocShifted(info(dt, n), shift)
							f.poison(out)
							require.NoError(t, k.Execute(ins, []kernels.Tensor{out}))
							outs[i] = f.download(out)
						}
						assert.Equal(t, outs[1], outs[0], "flat's output bit for bit against stride's")
						ref, _, _ := kernels.RefBinary(op, vals[0], []int64{n}, vals[1], []int64{n})
						requireClose64(t, decode(dt, outs[0]), ref, boundFor(dt), op)
					})
				}
			}
		}
	}
}
