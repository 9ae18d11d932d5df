package graphs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/graphs"
)

// launchStub is the backend of the replay allocation test on the simulated device: the sim
// queues allocate by design, so its GraphLaunch is replaced by a counter and what remains
// measured is this package and the cudadrv wrappers. On the real GPU the launch is real.
type launchStub struct {
	cudadrv.Backend
	launches int
}

func (b *launchStub) GraphLaunch(cudadrv.RawGraphExec, cudadrv.RawStream) error {
	b.launches++
	return nil
}

// stubbedRig returns a rig whose context runs on a launchStub over the test backend when that
// is the simulated device, and r itself on the real GPU.
func stubbedRig(t testing.TB, r *rig) (*rig, *launchStub) {
	t.Helper()
	if r.env.Sim == nil {
		return r, nil
	}
	stub := &launchStub{Backend: r.ctx.Backend()}
	drv, err := cudadrv.NewDriver(stub)
	require.NoError(t, err)
	dev, err := drv.Device(0)
	require.NoError(t, err)
	ctx, err := dev.RetainPrimaryContext()
	require.NoError(t, err)
	require.NoError(t, ctx.Bind())
	t.Cleanup(func() {
		assert.Empty(t, drivertest.Leaks(ctx.Counters()), "leaked through the stubbed context")
		assert.NoError(t, ctx.Release())
		assert.NoError(t, r.ctx.Bind())
	})
	mod, err := ctx.LoadModule([]byte(drivertest.AddOnePTX))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mod.Unload()) })
	fn, err := mod.Function("add_one")
	require.NoError(t, err)
	s, err := ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Destroy()) })
	return &rig{t: t, env: r.env, ctx: ctx, s: s, fn: fn, args: new(cudadrv.KernelArgs)}, stub
}

// TestReplayIsAllocationFreeAndLockFree: Replay, ReplaySegment and the Slots' replay by slot
// allocate nothing and take no lock.
func TestReplayIsAllocationFreeAndLockFree(t *testing.T) {
	r, stub := stubbedRig(t, newRig(t))
	const n = 64
	a, b, c := r.buf(n), r.buf(n), r.buf(n)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(a.Ptr(), b.Ptr(), n)
	require.NoError(t, l.End(tok))
	_, err = l.Begin(tok, capturable, nil)
	require.NoError(t, err)
	r.addOne(b.Ptr(), c.Ptr(), n)
	require.NoError(t, l.End(tok))

	locks := l.Stats().LockAcquisitions
	launches := l.Stats().ReplayLaunches
	calls := []struct {
		name     string
		launches uint64
		call     func() error
	}{
		{"Lifecycle.Replay", 2, func() error { return l.Replay(tok) }},
		{"Lifecycle.ReplaySegment", 1, func() error { return l.ReplaySegment(tok, 1) }},
		{"Slots.Replay", 2, func() error { return slots.Replay(graphs.Primary) }},
		{"Slots.ReplaySegment", 1, func() error { return slots.ReplaySegment(graphs.Primary, 0) }},
	}
	const runs = 200
	for _, tc := range calls {
		var callErr error
		allocs := testing.AllocsPerRun(runs, func() {
			if err := tc.call(); err != nil {
				callErr = err
			}
		})
		require.NoError(t, callErr, tc.name)
		assert.Zero(t, allocs, "%s allocates", tc.name)
		launches += (runs + 1) * tc.launches
		assert.Equal(t, launches, l.Stats().ReplayLaunches, "%s launched", tc.name)
		require.NoError(t, r.s.Synchronize())
	}
	assert.Equal(t, locks, l.Stats().LockAcquisitions, "replay takes no lock")
	if stub != nil {
		assert.Equal(t, int(launches), stub.launches, "every launch reached the backend")
	}
}

