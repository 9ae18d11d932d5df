package paging_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
)

const (
	mib       = 1 << 20
	mappingID = paging.MappingID(42)
	prefix    = 4096 // a non-zero padding prefix, so that no region starts at offset 0
)

// patternByte is byte i of region idx of a weight set salted with salt: never zero, different
// across regions, offsets and salts, so that a short, shifted, misordered, zero or foreign copy
// fails a byte-identity check.
func patternByte(idx, i int, salt byte) byte {
	return byte((i*31+idx*17+int(salt)*101)%255) + 1
}

// layered is a real external-data file of whole-layer weights and its mapping.
type layered struct {
	path    string
	src     *paging.MmapSource
	weights []*paging.LazyWeight
}

// writeLayered writes layers whole-layer BlockQuantizedMoe weights of regionsPerLayer
// back-to-back regions of regionBytes each into a temp file after a 0xAB prefix, maps it under
// mappingID and returns the weights (uint8 [layerBytes], the regions in order). The source is
// closed at cleanup, after every pipeline built later in the test.
func writeLayered(t testing.TB, regionBytes, regionsPerLayer, layers int, salt byte) *layered {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weights.bin")
	f, err := os.Create(path)
	require.NoError(t, err)
	pad := make([]byte, prefix)
	for i := range pad {
		pad[i] = 0xAB
	}
	_, err = f.Write(pad)
	require.NoError(t, err)
	buf := make([]byte, regionBytes)
	var weights []paging.WeightSpec
	off := uint64(prefix)
	for l := 0; l < layers; l++ {
		spec := paging.WeightSpec{
			Boundary: paging.BoundaryBlockQuantizedMoe,
			DType:    paging.Uint8,
			Shape:    []int64{int64(regionBytes * regionsPerLayer)},
		}
		for r := 0; r < regionsPerLayer; r++ {
			idx := 1 + l*regionsPerLayer + r
			for i := range buf {
				buf[i] = patternByte(idx, i, salt)
			}
			_, err = f.Write(buf)
			require.NoError(t, err)
			spec.Regions = append(spec.Regions, paging.Region{Mapping: mappingID, Offset: off, Len: uint64(regionBytes)})
			off += uint64(regionBytes)
		}
		weights = append(weights, spec)
	}
	require.NoError(t, f.Close())
	src := paging.NewMmapSource()
	require.NoError(t, src.Open(mappingID, path))
	t.Cleanup(func() { _ = src.Close() })
	out := &layered{path: path, src: src}
	for _, spec := range weights {
		w, err := paging.NewLazyWeight(spec)
		require.NoError(t, err)
		out.weights = append(out.weights, w)
	}
	return out
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
	spinFn        *cudadrv.Function
	spinArgs      *cudadrv.KernelArgs
}

func newRig(t *testing.T, opts sim.Options, poolCap uint64) *rig {
	t.Helper()
	env := drivertest.OpenWith(t, opts)
	r := &rig{env: env, ctx: env.Context}
	var err error
	r.copy, err = r.ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	r.compute, err = r.ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	r.pool, err = paging.NewStagingPool(r.ctx, poolCap)
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

// spinPTX is paging_spin(ns): one thread spins on %globaltimer until ns nanoseconds have
// passed, a kernel of fixed duration whatever the clocks. The sim runs the Go version below.
const spinPTX = `.version 7.8
.target sm_75
.address_size 64

.visible .entry paging_spin(
	.param .u64 paging_spin_ns
)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [paging_spin_ns];
	mov.u64 %rd2, %globaltimer;
SPIN:
	mov.u64 %rd3, %globaltimer;
	sub.s64 %rd4, %rd3, %rd2;
	setp.lt.u64 %p1, %rd4, %rd1;
	@%p1 bra SPIN;
	ret;
}
`

func init() {
	sim.RegisterKernel("paging_spin", func(l *sim.Launch) error {
		time.Sleep(time.Duration(l.U64Arg(0)))
		return nil
	})
}

// spin queues paging_spin(d) on s: a kernel that occupies s for d on either backend (used to
// hold copies in flight, and as the benchmark's compute proxy).
func (r *rig) spin(t testing.TB, s *cudadrv.Stream, d time.Duration) {
	t.Helper()
	if r.spinFn == nil {
		mod, err := r.ctx.LoadModule([]byte(spinPTX))
		require.NoError(t, err)
		t.Cleanup(func() {
			// A module must outlive the kernels queued from it.
			require.NoError(t, r.copy.Synchronize())
			require.NoError(t, r.compute.Synchronize())
			require.NoError(t, mod.Unload())
		})
		r.spinFn, err = mod.Function("paging_spin")
		require.NoError(t, err)
		r.spinArgs = new(cudadrv.KernelArgs)
	}
	r.spinArgs.Reset()
	r.spinArgs.U64(uint64(d))
	one := cudadrv.Dim3{X: 1, Y: 1, Z: 1}
	require.NoError(t, s.Launch(r.spinFn, one, one, 0, r.spinArgs))
}

// modes runs f once per transfer mode, as subtests sharing nothing.
func modes(t *testing.T, f func(t *testing.T, mode paging.TransferMode)) {
	for _, m := range []paging.TransferMode{paging.ModeStaging, paging.ModeZeroCopy} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}
