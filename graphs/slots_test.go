package graphs_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
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

// TestRemovedKeyCanBeUsedAgain: a removed key makes a fresh lifecycle on its next use, which
// captures and replays its own graph; the removed slot's graph is gone, and its token stays
// stale: it names neither the closed lifecycle's graph nor the new one's.
func TestRemovedKeyCanBeUsedAgain(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y1, y2 := r.buf(n), r.buf(n), r.buf(n)
	input := pattern(n, 15)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	key := graphs.Keyed(1)

	oldTok, err := slots.Begin(key, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y1.Ptr(), n) // the removed graph: y1 = x + 1
	require.NoError(t, slots.End(key))
	oldL, err := slots.Lifecycle(key)
	require.NoError(t, err)

	require.NoError(t, slots.Remove(key))
	assert.Empty(t, slots.Keys())
	assert.False(t, slots.HasExecutable(key))
	assert.ErrorIs(t, slots.Replay(key), graphs.ErrNotInstalled)
	err = oldL.Replay(oldTok)
	assert.ErrorIs(t, err, graphs.ErrNotInstalled)
	assert.ErrorIs(t, err, graphs.ErrClosed, "removing closed the slot's lifecycle")

	newTok, err := slots.Begin(key, capturable, nil)
	require.NoError(t, err, "a removed key can be used again")
	r.addOne(x.Ptr(), y2.Ptr(), n) // the new graph: y2 = x + 2
	r.addOne(y2.Ptr(), y2.Ptr(), n)
	require.NoError(t, slots.End(key))
	assert.Equal(t, []int64{1}, slots.Keys())
	r.poison(y1)
	require.NoError(t, slots.Replay(key))
	assert.Equal(t, plus(input, 2), r.read(y2.Ptr(), n), "the key replays its new graph")
	got := r.read(y1.Ptr(), n)
	assert.True(t, math.IsNaN(float64(got[0])), "the removed graph did not run")

	newL, err := slots.Lifecycle(key)
	require.NoError(t, err)
	assert.NotSame(t, oldL, newL)
	assert.Greater(t, newTok.Generation(), oldTok.Generation(), "generations continue past the removed lifecycle's")
	err = newL.Replay(oldTok)
	require.ErrorIs(t, err, graphs.ErrTokenMismatch, "the removed slot's token does not name the new graph")
	assert.Contains(t, err.Error(), "supplied "+oldTok.String())
	assert.ErrorIs(t, newL.ReplaySegment(oldTok, 0), graphs.ErrTokenMismatch)
	_, err = newL.Reset(oldTok)
	assert.ErrorIs(t, err, graphs.ErrTokenMismatch)
	assert.True(t, slots.HasExecutable(key))
}

// TestRemoveRefusesALiveCaptureAndKeepsTheSlot: a keyed slot whose capture is live, or whose
// stream is captured by another slot, is not removed: Remove fails with ErrCaptureActive and
// the slot, its capture and its installed graph stay, to be removed once the capture ended.
func TestRemoveRefusesALiveCaptureAndKeepsTheSlot(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y, p := r.buf(n), r.buf(n), r.buf(n)
	input := pattern(n, 16)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	key := graphs.Keyed(3)

	_, err := slots.Begin(key, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	err = slots.Remove(key)
	require.ErrorIs(t, err, graphs.ErrCaptureActive, "the slot's own capture is live")
	assert.Contains(t, err.Error(), "keyed(3)")
	assert.Equal(t, []int64{3}, slots.Keys(), "the slot stays")
	l, err := slots.Lifecycle(key)
	require.NoError(t, err)
	assert.True(t, l.Capturing(), "the capture stays live")
	require.NoError(t, slots.End(key), "the kept capture ends normally")
	require.NoError(t, slots.Replay(key))
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))

	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), p.Ptr(), n)
	err = slots.Remove(key)
	require.ErrorIs(t, err, graphs.ErrCaptureActive, "another slot captures on the shared stream")
	assert.Contains(t, err.Error(), "slot primary is capturing")
	assert.Equal(t, []int64{3}, slots.Keys(), "the slot stays")
	require.NoError(t, slots.End(graphs.Primary))
	assert.True(t, slots.HasExecutable(key), "the kept slot's graph is still installed")
	r.poison(y)
	require.NoError(t, slots.Replay(key))
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))

	require.NoError(t, slots.Remove(key), "removable once no capture is live")
	assert.Empty(t, slots.Keys())
}

// TestRemoveOfAnUnknownKeyIsANoOp: removing a key never used, or one already removed,
// returns nil and changes nothing: the other slots stay installed and no room is made.
func TestRemoveOfAnUnknownKeyIsANoOp(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y := r.buf(n), r.buf(n)
	input := pattern(n, 17)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{}.WithMaxKeyedSlots(1))
	_, err := slots.Begin(graphs.Keyed(2), capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, slots.End(graphs.Keyed(2)))

	require.NoError(t, slots.Remove(graphs.Keyed(7)), "a key never used")
	assert.Equal(t, []int64{2}, slots.Keys())
	assert.True(t, slots.HasExecutable(graphs.Keyed(2)))
	_, err = slots.Lifecycle(graphs.Keyed(8))
	assert.ErrorIs(t, err, graphs.ErrTooManySlots, "removing an unknown key made no room")
	require.NoError(t, slots.Replay(graphs.Keyed(2)))
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))

	require.NoError(t, slots.Remove(graphs.Keyed(2)))
	require.NoError(t, slots.Remove(graphs.Keyed(2)), "a key already removed")
	assert.Empty(t, slots.Keys())
}

