package ep_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
)

// TestMeasureHostToDeviceCopiesAndFreesWhatItMade: the measurement allocates one pinned and
// one device buffer and one stream, copies, and frees all three before it returns.
func TestMeasureHostToDeviceCopiesAndFreesWhatItMade(t *testing.T) {
	p := newProvider(t)
	before := ep.ContextOf(p).Counters()
	rate, err := p.MeasureHostToDevice(1<<20, 4, 2)
	require.NoError(t, err)
	assert.Positive(t, rate)
	after := ep.ContextOf(p).Counters()
	assert.Equal(t, before.PinnedAllocs+1, after.PinnedAllocs, "one pinned buffer")
	assert.Equal(t, before.DeviceAllocs+1, after.DeviceAllocs, "one device buffer")
	assert.Equal(t, before.StreamsCreated+1, after.StreamsCreated, "one stream of its own")
	assert.Equal(t, drivertest.Leaks(before), drivertest.Leaks(after), "freed before it returned")
}

// TestMeasureHostToDeviceRefusesBadArguments: a zero size, copy count or run count is an
// argument error, refused before anything is allocated.
func TestMeasureHostToDeviceRefusesBadArguments(t *testing.T) {
	p := newProvider(t)
	before := ep.ContextOf(p).Counters()
	tests := []struct {
		name         string
		size         uint64
		copies, runs int
	}{
		{"zero size", 0, 1, 1},
		{"no copies", 64, 0, 1},
		{"no runs", 64, 1, 0},
		{"negative copies", 64, -1, 1},
	}
	for _, tt := range tests {
		_, err := p.MeasureHostToDevice(tt.size, tt.copies, tt.runs)
		assert.ErrorIs(t, err, ep.ErrInvalidArgument, tt.name)
	}
	assert.Equal(t, before, ep.ContextOf(p).Counters(), "nothing was allocated")
}

// TestMeasureHostToDeviceIsRefusedDuringACapture: the measurement allocates and
// synchronizes, which a live capture forbids; it is refused, and the capture survives.
func TestMeasureHostToDeviceIsRefusedDuringACapture(t *testing.T) {
	p := newProvider(t)
	x := upload(t, p, drivertest.RandomFloat32(64))
	y := alloc(t, p, x.Size())
	captureRelu(t, p, ep.Primary, x, y)
	_, err := p.MeasureHostToDevice(1<<10, 1, 1)
	assert.ErrorIs(t, err, ep.ErrCaptureLive)
	require.NoError(t, p.EndCapture(ep.Primary), "the refusal left the capture intact")
	_, err = p.ResetGraph(ep.Primary)
	require.NoError(t, err)
}
