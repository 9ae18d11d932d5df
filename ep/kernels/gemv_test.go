package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
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
			tiles, chunks, rows := kernels.GemvGeometry(c.k, []int64{c.n}, dt, 132)
			assert.Equal(t, [3]int64{c.tiles, c.chunks, c.rows}, [3]int64{tiles, chunks, rows}, "%s %dx%d", dt, c.k, c.n)
		}
	}
	// Groups: the tiles of every matrix, one after the other.
	for _, c := range []struct {
		k                   int64
		ns                  []int64
		tiles, chunks, rows int64
	}{
		{2048, []int64{2048, 512, 512}, 12, 32, 64}, // q, k and v
		{2048, []int64{8192, 8192}, 64, 8, 256},     // gate and up
	} {
		tiles, chunks, rows := kernels.GemvGeometry(c.k, c.ns, kernels.BFloat16, 132)
		assert.Equal(t, [3]int64{c.tiles, c.chunks, c.rows}, [3]int64{tiles, chunks, rows}, "bfloat16 %d×%v", c.k, c.ns)
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
					tiles, chunks, rows := kernels.GemvGeometry(k, []int64{n}, dt, sms)
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
	refs  map[int][][]float64 // reference outputs of each GEMV step
	gemvs []kernels.Kernel
}

