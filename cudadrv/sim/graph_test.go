package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// capture records fn on s (thread-local) and returns the graph.
func (e *env) capture(s cudadrv.RawStream, fn func()) cudadrv.RawGraph {
	e.t.Helper()
	require.NoError(e.t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	fn()
	g, err := e.d.StreamEndCapture(s)
	require.NoError(e.t, err)
	return g
}

func (e *env) instantiate(g cudadrv.RawGraph) cudadrv.RawGraphExec {
	e.t.Helper()
	x, err := e.d.GraphInstantiate(g, cudadrv.InstantiateUseNodePriority)
	require.NoError(e.t, err)
	return x
}

func (e *env) fill(s cudadrv.RawStream, p cudadrv.DevicePtr, v uint32, words uint64) {
	e.t.Helper()
	args := new(cudadrv.KernelArgs).Ptr(p).U32(v).U64(words)
	require.NoError(e.t, e.d.LaunchKernel(e.fn("sim_test_fill"), dim(1), dim(32), 0, s, args))
}

func TestGraphReplaysAgainstLiveMemory(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	in, out := e.alloc(32), e.alloc(32)
	e.put(in, pattern(32, 1))
	g := e.capture(s, func() {
		require.NoError(t, e.d.MemcpyDtoDAsync(out, in, 32, s))
		require.NoError(t, e.launchTouch(s, out, 32))
	})
	x := e.instantiate(g)
	for _, seed := range []byte{40, 80, 120} {
		e.put(in, pattern(32, seed))
		require.NoError(t, e.d.GraphLaunch(x, s))
		require.NoError(t, e.d.StreamSynchronize(s))
		assert.Equal(t, plusOne(pattern(32, seed)), e.get(out, 32), "replay reads the buffer's current contents")
	}
}

func TestGraphLaunchIsOneUnitOfStreamWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(8)
	e.put(p, pattern(8, 2))
	x := e.instantiate(e.capture(s, func() {
		require.NoError(t, e.launchTouch(s, p, 8))
		require.NoError(t, e.launchTouch(s, p, 8))
	}))
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.GraphLaunch(x, s))
	host := make([]byte, 8)
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s))
	<-g.started
	requireResult(t, e.d.StreamQuery(s), cudadrv.ErrorNotReady)
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(plusOne(plusOne(plusOne(pattern(8, 2))))), host, "both replays ran, in order, before the copy")
}

func TestGraphExecUpdate(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p1, p2, q := e.alloc(16), e.alloc(16), e.alloc(16)
	e.put(p1, pattern(16, 1))
	e.put(p2, pattern(16, 2))
	base := e.capture(s, func() {
		require.NoError(t, e.launchTouch(s, p1, 16))
		e.fill(s, q, 0x11111111, 4)
	})
	same := e.capture(s, func() {
		require.NoError(t, e.launchTouch(s, p2, 16))
		e.fill(s, q, 0x22222222, 4)
	})
	x := e.instantiate(base)

	// A launch queued before the update keeps its parameters.
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.GraphExecUpdate(x, same))
	<-g.started
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(pattern(16, 1)), e.get(p1, 16), "the queued launch used the old pointer")
	assert.Equal(t, pattern(16, 2), e.get(p2, 16))
	assert.Equal(t, bytesOf(0x11, 16), e.get(q, 16))

	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(pattern(16, 2)), e.get(p2, 16), "later launches use the updated parameters")
	assert.Equal(t, bytesOf(0x22, 16), e.get(q, 16))

	tests := []struct {
		name string
		g    cudadrv.RawGraph
	}{
		{"more nodes", e.capture(s, func() {
			require.NoError(t, e.launchTouch(s, p1, 16))
			e.fill(s, q, 0x33333333, 4)
			e.fill(s, q, 0x33333333, 4)
		})},
		{"another kernel", e.capture(s, func() {
			e.fill(s, p1, 0x44444444, 4)
			e.fill(s, q, 0x44444444, 4)
		})},
		{"another node kind", e.capture(s, func() {
			require.NoError(t, e.d.MemsetD8Async(p1, 0x55, 16, s))
			e.fill(s, q, 0x55555555, 4)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			err := e.d.GraphExecUpdate(x, tt.g)
			requireResult(t, err, cudadrv.ErrorGraphExecUpdateFailure)
			assert.Contains(t, err.Error(), "node")
		})
	}
	e.put(q, pattern(16, 9))
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, bytesOf(0x22, 16), e.get(q, 16), "failed updates left the exec unchanged")
	requireResult(t, e.d.GraphExecUpdate(0x99, same), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.GraphExecUpdate(x, 0x99), cudadrv.ErrorInvalidHandle)
}

