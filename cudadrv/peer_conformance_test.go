package cudadrv_test

// Peer access and peer copies. The single-device cases run on every backend; the cases between
// two devices run on the simulator (two simulated GPUs) and on a real machine with two or more
// GPUs, and skip on one GPU saying so.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestCanAccessPeerOfItselfIsFalse(t *testing.T) {
	env := drivertest.Open(t)
	can, err := env.Device.CanAccessPeer(env.Device)
	require.NoError(t, err)
	assert.False(t, can, "a device is never its own peer (the driver answers 0)")

	_, err = env.Device.CanAccessPeer(nil)
	assert.Equal(t, cudadrv.ErrorInvalidDevice, cudadrv.ResultOf(err))
}

func TestCopyPeerWithinOneContext(t *testing.T) {
	env := drivertest.Open(t)
	const n = 1 << 16
	s := newStream(t, env)
	a, b := alloc(t, env, n), alloc(t, env, n)
	require.NoError(t, env.Context.CopyHtoD(a.Ptr(), pattern(n, 11)))
	require.NoError(t, env.Context.CopyHtoD(b.Ptr(), pattern(n, 12)))
	require.NoError(t, s.CopyPeerAsync(b.Ptr()+64, env.Context, a.Ptr(), env.Context, n-128))
	require.NoError(t, s.Synchronize())
	got := make([]byte, n)
	require.NoError(t, env.Context.CopyDtoH(got, b.Ptr()))
	want := pattern(n, 12)
	copy(want[64:], pattern(n, 11)[:n-128])
	assert.Equal(t, want, got)

	require.NoError(t, s.CopyPeerAsync(b.Ptr(), env.Context, a.Ptr(), env.Context, 0), "zero bytes never reach the driver")
	assert.ErrorIs(t, s.CopyPeerAsync(b.Ptr(), nil, a.Ptr(), env.Context, 8), cudadrv.ErrDestroyed)
}

// secondDevice retains device 1's primary context, skipping the test on a machine with one
// device. The cleanup releases it after the test's other cleanups registered later.
func secondDevice(t *testing.T, env *drivertest.Env) (*cudadrv.Device, *cudadrv.Context) {
	t.Helper()
	n, err := env.Driver.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("needs 2 CUDA devices; the %s backend has %d (run on a machine with two GPUs)", env.Driver.Name(), n)
	}
	dev, err := env.Driver.Device(1)
	require.NoError(t, err)
	ctx, err := dev.RetainPrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ctx.Release()) })
	return dev, ctx
}

func TestPeerAccessAndCopyBetweenTwoDevices(t *testing.T) {
	env := drivertest.OpenWith(t, sim.Options{Devices: 2})
	dev1, ctx1 := secondDevice(t, env)
	can, err := env.Device.CanAccessPeer(dev1)
	require.NoError(t, err)
	if !can {
		t.Skip("needs two GPUs that can access each other; device 0 cannot access device 1")
	}
	ctx0 := env.Context
	const n = 1 << 20

	require.NoError(t, ctx1.Bind())
	src, err := ctx1.Alloc(n)
	require.NoError(t, err)
	require.NoError(t, ctx1.CopyHtoD(src.Ptr(), pattern(n, 21)))

	require.NoError(t, ctx0.Bind())
	require.NoError(t, ctx0.EnablePeerAccess(ctx1))
	require.NoError(t, ctx0.EnablePeerAccess(ctx1), "a second enable is success")
	dst := alloc(t, env, n)
	require.NoError(t, ctx0.CopyHtoD(dst.Ptr(), pattern(n, 22)))
	s := newStream(t, env)
	require.NoError(t, s.CopyPeerAsync(dst.Ptr(), ctx0, src.Ptr(), ctx1, n))
	require.NoError(t, s.Synchronize())
	got := make([]byte, n)
	require.NoError(t, ctx0.CopyDtoH(got, dst.Ptr()))
	assert.Equal(t, pattern(n, 21), got)

	require.NoError(t, ctx1.Bind())
	require.NoError(t, src.Free())
	require.NoError(t, ctx0.Bind())
}

func TestEnablePeerAccessRefusesAReleasedContext(t *testing.T) {
	env := drivertest.OpenWith(t, sim.Options{Devices: 2})
	dev1, _ := secondDevice(t, env)
	ctx, err := dev1.RetainPrimaryContext()
	require.NoError(t, err)
	require.NoError(t, ctx.Release())
	assert.ErrorIs(t, env.Context.EnablePeerAccess(ctx), cudadrv.ErrDestroyed)
	assert.ErrorIs(t, env.Context.EnablePeerAccess(nil), cudadrv.ErrDestroyed)
}
