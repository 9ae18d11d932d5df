package cudadrv_test

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// mappedHost allocates n bytes of host-mapped pinned memory, freed at cleanup.
func mappedHost(t *testing.T, env *drivertest.Env, n uint64) *cudadrv.HostBuffer {
	t.Helper()
	h, err := env.Context.AllocHostMapped(n)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Free()) })
	return h
}

// loadWord reads the aligned 32-bit word at b[off:] atomically, as a spinning host does.
func loadWord(b []byte, off int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off])))
}

// awaitWord reads the word at b[off:] until it holds v, yielding between reads; after a minute
// (a write that never comes) it fails the test.
func awaitWord(t *testing.T, b []byte, off int, v uint32) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for loadWord(b, off) != v {
		if time.Now().After(deadline) {
			t.Fatalf("the word still holds %#x, not %#x", loadWord(b, off), v)
		}
		runtime.Gosched()
	}
}

func TestMappedHostMemoryIsReachedByTheDevice(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	const n = 1000
	before := env.Context.Counters()
	h := mappedHost(t, env, 4*n)
	require.NotZero(t, h.DevicePtr())
	c := env.Context.Counters()
	assert.Equal(t, before.PinnedAllocs+1, c.PinnedAllocs, "counted as pinned memory")
	assert.Equal(t, before.PinnedLiveBytes+4*n, c.PinnedLiveBytes)

	// A kernel writes the host buffer in place through its device address.
	buf := newAddOneBuffers(t, env, n)
	args := new(cudadrv.KernelArgs)
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), h.DevicePtr(), n))
	require.NoError(t, s.Synchronize())
	got := drivertest.BytesFloat32(h.Bytes())
	for i := range got {
		require.Equal(t, buf.host[i]+1, got[i], "element %d", i)
	}

	// And stream copies read it in place.
	copy(h.Bytes(), pattern(4*n, 5))
	d := alloc(t, env, 4*n)
	require.NoError(t, s.CopyDtoDAsync(d.Ptr(), h.DevicePtr(), 4*n))
	back := make([]byte, 4*n)
	require.NoError(t, s.CopyDtoHAsync(back, d.Ptr()))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, pattern(4*n, 5), back)

	plain, err := env.Context.AllocHost(64)
	require.NoError(t, err)
	assert.Zero(t, plain.DevicePtr(), "memory from AllocHost is not mapped")
	require.NoError(t, plain.Free())
}

func TestWriteValue32FollowsTheWorkBeforeIt(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	const n = 4096
	h := mappedHost(t, env, 4*n+64)
	word := h.DevicePtr() + 4*n
	buf := newAddOneBuffers(t, env, n)
	args := new(cudadrv.KernelArgs)
	for i, v := range []uint32{0x5eed1234, 0xA1B2C3D4} {
		require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), h.DevicePtr(), n))
		require.NoError(t, s.WriteValue32(word, v))
		awaitWord(t, h.Bytes(), 4*n, v) // the write arrives without a synchronization
		got := drivertest.BytesFloat32(h.Bytes()[:4*n])
		for j := range got {
			require.Equal(t, buf.host[j]+1, got[j], "round %d element %d: written before the value", i, j)
		}
		copy(h.Bytes()[:4*n], make([]byte, 4*n))
	}

	// Device memory takes the write too.
	d := alloc(t, env, 16)
	require.NoError(t, env.Context.CopyHtoD(d.Ptr(), pattern(16, 2)))
	require.NoError(t, s.WriteValue32(d.Ptr()+4, 0x01020304))
	require.NoError(t, s.Synchronize())
	got := make([]byte, 16)
	require.NoError(t, env.Context.CopyDtoH(got, d.Ptr()))
	want := pattern(16, 2)
	copy(want[4:], []byte{4, 3, 2, 1})
	assert.Equal(t, want, got)
}

