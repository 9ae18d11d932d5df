package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func (e *env) blas(s cudadrv.RawStream) cudadrv.RawBLAS {
	e.t.Helper()
	h, err := e.d.BLASCreate()
	require.NoError(e.t, err)
	require.NoError(e.t, e.d.BLASSetStream(h, s))
	return h
}

func (e *env) putF32(v []float32) cudadrv.DevicePtr {
	e.t.Helper()
	p := e.alloc(uint64(4 * len(v)))
	e.put(p, f32bytes(v))
	return p
}

func (e *env) getF32(p cudadrv.DevicePtr, n int) []float32 {
	e.t.Helper()
	return bytesF32(e.get(p, 4*n))
}

// seq returns n distinct non-zero values.
func seq(n int, seed float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = seed + float32(i%13)*0.25 - float32(i%7)*0.5 + 0.125
	}
	return v
}

// refGemm computes C = alpha·op(A)·op(B) + beta·C in float64 (column-major), leaving C's
// padding rows alone; beta 0 ignores C.
func refGemm(p cudadrv.GemmParams, a, b, c []float32) []float32 {
	out := append([]float32(nil), c...)
	at := func(m []float32, t cudadrv.BLASOp, r, col, ld int) float64 {
		if t == cudadrv.OpN {
			return float64(m[r+col*ld])
		}
		return float64(m[col+r*ld])
	}
	for j := 0; j < p.N; j++ {
		for i := 0; i < p.M; i++ {
			var sum float64
			for l := 0; l < p.K; l++ {
				sum += at(a, p.TransA, i, l, p.LDA) * at(b, p.TransB, l, j, p.LDB)
			}
			v := float64(p.Alpha) * sum
			if p.Beta != 0 {
				v += float64(p.Beta) * float64(c[i+j*p.LDC])
			}
			out[i+j*p.LDC] = float32(v)
		}
	}
	return out
}

func assertClose(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.IsNaN(float64(want[i])) {
			assert.True(t, math.IsNaN(float64(got[i])), "%s: element %d", msg, i)
			continue
		}
		assert.InDelta(t, want[i], got[i], 1e-4*math.Max(1, math.Abs(float64(want[i]))), "%s: element %d", msg, i)
	}
}

func TestSgemmMatchesColumnMajorReference(t *testing.T) {
	const m, n, k = 3, 5, 4
	ops := []cudadrv.BLASOp{cudadrv.OpN, cudadrv.OpT}
	for _, ta := range ops {
		for _, tb := range ops {
			for _, beta := range []float32{0, -0.5} {
				t.Run(fmt.Sprintf("%d%d/beta=%g", ta, tb, beta), func(t *testing.T) {
					e := newEnv(t, sim.Options{})
					s := e.stream()
					h := e.blas(s)
					rowsA, colsA := m, k
					if ta == cudadrv.OpT {
						rowsA, colsA = k, m
					}
					rowsB, colsB := k, n
					if tb == cudadrv.OpT {
						rowsB, colsB = n, k
					}
					p := cudadrv.GemmParams{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 1.5, Beta: beta,
						LDA: rowsA + 2, LDB: rowsB + 1, LDC: m + 3}
					a, b, c := seq(p.LDA*colsA, 1), seq(p.LDB*colsB, -2), seq(p.LDC*n, 3)
					if beta == 0 {
						for i := range c {
							c[i] = float32(math.NaN()) // must not be read
						}
					}
					p.A, p.B, p.C = e.putF32(a), e.putF32(b), e.putF32(c)
					require.NoError(t, e.d.Sgemm(h, &p))
					require.NoError(t, e.d.StreamSynchronize(s))
					got := e.getF32(p.C, len(c))
					assertClose(t, refGemm(p, a, b, c), got, "C")
					for j := 0; j < n; j++ {
						for i := m; i < p.LDC; i++ {
							assert.Equal(t, math.Float32bits(c[i+j*p.LDC]), math.Float32bits(got[i+j*p.LDC]), "padding row %d col %d untouched", i, j)
						}
					}
					require.NoError(t, e.d.BLASDestroy(h))
				})
			}
		}
	}
}

func TestSgemmAlphaZeroDoesNotReadAOrB(t *testing.T) {
	e := newEnv(t, sim.Options{})
	h := e.blas(0)
	nan := float32(math.NaN())
	a := e.putF32([]float32{nan, nan, nan, nan})
	c := e.putF32([]float32{1, 2, 3, 4})
	p := cudadrv.GemmParams{M: 2, N: 2, K: 2, Alpha: 0, Beta: 2, A: a, B: a, C: c, LDA: 2, LDB: 2, LDC: 2}
	require.NoError(t, e.d.Sgemm(h, &p))
	require.NoError(t, e.d.StreamSynchronize(0))
	assert.Equal(t, []float32{2, 4, 6, 8}, e.getF32(c, 4))
	p.K = 0
	p.Beta = 0
	require.NoError(t, e.d.Sgemm(h, &p))
	require.NoError(t, e.d.StreamSynchronize(0))
	assert.Equal(t, []float32{0, 0, 0, 0}, e.getF32(c, 4), "k = 0 with beta 0 zeroes C")
}

