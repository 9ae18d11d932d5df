package paging_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// Registrations that outlive a layer (issue 15): files registered once, ahead of use, kept
// across prefills, under a cap, undone when the file closes. Every test runs on both backends.

// pageAll pages every weight through db in order, one ahead, checks each layer's bytes and
// path, and returns the paths.
func pageAll(t *testing.T, r *rig, db *paging.DoubleBuffer, src paging.RegionSource, ws []*paging.LazyWeight, check func(layer int)) []paging.Path {
	t.Helper()
	var paths []paging.Path
	pending, err := db.Prefetch(0, ws[0], src)
	require.NoError(t, err)
	for layer := range ws {
		tk := pending
		if layer+1 < len(ws) {
			pending, err = db.Prefetch(paging.LayerID(layer+1), ws[layer+1], src)
			require.NoError(t, err)
		}
		if check != nil {
			check(layer)
		}
		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, canonical(t, src, ws[layer]), r.readback(t, v.Ptr, v.Len), "layer %d's device bytes", layer)
		paths = append(paths, v.Path)
		require.NoError(t, db.Release(tk))
	}
	return paths
}

func allPaths(n int, p paging.Path) []paging.Path {
	out := make([]paging.Path, n)
	for i := range out {
		out[i] = p
	}
	return out
}

// A file registered when it is opened leaves nothing to set up for the fills: the first
// prefill registers nothing, every layer goes zero-copy, including layers whose extents
// straddle two registered ranges, and the second prefill is the same. Closing the file undoes
// every registration.
func TestRegisterFileAtOpenLeavesNothingForTheFirstFill(t *testing.T) {
	const chunk = mib
	r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterChunkBytes: chunk})
	const regionBytes, layers = 768 << 10, 6
	l := writeLayered(t, regionBytes, 1, layers, 0x21)
	// Layer 1 spans [prefix+768 KiB, prefix+1536 KiB): it straddles the range boundary at 1 MiB.
	r1 := l.weights[1].Regions()[0]
	require.Less(t, r1.Offset, uint64(chunk))
	require.Greater(t, r1.Offset+r1.Len, uint64(chunk))

	size, err := l.src.Size(l.id)
	require.NoError(t, err)
	rep, err := r.pool.RegisterFile(l.src, l.id)
	require.NoError(t, err)
	mapped := (size + 4095) / 4096 * 4096
	assert.Equal(t, l.id, rep.Mapping)
	assert.Equal(t, mapped, rep.Bytes, "the whole mapping is registered")
	assert.Equal(t, (mapped+chunk-1)/chunk, rep.Made, "in ranges of the pool's chunk")
	assert.Empty(t, rep.Stopped)
	assert.Equal(t, mapped, r.ctx.Counters().RegisteredLiveBytes)

	db := r.pipeline(t, regionBytes, paging.ModeZeroCopy)
	made := r.pool.RegistrationStats().Made
	for pass := range 2 {
		assert.Equal(t, allPaths(layers, paging.PathZeroCopy), pageAll(t, r, db, l.src, l.weights, nil), "pass %d", pass)
	}
	rs := r.pool.RegistrationStats()
	assert.Equal(t, made, rs.Made, "no fill registered anything")
	assert.GreaterOrEqual(t, rs.Reused, uint64(2*layers+1), "every fill found its ranges, the straddling one two")
	assert.Zero(t, db.Metrics().FallbackLayers)
	assert.Equal(t, uint64(2*layers)*regionBytes, db.Transfer().(*paging.CUDATransfer).Metrics().ZeroCopyBytes)

	require.NoError(t, l.src.Close(l.id), "no layer is in flight: the file closes")
	assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes, "closing the file undid its registrations")
	rs = r.pool.RegistrationStats()
	assert.Equal(t, rs.Made, rs.Undone)
	assert.Zero(t, rs.Bytes)
}

