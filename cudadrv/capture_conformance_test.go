package cudadrv_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
)

// addOneBuffers is x (random, uploaded) and y (NaN-poisoned) of n floats.
type addOneBuffers struct {
	x, y *cudadrv.DeviceBuffer
	host []float32
	n    uint64
}

func newAddOneBuffers(t *testing.T, env *drivertest.Env, n uint64) addOneBuffers {
	t.Helper()
	b := addOneBuffers{x: alloc(t, env, 4*n), y: alloc(t, env, 4*n), host: drivertest.RandomFloat32(int(n)), n: n}
	require.NoError(t, env.Context.CopyHtoD(b.x.Ptr(), drivertest.Float32Bytes(b.host)))
	require.NoError(t, env.Context.Memset8(b.y.Ptr(), 0xff, 4*n))
	return b
}

func (b addOneBuffers) readY(t *testing.T, env *drivertest.Env) []float32 {
	t.Helper()
	got := make([]byte, 4*b.n)
	require.NoError(t, env.Context.CopyDtoH(got, b.y.Ptr()))
	return drivertest.BytesFloat32(got)
}

// captureAddOne records one add_one launch (x → y) on s and returns the graph.
func captureAddOne(t *testing.T, s *cudadrv.Stream, fn *cudadrv.Function, args *cudadrv.KernelArgs, x, y cudadrv.DevicePtr, n uint64, launches int) *cudadrv.Graph {
	t.Helper()
	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	for i := 0; i < launches; i++ {
		require.NoError(t, drivertest.LaunchAddOne(s, fn, args, x, y, n))
	}
	g, err := s.EndCapture()
	require.NoError(t, err)
	return g
}

func TestCaptureRecordsInsteadOfExecuting(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 777)
	args := new(cudadrv.KernelArgs)

	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	st, err := s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusActive, st)
	capturing, err := s.IsCapturing()
	require.NoError(t, err)
	assert.True(t, capturing)
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Destroy()) }()
	st, err = s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, st)

	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.True(t, v != v, "element %d was written during capture: %v", i, v) // still NaN
	}
	nodes, err := g.NodeCount()
	require.NoError(t, err)
	assert.Equal(t, 1, nodes)

	exec, err := g.Instantiate(cudadrv.InstantiateUseNodePriority)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exec.Destroy()) }()
	require.NoError(t, exec.Upload(s))
	require.NoError(t, exec.Launch(s))
	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.Equal(t, buf.host[i]+1, v, "element %d", i)
	}

	// The graph reads live memory: new inputs, same graph.
	fresh := drivertest.RandomFloat32(int(buf.n))
	require.NoError(t, env.Context.CopyHtoD(buf.x.Ptr(), drivertest.Float32Bytes(fresh)))
	require.NoError(t, exec.Launch(s))
	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.Equal(t, fresh[i]+1, v, "element %d after replay on fresh input", i)
	}
}

// TestCaptureInvalidation covers each kind of synchronizing call that invalidates a live
// thread-local capture: the call fails, the capture reports Invalidated, EndCapture fails
// with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and the stream is usable again afterwards.
func TestCaptureInvalidation(t *testing.T) {
	cases := []struct {
		name string
		sync func(t *testing.T, env *drivertest.Env, s *cudadrv.Stream) error
	}{
		{"synchronize the capturing stream", func(_ *testing.T, _ *drivertest.Env, s *cudadrv.Stream) error {
			return s.Synchronize()
		}},
		{"synchronize the context on the capturing thread", func(_ *testing.T, env *drivertest.Env, _ *cudadrv.Stream) error {
			return env.Context.Synchronize()
		}},
		{"synchronize the context from another thread", func(t *testing.T, env *drivertest.Env, _ *cudadrv.Stream) error {
			var err error
			onOtherThread(t, env, func() { err = env.Context.Synchronize() })
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := drivertest.Open(t)
			s := newStream(t, env)
			fn := env.AddOne(t)
			buf := newAddOneBuffers(t, env, 256)
			args := new(cudadrv.KernelArgs)

			require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
			require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
			err := tc.sync(t, env, s)
			require.Error(t, err, "a synchronizing call during capture must fail")
			r := cudadrv.ResultOf(err)
			assert.Contains(t, []cudadrv.Result{cudadrv.ErrorStreamCaptureUnsupported, cudadrv.ErrorStreamCaptureInvalidated}, r, "got %v", err)

			st, err := s.CaptureStatus()
			require.NoError(t, err)
			assert.Equal(t, cudadrv.CaptureStatusInvalidated, st)
			g, err := s.EndCapture()
			assert.Nil(t, g)
			assert.Equal(t, cudadrv.ErrorStreamCaptureInvalidated, cudadrv.ResultOf(err), "got %v", err)

			// The stream works again.
			st, err = s.CaptureStatus()
			require.NoError(t, err)
			assert.Equal(t, cudadrv.CaptureStatusNone, st)
			require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
			require.NoError(t, s.Synchronize())
			for i, v := range buf.readY(t, env) {
				require.Equal(t, buf.host[i]+1, v, "element %d", i)
			}
		})
	}
}