func newGemvSequence(f *fixture) *gemvSequence {
	seq := &gemvSequence{refs: map[int][][]float64{}}
	matmul := func(k kernels.Kernel, dt kernels.DType, aShape []int64, kk, n int64) {
		a, b := f.randomTyped(dt, kk), f.randomTyped(dt, kk*n)
		ref, _, _ := kernels.RefMatMul(a, aShape, b, []int64{kk, n})
		seq.refs[len(seq.steps)] = [][]float64{ref}
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
	// A group (q, k and v's kind) between the MatMuls: its partial sums and counters are the
	// same scratch's.
	grp := groupCase{[]int64{1}, 2048, []int64{512, 256, 256}}
	gk := f.get(grp.spec(h))
	_, chunks, _ := kernels.GemvGrid(gk)
	require.Greater(f.t, chunks, uint32(1), "the group splits K")
	ga := f.randomTyped(h, 2048)
	gins := []kernels.Tensor{f.uploadTyped(h, []int64{1, 2048}, ga)}
	for _, n := range grp.ns {
		b := f.randomTyped(h, 2048*n)
		ref, _, _ := kernels.RefMatMul(ga, []int64{1, 2048}, b, []int64{2048, n})
		seq.refs[len(seq.steps)] = append(seq.refs[len(seq.steps)], ref)
		gins = append(gins, f.uploadTyped(h, []int64{2048, n}, b))
	}
	seq.steps = append(seq.steps, step{gk, gins, f.outputs(gk)})
	seq.gemvs = append(seq.gemvs, gk)
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
	for i, refs := range seq.refs {
		st := seq.steps[i]
		for j, ref := range refs {
			requireClose64(t, f.downloadTyped(st.out[j]), ref, gemvBound(st.out[j].DType), fmt.Sprintf("step %d (%s) output %d", i, st.k.Name(), j))
		}
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
	var eager [][][]byte
	for _, st := range seq.steps {
		var outs [][]byte
		for _, o := range st.out {
			outs = append(outs, f.download(o))
		}
		eager = append(eager, outs)
	}
	poisonAll := func() {
		for _, st := range seq.steps {
			for _, o := range st.out {
				f.poison(o)
			}
		}
	}
	poisonAll()
	exec := f.capture(func() { seq.run(t) })
	for replay := range 2 {
		poisonAll()
		require.NoError(t, exec.Launch(f.stream))
		for i, st := range seq.steps {
			for j, o := range st.out {
				assert.Equal(t, eager[i][j], f.download(o), "replay %d: step %d (%s) output %d differs from the eager run", replay, i, st.k.Name(), j)
			}
		}
		seq.checkRefs(t, f)
	}
}

// groupCase is a cudaep.MatMulGroup of A [aShape..., K] and matrices [K, N_i].
type groupCase struct {
	a  []int64
	k  int64
	ns []int64
}

func (c groupCase) spec(dt kernels.DType) kernels.Spec {
	ins := []kernels.TensorInfo{info(dt, append(append([]int64{}, c.a...), c.k)...)}
	for _, n := range c.ns {
		ins = append(ins, info(dt, c.k, n))
	}
	return kernels.Spec{Op: "cudaep.MatMulGroup", Opset: 1, Inputs: ins, NumOutputs: len(c.ns)}
}

// runGroup runs the group's kernel on random inputs (B_i at offset off_i bytes into a buffer
// of its own) and checks every output against MatMul's reference.
func runGroup(t *testing.T, f *fixture, dt kernels.DType, c groupCase, offs []cudadrv.DevicePtr, want string) {
	kern := f.get(c.spec(dt))
	aShape := append(append([]int64{}, c.a...), c.k)
	a := f.randomTyped(dt, c.k)
	ins := []kernels.Tensor{f.uploadTyped(dt, aShape, a)}
	var bs [][]float64
	for i, n := range c.ns {
		b := f.randomTyped(dt, c.k*n)
		bs = append(bs, b)
		buf := f.alloc(info(dt, c.k*n+8))
		bt := kernels.Tensor{TensorInfo: info(dt, c.k, n), Ptr: buf.Ptr + offs[i]}
		require.NoError(t, f.env.Context.CopyHtoD(bt.Ptr, encode(dt, b)))
		ins = append(ins, bt)
	}
	outs := f.outputs(kern)
	require.Len(t, outs, len(c.ns))
	assert.Equal(t, want, kernels.LaunchVariant(kern, ins, outs))
	for _, o := range outs {
		f.poison(o)
	}
	require.NoError(t, kern.Execute(ins, outs))
	for i := range c.ns {
		ref, shape, ok := kernels.RefMatMul(a, aShape, bs[i], []int64{c.k, c.ns[i]})
		require.True(t, ok)
		assert.Equal(t, info(dt, shape...), kern.Outputs()[i])
		requireClose64(t, f.downloadTyped(outs[i]), ref, gemvBound(dt), fmt.Sprintf("%s: output %d", kern.Name(), i))
	}
}

// TestMatMulGroupAgainstReference: cudaep.MatMulGroup's one launch gives each matrix the
// product MatMul's reference gives, for groups of one to four matrices of every float dtype,
// with K split (so the partial sums of each matrix's tiles sit at their place among the
// group's) and not, and matrices of one tile or several.
func TestMatMulGroupAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []groupCase{
		{[]int64{1, 1}, 1000, []int64{520, 136, 136}}, // q, k and v's shape of sizes; K split
		{[]int64{1}, 64, []int64{256, 264}},           // one chunk; N not whole tiles
		{[]int64{}, 130, []int64{8, 16, 24, 32}},      // four matrices, 1-D A
		{[]int64{1, 1, 1}, 300, []int64{512}},         // a group of one
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/K%d/%v", dt, c.k, c.ns), func(t *testing.T) {
				f := f.sub(t)
				kern := f.get(c.spec(dt))
				tiles, _, _ := kernels.GemvGrid(kern)
				want := uint32(0)
				for _, n := range c.ns {
					want += uint32((n + int64(32*16/dt.Size()) - 1) / int64(32*16/dt.Size()))
				}
				assert.Equal(t, want, tiles, "one launch over every matrix's tiles")
				runGroup(t, f, dt, c, make([]cudadrv.DevicePtr, len(c.ns)), "gemv")
			})
		}
	}
}

