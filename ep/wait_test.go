package ep_test

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// bumpPTX is the step of the wait tests: one thread adds 1 to a 32-bit counter, which lives in
// host-mapped pinned memory so that the host reads it in place, with no copy and no
// synchronization of its own; with fail != 0 it traps instead (a fault of the awaited work).
// On the GPU the driver JIT-compiles it; on sim the body registered below runs.
const bumpPTX = `
.version 7.5
.target sm_75
.address_size 64

// cudaep_test_bump(unsigned int* counter, unsigned int fail)
.visible .entry cudaep_test_bump(
	.param .u64 p_counter,
	.param .u32 p_fail
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;

	ld.param.u64 %rd1, [p_counter];
	ld.param.u32 %r1, [p_fail];
	setp.ne.u32 %p1, %r1, 0;
	@%p1 trap;
	cvta.to.global.u64 %rd2, %rd1;
	ld.volatile.global.u32 %r2, [%rd2];
	add.u32 %r3, %r2, 1;
	st.volatile.global.u32 [%rd2], %r3;
	ret;
}
`

// errBumpTrap is what the sim body of cudaep_test_bump returns for fail != 0: the launch
// faults its context with CUDA_ERROR_LAUNCH_FAILED.
var errBumpTrap = errors.New("cudaep_test_bump: trap")

func init() {
	sim.RegisterKernel("cudaep_test_bump", func(l *sim.Launch) error {
		if l.U32Arg(1) != 0 {
			return errBumpTrap
		}
		c, err := l.Uint32s(l.PtrArg(0), 1)
		if err != nil {
			return err
		}
		c[0]++
		return nil
	})
}

// counter is a 32-bit word of host-mapped pinned memory in a provider's context, which the
// bump step increments.
type counter struct {
	mem  *cudadrv.HostBuffer
	word *uint32
}

// newCounter allocates a counter in p's context, on the test's locked thread, set to 0. It is
// freed before p is closed (in a faulted context the free reports the fault, so a test that
// faults the context passes faulted).
func newCounter(t *testing.T, p *ep.Provider, faulted ...bool) *counter {
	t.Helper()
	require.NoError(t, ep.ContextOf(p).Bind())
	mem, err := ep.ContextOf(p).AllocHostMapped(64)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, ep.ContextOf(p).Bind())
		if err := mem.Free(); len(faulted) == 0 {
			assert.NoError(t, err)
		}
	})
	c := &counter{mem: mem, word: (*uint32)(unsafe.Pointer(unsafe.SliceData(mem.Bytes())))}
	atomic.StoreUint32(c.word, 0)
	return c
}

// value reads the counter in place. The tests read it right after a wait: nothing else orders
// the read after the device's write, so a wait that returned early reads a stale count.
func (c *counter) value() uint32 { return atomic.LoadUint32(c.word) }

// captureBump captures one launch of the bump step on c into slot of p.
func captureBump(t *testing.T, p *ep.Provider, slot ep.Slot, c *counter, fail uint32) {
	t.Helper()
	m, err := p.LoadUserModule([]byte(bumpPTX))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unload() })
	f, err := m.Function("cudaep_test_bump")
	require.NoError(t, err)
	one := ep.Dim3{X: 1, Y: 1, Z: 1}
	require.NoError(t, p.BeginCapture(slot, nil, nil))
	require.NoError(t, f.Launch(one, one, 0, ep.ArgPtr(c.mem.DevicePtr()), ep.ArgU32(fail)))
	require.NoError(t, p.EndCapture(slot))
}

// simOf returns the simulated device under p, or nil on the real GPU.
func simOf(p *ep.Provider) *sim.Device {
	d, _ := ep.ContextOf(p).Backend().(*sim.Device)
	return d
}

// calls counts the sim's calls of op (0 on the real GPU, where the tests skip such checks).
func calls(p *ep.Provider, op string) uint64 {
	if d := simOf(p); d != nil {
		return d.Calls(op)
	}
	return 0
}

