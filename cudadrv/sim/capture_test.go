package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

var captureModes = []struct {
	name string
	mode cudadrv.CaptureMode
}{
	{"global", cudadrv.CaptureModeGlobal},
	{"thread-local", cudadrv.CaptureModeThreadLocal},
	{"relaxed", cudadrv.CaptureModeRelaxed},
}

func (e *env) status(s cudadrv.RawStream) cudadrv.CaptureStatus {
	e.t.Helper()
	st, err := e.d.StreamCaptureStatus(s)
	require.NoError(e.t, err)
	return st
}

// requireInvalidatedAndRecoverable checks that the capture on s is invalidated, that enqueues
// fail, that ending it reports the invalidation without a graph, and that s works afterwards.
func (e *env) requireInvalidatedAndRecoverable(t *testing.T, s cudadrv.RawStream) {
	t.Helper()
	p := e.scratch // allocating now would be an unsafe call during the (invalidated) capture
	assert.Equal(t, cudadrv.CaptureStatusInvalidated, e.status(s))
	requireResult(t, e.launchTouch(s, p, 8), cudadrv.ErrorStreamCaptureInvalidated)
	requireResult(t, e.d.MemcpyHtoDAsync(p, []byte{1}, s), cudadrv.ErrorStreamCaptureInvalidated)
	g, err := e.d.StreamEndCapture(s)
	requireResult(t, err, cudadrv.ErrorStreamCaptureInvalidated)
	assert.Zero(t, g)
	assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s), "ending the invalidated capture ended it")
	e.put(p, pattern(8, 1))
	require.NoError(t, e.launchTouch(s, p, 8))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(pattern(8, 1)), e.get(p, 8), "the stream runs work again")
	assert.Zero(t, e.d.Stats().Captures)
}

func TestCaptureRecordsInsteadOfExecuting(t *testing.T) {
	for _, m := range captureModes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, sim.Options{})
			s := e.stream()
			p, q := e.alloc(64), e.alloc(64)
			e.put(p, pattern(64, 1))
			e.put(q, pattern(64, 2))
			src := pattern(64, 10)
			dst := make([]byte, 64)
			ev := e.event(0)

			require.NoError(t, e.d.StreamBeginCapture(s, m.mode))
			assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s))
			require.NoError(t, e.d.MemcpyHtoDAsync(p, src, s))
			require.NoError(t, e.d.EventRecord(ev, s))
			require.NoError(t, e.launchTouch(s, p, 64))
			require.NoError(t, e.d.StreamWaitEvent(s, ev))
			require.NoError(t, e.d.MemsetD8Async(q, 0x5A, 16, s))
			require.NoError(t, e.d.MemcpyDtoHAsync(dst, p, s))
			g, err := e.d.StreamEndCapture(s)
			require.NoError(t, err)
			assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s))

			n, err := e.d.GraphNodeCount(g)
			require.NoError(t, err)
			assert.Equal(t, 4, n, "copy, kernel, memset, copy; event record and wait are edges")
			assert.Equal(t, pattern(64, 1), e.get(p, 64), "nothing ran during capture")
			assert.Equal(t, pattern(64, 2), e.get(q, 64))
			assert.Equal(t, make([]byte, 64), dst)

			copy(src, pattern(64, 20)) // a captured copy reads its host slice at replay time
			x, err := e.d.GraphInstantiate(g, 0)
			require.NoError(t, err)
			require.NoError(t, e.d.GraphLaunch(x, s))
			require.NoError(t, e.d.StreamSynchronize(s))
			assert.Equal(t, plusOne(pattern(64, 20)), e.get(p, 64))
			assert.Equal(t, plusOne(pattern(64, 20)), dst, "the captured D2H wrote the host slice at replay")
			assert.Equal(t, append(bytesOf(0x5A, 16), pattern(64, 2)[16:]...), e.get(q, 64))
		})
	}
}

