package cudadrv_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
)

// colMajorAt returns op(M)[r, c] for a column-major matrix M with leading dimension ld.
func colMajorAt(m []float32, ld int, op cudadrv.BLASOp, r, c int) float64 {
	if op == cudadrv.OpT {
		r, c = c, r
	}
	return float64(m[r+c*ld])
}

// refGemm is the float64 reference of cuBLAS SGEMM semantics.
func refGemm(p cudadrv.GemmParams, a, b, c []float32) []float64 {
	out := make([]float64, len(c))
	for i := range c {
		out[i] = float64(c[i])
	}
	for j := 0; j < p.N; j++ {
		for i := 0; i < p.M; i++ {
			var acc float64
			for k := 0; k < p.K; k++ {
				acc += colMajorAt(a, p.LDA, p.TransA, i, k) * colMajorAt(b, p.LDB, p.TransB, k, j)
			}
			idx := i + j*p.LDC
			if p.Beta == 0 {
				out[idx] = float64(p.Alpha) * acc
			} else {
				out[idx] = float64(p.Alpha)*acc + float64(p.Beta)*float64(c[idx])
			}
		}
	}
	return out
}

func upload(t *testing.T, env *drivertest.Env, f []float32) *cudadrv.DeviceBuffer {
	t.Helper()
	b := alloc(t, env, uint64(4*len(f)))
	require.NoError(t, env.Context.CopyHtoD(b.Ptr(), drivertest.Float32Bytes(f)))
	return b
}

func download(t *testing.T, env *drivertest.Env, b *cudadrv.DeviceBuffer) []float32 {
	t.Helper()
	out := make([]byte, b.Size())
	require.NoError(t, env.Context.CopyDtoH(out, b.Ptr()))
	return drivertest.BytesFloat32(out)
}

func TestSgemmAgainstFloat64Reference(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()
	require.NoError(t, h.SetMathMode(cudadrv.MathDefault))

	const m, n, k = 37, 29, 41
	for _, ops := range [][2]cudadrv.BLASOp{{cudadrv.OpN, cudadrv.OpN}, {cudadrv.OpT, cudadrv.OpN}, {cudadrv.OpN, cudadrv.OpT}, {cudadrv.OpT, cudadrv.OpT}} {
		for _, beta := range []float32{0, 0.5} {
			t.Run(fmt.Sprintf("ta=%d tb=%d beta=%v", ops[0], ops[1], beta), func(t *testing.T) {
				env.BindHere(t)
				p := &cudadrv.GemmParams{TransA: ops[0], TransB: ops[1], M: m, N: n, K: k, Alpha: 1.5, Beta: beta, LDC: m + 3}
				rowsA, rowsB := m, k
				if ops[0] == cudadrv.OpT {
					rowsA = k
				}
				if ops[1] == cudadrv.OpT {
					rowsB = n
				}
				p.LDA, p.LDB = rowsA+1, rowsB+2
				a := drivertest.RandomFloat32(p.LDA * (m + k))
				b := drivertest.RandomFloat32(p.LDB * (n + k))
				c := drivertest.RandomFloat32(p.LDC * n)
				if beta == 0 {
					for i := range c {
						c[i] = float32(math.NaN()) // beta = 0: C is never read
					}
				}
				da, db, dc := upload(t, env, a), upload(t, env, b), upload(t, env, c)
				p.A, p.B, p.C = da.Ptr(), db.Ptr(), dc.Ptr()
				require.NoError(t, h.Sgemm(p))
				require.NoError(t, s.Synchronize())
				got := download(t, env, dc)
				ref := refGemm(*p, a, b, c)
				// Only the M×N block inside C's leading dimension is output; the padding rows keep C.
				var gotBlock []float32
				var refBlock []float64
				for j := 0; j < n; j++ {
					for i := 0; i < m; i++ {
						gotBlock = append(gotBlock, got[i+j*p.LDC])
						refBlock = append(refBlock, ref[i+j*p.LDC])
					}
					for i := m; i < p.LDC; i++ {
						require.Equal(t, math.Float32bits(c[i+j*p.LDC]), math.Float32bits(got[i+j*p.LDC]), "padding C[%d,%d] must be untouched", i, j)
					}
				}
				assert.Less(t, drivertest.RelErr(gotBlock, refBlock), 1e-5)
			})
		}
	}
}

