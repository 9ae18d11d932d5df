package paging_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// The seed's GPU tests of the primitive, on the test device (sim by default, the GPU with
// CUDAEP_TEST_BACKEND=cuda), once per transfer mode.

// Seed: whole_layer_prefill_is_byte_identical_across_wraparound.
func TestWholeLayerPrefillIsByteIdenticalAcrossWraparound(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		const regionBytes, regionsPerLayer, layers = 2 * mib, 2, 4
		l := writeLayered(t, regionBytes, regionsPerLayer, layers, 0)
		layerBytes := uint64(regionBytes * regionsPerLayer)
		db := r.pipeline(t, layerBytes, mode)

		pending, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		for layer := 0; layer < layers; layer++ {
			ticket := pending
			if layer+1 < layers {
				pending, err = db.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src)
				require.NoError(t, err, "look-ahead prefetch (incl. slot reuse) must succeed")
			}
			view, err := db.Wait(ticket)
			require.NoError(t, err, "ready slot must consume")
			assert.Equal(t, layerBytes, view.Len, "layer %d byte count", layer)
			assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, view.Ptr, view.Len),
				"layer %d device bytes must be byte-identical to its concatenated source regions", layer)
			require.NoError(t, db.Release(ticket), "in-use slot must release")
		}
		m := db.Metrics()
		assert.Equal(t, uint64(layers), m.LayersPrefetched)
		assert.Equal(t, uint64(layers), m.LayersConsumed)
		assert.Equal(t, uint64(layers), m.LayersReleased)
		assert.Zero(t, m.Poisoned, "clean path poisons nothing")
		assert.Zero(t, m.StaleRejected)
		assert.Zero(t, m.Cancelled)
		assert.Zero(t, db.Quarantined(), "no slot may be quarantined on the clean path")
		if mode == paging.ModeZeroCopy {
			assert.Equal(t, uint64(layers), m.ZeroCopyLayers, "every layer copied from registered extents")
		} else {
			assert.Equal(t, uint64(layers), m.StagingLayers)
		}
		require.NoError(t, db.Close(), "teardown drains in-flight and frees both stable buffers")
		require.NoError(t, l.src.Close(l.id))
		c := r.ctx.Counters()
		assert.Zero(t, c.RegisteredLiveBytes, "every registration undone once the file is closed")
	})
}

// Seed: single_and_final_layer_teardown_is_clean.
func TestSingleAndFinalLayerTeardownIsClean(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, 4*mib, 1, 1, 0)
		db := r.pipeline(t, 4*mib, mode)
		ticket, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		view, err := db.Wait(ticket)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, view.Ptr, view.Len))
		assert.Equal(t, paging.SlotFree, db.SlotState(1-ticket.Slot()), "the other slot was never claimed")

		// Release, then close while the only used slot is still draining: teardown must
		// establish the copy's completion and free without leaking (drivertest checks).
		require.NoError(t, db.Release(ticket))
		assert.Equal(t, paging.SlotDraining, db.SlotState(ticket.Slot()))
		assert.Zero(t, db.Quarantined())
		require.NoError(t, db.Close())
	})
}

// Seed: cancellation_frees_slot_for_reuse_without_quarantine.
func TestCancellationFreesSlotForReuseWithoutQuarantine(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, 4*mib, 1, 3, 0)
		db := r.pipeline(t, 4*mib, mode)

		keep, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		doomed, err := db.Prefetch(1, l.weights[1], l.src)
		require.NoError(t, err)
		doomedView, err := db.Wait(doomed)
		require.NoError(t, err)
		require.NoError(t, db.Cancel(doomed), "cancel mid-use")
		assert.Equal(t, uint64(1), db.Metrics().Cancelled)
		assert.Zero(t, db.Quarantined(), "cancel does not quarantine")

		reuse, err := db.Prefetch(2, l.weights[2], l.src)
		require.NoError(t, err, "cancelled slot must be reusable")
		reuseView, err := db.Wait(reuse)
		require.NoError(t, err)
		assert.Equal(t, doomedView.Ptr, reuseView.Ptr, "the same stable device buffer")
		assert.Equal(t, canonical(t, l.src, l.weights[2]), r.readback(t, reuseView.Ptr, reuseView.Len),
			"the reused slot's bytes must be the new layer's, not the cancelled one's")
		require.NoError(t, db.Release(reuse))
		_, err = db.Wait(keep)
		require.NoError(t, err)
		require.NoError(t, db.Release(keep))
		assert.Zero(t, db.Quarantined())
	})
}

