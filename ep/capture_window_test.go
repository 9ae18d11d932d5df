package ep_test

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
)

// onOtherThread runs f on a fresh goroutine locked to its own OS thread and waits for it.
func onOtherThread(f func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
	}()
	wg.Wait()
}

// captureRelu begins a capture of y = relu(x) in slot on the calling (locked) thread.
func captureRelu(t *testing.T, p *ep.Provider, slot ep.Slot, x, y *ep.Buffer) {
	t.Helper()
	relu := getKernel(t, p, "Relu", 14, f32(64))
	require.NoError(t, p.BeginCapture(slot, []*ep.Kernel{relu}, []*ep.Buffer{x, y}))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
}

// TestOtherThreadsWorkIsRefusedNotRecorded is issue 11's items 2 and 3: while one thread
// captures, stream work from another thread is refused with ErrCaptureLive before it reaches
// the driver. Before the window, a Memset from another thread returned OK, did nothing, and
// then ran inside every replay.
func TestOtherThreadsWorkIsRefusedNotRecorded(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	b := alloc(t, p, 256)
	other := alloc(t, p, 256)
	require.NoError(t, p.Memset(b, 0, 256, 0x11))
	relu := getKernel(t, p, "Relu", 14, f32(64))
	require.NoError(t, p.BeginCapture(graphs.Primary, []*ep.Kernel{relu}, []*ep.Buffer{x, y, b}))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
	onOtherThread(func() {
		calls := map[string]error{
			"Memset":             p.Memset(b, 0, 256, 0x22),
			"CopyBuffer":         p.CopyBuffer(b, 0, other, 0, 256),
			"Execute":            relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}),
			"CopyToDevice":       p.CopyToDevice(b, 0, make([]byte, 4)),
			"CopyToHost":         p.CopyToHost(make([]byte, 4), b, 0),
			"SynchronizeCompute": p.SynchronizeCompute(),
			"Replay":             p.Replay(graphs.Verify),
		}
		_, err := p.Alloc(64, 0)
		calls["Alloc"] = err
		_, err = p.ResetGraph(graphs.Verify)
		calls["ResetGraph"] = err
		for name, err := range calls {
			assert.ErrorIs(t, err, ep.ErrCaptureLive, name)
			assert.ErrorContains(t, err, "captures on the provider's stream", name)
		}
	})
	require.NoError(t, p.EndCapture(graphs.Primary), "the refusals left the capture intact")
	require.NoError(t, p.Replay(graphs.Primary))
	got := make([]byte, 256)
	require.NoError(t, p.CopyToHost(got, b, 0))
	for i, v := range got {
		require.Equal(t, byte(0x11), v, "byte %d: another thread's memset ran inside the replay", i)
	}
}

// TestHostCopiesAreAtomicWithBeginCapture is item 2 under stress: a thread copying to and from
// the device while another captures, ends and resets never gets a driver error and never
// invalidates the capture; each copy either completes or is refused with ErrCaptureLive.
func TestHostCopiesAreAtomicWithBeginCapture(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	b := alloc(t, p, 4096)
	pattern := make([]byte, 4096)
	for i := range pattern {
		pattern[i] = byte(i%251) + 1
	}
	stop := make(chan struct{})
	var copies, refused atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		got := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, err := range []error{p.CopyToDevice(b, 0, pattern), p.CopyToHost(got, b, 0)} {
				if err == nil {
					copies.Add(1)
					continue
				}
				refused.Add(1)
				if !assert.ErrorIs(t, err, ep.ErrCaptureLive) {
					return
				}
			}
		}
	}()
	// Counts, not time: at least 50 capture rounds, and go on until the copier has had 200 copies
	// through between them (under load it can be refused hundreds of times in a row).
	for rounds := 0; rounds < 50 || copies.Load() < 200; rounds++ {
		captureRelu(t, p, graphs.Primary, x, y)
		require.NoError(t, p.EndCapture(graphs.Primary))
		_, err := p.ResetGraph(graphs.Primary)
		require.NoError(t, err)
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d copies done, %d refused during captures", copies.Load(), refused.Load())
}

