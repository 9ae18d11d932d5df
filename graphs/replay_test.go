package graphs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
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
