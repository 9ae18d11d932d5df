package sim_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestCloseStopsEveryWorkerAndRefusesCalls(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := runtime.NumGoroutine()
	d := sim.New(sim.Options{Devices: 2})
	require.NoError(t, d.Init())
	for ord := 0; ord < 2; ord++ {
		ctx, err := d.PrimaryCtxRetain(ord)
		require.NoError(t, err)
		require.NoError(t, d.CtxSetCurrent(ctx))
		for i := 0; i < 4; i++ {
			s, err := d.StreamCreate(cudadrv.StreamNonBlocking, 0)
			require.NoError(t, err)
			p, err := d.MemAlloc(64)
			require.NoError(t, err)
			require.NoError(t, d.MemsetD8Async(p, 0x42, 64, s))
		}
	}
	assert.Greater(t, runtime.NumGoroutine(), before+8, "a worker per stream")
	require.NoError(t, d.Close())
	assert.True(t, goroutinesBackTo(before), "workers left after Close: %d > %d", runtime.NumGoroutine(), before)
	require.NoError(t, d.Close(), "Close is idempotent")

	_, err := d.MemAlloc(8)
	requireResult(t, err, cudadrv.ErrorDeinitialized)
	requireResult(t, d.Init(), cudadrv.ErrorDeinitialized)
	_, err = d.DeviceCount()
	requireResult(t, err, cudadrv.ErrorDeinitialized)
	_, err = d.CompilePTX("", "x.cu", nil)
	requireResult(t, err, cudadrv.ErrorDeinitialized)
	_, err = d.BLASCreate()
	requireBLAS(t, err, cudadrv.BLASNotInitialized)
}

func TestCloseWakesBlockedCallers(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := runtime.NumGoroutine()
	d := sim.New(sim.Options{})
	require.NoError(t, d.Init())
	ctx, err := d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	require.NoError(t, d.CtxSetCurrent(ctx))
	m, err := d.ModuleLoadData([]byte(testPTX))
	require.NoError(t, err)
	gateFn, err := d.ModuleGetFunction(m, "sim_test_gate")
	require.NoError(t, err)
	s, err := d.StreamCreate(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	g := newGate(t)
	require.NoError(t, d.LaunchKernel(gateFn, dim(1), dim(1), 0, s, new(cudadrv.KernelArgs).U64(g.id)))
	require.NoError(t, d.MemsetD8Async(0, 0, 0, s)) // no-op
	p, err := d.MemAlloc(8)
	require.NoError(t, err)
	require.NoError(t, d.MemsetD8Async(p, 1, 8, s))
	<-g.started

	synced := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := d.CtxSetCurrent(ctx); err != nil {
			synced <- err
			return
		}
		synced <- d.StreamSynchronize(s)
	}()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	for { // Close marks the device closed before it waits for the running kernel
		if _, err := d.DeviceCount(); err != nil {
			break
		}
		runtime.Gosched()
	}
	g.open() // the queued memset is abandoned
	require.NoError(t, <-closed)
	requireResult(t, <-synced, cudadrv.ErrorDeinitialized)
	assert.True(t, goroutinesBackTo(before))
}
