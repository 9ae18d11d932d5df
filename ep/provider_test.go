package ep_test

import (
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// newProvider opens a provider on the test backend (sim, or cuda with CUDAEP_TEST_BACKEND=cuda)
// and locks the test goroutine's thread, as a capture needs.
func newProvider(t *testing.T, mutate ...func(*ep.Options)) *ep.Provider {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	for _, m := range mutate {
		m(&opts)
	}
	p, err := ep.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

func alloc(t *testing.T, p *ep.Provider, n uint64) *ep.Buffer {
	t.Helper()
	b, err := p.Alloc(n, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := b.Release(); err != nil && !errors.Is(err, ep.ErrReleased) {
			t.Errorf("release: %v", err)
		}
	})
	return b
}

func upload(t *testing.T, p *ep.Provider, f []float32) *ep.Buffer {
	t.Helper()
	b := alloc(t, p, uint64(4*len(f)))
	require.NoError(t, p.CopyToDevice(b, 0, drivertest.Float32Bytes(f)))
	return b
}

func download(t *testing.T, p *ep.Provider, b *ep.Buffer) []float32 {
	t.Helper()
	out := make([]byte, b.Size())
	require.NoError(t, p.CopyToHost(out, b, 0))
	return drivertest.BytesFloat32(out)
}

func TestNewReportsBackendAndDevice(t *testing.T) {
	p := newProvider(t)
	assert.Equal(t, drivertest.BackendName(), p.BackendName())
	assert.Empty(t, p.AutoReason(), "an explicit backend has no auto reason")
	d := p.Device()
	assert.NotEmpty(t, d.Name)
	assert.Positive(t, d.TotalMemory)
	assert.Positive(t, d.FreeMemory)
	assert.GreaterOrEqual(t, d.Major, 7)
}

func TestNewRefusesAnOutOfRangeDeviceNamingTheCount(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	opts.DeviceID = 64
	_, err := ep.New(opts)
	require.Error(t, err)
	assert.ErrorIs(t, err, ep.ErrNoDevice)
	assert.Contains(t, err.Error(), "device_id 64")
	assert.Contains(t, err.Error(), "device(s) present")
}

func TestNewRefusesBadOptions(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = "opencl"
	_, err := ep.New(opts)
	var oe *ep.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "backend", oe.Key)
}

func TestAutoBackendSaysWhatItChose(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = ep.BackendAuto
	p, err := ep.New(opts)
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	assert.Contains(t, p.AutoReason(), "auto chose "+p.BackendName())
}

func TestCloseIsIdempotentAndRefusesLaterCalls(t *testing.T) {
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	p, err := ep.New(opts)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Alloc(16, 0)
	assert.ErrorIs(t, err, ep.ErrClosed)
	assert.ErrorIs(t, p.Synchronize(), ep.ErrClosed)
}

func TestAllocAlignmentAndCounters(t *testing.T) {
	p := newProvider(t)
	before := p.Stats()
	for _, align := range []uint64{0, 256, 4096, 1 << 16} {
		b, err := p.Alloc(1000, align)
		require.NoError(t, err)
		want := align
		if want == 0 {
			want = ep.DefaultAlignment
		}
		assert.Zero(t, uint64(b.Ptr())%want, "alignment %d", align)
		assert.Equal(t, uint64(1000), b.Size())
		// The whole requested range is usable.
		require.NoError(t, p.CopyToDevice(b, 0, drivertest.Float32Bytes(drivertest.RandomFloat32(250))))
		require.NoError(t, b.Release())
		assert.ErrorIs(t, b.Release(), ep.ErrReleased)
	}
	after := p.Stats()
	assert.Equal(t, before.Allocs+4, after.Allocs)
	assert.Equal(t, before.Frees+4, after.Frees)
	assert.Equal(t, before.LiveBytes, after.LiveBytes)

	_, err := p.Alloc(0, 0)
	assert.ErrorContains(t, err, "size is 0")
	_, err = p.Alloc(16, 48)
	assert.ErrorContains(t, err, "alignment 48 is not a power of two")
	_, err = p.Alloc(math.MaxUint64-10, 1<<20)
	assert.ErrorContains(t, err, "overflows")
}

