package sim_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// peerEnv is a simulated machine of several devices with every primary context retained.
type peerEnv struct {
	t    *testing.T
	d    *sim.Device
	ctxs []cudadrv.RawContext
}

func newPeerEnv(t *testing.T, opts sim.Options) *peerEnv {
	t.Helper()
	d := sim.New(opts)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	require.NoError(t, d.Init())
	runtime.LockOSThread() // the thread dies with the test goroutine
	n, err := d.DeviceCount()
	require.NoError(t, err)
	e := &peerEnv{t: t, d: d}
	for i := 0; i < n; i++ {
		ctx, err := d.PrimaryCtxRetain(i)
		require.NoError(t, err)
		e.ctxs = append(e.ctxs, ctx)
	}
	return e
}

// on makes device i's context current.
func (e *peerEnv) on(i int) {
	e.t.Helper()
	require.NoError(e.t, e.d.CtxSetCurrent(e.ctxs[i]))
}

// alloc allocates n bytes on device i, filled with pattern(n, seed).
func (e *peerEnv) alloc(i int, n int, seed byte) cudadrv.DevicePtr {
	e.t.Helper()
	e.on(i)
	p, err := e.d.MemAlloc(uint64(n))
	require.NoError(e.t, err)
	require.NoError(e.t, e.d.MemcpyHtoD(p, pattern(n, seed)))
	return p
}

func (e *peerEnv) read(i int, p cudadrv.DevicePtr, n int) []byte {
	e.t.Helper()
	e.on(i)
	b := make([]byte, n)
	require.NoError(e.t, e.d.MemcpyDtoH(b, p))
	return b
}

func TestPeerMatrixDefaultsToEveryDistinctPair(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 4})
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			can, err := e.d.DeviceCanAccessPeer(i, j)
			require.NoError(t, err)
			assert.Equal(t, i != j, can, "device %d → %d", i, j)
		}
	}
	_, err := e.d.DeviceCanAccessPeer(0, 4)
	requireResult(t, err, cudadrv.ErrorInvalidDevice)
	_, err = e.d.DeviceCanAccessPeer(-1, 0)
	requireResult(t, err, cudadrv.ErrorInvalidDevice)
}

func TestPeerMatrixOption(t *testing.T) {
	// Devices 0 and 1 reach each other, 2 and 3 reach each other, no pair across.
	island := func(d, p int) bool { return d/2 == p/2 }
	e := newPeerEnv(t, sim.Options{Devices: 4, PeerAccess: island})
	for _, c := range []struct {
		d, p int
		want bool
	}{{0, 1, true}, {1, 0, true}, {2, 3, true}, {0, 2, false}, {3, 1, false}, {2, 2, false}} {
		can, err := e.d.DeviceCanAccessPeer(c.d, c.p)
		require.NoError(t, err)
		assert.Equal(t, c.want, can, "device %d → %d", c.d, c.p)
	}
	e.on(0)
	requireResult(t, e.d.CtxEnablePeerAccess(e.ctxs[2]), cudadrv.ErrorPeerAccessUnsupported)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[1]))
}

func TestEnablePeerAccessRules(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	e.on(0)
	requireResult(t, e.d.CtxEnablePeerAccess(e.ctxs[0]), cudadrv.ErrorPeerAccessUnsupported, "a device is not its own peer (as the H200 answered)")
	requireResult(t, e.d.CtxEnablePeerAccess(0xdead), cudadrv.ErrorInvalidContext)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[1]))
	requireResult(t, e.d.CtxEnablePeerAccess(e.ctxs[1]), cudadrv.ErrorPeerAccessAlreadyEnabled)
	e.on(1)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]), "access is one-way: the reverse is a new pair")

	require.NoError(t, e.d.CtxSetCurrent(0))
	requireResult(t, e.d.CtxEnablePeerAccess(e.ctxs[1]), cudadrv.ErrorInvalidContext, "no current context")
}

