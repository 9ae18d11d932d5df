package drivertest_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// registeredRuns counts launches of drivertest_test_registered, the body this test binary
// registers as a package above cudadrv would register its kernels (the simulated stream's
// worker runs it, hence atomic).
var registeredRuns atomic.Int32

func init() {
	drivertest.UseSimKernels(func() map[string]cudadrv.KernelBody {
		return map[string]cudadrv.KernelBody{
			"drivertest_test_registered": func(*cudadrv.KernelLaunch) error { registeredRuns.Add(1); return nil },
			"add_one":                    func(*cudadrv.KernelLaunch) error { return nil },
		}
	})
}

// TestSimKernelsRegisteredThenAddOneThenExtra: the registered bodies come first, add_one
// replaces a registered body of its name, and extra's replace both.
func TestSimKernelsRegisteredThenAddOneThenExtra(t *testing.T) {
	extra := func(*cudadrv.KernelLaunch) error { return nil }
	m := drivertest.SimKernels(map[string]cudadrv.KernelBody{"extra": extra})
	assert.Contains(t, m, "drivertest_test_registered")
	assert.Contains(t, m, "extra")
	require.Contains(t, m, "add_one")

	// add_one is drivertest's own, not the registered stand-in: it writes y = x + 1.
	env := drivertest.Open(t)
	if env.Sim == nil {
		t.Skip("the registered bodies run on the simulated device only")
	}
	fn := env.AddOne(t)
	s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy()) }()
	const n = 64
	x := drivertest.RandomFloat32(n)
	buf, err := env.Context.Alloc(4 * n)
	require.NoError(t, err)
	defer func() { assert.NoError(t, buf.Free()) }()
	require.NoError(t, env.Context.CopyHtoD(buf.Ptr(), drivertest.Float32Bytes(x)))
	require.NoError(t, drivertest.LaunchAddOne(s, fn, new(cudadrv.KernelArgs), buf.Ptr(), buf.Ptr(), n))
	require.NoError(t, s.Synchronize())
	got := make([]byte, 4*n)
	require.NoError(t, env.Context.CopyDtoH(got, buf.Ptr()))
	for i, v := range drivertest.BytesFloat32(got) {
		require.Equal(t, x[i]+1, v, "element %d", i)
	}
}

// TestOpenRunsTheRegisteredKernels: a device Open opens runs a body registered with
// UseSimKernels, and OpenWith's own bodies win by name.
func TestOpenRunsTheRegisteredKernels(t *testing.T) {
	const ptx = ".version 7.5\n.target sm_75\n.address_size 64\n.visible .entry drivertest_test_registered() { ret; }\n"
	tests := []struct {
		name string
		opts sim.Options
		runs int32
	}{
		{"registered", sim.Options{}, 1},
		{"replaced by OpenWith", sim.Options{Kernels: map[string]cudadrv.KernelBody{
			"drivertest_test_registered": func(*cudadrv.KernelLaunch) error { return nil },
		}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := drivertest.OpenWith(t, tt.opts)
			if env.Sim == nil {
				t.Skip("the registered bodies run on the simulated device only")
			}
			registeredRuns.Store(0)
			mod, err := env.Context.LoadModule([]byte(ptx))
			require.NoError(t, err)
			defer func() { assert.NoError(t, mod.Unload()) }()
			fn, err := mod.Function("drivertest_test_registered")
			require.NoError(t, err)
			s, err := env.Context.NewStream(cudadrv.StreamNonBlocking, 0)
			require.NoError(t, err)
			defer func() { assert.NoError(t, s.Destroy()) }()
			one := cudadrv.Dim3{X: 1, Y: 1, Z: 1}
			require.NoError(t, s.Launch(fn, one, one, 0, new(cudadrv.KernelArgs)))
			require.NoError(t, s.Synchronize())
			assert.Equal(t, tt.runs, registeredRuns.Load())
		})
	}
}