func TestSynchronizingTheCapturingStreamInvalidates(t *testing.T) {
	calls := []struct {
		name string
		call func(d *sim.Device, s cudadrv.RawStream) error
	}{
		{"StreamSynchronize", func(d *sim.Device, s cudadrv.RawStream) error { return d.StreamSynchronize(s) }},
		{"StreamQuery", func(d *sim.Device, s cudadrv.RawStream) error { return d.StreamQuery(s) }},
	}
	for _, m := range captureModes {
		for _, c := range calls {
			for _, other := range []bool{false, true} {
				name := m.name + "/" + c.name + "/same thread"
				if other {
					name = m.name + "/" + c.name + "/other thread"
				}
				t.Run(name, func(t *testing.T) {
					e := newEnv(t, sim.Options{})
					s := e.stream()
					require.NoError(t, e.d.StreamBeginCapture(s, m.mode))
					var err error
					if other {
						e.onThread(true, func() { err = c.call(e.d, s) })
					} else {
						err = c.call(e.d, s)
					}
					requireResult(t, err, cudadrv.ErrorStreamCaptureUnsupported)
					e.requireInvalidatedAndRecoverable(t, s)
				})
			}
		}
	}
}

func TestUnsafeCallsDuringCapture(t *testing.T) {
	type fixture struct {
		p     cudadrv.DevicePtr
		host  []byte
		other cudadrv.RawStream
		ev    cudadrv.RawEvent
	}
	calls := []struct {
		name string
		call func(e *env, f *fixture) error
	}{
		{"MemAlloc", func(e *env, f *fixture) error { _, err := e.d.MemAlloc(64); return err }},
		{"MemFree", func(e *env, f *fixture) error { return e.d.MemFree(f.p) }},
		{"MemHostAlloc", func(e *env, f *fixture) error { _, err := e.d.MemHostAlloc(64); return err }},
		{"MemHostRegister", func(e *env, f *fixture) error { return e.d.MemHostRegister(f.host, 0) }},
		{"MemcpyHtoD", func(e *env, f *fixture) error { return e.d.MemcpyHtoD(f.p, f.host[:8]) }},
		{"MemcpyDtoH", func(e *env, f *fixture) error { return e.d.MemcpyDtoH(f.host[:8], f.p) }},
		{"MemcpyDtoD", func(e *env, f *fixture) error { return e.d.MemcpyDtoD(f.p, f.p+8, 8) }},
		{"MemsetD8", func(e *env, f *fixture) error { return e.d.MemsetD8(f.p, 1, 8) }},
		{"ModuleLoadData", func(e *env, f *fixture) error { _, err := e.d.ModuleLoadData([]byte(testPTX)); return err }},
		{"CtxSynchronize", func(e *env, f *fixture) error { return e.d.CtxSynchronize() }},
		{"StreamSynchronize of another stream", func(e *env, f *fixture) error { return e.d.StreamSynchronize(f.other) }},
		{"StreamQuery of another stream", func(e *env, f *fixture) error { return e.d.StreamQuery(f.other) }},
		{"StreamSynchronize of the legacy stream", func(e *env, f *fixture) error { return e.d.StreamSynchronize(0) }},
		{"EventQuery", func(e *env, f *fixture) error { return e.d.EventQuery(f.ev) }},
		{"EventSynchronize", func(e *env, f *fixture) error { return e.d.EventSynchronize(f.ev) }},
	}
	// prohibited reports whether the call fails (and invalidates) for a capture in mode, made
	// on the capturing thread or another one.
	prohibited := func(call string, mode cudadrv.CaptureMode, otherThread bool) bool {
		switch {
		case call == "CtxSynchronize":
			return true
		case mode == cudadrv.CaptureModeGlobal:
			return true
		case mode == cudadrv.CaptureModeThreadLocal:
			return !otherThread
		}
		return false
	}
	for _, m := range captureModes {
		for _, c := range calls {
			for _, other := range []bool{false, true} {
				name := m.name + "/" + c.name + "/same thread"
				if other {
					name = m.name + "/" + c.name + "/other thread"
				}
				t.Run(name, func(t *testing.T) {
					e := newEnv(t, sim.Options{})
					s := e.stream() // non-blocking
					f := &fixture{p: e.alloc(64), host: make([]byte, 64), other: e.stream(), ev: e.event(0)}
					require.NoError(t, e.d.EventRecord(f.ev, f.other))
					require.NoError(t, e.d.EventSynchronize(f.ev))
					require.NoError(t, e.d.StreamBeginCapture(s, m.mode))
					var err error
					if other {
						e.onThread(true, func() { err = c.call(e, f) })
					} else {
						err = c.call(e, f)
					}
					if !prohibited(c.name, m.mode, other) {
						require.NoError(t, err)
						assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s))
						_, err := e.d.StreamEndCapture(s)
						require.NoError(t, err)
						return
					}
					requireResult(t, err, cudadrv.ErrorStreamCaptureUnsupported)
					e.requireInvalidatedAndRecoverable(t, s)
				})
			}
		}
	}
}

