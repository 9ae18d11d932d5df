package cudadrv_test

// The conformance suite: every behaviour of the driver surface, run unchanged against the
// simulated device (default) and the real GPU (CUDAEP_TEST_BACKEND=cuda).

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// pattern returns n distinct-looking non-zero bytes that depend on salt.
func pattern(n int, salt byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131+int(salt)*17+7) | 1
	}
	return b
}

func alloc(t *testing.T, env *drivertest.Env, n uint64) *cudadrv.DeviceBuffer {
	t.Helper()
	b, err := env.Context.Alloc(n)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Free()) })
	return b
}

func newStream(t *testing.T, env *drivertest.Env) *cudadrv.Stream {
	t.Helper()
	s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Destroy()) })
	return s
}

func newEvent(t *testing.T, env *drivertest.Env, flags cudadrv.EventFlags) *cudadrv.Event {
	t.Helper()
	e, err := env.Context.NewEvent(flags)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Destroy()) })
	return e
}

// onOtherThread runs f on a fresh goroutine locked to its own OS thread (never the caller's,
// which is locked to the test) with the context bound there, and waits for it.
func onOtherThread(t *testing.T, env *drivertest.Env, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := env.Context.Bind(); err != nil {
			t.Errorf("bind on other thread: %v", err)
			return
		}
		f()
	}()
	<-done
}

func TestDeviceInfo(t *testing.T) {
	env := drivertest.Open(t)
	assert.Equal(t, drivertest.BackendName(), env.Driver.Name())
	v, err := env.Driver.Version()
	require.NoError(t, err)
	assert.Positive(t, v)
	assert.NotEmpty(t, env.Device.Name())
	major, _ := env.Device.ComputeCapability()
	assert.GreaterOrEqual(t, major, 7)
	assert.Positive(t, env.Device.Multiprocessors())
	assert.Positive(t, env.Device.TotalMemory())
	free, total, err := env.Context.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, env.Device.TotalMemory(), total)
	assert.LessOrEqual(t, free, total)
	assert.Positive(t, free)
}

func TestDeviceOrdinalOutOfRangeNamesTheCount(t *testing.T) {
	env := drivertest.Open(t)
	n, err := env.Driver.DeviceCount()
	require.NoError(t, err)
	for _, ord := range []int{-1, n, n + 7} {
		_, err := env.Driver.Device(ord)
		require.Error(t, err, "ordinal %d", ord)
		assert.Equal(t, cudadrv.ErrorInvalidDevice, cudadrv.ResultOf(err))
		assert.Contains(t, err.Error(), "device(s) present")
	}
}

func TestStreamsWithPriorities(t *testing.T) {
	env := drivertest.Open(t)
	least, greatest, err := env.Context.StreamPriorityRange()
	require.NoError(t, err)
	assert.LessOrEqual(t, greatest, least, "CUDA's greatest priority is the smallest number")
	buf := alloc(t, env, 4096)
	for _, prio := range []int{least, greatest} {
		s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, prio)
		require.NoError(t, err)
		require.NoError(t, s.Memset8Async(buf.Ptr(), 0x5a, 4096))
		require.NoError(t, s.Synchronize())
		done, err := s.Query()
		require.NoError(t, err)
		assert.True(t, done)
		require.NoError(t, s.Destroy())
		assert.ErrorIs(t, s.Destroy(), cudadrv.ErrDestroyed, "a second destroy never reaches the driver")
		assert.ErrorIs(t, s.Synchronize(), cudadrv.ErrDestroyed)
	}
	got := make([]byte, 4096)
	require.NoError(t, env.Context.CopyDtoH(got, buf.Ptr()))
	for i, v := range got {
		require.Equal(t, byte(0x5a), v, "byte %d", i)
	}
}

func TestEventsRecordQuerySynchronizeElapsed(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	start := newEvent(t, env, cudadrv.EventDefault)
	end := newEvent(t, env, cudadrv.EventDefault)
	noTiming := newEvent(t, env, cudadrv.EventDisableTiming)
	buf := alloc(t, env, 1<<20)

	require.NoError(t, start.Record(s))
	require.NoError(t, s.Memset8Async(buf.Ptr(), 0x11, 1<<20))
	require.NoError(t, end.Record(s))
	require.NoError(t, noTiming.Record(s))
	require.NoError(t, end.Synchronize())
	done, err := end.Query()
	require.NoError(t, err)
	assert.True(t, done)
	d, err := end.ElapsedSince(start)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d.Nanoseconds(), int64(0))

	require.NoError(t, noTiming.Synchronize())
	_, err = noTiming.ElapsedSince(start)
	assert.Error(t, err, "an event created without timing has no timestamp")
}