// Seed: stale_ticket_after_reuse_is_refused.
func TestStaleTicketAfterReuseIsRefused(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, 2*mib, 1, 3, 0)
		db := r.pipeline(t, 2*mib, mode)

		ticketB, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		ticketA, err := db.Prefetch(1, l.weights[1], l.src)
		require.NoError(t, err)
		_, err = db.Wait(ticketA)
		require.NoError(t, err)
		require.NoError(t, db.Release(ticketA))
		reuse, err := db.Prefetch(2, l.weights[2], l.src)
		require.NoError(t, err)

		_, err = db.Wait(ticketA)
		var stale *paging.StaleGenerationError
		require.ErrorAs(t, err, &stale, "stale ticket must be refused")
		assert.Equal(t, paging.LayerID(1), stale.Layer)
		assert.GreaterOrEqual(t, db.Metrics().StaleRejected, uint64(1))

		v, err := db.Wait(reuse)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[2]), r.readback(t, v.Ptr, v.Len))
		require.NoError(t, db.Release(reuse))
		_, err = db.Wait(ticketB)
		require.NoError(t, err)
		require.NoError(t, db.Release(ticketB))
	})
}

// Seed: two_pipelines_on_one_device_are_isolated.
func TestTwoPipelinesOnOneDeviceAreIsolated(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		const layers = 3
		a := writeLayered(t, 2*mib, 2, layers, 0x00)
		b := writeLayered(t, 2*mib, 2, layers, 0x24)
		dbA := r.pipeline(t, 4*mib, mode)
		dbB := r.pipeline(t, 4*mib, mode)
		read := func(db *paging.DoubleBuffer, layer int, l *layered) {
			tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
			require.NoError(t, err)
			v, err := db.Wait(tk)
			require.NoError(t, err)
			assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len),
				"a pipeline must read back only its own layer's bytes, never the other pipeline's")
			require.NoError(t, db.Release(tk))
		}
		for layer := 0; layer < layers; layer++ {
			read(dbA, layer, a)
			read(dbB, layer, b)
		}
		assert.NotEqual(t, dbA.SlotPtr(0), dbB.SlotPtr(0))
		assert.Zero(t, dbA.Quarantined())
		assert.Zero(t, dbB.Quarantined())
	})
}

// Seed: oversized_layer_declines_pool_capacity_without_reserving.
func TestOversizedLayerDeclinesPoolCapacityWithoutReserving(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	before := r.ctx.Counters()
	const layerBytes = 300 * mib // 2 × 300 MiB > the 512 MiB default retention cap
	_, err := paging.NewDoubleBuffer(r.transfer(t, paging.ModeZeroCopy), layerBytes)
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	assert.Equal(t, uint64(layerBytes), pc.LayerBytes)
	assert.Equal(t, paging.DefaultRetentionCap, pc.RetentionCap)
	after := r.ctx.Counters()
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "no device buffer on the declined path")
	assert.Equal(t, before.PinnedAllocs, after.PinnedAllocs, "no staging on the declined path")
	assert.Equal(t, before.EventsCreated, after.EventsCreated)

	// The cap is an option of the pool.
	small, err := paging.NewStagingPool(r.ctx, 8*mib)
	require.NoError(t, err)
	defer small.Close()
	tr, err := paging.NewCUDATransfer(paging.CUDATransferConfig{Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: small})
	require.NoError(t, err)
	_, err = paging.NewDoubleBuffer(tr, 4*mib+1)
	require.ErrorAs(t, err, &pc)
	assert.Equal(t, uint64(8*mib), pc.RetentionCap)
}

// Wait only enqueues the fence: with the copy held in flight behind a closed gate on the copy
// stream, Wait returns while the copy is pending (a Wait that blocked on the copy could not
// return before the gate opens), and the compute stream is ordered after the copy: work
// queued on it after Wait does not complete until the gate opens.
func TestWaitIsEnqueueOnly(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 1, 0)
		db := r.pipeline(t, mib, mode)
		marker, err := r.ctx.NewEvent(cudadrv.EventDisableTiming)
		require.NoError(t, err)
		defer func() { require.NoError(t, marker.Destroy()) }()

		gate := r.gate(t, r.copy)
		tk, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		v, err := db.Wait(tk)
		require.NoError(t, err)
		done, err := r.copy.Query()
		require.NoError(t, err)
		assert.False(t, done, "Wait returned without the host waiting for the copy")
		assert.Equal(t, paging.SlotInUse, db.SlotState(tk.Slot()))
		require.NoError(t, marker.Record(r.compute))
		reached, err := marker.Query()
		require.NoError(t, err)
		assert.False(t, reached, "compute queued after Wait waits for the held copy")

		require.NoError(t, gate.Open())
		require.NoError(t, r.compute.Synchronize())
		done, err = r.copy.Query()
		require.NoError(t, err)
		assert.True(t, done, "draining the compute stream alone landed the copy it was fenced on")
		assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, v.Ptr, v.Len))
		require.NoError(t, db.Release(tk))
	})
}