func TestThreadLocalCaptureMeasuredFacts(t *testing.T) {
	// DESIGN.md, measured on the H200: during a THREAD_LOCAL capture on a non-blocking stream,
	// from another thread, syncing another stream, the legacy stream, a sync D2H and
	// alloc/free do not invalidate; cuCtxSynchronize fails and invalidates.
	e := newEnv(t, sim.Options{})
	s, other := e.stream(), e.stream()
	p := e.alloc(16)
	e.put(p, pattern(16, 8))
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.launchTouch(s, p, 16))
	e.onThread(true, func() {
		assert.NoError(t, e.launchTouch(other, p, 16))
		assert.NoError(t, e.d.StreamSynchronize(other))
		assert.NoError(t, e.d.StreamSynchronize(0))
		b := make([]byte, 16)
		assert.NoError(t, e.d.MemcpyDtoH(b, p))
		assert.Equal(t, plusOne(pattern(16, 8)), b, "only the other stream's touch ran")
		q, err := e.d.MemAlloc(32)
		assert.NoError(t, err)
		assert.NoError(t, e.d.MemFree(q))
	})
	assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s))
	e.onThread(true, func() {
		requireResult(t, e.d.CtxSynchronize(), cudadrv.ErrorStreamCaptureUnsupported)
	})
	e.requireInvalidatedAndRecoverable(t, s)
}

// TestThreadLocalCaptureProhibitsUnsafeCallsInEveryContext: the prohibition of a
// thread-local capture belongs to its thread, not its context. On the capturing thread an
// allocation or an event query in another device's context fails and invalidates the capture
// (the driver's rule for cuStreamBeginCapture's modes); the same calls from another thread
// are allowed.
func TestThreadLocalCaptureProhibitsUnsafeCallsInEveryContext(t *testing.T) {
	e := newEnv(t, sim.Options{Devices: 2})
	other, err := e.d.PrimaryCtxRetain(1)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.d.PrimaryCtxRelease(1)) })
	require.NoError(t, e.d.CtxSetCurrent(other))
	ev, err := e.d.EventCreate(0)
	require.NoError(t, err)
	require.NoError(t, e.d.CtxSetCurrent(e.ctx))
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"MemAlloc", func() error { _, err := e.d.MemAlloc(64); return err }},
		{"EventQuery", func() error { return e.d.EventQuery(ev) }},
	} {
		s := e.stream()
		require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
		var fromOther error
		e.onThread(false, func() {
			require.NoError(t, e.d.CtxSetCurrent(other))
			fromOther = c.call()
		})
		assert.NoError(t, fromOther, "%s on another thread", c.name)
		assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s), "%s on another thread", c.name)
		require.NoError(t, e.d.CtxSetCurrent(other))
		err := c.call()
		require.NoError(t, e.d.CtxSetCurrent(e.ctx))
		requireResult(t, err, cudadrv.ErrorStreamCaptureUnsupported, "%s in device 1's context on the capturing thread", c.name)
		e.requireInvalidatedAndRecoverable(t, s)
	}
}

