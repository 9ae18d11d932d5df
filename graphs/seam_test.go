package graphs_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cudaep/cudaep/cudadrv/drivertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// hostSeam is a host excursion between device segments: a forced drain through the capture
// gate (the host must see the stream's results), a device-to-host copy of src, host compute
// (+1 per element), and a host-to-device copy into dst. host is reused across steps.
func hostSeam(r *rig, gate *graphs.Gate, src, dst cudadrv.DevicePtr, host []byte) error {
	if err := gate.Drain(r.s.Synchronize); err != nil {
		return err
	}
	if err := r.ctx.CopyDtoH(host, src); err != nil {
		return err
	}
	v := drivertest.BytesFloat32(host)
	copy(host, drivertest.Float32Bytes(plus(v, 1)))
	return r.ctx.CopyHtoD(dst, host)
}

// Seed: host_excursion_is_capturable_as_a_seam_and_illegal_inside_capture. A device → host →
// device round trip is legal as an eager seam between captured segments, and illegal inside
// a capture: its drain fails there, and the capture must be aborted.
func TestHostExcursionIsCapturableAsASeamAndIllegalInsideCapture(t *testing.T) {
	r := newRig(t)
	const n = 48
	b0, b1, b2, b3 := r.buf(n), r.buf(n), r.buf(n), r.buf(n)
	initial := pattern(n, 15)
	r.upload(b0.Ptr(), initial)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	gate := l.Gate()
	host := make([]byte, 4*n)

	// Positive: the excursion as an eager seam between two segments.
	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(b0.Ptr(), b1.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
	require.NoError(t, hostSeam(r, gate, b1.Ptr(), b2.Ptr(), host), "legal: no capture is live between segments")
	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(b2.Ptr(), b3.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 1))
	assert.Equal(t, plus(initial, 3), r.read(b3.Ptr(), n), "the segmented host-seam capture is token-exact")
	assert.Equal(t, 2, slots.SegmentCount(graphs.Primary))

	// Replay: both segments and the seam again, for a new token.
	mutated := pattern(n, 500)
	r.upload(b0.Ptr(), mutated)
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
	require.NoError(t, hostSeam(r, gate, b1.Ptr(), b2.Ptr(), host))
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 1))
	assert.Equal(t, plus(mutated, 3), r.read(b3.Ptr(), n), "a per-token host excursion replays correctly")
	_, err = slots.Reset(graphs.Primary)
	require.NoError(t, err)

	// Negative: the same excursion inside a live capture. Its drain is refused, so a
	// monolithic capture across the excursion cannot work and segmentation is mandatory.
	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(b0.Ptr(), b1.Ptr(), n)
	err = hostSeam(r, gate, b1.Ptr(), b2.Ptr(), host)
	require.ErrorIs(t, err, graphs.ErrDrainInCapture, "a host-consuming drain inside a capture must fail")
	require.NoError(t, slots.Abort(graphs.Primary))
	_, err = slots.Reset(graphs.Primary)
	require.NoError(t, err)
	capturing, err := r.s.IsCapturing()
	require.NoError(t, err)
	assert.False(t, capturing)
	assert.Zero(t, gate.LiveCaptures())
}

// seamPrice measures one decode step three ways over n floats: (A) four add_one launches
// captured as one graph (a→b→c→b→logits, +4), and (B) the same +4 with the third op run on
// the host as a seam between two segments (seg0: a→b→c, seam: c+1→b, seg1: b→logits). Each
// step ends with the sampling-style drain and read of the logits. It returns the per-step
// times and both outputs.
func seamPrice(t testing.TB, r *rig, n, warmup, iters int) (mono, seam time.Duration, monoOut, seamOut []float32) {
	a, b, c, logits := r.buf(n), r.buf(n), r.buf(n), r.buf(n)
	init := pattern(n, 16)
	r.upload(a.Ptr(), init)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	gate := l.Gate()
	sink := make([]byte, 4*n)
	host := make([]byte, 4*n)
	readLogits := func() {
		require.NoError(t, gate.Drain(r.s.Synchronize))
		require.NoError(t, r.ctx.CopyDtoH(sink, logits.Ptr()))
	}

	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(a.Ptr(), b.Ptr(), n)
	r.addOne(b.Ptr(), c.Ptr(), n)
	r.addOne(c.Ptr(), b.Ptr(), n)
	r.addOne(b.Ptr(), logits.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	monoStep := func() {
		require.NoError(t, slots.Replay(graphs.Primary))
		readLogits()
	}
	for range warmup {
		monoStep()
	}
	start := time.Now()
	for range iters {
		monoStep()
	}
	mono = time.Since(start) / time.Duration(iters)
	monoOut = drivertest.BytesFloat32(sink)
	_, err = slots.Reset(graphs.Primary)
	require.NoError(t, err)
	r.poison(b)
	r.poison(c)
	r.poison(logits)

	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(a.Ptr(), b.Ptr(), n)
	r.addOne(b.Ptr(), c.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
	require.NoError(t, hostSeam(r, gate, c.Ptr(), b.Ptr(), host)) // materialize the seam once
	_, err = slots.Begin(graphs.Primary, capturable, nil)
	require.NoError(t, err)
	r.addOne(b.Ptr(), logits.Ptr(), n)
	require.NoError(t, slots.End(graphs.Primary))
	seamStep := func() {
		require.NoError(t, slots.ReplaySegment(graphs.Primary, 0))
		require.NoError(t, hostSeam(r, gate, c.Ptr(), b.Ptr(), host))
		require.NoError(t, slots.ReplaySegment(graphs.Primary, 1))
		readLogits()
	}
	for range warmup {
		seamStep()
	}
	start = time.Now()
	for range iters {
		seamStep()
	}
	seam = time.Since(start) / time.Duration(iters)
	seamOut = drivertest.BytesFloat32(sink)
	_, err = slots.Reset(graphs.Primary)
	require.NoError(t, err)
	return mono, seam, monoOut, seamOut
}

// Seed: bench_host_seam_price_of_admission. The segmented + host-seam step must be
// bit-identical to the monolithic one; the per-token price of the seam is printed, never
// asserted. Set CUDAEP_BENCH=1 for the full iteration count.
func TestBenchHostSeamPriceOfAdmission(t *testing.T) {
	r := newRig(t)
	const n = 2560 // a ~10 KB embedding-gather output
	warmup, iters := 3, 20
	if os.Getenv("CUDAEP_BENCH") == "1" {
		warmup, iters = 50, 500
	}
	mono, seam, monoOut, seamOut := seamPrice(t, r, n, warmup, iters)
	require.Equal(t, plus(pattern(n, 16), 4), monoOut, "the monolithic reference is input + 4")
	require.Equal(t, monoOut, seamOut, "segmented + host-seam output is bit-identical to the monolithic reference")
	msg := fmt.Sprintf("seam price (%s, %d iterations): monolithic %v/token, segmented+host-seam %v/token, seam overhead %v/token",
		backendName(r), iters, mono, seam, seam-mono)
	t.Log(msg)
	if os.Getenv("CUDAEP_BENCH") == "1" {
		fmt.Println(msg)
	}
}

func backendName(r *rig) string { return r.ctx.Backend().Name() }