func TestHostCopiesCheckRanges(t *testing.T) {
	p := newProvider(t)
	b := alloc(t, p, 64)
	err := p.CopyToDevice(b, 60, make([]byte, 8))
	assert.ErrorContains(t, err, "outside the 64-byte buffer")
	err = p.CopyToHost(make([]byte, 8), b, math.MaxUint64-2)
	assert.ErrorContains(t, err, "outside")
	require.NoError(t, b.Release())
	assert.ErrorIs(t, p.CopyToHost(make([]byte, 8), b, 0), ep.ErrReleased)
}

func TestSynchronizeIsDeferredAndForceSynchronizeDrains(t *testing.T) {
	p := newProvider(t)
	x := drivertest.RandomFloat32(4096)
	b := upload(t, p, x)
	c := alloc(t, p, b.Size())
	require.NoError(t, p.CopyBuffer(c, 0, b, 0, b.Size()))
	require.NoError(t, p.Synchronize())
	require.NoError(t, p.ForceSynchronize())
	require.NoError(t, p.DrainForUnmap())
	assert.Equal(t, x, download(t, p, c))
}

// TestSynchronizeComputeWaitsForTheComputeStream: a replay's output is complete once
// SynchronizeCompute returns, and the call is refused inside a capture.
func TestSynchronizeComputeWaitsForTheComputeStream(t *testing.T) {
	p := newProvider(t)
	xs := drivertest.RandomFloat32(1 << 16)
	x := upload(t, p, xs)
	y := alloc(t, p, x.Size())
	relu := getKernel(t, p, "Relu", 14, f32(1<<16))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 1<<16)}, []ep.Tensor{tensor(y, 1<<16)}))
	require.NoError(t, p.SynchronizeCompute())
	st, err := p.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, st)
	got := download(t, p, y)
	for i, v := range xs {
		require.Equal(t, max(v, 0), got[i], "element %d", i)
	}

	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{relu}, []*ep.Buffer{x, y}))
	assert.ErrorIs(t, p.SynchronizeCompute(), ep.ErrCaptureLive)
	require.NoError(t, p.AbortCapture(graphs.Primary))
	require.NoError(t, p.SynchronizeCompute())
}

// TestDrainInsideCaptureFails is the negative half of the seed's host-excursion test: the
// deferred Synchronize is a no-op inside a capture, but a real drain (or a host read) fails,
// and the capture is aborted cleanly afterwards.
func TestDrainInsideCaptureFails(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	relu := getKernel(t, p, "Relu", 13, f32(64))
	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{relu}, []*ep.Buffer{x, y}))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
	assert.NoError(t, p.Synchronize(), "the deferred synchronize is a no-op, not a capture barrier")
	status, err := p.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, ep.CaptureStatusActive, status)
	assert.True(t, p.CaptureLive())
	assert.ErrorIs(t, p.DrainForUnmap(), ep.ErrCaptureLive)
	assert.ErrorIs(t, p.CopyToHost(make([]byte, 4), y, 0), ep.ErrCaptureLive)
	_, err = p.ResetGraph(graphs.Primary)
	assert.Error(t, err, "reset during a live capture is refused")
	require.NoError(t, p.AbortCapture(graphs.Primary))
	status, err = p.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, ep.CaptureStatusNone, status)
	assert.False(t, p.CaptureLive())
	require.NoError(t, p.ForceSynchronize())
}

