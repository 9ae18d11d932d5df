package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
)

// TestGPUPeerBindings calls the three peer entry points on the real driver: the capability
// query for every pair of devices present, an enable of the context for itself (which the
// driver must refuse: a context is not its own peer), and a peer copy within one context.
func TestGPUPeerBindings(t *testing.T) {
	g, done := newGPU(t)
	defer done()
	b := g.b
	n, err := b.DeviceCount()
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			can, err := b.DeviceCanAccessPeer(i, j)
			require.NoError(t, err, "cuDeviceCanAccessPeer(%d, %d)", i, j)
			if i == j {
				assert.False(t, can, "device %d is not its own peer", i)
			}
			t.Logf("cuDeviceCanAccessPeer(%d, %d) = %v", i, j, can)
		}
	}
	_, err = b.DeviceCanAccessPeer(0, n)
	assert.Error(t, err, "an ordinal past the device count")

	err = b.CtxEnablePeerAccess(g.ctx)
	require.Error(t, err, "enabling a context's access to itself")
	assert.Equal(t, cudadrv.ErrorPeerAccessUnsupported, cudadrv.ResultOf(err), "as the H200 answered (the simulator does the same)")

	const size = 1 << 20
	d := g.alloc(t, 2*size)
	defer func() { assert.NoError(t, b.MemFree(d)) }()
	require.NoError(t, b.MemcpyHtoD(d, pattern(size, 9)))
	require.NoError(t, b.MemsetD8(d+size, 0x5a, size))
	require.NoError(t, b.MemcpyPeerAsync(d+size, g.ctx, d, g.ctx, size, g.s))
	require.NoError(t, b.StreamSynchronize(g.s))
	got := make([]byte, size)
	require.NoError(t, b.MemcpyDtoH(got, d+size))
	assert.Equal(t, pattern(size, 9), got)
}
