package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep/kernels"
)

// Error bounds from the device method: ‖out − ref‖ / ‖ref‖ against float64 references.
const (
	boundElementwise = 1e-5 // elementwise ops and softmax
	boundGemm        = 1e-4 // MatMul and Gemm, default math
	boundTF32        = 5e-3 // MatMul and Gemm with TF32 tensor cores
)

// fixture is an open device with a stream, a cuBLAS handle on it and a Library, plus the
// device buffers a test allocates; cleanup synchronizes and frees everything before
// drivertest's leak check.
type fixture struct {
	t testing.TB
	*fixtureState
}

// fixtureState is what a test and its subtests share.
type fixtureState struct {
	env    *drivertest.Env
	stream *cudadrv.Stream
	blas   *cudadrv.BLAS
	lib    *kernels.Library
	rng    *rand.Rand
	bufs   []*cudadrv.DeviceBuffer
	// faultsAllowed lets the Library hold a data fault at cleanup (allowFaults); without it a
	// fault that no test took fails the test: kernels given valid data record none.
	faultsAllowed bool
}

// allowFaults marks the fixture's tests as giving kernels bad device data on purpose (the
// fuzz target), so that cleanup does not fail on the data fault they leave.
func (f *fixture) allowFaults() { f.faultsAllowed = true }

// takeFault synchronizes the stream and returns the Library's data fault (nil: none), clearing it.
func (f *fixture) takeFault() *kernels.DataFault {
	f.t.Helper()
	require.NoError(f.t, f.stream.Synchronize())
	pending := f.lib.FaultPending()
	fault, err := f.lib.TakeFault()
	require.NoError(f.t, err)
	require.Equal(f.t, fault != nil, pending, "FaultPending agrees with what TakeFault takes")
	require.False(f.t, f.lib.FaultPending(), "TakeFault clears the fault")
	return fault
}

// sub returns the fixture for subtest t, which runs on its own goroutine: it locks that
// goroutine to its OS thread and binds the context there (CUDA contexts are current per
// thread). Subtests must not run in parallel.
func (f *fixture) sub(t *testing.T) *fixture {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	require.NoError(t, f.env.Context.Bind())
	return &fixture{t: t, fixtureState: f.fixtureState}
}

type fixtureOpts struct {
	tf32   bool
	noBLAS bool
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, fixtureOpts{}) }

func newFixtureWith(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	env := drivertest.Open(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random seed %d", seed)
		}
	})
	return newFixtureOn(t, env, rng, o)
}

// variant returns a second fixture on the same device (a new stream, cuBLAS handle and
// Library made with o), torn down before f.
func (f *fixture) variant(o fixtureOpts) *fixture {
	f.t.Helper()
	return newFixtureOn(f.t, f.env, f.rng, o)
}

func newFixtureOn(t testing.TB, env *drivertest.Env, rng *rand.Rand, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, fixtureState: &fixtureState{env: env, rng: rng}}
	st, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	f.stream = st
	if !o.noBLAS {
		f.blas, err = st.NewBLAS()
		require.NoError(t, err)
	}
	f.lib, err = kernels.NewLibrary(kernels.Runtime{Context: env.Context, Stream: st, BLAS: f.blas, TF32: o.tf32})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := f.stream.Synchronize(); err != nil {
			t.Errorf("synchronize: %v", err)
		}
		if fault, err := f.lib.TakeFault(); err != nil && err != kernels.ErrClosed {
			t.Errorf("take the data fault: %v", err)
		} else if fault != nil && !f.faultsAllowed {
			t.Errorf("a kernel recorded a data fault that no test took (kernels given valid data record none): %v", fault)
		}
		for _, b := range f.bufs {
			if err := b.Free(); err != nil {
				t.Errorf("free: %v", err)
			}
		}
		if err := f.lib.Close(); err != nil && err != kernels.ErrClosed {
			t.Errorf("close library: %v", err)
		}
		if f.blas != nil {
			if err := f.blas.Destroy(); err != nil {
				t.Errorf("destroy cuBLAS handle: %v", err)
			}
		}
		if err := f.stream.Destroy(); err != nil {
			t.Errorf("destroy stream: %v", err)
		}
	})
	return f
}

// alloc returns a device tensor of info, freed at cleanup.
func (f *fixture) alloc(info kernels.TensorInfo) kernels.Tensor {
	f.t.Helper()
	b, err := f.env.Context.Alloc(uint64(max(info.Bytes(), 1)))
	require.NoError(f.t, err)
	f.bufs = append(f.bufs, b)
	return kernels.Tensor{TensorInfo: info, Ptr: b.Ptr()}
}