func TestMemoryRoundTripsAreByteExact(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	for i, size := range []int{1, 4097, 1<<20 + 3} {
		src := pattern(size, byte(i+1))
		a := alloc(t, env, uint64(size))
		b := alloc(t, env, uint64(size))

		// Synchronous H2D → D2D → D2H.
		require.NoError(t, env.Context.CopyHtoD(a.Ptr(), src))
		require.NoError(t, env.Context.CopyDtoD(b.Ptr(), a.Ptr(), uint64(size)))
		got := make([]byte, size)
		require.NoError(t, env.Context.CopyDtoH(got, b.Ptr()))
		require.Equal(t, src, got, "sync round trip of %d bytes", size)

		// Asynchronous, ordered on one stream, with a fresh pattern.
		src2 := pattern(size, byte(i+101))
		got2 := make([]byte, size)
		require.NoError(t, s.CopyHtoDAsync(a.Ptr(), src2))
		require.NoError(t, s.CopyDtoDAsync(b.Ptr(), a.Ptr(), uint64(size)))
		require.NoError(t, s.CopyDtoHAsync(got2, b.Ptr()))
		require.NoError(t, s.Synchronize())
		require.Equal(t, src2, got2, "async round trip of %d bytes", size)
	}
}

func TestMemsets(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	buf := alloc(t, env, 4096)
	require.NoError(t, env.Context.Memset8(buf.Ptr(), 0x3c, 4096))
	require.NoError(t, s.Memset32Async(buf.Ptr()+1024, 0xdeadbeef, 256))
	require.NoError(t, s.Synchronize())
	got := make([]byte, 4096)
	require.NoError(t, env.Context.CopyDtoH(got, buf.Ptr()))
	for i := 0; i < 1024; i++ {
		require.Equal(t, byte(0x3c), got[i], "byte %d", i)
	}
	for i := 0; i < 256; i++ {
		require.Equal(t, uint32(0xdeadbeef), binary.LittleEndian.Uint32(got[1024+4*i:]), "word %d", i)
	}
	for i := 2048; i < 4096; i++ {
		require.Equal(t, byte(0x3c), got[i], "byte %d", i)
	}
}

func TestPinnedHostMemory(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	const n = 1 << 16
	before := env.Context.Counters()
	h, err := env.Context.AllocHost(n)
	require.NoError(t, err)
	require.Len(t, h.Bytes(), n)
	copy(h.Bytes(), pattern(n, 9))
	d := alloc(t, env, n)
	back, err := env.Context.AllocHost(n)
	require.NoError(t, err)
	require.NoError(t, s.CopyHtoDAsync(d.Ptr(), h.Bytes()))
	require.NoError(t, s.CopyDtoHAsync(back.Bytes(), d.Ptr()))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, pattern(n, 9), back.Bytes())
	c := env.Context.Counters()
	assert.Equal(t, before.PinnedAllocs+2, c.PinnedAllocs)
	assert.Equal(t, before.PinnedLiveBytes+2*n, c.PinnedLiveBytes)
	require.NoError(t, h.Free())
	require.NoError(t, back.Free())
	assert.ErrorIs(t, h.Free(), cudadrv.ErrDestroyed)
	c = env.Context.Counters()
	assert.Equal(t, before.PinnedLiveBytes, c.PinnedLiveBytes)
	assert.Equal(t, before.PinnedFrees+2, c.PinnedFrees)
}

// TestRegisteredReadOnlyFileMapping registers a file-backed MAP_SHARED, PROT_READ mapping
// read-only (the zero-copy paging path) and copies from it.
func TestRegisteredReadOnlyFileMapping(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	page := os.Getpagesize()
	size := 4 * page
	want := pattern(size, 33)
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, os.WriteFile(path, want, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer func() { assert.NoError(t, unix.Munmap(m)) }()

	before := env.Context.Counters()
	reg, err := env.Context.RegisterHost(m, cudadrv.HostRegisterReadOnly)
	require.NoError(t, err)
	assert.Equal(t, before.RegisteredLiveBytes+uint64(size), env.Context.Counters().RegisteredLiveBytes)
	d := alloc(t, env, uint64(size))
	require.NoError(t, s.CopyHtoDAsync(d.Ptr(), reg.Bytes()[page:]))
	require.NoError(t, s.Synchronize())
	got := make([]byte, size-page)
	require.NoError(t, env.Context.CopyDtoH(got, d.Ptr()))
	assert.Equal(t, want[page:], got)
	require.NoError(t, reg.Unregister())
	assert.ErrorIs(t, reg.Unregister(), cudadrv.ErrDestroyed)
	c := env.Context.Counters()
	assert.Equal(t, before.RegisteredLiveBytes, c.RegisteredLiveBytes)
	assert.Equal(t, before.Unregistrations+1, c.Unregistrations)
}

func TestAllocationCounters(t *testing.T) {
	env := drivertest.Open(t)
	before := env.Context.Counters()
	a, err := env.Context.Alloc(1000)
	require.NoError(t, err)
	b, err := env.Context.Alloc(24)
	require.NoError(t, err)
	c := env.Context.Counters()
	assert.Equal(t, before.DeviceAllocs+2, c.DeviceAllocs)
	assert.Equal(t, before.DeviceLiveBytes+1024, c.DeviceLiveBytes)
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
	assert.ErrorIs(t, b.Free(), cudadrv.ErrDestroyed, "a double free never reaches the driver")
	c = env.Context.Counters()
	assert.Equal(t, before.DeviceFrees+2, c.DeviceFrees)
	assert.Equal(t, before.DeviceLiveBytes, c.DeviceLiveBytes)
}

func TestKernelLaunchWritesEveryElement(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	const n = 1000
	x := drivertest.RandomFloat32(n)
	xb, yb := alloc(t, env, 4*n), alloc(t, env, 4*n)
	require.NoError(t, env.Context.CopyHtoD(xb.Ptr(), drivertest.Float32Bytes(x)))
	require.NoError(t, env.Context.Memset8(yb.Ptr(), 0xff, 4*n)) // NaN poison
	args := new(cudadrv.KernelArgs)
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, xb.Ptr(), yb.Ptr(), n))
	require.NoError(t, s.Synchronize())
	got := make([]byte, 4*n)
	require.NoError(t, env.Context.CopyDtoH(got, yb.Ptr()))
	for i, v := range drivertest.BytesFloat32(got) {
		require.Equal(t, x[i]+1, v, "element %d", i)
	}
}

