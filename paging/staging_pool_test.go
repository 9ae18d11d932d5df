package paging_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
)

func TestStagingPoolCapacityGate(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	assert.Equal(t, paging.DefaultRetentionCap, r.pool.RetentionCap())
	for _, c := range []struct {
		size uint64
		n    int
		want bool
	}{
		{256 * mib, 2, true},
		{256*mib + 1, 2, false},
		{300 * mib, 2, false},
		{300 * mib, 1, true},
		{512 * mib, 1, true},
		{1 << 63, 2, false},
		{^uint64(0), 1, false},
	} {
		assert.Equal(t, c.want, r.pool.CanRetainConcurrent(c.size, c.n), "%d × %d bytes", c.n, c.size)
	}
}

// TestStagingPoolGateCountsWholePagesNotTheGranule is issue 30's "declined below the
// documented cap": with a 64 KiB cap, two 64-byte staging buffers (a page each) fit, but the
// pool rounded every buffer up to its 64 KiB reuse granule and declined them. The gate is two
// buffers of whole host pages under the cap, and the message names the rounded size.
func TestStagingPoolGateCountsWholePagesNotTheGranule(t *testing.T) {
	const capBytes = 64 << 10
	r := newRig(t, sim.Options{}, capBytes)
	page := uint64(os.Getpagesize())
	for _, c := range []struct {
		size uint64
		want bool
	}{
		{64, true},
		{page, true},
		{capBytes / 2, true},
		{capBytes/2 - page + 1, true},
		{capBytes/2 + 1, false},
		{capBytes, false},
		{^uint64(0), false},
	} {
		assert.Equal(t, c.want, r.pool.CanRetainConcurrent(c.size, 2), "2 × %d bytes under a %d-byte cap", c.size, uint64(capBytes))
	}

	// Both buffers of a 64-byte pipeline are retained: one page each, not a granule each.
	tr := r.transfer(t, paging.ModeStaging)
	db, err := paging.NewDoubleBuffer(tr, 64)
	require.NoError(t, err)
	assert.Equal(t, 2*page, r.pool.Stats().RetainedBytes)
	require.NoError(t, db.Close())

	_, err = paging.NewDoubleBuffer(r.transfer(t, paging.ModeStaging), capBytes/2+1)
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	rounded := (capBytes/2 + 1 + page - 1) / page * page
	assert.Equal(t, rounded, pc.StagingBytes)
	assert.Equal(t, uint64(capBytes/2), pc.MaxLayerBytes())
	assert.ErrorContains(t, err, fmt.Sprintf("two staging buffers of %d bytes each (%d rounded up to whole %d-byte host pages) exceed the pinned pool's retention cap of %d bytes",
		rounded, capBytes/2+1, page, capBytes))
}

// TestStagingPoolKeepsTheGranuleWhereTheCapAllows: under the default cap a staging buffer is
// still rounded to the 64 KiB granule, so a pipeline of a slightly larger slot reuses it.
func TestStagingPoolKeepsTheGranuleWhereTheCapAllows(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	a, err := r.pool.Acquire(100)
	require.NoError(t, err)
	assert.Equal(t, uint64(64<<10), r.pool.Stats().InUseBytes)
	require.NoError(t, a.Release())
	b, err := r.pool.Acquire(60 << 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r.pool.Stats().Reuses, "served from the granule-rounded buffer")
	require.NoError(t, b.Release())
}

func TestStagingPoolRetainsUnderCapAndReuses(t *testing.T) {
	r := newRig(t, sim.Options{}, 8*mib)
	base := r.ctx.Counters()

	a, err := r.pool.Acquire(3 * mib)
	require.NoError(t, err)
	assert.Len(t, a.Bytes(), 3*mib)
	require.NoError(t, a.Release())
	assert.ErrorIs(t, a.Release(), paging.ErrReleased)
	st := r.pool.Stats()
	assert.Equal(t, uint64(3*mib), st.RetainedBytes, "kept for the next pipeline")
	assert.Zero(t, st.InUseBytes)

	b, err := r.pool.Acquire(2 * mib)
	require.NoError(t, err)
	assert.Len(t, b.Bytes(), 2*mib)
	st = r.pool.Stats()
	assert.Equal(t, uint64(1), st.Allocations, "served from the retained buffer")
	assert.Equal(t, uint64(1), st.Reuses)

	c, err := r.pool.Acquire(4 * mib)
	require.NoError(t, err)
	assert.Equal(t, uint64(7*mib), r.pool.Stats().RetainedBytes)
	d, err := r.pool.Acquire(4 * mib) // 7 + 4 > 8: transient
	require.NoError(t, err)
	assert.Equal(t, uint64(7*mib), r.pool.Stats().RetainedBytes)
	assert.Equal(t, uint64(11*mib), r.pool.Stats().InUseBytes)
	require.NoError(t, d.Release())
	assert.Equal(t, uint64(1), r.pool.Stats().Frees, "a transient buffer goes back to the driver")
	require.NoError(t, b.Release())
	require.NoError(t, c.Release())

	// A larger request evicts retained buffers that are too small to make room.
	e, err := r.pool.Acquire(6 * mib)
	require.NoError(t, err)
	st = r.pool.Stats()
	assert.LessOrEqual(t, st.RetainedBytes, uint64(8*mib))
	require.NoError(t, e.Release())
	assert.Equal(t, base.PinnedLiveBytes+r.pool.Stats().RetainedBytes, r.ctx.Counters().PinnedLiveBytes)
}