// TestRemoveRefusesPrimaryAndVerify: Primary and Verify are permanent (and the zero Slot is
// not a slot): Remove refuses them with ErrInvalidArgument naming the slot, and leaves their
// graphs installed.
func TestRemoveRefusesPrimaryAndVerify(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y, z := r.buf(n), r.buf(n), r.buf(n)
	input := pattern(n, 18)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	for _, c := range []struct {
		slot graphs.Slot
		out  *cudadrv.DeviceBuffer
	}{{graphs.Primary, y}, {graphs.Verify, z}} {
		_, err := slots.Begin(c.slot, capturable, nil)
		require.NoError(t, err)
		r.addOne(x.Ptr(), c.out.Ptr(), n)
		require.NoError(t, slots.End(c.slot))
	}

	for _, tc := range []struct {
		slot graphs.Slot
		name string
	}{{graphs.Primary, "primary"}, {graphs.Verify, "verify"}, {graphs.Slot{}, "invalid"}} {
		err := slots.Remove(tc.slot)
		require.ErrorIs(t, err, graphs.ErrInvalidArgument, tc.name)
		assert.Contains(t, err.Error(), tc.name)
	}
	for _, c := range []struct {
		slot graphs.Slot
		out  *cudadrv.DeviceBuffer
	}{{graphs.Primary, y}, {graphs.Verify, z}} {
		assert.True(t, slots.HasExecutable(c.slot), "%v stays installed", c.slot)
		r.poison(c.out)
		require.NoError(t, slots.Replay(c.slot))
		assert.Equal(t, plus(input, 1), r.read(c.out.Ptr(), n), "%v still replays", c.slot)
	}
}

// TestRemoveMakesRoomAfterTheDefaultBound: with the default bound, once DefaultMaxKeyedSlots
// distinct keys are held every new key fails with ErrTooManySlots; removing one makes room
// for exactly one new key, which captures and replays, and the bound holds again after it.
func TestRemoveMakesRoomAfterTheDefaultBound(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y := r.buf(n), r.buf(n)
	input := pattern(n, 19)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	bound := graphs.DefaultMaxKeyedSlots
	for k := range int64(bound) {
		_, err := slots.Lifecycle(graphs.Keyed(k))
		require.NoError(t, err, "key %d of %d", k+1, bound)
	}
	require.Len(t, slots.Keys(), bound)
	_, err := slots.Begin(graphs.Keyed(1000), capturable, nil)
	require.ErrorIs(t, err, graphs.ErrTooManySlots)
	assert.Contains(t, err.Error(), fmt.Sprintf("maximum is %d", bound))

	require.NoError(t, slots.Remove(graphs.Keyed(5)))
	_, err = slots.Begin(graphs.Keyed(1000), capturable, nil)
	require.NoError(t, err, "removing a key made room for a new one")
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, slots.End(graphs.Keyed(1000)))
	require.NoError(t, slots.Replay(graphs.Keyed(1000)))
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))
	keys := slots.Keys()
	assert.Len(t, keys, bound)
	assert.Contains(t, keys, int64(1000))
	assert.NotContains(t, keys, int64(5))

	_, err = slots.Lifecycle(graphs.Keyed(2000))
	assert.ErrorIs(t, err, graphs.ErrTooManySlots, "the bound holds again once the room is used")
}

// TestKeyReusedAfterAFailedCloseGetsFreshGenerations: a Close that fails (here a stream
// synchronize) still closes and forgets the keyed slots it could close, and a Slots left open
// by the failure lets their keys be used again; the lifecycle made then counts its
// generations past the forgotten one's, so the forgotten token stays stale.
func TestKeyReusedAfterAFailedCloseGetsFreshGenerations(t *testing.T) {
	r := newRig(t)
	if r.env.Sim == nil {
		t.Skip("needs the sim backend's fault injection: the real driver cannot be made to fail on demand")
	}
	const n = 32
	x, y := r.buf(n), r.buf(n)
	input := pattern(n, 20)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	key := graphs.Keyed(4)
	oldTok, err := slots.Begin(key, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, slots.End(key))

	r.env.Sim.InjectFault(sim.OpStreamSynchronize, 1, cudadrv.ErrorUnknown)
	require.Error(t, slots.Close(), "the injected synchronize failure")
	assert.Empty(t, slots.Keys(), "the keyed slot was closed and forgotten")

	newTok, err := slots.Begin(key, capturable, nil)
	require.NoError(t, err, "the Slots stays open after a failed Close")
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, slots.End(key))
	assert.Greater(t, newTok.Generation(), oldTok.Generation())
	l, err := slots.Lifecycle(key)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Replay(oldTok), graphs.ErrTokenMismatch)
	r.poison(y)
	require.NoError(t, l.Replay(newTok))
	assert.Equal(t, plus(input, 1), r.read(y.Ptr(), n))
}