// A file opened, paged, closed and opened again gets a new id and pages exactly again; the
// weights of the closed id are refused before any device work.
func TestFileOpenedPagedClosedAndReopened(t *testing.T) {
	modes(t, func(t *testing.T, mode paging.TransferMode) {
		r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterChunkBytes: 512 << 10})
		f := pagingtest.LayerFile{Prefix: prefix, RegionBytes: 300 << 10, RegionsPerLayer: 2, Layers: 3, Salt: 0x6C}
		path := filepath.Join(t.TempDir(), "weights.bin")
		require.NoError(t, f.Create(path))
		src := paging.NewMmapSource()
		t.Cleanup(func() { _ = src.CloseAll() })
		db := r.pipeline(t, f.LayerBytes(), mode)

		var ids []paging.MappingID
		for round := range 2 {
			id, err := src.Open(path)
			require.NoError(t, err)
			ids = append(ids, id)
			if mode == paging.ModeZeroCopy {
				_, err = r.pool.RegisterFile(src, id)
				require.NoError(t, err)
			}
			ws, err := f.Weights(id)
			require.NoError(t, err)
			want := paging.PathStaging
			if mode == paging.ModeZeroCopy {
				want = paging.PathZeroCopy
			}
			assert.Equal(t, allPaths(f.Layers, want), pageAll(t, r, db, src, ws, nil), "round %d", round)
			require.NoError(t, src.Close(id))
			assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes, "round %d: nothing stays registered of a closed file", round)

			before := r.ctx.Counters()
			_, err = db.Prefetch(9, ws[0], src)
			var re *paging.RegionError
			require.ErrorAs(t, err, &re, "a weight of the closed file")
			assert.Contains(t, err.Error(), "closed")
			assert.Equal(t, before, r.ctx.Counters(), "refused before any device work")
		}
		assert.NotEqual(t, ids[0], ids[1], "reopening gives a new id")
	})
}

// The register cap is never exceeded: with room for three layers, eight layers page zero-copy
// through a sliding window (the idle ranges used longest ago are unregistered first), twice,
// with exact bytes; RegisterFile stops at the cap without evicting anything.
func TestRegisterCapIsHonouredAndTheWindowSlides(t *testing.T) {
	const regCap = 3 * mib
	r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterCap: regCap, RegisterChunkBytes: 256 << 10})
	const layers = 8
	l := writeLayered(t, mib, 1, layers, 0x3C)
	assert.Equal(t, uint64(regCap), r.pool.RegisterCap())

	rep, err := r.pool.RegisterFile(l.src, l.id)
	require.NoError(t, err, "reaching the cap is not an error")
	assert.Contains(t, rep.Stopped, "cap")
	assert.LessOrEqual(t, rep.Bytes, uint64(regCap))
	assert.Equal(t, rep.Bytes, r.ctx.Counters().RegisteredLiveBytes)
	assert.Zero(t, r.pool.RegistrationStats().Evicted, "RegisterFile evicts nothing")

	db := r.pipeline(t, mib, paging.ModeZeroCopy)
	underCap := func(int) {
		assert.LessOrEqual(t, r.ctx.Counters().RegisteredLiveBytes, uint64(regCap), "registered bytes under the cap")
	}
	for pass := range 2 {
		assert.Equal(t, allPaths(layers, paging.PathZeroCopy), pageAll(t, r, db, l.src, l.weights, underCap), "pass %d", pass)
	}
	rs := r.pool.RegistrationStats()
	assert.LessOrEqual(t, rs.Peak, uint64(regCap), "never more than the cap registered")
	assert.NotZero(t, rs.Evicted, "the window slid")
	assert.Zero(t, rs.CapRefused, "two layers in flight always fit")
	assert.Equal(t, rs.Bytes, r.ctx.Counters().RegisteredLiveBytes)
}

// A layer that cannot be registered under the cap is staged (auto), with the cap named as the
// reason, or fails its fill (zero-copy only, which reserved no staging memory).
func TestLayerLargerThanTheRegisterCap(t *testing.T) {
	t.Run("auto stages it", func(t *testing.T) {
		r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterCap: mib})
		l := writeLayered(t, 2*mib, 1, 2, 0x52)
		db := r.pipeline(t, 2*mib, paging.ModeZeroCopy)
		assert.Equal(t, allPaths(2, paging.PathFallback), pageAll(t, r, db, l.src, l.weights, nil))
		fb := db.Metrics().LastFallback
		require.NotNil(t, fb)
		var ce *paging.RegisterCapError
		require.ErrorAs(t, fb.Err, &ce)
		assert.Equal(t, uint64(mib), ce.Cap)
		assert.Contains(t, fb.Reason, "cap of 1048576 registered bytes")
		rs := r.pool.RegistrationStats()
		assert.NotZero(t, rs.CapRefused)
		assert.LessOrEqual(t, rs.Peak, uint64(mib))
	})
	t.Run("zero-copy only fails the fill", func(t *testing.T) {
		r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterCap: mib})
		l := writeLayered(t, 2*mib, 1, 2, 0x53)
		base := r.ctx.Counters().PinnedAllocs
		db := r.pipeline(t, 2*mib, paging.ModeZeroCopyOnly)
		assert.Equal(t, base, r.ctx.Counters().PinnedAllocs, "zero-copy only reserves no staging memory")
		_, err := db.Prefetch(0, l.weights[0], l.src)
		var fe *paging.FillError
		require.ErrorAs(t, err, &fe)
		var ce *paging.RegisterCapError
		require.ErrorAs(t, err, &ce)
		assert.ErrorContains(t, err, "zero-copy only")
		assert.Equal(t, 1, db.Quarantined())
		assert.Equal(t, base, r.ctx.Counters().PinnedAllocs, "and stages nothing")
		assert.Zero(t, r.pool.RegistrationStats().InUse)
	})
}

