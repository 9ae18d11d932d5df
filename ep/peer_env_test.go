package ep_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// The environment variables that shape the simulated machine for hosts that cannot pass
// sim.Options (the C ABI's tests, ONNX Runtime's adapter).

func TestSimDevicesFromTheEnvironment(t *testing.T) {
	t.Setenv(ep.EnvSimDevices, "3")
	infos, backend, _, err := ep.ListDevices(ep.BackendSim)
	require.NoError(t, err)
	assert.Equal(t, ep.BackendSim, backend)
	require.Len(t, infos, 3)
	for i, info := range infos {
		assert.Equal(t, i, info.Ordinal)
	}
}

func TestSimPeersFromTheEnvironment(t *testing.T) {
	t.Setenv(ep.EnvSimDevices, "3")
	t.Setenv(ep.EnvSimPeers, "0-2")
	opts := ep.DefaultOptions()
	opts.Backend = ep.BackendSim
	var ps []*ep.Provider
	for i := 0; i < 3; i++ {
		opts.DeviceID = i
		p, err := ep.New(opts)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, p.Close()) })
		ps = append(ps, p)
	}
	for _, c := range []struct {
		d, s int
		want ep.PeerPath
	}{{0, 2, ep.PeerPathDirect}, {2, 0, ep.PeerPathDirect}, {0, 1, ep.PeerPathStaged}, {1, 2, ep.PeerPathStaged}} {
		src, dst := filled(t, ps[c.s], 512, byte(c.s+1)), filled(t, ps[c.d], 512, 9)
		path, err := ps[c.d].CopyPeer(dst, 0, src, 0, 512)
		require.NoError(t, err)
		assert.Equal(t, c.want, path, "%d → %d", c.s, c.d)
		assert.Equal(t, pattern(512, byte(c.s+1)), readBack(t, ps[c.d], dst))
	}
}

func TestSimEnvironmentRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ key, value, want string }{
		{ep.EnvSimDevices, "0", "device count 1..64"},
		{ep.EnvSimDevices, "65", "device count 1..64"},
		{ep.EnvSimDevices, "two", "device count 1..64"},
		{ep.EnvSimPeers, "0-0", "two distinct device ordinals"},
		{ep.EnvSimPeers, "0:1", "two distinct device ordinals"},
		{ep.EnvSimPeers, "0-1,x", "two distinct device ordinals"},
	} {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			t.Setenv(c.key, c.value)
			_, _, _, err := ep.ListDevices(ep.BackendSim)
			require.Error(t, err)
			assert.ErrorIs(t, err, ep.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.key)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