// TestCapturingThreadDriverCallsAreRefusedBeforeTheDriver is item 5: on the capturing thread,
// calls that would allocate, load, wait or query are refused with ErrCaptureLive without
// touching the driver, so the capture still ends and installs; argument errors come first.
func TestCapturingThreadDriverCallsAreRefusedBeforeTheDriver(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	captureRelu(t, p, graphs.Primary, x, y)
	_, err := p.Alloc(64, 0)
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	assert.ErrorContains(t, err, "on the capturing thread")
	_, err = p.Alloc(math.MaxUint64, 0)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument, "an impossible size is an argument error, whatever the state")
	_, err = p.LoadUserModule([]byte(axpbPTX))
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	_, err = p.NewDoubleBuffer(4096, paging.ModeStaging)
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	_, err = p.GetKernel(ep.Spec{Op: "Relu", Opset: 14, Inputs: []ep.TensorInfo{f32(8)}})
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	assert.ErrorIs(t, p.ForceSynchronize(), ep.ErrCaptureLive)
	assert.ErrorIs(t, p.SynchronizeCompute(), ep.ErrCaptureLive)
	assert.ErrorIs(t, p.Replay(graphs.Primary), ep.ErrCaptureLive)
	require.NoError(t, p.EndCapture(graphs.Primary), "no refusal reached the driver, so the capture is intact")
	require.NoError(t, p.Replay(graphs.Primary))
	assert.Equal(t, reluOf(download(t, p, x)), download(t, p, y))
}

func reluOf(xs []float32) []float32 {
	out := make([]float32, len(xs))
	for i, v := range xs {
		out[i] = max(v, 0)
	}
	return out
}

// TestReleasesDuringACaptureAreDeferredNotFailed is item 6: a release during a capture succeeds
// (the handle is gone at once) and its driver work runs when the capture ends; a provider with
// a live capture refuses to close and stays usable.
func TestReleasesDuringACaptureAreDeferredNotFailed(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	spare, err := p.Alloc(4096, 0)
	require.NoError(t, err)
	db, err := p.NewDoubleBuffer(4096, paging.ModeStaging)
	require.NoError(t, err)
	frees := p.Stats().Frees
	deferred := p.DeferredReleases()

	captureRelu(t, p, graphs.Primary, x, y)
	require.NoError(t, spare.Release(), "a release during a capture succeeds")
	assert.ErrorIs(t, spare.Release(), ep.ErrReleased, "and is done: a second one says so")
	require.NoError(t, db.Close())
	onOtherThread(func() { assert.ErrorIs(t, p.Close(), ep.ErrCaptureLive) })
	assert.Equal(t, frees, p.Stats().Frees, "nothing is freed while the capture is live")
	assert.Equal(t, deferred+2, p.DeferredReleases())

	require.NoError(t, p.EndCapture(graphs.Primary))
	assert.Greater(t, p.Stats().Frees, frees, "the deferred frees ran when the capture ended")
	require.NoError(t, p.Replay(graphs.Primary), "the refused Close left the provider open")
	assert.Equal(t, reluOf(download(t, p, x)), download(t, p, y))
}

// TestResetIsRefusedDuringAnyCapture is item 7: ResetGraph while another slot captures is
// refused with ErrCaptureLive, whether the slot it names holds a graph or not.
func TestResetIsRefusedDuringAnyCapture(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	captureRelu(t, p, graphs.Primary, x, y)
	require.NoError(t, p.EndCapture(graphs.Primary))
	captureRelu(t, p, graphs.Verify, x, y)
	for _, slot := range []ep.Slot{graphs.Primary, graphs.Keyed(9), graphs.Verify} {
		_, err := p.ResetGraph(slot)
		assert.ErrorIs(t, err, ep.ErrCaptureLive, "%v", slot)
	}
	require.NoError(t, p.AbortCapture(graphs.Verify))
	had, err := p.ResetGraph(graphs.Primary)
	require.NoError(t, err)
	assert.True(t, had)
}

