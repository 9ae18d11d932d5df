package ep_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
)

// queueSlowCopy queues a device-to-device copy on p's compute stream that takes long against a
// staged copy's enqueue (1–2 µs): 16 MiB under the simulated bandwidth useSlowSimCopies sets
// (62 ms), 1 GiB on a GPU (0.4 ms on an H200). It first makes one staged copy, so that the
// staging slots (a pinned allocation, milliseconds) exist before the slow copy is queued.
func queueSlowCopy(t *testing.T, p *ep.Provider) {
	t.Helper()
	warm := alloc(t, p, 8)
	require.NoError(t, p.CopyToDevice(warm, 0, pattern(8, 1)))
	n := uint64(1 << 30)
	if drivertest.BackendName() == "sim" {
		n = 16 << 20
	}
	a, b := alloc(t, p, n), alloc(t, p, n)
	require.NoError(t, p.CopyBuffer(b, 0, a, 0, n))
}

// useSlowSimCopies makes the simulated device's copies take modelled time (256 MiB/s).
func useSlowSimCopies(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{CopyBandwidth: 256 << 20})
	}
}

// TestCopyToDeviceStagesSmallCopiesWithoutWaiting: a copy of up to UploadSlotBytes is queued
// behind the compute stream's work and CopyToDevice returns before that work is done; the
// bytes land in order, and src may be overwritten at once. A copy one byte larger waits for
// the stream, as before.
func TestCopyToDeviceStagesSmallCopiesWithoutWaiting(t *testing.T) {
	useSlowSimCopies(t)
	p := newProvider(t)
	for _, n := range []int{8, ep.UploadSlotBytes} {
		dst := alloc(t, p, uint64(n))
		queueSlowCopy(t, p)
		src := pattern(n, byte(n))
		require.NoError(t, p.CopyToDevice(dst, 0, src))
		idle, err := ep.ComputeIdle(p)
		require.NoError(t, err)
		assert.False(t, idle, "a %d-byte copy waited for the work queued before it", n)
		want := bytes.Clone(src)
		for i := range src {
			src[i] ^= 0xFF // the caller reuses src at once
		}
		assert.Equal(t, want, readBack(t, p, dst), "%d bytes", n)
	}
	n := ep.UploadSlotBytes + 1
	dst := alloc(t, p, uint64(n))
	queueSlowCopy(t, p)
	require.NoError(t, p.CopyToDevice(dst, 0, pattern(n, 9)))
	idle, err := ep.ComputeIdle(p)
	require.NoError(t, err)
	assert.True(t, idle, "a %d-byte copy is made from the caller's memory and waited for", n)
	assert.Equal(t, pattern(n, 9), readBack(t, p, dst))
}

// TestCopyToDeviceReusesStagingSlotsOnlyOnceRead: more staged copies than slots, all queued
// behind slow work, each of its own bytes: a slot reused before the copy out of it ran would
// hand the device a later copy's bytes.
func TestCopyToDeviceReusesStagingSlotsOnlyOnceRead(t *testing.T) {
	useSlowSimCopies(t)
	p := newProvider(t)
	const n, copies = 4096, 3*ep.UploadSlots + 1
	dst := alloc(t, p, n*copies)
	queueSlowCopy(t, p)
	var want []byte
	for i := range copies {
		src := pattern(n, byte(i+1))
		require.NoError(t, p.CopyToDevice(dst, uint64(i*n), src))
		want = append(want, src...)
		clear(src)
	}
	assert.True(t, bytes.Equal(want, readBack(t, p, dst)), "a staged copy read another copy's bytes")
}

// TestCopyToDeviceStagedRefusals: a staged copy checks its range before it touches a slot, and
// a closed provider refuses it.
func TestCopyToDeviceStagedRefusals(t *testing.T) {
	p := newProvider(t)
	b := alloc(t, p, 64)
	require.NoError(t, p.CopyToDevice(b, 0, pattern(64, 3)))
	err := p.CopyToDevice(b, 60, pattern(8, 4))
	assert.ErrorIs(t, err, ep.ErrInvalidArgument)
	assert.ErrorContains(t, err, "range [60, 60+8) is outside the 64-byte buffer")
	assert.Equal(t, pattern(64, 3), readBack(t, p, b), "a refused copy wrote nothing")
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	q, err := ep.New(opts)
	require.NoError(t, err)
	c, err := q.Alloc(64, 0)
	require.NoError(t, err)
	require.NoError(t, q.CopyToDevice(c, 0, pattern(64, 5))) // the slots exist now
	require.NoError(t, q.Close())
	assert.ErrorIs(t, q.CopyToDevice(c, 0, pattern(8, 6)), ep.ErrClosed)
}
