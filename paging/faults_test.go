package paging_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
)

// Fault handling: injected driver failures (sim), cancellation mid-transfer, truncated files,
// and leaks.

func needSim(t *testing.T, r *rig, why string) {
	t.Helper()
	if r.env.Sim == nil {
		t.Skip("needs the simulated device: " + why)
	}
}

// live is the part of the counters that must return to its baseline once pipelines are
// closed: device and registered bytes, and pinned bytes other than those the staging pool
// retains for the next pipeline (and none handed out).
func (r *rig) live(t *testing.T) [3]uint64 {
	t.Helper()
	c, ps := r.ctx.Counters(), r.pool.Stats()
	assert.Zero(t, ps.InUseBytes, "no staging buffer still acquired")
	assert.Equal(t, c.RegisteredLiveBytes, ps.Registered.Bytes, "every registration is the pool's")
	// Idle registrations are kept for the next prefill (until their file closes): only those
	// a copy may still read would be a leak.
	return [3]uint64{c.DeviceLiveBytes, c.PinnedLiveBytes - ps.RetainedBytes, ps.Registered.InUse}
}

// An injected H2D failure quarantines its slot; the pipeline keeps serving with the other.
func TestInjectedH2DFailureQuarantinesSlot(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		needSim(t, r, "fault injection")
		l := writeLayered(t, mib, 2, 4, 0)
		baseline := r.live(t)
		db := pipelineOver(t, r.transferWith(t, paging.CUDATransferConfig{
			Mode: mode, RegisterChunkBytes: mib, StagingChunkBytes: 512 << 10,
		}), 2*mib)

		r.env.Sim.InjectFault(sim.OpMemcpyHtoDAsync, 2, cudadrv.ErrorInvalidValue) // mid-layer
		_, err := db.Prefetch(0, l.weights[0], l.src)
		var fe *paging.FillError
		require.ErrorAs(t, err, &fe)
		var ce *cudadrv.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, sim.OpMemcpyHtoDAsync, ce.Op)
		assert.Equal(t, 1, db.Quarantined())
		assert.Equal(t, paging.SlotQuarantined, db.SlotState(fe.Slot))

		for layer := 1; layer < 4; layer++ {
			tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
			require.NoError(t, err, "the pipeline keeps serving with the other slot")
			assert.NotEqual(t, fe.Slot, tk.Slot())
			v, err := db.Wait(tk)
			require.NoError(t, err)
			assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len))
			require.NoError(t, db.Release(tk))
		}
		assert.Equal(t, uint64(1), db.Metrics().Poisoned)
		require.NoError(t, db.Close())
		assert.Equal(t, baseline, r.live(t), "nothing leaks, quarantined slot included")
	})
}

func TestInjectedH2DFailureThroughResidency(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	needSim(t, r, "fault injection")
	l := writeLayered(t, mib, 1, 3, 0)
	res := r.residency(t, 0, paging.GateOn, paging.ModeStaging)
	r.env.Sim.InjectFault(sim.OpMemcpyHtoDAsync, 1, cudadrv.ErrorInvalidValue)
	d, err := res.Prefetch(0, l.weights[0], l.src)
	assert.ErrorIs(t, err, paging.ErrQuarantined)
	assert.False(t, d.Declined(), "a failed fill is an error, not a decline")
	_, err = res.Page(0)
	assert.ErrorIs(t, err, paging.ErrNotPrefetched)
	for layer := 1; layer < 3; layer++ {
		requireRouted(t)(res.Prefetch(paging.LayerID(layer), l.weights[layer], l.src))
		p, err := res.Page(paging.LayerID(layer))
		require.NoError(t, err)
		assertPaged(t, r, p, l.src, l.weights[layer])
		require.NoError(t, p.Release())
	}
	st, _ := res.Stats()
	assert.Equal(t, 1, st.Quarantined)
	assert.Equal(t, uint64(1), st.FillErrors)
	assert.Equal(t, uint64(2), st.Consumed)
}