func TestGraphDestroyHandles(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(8)
	e.put(p, pattern(8, 4))
	g := e.capture(s, func() { require.NoError(t, e.launchTouch(s, p, 8)) })
	x := e.instantiate(g)
	st := e.d.Stats()
	assert.Equal(t, 1, st.Graphs)
	assert.Equal(t, 1, st.GraphExecs)

	require.NoError(t, e.d.GraphDestroy(g))
	requireResult(t, e.d.GraphDestroy(g), cudadrv.ErrorInvalidHandle, "graph destroyed twice")
	_, err := e.d.GraphNodeCount(g)
	requireResult(t, err, cudadrv.ErrorInvalidHandle)
	_, err = e.d.GraphInstantiate(g, 0)
	requireResult(t, err, cudadrv.ErrorInvalidHandle)

	require.NoError(t, e.d.GraphLaunch(x, s), "the exec outlives its graph")
	require.NoError(t, e.d.GraphExecDestroy(x), "destroying with a launch queued")
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, plusOne(pattern(8, 4)), e.get(p, 8), "the queued launch still ran")
	requireResult(t, e.d.GraphExecDestroy(x), cudadrv.ErrorInvalidHandle, "exec destroyed twice")
	requireResult(t, e.d.GraphLaunch(x, s), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.GraphUpload(x, s), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.GraphExecDestroy(0), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.GraphDestroy(0), cudadrv.ErrorInvalidHandle)
	st = e.d.Stats()
	assert.Zero(t, st.Graphs)
	assert.Zero(t, st.GraphExecs)
}

func TestGraphInstantiateFlagsAndUpload(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	g := e.capture(s, func() { require.NoError(t, e.launchTouch(s, e.scratch, 8)) })
	tests := []struct {
		name  string
		flags cudadrv.InstantiateFlags
		want  cudadrv.Result
	}{
		{"none", 0, cudadrv.Success},
		{"node priority", cudadrv.InstantiateUseNodePriority, cudadrv.Success},
		{"auto free and device launch", cudadrv.InstantiateAutoFreeOnLaunch | cudadrv.InstantiateDeviceLaunch, cudadrv.Success},
		{"upload needs WithParams", cudadrv.InstantiateUpload, cudadrv.ErrorInvalidValue},
		{"unknown bit", 0x100, cudadrv.ErrorInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			x, err := e.d.GraphInstantiate(g, tt.flags)
			if tt.want != cudadrv.Success {
				requireResult(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			flags, ok := e.d.GraphExecFlags(x)
			require.True(t, ok)
			assert.Equal(t, tt.flags, flags)
			require.NoError(t, e.d.GraphUpload(x, s))
			require.NoError(t, e.d.GraphLaunch(x, s))
			require.NoError(t, e.d.StreamSynchronize(s))
			require.NoError(t, e.d.GraphExecDestroy(x))
		})
	}
}

func TestGraphReplayOfAFreedAddressFaults(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(64)
	x := e.instantiate(e.capture(s, func() { require.NoError(t, e.launchTouch(s, p, 64)) }))
	require.NoError(t, e.d.MemFree(p))
	require.NoError(t, e.d.GraphLaunch(x, s))
	err := e.d.StreamSynchronize(s)
	requireResult(t, err, cudadrv.ErrorIllegalAddress)
	assert.Contains(t, err.Error(), "freed allocation")
}

func TestGraphReplayAfterModuleUnloadFaults(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	m, err := e.d.ModuleLoadData([]byte(testPTX))
	require.NoError(t, err)
	f, err := e.d.ModuleGetFunction(m, "sim_test_touch")
	require.NoError(t, err)
	x := e.instantiate(e.capture(s, func() {
		require.NoError(t, e.d.LaunchKernel(f, dim(1), dim(1), 0, s, new(cudadrv.KernelArgs).Ptr(e.scratch).U64(8)))
	}))
	require.NoError(t, e.d.ModuleUnload(m))
	require.NoError(t, e.d.GraphLaunch(x, s))
	err = e.d.StreamSynchronize(s)
	requireResult(t, err, cudadrv.ErrorLaunchFailed)
	assert.Contains(t, err.Error(), "unloaded")
}

func TestLaunchesOfOneExecAreOrderedAcrossStreams(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s1, s2 := e.stream(), e.stream()
	p := e.alloc(8)
	e.put(p, pattern(8, 6))
	x := e.instantiate(e.capture(s1, func() { require.NoError(t, e.launchTouch(s1, p, 8)) }))
	g := newGate(t)
	e.launchGate(s1, g)
	require.NoError(t, e.d.GraphLaunch(x, s1))
	require.NoError(t, e.d.GraphLaunch(x, s2)) // waits for the launch on s1
	host := make([]byte, 8)
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s2))
	<-g.started
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s2))
	assert.Equal(t, plusOne(plusOne(pattern(8, 6))), host, "s2's launch ran after s1's")
}
