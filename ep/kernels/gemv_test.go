package kernels_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// gemvBound is the error bound of a GEMV MatMul: gemmBoundFor for 16-bit types, boundGemm
// for float32.
func gemvBound(dt kernels.DType) float64 {
	if dt == kernels.Float32 {
		return boundGemm
	}
	return gemmBoundFor(dt)
}

// TestGemvGeometryAtLlamaShapes: the grids gemvGeometry's comment promises on an H200 (132
// SMs) for a Llama decoder's projections, and for every shape and SM count chunks of whole
// 64-row steps (8 warps × 8 rows) that cover K with no empty chunk, at most 32 of them, tiles
// that cover N, and a split grid of at most 4 blocks per SM (one wave).
func TestGemvGeometryAtLlamaShapes(t *testing.T) {
	for _, c := range []struct{ k, n, tiles, chunks, rows int64 }{
		{2048, 2048, 8, 32, 64},
		{2048, 512, 2, 32, 64},
		{2048, 8192, 32, 16, 128},
		{8192, 2048, 8, 32, 256},
		{2048, 32000, 125, 4, 512},
		{2048, 256 * 265, 265, 1, 2048}, // enough tiles: no split
	} {
		for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
			tiles, chunks, rows := kernels.GemvGeometry(c.k, c.n, dt, 132)
			assert.Equal(t, [3]int64{c.tiles, c.chunks, c.rows}, [3]int64{tiles, chunks, rows}, "%s %dx%d", dt, c.k, c.n)
		}
	}
	for _, sms := range []int{0, 1, 46, 132} {
		resident := int64(4 * sms)
		if sms == 0 {
			resident = 4 * 132 // an SM count of 0 means an H200's
		}
		for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
			tc := int64(32 * 16 / dt.Size())
			for _, k := range []int64{1, 37, 64, 65, 1000, 2048, 8192, 100000} {
				for _, n := range []int64{8, 264, 512, 2048, 32000, 200000} {
					tiles, chunks, rows := kernels.GemvGeometry(k, n, dt, sms)
					what := fmt.Sprintf("%d SMs, %s %dx%d: %d tiles, %d chunks of %d rows", sms, dt, k, n, tiles, chunks, rows)
					assert.True(t, tiles*tc >= n && (tiles-1)*tc < n, what)
					assert.True(t, rows%64 == 0 && chunks >= 1 && chunks <= 32, what)
					assert.True(t, chunks*rows >= k && (chunks-1)*rows < k, what)
					assert.True(t, chunks == 1 || tiles*chunks <= resident, what)
				}
			}
		}
	}
}

func TestMatMulGemvAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		a     []int64 // A's leading dimensions; K is appended
		k, n  int64
		split bool // K split across blocks (for every dtype)
	}{
		{[]int64{1, 1}, 64, 256, false},  // one tile of float16, two of float32
		{[]int64{1, 1}, 37, 264, false},  // K under one chunk, N not whole tiles
		{[]int64{1}, 1000, 520, true},    // K not whole chunks
		{[]int64{1, 1}, 8192, 136, true}, // K large, one tile
		{[]int64{1, 1}, 2048, 512, true}, // Llama's key and value projections
		{[]int64{}, 128, 32000, true},    // the LM head's N, 1-D A
		{[]int64{1, 1, 1}, 130, 8, true}, // one pack a row: one lane of a tile
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range cases {
			aShape := append(append([]int64{}, c.a...), c.k)
			bShape := []int64{c.k, c.n}
			t.Run(fmt.Sprintf("%s/%vx%v", dt, aShape, bShape), func(t *testing.T) {
				f := f.sub(t)
				spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, aShape...), info(dt, bShape...)}}
				a, b := f.randomTyped(dt, c.k), f.randomTyped(dt, c.k*c.n)
				k, got := f.runTyped(spec, a, b)
				require.Equal(t, "gemv", kernels.KernelVariant(k))
				_, chunks, _ := kernels.GemvGrid(k)
				assert.Equal(t, c.split, chunks > 1, "K split into %d chunks", chunks)
				ref, shape, ok := kernels.RefMatMul(a, aShape, b, bShape)
				require.True(t, ok)
				assert.Equal(t, []kernels.TensorInfo{info(dt, shape...)}, k.Outputs())
				requireClose64(t, got, ref, gemvBound(dt), k.Name())
			})
		}
	}
}

