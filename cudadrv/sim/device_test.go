package sim_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestCallsBeforeInitFailNotInitialized(t *testing.T) {
	d := sim.New(sim.Options{})
	defer d.Close()
	_, err := d.DeviceCount()
	requireResult(t, err, cudadrv.ErrorNotInitialized)
	_, err = d.PrimaryCtxRetain(0)
	requireResult(t, err, cudadrv.ErrorNotInitialized)
	require.NoError(t, d.Init())
	n, err := d.DeviceCount()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "sim", d.Name())
}

func TestDeviceQueries(t *testing.T) {
	tests := []struct {
		name         string
		opts         sim.Options
		count        int
		devName      string
		major, minor int
		sms          int
		total        uint64
	}{
		{"defaults", sim.Options{}, 1, sim.DefaultName, 9, 0, sim.DefaultSMCount, sim.DefaultTotalMemory},
		{"custom", sim.Options{Devices: 3, Name: "tiny", ComputeMajor: 8, ComputeMinor: 6, SMCount: 7, TotalMemory: 1 << 20},
			3, "tiny", 8, 6, 7, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sim.New(tt.opts)
			defer d.Close()
			require.NoError(t, d.Init())
			n, err := d.DeviceCount()
			require.NoError(t, err)
			assert.Equal(t, tt.count, n)
			v, err := d.DriverVersion()
			require.NoError(t, err)
			assert.Equal(t, sim.DriverVersion, v)
			for ord := 0; ord < n; ord++ {
				name, err := d.DeviceName(ord)
				require.NoError(t, err)
				assert.Equal(t, tt.devName, name)
				for attr, want := range map[cudadrv.DeviceAttribute]int{
					cudadrv.AttrComputeCapabilityMajor: tt.major,
					cudadrv.AttrComputeCapabilityMinor: tt.minor,
					cudadrv.AttrMultiprocessorCount:    tt.sms,
				} {
					got, err := d.DeviceAttribute(ord, attr)
					require.NoError(t, err)
					assert.Equal(t, want, got, "attribute %d", attr)
				}
				total, err := d.DeviceTotalMem(ord)
				require.NoError(t, err)
				assert.Equal(t, tt.total, total)
			}
			_, err = d.DeviceName(n)
			requireResult(t, err, cudadrv.ErrorInvalidDevice)
			_, err = d.DeviceAttribute(-1, cudadrv.AttrMultiprocessorCount)
			requireResult(t, err, cudadrv.ErrorInvalidDevice)
			_, err = d.DeviceTotalMem(n)
			requireResult(t, err, cudadrv.ErrorInvalidDevice)
			_, err = d.PrimaryCtxRetain(n)
			requireResult(t, err, cudadrv.ErrorInvalidDevice)
			_, err = d.DeviceAttribute(0, cudadrv.DeviceAttribute(100000))
			requireResult(t, err, cudadrv.ErrorInvalidValue)
		})
	}
}

func TestPrimaryContextIsRefcounted(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d := sim.New(sim.Options{})
	defer d.Close()
	require.NoError(t, d.Init())
	require.ErrorIs(t, d.PrimaryCtxRelease(0), cudadrv.ErrorInvalidContext, "release before retain")

	c1, err := d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	c2, err := d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	assert.Equal(t, c1, c2, "the primary context is one context")
	require.NoError(t, d.CtxSetCurrent(c1))
	defer d.CtxSetCurrent(0)
	got, err := d.CtxGetCurrent()
	require.NoError(t, err)
	assert.Equal(t, c1, got)

	require.NoError(t, d.PrimaryCtxRelease(0))
	p, err := d.MemAlloc(64)
	require.NoError(t, err, "one reference is left, the context lives")
	_, err = d.StreamCreate(0, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, d.Stats().Allocations)

	require.NoError(t, d.PrimaryCtxRelease(0))
	st := d.Stats()
	assert.Zero(t, st.Contexts)
	assert.Zero(t, st.Allocations, "the last release frees the context's memory")
	assert.Zero(t, st.Streams)
	_, err = d.MemAlloc(64)
	requireResult(t, err, cudadrv.ErrorInvalidContext)
	requireResult(t, d.CtxSetCurrent(c1), cudadrv.ErrorInvalidContext)

	c3, err := d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	assert.NotEqual(t, c1, c3, "a re-created context gets a new handle, so stale bindings are caught")
	require.NoError(t, d.CtxSetCurrent(c3))
	requireResult(t, d.MemFree(p), cudadrv.ErrorInvalidValue, "memory of the destroyed context is gone")
	require.NoError(t, d.PrimaryCtxRelease(0))
}

