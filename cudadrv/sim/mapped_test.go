package sim_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// mapped allocates n bytes of mapped pinned host memory and returns it with its device address.
func (e *env) mapped(n uint64) ([]byte, cudadrv.DevicePtr) {
	e.t.Helper()
	buf, err := e.d.MemHostAllocFlags(n, cudadrv.HostAllocDeviceMap|cudadrv.HostAllocPortable)
	require.NoError(e.t, err)
	p, err := e.d.MemHostGetDevicePointer(buf)
	require.NoError(e.t, err)
	return buf, p
}

// word32 reads the aligned 32-bit word at buf[off:] atomically, as a host spinning on it does.
func word32(buf []byte, off int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&buf[off])))
}

func TestMappedHostMemoryIsDeviceMemoryToStreamWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	buf, p := e.mapped(256)
	assert.NotZero(t, p)
	assert.Zero(t, uintptr(unsafe.Pointer(&buf[0]))%8, "word-aligned, as the driver's page-aligned memory is")

	// A device copy and a kernel reach the host buffer through its device address.
	d := e.alloc(64)
	e.put(d, pattern(64, 3))
	require.NoError(t, e.d.MemcpyDtoDAsync(p+64, d, 64, s))
	require.NoError(t, e.launchTouch(s, p, 16))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, pattern(64, 3), buf[64:128])
	want := make([]byte, 16)
	for i := range want {
		want[i] = 1
	}
	assert.Equal(t, want, buf[:16], "the kernel incremented the host bytes in place")

	// An address inside the buffer maps to the same offset.
	inner, err := e.d.MemHostGetDevicePointer(buf[100:])
	require.NoError(t, err)
	assert.Equal(t, p+100, inner)

	// Freed, the range is gone: an enqueue is refused naming it.
	require.NoError(t, e.d.MemFreeHost(buf))
	err = e.d.MemcpyDtoDAsync(p, d, 4, s)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	assert.Contains(t, err.Error(), "freed")
}

func TestMappedHostMemoryRefusals(t *testing.T) {
	e := newEnv(t, sim.Options{})
	plain, err := e.d.MemHostAlloc(64)
	require.NoError(t, err)
	_, err = e.d.MemHostGetDevicePointer(plain)
	requireResult(t, err, cudadrv.ErrorInvalidValue, "pinned without DEVICEMAP has no device address")
	assert.Contains(t, err.Error(), "CU_MEMHOSTALLOC_DEVICEMAP")
	_, err = e.d.MemHostGetDevicePointer(make([]byte, 8))
	requireResult(t, err, cudadrv.ErrorInvalidValue, "Go memory")
	_, err = e.d.MemHostGetDevicePointer(nil)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	_, err = e.d.MemHostAllocFlags(64, 0x10)
	requireResult(t, err, cudadrv.ErrorInvalidValue, "unknown flag")
	_, err = e.d.MemHostAllocFlags(0, cudadrv.HostAllocDeviceMap)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	require.NoError(t, e.d.MemFreeHost(plain))
	before := e.d.Stats()
	buf, _ := e.mapped(64)
	st := e.d.Stats()
	assert.Equal(t, before.PinnedHostBuffers+1, st.PinnedHostBuffers)
	assert.Equal(t, before.Allocations, st.Allocations, "mapped host memory is not a device allocation")
	assert.Equal(t, before.AllocatedBytes, st.AllocatedBytes)
	require.NoError(t, e.d.MemFreeHost(buf))
}

func TestStreamWriteValue32(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	buf, p := e.mapped(64)

	// Behind a gated kernel the write waits for it: the host sees the value only after.
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.d.StreamWriteValue32(s, p+8, 0x5eed1234))
	<-g.started
	assert.Zero(t, word32(buf, 8), "the write ran before the work queued ahead of it")
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, uint32(0x5eed1234), word32(buf, 8))

	// Into device memory too.
	d := e.alloc(16)
	e.put(d, pattern(16, 1))
	require.NoError(t, e.d.StreamWriteValue32(s, d+4, 0xA1B2C3D4))
	require.NoError(t, e.d.StreamSynchronize(s))
	got := e.get(d, 16)
	assert.Equal(t, uint32(0xA1B2C3D4), binary.LittleEndian.Uint32(got[4:]))
	assert.Equal(t, pattern(16, 1)[:4], got[:4], "the bytes around it are untouched")
	assert.Equal(t, pattern(16, 1)[8:], got[8:])

	requireResult(t, e.d.StreamWriteValue32(s, p+2, 1), cudadrv.ErrorInvalidValue, "misaligned")
	requireResult(t, e.d.StreamWriteValue32(s, p+64, 1), cudadrv.ErrorInvalidValue, "past the range")
	requireResult(t, e.d.StreamWriteValue32(s, 0x10, 1), cudadrv.ErrorInvalidValue, "no allocation")
	requireResult(t, e.d.StreamWriteValue32(0xdead, p, 1), cudadrv.ErrorInvalidHandle)
	require.NoError(t, e.d.MemFreeHost(buf))
}

