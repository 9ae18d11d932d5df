package graphs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/graphs"
)

// TestRecaptureUpdatesInPlaceWhenTheTopologyIsUnchanged: recapturing a whole step whose
// buffers moved updates the installed executable (no new instantiation, no new executable),
// and the updated executable writes the new buffers, not the old ones.
func TestRecaptureUpdatesInPlaceWhenTheTopologyIsUnchanged(t *testing.T) {
	r := newRig(t)
	const n = 96
	x1, y1, x2, y2 := r.buf(n), r.buf(n), r.buf(n), r.buf(n)
	in1, in2 := pattern(n, 20), pattern(n, 40)
	r.upload(x1.Ptr(), in1)
	r.upload(x2.Ptr(), in2)
	l := r.lifecycle(graphs.Primary, graphs.Config{})

	tok1, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x1.Ptr(), y1.Ptr(), n)
	require.NoError(t, l.End(tok1))
	require.NoError(t, l.Replay(tok1))
	require.Equal(t, plus(in1, 1), r.read(y1.Ptr(), n))
	r.poison(y1)
	afterFirst := r.ctx.Counters()

	tok2, err := l.Recapture(tok1, capturable, nil)
	require.NoError(t, err)
	assert.Equal(t, tok1.Generation()+1, tok2.Generation(), "a recapture starts a new generation")
	assert.ErrorIs(t, l.Replay(tok1), graphs.ErrNotInstalled, "the retired generation replays nothing")
	r.addOne(x2.Ptr(), y2.Ptr(), n) // same kernel, new buffers
	require.NoError(t, l.End(tok2))
	assert.ErrorIs(t, l.Replay(tok1), graphs.ErrTokenMismatch, "nor once its successor is installed")

	st := l.Stats()
	assert.Equal(t, uint64(1), st.Updates, "the executable was updated in place")
	assert.Equal(t, uint64(1), st.Instantiations, "only the first capture instantiated")
	assert.Zero(t, st.UpdateRefusals)
	assert.Equal(t, afterFirst.GraphExecsCreated, r.ctx.Counters().GraphExecsCreated, "no executable was created")

	require.NoError(t, l.Replay(tok2))
	assert.Equal(t, plus(in2, 1), r.read(y2.Ptr(), n), "the updated executable reads and writes the new buffers")
	for i, v := range r.read(y1.Ptr(), n) {
		require.True(t, v != v, "the old output was written at %d: %v", i, v) // still NaN
	}
	assert.True(t, l.HoldsSingleCapture(tok2))
	assert.NoError(t, l.CleanupErr())
}

// TestRecaptureFallsBackToInstantiateWhenTheUpdateIsRefused: a recaptured step with another
// topology is refused by the driver's update and instantiated instead; the refused executable
// is destroyed, and the result is right.
func TestRecaptureFallsBackToInstantiateWhenTheUpdateIsRefused(t *testing.T) {
	r := newRig(t)
	const n = 96
	x, y := r.buf(n), r.buf(n)
	in := pattern(n, 60)
	r.upload(x.Ptr(), in)
	l := r.lifecycle(graphs.Primary, graphs.Config{})

	tok1, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok1))
	before := r.ctx.Counters()

	tok2, err := l.Recapture(tok1, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	r.addOne(y.Ptr(), y.Ptr(), n) // one more kernel: the topology changed
	require.NoError(t, l.End(tok2))

	st := l.Stats()
	assert.Zero(t, st.Updates)
	assert.Equal(t, uint64(1), st.UpdateRefusals, "the driver refused the update")
	assert.Equal(t, uint64(2), st.Instantiations, "and the step was instantiated instead")
	after := r.ctx.Counters()
	assert.Equal(t, before.GraphExecsCreated+1, after.GraphExecsCreated)
	assert.Equal(t, before.GraphExecsDestroyed+1, after.GraphExecsDestroyed, "the refused executable was destroyed")
	assert.Equal(t, before.GraphsDestroyed+1, after.GraphsDestroyed, "and its graph")

	require.NoError(t, l.Replay(tok2))
	assert.Equal(t, plus(in, 2), r.read(y.Ptr(), n))
	assert.NoError(t, l.CleanupErr())
}