func TestLaunchRefusesTooManyArguments(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	fn := env.AddOne(t)
	args := new(cudadrv.KernelArgs)
	for i := 0; i <= cudadrv.MaxKernelArgs; i++ {
		args.U32(uint32(i))
	}
	err := s.Launch(fn, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, cudadrv.Dim3{X: 1, Y: 1, Z: 1}, 0, args)
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorInvalidValue, cudadrv.ResultOf(err))
	assert.Contains(t, err.Error(), "add_one")
}

func TestModuleGetFunctionUnknownName(t *testing.T) {
	env := drivertest.Open(t)
	mod, err := env.Context.LoadModule([]byte(drivertest.AddOnePTX))
	require.NoError(t, err)
	_, err = mod.Function("no_such_kernel")
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorNotFound, cudadrv.ResultOf(err))
	require.NoError(t, mod.Unload())
	_, err = mod.Function("add_one")
	assert.ErrorIs(t, err, cudadrv.ErrDestroyed)
}

// TestEventOrderedCrossStreamCopy: a copy on stream B that waits on an event recorded after a
// slow upload on stream A sees the uploaded bytes. On the sim the upload is slowed by the
// bandwidth model so that a missing wait would read stale memory.
func TestEventOrderedCrossStreamCopy(t *testing.T) {
	env := drivertest.OpenWith(t, sim.Options{CopyBandwidth: 256 << 20})
	a, b := newStream(t, env), newStream(t, env)
	ev := newEvent(t, env, cudadrv.EventDisableTiming)
	const n = 8 << 20
	src := pattern(n, 77)
	d1, d2 := alloc(t, env, n), alloc(t, env, n)
	require.NoError(t, env.Context.Memset8(d1.Ptr(), 0x01, n))
	require.NoError(t, a.CopyHtoDAsync(d1.Ptr(), src))
	require.NoError(t, ev.Record(a))
	require.NoError(t, b.WaitEvent(ev))
	require.NoError(t, b.CopyDtoDAsync(d2.Ptr(), d1.Ptr(), n))
	got := make([]byte, n)
	require.NoError(t, b.CopyDtoHAsync(got, d2.Ptr()))
	require.NoError(t, b.Synchronize())
	require.Equal(t, src, got)
	require.NoError(t, a.Synchronize())
}

func TestErrorsNameTheCallAndResult(t *testing.T) {
	env := drivertest.Open(t)
	// Address 0x10 is inside no allocation on either backend.
	err := env.Context.CopyDtoH(make([]byte, 4096), cudadrv.DevicePtr(0x10))
	require.Error(t, err, "a read from an address outside every allocation must fail")
	var de *cudadrv.Error
	require.True(t, errors.As(err, &de), "got %T", err)
	assert.Contains(t, err.Error(), de.Op)
	assert.Contains(t, err.Error(), de.Result.Name())
	assert.Contains(t, de.Op, "cuMemcpyDtoH")
	assert.True(t, errors.Is(err, de.Result))
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", cudadrv.ErrorOutOfMemory.Name())
	assert.Equal(t, "CUresult(12345)", cudadrv.Result(12345).Name())
}

func TestHostSlicesOfLengthZeroAreNoOps(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	buf := alloc(t, env, 16)
	require.NoError(t, env.Context.CopyHtoD(buf.Ptr(), nil))
	require.NoError(t, s.CopyDtoHAsync(nil, buf.Ptr()))
	_, err := env.Context.RegisterHost(nil, 0)
	assert.Equal(t, cudadrv.ErrorInvalidValue, cudadrv.ResultOf(err))
}