// The compute stream is fenced on the copy: a device-side snapshot of the slot queued on the
// compute stream right after Wait, while the copy is held behind a closed gate, sees the
// layer's bytes once the gate opens.
func TestWaitFencesComputeOnTheCopy(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 1, 0x3C)
		db := r.pipeline(t, mib, mode)
		snap, err := r.ctx.Alloc(mib)
		require.NoError(t, err)
		defer func() { require.NoError(t, snap.Free()) }()

		gate := r.gate(t, r.copy)
		tk, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		v, err := db.Wait(tk)
		require.NoError(t, err)
		require.NoError(t, r.compute.CopyDtoDAsync(snap.Ptr(), v.Ptr, v.Len))
		require.NoError(t, db.Release(tk))
		require.NoError(t, gate.Open())
		assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, snap.Ptr(), mib))
	})
}

// Slot reuse waits for the release fence: while the released layer's kernel is held on the
// compute stream by a closed gate, the next layer's copy into that slot stays pending although
// every copy queued before it has completed, so a snapshot queued after the kernel still sees
// the released layer's bytes.
//
// On the zero-copy path the copies are also held (behind a gate on the copy stream) until the
// reuse is queued: the pipeline unregisters a completed copy's extents at its next call, and
// on the H200 (driver 580) cuMemHostUnregister waits for the running kernel, here the held one.
// (The staging path must not hold them: reusing the slot's staging buffer waits for its copy.)
func TestReleaseFenceOrdersSlotReuse(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		l := writeLayered(t, mib, 1, 3, 0x5)
		db := r.pipeline(t, mib, mode)
		snap, err := r.ctx.Alloc(mib)
		require.NoError(t, err)
		defer func() { require.NoError(t, snap.Free()) }()
		copied, err := r.ctx.NewEvent(cudadrv.EventDisableTiming)
		require.NoError(t, err)
		defer func() { require.NoError(t, copied.Destroy()) }()

		var hold *pagingtest.Gate
		if mode == paging.ModeZeroCopy {
			hold = r.gate(t, r.copy)
		}
		keep, err := db.Prefetch(0, l.weights[0], l.src) // occupies the other slot
		require.NoError(t, err)
		tk, err := db.Prefetch(1, l.weights[1], l.src)
		require.NoError(t, err)
		require.NoError(t, copied.Record(r.copy)) // after layers 0 and 1's copies
		v, err := db.Wait(tk)
		require.NoError(t, err)
		kernel := r.gate(t, r.compute) // the layer's kernel, still reading the slot
		require.NoError(t, r.compute.CopyDtoDAsync(snap.Ptr(), v.Ptr, v.Len))
		require.NoError(t, db.Release(tk))

		reuse, err := db.Prefetch(2, l.weights[2], l.src)
		require.NoError(t, err)
		require.Equal(t, tk.Slot(), reuse.Slot())
		if hold != nil {
			require.NoError(t, hold.Open())
		}
		require.NoError(t, copied.Synchronize())
		assert.Equal(t, paging.SlotFilling, db.SlotState(reuse.Slot()),
			"every earlier copy completed; the reuse copy waits for the release fence")
		require.NoError(t, kernel.Open())
		assert.Equal(t, canonical(t, l.src, l.weights[1]), r.readback(t, snap.Ptr(), mib),
			"the reuse copy must wait for the release fence")
		rv, err := db.Wait(reuse)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, l.src, l.weights[2]), r.readback(t, rv.Ptr, rv.Len))
		require.NoError(t, db.Release(reuse))
		_, err = db.Wait(keep)
		require.NoError(t, err)
		require.NoError(t, db.Release(keep))
	})
}

