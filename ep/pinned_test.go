package ep_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// TestPinnedBuffersRoundTripThroughTheDevice: bytes written into pinned memory reach a device
// buffer and come back into another pinned buffer unchanged.
func TestPinnedBuffersRoundTripThroughTheDevice(t *testing.T) {
	p := newProvider(t)
	in, err := p.AllocPinned(4096)
	require.NoError(t, err)
	out, err := p.AllocPinned(4096)
	require.NoError(t, err)
	want := drivertest.Float32Bytes(drivertest.RandomFloat32(1024))
	copy(in.Bytes(), want)
	b := alloc(t, p, 4096)
	require.NoError(t, p.CopyToDevice(b, 0, in.Bytes()))
	require.NoError(t, p.CopyToHost(out.Bytes(), b, 0))
	assert.Equal(t, want, out.Bytes())
	require.NoError(t, in.Release())
	assert.ErrorIs(t, in.Release(), ep.ErrReleased)
	assert.Nil(t, in.Bytes(), "a released buffer has no memory")
	require.NoError(t, out.Release())
}

func TestPinnedAllocationsAreRefusedWhenTheyCannotBeMade(t *testing.T) {
	p := newProvider(t)
	_, err := p.AllocPinned(0)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	kept, err := p.AllocPinned(64)
	require.NoError(t, err)
	captureRelu(t, p, graphs.Primary, x, y)
	_, err = p.AllocPinned(64)
	assert.ErrorIs(t, err, ep.ErrCaptureLive, "pinning synchronizes: refused during a capture")
	require.NoError(t, kept.Release(), "a release during the capture waits for it to end")
	require.NoError(t, p.EndCapture(graphs.Primary))
	assert.Equal(t, uint64(1), p.DeferredReleases(), "the release was deferred past the capture")
}