func TestLegacyStreamWorkDuringBlockingStreamCapture(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s, err := e.d.StreamCreate(0, 0) // blocking: synchronizes with the legacy stream
	require.NoError(t, err)
	p := e.alloc(8)
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	_, err = e.d.StreamCaptureStatus(0)
	requireResult(t, err, cudadrv.ErrorStreamCaptureImplicit)
	e.onThread(true, func() {
		requireResult(t, e.d.MemcpyHtoD(p, []byte{1, 2}), cudadrv.ErrorStreamCaptureImplicit)
	})
	e.requireInvalidatedAndRecoverable(t, s)

	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeRelaxed))
	requireResult(t, e.launchTouch(0, p, 8), cudadrv.ErrorStreamCaptureImplicit, "a launch on the legacy stream")
	e.requireInvalidatedAndRecoverable(t, s)

	status, err := e.d.StreamCaptureStatus(0)
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, status)
}

func TestEndCaptureOnAnotherThread(t *testing.T) {
	for _, m := range captureModes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, sim.Options{})
			s := e.stream()
			p := e.alloc(8)
			require.NoError(t, e.d.StreamBeginCapture(s, m.mode))
			require.NoError(t, e.launchTouch(s, p, 8))
			var g cudadrv.RawGraph
			var err error
			e.onThread(true, func() { g, err = e.d.StreamEndCapture(s) })
			if m.mode == cudadrv.CaptureModeRelaxed {
				require.NoError(t, err, "relaxed captures may end anywhere")
			} else {
				requireResult(t, err, cudadrv.ErrorStreamCaptureWrongThread)
				assert.Zero(t, g)
				assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s), "the refused end ends the capture, as on the H200")
				_, err = e.d.StreamEndCapture(s)
				requireResult(t, err, cudadrv.ErrorIllegalState, "nothing is left to end")
				return
			}
			n, err := e.d.GraphNodeCount(g)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
}

func TestCaptureStateErrors(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	_, err := e.d.StreamEndCapture(s)
	requireResult(t, err, cudadrv.ErrorIllegalState, "end without begin")
	requireResult(t, e.d.StreamBeginCapture(0, cudadrv.CaptureModeGlobal), cudadrv.ErrorStreamCaptureUnsupported, "legacy stream")
	requireResult(t, e.d.StreamBeginCapture(s, 7), cudadrv.ErrorInvalidValue)
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeGlobal))
	requireResult(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeGlobal), cudadrv.ErrorIllegalState, "begin twice")
	assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s), "a refused second begin leaves the capture alone")
	g, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	n, err := e.d.GraphNodeCount(g)
	require.NoError(t, err)
	assert.Zero(t, n, "an empty capture is an empty graph")
	requireResult(t, e.d.StreamBeginCapture(0xfeed, cudadrv.CaptureModeGlobal), cudadrv.ErrorInvalidHandle)
}

func TestWaitOnEventRecordedOutsideTheCaptureIsIsolation(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s, other := e.stream(), e.stream()
	outside := e.event(0)
	require.NoError(t, e.d.EventRecord(outside, other))
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	requireResult(t, e.d.StreamWaitEvent(s, outside), cudadrv.ErrorStreamCaptureIsolation)
	e.requireInvalidatedAndRecoverable(t, s)

	never := e.event(0)
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.d.StreamWaitEvent(s, never), "waiting on a never-recorded event is a no-op")
	_, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
}

func TestQueryingACapturedEvent(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	ev := e.event(0)
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeRelaxed))
	require.NoError(t, e.d.EventRecord(ev, s))
	requireResult(t, e.d.EventQuery(ev), cudadrv.ErrorCapturedEvent)
	e.requireInvalidatedAndRecoverable(t, s)
	requireResult(t, e.d.EventSynchronize(ev), cudadrv.ErrorCapturedEvent, "until recorded outside a capture again")
	require.NoError(t, e.d.EventRecord(ev, s))
	require.NoError(t, e.d.EventSynchronize(ev))
}