// TestMatMulGemvDispatch: one row of A against a matrix B of whole 16-byte rows takes the
// GEMV, every other MatMul cuBLAS (two rows, a batch of A or of B, N not whole packs, a 1-D
// B, the cuBLAS baseline forced); each computes the reference product.
func TestMatMulGemvDispatch(t *testing.T) {
	f := newFixture(t)
	bf, h, fl := kernels.BFloat16, kernels.Float16, kernels.Float32
	cases := []struct {
		name    string
		dt      kernels.DType
		a, b    []int64
		forced  string
		variant string
	}{
		{"one row", bf, []int64{1, 1, 64}, []int64{64, 256}, "", "gemv"},
		{"1-D A", bf, []int64{64}, []int64{64, 256}, "", "gemv"},
		{"float32 N of whole packs", fl, []int64{1, 64}, []int64{64, 12}, "", "gemv"},
		{"two rows", bf, []int64{2, 64}, []int64{64, 256}, "", "cublas"},
		{"batch of A", bf, []int64{2, 1, 64}, []int64{64, 256}, "", "cublas"},
		{"batch of B", bf, []int64{1, 64}, []int64{1, 64, 256}, "", "cublas"},
		{"float16 N not whole packs", h, []int64{1, 64}, []int64{64, 12}, "", "cublas"},
		{"float32 N not whole packs", fl, []int64{1, 64}, []int64{64, 6}, "", "cublas"},
		{"1-D B", bf, []int64{1, 64}, []int64{64}, "", "cublas"},
		{"cuBLAS forced", bf, []int64{1, 1, 64}, []int64{64, 256}, "cublas", "cublas"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := f.sub(t)
			forceVariant(t, "matmul", c.forced)
			spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(c.dt, c.a...), info(c.dt, c.b...)}}
			a, b := f.randomTyped(c.dt, numel(c.a)), f.randomTyped(c.dt, numel(c.b))
			k, got := f.runTyped(spec, a, b)
			assert.Equal(t, c.variant, kernels.KernelVariant(k))
			tiles, _, _ := kernels.GemvGrid(k)
			assert.Equal(t, c.variant == "gemv", tiles > 0, "GEMV planned")
			ref, _, ok := kernels.RefMatMul(a, c.a, b, c.b)
			require.True(t, ok)
			requireClose64(t, got, ref, gemvBound(c.dt), k.Name())
		})
	}
}

// TestMatMulGemvUnalignedBFallsBackToCuBLAS: a B that is not 16-byte aligned (a view into
// another buffer) cannot be read with the GEMV's 16-byte loads; Execute runs the cuBLAS GEMM
// for it instead, with the same result.
func TestMatMulGemvUnalignedBFallsBackToCuBLAS(t *testing.T) {
	f := newFixture(t)
	dt := kernels.BFloat16
	const k, n = 1000, 264
	spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, 1, k), info(dt, k, n)}}
	kern := f.get(spec)
	a, b := f.randomTyped(dt, k), f.randomTyped(dt, k*n)
	ref, _, _ := kernels.RefMatMul(a, []int64{1, k}, b, []int64{k, n})
	at := f.uploadTyped(dt, []int64{1, k}, a)
	for _, off := range []cudadrv.DevicePtr{0, 2, 8} {
		buf := f.alloc(info(dt, k*n+8))
		bt := kernels.Tensor{TensorInfo: info(dt, k, n), Ptr: buf.Ptr + off}
		require.NoError(t, f.env.Context.CopyHtoD(bt.Ptr, encode(dt, b)))
		outs := f.outputs(kern)
		want := "gemv"
		if off != 0 {
			want = "cublas"
		}
		assert.Equal(t, want, kernels.LaunchVariant(kern, []kernels.Tensor{at, bt}, outs), "B at +%d bytes", off)
		require.NoError(t, kern.Execute([]kernels.Tensor{at, bt}, outs))
		requireClose64(t, f.downloadTyped(outs[0]), ref, gemvBound(dt), fmt.Sprintf("B at +%d bytes", off))
	}
}

// gemvSequence is a decode-like run of GEMV MatMuls of one Library on its stream: two that
// split K (so both use the Library's shared scratch for their partial sums and its counters),
// an Attention decode between them (which writes its own partial results to the same scratch
// buffer), one that does not split, and the first kernel again on another input.
type gemvSequence struct {
	steps []step
	refs  map[int][]float64 // reference output of each GEMV step
	gemvs []kernels.Kernel
}

