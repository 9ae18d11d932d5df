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

// backends are the driver instances of this process, one per backend kind, shared by every
// provider that uses the kind: like the real driver, where every provider on GPU 0 shares the
// device and its primary context, two sim providers share one simulated machine, so the
// device-wide rules (one capture gate per device, a device drain seen by every provider) hold
// and are tested without a GPU. A backend is closed with its last provider.
var backends struct {
	sync.Mutex
	m map[string]*sharedBackend
}

// simOptions returns the options of the simulated device the sim backend opens: one device
// that runs the kernel library (EnvSimDevices and EnvSimPeers, sim_env.go, change the machine).
// Tests replace it (export_test.go) while no sim backend is open.
var simOptions = func() sim.Options { return sim.Options{Kernels: kernels.SimKernels()} }

// sharedBackend is one driver instance and the number of providers using it.
type sharedBackend struct {
	name string
	drv  *cudadrv.Driver
	refs int
}

// acquireBackend returns the process's driver for the backend option name (cuda, sim, auto)
// with a reference taken, and for auto the reason for its choice. Release it with
// releaseBackend.
func acquireBackend(name string) (*sharedBackend, string, error) {
	backends.Lock()
	defer backends.Unlock()
	kind, reason := name, ""
	var probe cudadrv.Backend // the cuda backend auto opened to look for a device
	switch name {
	case BackendSim, BackendCUDA:
	case BackendAuto:
		if sb := backends.m[BackendCUDA]; sb != nil {
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
	if sb := backends.m[kind]; sb != nil {
		sb.refs++
		return sb, reason, nil
	}
	b := probe
	switch {
	case b != nil:
	case kind == BackendSim:
		opts, err := simEnv(simOptions())
		if err != nil {
			return nil, "", fmt.Errorf("ep: backend=sim: %w", err)
		}
		b = sim.New(opts)
	default:
		cb, err := cuda.Open()
		if err != nil {
			return nil, "", fmt.Errorf("ep: backend=cuda: %w", err)
		}
		b = cb
	}
	drv, err := cudadrv.NewDriver(b)
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("ep: initialize %s backend: %w", b.Name(), err), closeBackend(b))
	}
	sb := &sharedBackend{name: kind, drv: drv, refs: 1}
	if backends.m == nil {
		backends.m = map[string]*sharedBackend{}
	}
	backends.m[kind] = sb
	return sb, reason, nil
}

// releaseBackend drops a provider's reference; the last one closes the backend (its worker
// goroutines, its loaded libraries) and forgets its capture gates.
func releaseBackend(sb *sharedBackend) error {
	backends.Lock()
	defer backends.Unlock()
	sb.refs--
	if sb.refs > 0 {
		return nil
	}
	delete(backends.m, sb.name)
	graphs.ForgetGates(sb.drv.Backend())
	return closeBackend(sb.drv.Backend())
}

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
	sb, reason, err := acquireBackend(backend)
	if err != nil {
		return nil, "", "", err
	}
	defer func() { _ = releaseBackend(sb) }()
	n, err := sb.drv.DeviceCount()
	if err != nil {
		return nil, "", "", fmt.Errorf("ep: count devices: %w", err)
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		d, err := sb.drv.Device(i)
		if err != nil {
			return nil, "", "", fmt.Errorf("ep: open device %d: %w", i, err)
		}
		major, minor := d.ComputeCapability()
		out = append(out, DeviceInfo{Ordinal: i, Name: d.Name(), Major: major, Minor: minor,
			TotalMemory: d.TotalMemory(), Multiprocessors: d.Multiprocessors()})
	}
	return out, sb.name, reason, nil
}
