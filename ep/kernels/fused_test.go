package kernels_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

func rotateHalfSpec(x, cos, sin kernels.TensorInfo) kernels.Spec {
	return kernels.Spec{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []kernels.TensorInfo{x, cos, sin}}
}

func TestRotateHalfAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name           string
		x, cos, sin    []int64
		inPlace        bool
		wantSameLayout bool
	}{
		{name: "llama/q", x: []int64{1, 4, 5, 64}, cos: []int64{1, 1, 5, 64}, sin: []int64{1, 1, 5, 64}},
		{name: "llama/k/in-place", x: []int64{2, 2, 7, 32}, cos: []int64{2, 1, 7, 32}, sin: []int64{2, 1, 7, 32}, inPlace: true},
		{name: "2-d caches", x: []int64{2, 3, 7, 16}, cos: []int64{7, 16}, sin: []int64{1, 7, 16}},
		{name: "rank 1/odd half", x: []int64{6}, cos: []int64{6}, sin: []int64{6}},
		{name: "half not a pack", x: []int64{3, 2, 10}, cos: []int64{3, 1, 10}, sin: []int64{3, 2, 10}},
		{name: "cos like x", x: []int64{2, 8}, cos: []int64{2, 8}, sin: []int64{1, 8}},
		{name: "interleaved broadcasts", x: []int64{2, 3, 4, 5, 8}, cos: []int64{2, 1, 4, 1, 8}, sin: []int64{1, 3, 1, 5, 8}},
		{name: "long rows", x: []int64{3, 256}, cos: []int64{1, 256}, sin: []int64{3, 256}},
	}
	for _, dt := range halfAndFloat {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				f := f.sub(t)
				x, cos, sin := f.randomTyped(dt, numel(c.x)), f.randomTyped(dt, numel(c.cos)), f.randomTyped(dt, numel(c.sin))
				spec := rotateHalfSpec(info(dt, c.x...), info(dt, c.cos...), info(dt, c.sin...))
				k := f.get(spec)
				require.Equal(t, []kernels.TensorInfo{info(dt, c.x...)}, k.Outputs())
				ins := []kernels.Tensor{f.uploadTyped(dt, c.x, x), f.uploadTyped(dt, c.cos, cos), f.uploadTyped(dt, c.sin, sin)}
				out := ins[0]
				if !c.inPlace {
					out = f.outputs(k)[0]
				}
				require.NoError(t, k.Execute(ins, []kernels.Tensor{out}))
				ref := kernels.RefRotateHalf(x, c.x, cos, c.cos, sin, c.sin)
				requireClose64(t, f.downloadTyped(out), ref, boundFor(dt), "Y")
			})
		}
	}
}

