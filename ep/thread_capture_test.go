package ep_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
)

// Issue 30, item 8: one capture window for every provider a thread touches. A thread-local
// capture is the OS thread's, so on the capturing thread a driver allocation, free, load, event
// or stream query made for any provider (of any device) invalidates it.

// captureOn begins a capture of y = relu(x) on a fresh pair of p's buffers, on the calling
// (locked) thread, and returns the buffers so that the test can end it and check the replay.
func captureOn(t *testing.T, p *ep.Provider) (x, y *ep.Buffer) {
	t.Helper()
	x = upload(t, p, drivertest.RandomFloat32(64))
	y = alloc(t, p, x.Size())
	captureRelu(t, p, graphs.Primary, x, y)
	return x, y
}

// endAndCheck ends p's capture, which must have survived, and checks that its graph replays.
func endAndCheck(t *testing.T, p *ep.Provider, x, y *ep.Buffer) {
	t.Helper()
	require.NoError(t, p.EndCapture(graphs.Primary), "nothing reached the driver, so the capture is intact")
	require.NoError(t, p.Replay(graphs.Primary))
	assert.Equal(t, reluOf(download(t, p, x)), download(t, p, y))
	_, err := p.ResetGraph(graphs.Primary)
	require.NoError(t, err)
}

// providerPairs runs f with a capturing provider p and another provider q, on the same device
// and (where the machine has two) on another device.
func providerPairs(t *testing.T, f func(t *testing.T, p, q *ep.Provider)) {
	t.Run("same device", func(t *testing.T) { f(t, newProvider(t), newProvider(t)) })
	t.Run("other device", func(t *testing.T) {
		ps := newProviders(t, 2, nil, sim.Options{})
		f(t, ps[0], ps[1])
	})
}

// TestCapturingThreadRefusesOtherProvidersBeforeTheDriver: with p capturing on this thread,
// every call on q that would touch the driver is refused with ErrThreadCaptures before it
// does (the simulator, like the driver, would fail cuMemAlloc with
// STREAM_CAPTURE_UNSUPPORTED and invalidate p's capture); the same calls from another thread
// run, and p's capture ends and replays.
func TestCapturingThreadRefusesOtherProvidersBeforeTheDriver(t *testing.T) {
	providerPairs(t, func(t *testing.T, p, q *ep.Provider) {
		qb := filled(t, q, 256, 3)
		qo := alloc(t, q, 256)
		qx := upload(t, q, drivertest.RandomFloat32(64))
		qy := alloc(t, q, qx.Size())
		qrelu := getKernel(t, q, "Relu", 14, f32(64))
		captureRelu(t, q, graphs.Primary, qx, qy)
		require.NoError(t, q.EndCapture(graphs.Primary))
		x, y := captureOn(t, p)
		allocs := calls(q, sim.OpMemAlloc)
		refused := map[string]error{
			"CopyToDevice":       q.CopyToDevice(qb, 0, pattern(16, 9)),
			"CopyToHost":         q.CopyToHost(make([]byte, 16), qb, 0),
			"Memset":             q.Memset(qb, 0, 16, 0x22),
			"CopyBuffer":         q.CopyBuffer(qo, 0, qb, 0, 16),
			"Execute":            qrelu.Execute([]ep.Tensor{tensor(qx, 64)}, []ep.Tensor{tensor(qy, 64)}),
			"SynchronizeCompute": q.SynchronizeCompute(),
			"ForceSynchronize":   q.ForceSynchronize(),
			"Replay":             q.Replay(graphs.Primary),
			"ReplaySegment":      q.ReplaySegment(graphs.Primary, 0),
			"BeginCapture":       q.BeginCapture(graphs.Verify, nil, nil),
		}
		_, refused["Alloc"] = q.Alloc(64, 0)
		_, refused["AllocPinned"] = q.AllocPinned(64)
		_, refused["ResetGraph"] = q.ResetGraph(graphs.Primary)
		_, refused["GetKernel"] = q.GetKernel(ep.Spec{Op: "Relu", Opset: 14, Inputs: []ep.TensorInfo{f32(8)}})
		_, refused["LoadUserModule"] = q.LoadUserModule([]byte(axpbPTX))
		_, refused["NewDoubleBuffer"] = q.NewDoubleBuffer(4096, paging.ModeStaging)
		_, refused["RecordFence"] = q.RecordFence()
		for name, err := range refused {
			assert.ErrorIs(t, err, ep.ErrThreadCaptures, name)
			assert.ErrorIs(t, err, ep.ErrCaptureLive, name)
			assert.Equal(t, ep.CodeWrongState, ep.Code(err), name)
			assert.ErrorContains(t, err, "inside a capture", name)
		}
		assert.Equal(t, allocs, calls(q, sim.OpMemAlloc), "no allocation reached the driver")

		onOtherThread(func() {
			// Another thread is not the capture's: q is not affected by p's capture.
			b, err := q.Alloc(64, 0)
			if assert.NoError(t, err) {
				assert.NoError(t, b.Release())
			}
			assert.NoError(t, q.CopyToDevice(qb, 0, pattern(16, 9)))
			assert.NoError(t, q.Replay(graphs.Primary))
			assert.NoError(t, q.SynchronizeCompute())
		})
		endAndCheck(t, p, x, y)

		b, err := q.Alloc(64, 0)
		require.NoError(t, err, "the capture ended: q works on this thread again")
		require.NoError(t, b.Release())
		assert.Equal(t, pattern(16, 9), readBack(t, q, qb)[:16])
	})
}