func newGemvSequence(f *fixture) *gemvSequence {
	seq := &gemvSequence{refs: map[int][]float64{}}
	matmul := func(k kernels.Kernel, dt kernels.DType, aShape []int64, kk, n int64) {
		a, b := f.randomTyped(dt, kk), f.randomTyped(dt, kk*n)
		ref, _, _ := kernels.RefMatMul(a, aShape, b, []int64{kk, n})
		seq.refs[len(seq.steps)] = ref
		ins := []kernels.Tensor{f.uploadTyped(dt, aShape, a), f.uploadTyped(dt, []int64{kk, n}, b)}
		seq.steps = append(seq.steps, step{k, ins, f.outputs(k)})
		seq.gemvs = append(seq.gemvs, k)
	}
	get := func(dt kernels.DType, a []int64, kk, n int64) kernels.Kernel {
		k := f.get(kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, a...), info(dt, kk, n)}})
		require.Equal(f.t, "gemv", kernels.KernelVariant(k))
		return k
	}
	bf, h := kernels.BFloat16, kernels.Float16
	g1 := get(bf, []int64{1, 1, 1000}, 1000, 520)
	g2 := get(h, []int64{1, 2048}, 2048, 512)
	g3 := get(bf, []int64{1, 37}, 37, 264)
	for _, g := range []kernels.Kernel{g1, g2} {
		_, chunks, _ := kernels.GemvGrid(g)
		require.Greater(f.t, chunks, uint32(1), "%s splits K", g.Name())
	}
	matmul(g1, bf, []int64{1, 1, 1000}, 1000, 520)
	attn := f.get(kernels.Spec{Op: "Attention", Opset: 23, NumOutputs: 1, Attrs: map[string]kernels.Attribute{},
		Inputs: []kernels.TensorInfo{info(bf, 1, 4, 1, 64), info(bf, 1, 2, 256, 64), info(bf, 1, 2, 256, 64)}})
	path, _ := kernels.AttentionPlan(attn)
	require.Equal(f.t, "decode", path, "the Attention step uses the Library's scratch")
	var attnIns []kernels.Tensor
	for _, in := range []kernels.TensorInfo{info(bf, 1, 4, 1, 64), info(bf, 1, 2, 256, 64), info(bf, 1, 2, 256, 64)} {
		attnIns = append(attnIns, f.uploadTyped(bf, in.Shape, f.randomTyped(bf, in.NumElements())))
	}
	seq.steps = append(seq.steps, step{attn, attnIns, f.outputs(attn)})
	matmul(g2, h, []int64{1, 2048}, 2048, 512)
	matmul(g3, bf, []int64{1, 37}, 37, 264)
	matmul(g1, bf, []int64{1, 1, 1000}, 1000, 520)
	return seq
}

func (seq *gemvSequence) run(t *testing.T) {
	for _, st := range seq.steps {
		require.NoError(t, st.k.Execute(st.ins, st.out), st.k.Name())
	}
}

// checkRefs checks every GEMV step's output against its reference, and that the split
// kernels left their arrival counters zero.
func (seq *gemvSequence) checkRefs(t *testing.T, f *fixture) {
	for i, ref := range seq.refs {
		st := seq.steps[i]
		requireClose64(t, f.downloadTyped(st.out[0]), ref, gemvBound(st.out[0].DType), fmt.Sprintf("step %d (%s)", i, st.k.Name()))
	}
	for _, k := range seq.gemvs {
		tiles, _, _ := kernels.GemvGrid(k)
		if p := kernels.GemvCounters(k); p != 0 {
			b := make([]byte, 4*tiles)
			require.NoError(t, f.env.Context.CopyDtoH(b, p))
			for i := range tiles {
				assert.Zero(t, binary.LittleEndian.Uint32(b[4*i:]), "%s: counter of tile %d after the run", k.Name(), i)
			}
		}
	}
}

// TestMatMulGemvKernelsShareScratch: GEMV kernels of one Library, back to back on its stream
// with an Attention decode between them, all using the Library's one scratch buffer, each
// give the reference product, twice in a row.
func TestMatMulGemvKernelsShareScratch(t *testing.T) {
	f := newFixture(t)
	seq := newGemvSequence(f)
	for range 2 {
		seq.run(t)
		seq.checkRefs(t, f)
	}
}

// TestMatMulGemvCapturedReplaysBitIdentical: the sequence captured into a CUDA graph and
// replayed twice (outputs poisoned before each) writes the eager run's bytes: the partial
// sums are rewritten and the counters reset by every launch, and the chunks are added in a
// fixed order.
func TestMatMulGemvCapturedReplaysBitIdentical(t *testing.T) {
	f := newFixture(t)
	seq := newGemvSequence(f)
	seq.run(t)
	seq.checkRefs(t, f)
	var eager [][]byte
	for _, st := range seq.steps {
		eager = append(eager, f.download(st.out[0]))
	}
	poisonAll := func() {
		for _, st := range seq.steps {
			f.poison(st.out[0])
		}
	}
	poisonAll()
	require.NoError(t, f.stream.Synchronize())
	require.NoError(t, f.stream.BeginCapture(cudadrv.CaptureModeThreadLocal))
	seq.run(t)
	graph, err := f.stream.EndCapture()
	require.NoError(t, err)
	defer func() { assert.NoError(t, graph.Destroy()) }()
	exec, err := graph.Instantiate(0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exec.Destroy()) }()
	for replay := range 2 {
		poisonAll()
		require.NoError(t, exec.Launch(f.stream))
		for i, st := range seq.steps {
			assert.Equal(t, eager[i], f.download(st.out[0]), "replay %d: step %d (%s) differs from the eager run", replay, i, st.k.Name())
		}
		seq.checkRefs(t, f)
	}
}