func TestWaitModeOption(t *testing.T) {
	for _, tc := range []struct{ option, mode string }{
		{"spin", ep.WaitSpin}, {"block", ep.WaitBlock}, {"auto", ep.WaitSpin}, {"", ep.WaitSpin},
	} {
		t.Run("wait_mode="+tc.option, func(t *testing.T) {
			p := newProvider(t, func(o *ep.Options) { o.WaitMode = tc.option })
			assert.Equal(t, tc.mode, p.WaitMode(), "every device the tests run on writes a mapped word")
			if tc.option == "auto" || tc.option == "" {
				assert.Contains(t, p.WaitModeReason(), "auto chose spin")
			} else {
				assert.Empty(t, p.WaitModeReason())
			}
		})
	}
}

// TestAutoWaitFallsBackToBlockWhereTheWordCannotBeWritten: a device that refuses stream writes
// (CUDA_ERROR_NOT_SUPPORTED, as one without stream memory operations does) leaves auto on the
// driver's wait, saying why, and makes wait_mode=spin fail with the reason.
func TestAutoWaitFallsBackToBlockWhereTheWordCannotBeWritten(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("fault injection needs the simulated device")
	}
	for _, mode := range []string{"auto", "spin"} {
		t.Run(mode, func(t *testing.T) {
			// The injection has to be armed on the device the provider opens: a first
			// provider opens the shared backend and keeps it open.
			keep := newProvider(t)
			d := simOf(keep)
			d.InjectFault(sim.OpStreamWriteValue32, 1, cudadrv.ErrorNotSupported)
			t.Cleanup(d.ClearFaults)
			opts := ep.DefaultOptions()
			opts.Backend, opts.WaitMode = "sim", mode
			p, err := ep.New(opts)
			if mode == "spin" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "wait_mode=spin")
				assert.Equal(t, cudadrv.ErrorNotSupported, cudadrv.ResultOf(err))
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, p.Close()) })
			assert.Equal(t, ep.WaitBlock, p.WaitMode())
			assert.Contains(t, p.WaitModeReason(), "auto chose block")
			assert.Contains(t, p.WaitModeReason(), "CUDA_ERROR_NOT_SUPPORTED")
			syncs := calls(p, sim.OpStreamSynchronize)
			require.NoError(t, p.SynchronizeCompute())
			assert.Equal(t, syncs+1, calls(p, sim.OpStreamSynchronize), "the wait is the driver's")
		})
	}
}

// TestSpinWaitReturnsOnlyAfterTheReplayedWork: every step's kernel takes a while on the
// simulated device (KernelDuration), and the host reads the counter the graph increments in
// place, right after the wait. In spin mode the wait is the word's alone (no driver
// synchronization), in block mode the driver's alone (no word), and both see every step.
func TestSpinWaitReturnsOnlyAfterTheReplayedWork(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{KernelDuration: 2 * time.Millisecond})
	}
	for _, mode := range []string{ep.WaitSpin, ep.WaitBlock} {
		t.Run(mode, func(t *testing.T) {
			p := newProvider(t, func(o *ep.Options) { o.WaitMode = mode })
			ep.SetSpinBudget(p, time.Minute) // the spin always wins: no fallback to count
			c := newCounter(t, p)
			captureBump(t, p, graphs.Primary, c, 0)
			syncs, writes := calls(p, sim.OpStreamSynchronize), calls(p, sim.OpStreamWriteValue32)
			const steps = 5
			for i := uint32(1); i <= steps; i++ {
				require.NoError(t, p.Replay(graphs.Primary))
				require.NoError(t, p.SynchronizeCompute())
				require.Equal(t, i, c.value(), "step %d: the wait returned before the replayed work was visible", i)
			}
			if simOf(p) == nil {
				return
			}
			if mode == ep.WaitSpin {
				assert.Equal(t, syncs, calls(p, sim.OpStreamSynchronize), "spin: no driver synchronization")
				assert.Equal(t, writes+steps, calls(p, sim.OpStreamWriteValue32), "spin: one word write per wait")
			} else {
				assert.Equal(t, syncs+steps, calls(p, sim.OpStreamSynchronize), "block: one driver synchronization per wait")
				assert.Equal(t, writes, calls(p, sim.OpStreamWriteValue32), "block: no word")
			}
		})
	}
}

