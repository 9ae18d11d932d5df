package ep_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/paging"
)

// patternLayers writes n layers of size bytes each into one external-data file after a
// 100-byte header (so layers do not start on page boundaries). Layer i's byte j is a distinct,
// never-zero function of (i, j).
func patternLayers(t *testing.T, n, size int) (string, [][]byte) {
	t.Helper()
	data := make([]byte, 100)
	for i := range data {
		data[i] = 0xEE
	}
	layers := make([][]byte, n)
	for i := range layers {
		layers[i] = make([]byte, size)
		for j := range layers[i] {
			layers[i][j] = byte((j*7+i*31)%251) + 1
		}
		data = append(data, layers[i]...)
	}
	path := filepath.Join(t.TempDir(), "layers.onnx.data")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path, layers
}

// byteWeights opens path and describes each layer as a lazy weight of uint8 bytes.
func byteWeights(t *testing.T, p *ep.Provider, path string, n, size int) []*ep.LazyWeight {
	t.Helper()
	file, err := p.OpenExternalData(path)
	require.NoError(t, err)
	ws := make([]*ep.LazyWeight, n)
	for i := range ws {
		// Two regions per layer, to check the image is their concatenation.
		half := uint64(size / 2)
		off := uint64(100 + size*i)
		ws[i], err = p.NewLazyWeight(ep.WeightSpec{
			Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{int64(size)},
			Regions: []paging.Region{{Mapping: file, Offset: off, Len: half}, {Mapping: file, Offset: off + half, Len: uint64(size) - half}},
		})
		require.NoError(t, err)
	}
	return ws
}

// readView copies a slot view's bytes into a buffer with Identity over bool (one byte per
// element: a raw byte copy) and reads them back.
func readView(t *testing.T, p *ep.Provider, v ep.SlotView) []byte {
	t.Helper()
	info := ep.TensorInfo{DType: kernels.Bool, Shape: []int64{int64(v.Len)}}
	id, err := p.GetKernel(ep.Spec{Op: "Identity", Opset: 13, Inputs: []ep.TensorInfo{info}})
	require.NoError(t, err)
	out := alloc(t, p, v.Len)
	require.NoError(t, id.Execute([]ep.Tensor{{TensorInfo: info, Ptr: v.Ptr}}, []ep.Tensor{{TensorInfo: info, Ptr: out.Ptr()}}))
	got := make([]byte, v.Len)
	require.NoError(t, p.CopyToHost(got, out, 0))
	return got
}

// TestDoubleBufferIsByteIdenticalAcrossWraparound drives the direct pipeline one layer ahead
// over more layers than slots, in both transfer modes, and compares every slot's bytes with
// the file.
func TestDoubleBufferIsByteIdenticalAcrossWraparound(t *testing.T) {
	for _, mode := range []ep.TransferMode{paging.ModeZeroCopy, paging.ModeStaging} {
		t.Run(mode.String(), func(t *testing.T) {
			p := newProvider(t)
			const n, size = 5, 12288 + 60
			path, layers := patternLayers(t, n, size)
			ws := byteWeights(t, p, path, n, size)
			db, err := p.NewDoubleBuffer(size, mode)
			require.NoError(t, err)
			defer func() { assert.NoError(t, db.Close()) }()
			assert.Equal(t, uint64(size), db.Capacity())

			next, err := db.Prefetch(0, ws[0])
			require.NoError(t, err)
			slotsSeen := map[uint64]bool{}
			for i := 0; i < n; i++ {
				cur := next
				if i+1 < n {
					next, err = db.Prefetch(ep.LayerID(i+1), ws[i+1])
					require.NoError(t, err, "prefetch layer %d before consuming %d", i+1, i)
				}
				v, err := db.Wait(cur)
				require.NoError(t, err)
				assert.Equal(t, uint64(size), v.Len)
				slotsSeen[uint64(v.Ptr)] = true
				assert.Equal(t, layers[i], readView(t, p, v), "layer %d", i)
				require.NoError(t, db.Release(cur))
			}
			assert.Len(t, slotsSeen, 2, "both slots were used and reused")
			m := db.Metrics()
			assert.Equal(t, uint64(n), m.LayersPrefetched)
			assert.Equal(t, uint64(n), m.LayersConsumed)
			assert.Equal(t, uint64(n), m.LayersReleased)
			assert.Equal(t, uint64(n-2), m.SlotReuses)
			assert.Zero(t, m.Poisoned)
			assert.Zero(t, db.Quarantined())
		})
	}
}