// An injected registration failure falls back to staging, at the first chunk or mid-layer, and
// the bytes are still exact; later layers go zero-copy again.
func TestInjectedRegistrationFailureFallsBackToStaging(t *testing.T) {
	for _, nth := range []int{1, 3} {
		t.Run([]string{1: "first chunk", 3: "mid-layer"}[nth], func(t *testing.T) {
			r := newRig(t, sim.Options{}, 0)
			needSim(t, r, "fault injection")
			l := writeLayered(t, 2*mib, 2, 2, 0)
			db := pipelineOver(t, r.transferWith(t, paging.CUDATransferConfig{
				Mode: paging.ModeZeroCopy, RegisterChunkBytes: mib, StagingChunkBytes: 512 << 10,
			}), 4*mib)
			r.env.Sim.InjectFault(sim.OpMemHostRegister, nth, cudadrv.ErrorNotPermitted)
			for layer, want := range []paging.Path{paging.PathFallback, paging.PathZeroCopy} {
				tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
				require.NoError(t, err, "a registration error is never a failed fill")
				v, err := db.Wait(tk)
				require.NoError(t, err)
				assert.Equal(t, want, v.Path, "layer %d", layer)
				assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len))
				require.NoError(t, db.Release(tk))
			}
			m := db.Metrics()
			assert.Equal(t, uint64(1), m.FallbackLayers)
			assert.Equal(t, uint64(1), m.ZeroCopyLayers)
			require.NotNil(t, m.LastFallback, "the fallback's reason is kept")
			assert.Equal(t, paging.LayerID(0), m.LastFallback.Layer)
			assert.Contains(t, m.LastFallback.Reason, "CUDA_ERROR_NOT_PERMITTED")
			assert.Zero(t, db.Quarantined())
			tm := db.Transfer().(*paging.CUDATransfer).Metrics()
			assert.Equal(t, uint64(1), tm.RegistrationFailures)
			// Chunks are aligned to file offsets: the first ends at 1 MiB, after the prefix.
			zeroCopied := uint64(0)
			if nth > 1 {
				zeroCopied = uint64((nth-1)*mib - prefix)
			}
			assert.Equal(t, 4*mib-zeroCopied, tm.StagedBytes, "staging takes over where registration failed")
			assert.Equal(t, 4*mib+zeroCopied, tm.ZeroCopyBytes)
			require.NoError(t, db.Close())
			assert.NotZero(t, r.ctx.Counters().RegisteredLiveBytes, "kept for the next prefill")
			require.NoError(t, l.src.Close(l.id))
			assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes, "undone when the file closes")
		})
	}
}

// Cancelling layers whose copies are still in flight (held there behind a closed gate on the
// copy stream) frees their slots without quarantine; the reused slot pages the new layer
// exactly and nothing leaks.
func TestCancelMidTransfer(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 3, 0)
		r.kernels(t) // before the baseline: the gates' words stay allocated to the end
		baseline := r.live(t)
		db := r.pipeline(t, mib, mode)

		gate := r.gate(t, r.copy)
		first, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		second, err := db.Prefetch(1, l.weights[1], l.src)
		require.NoError(t, err)
		busy, err := r.copy.Query()
		require.NoError(t, err)
		require.False(t, busy, "the copies are in flight")
		assert.Equal(t, paging.SlotFilling, db.SlotState(first.Slot()))
		assert.Equal(t, paging.SlotFilling, db.SlotState(second.Slot()))

		require.NoError(t, db.Cancel(first))
		require.NoError(t, db.Cancel(second))
		assert.Equal(t, paging.SlotDraining, db.SlotState(first.Slot()))
		assert.Zero(t, db.Quarantined(), "cancel mid-transfer does not quarantine")
		assert.Equal(t, uint64(2), db.Metrics().Cancelled)

		// Staging reuses the slot's staging buffer, which waits for the abandoned copy.
		require.NoError(t, gate.Open())
		reuse, err := db.Prefetch(2, l.weights[2], l.src)
		require.NoError(t, err)
		assert.Equal(t, first.Slot(), reuse.Slot(), "the slot cancelled first is reused first")
		v, err := db.Wait(reuse)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[2]), r.readback(t, v.Ptr, v.Len),
			"the reused slot holds the new layer, never the cancelled copy")
		require.NoError(t, db.Release(reuse))
		require.NoError(t, db.Close())
		assert.Equal(t, baseline, r.live(t))
	})
}

// A truncated external-data file is a clear error before any device work, through the
// pipeline and through the residency (which then builds nothing).
func TestTruncatedExternalDataFailsBeforeDeviceWork(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 1, 2, 0)
	require.NoError(t, os.Truncate(l.path, prefix+mib+10))

	before := r.ctx.Counters()
	res := r.residency(t, 0, paging.GateOn, paging.ModeZeroCopy)
	_, err := res.Prefetch(1, l.weights[1], l.src)
	var te *paging.TruncatedError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, err.Error(), l.path)
	assert.False(t, res.Active(), "no pipeline built for a layer that cannot be read")
	assert.Equal(t, before, r.ctx.Counters(), "no device work")

	db := r.pipeline(t, mib, paging.ModeZeroCopy)
	built := r.ctx.Counters()
	_, err = db.Prefetch(1, l.weights[1], l.src)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, built, r.ctx.Counters(), "no device work")
	assert.Equal(t, paging.SlotFree, db.SlotState(0))
	assert.Equal(t, paging.SlotFree, db.SlotState(1))
	assert.Zero(t, db.Metrics().LayersPrefetched)
}

