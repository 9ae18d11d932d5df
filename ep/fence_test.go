package ep_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// TestFenceOrdersAnotherProvidersStream: p's kernel takes 2 ms on the simulated device; q waits
// on a fence recorded after it and then copies its output. Without the wait q's copy (queued
// at once on q's idle stream) would read the output before the kernel wrote it.
func TestFenceOrdersAnotherProvidersStream(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{KernelDuration: 2 * time.Millisecond})
	}
	p, q := newProvider(t), newProvider(t)
	assert.NotZero(t, p.StreamHandle())
	assert.NotEqual(t, p.StreamHandle(), q.StreamHandle(), "each provider has its own stream")
	xs := drivertest.RandomFloat32(64)
	x := upload(t, p, xs)
	y := alloc(t, p, x.Size())
	z := alloc(t, q, x.Size())
	relu := getKernel(t, p, "Relu", 14, f32(64))
	for round := 0; round < 3; round++ {
		require.NoError(t, q.Memset(z, 0, z.Size(), 0))
		require.NoError(t, p.Memset(y, 0, y.Size(), 0))
		require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
		f, err := p.RecordFence()
		require.NoError(t, err)
		require.NoError(t, f.WaitOn(q))
		require.NoError(t, f.WaitOn(p), "waiting on the fence's own provider is a no-op")
		require.NoError(t, q.CopyBuffer(z, 0, y, 0, y.Size()))
		assert.Equal(t, reluOf(xs), download(t, q, z), "round %d: q read y before p's kernel wrote it", round)
		require.NoError(t, f.Synchronize())
		require.NoError(t, f.Release())
		require.NoError(t, f.Release(), "a second release does nothing")
		assert.ErrorIs(t, f.WaitOn(q), ep.ErrInvalidArgument)
		assert.ErrorIs(t, f.Synchronize(), ep.ErrInvalidArgument)
	}
}

// TestFenceSynchronizeWaitsForTheMarkedWork: after Synchronize the host reads the kernel's
// output through a path that does not itself wait for the compute stream.
func TestFenceSynchronizeWaitsForTheMarkedWork(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{KernelDuration: 2 * time.Millisecond})
	}
	p := newProvider(t)
	xs := drivertest.RandomFloat32(64)
	x := upload(t, p, xs)
	y := alloc(t, p, x.Size())
	relu := getKernel(t, p, "Relu", 14, f32(64))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
	f, err := p.RecordFence()
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Release()) }()
	require.NoError(t, f.Synchronize())
	assert.Equal(t, reluOf(xs), download(t, p, y))
}

// TestFencesAreRefusedInsideACapture: a fence recorded into a graph would mark nothing when the
// graph replays, so recording is refused while the provider captures, and the capture survives.
func TestFencesAreRefusedInsideACapture(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	captureRelu(t, p, graphs.Primary, x, y)
	_, err := p.RecordFence()
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	require.NoError(t, p.EndCapture(graphs.Primary))
}

// TestOrderAfterOrdersAnotherProvidersStream: OrderAfter(q, p) makes q's next copy wait for
// p's 2 ms kernel on the simulated device, as a fence recorded and waited for by hand does.
func TestOrderAfterOrdersAnotherProvidersStream(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{KernelDuration: 2 * time.Millisecond})
	}
	p, q := newProvider(t), newProvider(t)
	xs := drivertest.RandomFloat32(64)
	x := upload(t, p, xs)
	y := alloc(t, p, x.Size())
	z := alloc(t, q, x.Size())
	relu := getKernel(t, p, "Relu", 14, f32(64))
	require.NoError(t, p.Memset(y, 0, y.Size(), 0))
	require.NoError(t, relu.Execute([]ep.Tensor{tensor(x, 64)}, []ep.Tensor{tensor(y, 64)}))
	require.NoError(t, ep.OrderAfter(q, p))
	require.NoError(t, q.CopyBuffer(z, 0, y, 0, y.Size()))
	assert.Equal(t, reluOf(xs), download(t, q, z), "q read y before p's kernel wrote it")
}
