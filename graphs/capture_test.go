package graphs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// Seed: capture_replay_uses_live_buffers_without_runtime_allocations.
func TestCaptureReplayUsesLiveBuffersWithoutRuntimeAllocations(t *testing.T) {
	r := newRig(t)
	const n = 64
	x, y := r.buf(n), r.buf(n)
	initial := pattern(n, 1)
	r.upload(x.Ptr(), initial)
	r.addOne(x.Ptr(), y.Ptr(), n)
	eager := r.read(y.Ptr(), n)
	require.Equal(t, plus(initial, 1), eager)
	r.poison(y)

	slots := r.slots(graphs.Config{})
	before := r.ctx.Counters()
	_, err := slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	capturing, err := r.s.IsCapturing()
	require.NoError(t, err)
	assert.True(t, capturing)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	assert.True(t, slots.HasExecutable(graphs.Primary))

	for range 4 {
		require.NoError(t, slots.Replay(graphs.Primary))
	}
	assert.Equal(t, eager, r.read(y.Ptr(), n))

	// The graph reads the live allocation: new input, same graph, new output.
	mutated := pattern(n, 1000)
	r.upload(x.Ptr(), mutated)
	require.NoError(t, slots.Replay(graphs.Primary))
	got := r.read(y.Ptr(), n)
	assert.Equal(t, plus(mutated, 1), got)
	assert.NotEqual(t, eager, got)

	after := r.ctx.Counters()
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "capture and replay allocate no device memory")
	assert.Equal(t, before.DeviceFrees, after.DeviceFrees)

	had, err := slots.Reset(graphs.Primary)
	require.NoError(t, err)
	assert.True(t, had)
	assert.False(t, slots.HasExecutable(graphs.Primary))
	had, err = slots.Reset(graphs.Primary)
	require.NoError(t, err)
	assert.False(t, had, "a second reset finds nothing installed")
}

// Seed: segmented_capture_interleaves_two_graphs_with_an_eager_seam.
func TestSegmentedCaptureInterleavesTwoGraphsWithAnEagerSeam(t *testing.T) {
	r := newRig(t)
	const n = 48
	// buf0 --seg0 (captured)--> buf1 --eager seam--> buf2 --seg1 (captured)--> buf3
	b0, b1, b2, b3 := r.buf(n), r.buf(n), r.buf(n), r.buf(n)
	initial := pattern(n, 3)
	r.upload(b0.Ptr(), initial)

	r.addOne(b0.Ptr(), b1.Ptr(), n)
	r.addOne(b1.Ptr(), b2.Ptr(), n)
	r.addOne(b2.Ptr(), b3.Ptr(), n)
	eager := r.read(b3.Ptr(), n)
	require.Equal(t, plus(initial, 3), eager)
	for _, b := range []*cudadrv.DeviceBuffer{b1, b2, b3} {
		r.poison(b)
	}

	slots := r.slots(graphs.Config{})
	before := r.ctx.Counters()

	// Capture pass: two segments around an eager seam.
	tok, err := slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(b0.Ptr(), b1.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	// Materialize segment 0 so the seam reads real bytes, as an executor does.
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
	r.addOne(b1.Ptr(), b2.Ptr(), n) // the seam: a non-capturable node, run eagerly
	tok2, err := slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	assert.Equal(t, tok, tok2, "the second segment continues the same generation")
	r.addOne(b2.Ptr(), b3.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 1))

	assert.Equal(t, 2, slots.SegmentCount(graphs.Primary))
	assert.True(t, slots.HasExecutable(graphs.Primary))
	assert.Equal(t, eager, r.read(b3.Ptr(), n), "the segmented capture pass is token-exact")

	// Replay steps: relaunch the segments, re-run the seam.
	mutated := pattern(n, 500)
	r.upload(b0.Ptr(), mutated)
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
	r.addOne(b1.Ptr(), b2.Ptr(), n)
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 1))
	replayed := r.read(b3.Ptr(), n)
	assert.Equal(t, plus(mutated, 3), replayed)
	assert.NotEqual(t, eager, replayed)

	// Replay of every segment in capture order, without the seam: seg0 then seg1 read the
	// seam's last output, so the result is seam-independent here.
	require.NoError(t, slots.Replay(graphs.Primary))
	assert.Equal(t, plus(mutated, 3), r.read(b3.Ptr(), n))

	assert.Equal(t, before.DeviceAllocs, r.ctx.Counters().DeviceAllocs, "no per-step device allocation")

	had, err := slots.Reset(graphs.Primary)
	require.NoError(t, err)
	assert.True(t, had)
	assert.False(t, slots.HasExecutable(graphs.Primary))
	assert.Zero(t, slots.SegmentCount(graphs.Primary))
}