// TestMatMulGroupReadsAnUnalignedB: a matrix that is not 16-byte aligned (a view, or a
// weight at an odd offset of a paged layer) is read element by element in the same launch,
// with the same results.
func TestMatMulGroupReadsAnUnalignedB(t *testing.T) {
	f := newFixture(t)
	runGroup(t, f, kernels.BFloat16, groupCase{[]int64{1}, 1000, []int64{264, 128}}, []cudadrv.DevicePtr{0, 2}, "gemv")
}

// prologueCase is a group whose row the GEMV computes: op (cudaep.NormMatMulGroup,
// cudaep.SkipNormMatMulGroup with or without the sum output, cudaep.SiluMulMatMulGroup), a
// row of K elements, matrices [K, N_i].
type prologueCase struct {
	op   string
	sum  bool
	k    int64
	ns   []int64
	offs []cudadrv.DevicePtr // each matrix's byte offset into a buffer of its own (nil: 0)
}

// prologueEps is the epsilon the prologue cases set.
const prologueEps = 1e-5

// refPrologueRow returns the row a prologue case's GEMV multiplies, in float64 from the
// inputs, each element rounded to dt as the op it fuses would store it, and the sum a + skip
// of the skip normalization.
func refPrologueRow(op string, dt kernels.DType, ins [][]float64) (row, sum []float64) {
	a := ins[0]
	row = make([]float64, len(a))
	switch op {
	case "cudaep.SiluMulMatMulGroup":
		for i, v := range a {
			row[i] = roundTo(dt, v/(1+math.Exp(-v))*ins[1][i])
		}
		return row, nil
	case "cudaep.SkipNormMatMulGroup":
		sum = make([]float64, len(a))
		for i, v := range a {
			sum[i] = roundTo(dt, v+ins[1][i])
		}
	}
	h, gamma := a, ins[len(ins)-1]
	if sum != nil {
		h = make([]float64, len(a))
		for i, v := range a {
			h[i] = v + ins[1][i]
		}
	}
	s2 := 0.0
	for _, v := range h {
		s2 += v * v
	}
	inv := 1 / math.Sqrt(s2/float64(len(h))+prologueEps)
	for i, v := range h {
		row[i] = roundTo(dt, v*inv*gamma[i])
	}
	return row, sum
}

// runPrologue runs a prologue case's kernel on random inputs and checks each product against
// MatMul's reference over refPrologueRow's row, and the sum output exactly.
func runPrologue(t *testing.T, f *fixture, dt kernels.DType, c prologueCase) {
	rowIns := map[string]int{"cudaep.NormMatMulGroup": 2, "cudaep.SkipNormMatMulGroup": 3, "cudaep.SiluMulMatMulGroup": 2}[c.op]
	require.NotZero(t, rowIns, c.op)
	spec := kernels.Spec{Op: c.op, Opset: 1}
	if c.op != "cudaep.SiluMulMatMulGroup" {
		spec.Attrs = map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(prologueEps)}
	}
	var host [][]float64
	var ins []kernels.Tensor
	for i := range rowIns {
		shape := []int64{1, c.k}
		if c.op != "cudaep.SiluMulMatMulGroup" && i == rowIns-1 {
			shape = []int64{c.k} // scale
		}
		v := f.randomTyped(dt, c.k)
		host = append(host, v)
		ins = append(ins, f.uploadTyped(dt, shape, v))
		spec.Inputs = append(spec.Inputs, info(dt, shape...))
	}
	var bs [][]float64
	for i, n := range c.ns {
		b := f.randomTyped(dt, c.k*n)
		bs = append(bs, b)
		var off cudadrv.DevicePtr
		if c.offs != nil {
			off = c.offs[i]
		}
		bt := kernels.Tensor{TensorInfo: info(dt, c.k, n), Ptr: f.alloc(info(dt, c.k*n+8)).Ptr + off}
		require.NoError(t, f.env.Context.CopyHtoD(bt.Ptr, encode(dt, b)))
		ins = append(ins, bt)
		spec.Inputs = append(spec.Inputs, bt.TensorInfo)
	}
	spec.NumOutputs = len(c.ns)
	if c.sum {
		spec.NumOutputs++
	}
	kern := f.get(spec)
	outs := f.outputs(kern)
	require.Len(t, outs, spec.NumOutputs)
	for _, o := range outs {
		f.poison(o)
	}
	require.NoError(t, kern.Execute(ins, outs))
	row, sum := refPrologueRow(c.op, dt, host)
	for i, n := range c.ns {
		ref, shape, ok := kernels.RefMatMul(row, []int64{1, c.k}, bs[i], []int64{c.k, n})
		require.True(t, ok)
		assert.Equal(t, info(dt, shape...), kern.Outputs()[i])
		requireClose64(t, f.downloadTyped(outs[i]), ref, gemvBound(dt), fmt.Sprintf("%s: output %d", kern.Name(), i))
	}
	if c.sum {
		assert.Equal(t, info(dt, 1, c.k), kern.Outputs()[len(c.ns)])
		assert.Equal(t, sum, f.downloadTyped(outs[len(c.ns)]), "%s: the sum output is a + skip, rounded once", kern.Name())
	}
}

