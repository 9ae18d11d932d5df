package graphs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/graphs"
)

// Seed: primary_and_verify_graph_slots_are_independent. Primary (one add_one: +1) and
// Verify (two chained add_one: +2) capture, replay interleaved and reset independently on
// one stream.
func TestPrimaryAndVerifyGraphSlotsAreIndependent(t *testing.T) {
	r := newRig(t)
	const n = 32
	pIn, pOut := r.buf(n), r.buf(n)
	vIn, vMid, vOut := r.buf(n), r.buf(n), r.buf(n)
	base := pattern(n, 12)
	r.upload(pIn.Ptr(), base)
	r.upload(vIn.Ptr(), base)
	slots := r.slots(graphs.Config{})

	_, err := slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(pIn.Ptr(), pOut.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))

	_, err = slots.Begin(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	r.addOne(vIn.Ptr(), vMid.Ptr(), n)
	r.addOne(vMid.Ptr(), vOut.Ptr(), n)
	require.NoError(t, slots.End(graphs.Verify))

	assert.True(t, slots.HasExecutable(graphs.Primary))
	assert.True(t, slots.HasExecutable(graphs.Verify))

	for range 3 {
		require.NoError(t, slots.Replay(graphs.Primary))
		require.NoError(t, slots.Replay(graphs.Verify))
	}
	assert.Equal(t, plus(base, 1), r.read(pOut.Ptr(), n), "Primary applies +1")
	assert.Equal(t, plus(base, 2), r.read(vOut.Ptr(), n), "Verify applies +2, undisturbed by Primary")

	had, err := slots.Reset(graphs.Primary)
	require.NoError(t, err)
	assert.True(t, had)
	assert.False(t, slots.HasExecutable(graphs.Primary))
	assert.True(t, slots.HasExecutable(graphs.Verify), "resetting Primary leaves Verify installed")
	r.poison(vOut)
	require.NoError(t, slots.Replay(graphs.Verify))
	assert.Equal(t, plus(base, 2), r.read(vOut.Ptr(), n))
	assert.ErrorIs(t, slots.Replay(graphs.Primary), graphs.ErrNotInstalled)

	had, err = slots.Reset(graphs.Verify)
	require.NoError(t, err)
	assert.True(t, had)
}

// TestCaptureOnASharedStreamFencesTheOtherSlots: while Verify captures, a replay of Primary
// on the same stream would be recorded into Verify's graph; it is refused instead, and so are
// a second capture and a reset (whose synchronize would invalidate the capture).
func TestCaptureOnASharedStreamFencesTheOtherSlots(t *testing.T) {
	r := newRig(t)
	const n = 64
	pIn, pOut, vOut := r.buf(n), r.buf(n), r.buf(n)
	base := pattern(n, 13)
	r.upload(pIn.Ptr(), base)
	slots := r.slots(graphs.Config{})
	assert.False(t, slots.Capturing())
	_, err := slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	assert.True(t, slots.Capturing(), "capturing from Begin")
	r.addOne(pIn.Ptr(), pOut.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	assert.False(t, slots.Capturing(), "not capturing once End returned")

	_, err = slots.Begin(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	assert.True(t, slots.Capturing())
	r.addOne(pOut.Ptr(), vOut.Ptr(), n)
	assert.ErrorIs(t, slots.Replay(graphs.Primary), graphs.ErrStreamCapturing)
	assert.ErrorIs(t, slots.ReplaySegment(graphs.Primary, 0), graphs.ErrStreamCapturing)
	_, err = slots.Begin(graphs.Primary, capturable, nil)
	assert.ErrorIs(t, err, graphs.ErrCaptureActive)
	_, err = slots.Begin(graphs.Keyed(4), capturable, nil)
	require.ErrorIs(t, err, graphs.ErrCaptureActive)
	assert.Contains(t, err.Error(), "slot verify is capturing")
	_, err = slots.Reset(graphs.Primary)
	assert.ErrorIs(t, err, graphs.ErrCaptureActive)
	require.NoError(t, slots.End(graphs.Verify))

	// Verify recorded exactly one kernel (+1 over Primary's output), nothing of Primary's.
	require.NoError(t, slots.Replay(graphs.Primary))
	require.NoError(t, slots.Replay(graphs.Verify))
	assert.Equal(t, plus(base, 2), r.read(vOut.Ptr(), n))
	assert.Equal(t, 1, slots.SegmentCount(graphs.Verify))
}

// TestKeyedSlotsAreIndependentAndBounded: shape-keyed slots (one graph per batch size) each
// hold their own lifecycle, replay by key, and are bounded, with a clear error past the bound
// and room made by removing a key.
func TestKeyedSlotsAreIndependentAndBounded(t *testing.T) {
	r := newRig(t)
	const n = 64
	in := r.buf(n)
	base := pattern(n, 14)
	r.upload(in.Ptr(), base)
	slots := r.slots(graphs.Config{}.WithMaxKeyedSlots(2))
	// Key k captures k add_one kernels (the first out of place, the rest in place): out = in + k.
	keys := []int64{1, 8}
	for _, k := range keys {
		out := r.buf(n)
		_, err := slots.Begin(graphs.Keyed(k), capturable, nil)
		require.NoError(t, err)
		r.addOne(in.Ptr(), out.Ptr(), n)
		for i := int64(1); i < k; i++ {
			r.addOne(out.Ptr(), out.Ptr(), n)
		}
		require.NoError(t, slots.End(graphs.Keyed(k)))
		require.NoError(t, slots.Replay(graphs.Keyed(k)))
		assert.Equal(t, plus(base, float32(k)), r.read(out.Ptr(), n), "key %d", k)
	}
	assert.Equal(t, keys, slots.Keys())
	assert.False(t, slots.HasExecutable(graphs.Primary), "keyed slots are not Primary")

	_, err := slots.Begin(graphs.Keyed(16), capturable, nil)
	require.ErrorIs(t, err, graphs.ErrTooManySlots)
	assert.Contains(t, err.Error(), "keyed(16)")
	assert.Contains(t, err.Error(), "maximum is 2")
	capturing, err := r.s.IsCapturing()
	require.NoError(t, err)
	assert.False(t, capturing)
	assert.ErrorIs(t, slots.Replay(graphs.Keyed(16)), graphs.ErrNotInstalled)

	require.ErrorIs(t, slots.Remove(graphs.Primary), graphs.ErrInvalidArgument)
	require.NoError(t, slots.Remove(graphs.Keyed(1)))
	assert.Equal(t, []int64{8}, slots.Keys())
	assert.ErrorIs(t, slots.Replay(graphs.Keyed(1)), graphs.ErrNotInstalled)
	assert.True(t, slots.HasExecutable(graphs.Keyed(8)), "removing one key leaves the others")

	out := r.buf(n)
	_, err = slots.Begin(graphs.Keyed(16), capturable, nil)
	require.NoError(t, err, "removing a key made room")
	r.addOne(in.Ptr(), out.Ptr(), n)
	require.NoError(t, slots.End(graphs.Keyed(16)))
	require.NoError(t, slots.Replay(graphs.Keyed(16)))
	assert.Equal(t, plus(base, 1), r.read(out.Ptr(), n))
	assert.Equal(t, []int64{8, 16}, slots.Keys())
}
