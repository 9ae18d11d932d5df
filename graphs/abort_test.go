package graphs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/graphs"
)

// Seed: mid_segment_capture_failure_is_recoverable_via_abort. A node fails mid-record (here
// a forbidden drain); reset is refused while the stream still captures, abort ends the
// capture, and the stream and the lifecycle work again.
func TestMidSegmentCaptureFailureIsRecoverableViaAbort(t *testing.T) {
	failures := []struct {
		name string
		fail func(r *rig, gate *graphs.Gate) error
	}{
		// The driver refuses the sync and invalidates the capture.
		{"forced sync of the capturing stream", func(r *rig, _ *graphs.Gate) error { return r.s.Synchronize() }},
		// The gate refuses the drain on the capturing thread and marks the capture invalid.
		{"forced drain through the capture gate", func(r *rig, g *graphs.Gate) error { return g.Drain(r.s.Synchronize) }},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			const n = 32
			x, y := r.buf(n), r.buf(n)
			initial := pattern(n, 7)
			r.upload(x.Ptr(), initial)
			slots := r.slots(graphs.Config{})
			l, err := slots.Lifecycle(graphs.Primary)
			require.NoError(t, err)

			_, err = slots.Begin(graphs.Primary, capturable, nil)
			require.NoError(t, err)
			r.addOne(x.Ptr(), y.Ptr(), n)
			capturing, err := r.s.IsCapturing()
			require.NoError(t, err)
			require.True(t, capturing)
			require.Error(t, tc.fail(r, l.Gate()), "an unconditional drain mid-capture is illegal and must fail")

			// The wedge: reset is refused while the stream is still capturing.
			_, err = slots.Reset(graphs.Primary)
			require.ErrorIs(t, err, graphs.ErrCaptureActive)

			// The fix: abort ends the capture and returns the lifecycle to idle.
			require.NoError(t, slots.Abort(graphs.Primary))
			capturing, err = r.s.IsCapturing()
			require.NoError(t, err)
			assert.False(t, capturing, "abort takes the stream out of capture mode")
			assert.Zero(t, l.Gate().LiveCaptures())
			had, err := slots.Reset(graphs.Primary)
			require.NoError(t, err)
			assert.False(t, had, "reset succeeds after abort; no executable was installed")
			assert.False(t, slots.HasExecutable(graphs.Primary))

			// The same stream runs eager work again.
			r.addOne(x.Ptr(), y.Ptr(), n)
			assert.Equal(t, plus(initial, 1), r.read(y.Ptr(), n))
			r.poison(y)

			// And a fresh capture/replay cycle succeeds on the recovered stream.
			_, err = slots.Begin(graphs.Primary, capturable, nil)
			require.NoError(t, err)
			r.addOne(x.Ptr(), y.Ptr(), n)
			require.NoError(t, slots.End(graphs.Primary))
			require.NoError(t, slots.Replay(graphs.Primary))
			assert.Equal(t, plus(initial, 1), r.read(y.Ptr(), n))
			had, err = slots.Reset(graphs.Primary)
			require.NoError(t, err)
			assert.True(t, had)
			g, e := leakedGraphs(r.ctx.Counters())
			assert.Zero(t, g, "graphs leaked")
			assert.Zero(t, e, "executables leaked")
		})
	}
}

