package cudadrv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
)

// needSim skips a test that needs the simulated device's fault injection, saying why.
func needSim(t *testing.T, env *drivertest.Env) {
	t.Helper()
	if env.Sim == nil {
		t.Skip("needs the sim backend's fault injection; the real driver cannot be made to fail on demand")
	}
}

func TestInjectedFaultSurfacesAsTheInjectedResult(t *testing.T) {
	env := drivertest.Open(t)
	needSim(t, env)
	s := newStream(t, env)
	env.Sim.InjectFault("cuMemAlloc_v2", 2, cudadrv.ErrorOutOfMemory)
	a := alloc(t, env, 64)
	_, err := env.Context.Alloc(64)
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorOutOfMemory, cudadrv.ResultOf(err))
	assert.Contains(t, err.Error(), "cuMemAlloc_v2")
	b := alloc(t, env, 64) // only the second call failed
	assert.NotEqual(t, a.Ptr(), b.Ptr())

	env.Sim.InjectFault("cuMemcpyHtoDAsync_v2", 1, cudadrv.ErrorUnknown)
	err = s.CopyHtoDAsync(a.Ptr(), pattern(64, 1))
	assert.Equal(t, cudadrv.ErrorUnknown, cudadrv.ResultOf(err))
	require.NoError(t, s.CopyHtoDAsync(a.Ptr(), pattern(64, 1)))
	require.NoError(t, s.Synchronize())
}

// TestKernelFaultIsSticky: an out-of-bounds kernel access is a sticky illegal-address error
// that names the allocation, and the context remembers it.
func TestKernelFaultIsSticky(t *testing.T) {
	env := drivertest.Open(t)
	needSim(t, env) // a real fault would poison the process's primary context for later tests
	s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	mod, err := env.Context.LoadModule([]byte(drivertest.AddOnePTX))
	require.NoError(t, err)
	fn, err := mod.Function("add_one")
	require.NoError(t, err)
	x, err := env.Context.Alloc(64)
	require.NoError(t, err)
	args := new(cudadrv.KernelArgs)
	require.NoError(t, drivertest.LaunchAddOne(s, fn, args, x.Ptr(), x.Ptr(), 1000))
	err = s.Synchronize()
	require.Error(t, err)
	assert.Equal(t, cudadrv.ErrorIllegalAddress, cudadrv.ResultOf(err))
	require.Error(t, env.Context.StickyError())
	assert.Equal(t, cudadrv.ErrorIllegalAddress, cudadrv.ResultOf(env.Context.StickyError()))
	assert.Contains(t, err.Error(), "allocation")
	_, err = env.Context.Alloc(64)
	assert.Equal(t, cudadrv.ErrorIllegalAddress, cudadrv.ResultOf(err), "every later call fails in a faulted context")
	// The faulted context refuses to free anything; drivertest skips its leak check for a
	// context with a sticky error.
	_ = x.Free()
	_ = s.Destroy()
	_ = mod.Unload()
}