// A registration error during RegisterFile stops it with the error; the fills register the
// rest when they need it, and a zero-copy-only fill that cannot register fails.
func TestRegisterFileErrorAndZeroCopyOnlyFailure(t *testing.T) {
	r := newRigPool(t, sim.Options{}, paging.StagingPoolConfig{RegisterChunkBytes: mib})
	needSim(t, r, "fault injection")
	l := writeLayered(t, mib, 1, 3, 0x17)
	r.env.Sim.InjectFault(sim.OpMemHostRegister, 2, cudadrv.ErrorNotPermitted)
	rep, err := r.pool.RegisterFile(l.src, l.id)
	var ce *cudadrv.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cudadrv.ErrorNotPermitted, ce.Result)
	assert.Equal(t, uint64(1), rep.Made)
	assert.Equal(t, uint64(mib), rep.Bytes)
	assert.Contains(t, rep.Stopped, "CUDA_ERROR_NOT_PERMITTED")

	db := r.pipeline(t, mib, paging.ModeZeroCopy)
	assert.Equal(t, allPaths(3, paging.PathZeroCopy), pageAll(t, r, db, l.src, l.weights, nil), "the fills register the rest")
	require.NoError(t, db.Close())
	require.NoError(t, l.src.Close(l.id))

	l2 := writeLayered(t, mib, 1, 1, 0x18)
	strict := r.pipeline(t, mib, paging.ModeZeroCopyOnly)
	r.env.Sim.InjectFault(sim.OpMemHostRegister, 1, cudadrv.ErrorNotPermitted)
	_, err = strict.Prefetch(0, l2.weights[0], l2.src)
	var fe *paging.FillError
	require.ErrorAs(t, err, &fe)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, sim.OpMemHostRegister, ce.Op)
	assert.Equal(t, 1, strict.Quarantined())
}

// Closing a file while a layer read from it is in flight is refused and changes nothing: its
// kept registrations stay; once the copy completes, Close unregisters them and unmaps.
func TestClosingAFileInFlightKeepsItsRegistrations(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 2, 2, 0x2D)
	_, err := r.pool.RegisterFile(l.src, l.id)
	require.NoError(t, err)
	registered := r.ctx.Counters().RegisteredLiveBytes
	db := r.pipeline(t, 2*mib, paging.ModeZeroCopy)
	gate := r.gate(t, r.copy)
	tk, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	err = l.src.Close(l.id)
	require.ErrorIs(t, err, paging.ErrFileBusy)
	assert.ErrorContains(t, err, "layers [0]")
	assert.Equal(t, registered, r.ctx.Counters().RegisteredLiveBytes, "nothing unregistered under the copy")
	require.NoError(t, gate.Open())
	v, err := db.Wait(tk)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, l.src, l.weights[0]), r.readback(t, v.Ptr, v.Len), "the copy read the mapped file")
	require.NoError(t, db.Release(tk))
	require.NoError(t, l.src.Close(l.id))
	assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes)
}