func TestSgemmStridedBatched(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	h := e.blas(s)
	const m, n, k, batch = 2, 3, 4, 3
	p := cudadrv.GemmParams{TransA: cudadrv.OpT, M: m, N: n, K: k, Alpha: 1, Beta: 1, LDA: k, LDB: k, LDC: m,
		StrideA: 0, StrideB: int64(k * n), StrideC: int64(m*n + 2), BatchCount: batch}
	a := seq(k*m, 5) // one A shared by every batch (stride 0)
	b := seq(k*n*batch, -1)
	c := seq(int(p.StrideC)*batch, 2)
	p.A, p.B, p.C = e.putF32(a), e.putF32(b), e.putF32(c)
	require.NoError(t, e.d.SgemmStridedBatched(h, &p))
	require.NoError(t, e.d.StreamSynchronize(s))
	got := e.getF32(p.C, len(c))
	for i := 0; i < batch; i++ {
		one := p
		bi := b[i*k*n : (i+1)*k*n]
		ci := c[i*int(p.StrideC) : i*int(p.StrideC)+m*n]
		assertClose(t, refGemm(one, a, bi, ci), got[i*int(p.StrideC):i*int(p.StrideC)+m*n], fmt.Sprintf("batch %d", i))
		assert.Equal(t, c[i*int(p.StrideC)+m*n:(i+1)*int(p.StrideC)], got[i*int(p.StrideC)+m*n:(i+1)*int(p.StrideC)], "gap between batches untouched")
	}

	p.BatchCount = 0
	require.NoError(t, e.d.SgemmStridedBatched(h, &p), "an empty batch does nothing")
	p.BatchCount = batch + 1
	require.NoError(t, e.d.SgemmStridedBatched(h, &p))
	err := e.d.StreamSynchronize(s)
	requireResult(t, err, cudadrv.ErrorIllegalAddress, "the fourth batch lies past the allocations")
	assert.Contains(t, err.Error(), sim.OpSgemmStridedBatched)
}

func TestSgemmValidatesLikeCuBLAS(t *testing.T) {
	e := newEnv(t, sim.Options{})
	h := e.blas(0)
	c := e.alloc(1024)
	ok := cudadrv.GemmParams{M: 4, N: 3, K: 2, Alpha: 1, A: c, B: c, C: c, LDA: 4, LDB: 2, LDC: 4}
	tests := []struct {
		name        string
		edit        func(p *cudadrv.GemmParams)
		batchedOnly bool // Sgemm ignores BatchCount
	}{
		{"negative m", func(p *cudadrv.GemmParams) { p.M = -1 }, false},
		{"negative n", func(p *cudadrv.GemmParams) { p.N = -1 }, false},
		{"negative k", func(p *cudadrv.GemmParams) { p.K = -1 }, false},
		{"lda < m", func(p *cudadrv.GemmParams) { p.LDA = 3 }, false},
		{"lda < k when transposed", func(p *cudadrv.GemmParams) { p.TransA, p.LDA = cudadrv.OpT, 1 }, false},
		{"ldb < k", func(p *cudadrv.GemmParams) { p.LDB = 1 }, false},
		{"ldb < n when transposed", func(p *cudadrv.GemmParams) { p.TransB, p.LDB = cudadrv.OpT, 2 }, false},
		{"ldc < m", func(p *cudadrv.GemmParams) { p.LDC = 3 }, false},
		{"lda 0 for an empty matrix", func(p *cudadrv.GemmParams) { p.M, p.LDA, p.LDC = 0, 0, 1 }, false},
		{"unknown transpose", func(p *cudadrv.GemmParams) { p.TransA = 9 }, false},
		{"negative batch", func(p *cudadrv.GemmParams) { p.BatchCount = -1 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			p.BatchCount = 1
			tt.edit(&p)
			if !tt.batchedOnly {
				requireBLAS(t, e.d.Sgemm(h, &p), cudadrv.BLASInvalidValue)
			}
			requireBLAS(t, e.d.SgemmStridedBatched(h, &p), cudadrv.BLASInvalidValue)
		})
	}
	requireBLAS(t, e.d.Sgemm(h, nil), cudadrv.BLASInvalidValue)
	requireBLAS(t, e.d.Sgemm(0x4242, &ok), cudadrv.BLASNotInitialized)
	require.NoError(t, e.d.Sgemm(h, &ok))
	require.NoError(t, e.d.CtxSynchronize())
}