// TestCaptureGateIsReleasedOnEveryPath drives each way out of a capture and checks that the
// gate is free afterwards (a drain runs at once), the lifecycle is idle, no graph or
// executable leaked, the capture's resources were released, and a fresh cycle works.
func TestCaptureGateIsReleasedOnEveryPath(t *testing.T) {
	const n = 64
	paths := []struct {
		name     string
		needsSim bool
		// run takes the capture through one path; begin begins it (with the probe).
		run func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr)
	}{
		{"audit rejection", false, func(t *testing.T, r *rig, l *graphs.Lifecycle, _ func() (graphs.Token, error), _, _ cudadrv.DevicePtr) {
			_, err := l.Begin(graphs.Token{}, []graphs.Node{node{name: "host_sampler", support: graphs.Unsupported("host")}}, []graphs.Resource{&probe{ctx: r.ctx, s: r.s}})
			require.ErrorIs(t, err, graphs.ErrRejected)
		}},
		{"begin-capture error", true, func(t *testing.T, r *rig, _ *graphs.Lifecycle, begin func() (graphs.Token, error), _, _ cudadrv.DevicePtr) {
			r.env.Sim.InjectFault(sim.OpStreamBeginCapture, 1, cudadrv.ErrorUnknown)
			_, err := begin()
			require.Error(t, err)
			assert.Equal(t, cudadrv.ErrorUnknown, cudadrv.ResultOf(err))
		}},
		{"end error: capture invalidated", false, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			require.Error(t, r.s.Synchronize())
			err = l.End(tok)
			require.Error(t, err)
			assert.Equal(t, cudadrv.ErrorStreamCaptureInvalidated, cudadrv.ResultOf(err))
		}},
		{"end-capture error that leaves the capture live, then abort", true, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			r.env.Sim.InjectFault(sim.OpStreamEndCapture, 1, cudadrv.ErrorUnknown)
			require.Error(t, l.End(tok))
			assert.True(t, l.Capturing(), "the capture is still live, so the lifecycle keeps it for Abort")
			assert.Equal(t, 1, l.Gate().LiveCaptures())
			require.NoError(t, l.Abort(tok))
		}},
		{"instantiate error", true, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			r.env.Sim.InjectFault(sim.OpGraphInstantiate, 1, cudadrv.ErrorOutOfMemory)
			err = l.End(tok)
			require.Error(t, err)
			assert.Equal(t, cudadrv.ErrorOutOfMemory, cudadrv.ResultOf(err))
		}},
		{"upload error", true, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			r.env.Sim.InjectFault(sim.OpGraphUpload, 1, cudadrv.ErrorUnknown)
			err = l.End(tok)
			require.Error(t, err)
			assert.Equal(t, cudadrv.ErrorUnknown, cudadrv.ResultOf(err))
		}},
		{"abort", false, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			require.NoError(t, l.Abort(tok))
		}},
		{"reset refused during capture, then abort", false, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			_, err = l.Reset(tok)
			require.ErrorIs(t, err, graphs.ErrCaptureActive)
			require.ErrorIs(t, l.Close(), graphs.ErrCaptureActive)
			require.NoError(t, l.Abort(tok))
			_, err = l.Reset(tok)
			require.NoError(t, err)
		}},
		{"drain refused inside the capture, then end", false, func(t *testing.T, r *rig, l *graphs.Lifecycle, begin func() (graphs.Token, error), x, y cudadrv.DevicePtr) {
			tok, err := begin()
			require.NoError(t, err)
			r.addOne(x, y, n)
			ran := false
			err = l.Gate().Drain(func() error { ran = true; return nil })
			require.ErrorIs(t, err, graphs.ErrDrainInCapture)
			assert.False(t, ran, "the drain must not run inside the capture")
			require.ErrorIs(t, l.End(tok), graphs.ErrCaptureInvalidated)
		}},
	}
	for _, tc := range paths {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			if tc.needsSim && r.env.Sim == nil {
				t.Skip("needs the sim backend's fault injection: the real driver cannot be made to fail on demand")
			}
			x, y := r.buf(n), r.buf(n)
			initial := pattern(n, 11)
			r.upload(x.Ptr(), initial)
			gate := graphs.NewGate()
			l := r.lifecycle(graphs.Primary, graphs.Config{}.WithGate(gate))
			p := &probe{ctx: r.ctx, s: r.s}
			begin := func() (graphs.Token, error) {
				return l.Begin(graphs.Token{}, capturable, []graphs.Resource{p})
			}
			before := r.ctx.Counters()

			tc.run(t, r, l, begin, x.Ptr(), y.Ptr())

			assert.Zero(t, gate.LiveCaptures(), "the gate is free")
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			ran := false
			require.NoError(t, gate.DrainContext(cancelled, func() error { ran = true; return nil }))
			assert.True(t, ran, "a drain runs at once: it did not have to wait")
			assert.False(t, l.Capturing())
			capturing, err := r.s.IsCapturing()
			require.NoError(t, err)
			assert.False(t, capturing)
			after := r.ctx.Counters()
			g0, e0 := leakedGraphs(before)
			g1, e1 := leakedGraphs(after)
			assert.Equal(t, g0, g1, "no graph leaked")
			assert.Equal(t, e0, e1, "no executable leaked")
			assert.LessOrEqual(t, p.released, 1)
			if tc.name != "audit rejection" {
				assert.Equal(t, 1, p.released, "the capture's resources are released exactly once")
			}
			assert.False(t, l.HasExecutable(graphs.NewToken(l.Owner(), graphs.Primary, 1)))

			// A fresh cycle works on the same lifecycle.
			r.poison(y)
			cur, _ := l.Current() // a generation whose capture failed may still be current
			tok, err := l.Begin(cur, capturable, nil)
			require.NoError(t, err)
			r.addOne(x.Ptr(), y.Ptr(), n)
			require.NoError(t, l.End(tok))
			require.NoError(t, l.Replay(tok))
			assert.Equal(t, plus(initial, 1), r.read(y.Ptr(), n))
		})
	}
}

// TestEndAndAbortOnAnotherThreadAreRefusedBeforeTheDriver: a thread-local capture must end
// on its own thread; the lifecycle says so without calling the driver, and the capture
// survives to be ended properly.
func TestEndAndAbortOnAnotherThreadAreRefusedBeforeTheDriver(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y := r.buf(n), r.buf(n)
	initial := pattern(n, 5)
	r.upload(x.Ptr(), initial)
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)

	var endErr, abortErr error
	r.onOtherThread(func() {
		endErr = l.End(tok)
		abortErr = l.Abort(tok)
	})
	require.ErrorIs(t, endErr, graphs.ErrWrongThread)
	require.ErrorIs(t, abortErr, graphs.ErrWrongThread)
	assert.Contains(t, endErr.Error(), "OS thread")
	assert.NotEqual(t, cudadrv.ErrorStreamCaptureWrongThread, cudadrv.ResultOf(endErr), "refused before the driver saw it")
	st, err := r.s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusActive, st, "the capture is intact")

	require.NoError(t, l.End(tok))
	require.NoError(t, l.Replay(tok))
	assert.Equal(t, plus(initial, 1), r.read(y.Ptr(), n))
}
