package sim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestSmoke(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	p := e.alloc(64)
	require.NoError(t, e.d.MemcpyHtoDAsync(p, pattern(64, 3), s))
	require.NoError(t, e.launchTouch(s, p, 64))
	require.NoError(t, e.d.StreamSynchronize(s))
	want := pattern(64, 3)
	for i := range want {
		want[i]++
	}
	require.Equal(t, want, e.get(p, 64))
	require.NoError(t, e.d.StreamBeginCapture(s, cudadrv.CaptureModeThreadLocal))
	require.NoError(t, e.launchTouch(s, p, 64))
	g, err := e.d.StreamEndCapture(s)
	require.NoError(t, err)
	x, err := e.d.GraphInstantiate(g, 0)
	require.NoError(t, err)
	require.NoError(t, e.d.GraphLaunch(x, s))
	require.NoError(t, e.d.StreamSynchronize(s))
	for i := range want {
		want[i]++
	}
	require.Equal(t, want, e.get(p, 64))
}