// TestReleasesOnOtherProvidersWaitForTheThreadsCapture: releases on q from the thread that
// captures for p succeed at once (a second one says released) and give their memory back when
// p's capture ends; a Close of q on that thread closes q at once and tears it down then.
func TestReleasesOnOtherProvidersWaitForTheThreadsCapture(t *testing.T) {
	providerPairs(t, func(t *testing.T, p, q *ep.Provider) {
		qb, err := q.Alloc(4096, 0)
		require.NoError(t, err)
		mod, err := q.LoadUserModule([]byte(axpbPTX))
		require.NoError(t, err)
		db, err := q.NewDoubleBuffer(4096, paging.ModeStaging)
		require.NoError(t, err)
		frees := q.Stats().Frees
		deferred := q.DeferredReleases()

		x, y := captureOn(t, p)
		require.NoError(t, qb.Release(), "a release on another provider succeeds")
		assert.ErrorIs(t, qb.Release(), ep.ErrReleased, "and is done at once")
		require.NoError(t, mod.Unload())
		require.NoError(t, db.Close())
		assert.Equal(t, frees, q.Stats().Frees, "nothing is freed while the thread captures")
		assert.Equal(t, deferred+3, q.DeferredReleases())
		endAndCheck(t, p, x, y)
		assert.Greater(t, q.Stats().Frees, frees, "the deferred frees ran when the capture ended")

		// Closing q on the capturing thread: closed at once, torn down when the capture ends.
		x, y = captureOn(t, p)
		streams := -1
		if d := simOf(q); d != nil {
			streams = d.Stats().Streams
		}
		require.NoError(t, q.Close())
		_, err = q.Alloc(64, 0)
		assert.ErrorIs(t, err, ep.ErrClosed)
		if d := simOf(q); d != nil {
			assert.Equal(t, streams, d.Stats().Streams, "q's streams live until the capture ends")
		}
		endAndCheck(t, p, x, y)
		if d := simOf(q); d != nil {
			assert.Equal(t, streams-2, d.Stats().Streams, "q (its compute and copy streams) was torn down when the capture ended")
		}
		n, last := q.DeferredFailures()
		assert.Zero(t, n, "%v", last)
	})
}