// TestRotateHalfIsTheExportedChain checks the op against the chain it replaces, run with this
// package's own kernels: Mul(x, cos), Slice, Slice, Neg, Concat, Mul(·, sin), Add.
func TestRotateHalfIsTheExportedChain(t *testing.T) {
	f := newFixture(t)
	dt := kernels.Float32
	xShape, cShape := []int64{1, 2, 3, 8}, []int64{1, 1, 3, 8}
	x, cos, sin := f.randomTyped(dt, numel(xShape)), f.randomTyped(dt, numel(cShape)), f.randomTyped(dt, numel(cShape))
	xt, ct, st := f.uploadTyped(dt, xShape, x), f.uploadTyped(dt, cShape, cos), f.uploadTyped(dt, cShape, sin)
	run := func(spec kernels.Spec, ins ...kernels.Tensor) kernels.Tensor {
		k := f.get(spec)
		outs := f.outputs(k)
		require.NoError(t, k.Execute(ins, outs), spec.Op)
		return outs[0]
	}
	half := info(kernels.Int64, 1)
	slice := func(start, end int64) kernels.Tensor {
		spec := kernels.Spec{Op: "Slice", Opset: 13, Inputs: []kernels.TensorInfo{xt.TensorInfo, half, half, half},
			Consts: map[int]kernels.Const{1: kernels.IntsConst(start), 2: kernels.IntsConst(end), 3: kernels.IntsConst(-1)}}
		starts, ends, axes := f.uploadTyped(kernels.Int64, []int64{1}, []float64{float64(start)}),
			f.uploadTyped(kernels.Int64, []int64{1}, []float64{float64(end)}), f.uploadTyped(kernels.Int64, []int64{1}, []float64{-1})
		return run(spec, xt, starts, ends, axes)
	}
	x1, x2 := slice(0, 4), slice(4, 8)
	neg := run(kernels.Spec{Op: "Neg", Opset: 13, Inputs: []kernels.TensorInfo{x2.TensorInfo}}, x2)
	rot := run(kernels.Spec{Op: "Concat", Opset: 13, Inputs: []kernels.TensorInfo{neg.TensorInfo, x1.TensorInfo},
		Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(-1)}}, neg, x1)
	mulCos := run(kernels.Spec{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{xt.TensorInfo, ct.TensorInfo}}, xt, ct)
	mulSin := run(kernels.Spec{Op: "Mul", Opset: 14, Inputs: []kernels.TensorInfo{rot.TensorInfo, st.TensorInfo}}, rot, st)
	chain := run(kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{mulCos.TensorInfo, mulSin.TensorInfo}}, mulCos, mulSin)
	fused := run(rotateHalfSpec(xt.TensorInfo, ct.TensorInfo, st.TensorInfo), xt, ct, st)
	requireClose64(t, f.downloadTyped(fused), f.downloadTyped(chain), 1e-6, "RotateHalf against the chain")
}

func TestSiluMulAgainstReference(t *testing.T) {
	f := newFixture(t)
	for _, dt := range halfAndFloat {
		for _, c := range []struct {
			shape   []int64
			inPlace bool
		}{{[]int64{7}, false}, {[]int64{3, 5, 33}, false}, {[]int64{2, 1024}, true}, {[]int64{}, false}, {[]int64{4, 3, 4096}, false}} {
			t.Run(fmt.Sprintf("%s/%v/in-place=%v", dt, c.shape, c.inPlace), func(t *testing.T) {
				f := f.sub(t)
				n := numel(c.shape)
				a, b := f.randomTyped(dt, n), f.randomTyped(dt, n)
				if n > 2 {
					a[0], a[1] = -100, 90 // sigmoid saturates: silu(-100) is -0, silu(90) is 90
				}
				spec := kernels.Spec{Op: "cudaep.SiluMul", Opset: 1, Inputs: []kernels.TensorInfo{info(dt, c.shape...), info(dt, c.shape...)}}
				k := f.get(spec)
				require.Equal(t, []kernels.TensorInfo{info(dt, c.shape...)}, k.Outputs())
				assert.Equal(t, "same", kernels.ElementwisePath(k))
				grid, _ := kernels.ElementwiseGrid(k)
				assert.Equal(t, "flat", kernels.KernelVariant(k), "the same-shape binaries' flat grid (%v)", grid)
				ins := []kernels.Tensor{f.uploadTyped(dt, c.shape, a), f.uploadTyped(dt, c.shape, b)}
				out := ins[0]
				if !c.inPlace {
					out = f.outputs(k)[0]
				}
				require.NoError(t, k.Execute(ins, []kernels.Tensor{out}))
				ref := make([]float64, n)
				for i := range ref {
					ref[i] = kernels.RefSiluMul(a[i], b[i])
				}
				requireClose64(t, f.downloadTyped(out), ref, boundFor(dt), "Y")
			})
		}
	}
}