// bareSource hides MmapSource's Prepare and Mapping, so nothing re-checks the file before the
// staging copy reads it.
type bareSource struct{ src *paging.MmapSource }

func (b bareSource) RegionBytes(r paging.Region) ([]byte, error) { return b.src.RegionBytes(r) }

// A file truncated under a source that cannot check it faults the staging copy: the fault is
// a failed fill (slot quarantined), not a crash.
func TestFaultDuringStagingCopyIsAFailedFill(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 2*mib, 1, 2, 0)
	db := r.pipeline(t, 2*mib, paging.ModeZeroCopy)
	src := bareSource{l.src}
	tk, err := db.Prefetch(0, l.weights[0], src)
	require.NoError(t, err)
	v, err := db.Wait(tk)
	require.NoError(t, err)
	assert.Equal(t, paging.PathStaging, v.Path, "a source without mappings is staged")
	require.NoError(t, db.Release(tk))

	require.NoError(t, os.Truncate(l.path, prefix)) // every page of layer 1 is now past EOF
	_, err = db.Prefetch(1, l.weights[1], src)
	assert.ErrorIs(t, err, paging.ErrQuarantined)
	assert.ErrorContains(t, err, "fault reading external data")
	assert.Equal(t, 1, db.Quarantined())
}

// Driver work is bound to the pipeline's context on whatever goroutine calls it: a goroutine
// with no context current works (the sim refuses context-less calls, like the driver).
func TestCallsFromAnUnboundGoroutine(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 2, 0)
		res := r.residency(t, 0, paging.GateOn, mode)
		errc := make(chan error, 1)
		go func() {
			for layer := paging.LayerID(0); layer < 2; layer++ {
				d, err := res.Prefetch(layer, l.weights[layer], l.src)
				if err == nil && d.Declined() {
					err = fmt.Errorf("layer %d: %v", layer, d)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		require.NoError(t, <-errc)
		pages := make(chan *paging.PagedWeight, 2)
		go func() {
			for layer := paging.LayerID(0); layer < 2; layer++ {
				p, err := res.Page(layer)
				if err != nil {
					errc <- err
					return
				}
				pages <- p
			}
			errc <- nil
		}()
		require.NoError(t, <-errc)
		for layer := 0; layer < 2; layer++ {
			p := <-pages
			assertPaged(t, r, p, l.src, l.weights[layer])
			go func() { errc <- p.Release() }()
			require.NoError(t, <-errc)
		}
	})
}

// After failed fills have quarantined both slots, the residency declines every layer as busy
// (saying the slots are quarantined) until Recover puts them back: then it routes layers again
// through both slots and serves their exact bytes. The failures stay counted.
func TestResidencyRecoversQuarantinedSlots(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		needSim(t, r, "fault injection")
		l := writeLayered(t, mib, 2, 6, 0x2D)
		baseline := r.live(t)
		res, err := paging.NewResidency(paging.ResidencyConfig{
			Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: r.pool,
			DoubleBuffer: paging.GateOn, Mode: mode, RegisterChunkBytes: mib, StagingChunkBytes: 512 << 10,
		})
		require.NoError(t, err)

		n, err := res.Recover()
		require.NoError(t, err)
		assert.Zero(t, n, "no pipeline yet, nothing to recover")
		for layer := range 2 { // mid-layer: part of each copy was queued before the failure
			r.env.Sim.InjectFault(sim.OpMemcpyHtoDAsync, 2, cudadrv.ErrorInvalidValue)
			d, err := res.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
			require.ErrorIs(t, err, paging.ErrQuarantined, "layer %d", layer)
			assert.False(t, d.Declined())
		}
		d := requireDecline(t, paging.DeclineBusy)(res.Prefetch(2, l.weights[2], l.src))
		assert.Equal(t, 2, d.Quarantined, "the decline says why the residency is busy")
		assert.Contains(t, d.String(), "2 slot(s) quarantined")
		st, _ := res.Stats()
		assert.Equal(t, 2, st.Quarantined)

		n, err = res.Recover()
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		requireRouted(t, "a recovered residency routes again")(res.Prefetch(2, l.weights[2], l.src))
		slots := map[cudadrv.DevicePtr]bool{}
		for layer := 2; layer < 6; layer++ {
			if layer+1 < 6 {
				requireRouted(t, "look-ahead prefetch of layer %d", layer+1)(res.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src))
			}
			p, err := res.Page(paging.LayerID(layer))
			require.NoError(t, err)
			assertPaged(t, r, p, l.src, l.weights[layer])
			slots[p.Ptr()] = true
			require.NoError(t, p.Release())
		}
		assert.Len(t, slots, 2, "both slots serve again")
		st, _ = res.Stats()
		assert.Zero(t, st.Quarantined)
		assert.Equal(t, uint64(2), st.FillErrors, "the failures are still counted")
		assert.Equal(t, uint64(2), st.Quarantines)
		assert.Equal(t, uint64(2), st.Recovered)
		assert.Equal(t, uint64(4), st.Routed)
		assert.Equal(t, uint64(4), st.Consumed)
		require.NoError(t, res.Close())
		assert.Equal(t, baseline, r.live(t), "nothing leaks, recovered slots included")
	})
}

