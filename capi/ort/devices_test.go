package ort

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

func TestBackendFromEnvDefaultsToCUDAAndNamesBadValues(t *testing.T) {
	for v, want := range map[string]string{"": ep.BackendCUDA, "cuda": ep.BackendCUDA, "sim": ep.BackendSim, "auto": ep.BackendAuto} {
		got, err := backendFromEnv(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"gpu", "SIM", " sim"} {
		_, err := backendFromEnv(v)
		require.Error(t, err, v)
		assert.ErrorIs(t, err, errInvalid)
		assert.Contains(t, err.Error(), `CUDAEP_BACKEND="`+v+`"`)
	}
}

// fakeList stands for ep.ListDevices: what each backend name yields.
func fakeList(driver bool, count int) func(string) ([]ep.DeviceInfo, string, string, error) {
	gpus := make([]ep.DeviceInfo, count)
	for i := range gpus {
		gpus[i] = ep.DeviceInfo{Ordinal: i, Name: "NVIDIA H200", Major: 9}
	}
	sim := []ep.DeviceInfo{{Ordinal: 0, Name: "cudaep simulated device"}}
	return func(backend string) ([]ep.DeviceInfo, string, string, error) {
		switch {
		case backend == ep.BackendSim:
			return sim, ep.BackendSim, "", nil
		case backend == ep.BackendCUDA && !driver:
			return nil, "", "", errors.New("cannot load libcuda.so.1")
		case backend == ep.BackendCUDA:
			return gpus, ep.BackendCUDA, "", nil
		case !driver:
			return sim, ep.BackendSim, "auto chose sim: no usable CUDA driver", nil
		case count == 0:
			return sim, ep.BackendSim, "auto chose sim: the CUDA driver reports no device", nil
		}
		return gpus, ep.BackendCUDA, "auto chose cuda", nil
	}
}

func TestListDevicesNeverFallsBackToTheSimulatorUnasked(t *testing.T) {
	// The default (cuda) without a driver, or with a driver and no device: nothing, and a
	// WARNING saying what was tried and how to ask for the simulator.
	for name, list := range map[string]func(string) ([]ep.DeviceInfo, string, string, error){
		"no driver": fakeList(false, 0), "no device": fakeList(true, 0),
	} {
		l := listDevices(ep.BackendCUDA, list)
		assert.Empty(t, l.infos, name)
		assert.Equal(t, logWarning, l.level, name)
		assert.Contains(t, l.message, "CudaEp lists no device", name)
		assert.Contains(t, l.message, "CUDAEP_BACKEND=sim", name)
	}
	assert.Contains(t, listDevices(ep.BackendCUDA, fakeList(false, 0)).message, "cannot load libcuda.so.1")
	assert.Contains(t, listDevices(ep.BackendCUDA, fakeList(true, 0)).message, "reports 0 devices")

	l := listDevices(ep.BackendCUDA, fakeList(true, 2))
	assert.Len(t, l.infos, 2)
	assert.Equal(t, ep.BackendCUDA, l.backend)
	assert.Equal(t, logInfo, l.level)
	assert.Contains(t, l.message, "NVIDIA H200 (sm_90)")

	// sim only when asked: sim itself (INFO) or auto without a usable device (WARNING, why).
	l = listDevices(ep.BackendSim, fakeList(true, 2))
	assert.Equal(t, ep.BackendSim, l.backend)
	assert.Len(t, l.infos, 1)
	assert.Equal(t, logInfo, l.level)
	l = listDevices(ep.BackendAuto, fakeList(false, 0))
	assert.Equal(t, ep.BackendSim, l.backend)
	assert.Equal(t, logWarning, l.level)
	assert.Contains(t, l.message, "not a GPU")
	assert.Contains(t, l.message, "no usable CUDA driver")
	l = listDevices(ep.BackendAuto, fakeList(true, 1))
	assert.Equal(t, ep.BackendCUDA, l.backend)
}

func TestSessionEntriesKeepTheDevicesBackend(t *testing.T) {
	simDevice := map[string]string{"backend": "sim", "simulated": "1"}
	gpuDevice := map[string]string{"backend": "cuda", "cuda_ordinal": "1"}

	e, err := sessionEntries(gpuDevice, map[string]string{"ep.cudaep.enable_cuda_graph": "1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ep.cudaep.backend": "cuda", "ep.cudaep.device_id": "1", "ep.cudaep.enable_cuda_graph": "1"}, e)
	e, err = sessionEntries(gpuDevice, map[string]string{"ep.cudaep.device_id": "0"})
	require.NoError(t, err)
	assert.Equal(t, "0", e["ep.cudaep.device_id"], "the session's device_id overrides the device's ordinal")
	e, err = sessionEntries(simDevice, map[string]string{"ep.cudaep.backend": "sim"})
	require.NoError(t, err, "the device's own backend may be repeated")
	assert.Equal(t, "sim", e["ep.cudaep.backend"])

	for _, c := range []struct {
		meta    map[string]string
		backend string
	}{{simDevice, "cuda"}, {simDevice, "auto"}, {gpuDevice, "sim"}, {gpuDevice, "auto"}} {
		_, err := sessionEntries(c.meta, map[string]string{"ep.cudaep.backend": c.backend})
		require.Error(t, err, c.backend)
		assert.ErrorIs(t, err, errInvalid)
		assert.Contains(t, err.Error(), `ep.cudaep.backend="`+c.backend+`" contradicts`)
		assert.Contains(t, err.Error(), "a "+c.meta["backend"]+" device")
	}
}