func TestCurrentContextIsPerOSThread(t *testing.T) {
	e := newEnv(t, sim.Options{})
	_, err := e.d.MemAlloc(16)
	require.NoError(t, err, "bound on the test's thread")

	e.onThread(false, func() {
		cur, err := e.d.CtxGetCurrent()
		assert.NoError(t, err)
		assert.Zero(t, cur, "another OS thread has no context")
		for name, call := range map[string]func() error{
			"MemAlloc":          func() error { _, err := e.d.MemAlloc(16); return err },
			"StreamCreate":      func() error { _, err := e.d.StreamCreate(0, 0); return err },
			"CtxSynchronize":    e.d.CtxSynchronize,
			"StreamSynchronize": func() error { return e.d.StreamSynchronize(0) },
			"EventCreate":       func() error { _, err := e.d.EventCreate(0); return err },
			"ModuleLoadData":    func() error { _, err := e.d.ModuleLoadData([]byte(testPTX)); return err },
		} {
			err := call()
			if assert.Error(t, err, name) {
				assert.True(t, errors.Is(err, cudadrv.ErrorInvalidContext), "%s: %v", name, err)
			}
		}
	})
	e.onThread(true, func() {
		_, err := e.d.MemAlloc(16)
		assert.NoError(t, err, "after CtxSetCurrent on that thread")
	})
	require.NoError(t, e.d.CtxSetCurrent(0))
	_, err = e.d.MemAlloc(16)
	requireResult(t, err, cudadrv.ErrorInvalidContext, "unbound with CtxSetCurrent(0)")
	requireResult(t, e.d.CtxSetCurrent(12345), cudadrv.ErrorInvalidContext)
	require.NoError(t, e.d.CtxSetCurrent(e.ctx))
}

func TestCompilePTXIsUnsupported(t *testing.T) {
	e := newEnv(t, sim.Options{})
	ptx, err := e.d.CompilePTX("extern \"C\" __global__ void k() {}", "k.cu", nil)
	assert.Nil(t, ptx)
	require.ErrorIs(t, err, cudadrv.ErrUnsupported)
	assert.Contains(t, err.Error(), "NVRTC")
	assert.Contains(t, err.Error(), "RegisterKernel")
	assert.Contains(t, err.Error(), "backend=cuda")
}

func TestMultipleDevicesHaveSeparateContexts(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d := sim.New(sim.Options{Devices: 2, TotalMemory: 1 << 20})
	defer d.Close()
	require.NoError(t, d.Init())
	c0, err := d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	c1, err := d.PrimaryCtxRetain(1)
	require.NoError(t, err)
	require.NotEqual(t, c0, c1)
	require.NoError(t, d.CtxSetCurrent(c0))
	_, err = d.MemAlloc(1 << 20)
	require.NoError(t, err)
	s0, err := d.StreamCreate(0, 0)
	require.NoError(t, err)
	require.NoError(t, d.CtxSetCurrent(c1))
	_, err = d.MemAlloc(1 << 20)
	require.NoError(t, err, "each device has its own memory")
	free, _, err := d.MemGetInfo()
	require.NoError(t, err)
	assert.Zero(t, free)
	requireResult(t, d.StreamSynchronize(s0), cudadrv.ErrorInvalidHandle, "a stream of another context")
	require.NoError(t, d.CtxSetCurrent(0))
	require.NoError(t, d.PrimaryCtxRelease(0))
	require.NoError(t, d.PrimaryCtxRelease(1))
}

func TestLastPrimaryContextReleaseDrainsQueuedWork(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(16)
	e.put(p, pattern(16, 12))
	host := make([]byte, 16)
	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.launchTouch(s, p, 16))
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s))
	<-g.started
	released := make(chan error, 1)
	go func() { released <- e.d.PrimaryCtxRelease(0) }()
	g.open()
	require.NoError(t, <-released)
	assert.Equal(t, plusOne(pattern(16, 12)), host, "the queued work ran before the context went away")
	assert.Zero(t, e.d.Stats().Contexts)
}