// TestSpinWaitCoversEveryWorkQueuedBeforeIt: the word is written behind everything on the
// compute stream, not only replays: back-to-back replays and an eager launch after them are
// all done when one wait returns.
func TestSpinWaitCoversEveryWorkQueuedBeforeIt(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{KernelDuration: time.Millisecond})
	}
	p := newProvider(t, func(o *ep.Options) { o.WaitMode = ep.WaitSpin })
	ep.SetSpinBudget(p, time.Minute)
	c := newCounter(t, p)
	captureBump(t, p, graphs.Primary, c, 0)
	m, err := p.LoadUserModule([]byte(bumpPTX))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unload() })
	f, err := m.Function("cudaep_test_bump")
	require.NoError(t, err)
	one := ep.Dim3{X: 1, Y: 1, Z: 1}
	for range 3 {
		require.NoError(t, p.Replay(graphs.Primary))
	}
	require.NoError(t, f.Launch(one, one, 0, ep.ArgPtr(c.mem.DevicePtr()), ep.ArgU32(0)))
	require.NoError(t, p.SynchronizeCompute())
	assert.Equal(t, uint32(4), c.value())
}

// TestSpinWaitReportsAFaultOfTheAwaitedWork: the replayed kernel faults its context, so the
// word never arrives; the spin gives up and the driver's synchronization reports the fault.
// The kernel takes 50 ms on the simulated device, so the wait's word write is queued before
// the fault (a fault already recorded would fail that enqueue instead, and the spin would not
// run at all).
func TestSpinWaitReportsAFaultOfTheAwaitedWork(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("a fault poisons the GPU's primary context for the rest of the process: sim only")
	}
	ep.UseSimOptions(t, sim.Options{KernelDuration: 50 * time.Millisecond})
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	opts := ep.DefaultOptions()
	opts.Backend, opts.WaitMode = "sim", ep.WaitSpin
	p, err := ep.New(opts)
	require.NoError(t, err)
	// Closing a faulted provider reports the fault; it must still close.
	t.Cleanup(func() { _ = p.Close() })
	ep.SetSpinBudget(p, time.Millisecond)
	c := newCounter(t, p, true)
	captureBump(t, p, graphs.Primary, c, 1)
	syncs := calls(p, sim.OpStreamSynchronize)
	require.NoError(t, p.Replay(graphs.Primary), "the fault is asynchronous: the launch is queued")
	err = p.SynchronizeCompute()
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorLaunchFailed, cudadrv.ResultOf(err), "%v", err)
	assert.Contains(t, err.Error(), "trap")
	assert.Less(t, syncs, calls(p, sim.OpStreamSynchronize), "the spin gave up and the driver reported the fault")
	assert.Equal(t, uint32(0), c.value())
	assert.Error(t, p.SynchronizeCompute(), "the context stays faulted")
}