// TestRecaptureOfASegmentedStepUpdatesEachSegment: segment i of the new generation updates
// segment i of the retired one; executables left over when the new generation has fewer
// segments are destroyed at reset, and a recapture that is aborted leaks nothing.
func TestRecaptureOfASegmentedStepUpdatesEachSegment(t *testing.T) {
	r := newRig(t)
	const n = 64
	a, b, c := r.buf(n), r.buf(n), r.buf(n)
	in := pattern(n, 70)
	r.upload(a.Ptr(), in)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Verify)
	require.NoError(t, err)
	segmented := func() {
		_, err := slots.Begin(graphs.Verify, capturable, nil)
		require.NoError(t, err)
		r.addOne(a.Ptr(), b.Ptr(), n)
		require.NoError(t, slots.End(graphs.Verify))
		_, err = slots.Begin(graphs.Verify, capturable, nil)
		require.NoError(t, err)
		r.addOne(b.Ptr(), c.Ptr(), n)
		require.NoError(t, slots.End(graphs.Verify))
	}
	segmented()
	require.Equal(t, 2, slots.SegmentCount(graphs.Verify))

	// Recapture both segments with the same topology: two in-place updates.
	_, err = slots.Recapture(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	r.addOne(a.Ptr(), b.Ptr(), n)
	require.NoError(t, slots.End(graphs.Verify))
	_, err = slots.Begin(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	r.addOne(b.Ptr(), c.Ptr(), n)
	require.NoError(t, slots.End(graphs.Verify))
	assert.Equal(t, uint64(2), l.Stats().Updates)
	assert.Equal(t, uint64(2), l.Stats().Instantiations)
	require.NoError(t, slots.Replay(graphs.Verify))
	assert.Equal(t, plus(in, 2), r.read(c.Ptr(), n))

	// A recapture of only the first segment leaves the second retired executable unused
	// until reset destroys it.
	_, err = slots.Recapture(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	r.addOne(a.Ptr(), c.Ptr(), n)
	require.NoError(t, slots.End(graphs.Verify))
	assert.Equal(t, uint64(3), l.Stats().Updates)
	g, e := leakedGraphs(r.ctx.Counters())
	assert.Equal(t, uint64(2), e, "the installed segment and the unused retired one")
	assert.Equal(t, uint64(2), g)
	_, err = slots.Reset(graphs.Verify)
	require.NoError(t, err)
	g, e = leakedGraphs(r.ctx.Counters())
	assert.Zero(t, g)
	assert.Zero(t, e)

	// A recapture whose capture is aborted leaves nothing behind once reset.
	segmented()
	_, err = slots.Recapture(graphs.Verify, capturable, nil)
	require.NoError(t, err)
	require.NoError(t, slots.Abort(graphs.Verify))
	_, err = slots.Reset(graphs.Verify)
	require.NoError(t, err)
	g, e = leakedGraphs(r.ctx.Counters())
	assert.Zero(t, g)
	assert.Zero(t, e)
}

// TestRecaptureWhoseBeginFailsLeavesNothingBehind: when begin-capture fails in a
// Recapture, the old generation is already retired, and its kept executables are destroyed
// with it: nothing is installed and nothing leaks.
func TestRecaptureWhoseBeginFailsLeavesNothingBehind(t *testing.T) {
	r := newRig(t)
	if r.env.Sim == nil {
		t.Skip("needs the sim backend's fault injection: the real driver cannot be made to fail on demand")
	}
	const n = 32
	x, y := r.buf(n), r.buf(n)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))
	p := &probe{ctx: r.ctx, s: r.s}

	r.env.Sim.InjectFault(sim.OpStreamBeginCapture, 1, cudadrv.ErrorUnknown)
	_, err = l.Recapture(tok, capturable, []graphs.Resource{p})
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorUnknown, cudadrv.ResultOf(err))
	assert.Equal(t, 1, p.released)
	_, installed := l.Current()
	assert.False(t, installed)
	assert.False(t, l.HasExecutable(tok))
	g, e := leakedGraphs(r.ctx.Counters())
	assert.Zero(t, g)
	assert.Zero(t, e)
	assert.Zero(t, l.Gate().LiveCaptures())
}