// TestWriteValue32IsCapturedAndReplayed: captured, the write is a graph node that every launch
// of the graph performs again, after the kernel before it.
func TestWriteValue32IsCapturedAndReplayed(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	const n = 256
	h := mappedHost(t, env, 64)
	buf := newAddOneBuffers(t, env, n)
	args := new(cudadrv.KernelArgs)
	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), n))
	require.NoError(t, s.WriteValue32(h.DevicePtr(), 77))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Destroy()) }()
	assert.Zero(t, loadWord(h.Bytes(), 0), "recorded, not run")
	nodes, err := g.NodeCount()
	require.NoError(t, err)
	assert.Equal(t, 2, nodes)
	exec, err := g.Instantiate(0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exec.Destroy()) }()
	for i := range 2 {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&h.Bytes()[0])), 0)
		require.NoError(t, exec.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, uint32(77), loadWord(h.Bytes(), 0), "launch %d", i)
	}
	for i, v := range buf.readY(t, env) {
		require.Equal(t, buf.host[i]+1, v, "element %d", i)
	}
}

func TestCompletionWordSignalsInOrder(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	w, err := s.NewCompletionWord()
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Free()) }()
	assert.Same(t, s, w.Stream())
	assert.Equal(t, uint32(0), w.Value())
	for want := uint32(1); want <= 3; want++ {
		seq, err := w.Signal()
		require.NoError(t, err)
		assert.Equal(t, want, seq)
		require.True(t, w.Spin(seq, time.Minute))
		assert.True(t, w.Reached(seq))
		assert.True(t, w.Reached(seq-1), "an earlier number is reached too")
		assert.False(t, w.Reached(seq+1))
	}

	// Across the wrap at 2^32: the comparison is modulo 2^32.
	cudadrv.SetCompletionWord(w, math.MaxUint32-1)
	for _, want := range []uint32{math.MaxUint32, 0, 1} {
		seq, err := w.Signal()
		require.NoError(t, err)
		assert.Equal(t, want, seq)
		require.True(t, w.Spin(seq, time.Minute), "%d", seq)
		assert.True(t, w.Reached(math.MaxUint32-1))
		assert.False(t, w.Reached(seq+1))
	}
	require.NoError(t, s.Synchronize())
}

// TestCompletionWordConcurrentWaiters: goroutines on threads of their own signal and wait at
// once; each sees its own number arrive (Signal keeps the stream's order of numbers). They
// spin briefly and then synchronize the stream, as ep does, after which the number must have
// arrived: the simulated device's stream worker needs a CPU too.
func TestCompletionWordConcurrentWaiters(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	buf := newAddOneBuffers(t, env, 1024)
	w, err := s.NewCompletionWord()
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Free()) }()
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			onOtherThread(t, env, func() {
				args := new(cudadrv.KernelArgs)
				for range 50 {
					if drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), buf.y.Ptr(), buf.n) != nil {
						failures.Add(1)
						return
					}
					seq, err := w.Signal()
					if err != nil {
						failures.Add(1)
						return
					}
					if !w.Spin(seq, 20*time.Microsecond) && (s.Synchronize() != nil || !w.Reached(seq)) {
						failures.Add(1)
						return
					}
				}
			})
		}()
	}
	wg.Wait()
	assert.Zero(t, failures.Load())
	assert.Equal(t, uint32(200), w.Value())
	require.NoError(t, s.Synchronize())
}

// TestCompletionWordWaitsForTheWorkBeforeIt holds a kernel on the simulated device: the word
// does not arrive, and Spin gives up after its budget, until the kernel is let go.
func TestCompletionWordWaitsForTheWorkBeforeIt(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	env := drivertest.OpenWith(t, sim.Options{Kernels: map[string]cudadrv.KernelBody{
		"cudaep_test_hold": func(*cudadrv.KernelLaunch) error {
			close(started)
			<-release
			return nil
		},
	}})
	needSim(t, env)
	s := newStream(t, env)
	mod, err := env.Context.LoadModule([]byte(".version 7.5\n.target sm_75\n.address_size 64\n.visible .entry cudaep_test_hold() { ret; }\n"))
	require.NoError(t, err)
	defer func() { assert.NoError(t, mod.Unload()) }()
	hold, err := mod.Function("cudaep_test_hold")
	require.NoError(t, err)
	w, err := s.NewCompletionWord()
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Free()) }()

	one := cudadrv.Dim3{X: 1, Y: 1, Z: 1}
	require.NoError(t, s.Launch(hold, one, one, 0, new(cudadrv.KernelArgs)))
	seq, err := w.Signal()
	require.NoError(t, err)
	<-started
	assert.False(t, w.Reached(seq), "the word arrived while the kernel before it runs")
	assert.False(t, w.Spin(seq, time.Millisecond), "Spin gives up after its budget")
	assert.False(t, w.Spin(seq, 0), "a zero budget reads once")
	close(release)
	assert.True(t, w.Spin(seq, time.Minute))
	require.NoError(t, s.Synchronize())
}

