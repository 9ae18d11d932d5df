package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestInjectFaultFailsTheNthCall(t *testing.T) {
	tests := []struct {
		op     string
		nth    int
		result cudadrv.Result
		call   func(e *env, s cudadrv.RawStream) error
	}{
		{sim.OpMemAlloc, 1, cudadrv.ErrorOutOfMemory, func(e *env, s cudadrv.RawStream) error {
			_, err := e.d.MemAlloc(64)
			return err
		}},
		{sim.OpMemcpyHtoDAsync, 3, cudadrv.ErrorInvalidValue, func(e *env, s cudadrv.RawStream) error {
			return e.d.MemcpyHtoDAsync(e.scratch, pattern(8, 77), s)
		}},
		{sim.OpMemHostRegister, 2, cudadrv.ErrorNotPermitted, func(e *env, s cudadrv.RawStream) error {
			b := make([]byte, 4096)
			if err := e.d.MemHostRegister(b, cudadrv.HostRegisterReadOnly); err != nil {
				return err
			}
			return e.d.MemHostUnregister(b)
		}},
		{sim.OpGraphInstantiate, 2, cudadrv.ErrorOutOfMemory, func(e *env, s cudadrv.RawStream) error {
			g := e.capture(s, func() { require.NoError(e.t, e.launchTouch(s, e.scratch, 8)) })
			x, err := e.d.GraphInstantiate(g, 0)
			if err == nil {
				require.NoError(e.t, e.d.GraphExecDestroy(x))
			}
			require.NoError(e.t, e.d.GraphDestroy(g))
			return err
		}},
		{sim.OpStreamEndCapture, 1, cudadrv.ErrorUnknown, func(e *env, s cudadrv.RawStream) error {
			require.NoError(e.t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
			_, err := e.d.StreamEndCapture(s)
			if err != nil {
				assert.Equal(e.t, cudadrv.CaptureStatusActive, e.status(s), "an injected failure does nothing")
				_, err2 := e.d.StreamEndCapture(s)
				require.NoError(e.t, err2)
			}
			return err
		}},
		{sim.OpLaunchKernel, 4, cudadrv.ErrorLaunchOutOfResources, func(e *env, s cudadrv.RawStream) error {
			return e.launchTouch(s, e.scratch, 8)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			e := newEnv(t, sim.Options{})
			s := e.stream()
			e.put(e.scratch, pattern(8, 1))
			e.d.InjectFault(tt.op, tt.nth, tt.result)
			for i := 1; i < tt.nth; i++ {
				require.NoError(t, tt.call(e, s), "call %d", i)
			}
			require.NoError(t, e.d.StreamSynchronize(s))
			before := e.get(e.scratch, 8)
			err := tt.call(e, s)
			requireResult(t, err, tt.result)
			var de *cudadrv.Error
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tt.op, de.Op)
			assert.Contains(t, de.Detail, "injected")
			require.NoError(t, e.d.StreamSynchronize(s))
			assert.Equal(t, before, e.get(e.scratch, 8), "a failed enqueue queued nothing")
			require.NoError(t, tt.call(e, s), "only the nth call fails")
		})
	}
}

func TestInjectBLASFault(t *testing.T) {
	e := newEnv(t, sim.Options{})
	h := e.blas(0)
	p := cudadrv.GemmParams{M: 1, N: 1, K: 1, Alpha: 1, A: e.scratch, B: e.scratch, C: e.scratch, LDA: 1, LDB: 1, LDC: 1}
	e.put(e.scratch, f32bytes([]float32{2, 0}))
	e.d.InjectBLASFault(sim.OpSgemm, 2, cudadrv.BLASArchMismatch)
	e.d.InjectFault(sim.OpSgemmStridedBatched, 1, cudadrv.ErrorIllegalAddress)
	require.NoError(t, e.d.Sgemm(h, &p))
	requireBLAS(t, e.d.Sgemm(h, &p), cudadrv.BLASArchMismatch)
	require.NoError(t, e.d.Sgemm(h, &p))
	p.BatchCount = 1
	requireBLAS(t, e.d.SgemmStridedBatched(h, &p), cudadrv.BLASExecutionFailed)
	require.NoError(t, e.d.CtxSynchronize(), "a cuBLAS fault does not fault the context")
	assert.Equal(t, float32(16), e.getF32(e.scratch, 1)[0], "two GEMMs ran: 2·2 then 4·4")
}

func TestInjectedStickyFaultFaultsTheContext(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.d.InjectFault(sim.OpLaunchKernel, 1, cudadrv.ErrorIllegalAddress)
	requireResult(t, e.launchTouch(0, e.scratch, 8), cudadrv.ErrorIllegalAddress)
	requireResult(t, e.d.CtxSynchronize(), cudadrv.ErrorIllegalAddress)
}

func TestClearFaultsAndMultipleInjections(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.d.InjectFault(sim.OpEventCreate, 1, cudadrv.ErrorOutOfMemory)
	e.d.InjectFault(sim.OpEventCreate, 2, cudadrv.ErrorInvalidValue)
	_, err := e.d.EventCreate(0)
	requireResult(t, err, cudadrv.ErrorOutOfMemory)
	_, err = e.d.EventCreate(0)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	_, err = e.d.EventCreate(0)
	require.NoError(t, err)

	e.d.InjectFault(sim.OpEventCreate, 1, cudadrv.ErrorOutOfMemory)
	e.d.InjectFault(sim.OpStreamCreate, 1, cudadrv.ErrorOutOfMemory)
	e.d.ClearFaults()
	_, err = e.d.EventCreate(0)
	require.NoError(t, err)
	_, err = e.d.StreamCreate(0, 0)
	require.NoError(t, err)
}

func TestInjectFaultRejectsMistakes(t *testing.T) {
	d := sim.New(sim.Options{})
	defer d.Close()
	assert.Panics(t, func() { d.InjectFault("cuMemAlloc", 1, cudadrv.ErrorOutOfMemory) }, "unversioned name")
	assert.Panics(t, func() { d.InjectFault(sim.OpMemAlloc, 0, cudadrv.ErrorOutOfMemory) })
	assert.Panics(t, func() { d.InjectFault(sim.OpMemAlloc, 1, cudadrv.Success) })
	assert.Panics(t, func() { d.InjectBLASFault(sim.OpMemAlloc, 1, cudadrv.BLASInvalidValue) })
	assert.Panics(t, func() { d.InjectBLASFault(sim.OpSgemm, 1, cudadrv.BLASSuccess) })
}
