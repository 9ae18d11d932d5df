package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
)

// Per-call host cost of the hot calls on the real driver, to compare side by side with
// bench/baselines/raw_driver_bench.c, which makes the same calls from C: an empty kernel launch,
// a 4-byte H2D copy from pinned memory, an event record and a 1-kernel graph launch. Each
// syncs the stream every syncEvery calls with the timer stopped, so only enqueueing is timed.
// Skipped unless CUDAEP_TEST_BACKEND=cuda.

const syncEvery = 1000

// benchLoop calls call b.N times, synchronizing g's stream every syncEvery calls off the clock.
func benchLoop(b *testing.B, g *gpu, call func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := call(); err != nil {
			b.Fatal(err)
		}
		if i%syncEvery == syncEvery-1 {
			b.StopTimer()
			require.NoError(b, g.b.StreamSynchronize(g.s))
			b.StartTimer()
		}
	}
	b.StopTimer()
	require.NoError(b, g.b.StreamSynchronize(g.s))
}

func BenchmarkLaunchKernel(b *testing.B) {
	g, done := newGPU(b)
	defer done()
	m := g.load(b)
	defer func() { require.NoError(b, g.b.ModuleUnload(m)) }()
	f := g.function(b, m, "empty")
	benchLoop(b, g, func() error { return g.b.LaunchKernel(f, one, one, 0, g.s, nil) })
}

func BenchmarkMemcpyHtoDAsync(b *testing.B) {
	g, done := newGPU(b)
	defer done()
	d := g.alloc(b, 4)
	defer func() { require.NoError(b, g.b.MemFree(d)) }()
	src, err := g.b.MemHostAlloc(4)
	require.NoError(b, err)
	defer func() { require.NoError(b, g.b.MemFreeHost(src)) }()
	copy(src, []byte{1, 2, 3, 4})
	benchLoop(b, g, func() error { return g.b.MemcpyHtoDAsync(d, src, g.s) })
}

func BenchmarkEventRecord(b *testing.B) {
	g, done := newGPU(b)
	defer done()
	ev, err := g.b.EventCreate(cudadrv.EventDisableTiming)
	require.NoError(b, err)
	defer func() { require.NoError(b, g.b.EventDestroy(ev)) }()
	benchLoop(b, g, func() error { return g.b.EventRecord(ev, g.s) })
}

func BenchmarkGraphLaunch(b *testing.B) {
	g, done := newGPU(b)
	defer done()
	m := g.load(b)
	defer func() { require.NoError(b, g.b.ModuleUnload(m)) }()
	f := g.function(b, m, "empty")
	require.NoError(b, g.b.StreamBeginCapture(g.s, cudadrv.CaptureModeThreadLocal))
	require.NoError(b, g.b.LaunchKernel(f, one, one, 0, g.s, nil))
	graph, err := g.b.StreamEndCapture(g.s)
	require.NoError(b, err)
	defer func() { require.NoError(b, g.b.GraphDestroy(graph)) }()
	exec, err := g.b.GraphInstantiate(graph, 0)
	require.NoError(b, err)
	defer func() { require.NoError(b, g.b.GraphExecDestroy(exec)) }()
	require.NoError(b, g.b.GraphUpload(exec, g.s))
	benchLoop(b, g, func() error { return g.b.GraphLaunch(exec, g.s) })
}