func TestDoubleBufferCancelFreesSlotAndStaleTicketIsRefused(t *testing.T) {
	p := newProvider(t)
	const size = 4096
	path, layers := patternLayers(t, 4, size)
	ws := byteWeights(t, p, path, 4, size)
	db, err := p.NewDoubleBuffer(size, paging.ModeStaging)
	require.NoError(t, err)
	defer func() { assert.NoError(t, db.Close()) }()

	keep, err := db.Prefetch(0, ws[0])
	require.NoError(t, err)
	doomed, err := db.Prefetch(1, ws[1])
	require.NoError(t, err)
	_, err = db.Prefetch(2, ws[2])
	require.ErrorIs(t, err, paging.ErrNoFreeSlot, "both slots are taken")

	dv, err := db.Wait(doomed)
	require.NoError(t, err)
	require.NoError(t, db.Cancel(doomed))
	assert.Equal(t, uint64(1), db.Metrics().Cancelled)
	assert.Zero(t, db.Quarantined(), "a cancel does not quarantine")

	reuse, err := db.Prefetch(2, ws[2])
	require.NoError(t, err, "the cancelled slot is reusable")
	rv, err := db.Wait(reuse)
	require.NoError(t, err)
	assert.Equal(t, dv.Ptr, rv.Ptr, "the new layer lands in the cancelled layer's slot")
	assert.Equal(t, layers[2], readView(t, p, rv))

	// The cancelled ticket's slot now holds layer 2: the old ticket is stale, never served.
	_, err = db.Wait(doomed)
	var stale *paging.StaleGenerationError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, ep.LayerID(1), stale.Layer)
	assert.ErrorIs(t, err, paging.ErrStaleGeneration)
	assert.GreaterOrEqual(t, db.Metrics().StaleRejected, uint64(1))

	require.NoError(t, db.Release(reuse))
	kv, err := db.Wait(keep)
	require.NoError(t, err)
	assert.Equal(t, layers[0], readView(t, p, kv))
	require.NoError(t, db.Release(keep))
	assert.Equal(t, paging.SlotDraining, db.SlotState(0))
	assert.Equal(t, paging.SlotQuarantined, db.SlotState(7), "no such slot")
}

func TestDoubleBufferDeclinesPoolCapacityAndTearsDownInFlight(t *testing.T) {
	p := newProvider(t, func(o *ep.Options) { o.StagingPoolCapBytes = 1 << 20 })
	before := p.Stats()
	_, err := p.NewDoubleBuffer(1<<20, paging.ModeStaging)
	require.ErrorIs(t, err, paging.ErrDeclined)
	var pc *paging.PoolCapacityError
	require.ErrorAs(t, err, &pc)
	assert.Equal(t, before.Allocs, p.Stats().Allocs, "declined before reserving anything")

	_, err = p.NewDoubleBuffer(0, paging.ModeStaging)
	require.Error(t, err)

	// Teardown with one layer in use and one still unconsumed drains cleanly.
	const size = 2048
	path, _ := patternLayers(t, 2, size)
	ws := byteWeights(t, p, path, 2, size)
	db, err := p.NewDoubleBuffer(size, paging.ModeStaging)
	require.NoError(t, err)
	t0, err := db.Prefetch(0, ws[0])
	require.NoError(t, err)
	_, err = db.Prefetch(1, ws[1])
	require.NoError(t, err)
	_, err = db.Wait(t0)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	assert.Equal(t, uint64(2), db.Metrics().DrainedAtClose)
	require.NoError(t, db.Close(), "Close is idempotent")
	_, err = db.Prefetch(2, ws[0])
	assert.ErrorIs(t, err, paging.ErrClosed)
	assert.Equal(t, before.LiveBytes, p.Stats().LiveBytes, "the slots were freed")
}
