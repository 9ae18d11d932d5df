package cuda_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/cuda"
)

// The GPU smoke tests run only with CUDAEP_TEST_BACKEND=cuda on a machine with a CUDA device.
// The conformance suite in package cudadrv covers the semantics; these check the bindings.

// testPTX holds two kernels: add_one adds 1 to n floats, empty does nothing. It targets sm_80
// so that the driver JIT-compiles it for any newer device (an H200 is sm_90). No trailing NUL:
// ModuleLoadData adds it.
const testPTX = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry add_one(
	.param .u64 p_data,
	.param .u32 p_n
)
{
	.reg .pred %p<2>;
	.reg .f32 %f<3>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [p_data];
	ld.param.u32 %r2, [p_n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r1, %r2;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	add.f32 %f2, %f1, 0f3F800000;
	st.global.f32 [%rd4], %f2;
DONE:
	ret;
}

.visible .entry empty()
{
	ret;
}
`

// gpu is one test's view of device 0: the backend, the retained primary context (current on
// the test's locked thread) and a non-blocking stream.
type gpu struct {
	b   *cuda.Backend
	ctx cudadrv.RawContext
	s   cudadrv.RawStream
}

// newGPU skips unless CUDAEP_TEST_BACKEND=cuda, then locks the calling goroutine to its thread
// (the context is current per thread), binds device 0's primary context and creates a stream.
// done undoes all of it; call it on the same goroutine.
func newGPU(tb testing.TB) (*gpu, func()) {
	tb.Helper()
	if os.Getenv("CUDAEP_TEST_BACKEND") != "cuda" {
		tb.Skip("set CUDAEP_TEST_BACKEND=cuda to run against the real driver")
	}
	runtime.LockOSThread()
	b, err := cuda.Open()
	if err != nil {
		runtime.UnlockOSThread()
		require.NoError(tb, err)
	}
	ctx, err := b.PrimaryCtxRetain(0)
	require.NoError(tb, err)
	require.NoError(tb, b.CtxSetCurrent(ctx))
	s, err := b.StreamCreate(cudadrv.StreamNonBlocking, 0)
	require.NoError(tb, err)
	g := &gpu{b: b, ctx: ctx, s: s}
	return g, func() {
		assert.NoError(tb, b.StreamSynchronize(s))
		assert.NoError(tb, b.StreamDestroy(s))
		assert.NoError(tb, b.PrimaryCtxRelease(0))
		runtime.UnlockOSThread()
	}
}

// bind makes g's context current in a subtest, which runs on a goroutine (and thread) of its
// own; it locks that goroutine to its thread until the subtest ends.
func (g *gpu) bind(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	require.NoError(t, g.b.CtxSetCurrent(g.ctx))
}

// load loads testPTX and returns its module.
func (g *gpu) load(tb testing.TB) cudadrv.RawModule {
	tb.Helper()
	m, err := g.b.ModuleLoadData([]byte(testPTX))
	require.NoError(tb, err)
	return m
}

// function returns a kernel of testPTX.
func (g *gpu) function(tb testing.TB, m cudadrv.RawModule, name string) cudadrv.RawFunction {
	tb.Helper()
	f, err := g.b.ModuleGetFunction(m, name)
	require.NoError(tb, err)
	return f
}

func (g *gpu) alloc(tb testing.TB, size uint64) cudadrv.DevicePtr {
	tb.Helper()
	p, err := g.b.MemAlloc(size)
	require.NoError(tb, err)
	return p
}

// pattern returns n distinct-looking bytes, none of them zero.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte((i*31+int(seed))%251) + 1
	}
	return p
}

var one = cudadrv.Dim3{X: 1, Y: 1, Z: 1}

func TestGPUDeviceInfo(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b

	assert.Equal(t, "cuda", b.Name())
	assert.NoError(t, b.Init())
	v, err := b.DriverVersion()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v, 12000)
	n, err := b.DeviceCount()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	name, err := b.DeviceName(0)
	require.NoError(t, err)
	assert.NotEmpty(t, name)
	major, err := b.DeviceAttribute(0, cudadrv.AttrComputeCapabilityMajor)
	require.NoError(t, err)
	minor, err := b.DeviceAttribute(0, cudadrv.AttrComputeCapabilityMinor)
	require.NoError(t, err)
	sms, err := b.DeviceAttribute(0, cudadrv.AttrMultiprocessorCount)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 7)
	assert.Positive(t, sms)
	total, err := b.DeviceTotalMem(0)
	require.NoError(t, err)
	free, total2, err := b.MemGetInfo()
	require.NoError(t, err)
	assert.Positive(t, free)
	assert.LessOrEqual(t, free, total2)
	assert.InDelta(t, float64(total), float64(total2), float64(total)/10)
	least, greatest, err := b.StreamPriorityRange()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, least, greatest)
	cur, err := b.CtxGetCurrent()
	require.NoError(t, err)
	assert.Equal(t, g.ctx, cur)
	_, err = b.DeviceName(n + 7)
	var e *cudadrv.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, cudadrv.ErrorInvalidDevice, e.Result)
	t.Logf("driver %d, %d device(s); device 0: %s, compute capability %d.%d, %d SMs, %d MiB",
		v, n, name, major, minor, sms, total>>20)
}

func TestGPUMemoryRoundTrip(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	const size = 1 << 20

	d1, d2 := g.alloc(t, size), g.alloc(t, size)
	defer func() { assert.NoError(t, b.MemFree(d1)); assert.NoError(t, b.MemFree(d2)) }()

	// Synchronous copies from and to Go memory.
	src := pattern(size, 3)
	require.NoError(t, b.MemcpyHtoD(d1, src))
	back := make([]byte, size)
	require.NoError(t, b.MemcpyDtoH(back, d1))
	assert.True(t, bytes.Equal(src, back), "H2D/D2H round trip")

	// Asynchronous copies through pinned memory, and device to device.
	pin1, err := b.MemHostAlloc(size)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.MemFreeHost(pin1)) }()
	pin2, err := b.MemHostAlloc(size)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.MemFreeHost(pin2)) }()
	copy(pin1, pattern(size, 101))
	clear(pin2)
	require.NoError(t, b.MemcpyHtoDAsync(d1, pin1, g.s))
	require.NoError(t, b.MemcpyDtoDAsync(d2, d1, size, g.s))
	require.NoError(t, b.MemcpyDtoHAsync(pin2, d2, g.s))
	require.NoError(t, b.StreamSynchronize(g.s))
	assert.True(t, bytes.Equal(pin1, pin2), "async H2D, D2D, D2H round trip")
	require.NoError(t, b.MemcpyDtoD(d1, d2, size))

	// Memsets.
	require.NoError(t, b.MemsetD8(d1, 0xa5, size))
	require.NoError(t, b.MemcpyDtoH(back, d1))
	assert.True(t, bytes.Equal(bytes.Repeat([]byte{0xa5}, size), back), "MemsetD8")
	require.NoError(t, b.MemsetD8Async(d1, 0x3c, size/2, g.s))
	require.NoError(t, b.MemsetD32Async(d1+size/2, 0x11223344, size/8, g.s))
	require.NoError(t, b.MemcpyDtoHAsync(pin2, d1, g.s))
	require.NoError(t, b.StreamSynchronize(g.s))
	assert.True(t, bytes.Equal(bytes.Repeat([]byte{0x3c}, size/2), pin2[:size/2]), "MemsetD8Async")
	assert.True(t, bytes.Equal(bytes.Repeat([]byte{0x44, 0x33, 0x22, 0x11}, size/8), pin2[size/2:]), "MemsetD32Async")

	// Empty slices copy nothing and reach no driver.
	assert.NoError(t, b.MemcpyHtoD(d1, nil))
	assert.NoError(t, b.MemcpyDtoHAsync(nil, d1, g.s))
}

func TestGPUHostRegisterSharedFileMapping(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	size := 4 << 20

	// A file-backed MAP_SHARED mapping, as the weight pager registers (never MAP_PRIVATE).
	path := filepath.Join(t.TempDir(), "weights.bin")
	want := pattern(size, 77)
	require.NoError(t, os.WriteFile(path, want, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer func() { assert.NoError(t, unix.Munmap(mem)) }()

	require.NoError(t, b.MemHostRegister(mem, cudadrv.HostRegisterPortable|cudadrv.HostRegisterReadOnly))
	err = b.MemHostRegister(mem, cudadrv.HostRegisterPortable|cudadrv.HostRegisterReadOnly)
	assert.ErrorIs(t, err, cudadrv.ErrorHostMemoryAlreadyRegistered)

	d := g.alloc(t, uint64(size))
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoDAsync(d, mem, g.s))
	back := make([]byte, size)
	require.NoError(t, b.StreamSynchronize(g.s))
	require.NoError(t, b.MemcpyDtoH(back, d))
	assert.True(t, bytes.Equal(want, back))

	require.NoError(t, b.MemHostUnregister(mem))
	assert.ErrorIs(t, b.MemHostUnregister(mem), cudadrv.ErrorHostMemoryNotRegistered)
	assert.ErrorIs(t, b.MemHostRegister(nil, 0), cudadrv.ErrorInvalidValue)
}

func TestGPUKernelFromPTX(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	m := g.load(t)
	defer func() { assert.NoError(t, b.ModuleUnload(m)) }()
	addOne := g.function(t, m, "add_one")

	_, err := b.ModuleGetFunction(m, "no_such_kernel")
	var e *cudadrv.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuModuleGetFunction", e.Op)
	assert.Equal(t, cudadrv.ErrorNotFound, e.Result)
	_, err = b.ModuleLoadData([]byte("this is not PTX"))
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuModuleLoadData", e.Op)

	const n = 1000
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)*0.5 - 100
	}
	d := g.alloc(t, 4*n)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoD(d, drivertest.Float32Bytes(in)))

	args := new(cudadrv.KernelArgs)
	args.Ptr(d).U32(n)
	require.NoError(t, b.LaunchKernel(addOne, cudadrv.Dim3{X: (n + 255) / 256, Y: 1, Z: 1},
		cudadrv.Dim3{X: 256, Y: 1, Z: 1}, 0, g.s, args))
	require.NoError(t, b.StreamSynchronize(g.s))
	back := make([]byte, 4*n)
	require.NoError(t, b.MemcpyDtoH(back, d))
	for i, v := range drivertest.BytesFloat32(back) {
		require.Equal(t, in[i]+1, v, "element %d", i)
	}
}

func TestGPUGraphCaptureAndReplay(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	m := g.load(t)
	defer func() { assert.NoError(t, b.ModuleUnload(m)) }()
	addOne := g.function(t, m, "add_one")

	const n = 512
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i) + 0.25
	}
	d := g.alloc(t, 4*n)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoD(d, drivertest.Float32Bytes(in)))
	grid, block := cudadrv.Dim3{X: n / 128, Y: 1, Z: 1}, cudadrv.Dim3{X: 128, Y: 1, Z: 1}

	capture := func(launches int, count uint32) cudadrv.RawGraph {
		t.Helper()
		args := new(cudadrv.KernelArgs)
		args.Ptr(d).U32(count)
		require.NoError(t, b.StreamBeginCapture(g.s, cudadrv.CaptureModeThreadLocal))
		st, err := b.StreamCaptureStatus(g.s)
		require.NoError(t, err)
		assert.Equal(t, cudadrv.CaptureStatusActive, st)
		for range launches {
			require.NoError(t, b.LaunchKernel(addOne, grid, block, 0, g.s, args))
		}
		graph, err := b.StreamEndCapture(g.s)
		require.NoError(t, err)
		st, err = b.StreamCaptureStatus(g.s)
		require.NoError(t, err)
		assert.Equal(t, cudadrv.CaptureStatusNone, st)
		return graph
	}
	read := func() []float32 {
		t.Helper()
		require.NoError(t, b.StreamSynchronize(g.s))
		back := make([]byte, 4*n)
		require.NoError(t, b.MemcpyDtoH(back, d))
		return drivertest.BytesFloat32(back)
	}

	graph := capture(1, n)
	defer func() { assert.NoError(t, b.GraphDestroy(graph)) }()
	assert.Equal(t, in, read(), "capture records, it does not run")
	nodes, err := b.GraphNodeCount(graph)
	require.NoError(t, err)
	assert.Equal(t, 1, nodes)

	exec, err := b.GraphInstantiate(graph, cudadrv.InstantiateUseNodePriority)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.GraphExecDestroy(exec)) }()
	require.NoError(t, b.GraphUpload(exec, g.s))
	for range 3 {
		require.NoError(t, b.GraphLaunch(exec, g.s))
	}
	got := read()
	for i := range in {
		require.Equal(t, in[i]+3, got[i], "three replays, element %d", i)
	}

	// Same topology, new kernel parameters: updated in place.
	half := capture(1, n/2)
	defer func() { assert.NoError(t, b.GraphDestroy(half)) }()
	require.NoError(t, b.GraphExecUpdate(exec, half))
	require.NoError(t, b.GraphLaunch(exec, g.s))
	got = read()
	for i := range in {
		want := in[i] + 3
		if i < n/2 {
			want++
		}
		require.Equal(t, want, got[i], "after update, element %d", i)
	}

	// A different topology is refused with the driver's reason.
	two := capture(2, n)
	defer func() { assert.NoError(t, b.GraphDestroy(two)) }()
	err = b.GraphExecUpdate(exec, two)
	var e *cudadrv.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, cudadrv.ErrorGraphExecUpdateFailure, e.Result)
	assert.Equal(t, "cuGraphExecUpdate_v2", e.Op)
	assert.Contains(t, e.Detail, "CU_GRAPH_EXEC_UPDATE_ERROR")
	t.Logf("refused update: %v", err)
}

// lcg fills v with reproducible values in [-1, 1).
func lcg(v []float32, seed uint64) {
	x := seed
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		v[i] = float32(int32(x>>33))/float32(1<<30) - 1
	}
}

// gemmRef computes alpha·op(A)·op(B) + beta·C in float64, column-major, for one matrix.
func gemmRef(p *cudadrv.GemmParams, a, bm, c []float32) []float64 {
	at := func(i, l int) float64 {
		if p.TransA == cudadrv.OpT {
			return float64(a[l+i*p.LDA])
		}
		return float64(a[i+l*p.LDA])
	}
	bt := func(l, j int) float64 {
		if p.TransB == cudadrv.OpT {
			return float64(bm[j+l*p.LDB])
		}
		return float64(bm[l+j*p.LDB])
	}
	out := make([]float64, p.LDC*p.N)
	for j := range p.N {
		for i := range p.M {
			var s float64
			for l := range p.K {
				s += at(i, l) * bt(l, j)
			}
			out[i+j*p.LDC] = float64(p.Alpha)*s + float64(p.Beta)*float64(c[i+j*p.LDC])
		}
	}
	return out
}

func TestGPUSgemm(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	h, err := b.BLASCreate()
	require.NoError(t, err)
	if path, err := cuda.LoadCUBLAS(); err == nil {
		t.Logf("cuBLAS loaded from %s", path)
	}
	defer func() { assert.NoError(t, b.BLASDestroy(h)) }()
	require.NoError(t, b.BLASSetStream(h, g.s))
	require.NoError(t, b.BLASSetMathMode(h, cudadrv.MathDefault))

	const M, N, K, batch = 96, 64, 80, 3
	upload := func(t *testing.T, v []float32) cudadrv.DevicePtr {
		d := g.alloc(t, uint64(4*len(v)))
		require.NoError(t, b.MemcpyHtoD(d, drivertest.Float32Bytes(v)))
		return d
	}
	download := func(t *testing.T, d cudadrv.DevicePtr, n int) []float32 {
		require.NoError(t, b.StreamSynchronize(g.s))
		out := make([]byte, 4*n)
		require.NoError(t, b.MemcpyDtoH(out, d))
		return drivertest.BytesFloat32(out)
	}

	for _, tc := range []struct {
		name           string
		transA, transB cudadrv.BLASOp
	}{{"NN", cudadrv.OpN, cudadrv.OpN}, {"TN", cudadrv.OpT, cudadrv.OpN}, {"NT", cudadrv.OpN, cudadrv.OpT}} {
		t.Run(tc.name, func(t *testing.T) {
			g.bind(t)
			p := &cudadrv.GemmParams{TransA: tc.transA, TransB: tc.transB, M: M, N: N, K: K,
				Alpha: 1.5, Beta: 0.5, LDA: M, LDB: K, LDC: M}
			if tc.transA == cudadrv.OpT {
				p.LDA = K
			}
			if tc.transB == cudadrv.OpT {
				p.LDB = N
			}
			a, bm, c := make([]float32, M*K), make([]float32, K*N), make([]float32, M*N)
			lcg(a, 1)
			lcg(bm, 2)
			lcg(c, 3)
			p.A, p.B, p.C = upload(t, a), upload(t, bm), upload(t, c)
			defer func() {
				for _, d := range []cudadrv.DevicePtr{p.A, p.B, p.C} {
					assert.NoError(t, b.MemFree(d))
				}
			}()
			require.NoError(t, b.Sgemm(h, p))
			e := drivertest.RelErr(download(t, p.C, M*N), gemmRef(p, a, bm, c))
			assert.Less(t, e, 1e-5)
			t.Logf("relative error %.2g", e)
		})
	}

	t.Run("StridedBatched", func(t *testing.T) {
		g.bind(t)
		p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: M, N: N, K: K,
			Alpha: -0.75, Beta: 2, LDA: M, LDB: K, LDC: M,
			StrideA: M * K, StrideB: K * N, StrideC: M * N, BatchCount: batch}
		a, bm, c := make([]float32, batch*M*K), make([]float32, batch*K*N), make([]float32, batch*M*N)
		lcg(a, 4)
		lcg(bm, 5)
		lcg(c, 6)
		p.A, p.B, p.C = upload(t, a), upload(t, bm), upload(t, c)
		defer func() {
			for _, d := range []cudadrv.DevicePtr{p.A, p.B, p.C} {
				assert.NoError(t, b.MemFree(d))
			}
		}()
		require.NoError(t, b.SgemmStridedBatched(h, p))
		got := download(t, p.C, batch*M*N)
		for i := range batch {
			want := gemmRef(p, a[i*M*K:], bm[i*K*N:], c[i*M*N:])
			e := drivertest.RelErr(got[i*M*N:(i+1)*M*N], want)
			assert.Less(t, e, 1e-5, "batch %d", i)
		}
	})
}

func TestGPUCompilePTX(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b

	const src = `extern "C" __global__ void scale(float *x, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}`
	ptx, err := b.CompilePTX(src, "scale.cu", nil)
	require.NoError(t, err)
	if path, err := cuda.LoadNVRTC(); err == nil {
		t.Logf("NVRTC loaded from %s", path)
	}
	assert.Contains(t, string(ptx), ".entry scale")
	assert.False(t, bytes.HasSuffix(ptx, []byte{0}), "NUL trimmed")

	ptx90, err := b.CompilePTX(src, "scale.cu", []string{"--gpu-architecture=compute_90"})
	require.NoError(t, err)
	assert.Contains(t, string(ptx90), ".target sm_90", "caller's options are passed through")

	m, err := b.ModuleLoadData(ptx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.ModuleUnload(m)) }()
	f := g.function(t, m, "scale")
	const n = 300
	in := make([]float32, n)
	lcg(in, 9)
	d := g.alloc(t, 4*n)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoD(d, drivertest.Float32Bytes(in)))
	args := new(cudadrv.KernelArgs)
	args.Ptr(d).F32(2.5).I32(n)
	require.NoError(t, b.LaunchKernel(f, cudadrv.Dim3{X: 3, Y: 1, Z: 1}, cudadrv.Dim3{X: 128, Y: 1, Z: 1}, 0, g.s, args))
	require.NoError(t, b.StreamSynchronize(g.s))
	back := make([]byte, 4*n)
	require.NoError(t, b.MemcpyDtoH(back, d))
	for i, v := range drivertest.BytesFloat32(back) {
		require.Equal(t, in[i]*2.5, v, "element %d", i)
	}

	_, err = b.CompilePTX(`extern "C" __global__ void broken(float *x) { x[0] = not_declared_anywhere; }`,
		"broken.cu", nil)
	var ce *cudadrv.CompileError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "broken.cu", ce.Program)
	assert.Equal(t, "NVRTC_ERROR_COMPILATION", ce.Name)
	assert.Contains(t, ce.Log, "not_declared_anywhere")
	assert.True(t, strings.Contains(err.Error(), "not_declared_anywhere"), "the log is in the message")
}

func TestGPUHotCallsAllocateNothing(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	m := g.load(t)
	defer func() { assert.NoError(t, b.ModuleUnload(m)) }()
	empty, addOne := g.function(t, m, "empty"), g.function(t, m, "add_one")

	d := g.alloc(t, 1<<16)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	pinned, err := b.MemHostAlloc(4096)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.MemFreeHost(pinned)) }()
	copy(pinned, pattern(4096, 5))
	ev, err := b.EventCreate(cudadrv.EventDisableTiming)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.EventDestroy(ev)) }()
	args := new(cudadrv.KernelArgs)
	args.Ptr(d).U32(256)

	require.NoError(t, b.StreamBeginCapture(g.s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, b.LaunchKernel(empty, one, one, 0, g.s, nil))
	graph, err := b.StreamEndCapture(g.s)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.GraphDestroy(graph)) }()
	exec, err := b.GraphInstantiate(graph, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.GraphExecDestroy(exec)) }()

	h, err := b.BLASCreate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.BLASDestroy(h)) }()
	require.NoError(t, b.BLASSetStream(h, g.s))
	gemm := &cudadrv.GemmParams{M: 32, N: 32, K: 32, Alpha: 1, LDA: 32, LDB: 32, LDC: 32,
		A: d, B: d + 4096, C: d + 8192, StrideA: 0, StrideB: 0, StrideC: 1024, BatchCount: 2}

	calls := []struct {
		name string
		call func() error
	}{
		{"LaunchKernel", func() error { return b.LaunchKernel(addOne, one, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, 0, g.s, args) }},
		{"LaunchKernel without args", func() error { return b.LaunchKernel(empty, one, one, 0, g.s, nil) }},
		{"MemcpyHtoDAsync", func() error { return b.MemcpyHtoDAsync(d, pinned[:4], g.s) }},
		{"MemcpyDtoHAsync", func() error { return b.MemcpyDtoHAsync(pinned[:4], d, g.s) }},
		{"MemcpyDtoDAsync", func() error { return b.MemcpyDtoDAsync(d+1024, d, 1024, g.s) }},
		{"MemcpyPeerAsync", func() error { return b.MemcpyPeerAsync(d+2048, g.ctx, d, g.ctx, 1024, g.s) }},
		{"EventRecord", func() error { return b.EventRecord(ev, g.s) }},
		{"GraphLaunch", func() error { return b.GraphLaunch(exec, g.s) }},
		{"Sgemm", func() error { return b.Sgemm(h, gemm) }},
		{"SgemmStridedBatched", func() error { return b.SgemmStridedBatched(h, gemm) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			g.bind(t)
			require.NoError(t, c.call())
			var first error
			allocs := testing.AllocsPerRun(200, func() {
				if err := c.call(); err != nil && first == nil {
					first = err
				}
			})
			require.NoError(t, first)
			require.NoError(t, b.StreamSynchronize(g.s))
			assert.Zero(t, allocs)
		})
	}
}

func TestGPULibrariesLoadFromTheToolkitDirectory(t *testing.T) {
	// Searching only the toolkit directory exercises loading by full path, with the
	// companions (libcublasLt, libnvrtc-builtins) loaded from the same directory first. Run it
	// in a process of its own to be sure the libraries are not already loaded by soname.
	dir := "/usr/local/cuda/lib64"
	if home := os.Getenv("CUDA_HOME"); home != "" {
		dir = filepath.Join(home, "lib64")
	}
	defer cuda.SetSearchDirs([]string{dir})()
	g, done := newGPU(t)
	defer done()
	b := g.b

	path, err := cuda.LoadCUBLAS()
	require.NoError(t, err)
	assert.Equal(t, dir, filepath.Dir(path))
	h, err := b.BLASCreate()
	require.NoError(t, err)
	require.NoError(t, b.BLASSetStream(h, g.s))
	// A 1×1×1 product: C = 2·3·A·B + 0·C.
	d := g.alloc(t, 12)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoD(d, drivertest.Float32Bytes([]float32{2, 3, 99})))
	p := &cudadrv.GemmParams{M: 1, N: 1, K: 1, Alpha: 3, A: d, B: d + 4, C: d + 8, LDA: 1, LDB: 1, LDC: 1}
	require.NoError(t, b.Sgemm(h, p))
	require.NoError(t, b.StreamSynchronize(g.s))
	out := make([]byte, 4)
	require.NoError(t, b.MemcpyDtoH(out, d+8))
	assert.Equal(t, float32(18), drivertest.BytesFloat32(out)[0])
	require.NoError(t, b.BLASDestroy(h))

	path, err = cuda.LoadNVRTC()
	require.NoError(t, err)
	assert.Equal(t, dir, filepath.Dir(path))
	ptx, err := b.CompilePTX(`extern "C" __global__ void k(int *x) { *x = 42; }`, "k.cu", nil)
	require.NoError(t, err)
	assert.Contains(t, string(ptx), ".entry k")
	t.Logf("loaded %s and NVRTC from %s", "cuBLAS", dir)
}

func TestGPUStreamsAndEvents(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	m := g.load(t)
	defer func() { assert.NoError(t, b.ModuleUnload(m)) }()
	addOne := g.function(t, m, "add_one")

	_, greatest, err := b.StreamPriorityRange()
	require.NoError(t, err)
	s2, err := b.StreamCreate(cudadrv.StreamNonBlocking, greatest)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.StreamDestroy(s2)) }()

	start, err := b.EventCreate(cudadrv.EventDefault)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.EventDestroy(start)) }()
	end, err := b.EventCreate(cudadrv.EventBlockingSync)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.EventDestroy(end)) }()

	const n = 1 << 16
	d := g.alloc(t, 4*n)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemsetD32Async(d, math.Float32bits(1.5), n, g.s))
	args := new(cudadrv.KernelArgs)
	args.Ptr(d).U32(n)
	require.NoError(t, b.EventRecord(start, g.s))
	for range 10 {
		require.NoError(t, b.LaunchKernel(addOne, cudadrv.Dim3{X: n / 256, Y: 1, Z: 1}, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, 0, g.s, args))
	}
	require.NoError(t, b.EventRecord(end, g.s))

	// s2 reads the result only after the event: cross-stream ordering through the driver.
	require.NoError(t, b.StreamWaitEvent(s2, end))
	pinned, err := b.MemHostAlloc(4 * n)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.MemFreeHost(pinned)) }()
	require.NoError(t, b.MemcpyDtoHAsync(pinned, d, s2))
	require.NoError(t, b.StreamSynchronize(s2))
	for i, v := range drivertest.BytesFloat32(pinned) {
		require.Equal(t, float32(11.5), v, "element %d", i)
	}

	require.NoError(t, b.EventSynchronize(end))
	assert.NoError(t, b.EventQuery(end))
	assert.NoError(t, b.StreamQuery(g.s))
	ms, err := b.EventElapsedTime(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ms, float32(0))
	assert.NoError(t, b.CtxSynchronize())

	// A timing query on events without timing is refused with the driver's error.
	notimed, err := b.EventCreate(cudadrv.EventDisableTiming)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.EventDestroy(notimed)) }()
	require.NoError(t, b.EventRecord(notimed, g.s))
	require.NoError(t, b.StreamSynchronize(g.s))
	_, err = b.EventElapsedTime(start, notimed)
	var e *cudadrv.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuEventElapsedTime", e.Op)
	t.Logf("10 kernels over %d floats: %.3f ms; timing a non-timing event: %v", n, ms, err)
}