// TestReplayAdmitsOnceAndLaunchesTheAdmittedSet: every replay path, the Slots' replay by slot
// included, is admitted into the epoch exactly once and launches the set it was admitted
// under, loading the published set nowhere else. The test keeps a forged set published at
// every moment but the admission itself (from entering the epoch until admitted): a path
// that admits twice counts two admissions, and one that loads the set before admission (to
// learn the token) or again after it meets the forgery, which has no segment and names a
// generation that is not installed.
func TestReplayAdmitsOnceAndLaunchesTheAdmittedSet(t *testing.T) {
	r := newRig(t)
	const n = 32
	x, y, z := r.buf(n), r.buf(n), r.buf(n)
	input := pattern(n, 21)
	r.upload(x.Ptr(), input)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n) // segment 0: y = x + 1
	require.NoError(t, l.End(tok))
	_, err = l.Begin(tok, capturable, nil)
	require.NoError(t, err)
	r.addOne(y.Ptr(), z.Ptr(), n) // segment 1: z = y + 1
	require.NoError(t, l.End(tok))

	var (
		admissions int
		undo       func() // puts the real set back in place of the forgery published now
	)
	graphs.SetLifecycleHooks(l, graphs.LifecycleHooks{
		BeforeEnter: func() {
			if undo != nil {
				undo()
				undo = nil
			}
		},
		Admitted: func() {
			admissions++
			undo = graphs.ForgePublishedSet(l)
		},
	})
	calls := []struct {
		name     string
		call     func() error
		launches uint64
		out      *cudadrv.DeviceBuffer
		want     []float32
	}{
		{"Slots.Replay", func() error { return slots.Replay(graphs.Primary) }, 2, z, plus(input, 2)},
		{"Slots.ReplaySegment", func() error { return slots.ReplaySegment(graphs.Primary, 0) }, 1, y, plus(input, 1)},
		{"Lifecycle.Replay", func() error { return l.Replay(tok) }, 2, z, plus(input, 2)},
		{"Lifecycle.ReplaySegment", func() error { return l.ReplaySegment(tok, 0) }, 1, y, plus(input, 1)},
	}
	for _, tc := range calls {
		r.poison(y)
		r.poison(z)
		admissions = 0
		launches := l.Stats().ReplayLaunches
		undo = graphs.ForgePublishedSet(l)
		err := tc.call()
		if undo != nil {
			undo()
			undo = nil
		}
		require.NoError(t, err, "%s launched the set it was admitted under and loaded no other", tc.name)
		assert.Equal(t, 1, admissions, "%s admitted exactly once", tc.name)
		assert.Equal(t, launches+tc.launches, l.Stats().ReplayLaunches, "%s launched", tc.name)
		assert.Equal(t, tc.want, r.read(tc.out.Ptr(), n), "%s computed", tc.name)
	}

	// The forgery has teeth: a replay admitted while it is published does not launch.
	graphs.SetLifecycleHooks(l, graphs.LifecycleHooks{})
	undo = graphs.ForgePublishedSet(l)
	launches := l.Stats().ReplayLaunches
	assert.Error(t, slots.Replay(graphs.Primary), "a forged set is refused")
	assert.Error(t, l.Replay(tok), "a forged set is refused")
	assert.Equal(t, launches, l.Stats().ReplayLaunches)
	undo()
	require.NoError(t, slots.Replay(graphs.Primary))
}

// TestFailedLaunchSaysWhatWasEnqueued: a replay whose launch fails returns a *LaunchError
// wrapping the driver's error, naming the segment and how many segments it had enqueued
// before, so that a caller knows whether running it again would launch any segment twice.
func TestFailedLaunchSaysWhatWasEnqueued(t *testing.T) {
	r := newRig(t)
	if r.env.Sim == nil {
		t.Skip("needs the sim backend's fault injection")
	}
	const n = 16
	x, y, z := r.buf(n), r.buf(n), r.buf(n)
	slots := r.slots(graphs.Config{})
	l, err := slots.Lifecycle(graphs.Primary)
	require.NoError(t, err)
	tok, err := l.Begin(graphs.Token{}, capturable, nil)
	require.NoError(t, err)
	r.addOne(x.Ptr(), y.Ptr(), n)
	require.NoError(t, l.End(tok))
	_, err = l.Begin(tok, capturable, nil)
	require.NoError(t, err)
	r.addOne(y.Ptr(), z.Ptr(), n)
	require.NoError(t, l.End(tok))

	for _, tc := range []struct {
		name                        string
		nth                         int
		call                        func() error
		segment, segments, enqueued int
		message                     string
	}{
		{"first of two", 1, func() error { return slots.Replay(graphs.Primary) }, 0, 2, 0, "launch segment 0 of 2"},
		{"second of two", 2, func() error { return l.Replay(tok) }, 1, 2, 1, "launch segment 1 of 2"},
		{"one segment", 1, func() error { return slots.ReplaySegment(graphs.Primary, 1) }, 1, 0, 0, "launch segment 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.env.BindHere(t)
			r.env.Sim.InjectFault(sim.OpGraphLaunch, tc.nth, cudadrv.ErrorInvalidHandle)
			err := tc.call()
			var le *graphs.LaunchError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tok, le.Token)
			assert.Equal(t, tc.segment, le.Segment)
			assert.Equal(t, tc.segments, le.Segments)
			assert.Equal(t, tc.enqueued, le.Enqueued)
			assert.Equal(t, cudadrv.ErrorInvalidHandle, cudadrv.ResultOf(err), "the driver's error is wrapped")
			assert.Contains(t, err.Error(), tc.message)
			require.NoError(t, r.s.Synchronize())
		})
	}
}