// Seed: incompatible_sequence_is_rejected_before_stream_capture.
func TestIncompatibleSequenceIsRejectedBeforeStreamCapture(t *testing.T) {
	r := newRig(t)
	gate := graphs.NewGate()
	l := r.lifecycle(graphs.Primary, graphs.Config{}.WithGate(gate))
	p := &probe{ctx: r.ctx, s: r.s}
	nodes := []graphs.Node{
		node{name: "add_one", support: graphs.Supported},
		node{name: "argmax_on_host", support: graphs.Unsupported("reads the logits on the host")},
	}

	_, err := l.Begin(graphs.Token{}, nodes, []graphs.Resource{p})
	require.Error(t, err)
	assert.ErrorIs(t, err, graphs.ErrRejected)
	assert.Contains(t, err.Error(), "rejected before begin_capture")
	assert.Contains(t, err.Error(), "argmax_on_host")
	assert.Contains(t, err.Error(), "reads the logits on the host")

	st, err := l.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, st, "the stream never entered capture")
	_, installed := l.Current()
	assert.False(t, installed, "a rejected sequence starts no generation")
	assert.Zero(t, gate.LiveCaptures(), "the gate was never taken")
	assert.Equal(t, 1, p.released, "the resources handed to a rejected Begin are released")

	// A nil node is an argument error, also before capture; an unnamed reason still reads.
	_, err = l.Begin(graphs.Token{}, []graphs.Node{nil}, nil)
	assert.ErrorIs(t, err, graphs.ErrInvalidArgument)
	err = graphs.Audit([]graphs.Node{node{name: "k", support: graphs.Unsupported("")}})
	assert.ErrorIs(t, err, graphs.ErrRejected)
	assert.Contains(t, err.Error(), "no reason given")
	assert.NoError(t, graphs.Audit(nil))
	capturing, err := r.s.IsCapturing()
	require.NoError(t, err)
	assert.False(t, capturing)
}

// Seed: holds_single_capture_tracks_whole_subgraph_segment.
func TestHoldsSingleCaptureTracksWholeSubgraphSegment(t *testing.T) {
	r := newRig(t)
	const n = 16
	x, y := r.buf(n), r.buf(n)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	_, installed := l.Current()
	assert.False(t, installed, "no capture installed yet")

	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))
	assert.True(t, l.HoldsSingleCapture(tok))
	assert.Equal(t, 1, l.SegmentCount(tok))

	// A second appended segment breaks the whole-step invariant.
	tok2, err := l.Begin(tok, capturable, nil)
	require.NoError(t, err)
	assert.Equal(t, tok, tok2)
	r.addOne(y.Ptr(), x.Ptr(), n)
	require.NoError(t, l.End(tok))
	assert.False(t, l.HoldsSingleCapture(tok))
	assert.Equal(t, 2, l.SegmentCount(tok))

	had, err := l.Reset(tok)
	require.NoError(t, err)
	assert.True(t, had)
	assert.False(t, l.HoldsSingleCapture(tok))
	assert.Zero(t, l.SegmentCount(tok))
}

// TestBeginContinuationRules: a new generation needs the zero token, a continuation needs
// the installed one, and a second concurrent capture is refused.
func TestBeginContinuationRules(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y := r.buf(n), r.buf(n)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	stale := graphs.NewToken(l.Owner(), graphs.Primary, 1)

	_, err := l.Begin(stale, capturable, nil)
	assert.ErrorIs(t, err, graphs.ErrNotInstalled, "a continuation that names no installation")

	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	assert.Equal(t, l.Owner(), tok.Owner())
	assert.Equal(t, graphs.Primary, tok.Slot())
	assert.Equal(t, uint64(1), tok.Generation())
	assert.True(t, l.Capturing())

	_, err = l.Begin(tok, capturable, nil)
	assert.ErrorIs(t, err, graphs.ErrCaptureActive, "a second concurrent capture")
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))
	assert.ErrorIs(t, l.End(tok), graphs.ErrNotCapturing)

	_, err = l.Begin(graphs.Token{}, capturable, nil)
	require.ErrorIs(t, err, graphs.ErrTokenMismatch, "a new generation while one is installed")
	assert.Contains(t, err.Error(), tok.String())
	assert.Contains(t, err.Error(), "supplied none")

	had, err := l.Reset(tok)
	require.NoError(t, err)
	require.True(t, had)
	tok2, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), tok2.Generation(), "generations are never reused")
	require.NoError(t, l.Abort(tok2))
}