// The copy of layer N+1 overlaps the compute of layer N: with N's kernel held on the compute
// stream by a closed gate, the copy of N+1 (slot reuse included) completes anyway, and the
// compute of N is still pending when it has. A pipeline that ordered the copy after N's
// compute would leave it pending until the gate's guard gave up, and this test would fail.
// The proof is the order of events on the two streams, not a measurement of time. (The
// prefetch of N+1 is queued after N's kernel here, so that the copy cannot have run first.)
//
// On the H200 (driver 580) the zero-copy path did not have this property when every fill
// registered its extents and the next prefetch unregistered them: cuMemHostUnregister waited
// for the kernel running on the compute stream, and blocked the driver's copies, event records
// and registrations on every thread meanwhile, so the copy of N+1 was queued only after N's
// compute. The simulator does not model that wait. Registrations are now kept across fills
// (nothing is unregistered here until the file closes), but a fill that registers (the file
// was not registered when it was opened, as here) still calls the driver, and whether
// cuMemHostRegister waits the same way was not measured: the zero-copy case stays on the
// simulator until it has been seen to pass on the GPU.
func TestCopyOfNextLayerOverlapsComputeOfCurrent(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRig(t, sim.Options{}, 0)
		if mode == paging.ModeZeroCopy && r.env.Sim == nil {
			t.Skip("on the GPU the zero-copy case is not checked in this order yet (see the test's comment)")
		}
		const layers = 4
		l := writeLayered(t, mib, 2, layers, 0x6B)
		db := r.pipeline(t, 2*mib, mode)

		next, err := db.Prefetch(0, l.weights[0], l.src)
		require.NoError(t, err)
		for n := 0; n < layers; n++ {
			cur := next
			v, err := db.Wait(cur)
			require.NoError(t, err)
			compute := r.gate(t, r.compute) // layer n's kernel, held until opened
			if n+1 < layers {
				next, err = db.Prefetch(paging.LayerID(n+1), l.weights[n+1], l.src)
				require.NoError(t, err)
				require.NoError(t, r.copy.Synchronize(), "layer %d's copy completes while layer %d computes", n+1, n)
				computed, err := r.compute.Query()
				require.NoError(t, err)
				assert.False(t, computed, "layer %d's compute was still held when layer %d's copy completed", n, n+1)
				assert.Equal(t, paging.SlotReady, db.SlotState(next.Slot()), "layer %d", n+1)
			}
			require.NoError(t, compute.Open())
			assert.Equal(t, canonical(t, l.src, l.weights[n]), r.readback(t, v.Ptr, v.Len), "layer %d", n)
			require.NoError(t, db.Release(cur))
		}
		assert.Equal(t, uint64(layers-2), db.Metrics().SlotReuses)
	})
}

// Zero-copy registrations outlive their copy: held while it is in flight, idle once its
// completion is observed, reused by the next fill of the same bytes without registering again,
// and undone when the file is closed.
func TestZeroCopyKeepsRegistrationsUntilTheFileCloses(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 2, 1, 0)
	db := r.pipeline(t, 2*mib, paging.ModeZeroCopy)
	gate := r.gate(t, r.copy)
	tk, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	assert.Equal(t, paging.SlotFilling, db.SlotState(tk.Slot()))
	rs := r.pool.RegistrationStats()
	assert.NotZero(t, rs.InUse, "in use while the copy is in flight")
	assert.Equal(t, rs.Bytes, r.ctx.Counters().RegisteredLiveBytes)
	require.NoError(t, gate.Open())
	require.NoError(t, r.copy.Synchronize())
	assert.Equal(t, paging.SlotReady, db.SlotState(tk.Slot()))
	rs = r.pool.RegistrationStats()
	assert.Zero(t, rs.InUse, "idle once the copy completed")
	assert.Equal(t, rs.Bytes, r.ctx.Counters().RegisteredLiveBytes, "and still registered")
	v, err := db.Wait(tk)
	require.NoError(t, err)
	assert.Equal(t, paging.PathZeroCopy, v.Path)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, v.Ptr, v.Len))
	require.NoError(t, db.Release(tk))

	// The next prefill of the same layer registers nothing.
	made := rs.Made
	tk, err = db.Prefetch(1, l.weights[0], l.src)
	require.NoError(t, err)
	v, err = db.Wait(tk)
	require.NoError(t, err)
	assert.Equal(t, paging.PathZeroCopy, v.Path)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, v.Ptr, v.Len))
	require.NoError(t, db.Release(tk))
	rs = r.pool.RegistrationStats()
	assert.Equal(t, made, rs.Made, "no registration made for the second pass")
	assert.NotZero(t, rs.Reused)
	require.NoError(t, db.Close())

	require.NoError(t, l.src.Close(l.id))
	assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes, "undone when the file closed")
	rs = r.pool.RegistrationStats()
	assert.Equal(t, rs.Made, rs.Undone)
	assert.Zero(t, rs.Bytes)
}