func TestFusedOpsRefuseWithClearErrors(t *testing.T) {
	f := newFixture(t)
	f32, f16 := kernels.Float32, kernels.Float16
	silu := func(a, b kernels.TensorInfo) kernels.Spec {
		return kernels.Spec{Op: "cudaep.SiluMul", Opset: 1, Inputs: []kernels.TensorInfo{a, b}}
	}
	withAttr := rotateHalfSpec(info(f32, 2, 8), info(f32, 2, 8), info(f32, 2, 8))
	withAttr.Attrs = map[string]kernels.Attribute{"interleaved": kernels.IntAttr(1)}
	for _, c := range []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"odd last dimension", rotateHalfSpec(info(f32, 2, 7), info(f32, 2, 7), info(f32, 2, 7)),
			[]string{"input 0 (X) has shape [2,7]", "last dimension 7 must be even"}},
		{"cos last dimension", rotateHalfSpec(info(f32, 2, 8), info(f32, 2, 4), info(f32, 2, 8)),
			[]string{"input 1 (cos) has shape [2,4]", "last dimension must be input 0 (X)'s, 8"}},
		{"sin grows X", rotateHalfSpec(info(f32, 1, 5, 8), info(f32, 5, 8), info(f32, 2, 5, 8)),
			[]string{"input 2 (sin) has shape [2,5,8]", "does not broadcast to input 0 (X)'s shape [1,5,8]"}},
		{"sin does not broadcast", rotateHalfSpec(info(f32, 3, 8), info(f32, 3, 8), info(f32, 2, 8)),
			[]string{"input 2 (sin) has shape [2,8]"}},
		{"cos dtype", rotateHalfSpec(info(f16, 3, 8), info(f32, 3, 8), info(f16, 3, 8)),
			[]string{"input 0 (X) is float16 and input 1 (cos) is float32"}},
		{"integer X", rotateHalfSpec(info(kernels.Int32, 3, 8), info(f32, 3, 8), info(f32, 3, 8)),
			[]string{"input 0 (X) has dtype int32", "float32, float16, bfloat16"}},
		{"scalar X", rotateHalfSpec(info(f32), info(f32, 2), info(f32, 2)), []string{"input 0 (X) has rank 0"}},
		{"two inputs", kernels.Spec{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []kernels.TensorInfo{info(f32, 2, 8), info(f32, 2, 8)}},
			[]string{"got 2 inputs, want 3 (X, cos, sin)"}},
		{"attribute", withAttr, []string{`attribute "interleaved" is not supported`}},
		{"silu shapes", silu(info(f32, 2, 3), info(f32, 3)), []string{"input 0 (A) has shape [2,3] and input 1 (B) has shape [3]", "does not broadcast"}},
		{"silu dtypes", silu(info(f32, 3), info(f16, 3)), []string{"input 0 (A) is float32 and input 1 (B) is float16"}},
		{"silu integers", silu(info(kernels.Int64, 3), info(kernels.Int64, 3)), []string{"input 0 (A) has dtype int64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.lib.Get(c.spec)
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			assert.True(t, strings.HasPrefix(err.Error(), "kernels: unsupported: "+c.spec.Op+" (opset 1): "), err.Error())
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestFusedOpsReplayFromAGraph captures RotateHalf and SiluMul and replays them: each replay
// gives the eager run's bytes, on inputs changed between replays.
func TestFusedOpsReplayFromAGraph(t *testing.T) {
	f := newFixture(t)
	dt := kernels.BFloat16
	xShape, cShape, mShape := []int64{1, 4, 6, 64}, []int64{1, 1, 6, 64}, []int64{6, 96}
	rot := f.get(rotateHalfSpec(info(dt, xShape...), info(dt, cShape...), info(dt, cShape...)))
	silu := f.get(kernels.Spec{Op: "cudaep.SiluMul", Opset: 1, Inputs: []kernels.TensorInfo{info(dt, mShape...), info(dt, mShape...)}})
	require.NoError(t, graphs.Audit([]graphs.Node{rot, silu}))
	shapes := [][]int64{xShape, cShape, cShape, mShape, mShape}
	ins := make([]kernels.Tensor, len(shapes))
	fill := func() {
		for i, sh := range shapes {
			if ins[i].Ptr == 0 {
				ins[i] = f.alloc(info(dt, sh...))
			}
			require.NoError(t, f.env.Context.CopyHtoD(ins[i].Ptr, encode(dt, f.randomTyped(dt, numel(sh)))))
		}
	}
	outs := []kernels.Tensor{f.outputs(rot)[0], f.outputs(silu)[0]}
	run := func() {
		require.NoError(t, rot.Execute(ins[:3], outs[:1]))
		require.NoError(t, silu.Execute(ins[3:], outs[1:]))
	}
	fill()
	exec := f.capture(run)
	for replay := range 2 {
		fill()
		run()
		eager := [][]byte{f.download(outs[0]), f.download(outs[1])}
		f.poison(outs[0])
		f.poison(outs[1])
		require.NoError(t, exec.Launch(f.stream))
		assert.Equal(t, eager[0], f.download(outs[0]), "replay %d: RotateHalf", replay)
		assert.Equal(t, eager[1], f.download(outs[1]), "replay %d: SiluMul", replay)
	}
}

// TestRotateHalfPairAgainstRotateHalf: cudaep.RotateHalfPair gives each RotateHalf's result
// (a decode step's 4 query heads and 2 key heads, one cos and sin row), in 16-byte packs and
// element by element (head size 6), out of place and in place; cos and sin of more than one
// row, and unlike X's, are refused.
func TestRotateHalfPairAgainstRotateHalf(t *testing.T) {
	f := newFixture(t)
	for _, dt := range []kernels.DType{kernels.Float32, kernels.BFloat16} {
		for _, d := range []int64{64, 6} {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/d%d/inplace=%v", dt, d, inPlace), func(t *testing.T) {
					f := f.sub(t)
					qs, ks, cs := []int64{1, 4, 1, d}, []int64{1, 2, 1, d}, []int64{1, 1, 1, d}
					spec := kernels.Spec{Op: "cudaep.RotateHalfPair", Opset: 1, NumOutputs: 2,
						Inputs: []kernels.TensorInfo{info(dt, qs...), info(dt, ks...), info(dt, cs...), info(dt, cs...)}}
					vals := [][]float64{f.randomTyped(dt, numel(qs)), f.randomTyped(dt, numel(ks)), f.randomTyped(dt, d), f.randomTyped(dt, d)}
					k := f.get(spec)
					var ins []kernels.Tensor
					for i, v := range vals {
						ins = append(ins, f.uploadTyped(dt, spec.Inputs[i].Shape, v))
					}
					outs := f.outputs(k)
					if inPlace {
						outs = []kernels.Tensor{ins[0], ins[1]}
					}
					require.NoError(t, k.Execute(ins, outs))
					for p := range 2 {
						one := kernels.Spec{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []kernels.TensorInfo{spec.Inputs[p], spec.Inputs[2], spec.Inputs[3]}}
						_, want := f.runTyped(one, vals[p], vals[2], vals[3])
						assert.Equal(t, want, f.downloadTyped(outs[p]), "output %d", p)
					}
				})
			}
		}
	}
	for _, tc := range []struct {
		ins  []kernels.TensorInfo
		want string
	}{
		{[]kernels.TensorInfo{f32Info(1, 4, 3, 8), f32Info(1, 2, 3, 8), f32Info(1, 1, 3, 8), f32Info(1, 1, 3, 8)}, "one row"},
		{[]kernels.TensorInfo{f32Info(1, 4, 1, 8), f32Info(1, 2, 1, 4), f32Info(8), f32Info(8)}, "rotation 1"},
		{[]kernels.TensorInfo{f32Info(1, 4, 1, 8), info(kernels.BFloat16, 1, 2, 1, 8), f32Info(8), f32Info(8)}, "rotation 1"},
	} {
		_, err := f.lib.Get(kernels.Spec{Op: "cudaep.RotateHalfPair", Opset: 1, NumOutputs: 2, Inputs: tc.ins})
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), tc.want)
	}
}
