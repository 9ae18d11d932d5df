package graphs_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/graphs"
)

// TestForcedDrainBlocksUntilTheCaptureEnds: a device drain from another goroutine (the ep's
// forced synchronize) parks behind a live capture instead of invalidating it, and runs as
// soon as the capture's End returns. Ordering is proven with the gate's wait hook and
// channels, not with time.
func TestForcedDrainBlocksUntilTheCaptureEnds(t *testing.T) {
	r := newRig(t)
	const n = 128
	x, y := r.buf(n), r.buf(n)
	initial := pattern(n, 9)
	r.upload(x.Ptr(), initial)
	gate := graphs.GateFor(r.ctx) // the device's gate, as the ep's drains use it
	l := r.lifecycle(graphs.Primary, graphs.Config{})
	require.Same(t, gate, l.Gate())

	waiting := make(chan struct{}, 1)
	graphs.SetDrainWaitHook(gate, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	t.Cleanup(func() { graphs.SetDrainWaitHook(gate, nil) })

	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)

	ran := make(chan struct{})
	drained := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.ctx.Bind(); err != nil {
			drained <- err
			return
		}
		drained <- gate.Drain(func() error {
			close(ran)
			// The synchronize that would invalidate a live capture of the device.
			return r.ctx.Synchronize()
		})
	}()

	<-waiting // the drain found the live capture and parked
	select {
	case <-ran:
		t.Fatal("the drain ran while the capture was live")
	default:
	}
	assert.Equal(t, 1, gate.LiveCaptures())
	st, err := r.s.CaptureStatus()
	require.NoError(t, err)
	require.Equal(t, "CU_STREAM_CAPTURE_STATUS_ACTIVE", st.String(), "the capture was not invalidated")

	require.NoError(t, l.End(tok), "the capture survived the concurrent drain request")
	require.NoError(t, <-drained)
	<-ran
	assert.Zero(t, gate.LiveCaptures())

	require.NoError(t, l.Replay(tok))
	assert.Equal(t, plus(initial, 1), r.read(y.Ptr(), n))
}

// TestDrainContextGivesUpWithoutRunning: a bounded drain behind a live capture returns the
// context's error and never runs its function; captures held back by it may proceed.
func TestDrainContextGivesUpWithoutRunning(t *testing.T) {
	r := newRig(t)
	gate := graphs.NewGate()
	l := r.lifecycle(graphs.Primary, graphs.Config{}.WithGate(gate))
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	graphs.SetDrainWaitHook(gate, cancel) // give up as soon as the drain has to wait
	result := make(chan error, 1)
	ran := false
	go func() { result <- gate.DrainContext(ctx, func() error { ran = true; return nil }) }()
	require.ErrorIs(t, <-result, context.Canceled)
	assert.False(t, ran)
	graphs.SetDrainWaitHook(gate, nil)

	require.NoError(t, l.Abort(tok))
	assert.Zero(t, gate.LiveCaptures())
}

// TestGateForSharesOneGatePerDevice: every context of a device gets the same gate; another
// device (here another simulated device, or a private gate) does not.
func TestGateForSharesOneGatePerDevice(t *testing.T) {
	r := newRig(t)
	ctx2, err := r.env.Device.RetainPrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ctx2.Release()) })
	assert.Same(t, graphs.GateFor(r.ctx), graphs.GateFor(ctx2), "two contexts of one device share the gate")
	assert.NotSame(t, graphs.GateFor(r.ctx), graphs.NewGate())
	assert.NotNil(t, graphs.GateFor(nil))
	if r.env.Sim != nil {
		// A second simulated device is another device, even at the same ordinal.
		other := sim.New(sim.Options{})
		t.Cleanup(func() { assert.NoError(t, other.Close()) })
		drv, err := cudadrv.NewDriver(other)
		require.NoError(t, err)
		dev, err := drv.Device(0)
		require.NoError(t, err)
		octx, err := dev.RetainPrimaryContext()
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, octx.Release()) })
		assert.NotSame(t, graphs.GateFor(r.ctx), graphs.GateFor(octx))
	}
}

// TestUncontendedDrainAllocatesNothing: with no capture live, a drain neither waits nor
// allocates (a provider drains on every forced synchronization).
func TestUncontendedDrainAllocatesNothing(t *testing.T) {
	g := graphs.NewGate()
	ran := 0
	fn := func() error { ran++; return nil }
	require.NoError(t, g.Drain(fn))
	allocs := testing.AllocsPerRun(100, func() {
		if err := g.Drain(fn); err != nil {
			t.Error(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 102, ran)
}