// upload returns a device tensor holding data.
func (f *fixture) upload(info kernels.TensorInfo, data []byte) kernels.Tensor {
	f.t.Helper()
	require.Equal(f.t, info.Bytes(), int64(len(data)), "upload size for %s", info)
	t := f.alloc(info)
	require.NoError(f.t, f.env.Context.CopyHtoD(t.Ptr, data))
	return t
}

func (f *fixture) uploadF32(shape []int64, data []float32) kernels.Tensor {
	return f.upload(kernels.TensorInfo{DType: kernels.Float32, Shape: shape}, drivertest.Float32Bytes(data))
}

// poison fills t with 0xff bytes (a NaN in every float) on the stream, so that an element a
// kernel did not write shows up.
func (f *fixture) poison(t kernels.Tensor) {
	f.t.Helper()
	require.NoError(f.t, f.stream.Memset8Async(t.Ptr, 0xff, uint64(t.Bytes())))
}

// download synchronizes the stream and returns t's bytes.
func (f *fixture) download(t kernels.Tensor) []byte {
	f.t.Helper()
	require.NoError(f.t, f.stream.Synchronize())
	out := make([]byte, t.Bytes())
	require.NoError(f.t, f.env.Context.CopyDtoH(out, t.Ptr))
	return out
}

func (f *fixture) downloadF32(t kernels.Tensor) []float32 {
	return drivertest.BytesFloat32(f.download(t))
}

// random returns n values uniform in ±[0.1, 2): random, and never zero.
func (f *fixture) random(n int64) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := 0.1 + 1.9*f.rng.Float32()
		if f.rng.IntN(2) == 0 {
			v = -v
		}
		out[i] = v
	}
	return out
}

func (f *fixture) get(spec kernels.Spec) kernels.Kernel {
	f.t.Helper()
	k, err := f.lib.Get(spec)
	require.NoError(f.t, err, "Get %s", spec.Op)
	return k
}

// runF32 gets the kernel for spec, uploads inputs, poisons fresh outputs, executes and
// returns the kernel and the first output's values.
func (f *fixture) runF32(spec kernels.Spec, inputs ...[]float32) (kernels.Kernel, []float32) {
	f.t.Helper()
	k := f.get(spec)
	ins := make([]kernels.Tensor, len(inputs))
	for i, in := range inputs {
		ins[i] = f.uploadF32(spec.Inputs[i].Shape, in)
	}
	outs := f.outputs(k)
	require.NoError(f.t, k.Execute(ins, outs))
	return k, f.downloadF32(outs[0])
}

// capture records what run queues on the fixture's stream (once the stream has drained) into a
// graph and returns its executable; the graph and the executable are destroyed when the test
// ends.
func (f *fixture) capture(run func()) *cudadrv.GraphExec {
	f.t.Helper()
	require.NoError(f.t, f.stream.Synchronize())
	require.NoError(f.t, f.stream.BeginCapture(cudadrv.CaptureModeThreadLocal))
	run()
	graph, err := f.stream.EndCapture()
	require.NoError(f.t, err)
	f.t.Cleanup(func() { assert.NoError(f.t, graph.Destroy()) })
	exec, err := graph.Instantiate(0)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { assert.NoError(f.t, exec.Destroy()) })
	return exec
}

// outputs allocates and poisons the kernel's outputs.
func (f *fixture) outputs(k kernels.Kernel) []kernels.Tensor {
	f.t.Helper()
	infos := k.Outputs()
	outs := make([]kernels.Tensor, len(infos))
	for i, info := range infos {
		outs[i] = f.alloc(info)
		f.poison(outs[i])
	}
	return outs
}

func f32Info(shape ...int64) kernels.TensorInfo {
	return kernels.TensorInfo{DType: kernels.Float32, Shape: shape}
}

func i64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func bytesI64(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// requireClose checks that every element was written (no NaN: the poison, and no reference
// is NaN) and that ‖got − ref‖ / ‖ref‖ <= bound.
func requireClose(t testing.TB, got []float32, ref []float64, bound float64, what string) {
	t.Helper()
	require.Len(t, got, len(ref), "%s: element count", what)
	var num, den float64
	for i, g := range got {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			require.Failf(t, "element not written", "%s: element %d is %v (poison 0xff bytes are NaN)", what, i, g)
		}
		d := float64(g) - ref[i]
		num += d * d
		den += ref[i] * ref[i]
	}
	require.NotZero(t, den, "%s: the reference is all zeros; the check would prove nothing", what)
	rel := math.Sqrt(num / den)
	require.LessOrEqual(t, rel, bound, "%s: ‖out−ref‖/‖ref‖ = %.3g", what, rel)
}

// relDiff is ‖a − b‖ / ‖b‖.
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}