// TestArgumentErrorsComeBeforeTheCaptureWindow: during a capture, on the capturing thread, on
// another thread, and on a thread that captures for another provider, an argument error is
// reported as one (CloseExternalData of a mapping that is not open was WRONG_STATE).
func TestArgumentErrorsComeBeforeTheCaptureWindow(t *testing.T) {
	p := newProvider(t)
	q := newProvider(t)
	path, _ := patternLayers(t, 2, 4096)
	ws := byteWeights(t, p, path, 2, 4096)
	db, err := p.NewDoubleBuffer(1024, paging.ModeStaging)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	relu := getKernel(t, p, "Relu", 14, f32(64))
	xs := upload(t, p, drivertest.RandomFloat32(64))
	nz := getKernel(t, p, "NonZero", 13, f32(64))
	count := alloc(t, p, 16)
	installed := graphs.Keyed(1) // a slot the checks' own captures do not reset
	captureRelu(t, p, installed, xs, alloc(t, p, xs.Size()))
	require.NoError(t, p.EndCapture(installed))

	check := func(t *testing.T, who string) {
		err := p.CloseExternalData(999)
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: CloseExternalData(999): %v", who, err)
		assert.ErrorContains(t, err, "unknown mapping")
		_, err = p.NewDoubleBuffer(0, paging.ModeStaging)
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: NewDoubleBuffer(0): %v", who, err)
		_, err = p.NewDoubleBuffer(4096, paging.TransferMode(99))
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: NewDoubleBuffer(mode 99): %v", who, err)
		_, err = p.NewDoubleBuffer(1<<62, paging.ModeStaging)
		assert.Equal(t, ep.CodeDeclined, ep.Code(err), "%s: NewDoubleBuffer(2^62): %v", who, err)
		_, err = db.Prefetch(0, ws[0])
		var lse *paging.LayerSizeError
		assert.ErrorAs(t, err, &lse, "%s: a layer larger than the slots", who)
		_, err = p.PrefetchWeight(0, nil)
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: PrefetchWeight(nil): %v", who, err)
		err = relu.Execute([]ep.Tensor{tensor(xs, 32)}, []ep.Tensor{tensor(xs, 64)})
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: Execute with a wrong shape: %v", who, err)
		_, err = nz.NonZeroCount(ep.Tensor{TensorInfo: f32(1), Ptr: count.Ptr()})
		assert.Equal(t, ep.CodeInvalidArgument, ep.Code(err), "%s: NonZeroCount of a float32 count: %v", who, err)
		err = p.ReplaySegment(installed, 5)
		assert.ErrorIs(t, err, graphs.ErrSegmentIndex, "%s: ReplaySegment past the segments", who)
		// And the state errors still come when the arguments are right.
		assert.Equal(t, ep.CodeWrongState, ep.Code(p.ReplaySegment(installed, 0)), who)
	}
	x, y := captureOn(t, p)
	check(t, "capturing thread")
	onOtherThread(func() { check(t, "another thread") })
	endAndCheck(t, p, x, y)

	x, y = captureOn(t, q)
	check(t, "a thread capturing for another provider")
	endAndCheck(t, q, x, y)
}

// TestCancelThatCannotSucceedIsRefusedAtTheCall: during a capture, CancelWeight of a layer that
// is not pending returned OK and its failure surfaced after the capture in an unrelated call
// (a buffer's release, the provider's Close). It is refused at the call, with nothing deferred;
// a cancel that can succeed does (the layer is no longer pending at once), and nothing deferred
// fails afterwards.
func TestCancelThatCannotSucceedIsRefusedAtTheCall(t *testing.T) {
	p := newProvider(t, func(o *ep.Options) { o.PrefillDoubleBuffer = true })
	path, layers := patternLayers(t, 3, 4096)
	ws := byteWeights(t, p, path, 3, 4096)
	for layer := range 2 {
		d, err := p.PrefetchWeight(ep.LayerID(layer), ws[layer])
		require.NoError(t, err)
		require.Equal(t, ep.DeclineNone, d.Reason)
	}
	spare := alloc(t, p, 64)
	deferred := p.DeferredReleases()

	x, y := captureOn(t, p)
	err := p.CancelWeight(7)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched, "a layer that is not pending is refused at the call")
	assert.Equal(t, ep.CodeWrongState, ep.Code(err))
	assert.Equal(t, deferred, p.DeferredReleases(), "nothing was deferred for it")
	require.NoError(t, p.CancelWeight(0), "a pending layer is cancelled during the capture")
	assert.ErrorIs(t, p.CancelWeight(0), paging.ErrNotPrefetched, "and is not pending any more")
	pw, err := func() (*ep.PagedWeight, error) {
		var pw *ep.PagedWeight
		var err error
		onOtherThread(func() { pw, err = p.PageWeight(1) })
		return pw, err
	}()
	assert.Nil(t, pw)
	assert.ErrorIs(t, err, ep.ErrCaptureLive, "paging touches the device: refused")
	endAndCheck(t, p, x, y)

	require.NoError(t, spare.Release(), "an unrelated release reports nothing deferred")
	n, last := p.DeferredFailures()
	assert.Zero(t, n, "%v", last)
	_, err = p.PageWeight(0)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched, "the cancelled layer stays cancelled")

	// The cancelled slot takes layer 2 once its fence was recorded at the capture's end.
	d, err := p.PrefetchWeight(2, ws[2])
	require.NoError(t, err)
	require.Equal(t, ep.DeclineNone, d.Reason, "the cancelled slot is reusable: %v", d)
	for _, layer := range []int{1, 2} {
		pw, err := p.PageWeight(ep.LayerID(layer))
		require.NoError(t, err)
		assert.Equal(t, layers[layer], readView(t, p, ep.SlotView{Ptr: pw.Ptr(), Len: pw.Len()}), "layer %d", layer)
		require.NoError(t, p.ReleasePagedWeight(pw))
	}

	// A paged weight released twice during a capture: the second is refused at the call.
	d, err = p.PrefetchWeight(0, ws[0])
	require.NoError(t, err)
	require.Equal(t, ep.DeclineNone, d.Reason)
	pw, err = p.PageWeight(0)
	require.NoError(t, err)
	x, y = captureOn(t, p)
	require.NoError(t, p.ReleasePagedWeight(pw))
	assert.ErrorIs(t, p.ReleasePagedWeight(pw), paging.ErrReleased)
	endAndCheck(t, p, x, y)
	n, last = p.DeferredFailures()
	assert.Zero(t, n, "%v", last)
}

