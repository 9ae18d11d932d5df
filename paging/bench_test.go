package paging_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/paging"
	"github.com/cudaep/cudaep/paging/pagingtest"
)

// The overlap benchmark (the seed's one_slot_vs_two_slot_overlap_probe, extended). It prints a
// table and asserts nothing about timing. Run it with
//
//	CUDAEP_BENCH=1 go test -run TestBenchOverlap -v ./paging/                 (sim)
//	CUDAEP_BENCH=1 CUDAEP_TEST_BACKEND=cuda go test -run TestBenchOverlap -v ./paging/
//
// CUDAEP_BENCH_SHRINK=N divides the layer sizes (4, 64 and 256 MiB) by N; on the sim it
// defaults to 4 so the run stays short.
//
// The compute proxy is a kernel of fixed duration C, pagingtest's spin kernel: on the GPU
// hand-written PTX that spins one thread on %globaltimer for the requested nanoseconds, on the
// sim a Go kernel that sleeps as long. C is set to the time the raw pinned H2D copy of one
// layer takes (measured first, in the same run), so that copy and compute are balanced and
// overlap matters most. On the sim, copies are modelled at simCopyRateBs.
//
// Arms, each over the same layers, timed from the first enqueue to both streams drained:
//
//	raw  cuMemcpyHtoDAsync from one pinned buffer, per layer (the link's rate)
//	C    the compute proxy alone, per layer
//	X    the copy path alone: the pipelined loop with no compute
//	S    serial one-slot: prefetch → wait → compute → release, and the host waits for the
//	     compute before the next prefetch, so no copy overlaps compute
//	P    pipelined two-slot: prefetch N+1 before consuming N
//
// reported as P/max(C,X) (1.0 is perfect overlap), S/(C+X) (1.0 is no overhead) and the link
// efficiency (bytes/X)/raw, for both transfer paths.

const (
	benchLayers   = 8
	benchRuns     = 3
	simCopyRateBs = 4e9 // the sim's modelled link, bytes per second
)

type benchRow struct {
	layerBytes        uint64
	path              string
	raw               float64 // GB/s
	c, x, s, p        time.Duration
	hostCopy, stWait  time.Duration
	zeroCopy, staging uint64
}

func TestBenchOverlap(t *testing.T) {
	if os.Getenv("CUDAEP_BENCH") != "1" {
		t.Skip("set CUDAEP_BENCH=1 to run the overlap benchmark")
	}
	shrink := 1
	if drivertest.BackendName() == "sim" {
		shrink = 4
	}
	if v := os.Getenv("CUDAEP_BENCH_SHRINK"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "CUDAEP_BENCH_SHRINK")
		require.Positive(t, n)
		shrink = n
	}
	var rows []benchRow
	var device string
	for _, mibs := range []uint64{4, 64, 256} {
		layerBytes := mibs * mib / uint64(shrink)
		t.Run(fmt.Sprintf("%dKiB", layerBytes>>10), func(t *testing.T) {
			r := newRig(t, sim.Options{CopyBandwidth: simCopyRateBs}, 0)
			device = r.ctx.Device().Name()
			rows = append(rows, benchSize(t, r, layerBytes)...)
		})
	}
	t.Logf("overlap benchmark: backend %s (%s), GOMAXPROCS %d, %d layers per arm, median of %d runs, per-layer times",
		drivertest.BackendName(), device, runtime.GOMAXPROCS(0), benchLayers, benchRuns)
	t.Logf("%-9s %-10s %9s %9s %9s %9s %9s %11s %9s %9s %9s %9s",
		"layer", "path", "raw GB/s", "C ms", "X ms", "S ms", "P ms", "P/max(C,X)", "S/(C+X)", "link eff", "host ms", "stwait ms")
	for _, w := range rows {
		x := w.x.Seconds()
		eff := float64(w.layerBytes) / x / 1e9 / w.raw
		t.Logf("%-9s %-10s %9.2f %9.3f %9.3f %9.3f %9.3f %11.3f %9.3f %9.3f %9.3f %9.3f",
			sizeName(w.layerBytes), w.path, w.raw, ms(w.c), ms(w.x), ms(w.s), ms(w.p),
			w.p.Seconds()/max(w.c.Seconds(), x), w.s.Seconds()/(w.c.Seconds()+x), eff, ms(w.hostCopy), ms(w.stWait))
	}
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

