package sim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// TestTimingModelMakesOverlapObservable runs a modelled copy and a modelled kernel on two
// streams and on one, and checks the event intervals overlap in the first case and are
// ordered in the second.
func TestTimingModelMakesOverlapObservable(t *testing.T) {
	const (
		bandwidth = 100e6 // bytes/s
		copyBytes = 8 << 20
		kernel    = 80 * time.Millisecond
	)
	copyTime := time.Duration(copyBytes / bandwidth * float64(time.Second))
	e := newEnv(t, sim.Options{CopyBandwidth: bandwidth, KernelDuration: kernel})
	copyStream, computeStream := e.stream(), e.stream()
	buf := e.alloc(copyBytes)
	pinned, err := e.d.MemHostAlloc(copyBytes)
	require.NoError(t, err)
	c0, c1, k0, k1 := e.event(0), e.event(0), e.event(0), e.event(0)
	elapsed := func(a, b cudadrv.RawEvent) float32 {
		ms, err := e.d.EventElapsedTime(a, b)
		require.NoError(t, err)
		return ms
	}

	// Both streams start behind one gate so neither runs ahead.
	g, start := newGate(t), e.event(cudadrv.EventDisableTiming)
	gateStream := e.stream()
	e.launchGate(gateStream, g)
	require.NoError(t, e.d.EventRecord(start, gateStream))
	require.NoError(t, e.d.StreamWaitEvent(copyStream, start))
	require.NoError(t, e.d.StreamWaitEvent(computeStream, start))

	require.NoError(t, e.d.EventRecord(c0, copyStream))
	require.NoError(t, e.d.MemcpyHtoDAsync(buf, pinned, copyStream))
	require.NoError(t, e.d.EventRecord(c1, copyStream))
	require.NoError(t, e.d.EventRecord(k0, computeStream))
	require.NoError(t, e.launchTouch(computeStream, e.scratch, 8))
	require.NoError(t, e.d.EventRecord(k1, computeStream))
	g.open()
	require.NoError(t, e.d.CtxSynchronize())

	assert.GreaterOrEqual(t, elapsed(c0, c1), float32(copyTime.Seconds()*1000), "the copy took size/bandwidth")
	assert.GreaterOrEqual(t, elapsed(k0, k1), float32(kernel.Seconds()*1000), "the kernel took KernelDuration")
	assert.Greater(t, elapsed(c0, k1), float32(0), "the kernel ended after the copy began")
	assert.Greater(t, elapsed(k0, c1), float32(0), "the copy ended after the kernel began: they overlapped")

	// On one stream the same work is serialized.
	require.NoError(t, e.d.EventRecord(c0, copyStream))
	require.NoError(t, e.d.MemcpyHtoDAsync(buf, pinned, copyStream))
	require.NoError(t, e.d.EventRecord(c1, copyStream))
	require.NoError(t, e.launchTouch(copyStream, e.scratch, 8))
	require.NoError(t, e.d.EventRecord(k1, copyStream))
	require.NoError(t, e.d.StreamSynchronize(copyStream))
	assert.GreaterOrEqual(t, elapsed(c1, k1), float32(kernel.Seconds()*1000), "the kernel ran after the copy")
}