// TestDoubleBufferCancelDuringACaptureSucceeds: the header says cancels succeed during a
// capture; DoubleBuffer.Cancel was refused with WRONG_STATE. On the capturing thread and on
// another one it now succeeds, is checked at the call (a second cancel is refused), and the
// slots are reusable once the capture ended.
func TestDoubleBufferCancelDuringACaptureSucceeds(t *testing.T) {
	p := newProvider(t)
	path, layers := patternLayers(t, 4, 4096)
	ws := byteWeights(t, p, path, 4, 4096)
	db, err := p.NewDoubleBuffer(4096, paging.ModeStaging)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	a, err := db.Prefetch(0, ws[0])
	require.NoError(t, err)
	b, err := db.Prefetch(1, ws[1])
	require.NoError(t, err)
	_, err = db.Wait(a)
	require.NoError(t, err)

	x, y := captureOn(t, p)
	require.NoError(t, db.Cancel(a), "on the capturing thread")
	var se *paging.SlotStateError
	assert.ErrorAs(t, db.Cancel(a), &se, "a second cancel is refused at the call")
	onOtherThread(func() { assert.NoError(t, db.Cancel(b), "on another thread") })
	assert.Equal(t, paging.SlotDraining, db.SlotState(a.Slot()))
	assert.Equal(t, paging.SlotDraining, db.SlotState(b.Slot()))
	assert.Zero(t, db.Quarantined())
	endAndCheck(t, p, x, y)

	assert.Equal(t, uint64(2), db.Metrics().Cancelled)
	for layer := 2; layer < 4; layer++ {
		tk, err := db.Prefetch(ep.LayerID(layer), ws[layer])
		require.NoError(t, err, "layer %d: the cancelled slots are reusable", layer)
		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, layers[layer], readView(t, p, v), "layer %d", layer)
		require.NoError(t, db.Release(tk))
	}
}