// TestMisalignedTensorIsRefusedBeforeTheDevice is item 8: a float32 tensor at an odd byte
// offset is an argument error, and the provider works afterwards (a device fault would be
// sticky and poison every provider of the device).
func TestMisalignedTensorIsRefusedBeforeTheDevice(t *testing.T) {
	p := newProvider(t)
	xs := drivertest.RandomFloat32(64)
	x := upload(t, p, xs)
	y := alloc(t, p, x.Size()+4)
	relu := getKernel(t, p, "Relu", 14, f32(63))
	in := ep.Tensor{TensorInfo: f32(63), Ptr: x.Ptr() + 3}
	err := relu.Execute([]ep.Tensor{in}, []ep.Tensor{tensor(y, 63)})
	assert.ErrorIs(t, err, kernels.ErrTensorMismatch)
	assert.ErrorContains(t, err, "not aligned to its 4-byte float32 elements")
	out := ep.Tensor{TensorInfo: f32(63), Ptr: y.Ptr() + 2}
	assert.ErrorIs(t, relu.Execute([]ep.Tensor{tensor(x, 63)}, []ep.Tensor{out}), kernels.ErrTensorMismatch)
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 63)}, []ep.Tensor{tensor(y, 63)}))
	assert.Equal(t, reluOf(xs[:63]), download(t, p, y)[:63])
}

// TestProvidersOnOneDeviceShareTheCaptureGate is item 4: provider A's device drain during
// provider B's capture on the same device waits for the capture to end instead of
// invalidating it.
func TestProvidersOnOneDeviceShareTheCaptureGate(t *testing.T) {
	a := newProvider(t)
	b := newProvider(t)
	x := upload(t, b, drivertest.RandomFloat32(64))
	y := alloc(t, b, x.Size())
	captureRelu(t, b, graphs.Primary, x, y)
	drained := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		drained <- a.ForceSynchronize()
	}()
	gate := ep.GateOf(a)
	waiting := false
	for !waiting {
		select {
		case err := <-drained:
			drained <- err
			waiting = true // A did not wait: End below shows whether it broke the capture
		default:
			waiting = gate.WaitingDrains() > 0
			runtime.Gosched()
		}
	}
	require.NoError(t, b.EndCapture(graphs.Primary), "A's drain must not invalidate B's capture")
	require.NoError(t, <-drained)
	require.NoError(t, b.Replay(graphs.Primary))
	assert.Equal(t, reluOf(download(t, b, x)), download(t, b, y))
}

// TestEnteringTheWindowAllocatesNothing: every entry point passes through the window, so its
// shared hold must cost no allocation (the replay hot path relies on it), with the bind
// (a Memset of zero bytes enters, binds and queues nothing) or without (Synchronize).
func TestEnteringTheWindowAllocatesNothing(t *testing.T) {
	p := newProvider(t)
	b := alloc(t, p, 64)
	for name, call := range map[string]func() error{
		"unbound": p.Synchronize,
		"bound":   func() error { return p.Memset(b, 0, 0, 1) },
	} {
		require.NoError(t, call())
		allocs := testing.AllocsPerRun(1000, func() {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, name)
	}
}

// TestRemoveGraphMakesRoomForNewKeys is issue 12's third gap: after the bound of keyed slots is
// reached a new key fails, and removing one makes room; Primary and Verify cannot be removed.
func TestRemoveGraphMakesRoomForNewKeys(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	key := int64(0)
	for ; ; key++ {
		_, err := p.GraphStats(ep.Keyed(key)) // does not create the slot
		require.NoError(t, err)
		relu := getKernel(t, p, "Relu", 14, f32(64))
		err = p.BeginCapture(ep.Keyed(key), []*ep.Kernel{relu}, []*ep.Buffer{x, y})
		if err != nil {
			assert.ErrorIs(t, err, graphs.ErrTooManySlots)
			assert.Equal(t, ep.CodeOutOfMemory, ep.Code(err))
			break
		}
		require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
		require.NoError(t, p.EndCapture(ep.Keyed(key)))
		require.Less(t, key, int64(1000), "no bound on keyed slots")
	}
	require.NoError(t, p.RemoveGraph(ep.Keyed(3)))
	assert.False(t, p.HasExecutable(ep.Keyed(3)))
	assert.NotContains(t, p.GraphKeys(), int64(3))
	require.NoError(t, p.RemoveGraph(ep.Keyed(3)), "removing a key not held does nothing")
	captureRelu(t, p, ep.Keyed(key), x, y)
	require.NoError(t, p.EndCapture(ep.Keyed(key)), "the removed slot made room")
	require.NoError(t, p.Replay(ep.Keyed(key)))
	assert.ErrorIs(t, p.RemoveGraph(ep.Primary), ep.ErrInvalidArgument)
	assert.ErrorIs(t, p.RemoveGraph(ep.Verify), ep.ErrInvalidArgument)
}