// A fill whose completion event could not be recorded leaves copies (and, on the zero-copy
// path, registrations) that only the copy stream witnesses: Recover drains them before the
// slot is reused, and the slot then pages exact bytes.
func TestRecoverAfterTheCompletionEventFailed(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		needSim(t, r, "fault injection")
		l := writeLayered(t, mib, 1, 3, 0x3E)
		db := r.pipeline(t, mib, mode)
		r.env.Sim.InjectFault(sim.OpEventRecord, 1, cudadrv.ErrorInvalidValue)
		_, err := db.Prefetch(0, l.weights[0], l.src)
		var fe *paging.FillError
		require.ErrorAs(t, err, &fe)
		var ce *cudadrv.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, sim.OpEventRecord, ce.Op)

		n, err := db.Recover()
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Zero(t, r.pool.RegistrationStats().InUse, "the failed fill's registrations are released")
		assert.Equal(t, paging.SlotFree, db.SlotState(fe.Slot))
		for layer := 1; layer < 3; layer++ {
			tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
			require.NoError(t, err)
			v, err := db.Wait(tk)
			require.NoError(t, err)
			assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len), "layer %d", layer)
			require.NoError(t, db.Release(tk))
		}
		assert.Equal(t, uint64(1), db.Metrics().Recovered)
	})
}

// A fill that falls back from zero-copy to staging keeps its reason where a host reads it:
// the layer's own view and paged weight, the pipeline's metrics and the residency's stats
// name the layer, the file and the driver error.
func TestFallbackReasonNamesTheDriverError(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	needSim(t, r, "fault injection")
	l := writeLayered(t, mib, 1, 3, 0x4F)
	res := r.residency(t, 0, paging.GateOn, paging.ModeZeroCopy)
	requireRouted(t)(res.Prefetch(0, l.weights[0], l.src))
	r.env.Sim.InjectFault(sim.OpMemHostRegister, 1, cudadrv.ErrorNotPermitted)
	requireRouted(t, "a registration error is never a failed fill")(res.Prefetch(1, l.weights[1], l.src))
	for layer := paging.LayerID(0); layer < 2; layer++ {
		p, err := res.Page(layer)
		require.NoError(t, err)
		assertPaged(t, r, p, l.src, l.weights[layer])
		if layer == 0 {
			assert.Equal(t, paging.PathZeroCopy, p.Path())
			assert.Nil(t, p.Fallback())
		} else {
			assert.Equal(t, paging.PathFallback, p.Path())
			fb := p.Fallback()
			require.NotNil(t, fb, "the paged weight says why it was staged")
			assert.Equal(t, paging.LayerID(1), fb.Layer)
			assert.Equal(t, l.id, fb.Mapping)
			assert.Contains(t, fb.Reason, "CUDA_ERROR_NOT_PERMITTED")
			assert.Contains(t, fb.Reason, sim.OpMemHostRegister)
		}
		require.NoError(t, p.Release())
	}
	requireRouted(t)(res.Prefetch(2, l.weights[2], l.src))
	p, err := res.Page(2)
	require.NoError(t, err)
	assert.Equal(t, paging.PathZeroCopy, p.Path(), "later layers go zero-copy again")
	require.NoError(t, p.Release())

	st, _ := res.Stats()
	assert.Equal(t, uint64(1), st.FallbackLayers)
	fb := st.LastFallback
	require.NotNil(t, fb, "the stats keep the last fallback after later layers")
	assert.Equal(t, paging.LayerID(1), fb.Layer)
	assert.Contains(t, fb.Reason, "CUDA_ERROR_NOT_PERMITTED")
	var ce *cudadrv.Error
	require.ErrorAs(t, fb.Err, &ce)
	assert.Equal(t, sim.OpMemHostRegister, ce.Op)
	assert.Equal(t, cudadrv.ErrorNotPermitted, ce.Result)
	assert.Contains(t, fb.String(), "layer 1")
	assert.Same(t, fb, res.Pipeline().Metrics().LastFallback)
}