// TestOtherProvidersDoubleBufferFromACapturingThread: q's double buffer waited on or released
// from the thread that captures for p made an event query there (CUDA_ERROR from
// cuEventQuery), quarantined the slot and invalidated p's capture. On the capturing thread such
// calls are refused before the driver, a slot's state is reported without querying, and from
// another thread the same calls work (they synchronize nothing p's capture depends on).
func TestOtherProvidersDoubleBufferFromACapturingThread(t *testing.T) {
	providerPairs(t, func(t *testing.T, p, q *ep.Provider) {
		path, layers := patternLayers(t, 3, 4096)
		qws := byteWeights(t, q, path, 3, 4096)
		pws := byteWeights(t, p, path, 1, 4096)
		qdb, err := q.NewDoubleBuffer(4096, paging.ModeStaging)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, qdb.Close()) })
		pdb, err := p.NewDoubleBuffer(4096, paging.ModeStaging)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, pdb.Close()) })
		qt, err := qdb.Prefetch(0, qws[0])
		require.NoError(t, err)
		pt, err := pdb.Prefetch(0, pws[0])
		require.NoError(t, err)
		queries := calls(q, sim.OpEventQuery) + calls(p, sim.OpEventQuery)

		x, y := captureOn(t, p)
		_, err = qdb.Wait(qt)
		assert.ErrorIs(t, err, ep.ErrThreadCaptures, "Wait")
		assert.ErrorIs(t, qdb.Release(qt), ep.ErrThreadCaptures, "Release")
		_, err = qdb.Prefetch(1, qws[1])
		assert.ErrorIs(t, err, ep.ErrThreadCaptures, "Prefetch")
		_, err = qdb.Recover()
		assert.ErrorIs(t, err, ep.ErrThreadCaptures, "Recover")
		for _, s := range []ep.SlotState{qdb.SlotState(qt.Slot()), pdb.SlotState(pt.Slot())} {
			assert.Equal(t, paging.SlotFilling, s, "reported as last seen, without an event query")
		}
		assert.Equal(t, queries, calls(q, sim.OpEventQuery)+calls(p, sim.OpEventQuery), "no event query on the capturing thread")
		assert.Zero(t, qdb.Quarantined()+pdb.Quarantined(), "nothing quarantined")

		onOtherThread(func() {
			v, err := qdb.Wait(qt)
			if assert.NoError(t, err, "another thread may wait") {
				assert.NoError(t, qdb.Release(qt), "and release")
				_ = v
			}
			_, err = pdb.Wait(pt)
			assert.ErrorIs(t, err, ep.ErrCaptureLive, "p's own double buffer follows p's window")
		})
		endAndCheck(t, p, x, y)

		tk, err := qdb.Prefetch(1, qws[1])
		require.NoError(t, err)
		v, err := qdb.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, layers[1], readView(t, q, v))
		require.NoError(t, qdb.Release(tk))
		require.NoError(t, pdb.Cancel(pt))
	})
}

// TestSmallStagingCapAdmitsSlotsOfWholePages: staging_pool_cap_bytes=64KiB declined a 64-byte
// staging double buffer ("two staging buffers exceed the pinned pool's retention cap of 65536
// bytes") because each buffer was counted at the pool's 64 KiB reuse granule. Two buffers of
// whole host pages under the cap are admitted; a decline names the rounded sizes.
func TestSmallStagingCapAdmitsSlotsOfWholePages(t *testing.T) {
	p := newProvider(t, func(o *ep.Options) { o.StagingPoolCapBytes = 64 << 10 })
	for _, size := range []uint64{64, 4096, 32 << 10} {
		db, err := p.NewDoubleBuffer(size, paging.ModeStaging)
		require.NoError(t, err, "slots of %d bytes under a 64 KiB cap", size)
		require.NoError(t, db.Close())
	}
	_, err := p.NewDoubleBuffer(32<<10+1, paging.ModeStaging)
	assert.Equal(t, ep.CodeDeclined, ep.Code(err))
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	assert.ErrorContains(t, err, fmt.Sprintf("(%d rounded up to whole %d-byte host pages) exceed the pinned pool's retention cap of 65536 bytes", 32<<10+1, pc.PageBytes))
}

// TestEnteringTheWindowAllocatesNothingWhileAnotherThreadCaptures: while any thread of the
// process captures, every entry point looks the calling thread up in the registry of capturing
// threads; the lookup must cost no allocation (replay's hot path relies on it).
func TestEnteringTheWindowAllocatesNothingWhileAnotherThreadCaptures(t *testing.T) {
	p := newProvider(t)
	q := newProvider(t)
	b := alloc(t, p, 64)
	began, stop, done := make(chan error), make(chan struct{}), make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		began <- q.BeginCapture(graphs.Primary, nil, nil)
		<-stop
		done <- q.AbortCapture(graphs.Primary)
	}()
	require.NoError(t, <-began)
	defer func() {
		close(stop)
		require.NoError(t, <-done)
	}()
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
