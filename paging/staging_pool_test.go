package paging_test

import (
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