// TestReleasedBufferOutlivesTheGraphThatEmbedsIt: releasing a buffer that a captured graph
// embeds defers the free until the graph is gone.
func TestReleasedBufferOutlivesTheGraphThatEmbedsIt(t *testing.T) {
	p := newProvider(t)
	xs := drivertest.RandomFloat32(256)
	x := upload(t, p, xs)
	y, err := p.Alloc(x.Size(), 0)
	require.NoError(t, err)
	relu := getKernel(t, p, "Relu", 13, f32(256))
	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{relu}, []*ep.Buffer{x, y}))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 256)}, []ep.Tensor{tensor(y, 256)}))
	require.NoError(t, p.EndCapture(graphs.Primary))

	frees := p.Stats().Frees
	require.NoError(t, y.Release())
	assert.Equal(t, frees, p.Stats().Frees, "the graph still embeds y: it must not be freed yet")
	require.NoError(t, p.Replay(graphs.Primary)) // reads x, writes y's still-live memory
	require.NoError(t, p.ForceSynchronize())
	had, err := p.ResetGraph(graphs.Primary)
	require.NoError(t, err)
	assert.True(t, had)
	assert.Equal(t, frees+1, p.Stats().Frees, "y is freed once the graph is destroyed")
}

func TestGetKernelRefusesUnsupportedCombinations(t *testing.T) {
	p := newProvider(t)
	_, err := p.GetKernel(ep.Spec{Op: "Conv", Opset: 17, Inputs: []ep.TensorInfo{f32(1, 3, 8, 8)}})
	require.Error(t, err)
	assert.ErrorIs(t, err, kernels.ErrUnsupported)
	assert.Contains(t, err.Error(), "Conv")
	_, err = p.GetKernel(ep.Spec{Op: "MatMul", Opset: 13, Inputs: []ep.TensorInfo{f32(2, 3), f32(4, 5)}})
	assert.ErrorIs(t, err, kernels.ErrUnsupported)
}

// TestBackendIsReleasedWithItsLastProvider is issue 12's sixth gap: providers share their
// backend (so providers on one device share its capture gate), and the last one to close
// releases it and its device gates instead of keeping them for the process's life.
func TestBackendIsReleasedWithItsLastProvider(t *testing.T) {
	gates := graphs.GateCount()
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	a, err := ep.New(opts)
	require.NoError(t, err)
	b, err := ep.New(opts)
	require.NoError(t, err)
	assert.Same(t, ep.GateOf(a), ep.GateOf(b), "one device, one gate")
	assert.Equal(t, gates+1, graphs.GateCount())
	require.NoError(t, a.Close())
	assert.Equal(t, gates+1, graphs.GateCount(), "b still uses the device")
	require.NoError(t, b.Close())
	assert.Equal(t, gates, graphs.GateCount(), "the last provider released the backend's gates")
}

// TestCodeBesideAProviderSharesItsDriverAndContext: code that makes driver calls of its own
// beside a provider (a benchmark's raw baselines) acquires the process's shared driver by the
// provider's BackendName and retains the provider's own context, in which the provider's
// buffers are readable; when that code releases the driver last, the backend still closes and
// forgets its capture gates.
func TestCodeBesideAProviderSharesItsDriverAndContext(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gates := graphs.GateCount()
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	p, err := ep.New(opts)
	require.NoError(t, err)
	want := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	b, err := p.Alloc(uint64(len(want)), 0)
	require.NoError(t, err)
	require.NoError(t, p.CopyToDevice(b, 0, want))
	require.NoError(t, p.ForceSynchronize())

	drv, err := cudadrv.AcquireShared(p.BackendName(), nil, nil)
	require.NoError(t, err)
	dev, err := drv.Device(p.Device().Ordinal)
	require.NoError(t, err)
	ctx, err := dev.RetainPrimaryContext()
	require.NoError(t, err)
	assert.Equal(t, ep.ContextOf(p).Raw(), ctx.Raw(), "the provider's context")
	require.NoError(t, ctx.Bind())
	got := make([]byte, len(want))
	require.NoError(t, ctx.CopyDtoH(got, b.Ptr()))
	assert.Equal(t, want, got, "the provider's buffer, read with a raw driver call")

	require.NoError(t, b.Release())
	require.NoError(t, p.Close())
	assert.True(t, cudadrv.SharedOpen(p.BackendName()), "the raw code still holds the driver")
	require.NoError(t, ctx.Release())
	require.NoError(t, cudadrv.ReleaseShared(drv))
	assert.False(t, cudadrv.SharedOpen(p.BackendName()))
	assert.Equal(t, gates, graphs.GateCount(), "the last release forgot the backend's gates")
}
