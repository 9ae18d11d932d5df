package paging_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

const (
	mib    = 1 << 20
	prefix = 4096 // a non-zero padding prefix, so that no region starts at offset 0
)

// layered is a real external-data file of whole-layer weights and its mapping.
type layered struct {
	path    string
	src     *paging.MmapSource
	id      paging.MappingID // the file's mapping in src
	weights []*paging.LazyWeight
}

// writeLayered writes layers whole-layer BlockQuantizedMoe weights of regionsPerLayer
// back-to-back regions of regionBytes each into a temp file after a 0xAB prefix (a
// pagingtest.LayerFile), maps it in a source of its own and returns the weights (uint8
// [layerBytes], the regions in order). The source is closed at cleanup, after every pipeline
// built later in the test.
func writeLayered(t testing.TB, regionBytes, regionsPerLayer, layers int, salt byte) *layered {
	t.Helper()
	f := pagingtest.LayerFile{Prefix: prefix, RegionBytes: regionBytes, RegionsPerLayer: regionsPerLayer, Layers: layers, Salt: salt}
	path := filepath.Join(t.TempDir(), "weights.bin")
	require.NoError(t, f.Create(path))
	l, err := f.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &layered{path: path, src: l.Source, id: l.ID, weights: l.Weights}
}

// canonical is the layer's source of truth: its regions concatenated in order.
func canonical(t testing.TB, src paging.RegionSource, w *paging.LazyWeight) []byte {
	t.Helper()
	img, err := w.AppendImage(nil, src)
	require.NoError(t, err)
	return img
}

// rig is an open test device with the streams and staging pool a pipeline needs. Everything is
// released at cleanup before drivertest checks for leaks.
type rig struct {
	env           *drivertest.Env
	ctx           *cudadrv.Context
	copy, compute *cudadrv.Stream
	pool          *paging.StagingPool
	k             *pagingtest.Kernels
}

func newRig(t *testing.T, opts sim.Options, poolCap uint64) *rig {
	t.Helper()
	return newRigPool(t, opts, paging.StagingPoolConfig{RetentionCap: poolCap})
}

// newRigPool is newRig with the staging pool configured by cfg.
func newRigPool(t *testing.T, opts sim.Options, cfg paging.StagingPoolConfig) *rig {
	t.Helper()
	env := drivertest.OpenWith(t, opts)
	r := &rig{env: env, ctx: env.Context}
	var err error
	r.copy, err = r.ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	r.compute, err = r.ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	r.pool, err = paging.NewStagingPoolWith(r.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, r.pool.Close())
		require.NoError(t, r.copy.Destroy())
		require.NoError(t, r.compute.Destroy())
	})
	return r
}

func (r *rig) transfer(t testing.TB, mode paging.TransferMode) *paging.CUDATransfer {
	t.Helper()
	return r.transferWith(t, paging.CUDATransferConfig{Mode: mode})
}

// transferWith fills cfg's context, streams and pool from the rig.
func (r *rig) transferWith(t testing.TB, cfg paging.CUDATransferConfig) *paging.CUDATransfer {
	t.Helper()
	cfg.Context, cfg.CopyStream, cfg.ComputeStream, cfg.Pool = r.ctx, r.copy, r.compute, r.pool
	tr, err := paging.NewCUDATransfer(cfg)
	require.NoError(t, err)
	return tr
}

// pipelineOver builds a double buffer over tr, closed at cleanup.
func pipelineOver(t testing.TB, tr paging.Transfer, slotBytes uint64) *paging.DoubleBuffer {
	t.Helper()
	db, err := paging.NewDoubleBuffer(tr, slotBytes)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// pipeline builds a double buffer over a CUDA transfer; it is closed at cleanup if the test
// did not close it (Close is idempotent).
func (r *rig) pipeline(t testing.TB, slotBytes uint64, mode paging.TransferMode) *paging.DoubleBuffer {
	t.Helper()
	return pipelineOver(t, r.transfer(t, mode), slotBytes)
}

func (r *rig) residency(t testing.TB, budget uint64, gate paging.Gate, mode paging.TransferMode) *paging.Residency {
	t.Helper()
	res, err := paging.NewResidency(paging.ResidencyConfig{
		Context: r.ctx, CopyStream: r.copy, ComputeStream: r.compute, Pool: r.pool,
		BudgetBytes: budget, DoubleBuffer: gate, Mode: mode,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Close() })
	return res
}

// readback drains both streams (off the hot path: Wait never blocks the host) and copies n
// device bytes at p back to the host.
func (r *rig) readback(t testing.TB, p cudadrv.DevicePtr, n uint64) []byte {
	t.Helper()
	require.NoError(t, r.copy.Synchronize())
	require.NoError(t, r.compute.Synchronize())
	out := make([]byte, n)
	require.NoError(t, r.ctx.CopyDtoH(out, p))
	return out
}

// kernels loads pagingtest's stream-holding kernels once per rig; they are unloaded at
// cleanup, after both streams drained (a module must outlive the kernels queued from it).
func (r *rig) kernels(t testing.TB) *pagingtest.Kernels {
	t.Helper()
	if r.k == nil {
		k, err := pagingtest.LoadKernels(r.ctx)
		require.NoError(t, err)
		t.Cleanup(func() {
			require.NoError(t, r.copy.Synchronize())
			require.NoError(t, r.compute.Synchronize())
			require.NoError(t, k.Close())
		})
		r.k = k
	}
	return r.k
}

// gate queues a closed gate on s: work queued on s afterwards waits until the test opens it,
// on either backend, so tests order events instead of timing them. The gate is opened at
// cleanup if the test did not (before the pipelines built earlier drain at their cleanup).
func (r *rig) gate(t testing.TB, s *cudadrv.Stream) *pagingtest.Gate {
	t.Helper()
	g, err := r.kernels(t).Gate(s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Open() })
	return g
}

// spin queues pagingtest's spin kernel for d on s: the benchmark's compute proxy.
func (r *rig) spin(t testing.TB, s *cudadrv.Stream, d time.Duration) {
	t.Helper()
	require.NoError(t, r.kernels(t).Spin(s, d))
}

// modes runs f once per transfer mode, as subtests sharing nothing.
func modes(t *testing.T, f func(t *testing.T, mode paging.TransferMode)) {
	for _, m := range []paging.TransferMode{paging.ModeStaging, paging.ModeZeroCopy} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}