func TestRetractStickyForgetsOnlyThatError(t *testing.T) {
	env := drivertest.Open(t)
	needSim(t, env)
	env.Sim.InjectFault(sim.OpMemGetInfo, 1, cudadrv.ErrorIllegalAddress)
	_, _, first := env.Context.MemInfo()
	require.ErrorIs(t, env.Context.StickyError(), cudadrv.ErrorIllegalAddress)
	env.Context.RetractSticky(&cudadrv.Error{Op: "cuMemGetInfo_v2", Result: cudadrv.ErrorIllegalAddress})
	require.Error(t, env.Context.StickyError(), "an equal error that was not the one recorded changes nothing")
	env.Context.RetractSticky(first)
	assert.NoError(t, env.Context.StickyError())
	// The sim's context stays faulted (the injection faulted it): the next call records again.
	_, _, err := env.Context.MemInfo()
	require.Error(t, err)
	assert.ErrorIs(t, env.Context.StickyError(), cudadrv.ErrorIllegalAddress)
}

// TestHandleCallsWithNoContextCurrent pins down what ep's hot calls rely on to skip binding
// the context (ep's enterUnbound): a call that names a stream or executable of the context,
// made on a thread with no context current, either runs in the handle's context or is refused
// having enqueued nothing. The simulated device refuses; the test accepts either outcome and
// checks, through a counter in mapped memory, that the work ran exactly when the call said so.
func TestHandleCallsWithNoContextCurrent(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	const n = 256
	h := mappedHost(t, env, 4*n)
	buf := newAddOneBuffers(t, env, n)
	args := new(cudadrv.KernelArgs)
	require.NoError(t, s.BeginCapture(cudadrv.CaptureModeThreadLocal))
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, buf.x.Ptr(), h.DevicePtr(), n))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Destroy()) }()
	exec, err := g.Instantiate(0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exec.Destroy()) }()
	w, err := s.NewCompletionWord()
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Free()) }()
	b := env.Context.Backend()

	unbind := func() {
		t.Helper()
		require.NoError(t, b.CtxSetCurrent(0))
	}
	rebind := func() {
		t.Helper()
		require.NoError(t, env.Context.Bind())
		require.NoError(t, s.Synchronize())
	}
	wrote := func() bool { return drivertest.BytesFloat32(h.Bytes())[0] == buf.host[0]+1 }

	unbind()
	launchErr := exec.Launch(s)
	rebind()
	assert.Equal(t, launchErr == nil, wrote(), "the launch ran exactly when it reported success (%v)", launchErr)
	env.Context.RetractSticky(launchErr)

	seq := w.Value()
	unbind()
	next, writeErr := w.Signal()
	rebind()
	if writeErr == nil {
		assert.True(t, w.Reached(next), "a write queued without a current context ran")
	} else {
		assert.Equal(t, seq, w.Value(), "a refused write wrote nothing")
	}
	env.Context.RetractSticky(writeErr)

	unbind()
	syncErr := s.Synchronize()
	rebind()
	env.Context.RetractSticky(syncErr)
	t.Logf("with no context current: cuGraphLaunch: %v; cuStreamWriteValue32: %v; cuStreamSynchronize: %v", launchErr, writeErr, syncErr)
	assert.NoError(t, env.Context.StickyError())
}