// TestStreamWriteValue32IsSkippedInAFaultedContext: a fault stops the context before a write
// queued behind it, so a host spinning on the word never sees it.
func TestStreamWriteValue32IsSkippedInAFaultedContext(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	buf, p := e.mapped(64)
	require.NoError(t, e.launchTouch(s, 0x10, 4)) // out of any allocation: faults when it runs
	require.NoError(t, e.d.StreamWriteValue32(s, p, 7))
	requireResult(t, e.d.StreamSynchronize(s), cudadrv.ErrorIllegalAddress)
	assert.Zero(t, word32(buf, 0))
}

// TestStreamWriteValue32IsCapturedAndReplayed: on a capturing stream the write is a graph
// node; every launch of the graph writes again, and an update may change the value.
func TestStreamWriteValue32IsCapturedAndReplayed(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	buf, p := e.mapped(64)
	capture := func(value uint32) cudadrv.RawGraph {
		require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
		require.NoError(t, e.launchTouch(s, p+16, 4))
		require.NoError(t, e.d.StreamWriteValue32(s, p, value))
		g, err := e.d.StreamEndCapture(s)
		require.NoError(t, err)
		return g
	}
	g := capture(41)
	assert.Zero(t, word32(buf, 0), "recorded, not run")
	n, err := e.d.GraphNodeCount(g)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the kernel and the write")
	x, err := e.d.GraphInstantiate(g, 0)
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&buf[0])), 0)
		require.NoError(t, e.d.GraphLaunch(x, s))
		require.NoError(t, e.d.StreamSynchronize(s))
		assert.Equal(t, uint32(41), word32(buf, 0), "launch %d wrote the word", i)
		assert.Equal(t, byte(i), buf[16], "launch %d ran the kernel first", i)
	}
	g2 := capture(42)
	require.NoError(t, e.d.GraphExecUpdate(x, g2), "same topology, another value")
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, uint32(42), word32(buf, 0))

	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.d.StreamWriteValue32(s, p, 1))
	require.NoError(t, e.launchTouch(s, p+16, 4))
	g3, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	err = e.d.GraphExecUpdate(x, g3)
	requireResult(t, err, cudadrv.ErrorGraphExecUpdateFailure)
	assert.Contains(t, err.Error(), "write value 32")
	for _, h := range []cudadrv.RawGraph{g, g2, g3} {
		require.NoError(t, e.d.GraphDestroy(h))
	}
	require.NoError(t, e.d.GraphExecDestroy(x))
	require.NoError(t, e.d.MemFreeHost(buf))
}

// TestCallsCountEveryEntryPoint: Calls counts each call of an entry point, failed ones too.
func TestCallsCountEveryEntryPoint(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	before := e.d.Calls(sim.OpStreamSynchronize)
	for range 3 {
		require.NoError(t, e.d.StreamSynchronize(s))
	}
	requireResult(t, e.d.StreamSynchronize(0xdead), cudadrv.ErrorInvalidHandle)
	assert.Equal(t, before+4, e.d.Calls(sim.OpStreamSynchronize))
	assert.Zero(t, e.d.Calls("cuNoSuchCall"))
	sets := e.d.Calls(sim.OpCtxSetCurrent)
	require.NoError(t, e.d.CtxSetCurrent(e.ctx))
	assert.Equal(t, sets+1, e.d.Calls(sim.OpCtxSetCurrent))
}

// BenchmarkCtxCurrent compares binding a context with asking which one is bound, on the
// simulator: both are one call taking the device lock and reading the thread's id, so
// replacing a bind by a check would save nothing here either (see ep's enterUnbound).
func BenchmarkCtxCurrent(b *testing.B) {
	d := sim.New(sim.Options{})
	defer d.Close()
	require.NoError(b, d.Init())
	ctx, err := d.PrimaryCtxRetain(0)
	require.NoError(b, err)
	b.Run("CtxSetCurrent", func(b *testing.B) {
		for b.Loop() {
			if err := d.CtxSetCurrent(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CtxGetCurrent", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.CtxGetCurrent(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