func TestSgemmOutOfBoundsFaultsTheContext(t *testing.T) {
	e := newEnv(t, sim.Options{})
	h := e.blas(0)
	ab := e.putF32(seq(16, 1))
	small := e.alloc(4 * 15) // C needs 16 floats
	p := cudadrv.GemmParams{M: 4, N: 4, K: 4, Alpha: 1, A: ab, B: ab, C: small, LDA: 4, LDB: 4, LDC: 4}
	require.NoError(t, e.d.Sgemm(h, &p), "bounds are checked when the GEMM runs")
	err := e.d.CtxSynchronize()
	requireResult(t, err, cudadrv.ErrorIllegalAddress)
	assert.Contains(t, err.Error(), "cublasSgemm_v2 C")
	assert.Contains(t, err.Error(), fmt.Sprintf("base %#x, size 60", uint64(small)))
	requireBLAS(t, e.d.Sgemm(h, &p), cudadrv.BLASExecutionFailed)
}

func TestSgemmIsCapturedAsOneNode(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	h := e.blas(s)
	a := seq(4, 1)
	p := cudadrv.GemmParams{M: 2, N: 2, K: 2, Alpha: 1, LDA: 2, LDB: 2, LDC: 2}
	p.A, p.B, p.C = e.putF32(a), e.putF32([]float32{1, 0, 0, 1}), e.putF32(seq(4, 9))
	g := e.capture(s, func() { require.NoError(t, e.d.Sgemm(h, &p)) })
	p.Alpha = 100 // the captured node keeps the values it was recorded with
	n, err := e.d.GraphNodeCount(g)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, seq(4, 9), e.getF32(p.C, 4), "not run during capture")
	x := e.instantiate(g)
	e.put(p.A, f32bytes([]float32{7, 8, 9, 10}))
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, []float32{7, 8, 9, 10}, e.getF32(p.C, 4), "A·I with the replay-time A and alpha 1")

	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	e.onThread(true, func() { assert.NoError(t, e.d.StreamSynchronize(0), "another thread, non-blocking capture") })
	requireResult(t, e.d.StreamQuery(s), cudadrv.ErrorStreamCaptureUnsupported)
	err = e.d.Sgemm(h, &p)
	requireBLAS(t, err, cudadrv.BLASExecutionFailed)
	assert.Contains(t, err.Error(), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
	_, err = e.d.StreamEndCapture(s)
	requireResult(t, err, cudadrv.ErrorStreamCaptureInvalidated)
}

func TestSgemmTF32MathModeRoundsOperands(t *testing.T) {
	e := newEnv(t, sim.Options{})
	h := e.blas(0)
	x := float32(1 + 1.0/4096) // needs 12 mantissa bits; TF32 keeps 10
	p := cudadrv.GemmParams{M: 1, N: 1, K: 1, Alpha: 1, LDA: 1, LDB: 1, LDC: 1}
	p.A, p.B, p.C = e.putF32([]float32{x}), e.putF32([]float32{1}), e.alloc(4)
	require.NoError(t, e.d.Sgemm(h, &p))
	require.NoError(t, e.d.StreamSynchronize(0))
	assert.Equal(t, x, e.getF32(p.C, 1)[0], "default math is exact fp32")
	require.NoError(t, e.d.BLASSetMathMode(h, cudadrv.MathTF32TensorOp))
	require.NoError(t, e.d.Sgemm(h, &p))
	require.NoError(t, e.d.StreamSynchronize(0))
	assert.Equal(t, float32(1), e.getF32(p.C, 1)[0], "TF32 rounds the operand to 10 mantissa bits")
}

func TestBLASHandleLifecycle(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.onThread(false, func() {
		_, err := e.d.BLASCreate()
		requireBLAS(t, err, cudadrv.BLASNotInitialized)
	})
	h, err := e.d.BLASCreate()
	require.NoError(t, err)
	assert.Equal(t, 1, e.d.Stats().BLASHandles)
	requireBLAS(t, e.d.BLASSetStream(h, 0xbad), cudadrv.BLASInvalidValue)
	require.NoError(t, e.d.BLASSetStream(h, e.stream()))
	for _, mode := range []cudadrv.MathMode{cudadrv.MathDefault, cudadrv.MathTF32TensorOp, cudadrv.MathTF32TensorOp | cudadrv.MathDisallowReduction} {
		require.NoError(t, e.d.BLASSetMathMode(h, mode))
	}
	for _, mode := range []cudadrv.MathMode{4, 0x20, -1} {
		requireBLAS(t, e.d.BLASSetMathMode(h, mode), cudadrv.BLASInvalidValue)
	}
	require.NoError(t, e.d.BLASDestroy(h))
	requireBLAS(t, e.d.BLASDestroy(h), cudadrv.BLASNotInitialized)
	requireBLAS(t, e.d.BLASSetStream(h, 0), cudadrv.BLASNotInitialized)
	assert.Zero(t, e.d.Stats().BLASHandles)

	s := e.stream()
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	_, err = e.d.BLASCreate()
	requireBLAS(t, err, cudadrv.BLASNotInitialized)
	assert.Contains(t, err.Error(), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	e.requireInvalidatedAndRecoverable(t, s)
}