// TestCaptureSurvivesUnrelatedWork: syncing another stream, or a synchronous D2H, from
// another thread does not invalidate a thread-local capture (measured on the H200).
func TestCaptureSurvivesUnrelatedWork(t *testing.T) {
	env := drivertest.Open(t)
	s, other := newStream(t, env), newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 256)
	args := new(cudadrv.KernelArgs)

	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
	onOtherThread(t, env, func() {
		assert.NoError(t, other.Synchronize())
		got := make([]byte, 16)
		assert.NoError(t, env.Context.CopyDtoH(got, buf.x.Ptr()))
	})
	st, err := s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusActive, st)
	g, err := s.EndCapture()
	require.NoError(t, err)
	require.NoError(t, g.Destroy())
}

// TestCaptureMustEndOnItsThread: a thread-local capture ended from another OS thread fails
// with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, and (as measured on the H200) the driver ends the
// capture anyway, without a graph: the stream is usable again and nothing is left to end. This
// is why graphs refuses a wrong-thread End before it reaches the driver.
func TestCaptureMustEndOnItsThread(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 64)
	args := new(cudadrv.KernelArgs)

	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
	onOtherThread(t, env, func() {
		g, err := s.EndCapture()
		assert.Nil(t, g)
		assert.Equal(t, cudadrv.ErrorStreamCaptureWrongThread, cudadrv.ResultOf(err), "got %v", err)
	})
	st, err := s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, st)
	_, err = s.EndCapture()
	assert.Equal(t, cudadrv.ErrorIllegalState, cudadrv.ResultOf(err), "got %v", err)
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n))
	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.Equal(t, buf.host[i]+1, v, "element %d", i)
	}
}

func TestGraphExecUpdate(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 300)
	z := alloc(t, env, 4*buf.n)
	require.NoError(t, env.Context.Memset8(z.Ptr(), 0xff, 4*buf.n))
	args := new(cudadrv.KernelArgs)

	g1 := captureAddOne(t, s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n, 1)
	exec, err := g1.Instantiate(cudadrv.InstantiateUseNodePriority)
	require.NoError(t, err)
	require.NoError(t, g1.Destroy())
	assert.ErrorIs(t, g1.Destroy(), cudadrv.ErrDestroyed, "a graph is destroyed exactly once")

	// Same topology, new output address: updated in place.
	g2 := captureAddOne(t, s, fn, args, buf.x.Ptr(), z.Ptr(), buf.n, 1)
	ok, err := exec.Update(g2)
	require.NoError(t, err)
	assert.True(t, ok, "same topology must update in place")
	require.NoError(t, g2.Destroy())
	require.NoError(t, exec.Launch(s))
	require.NoError(t, s.Synchronize())
	gotZ := make([]byte, 4*buf.n)
	require.NoError(t, env.Context.CopyDtoH(gotZ, z.Ptr()))
	for i, v := range drivertest.BytesFloat32(gotZ) {
		require.Equal(t, buf.host[i]+1, v, "z[%d]", i)
	}
	for i, v := range buf.readY(t, env) {
		require.True(t, v != v, "y[%d] must be untouched by the updated graph", i)
	}

	// Different topology: refused, executable unchanged.
	g3 := captureAddOne(t, s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n, 2)
	ok, err = exec.Update(g3)
	require.NoError(t, err)
	assert.False(t, ok, "a different node count must be refused")
	require.NoError(t, g3.Destroy())
	require.NoError(t, exec.Launch(s))
	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.True(t, v != v, "y[%d] must still be untouched after a refused update", i)
	}
	require.NoError(t, exec.Destroy())
	assert.ErrorIs(t, exec.Destroy(), cudadrv.ErrDestroyed)
	assert.ErrorIs(t, exec.Launch(s), cudadrv.ErrDestroyed, "a destroyed executable never reaches the driver")
}

// TestConcurrentGraphLaunches replays one executable from several goroutines onto their own
// streams; every launch lands.
func TestConcurrentGraphLaunches(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 128)
	args := new(cudadrv.KernelArgs)
	g := captureAddOne(t, s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n, 1)
	exec, err := g.Instantiate(0)
	require.NoError(t, err)
	require.NoError(t, g.Destroy())
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			onOtherThread(t, env, func() {
				for j := 0; j < 50; j++ {
					assert.NoError(t, exec.Launch(s))
				}
			})
		}()
	}
	wg.Wait()
	require.NoError(t, s.Synchronize())
	for i, v := range buf.readY(t, env) {
		require.Equal(t, buf.host[i]+1, v, "element %d", i)
	}
	require.NoError(t, exec.Destroy())
}