func TestSgemmStridedBatched(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()

	const m, n, k, batch = 16, 24, 8, 3
	a, b, c := drivertest.RandomFloat32(m*k*batch), drivertest.RandomFloat32(k*n*batch), drivertest.RandomFloat32(m*n*batch)
	da, db, dc := upload(t, env, a), upload(t, env, b), upload(t, env, c)
	p := &cudadrv.GemmParams{M: m, N: n, K: k, Alpha: 0.75, Beta: 0.25, A: da.Ptr(), B: db.Ptr(), C: dc.Ptr(),
		LDA: m, LDB: k, LDC: m, StrideA: m * k, StrideB: k * n, StrideC: m * n, BatchCount: batch}
	require.NoError(t, h.SgemmStridedBatched(p))
	require.NoError(t, s.Synchronize())
	got := download(t, env, dc)
	for i := 0; i < batch; i++ {
		one := *p
		ref := refGemm(one, a[i*m*k:], b[i*k*n:], c[i*m*n:(i+1)*m*n])
		assert.Less(t, drivertest.RelErr(got[i*m*n:(i+1)*m*n], ref), 1e-5, "batch %d", i)
	}
}

// TestSgemmCapturesIntoAGraph: a GEMM recorded in a capture runs on replay against live data.
func TestSgemmCapturesIntoAGraph(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()
	const m, n, k = 32, 32, 32
	// Warm up outside the capture so the library's lazy setup is not recorded.
	a, b := drivertest.RandomFloat32(m*k), drivertest.RandomFloat32(k*n)
	da, db, dc := upload(t, env, a), upload(t, env, b), upload(t, env, make([]float32, m*n))
	p := &cudadrv.GemmParams{M: m, N: n, K: k, Alpha: 1, Beta: 0, A: da.Ptr(), B: db.Ptr(), C: dc.Ptr(), LDA: m, LDB: k, LDC: m}
	require.NoError(t, h.Sgemm(p))
	require.NoError(t, s.Synchronize())

	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	require.NoError(t, h.Sgemm(p))
	g, err := s.EndCapture()
	require.NoError(t, err)
	exec, err := g.Instantiate(0)
	require.NoError(t, err)
	require.NoError(t, g.Destroy())

	a2 := drivertest.RandomFloat32(m * k)
	require.NoError(t, env.Context.CopyHtoD(da.Ptr(), drivertest.Float32Bytes(a2)))
	require.NoError(t, exec.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.Less(t, drivertest.RelErr(download(t, env, dc), refGemm(*p, a2, b, make([]float32, m*n))), 1e-5)
	require.NoError(t, exec.Destroy())
}

const nvrtcScaleSource = `
extern "C" __global__ void scale(float* x, float a, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
`

func TestNVRTC(t *testing.T) {
	env := drivertest.Open(t)
	ptx, err := env.Driver.CompilePTX(nvrtcScaleSource, "scale.cu", nil)
	if env.Sim != nil {
		require.Error(t, err)
		assert.True(t, errors.Is(err, cudadrv.ErrUnsupported), "got %v", err)
		assert.Contains(t, err.Error(), "sim")
		return
	}
	require.NoError(t, err)
	mod, err := env.Context.LoadModule(ptx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, mod.Unload()) }()
	fn, err := mod.Function("scale")
	require.NoError(t, err)
	s := newStream(t, env)
	x := drivertest.RandomFloat32(100)
	dx := upload(t, env, x)
	args := new(cudadrv.KernelArgs)
	args.Ptr(dx.Ptr()).F32(2.5).U32(100)
	require.NoError(t, s.Launch(fn, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 128, Y: 1, Z: 1}, 0, args))
	require.NoError(t, s.Synchronize())
	for i, v := range download(t, env, dx) {
		require.Equal(t, x[i]*2.5, v, "element %d", i)
	}

	_, err = env.Driver.CompilePTX("extern \"C\" __global__ void broken( { }", "broken.cu", nil)
	var ce *cudadrv.CompileError
	require.True(t, errors.As(err, &ce), "got %T %v", err, err)
	assert.NotEmpty(t, ce.Log)
	assert.Contains(t, err.Error(), "broken.cu")
}