// TestSpinWaitSurfacesAFailedStreamInAChildProcess is TestSpinWaitReportsAFaultOfTheAwaitedWork
// on every backend, the GPU included: a fault poisons the GPU's primary context for the rest
// of its process, so the faulting steps run in a child process (this test binary, re-run on
// this test alone), which reports what its waits returned. On the GPU the fault may already be
// recorded when the wait queues its word write, so the error may come from that enqueue or
// from the driver's synchronization after the spin gives up; either way the wait must fail
// with the driver's error, and keep failing, and the trapped step must have written nothing.
func TestSpinWaitSurfacesAFailedStreamInAChildProcess(t *testing.T) {
	const childEnv = "CUDAEP_TEST_WAIT_FAULT_CHILD"
	if os.Getenv(childEnv) == "1" {
		spinWaitFaultChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpinWaitSurfacesAFailedStreamInAChildProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child process:\n%s", out)
	assert.Contains(t, string(out), "first wait failed: ", "the child ran the faulting step:\n%s", out)
	assert.Contains(t, string(out), "second wait failed: ", "%s", out)
}

// spinWaitFaultChild is the child process's part: a spin-mode provider replays a step whose
// kernel traps, and waits twice.
func spinWaitFaultChild(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		// The kernel takes a while, so the word's write is queued before the fault, as it
		// can be on the GPU.
		ep.UseSimOptions(t, sim.Options{KernelDuration: 20 * time.Millisecond})
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	opts := ep.DefaultOptions()
	opts.Backend, opts.WaitMode = drivertest.BackendName(), ep.WaitSpin
	p, err := ep.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() }) // closing a faulted provider reports the fault
	require.Equal(t, ep.WaitSpin, p.WaitMode())
	ep.SetSpinBudget(p, time.Millisecond)
	c := newCounter(t, p, true)
	captureBump(t, p, graphs.Primary, c, 1)
	require.NoError(t, p.Replay(graphs.Primary), "the fault is asynchronous: the launch is queued")
	err = p.SynchronizeCompute()
	require.Error(t, err, "the wait returned success after a trapped kernel")
	assert.Equal(t, ep.CodeDriver, ep.Code(err), "%v", err)
	assert.True(t, cudadrv.ResultOf(err).Sticky(), "a fault of the awaited work is the context's sticky error: %v", err)
	t.Logf("first wait failed: %v", err)
	assert.Equal(t, uint32(0), c.value(), "the trapped step wrote nothing")
	err = p.SynchronizeCompute()
	require.Error(t, err, "the context stays faulted")
	t.Logf("second wait failed: %v", err)
}

// TestReplayAndWaitAllocateNothing: the allocation budget of a step (Replay, then
// SynchronizeCompute) is zero in both wait modes, and in spin mode on both of its paths: the
// word arriving within the spin, and the spin giving up for the driver's synchronization.
//
// AllocsPerRun runs on one P, where the simulated device's stream worker cannot run while the
// wait spins (on a GPU the device needs no P): there every spin gives up, so the run measures
// the path through the driver's synchronization; a second run, with the process's Ps and a
// long spin, measures the word's path (the simulator's call counts prove which one ran).
func TestReplayAndWaitAllocateNothing(t *testing.T) {
	for _, mode := range []string{ep.WaitSpin, ep.WaitBlock} {
		t.Run(mode, func(t *testing.T) {
			p := newProvider(t, func(o *ep.Options) { o.WaitMode = mode })
			c := newCounter(t, p)
			captureBump(t, p, graphs.Primary, c, 0)
			step := func() {
				if err := p.Replay(graphs.Primary); err != nil {
					t.Fatal(err)
				}
				if err := p.SynchronizeCompute(); err != nil {
					t.Fatal(err)
				}
			}
			step()
			before := c.value()
			ep.SetSpinBudget(p, 200*time.Microsecond)
			allocs := testing.AllocsPerRun(100, step)
			assert.Zero(t, allocs, "%s: allocations per replay + wait", mode)
			assert.Equal(t, before+101, c.value(), "every step ran")
			if mode != ep.WaitSpin {
				return
			}
			if simOf(p) != nil && runtime.GOMAXPROCS(0) == 1 {
				t.Skip("the word's path on the simulated device needs a P for its stream worker besides the spinning one")
			}

			ep.SetSpinBudget(p, time.Minute)
			const steps = 200
			syncs := calls(p, sim.OpStreamSynchronize)
			var m0, m1 runtime.MemStats
			step()
			runtime.ReadMemStats(&m0)
			for range steps {
				step()
			}
			runtime.ReadMemStats(&m1)
			assert.Equal(t, syncs, calls(p, sim.OpStreamSynchronize), "every wait was the word's")
			if simOf(p) != nil {
				// The count is process-wide: on the simulator it includes the Go kernels its
				// stream worker runs, which allocate now and then (seen: a clean run, then a
				// failing one). AllocsPerRun above bounds the per-step average; the strict
				// count is asserted on the GPU.
				return
			}
			assert.Zero(t, m1.Mallocs-m0.Mallocs, "allocations over %d steps whose wait was the word's", steps)
		})
	}
}