func TestStagingPoolCloseWithBuffersOut(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	p, err := paging.NewStagingPool(r.ctx, 4*mib)
	require.NoError(t, err)
	kept, err := p.Acquire(mib)
	require.NoError(t, err)
	freed, err := p.Acquire(mib)
	require.NoError(t, err)
	require.NoError(t, freed.Release())
	err = p.Close()
	assert.ErrorContains(t, err, "1 buffer(s) still acquired")
	assert.ErrorIs(t, p.Close(), paging.ErrClosed)
	_, err = p.Acquire(mib)
	assert.ErrorIs(t, err, paging.ErrClosed)
	require.NoError(t, kept.Release(), "released after close: returned to the driver")
	assert.Zero(t, p.Stats().RetainedBytes)
	assert.Equal(t, uint64(2), p.Stats().Frees)
}

// Pinned staging is built once per provider: a second pipeline on the same pool allocates no
// pinned memory.
func TestStagingIsReusedAcrossPipelines(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, mib, 2, 2, 0)
	for run := 0; run < 3; run++ {
		db, err := paging.NewDoubleBuffer(r.transfer(t, paging.ModeStaging), 2*mib)
		require.NoError(t, err)
		for layer := 0; layer < 2; layer++ {
			tk, err := db.Prefetch(paging.LayerID(layer), l.weights[layer], l.src)
			require.NoError(t, err)
			v, err := db.Wait(tk)
			require.NoError(t, err)
			assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len))
			require.NoError(t, db.Release(tk))
		}
		require.NoError(t, db.Close())
	}
	assert.Equal(t, uint64(2), r.ctx.Counters().PinnedAllocs, "two staging buffers, allocated once")
	assert.Equal(t, uint64(4), r.pool.Stats().Reuses)
}

// Layers whose regions are not page-aligned share pages with their neighbours; the
// registrations are shared (reference-counted) instead of failing as already registered, so
// every layer still goes zero-copy, and all are undone at the end.
func TestZeroCopySharesPagesBetweenAdjacentLayers(t *testing.T) {
	r := newRig(t, sim.Options{}, 0)
	l := writeLayered(t, 3000, 3, 5, 0x5A)
	layerBytes := l.weights[0].Bytes()
	db := pipelineOver(t, r.transferWith(t, paging.CUDATransferConfig{Mode: paging.ModeZeroCopy, RegisterChunkBytes: 4096}), layerBytes)
	gate := r.gate(t, r.copy) // hold layer 0's copy in flight
	pending, err := db.Prefetch(0, l.weights[0], l.src)
	require.NoError(t, err)
	for layer := 0; layer < 5; layer++ {
		tk := pending
		if layer+1 < 5 {
			pending, err = db.Prefetch(paging.LayerID(layer+1), l.weights[layer+1], l.src)
			require.NoError(t, err)
		}
		if layer == 0 {
			idle, err := r.copy.Query()
			require.NoError(t, err)
			require.False(t, idle, "layer 0's copy, and so its registrations, are live while layer 1 registers")
			require.NoError(t, gate.Open())
		}
		v, err := db.Wait(tk)
		require.NoError(t, err)
		assert.Equal(t, paging.PathZeroCopy, v.Path, "layer %d", layer)
		assert.Equal(t, canonical(t, l.src, l.weights[layer]), r.readback(t, v.Ptr, v.Len))
		require.NoError(t, db.Release(tk))
	}
	assert.Equal(t, uint64(5), db.Metrics().ZeroCopyLayers)
	require.NoError(t, db.Close())
	require.NoError(t, l.src.Close(l.id))
	st := r.pool.Stats()
	assert.Equal(t, st.Registrations, st.Unregistered)
	assert.Zero(t, r.ctx.Counters().RegisteredLiveBytes)
}