func TestPeerCopyNeedsEnabledAccess(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	const n = 4096
	src := e.alloc(0, n, 3)
	dst := e.alloc(1, n, 99)
	e.on(1)
	s, err := e.d.StreamCreate(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)

	err = e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], n, s)
	requireResult(t, err, cudadrv.ErrorPeerAccessNotEnabled)
	assert.Contains(t, err.Error(), "device 1 has not enabled access to device 0")

	// Enabling the other direction is not enough: the destination pulls from the source.
	e.on(0)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[1]))
	e.on(1)
	requireResult(t, e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], n, s), cudadrv.ErrorPeerAccessNotEnabled)

	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	require.NoError(t, e.d.MemcpyPeerAsync(dst+16, e.ctxs[1], src+32, e.ctxs[0], n-64, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	want := pattern(n, 99)
	copy(want[16:], pattern(n, 3)[32:n-32])
	assert.Equal(t, want, e.read(1, dst, n))
	assert.Equal(t, pattern(n, 3), e.read(0, src, n), "the source is unchanged")
	e.on(1)
	require.NoError(t, e.d.StreamDestroy(s))
}

func TestPeerCopyRangesAreCheckedAgainstTheirContexts(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	src := e.alloc(0, 256, 1)
	dst := e.alloc(1, 256, 2)
	e.on(1)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	for _, c := range []struct {
		name     string
		dst, src cudadrv.DevicePtr
		dctx     cudadrv.RawContext
		sctx     cudadrv.RawContext
		n        uint64
		want     cudadrv.Result
		detail   string
	}{
		{"source past its allocation", dst, src + 1, e.ctxs[1], e.ctxs[0], 256, cudadrv.ErrorInvalidValue, "source"},
		{"destination past its allocation", dst + 200, src, e.ctxs[1], e.ctxs[0], 100, cudadrv.ErrorInvalidValue, "destination"},
		{"source named with the wrong context", dst, src, e.ctxs[1], e.ctxs[1], 64, cudadrv.ErrorInvalidValue, "memory of device 0, not of device 1"},
		{"destination named with the wrong context", dst, src, e.ctxs[0], e.ctxs[0], 64, cudadrv.ErrorInvalidValue, "memory of device 1, not of device 0"},
		{"a context that does not exist", dst, src, 0xbad, e.ctxs[0], 64, cudadrv.ErrorInvalidContext, "does not exist"},
		{"a wild address", 0x10, src, e.ctxs[1], e.ctxs[0], 64, cudadrv.ErrorInvalidValue, "destination"},
	} {
		// Inline, not subtests: the context is current on this goroutine's thread only.
		err := e.d.MemcpyPeerAsync(c.dst, c.dctx, c.src, c.sctx, c.n, 0)
		requireResult(t, err, c.want, c.name)
		assert.Contains(t, err.Error(), c.detail, c.name)
	}
	assert.Equal(t, pattern(256, 2), e.read(1, dst, 256), "no refused copy wrote anything")
	e.on(1)
	require.NoError(t, e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], 0, 0), "zero bytes is a no-op")
}

func TestPeerCopyWithinOneContextNeedsNoEnable(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	a := e.alloc(1, 512, 5)
	b := e.alloc(1, 512, 6)
	e.on(1)
	require.NoError(t, e.d.MemcpyPeerAsync(b, e.ctxs[1], a, e.ctxs[1], 512, 0))
	assert.Equal(t, pattern(512, 5), e.read(1, b, 512))
}

func TestPeerAccessEndsWithTheContext(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	e.on(1)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	require.NoError(t, e.d.PrimaryCtxRelease(0))
	ctx0, err := e.d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	e.ctxs[0] = ctx0
	src := e.alloc(0, 64, 1)
	dst := e.alloc(1, 64, 2)
	e.on(1)
	requireResult(t, e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], 64, 0), cudadrv.ErrorPeerAccessNotEnabled,
		"a new primary context is a new peer: the old enablement died with the old context")
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	require.NoError(t, e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], 64, 0))
	assert.Equal(t, pattern(64, 1), e.read(1, dst, 64))
}

func TestPeerCopyIsRecordedInACapture(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	src := e.alloc(0, 128, 7)
	dst := e.alloc(1, 128, 8)
	e.on(1)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	s, err := e.d.StreamCreate(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.d.MemcpyPeerAsync(dst, e.ctxs[1], src, e.ctxs[0], 128, s))
	g, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	assert.Equal(t, pattern(128, 8), e.read(1, dst, 128), "captured, not run")
	e.on(1)
	x, err := e.d.GraphInstantiate(g, 0)
	require.NoError(t, err)
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, pattern(128, 7), e.read(1, dst, 128))
	e.on(1)
	require.NoError(t, e.d.GraphExecDestroy(x))
	require.NoError(t, e.d.GraphDestroy(g))
	require.NoError(t, e.d.StreamDestroy(s))
}

func TestPeerCallsCanBeFaulted(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	e.d.InjectFault(sim.OpCtxEnablePeerAccess, 1, cudadrv.ErrorTooManyPeers)
	e.on(0)
	requireResult(t, e.d.CtxEnablePeerAccess(e.ctxs[1]), cudadrv.ErrorTooManyPeers)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[1]))
	assert.Equal(t, uint64(2), e.d.Calls(sim.OpCtxEnablePeerAccess))
}

func TestPlainDeviceCopiesBetweenDevicesNeedEnabledAccess(t *testing.T) {
	e := newPeerEnv(t, sim.Options{Devices: 2})
	src := e.alloc(0, 256, 1)
	dst := e.alloc(1, 256, 2)
	e.on(1)
	err := e.d.MemcpyDtoDAsync(dst, src, 256, 0)
	requireResult(t, err, cudadrv.ErrorPeerAccessNotEnabled)
	assert.Contains(t, err.Error(), "from device 0's memory to device 1's")
	requireResult(t, e.d.MemcpyDtoD(dst, src, 256), cudadrv.ErrorPeerAccessNotEnabled)
	assert.Equal(t, pattern(256, 2), e.read(1, dst, 256))

	e.on(1)
	require.NoError(t, e.d.CtxEnablePeerAccess(e.ctxs[0]))
	require.NoError(t, e.d.MemcpyDtoD(dst, src, 256), "with access enabled, as over NVLink")
	assert.Equal(t, pattern(256, 1), e.read(1, dst, 256))
	e.on(0)
	requireResult(t, e.d.MemcpyDtoD(src, dst, 256), cudadrv.ErrorPeerAccessNotEnabled, "the other direction is another pair")
}