// TestMatMulGroupProloguesAgainstReference: the groups that compute their row in the GEMV
// launch (the RMS normalization of a row or of a row plus a skip, or the gated SiLU of two
// rows) give MatMul's reference over the row the fused op would have stored, for every float
// dtype, with K split and not, a group of one matrix and of several, and an unaligned matrix;
// the skip normalization's sum output is the rounded sum.
func TestMatMulGroupProloguesAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []prologueCase{
		{op: "cudaep.NormMatMulGroup", k: 1000, ns: []int64{520, 136, 136}},
		{op: "cudaep.NormMatMulGroup", k: 64, ns: []int64{264}},
		{op: "cudaep.SkipNormMatMulGroup", sum: true, k: 1000, ns: []int64{256, 264}},
		{op: "cudaep.SkipNormMatMulGroup", k: 130, ns: []int64{8, 16, 24, 32}},
		{op: "cudaep.SkipNormMatMulGroup", sum: true, k: 4100, ns: []int64{32}, offs: []cudadrv.DevicePtr{4}},
		{op: "cudaep.SiluMulMatMulGroup", k: 2000, ns: []int64{264}},
		{op: "cudaep.SiluMulMatMulGroup", k: 64, ns: []int64{256, 8}, offs: []cudadrv.DevicePtr{0, 12}},
	}
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s/sum=%v/K%d/%v", dt, c.op, c.sum, c.k, c.ns), func(t *testing.T) {
				runPrologue(t, f.sub(t), dt, c)
			})
		}
	}
}