// TestHotCallsBindOnlyWhenAnotherContextIsCurrent: Replay and SynchronizeCompute make no
// cuCtxSetCurrent while the provider's context stays current on the thread, and still run in
// it after the host unbinds it (cuCtxSetCurrent(NULL) through the driver surface directly):
// the refused call binds and runs again (on the GPU the driver may also run it unbound). The
// driver calls are counted on the simulated device only.
func TestHotCallsBindOnlyWhenAnotherContextIsCurrent(t *testing.T) {
	p := newProvider(t)
	ep.SetSpinBudget(p, time.Minute)
	c := newCounter(t, p)
	captureBump(t, p, graphs.Primary, c, 0)
	step := func() {
		t.Helper()
		require.NoError(t, p.Replay(graphs.Primary))
		require.NoError(t, p.SynchronizeCompute())
	}
	step()
	binds := calls(p, sim.OpCtxSetCurrent)
	for range 10 {
		step()
	}
	assert.Equal(t, uint32(11), c.value())
	assert.Equal(t, binds, calls(p, sim.OpCtxSetCurrent), "no bind while the context is current")

	unbind := func() {
		t.Helper()
		require.NoError(t, ep.ContextOf(p).Backend().CtxSetCurrent(0))
		cur, err := ep.ContextOf(p).Backend().CtxGetCurrent()
		require.NoError(t, err)
		require.Zero(t, cur)
	}
	unbind()
	require.NoError(t, p.Replay(graphs.Primary), "the refused launch bound the context and ran again")
	unbind()
	require.NoError(t, p.SynchronizeCompute(), "the refused wait bound the context and ran again")
	assert.Equal(t, uint32(12), c.value())
	unbind()
	require.NoError(t, p.ReplaySegment(graphs.Primary, 0))
	require.NoError(t, p.SynchronizeCompute())
	assert.Equal(t, uint32(13), c.value())
	if simOf(p) != nil { // the sim refuses every call without a current context; the driver may run it
		assert.Equal(t, binds+3+3, calls(p, sim.OpCtxSetCurrent), "the three unbinds, and one bind per refused call")
	}
	assert.NoError(t, ep.ContextOf(p).StickyError())
}

// TestOneThreadAlternatesBetweenProvidersOfTwoContexts: two providers on two devices (so two
// contexts) driven from one OS thread, replaying and waiting in turn, with eager work and
// reads in between. The simulated device refuses a call made in another context than its
// stream's, so every call that succeeds ran in the right one; each switch costs one bind.
func TestOneThreadAlternatesBetweenProvidersOfTwoContexts(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("needs two devices: the simulated device has as many as asked")
	}
	ep.UseSimOptions(t, sim.Options{Devices: 2})
	ps := []*ep.Provider{newProvider(t), newProvider(t, func(o *ep.Options) { o.DeviceID = 1 })}
	require.NotEqual(t, ep.ContextOf(ps[0]).Raw(), ep.ContextOf(ps[1]).Raw(), "two contexts")
	var cs []*counter
	var xs, ys []*ep.Buffer
	for _, p := range ps {
		ep.SetSpinBudget(p, time.Minute)
		c := newCounter(t, p)
		captureBump(t, p, graphs.Primary, c, 0)
		cs = append(cs, c)
		xs = append(xs, upload(t, p, drivertest.RandomFloat32(64)))
		ys = append(ys, alloc(t, p, 4*64))
	}
	const rounds = 6
	for r := range rounds {
		for i, p := range ps {
			binds := calls(p, sim.OpCtxSetCurrent)
			require.NoError(t, p.Replay(graphs.Primary), "round %d provider %d", r, i)
			assert.Equal(t, binds+1, calls(p, sim.OpCtxSetCurrent), "the other provider's context was current: one bind")
			require.NoError(t, p.SynchronizeCompute())
			assert.Equal(t, uint32(r+1), cs[i].value(), "round %d provider %d", r, i)
			require.NoError(t, p.CopyBuffer(ys[i], 0, xs[i], 0, 4*64))
			assert.Equal(t, download(t, p, xs[i]), download(t, p, ys[i]))
		}
	}
	for i, p := range ps {
		assert.NoError(t, ep.ContextOf(p).StickyError(), "provider %d", i)
	}
}