func TestForkAndJoinDuringCapture(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s1, s2 := e.stream(), e.stream()
	p, q := e.alloc(8), e.alloc(8)
	e.put(p, pattern(8, 1))
	e.put(q, pattern(8, 2))
	fork, join := e.event(cudadrv.EventDisableTiming), e.event(cudadrv.EventDisableTiming)

	require.NoError(t, e.d.StreamBeginCapture(s1, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.launchTouch(s1, p, 8))
	require.NoError(t, e.d.EventRecord(fork, s1))
	require.NoError(t, e.d.StreamWaitEvent(s2, fork))
	assert.Equal(t, cudadrv.CaptureStatusActive, e.status(s2), "s2 joined the capture")
	require.NoError(t, e.launchTouch(s2, q, 8))
	require.NoError(t, e.d.EventRecord(join, s2))
	require.NoError(t, e.d.StreamWaitEvent(s1, join))
	_, err := e.d.StreamEndCapture(s2)
	requireResult(t, err, cudadrv.ErrorStreamCaptureUnmatched, "only the origin ends the capture")
	assert.Equal(t, cudadrv.CaptureStatusInvalidated, e.status(s1))
	_, err = e.d.StreamEndCapture(s1)
	requireResult(t, err, cudadrv.ErrorStreamCaptureInvalidated)
	assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s2), "ending the origin released the forked stream")

	// Again, properly.
	require.NoError(t, e.d.StreamBeginCapture(s1, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.launchTouch(s1, p, 8))
	require.NoError(t, e.d.EventRecord(fork, s1))
	require.NoError(t, e.d.StreamWaitEvent(s2, fork))
	require.NoError(t, e.launchTouch(s2, q, 8))
	require.NoError(t, e.d.EventRecord(join, s2))
	require.NoError(t, e.d.StreamWaitEvent(s1, join))
	g, err := e.d.StreamEndCapture(s1)
	require.NoError(t, err)
	assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s2))
	n, err := e.d.GraphNodeCount(g)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, pattern(8, 2), e.get(q, 8), "the forked stream recorded too")
	x, err := e.d.GraphInstantiate(g, 0)
	require.NoError(t, err)
	require.NoError(t, e.d.GraphLaunch(x, s1))
	require.NoError(t, e.d.StreamSynchronize(s1))
	assert.Equal(t, plusOne(pattern(8, 1)), e.get(p, 8))
	assert.Equal(t, plusOne(pattern(8, 2)), e.get(q, 8))

	// A fork that is not joined back.
	require.NoError(t, e.d.StreamBeginCapture(s1, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.d.EventRecord(fork, s1))
	require.NoError(t, e.d.StreamWaitEvent(s2, fork))
	require.NoError(t, e.launchTouch(s2, q, 8))
	_, err = e.d.StreamEndCapture(s1)
	requireResult(t, err, cudadrv.ErrorStreamCaptureUnjoined)
	assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s1))
	assert.Equal(t, cudadrv.CaptureStatusNone, e.status(s2))
	require.NoError(t, e.launchTouch(s2, q, 8))
	require.NoError(t, e.d.StreamSynchronize(s2))
	assert.Equal(t, plusOne(plusOne(pattern(8, 2))), e.get(q, 8))
}

func TestGraphLaunchDuringCaptureIsAChildGraphNode(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(8)
	e.put(p, pattern(8, 3))
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.launchTouch(s, p, 8))
	require.NoError(t, e.launchTouch(s, p, 8))
	inner, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	innerX, err := e.d.GraphInstantiate(inner, 0)
	require.NoError(t, err)

	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.d.GraphLaunch(innerX, s))
	require.NoError(t, e.launchTouch(s, p, 8))
	outer, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	n, err := e.d.GraphNodeCount(outer)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "child graph + kernel")
	assert.Equal(t, pattern(8, 3), e.get(p, 8))

	outerX, err := e.d.GraphInstantiate(outer, 0)
	require.NoError(t, err)
	require.NoError(t, e.d.GraphExecDestroy(innerX), "the child node keeps its own copy")
	require.NoError(t, e.d.GraphLaunch(outerX, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(plusOne(plusOne(pattern(8, 3)))), e.get(p, 8))
}

func TestDestroyingACapturingStreamEndsTheCapture(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeGlobal))
	require.NoError(t, e.d.StreamDestroy(s))
	assert.Zero(t, e.d.Stats().Captures)
	_, err := e.d.MemAlloc(8)
	require.NoError(t, err, "no capture is left to prohibit unsafe calls")
}