// TestMatMulGroupPrologueRefusals: what the groups with a prologue refuse at Get, each with an
// error naming the problem: a skip or a B of another shape than the row, a scale that is not
// the row's length, a row input of another dtype, a negative epsilon, an attribute the op does
// not take, a sum output where the op has none, and no matrix.
func TestMatMulGroupPrologueRefusals(t *testing.T) {
	f := newFixture(t)
	bf := kernels.BFloat16
	x, w, m := info(bf, 1, 64), info(bf, 64), info(bf, 64, 256)
	eps := func(v float32) map[string]kernels.Attribute {
		return map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(v)}
	}
	cases := []struct {
		name, op string
		ins      []kernels.TensorInfo
		attrs    map[string]kernels.Attribute
		outs     int
		msg      string
	}{
		{"skip of another shape", "cudaep.SkipNormMatMulGroup", []kernels.TensorInfo{x, info(bf, 64), w, m}, nil, 0, "input 1 (skip) has shape [64]"},
		{"scale of another length", "cudaep.NormMatMulGroup", []kernels.TensorInfo{x, info(bf, 32), m}, nil, 0, "input 1 (scale) has shape [32]"},
		{"gate and up of other shapes", "cudaep.SiluMulMatMulGroup", []kernels.TensorInfo{x, info(bf, 1, 32), m}, nil, 0, "input 1 (B)"},
		{"a row input of another dtype", "cudaep.SkipNormMatMulGroup", []kernels.TensorInfo{x, info(kernels.Float16, 1, 64), w, m}, nil, 0, "input 1 (skip)"},
		{"negative epsilon", "cudaep.NormMatMulGroup", []kernels.TensorInfo{x, w, m}, eps(-1), 0, "epsilon"},
		{"epsilon on SiluMul", "cudaep.SiluMulMatMulGroup", []kernels.TensorInfo{x, x, m}, eps(1e-5), 0, "epsilon"},
		{"a sum without a skip", "cudaep.NormMatMulGroup", []kernels.TensorInfo{x, w, m}, nil, 2, "make 1 outputs; the node has 2"},
		{"no matrix", "cudaep.SkipNormMatMulGroup", []kernels.TensorInfo{x, x, w}, nil, 0, "want X, skip, scale and 1 to 4 matrices"},
		{"two rows", "cudaep.SiluMulMatMulGroup", []kernels.TensorInfo{info(bf, 2, 64), info(bf, 2, 64), m}, nil, 0, "do not take the GEMV path"},
	}
	for _, c := range cases {
		_, err := f.lib.Get(kernels.Spec{Op: c.op, Opset: 1, Inputs: c.ins, Attrs: c.attrs, NumOutputs: c.outs})
		require.ErrorIs(t, err, kernels.ErrUnsupported, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}
}

// TestMatMulGroupRefusals: what cudaep.MatMulGroup refuses at Get, each with an error naming
// the problem: no matrix or more than four, A with two rows, a batched or 1-D B, N not whole
// packs, B of another dtype or inner dimension, an output count that differs, an attribute.
func TestMatMulGroupRefusals(t *testing.T) {
	f := newFixture(t)
	bf := kernels.BFloat16
	a := info(bf, 1, 64)
	m := info(bf, 64, 256)
	cases := []struct {
		name string
		spec kernels.Spec
		msg  string
	}{
		{"no matrix", kernels.Spec{Inputs: []kernels.TensorInfo{a}}, "got 1 inputs"},
		{"five matrices", kernels.Spec{Inputs: []kernels.TensorInfo{a, m, m, m, m, m}}, "got 6 inputs"},
		{"two rows", kernels.Spec{Inputs: []kernels.TensorInfo{info(bf, 2, 64), m, m}}, "do not take the GEMV path"},
		{"batched B", kernels.Spec{Inputs: []kernels.TensorInfo{a, m, info(bf, 1, 64, 256)}}, "input 2 (B1)"},
		{"N not whole packs", kernels.Spec{Inputs: []kernels.TensorInfo{a, info(bf, 64, 12)}}, "do not take the GEMV path"},
		{"other dtype", kernels.Spec{Inputs: []kernels.TensorInfo{a, info(kernels.Float16, 64, 256)}}, "input 1 (B0)"},
		{"other K", kernels.Spec{Inputs: []kernels.TensorInfo{a, m, info(bf, 32, 256)}}, "inner dimensions"},
		{"outputs", kernels.Spec{Inputs: []kernels.TensorInfo{a, m, m}, NumOutputs: 3}, "make 2 outputs; the node has 3"},
		{"attribute", kernels.Spec{Inputs: []kernels.TensorInfo{a, m}, Attrs: map[string]kernels.Attribute{"alpha": kernels.FloatAttr(1)}}, "alpha"},
	}
	for _, c := range cases {
		c.spec.Op, c.spec.Opset = "cudaep.MatMulGroup", 1
		_, err := f.lib.Get(c.spec)
		require.ErrorIs(t, err, kernels.ErrUnsupported, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}
}
