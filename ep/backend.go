package ep

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/cuda"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

// backends serializes ep's choice and opening of the process's drivers. The drivers themselves
// are cudadrv's shared drivers, one per backend kind (named as the backend option names it),
// shared by every provider that uses the kind: like the real driver, where every provider on
// GPU 0 shares the device and its primary context, two sim providers share one simulated
// machine, so the device-wide rules (one capture gate per device, a device drain seen by every
// provider) hold and are tested without a GPU. Code beside the providers that makes driver
// calls of its own (a benchmark's raw baselines) acquires the same driver from cudadrv by the
// provider's BackendName. A backend is closed with its last reference.
var backends sync.Mutex

// simOptions returns the options of the simulated device the sim backend opens: one device
// that runs the kernel library (EnvSimDevices and EnvSimPeers, sim_env.go, change the machine).
// Tests replace it (export_test.go) while no sim backend is open.
var simOptions = func() sim.Options { return sim.Options{Kernels: kernels.SimKernels()} }

// acquireBackend returns the process's driver for the backend option name (cuda, sim, auto)
// with a reference taken, and for auto the reason for its choice. Release it with
// releaseBackend.
func acquireBackend(name string) (*cudadrv.Driver, string, error) {
	backends.Lock()
	defer backends.Unlock()
	kind, reason := name, ""
	var probe cudadrv.Backend // the cuda backend auto opened to look for a device
	switch name {
	case BackendSim, BackendCUDA:
	case BackendAuto:
		if cudadrv.SharedOpen(BackendCUDA) {
			kind, reason = BackendCUDA, "auto chose cuda: a CUDA device is usable"
			break
		}
		b, err := cuda.Open()
		switch {
		case err != nil:
			kind, reason = BackendSim, "auto chose sim: no usable CUDA driver ("+err.Error()+")"
		case deviceCount(b) == 0:
			kind, reason = BackendSim, "auto chose sim: the CUDA driver reports no device"
		default:
			kind, reason, probe = BackendCUDA, "auto chose cuda: a CUDA device is usable", b
		}
	default:
		return nil, "", &OptionError{Key: OptionBackend, Value: name, Allowed: "cuda | sim | auto"}
	}
	open := func() (*cudadrv.Driver, error) {
		b := probe
		switch {
		case b != nil:
		case kind == BackendSim:
			opts, err := simEnv(simOptions())
			if err != nil {
				return nil, fmt.Errorf("ep: backend=sim: %w", err)
			}
			b = sim.New(opts)
		default:
			cb, err := cuda.Open()
			if err != nil {
				return nil, fmt.Errorf("ep: backend=cuda: %w", err)
			}
			b = cb
		}
		drv, err := cudadrv.NewDriver(b)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("ep: initialize %s backend: %w", b.Name(), err), closeBackend(b))
		}
		return drv, nil
	}
	// The last release forgets the backend's capture gates, whoever releases it.
	drv, err := cudadrv.AcquireShared(kind, open, func(b cudadrv.Backend) { graphs.ForgetGates(b) })
	if err != nil {
		return nil, "", err
	}
	return drv, reason, nil
}

// releaseBackend drops a reference acquireBackend took; the last one closes the backend (its
// worker goroutines, its loaded libraries) and forgets its capture gates.
func releaseBackend(drv *cudadrv.Driver) error { return cudadrv.ReleaseShared(drv) }

func deviceCount(b cudadrv.Backend) int {
	n, err := b.DeviceCount()
	if err != nil {
		return 0
	}
	return n
}

func closeBackend(b cudadrv.Backend) error {
	if c, ok := b.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// ListDevices describes the devices of the backend named by the option value (cuda, sim or
// auto) without creating a provider, and says which backend it used (for auto, why). A host
// such as ONNX Runtime's device discovery uses it to offer one device per GPU.
//
// # Errors
//
// A bad backend name is an *OptionError; with backend cuda and no loadable driver the error
// names what was tried.
func ListDevices(backend string) ([]DeviceInfo, string, string, error) {
	drv, reason, err := acquireBackend(backend)
	if err != nil {
		return nil, "", "", err
	}
	defer func() { _ = releaseBackend(drv) }()
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, "", "", fmt.Errorf("ep: count devices: %w", err)
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		d, err := drv.Device(i)
		if err != nil {
			return nil, "", "", fmt.Errorf("ep: open device %d: %w", i, err)
		}
		major, minor := d.ComputeCapability()
		out = append(out, DeviceInfo{Ordinal: i, Name: d.Name(), Major: major, Minor: minor,
			TotalMemory: d.TotalMemory(), Multiprocessors: d.Multiprocessors()})
	}
	return out, drv.Name(), reason, nil
}
