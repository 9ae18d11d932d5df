package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// unregistered is declared in testPTX and registered with RegisterKernel by no test.
const unregistered = "sim_test_unregistered"

// writeWord is a body that stores 0xD4C3B2A1 at its pointer argument.
func writeWord(l *cudadrv.KernelLaunch) error {
	b, err := l.Bytes(l.PtrArg(0), 4)
	if err != nil {
		return err
	}
	copy(b, []byte{0xA1, 0xB2, 0xC3, 0xD4})
	return nil
}

// TestOptionsKernelsRunOnTheirDevice: a body handed to New in Options.Kernels runs for the
// device's modules, and the device keeps its own copy of the map.
func TestOptionsKernelsRunOnTheirDevice(t *testing.T) {
	bodies := map[string]cudadrv.KernelBody{unregistered: writeWord}
	e := newEnv(t, sim.Options{Kernels: bodies})
	delete(bodies, unregistered) // New copied the map: the device still has the body
	s, p := e.stream(), e.alloc(8)
	e.put(p, []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88})
	require.NoError(t, e.d.LaunchKernel(e.fn(unregistered), dim(1), dim(1), 0, s, new(cudadrv.KernelArgs).Ptr(p)))
	require.NoError(t, e.d.StreamSynchronize(s))
	assert.Equal(t, []byte{0xA1, 0xB2, 0xC3, 0xD4, 0x55, 0x66, 0x77, 0x88}, e.get(p, 8))
}

// TestADeviceWithoutABodyRefusesTheEntry: a device opened without a body for an entry (in its
// options or registered) refuses to bind it, with CUDA_ERROR_NOT_FOUND naming the entry and
// where bodies come from, so no launch of a kernel it cannot run is ever queued; another
// device's bodies do not leak into it.
func TestADeviceWithoutABodyRefusesTheEntry(t *testing.T) {
	_ = newEnv(t, sim.Options{Kernels: map[string]cudadrv.KernelBody{unregistered: writeWord}})
	bare := newEnv(t, sim.Options{})
	_, err := bare.d.ModuleGetFunction(bare.mod, unregistered)
	requireResult(t, err, cudadrv.ErrorNotFound)
	assert.Contains(t, err.Error(), unregistered)
	assert.Contains(t, err.Error(), "sim.Options.Kernels")
}

// TestOptionsKernelsWinOverRegistrations: a device's own body of a name is used instead of a
// process-wide registration of that name; devices without one still use the registration.
func TestOptionsKernelsWinOverRegistrations(t *testing.T) {
	const name = "sim_test_fill" // registered by helpers_test.go: fills n uint32s with a value
	for _, tt := range []struct {
		name string
		opts sim.Options
		want []byte
	}{
		{"own body", sim.Options{Kernels: map[string]cudadrv.KernelBody{name: writeWord}}, []byte{0xA1, 0xB2, 0xC3, 0xD4}},
		{"registered body", sim.Options{}, []byte{0x5A, 0x00, 0x00, 0x00}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opts)
			s, p := e.stream(), e.alloc(4)
			e.put(p, []byte{0x01, 0x02, 0x03, 0x04})
			args := new(cudadrv.KernelArgs).Ptr(p).U32(0x5A).U64(1)
			require.NoError(t, e.d.LaunchKernel(e.fn(name), dim(1), dim(1), 0, s, args))
			require.NoError(t, e.d.StreamSynchronize(s))
			assert.Equal(t, tt.want, e.get(p, 4))
		})
	}
}