func sizeName(n uint64) string {
	if n >= mib {
		return fmt.Sprintf("%dMiB", n/mib)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// benchFile writes benchLayers layers of layerBytes each (a pagingtest.LayerFile, the one the
// benchmark driver pages too) and returns the mapped source and the weights.
func benchFile(t *testing.T, layerBytes uint64) (*paging.MmapSource, []*paging.LazyWeight) {
	f := pagingtest.LayerFile{RegionBytes: int(layerBytes), RegionsPerLayer: 1, Layers: benchLayers}
	path := filepath.Join(t.TempDir(), "bench.bin")
	require.NoError(t, f.Create(path))
	l, err := f.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Source, l.Weights
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func benchSize(t *testing.T, r *rig, layerBytes uint64) []benchRow {
	src, weights := benchFile(t, layerBytes)

	drain := func() {
		require.NoError(t, r.copy.Synchronize())
		require.NoError(t, r.compute.Synchronize())
	}
	timed := func(f func()) time.Duration {
		var ds []time.Duration
		for run := 0; run < benchRuns+1; run++ { // the first run warms up
			drain()
			start := time.Now()
			f()
			drain()
			if run > 0 {
				ds = append(ds, time.Since(start)/benchLayers)
			}
		}
		return median(ds)
	}

	// raw: pinned H2D of one layer, back to back.
	host, err := r.ctx.AllocHost(layerBytes)
	require.NoError(t, err)
	for i := range host.Bytes() {
		host.Bytes()[i] = byte(i%251) + 1
	}
	dev, err := r.ctx.Alloc(layerBytes)
	require.NoError(t, err)
	raw := timed(func() {
		for l := 0; l < benchLayers; l++ {
			require.NoError(t, r.copy.CopyHtoDAsync(dev.Ptr(), host.Bytes()))
		}
	})
	require.NoError(t, dev.Free())
	require.NoError(t, host.Free())
	rawGBs := float64(layerBytes) / raw.Seconds() / 1e9

	proxy := time.Duration(float64(layerBytes) / (rawGBs * 1e9) * float64(time.Second))
	compute := func() { r.spin(t, r.compute, proxy) }
	c := timed(func() {
		for l := 0; l < benchLayers; l++ {
			compute()
		}
	})

	var rows []benchRow
	for _, mode := range []paging.TransferMode{paging.ModeStaging, paging.ModeZeroCopy} {
		tr := r.transfer(t, mode)
		db, err := paging.NewDoubleBuffer(tr, layerBytes)
		require.NoError(t, err)
		pipelined := func(withCompute bool) func() {
			return func() {
				pending, err := db.Prefetch(0, weights[0], src)
				require.NoError(t, err)
				for l := 0; l < benchLayers; l++ {
					tk := pending
					if l+1 < benchLayers {
						pending, err = db.Prefetch(paging.LayerID(l+1), weights[l+1], src)
						require.NoError(t, err)
					}
					_, err := db.Wait(tk)
					require.NoError(t, err)
					if withCompute {
						compute()
					}
					require.NoError(t, db.Release(tk))
				}
			}
		}
		x := timed(pipelined(false))
		s := timed(func() {
			for l := 0; l < benchLayers; l++ {
				tk, err := db.Prefetch(paging.LayerID(l), weights[l], src)
				require.NoError(t, err)
				_, err = db.Wait(tk)
				require.NoError(t, err)
				compute()
				require.NoError(t, db.Release(tk))
				require.NoError(t, r.compute.Synchronize()) // no overlap: the next copy starts after
			}
		})
		before := tr.Metrics()
		p := timed(pipelined(true))
		after := tr.Metrics()

		// One correctness check off the clock: the last layer paged is exact.
		tk, err := db.Prefetch(benchLayers-1, weights[benchLayers-1], src)
		require.NoError(t, err)
		v, err := db.Wait(tk)
		require.NoError(t, err)
		require.Equal(t, canonical(t, src, weights[benchLayers-1]), r.readback(t, v.Ptr, v.Len))
		require.NoError(t, db.Release(tk))
		m := db.Metrics()
		require.Zero(t, db.Quarantined())
		require.NoError(t, db.Close())

		rows = append(rows, benchRow{
			layerBytes: layerBytes, path: mode.String(), raw: rawGBs, c: c, x: x, s: s, p: p,
			hostCopy: (after.HostCopy - before.HostCopy) / (benchLayers * (benchRuns + 1)),
			stWait:   (after.StagingWait - before.StagingWait) / (benchLayers * (benchRuns + 1)),
			zeroCopy: m.ZeroCopyLayers, staging: m.StagingLayers,
		})
	}
	return rows
}