// Teardown in either order leaves nothing registered: a pool closed before the source
// unregisters what it kept; a source closed before the pool does.
func TestTeardownUnregistersKeptRanges(t *testing.T) {
	for _, poolFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "pool first", false: "source first"}[poolFirst], func(t *testing.T) {
			r := newRig(t, sim.Options{}, 0)
			l := writeLayered(t, mib, 1, 2, 0x71)
			pool, err := paging.NewStagingPool(r.ctx, 0)
			require.NoError(t, err)
			tr, err := paging.NewCUDATransfer(paging.CUDATransferConfig{Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: pool})
			require.NoError(t, err)
			db, err := paging.NewDoubleBuffer(tr, mib)
			require.NoError(t, err)
			pageAll(t, r, db, l.src, l.weights, nil)
			require.NoError(t, db.Close())
			require.NotZero(t, r.ctx.Counters().RegisteredLiveBytes)
			if poolFirst {
				require.NoError(t, pool.Close(), "idle registrations are not a leak")
				assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes)
				require.NoError(t, l.src.CloseAll())
			} else {
				require.NoError(t, l.src.CloseAll())
				assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes)
				require.NoError(t, pool.Close())
			}
			assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes)
		})
	}
}

// A residency given its slot size reserves everything when it is created: the first prefill
// allocates no device or pinned memory, creates no event and (with the file registered at
// open) registers nothing; the stats give each layer's path.
func TestResidencyReservesItsSlotsWhenCreated(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 1, 4, 0x64)
	_, err := r.pool.RegisterFile(l.src, l.id)
	require.NoError(t, err)
	res, err := paging.NewResidency(paging.ResidencyConfig{
		Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: r.pool,
		DoubleBuffer: paging.GateOn, SlotBytes: mib,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Close() })
	assert.True(t, res.Active(), "built before the first prefetch")
	assert.Equal(t, uint64(mib), res.Pipeline().Capacity())

	before := r.ctx.Counters()
	requireRouted(t)(res.Prefetch(0, l.weights[0], l.src))
	for layer := range 4 {
		if layer+1 < 4 {
			requireRouted(t)(res.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src))
		}
		p, err := res.Page(paging.LayerID(layer))
		require.NoError(t, err)
		assertPaged(t, r, p, l.src, l.weights[layer])
		require.NoError(t, p.Release())
	}
	after := r.ctx.Counters()
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "no device allocation in the prefill")
	assert.Equal(t, before.PinnedAllocs, after.PinnedAllocs, "no pinned allocation in the prefill")
	assert.Equal(t, before.EventsCreated, after.EventsCreated, "no event created in the prefill")
	assert.Equal(t, before.Registrations, after.Registrations, "no registration in the prefill")

	st, active := res.Stats()
	require.True(t, active)
	require.Len(t, st.Layers, 4)
	for layer, lp := range st.Layers {
		assert.Equal(t, paging.PathZeroCopy, lp.Path, "layer %d", layer)
		assert.Equal(t, uint64(mib), lp.Bytes)
		assert.Nil(t, lp.Fallback)
	}
	assert.NotZero(t, st.Registered.Bytes, "the pool's registrations are reported")

	big := writeLayered(t, 2*mib, 1, 1, 0x65)
	d, err := res.Prefetch(7, big.weights[0], big.src)
	require.NoError(t, err)
	assert.Equal(t, paging.DeclineOversize, d.Reason, "the reserved slots size the pipeline")
	assert.Equal(t, uint64(mib), d.Capacity)
}

// Reserving refuses what it could never build, before anything is allocated; with the gate
// off it builds nothing.
func TestResidencySlotBytesErrors(t *testing.T) {
	r := newRig(t, sim.Options{}, 2*mib)
	cfg := paging.ResidencyConfig{Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: r.pool, DoubleBuffer: paging.GateOn}
	before := r.ctx.Counters()

	c := cfg
	c.SlotBytes, c.BudgetBytes = 3*mib, 4*mib
	_, err := paging.NewResidency(c)
	assert.ErrorContains(t, err, "exceed half the residency budget of 4194304 bytes")

	c = cfg
	c.SlotBytes = 2 * mib // two of them exceed the 2 MiB retention cap
	_, err = paging.NewResidency(c)
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	assert.ErrorContains(t, err, "2097152 bytes")
	assert.Equal(t, before.DeviceAllocs, r.ctx.Counters().DeviceAllocs, "nothing allocated")

	c = cfg
	c.SlotBytes, c.DoubleBuffer = mib, paging.GateOff
	res, err := paging.NewResidency(c)
	require.NoError(t, err)
	assert.False(t, res.Active(), "gate off: nothing built")
	require.NoError(t, res.Close())
}