// TestARefusalFromAnotherContextLeavesNoStickyError: with a faulted context of another device
// current on the thread, the simulated driver refuses the provider's replay with that
// context's sticky error, which the first attempt records against the provider's context. The
// bound retry succeeds, so the error is retracted: the provider's context is healthy.
func TestARefusalFromAnotherContextLeavesNoStickyError(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("needs two devices and fault injection: sim only")
	}
	ep.UseSimOptions(t, sim.Options{Devices: 2})
	p := newProvider(t)
	ep.SetSpinBudget(p, time.Minute)
	c := newCounter(t, p)
	captureBump(t, p, graphs.Primary, c, 0)

	opts := ep.DefaultOptions()
	opts.Backend, opts.DeviceID = "sim", 1
	q, err := ep.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() }) // q's context is faulted below: its close reports it
	d := simOf(q)
	require.NoError(t, ep.ContextOf(q).Bind())
	d.InjectFault(sim.OpMemGetInfo, 1, cudadrv.ErrorIllegalAddress) // faults q's context, current here
	_, _, err = ep.ContextOf(q).MemInfo()
	require.Equal(t, cudadrv.ErrorIllegalAddress, cudadrv.ResultOf(err))

	require.NoError(t, p.Replay(graphs.Primary))
	require.NoError(t, p.SynchronizeCompute())
	assert.Equal(t, uint32(1), c.value())
	assert.NoError(t, ep.ContextOf(p).StickyError(), "q's fault is not p's")
}

// TestReplayRunsAgainOnlyWhenNothingWasEnqueued: a replay refused at its first segment's
// launch binds and runs again (each segment runs once); one refused at a later segment is not
// run again, which would launch the earlier segments twice.
func TestReplayRunsAgainOnlyWhenNothingWasEnqueued(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("fault injection needs the simulated device")
	}
	p := newProvider(t)
	ep.SetSpinBudget(p, time.Minute)
	c := newCounter(t, p)
	captureBump(t, p, graphs.Primary, c, 0)
	captureBump(t, p, graphs.Primary, c, 0) // a second segment of the same generation
	require.Equal(t, 2, p.SegmentCount(graphs.Primary))
	d := simOf(p)

	launches := d.Calls(sim.OpGraphLaunch)
	d.InjectFault(sim.OpGraphLaunch, 2, cudadrv.ErrorInvalidHandle)
	err := p.Replay(graphs.Primary)
	var le *graphs.LaunchError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, le.Enqueued)
	require.NoError(t, p.SynchronizeCompute())
	assert.Equal(t, uint32(1), c.value(), "segment 0 ran once: the replay was not repeated")
	assert.Equal(t, launches+2, d.Calls(sim.OpGraphLaunch))

	launches = d.Calls(sim.OpGraphLaunch)
	d.InjectFault(sim.OpGraphLaunch, 1, cudadrv.ErrorInvalidHandle)
	require.NoError(t, p.Replay(graphs.Primary), "refused before anything was enqueued: run again")
	require.NoError(t, p.SynchronizeCompute())
	assert.Equal(t, uint32(3), c.value(), "each segment ran once more")
	assert.Equal(t, launches+3, d.Calls(sim.OpGraphLaunch))
}
