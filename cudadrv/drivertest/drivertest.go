// Package drivertest opens the device that the project's test suites run against: the
// simulated device by default, the real GPU when CUDAEP_TEST_BACKEND=cuda.
//
// # Notes
//
// It is test support, not a layer: only tests import it, and it imports nothing above cudadrv
// (internal/layers enforces both). The simulated device it opens runs add_one (AddOnePTX) and
// whatever Go kernel bodies a test package registers with UseSimKernels: ep/kernels' tests
// register the library's (kernels.SimKernels), so that their device runs them as the one a
// provider opens does.
package drivertest

import (
	"maps"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/cuda"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

// EnvBackend is the environment variable that selects the backend: "sim" (default) or "cuda".
const EnvBackend = "CUDAEP_TEST_BACKEND"

// Env is an open device for one test: a driver, device 0 and its retained primary context,
// bound on the test goroutine's OS thread.
type Env struct {
	Driver  *cudadrv.Driver
	Device  *cudadrv.Device
	Context *cudadrv.Context
	// Sim is the simulated device, or nil on the real GPU. Tests that need fault injection
	// skip when it is nil and say why.
	Sim *sim.Device
}

// BackendName returns the backend the suites run against: "sim" or "cuda".
func BackendName() string {
	if os.Getenv(EnvBackend) == "cuda" {
		return "cuda"
	}
	return "sim"
}

// Open opens the test backend, retains device 0's primary context and binds it on the calling
// goroutine's OS thread, which it locks for the rest of the test (CUDA contexts are current
// per thread). Cleanup releases everything and fails the test if the context's counters show a
// leaked device allocation, pinned buffer, registration, graph, executable, stream or event.
func Open(t testing.TB) *Env {
	t.Helper()
	return OpenWith(t, sim.Options{})
}

// OpenWith is Open with options for the simulated device (ignored on the real GPU). The
// simulated device runs the bodies registered with UseSimKernels and add_one (AddOnePTX);
// opts.Kernels adds bodies or replaces them by name.
func OpenWith(t testing.TB, opts sim.Options) *Env {
	t.Helper()
	runtime.LockOSThread()
	env := &Env{}
	var b cudadrv.Backend
	if BackendName() == "cuda" {
		cb, err := cuda.Open()
		if err != nil {
			t.Fatalf("drivertest: %s=cuda but the CUDA driver cannot be opened: %v", EnvBackend, err)
		}
		b = cb
	} else {
		opts.Kernels = SimKernels(opts.Kernels)
		env.Sim = sim.New(opts)
		b = env.Sim
	}
	drv, err := cudadrv.NewDriver(b)
	if err != nil {
		t.Fatalf("drivertest: init %s backend: %v", b.Name(), err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatalf("drivertest: device 0: %v", err)
	}
	ctx, err := dev.RetainPrimaryContext()
	if err != nil {
		t.Fatalf("drivertest: retain primary context: %v", err)
	}
	if err := ctx.Bind(); err != nil {
		t.Fatalf("drivertest: bind context: %v", err)
	}
	env.Driver, env.Device, env.Context = drv, dev, ctx
	t.Cleanup(func() {
		// A faulted context refuses every call, frees included: nothing can be accounted.
		if ctx.StickyError() == nil {
			if leaks := Leaks(ctx.Counters()); leaks != "" {
				t.Errorf("drivertest: leaked at teardown: %s", leaks)
			}
		}
		if err := ctx.Release(); err != nil {
			t.Errorf("drivertest: release context: %v", err)
		}
		if env.Sim != nil {
			if err := env.Sim.Close(); err != nil {
				t.Errorf("drivertest: close sim: %v", err)
			}
		}
		runtime.UnlockOSThread()
	})
	return env
}

// registered makes the Go kernel bodies of the test package's choice (UseSimKernels), or is
// nil when it chose none. It is written before any test runs and only read afterwards.
var registered func() map[string]cudadrv.KernelBody

// UseSimKernels makes every simulated device that Open and OpenWith open in this test binary
// also run the bodies that bodies returns (called once per device; the map it returns must be
// new each time, as kernels.SimKernels' is). It lets a package above cudadrv give its tests'
// devices its own kernels without this package importing it: ep/kernels' tests register
// kernels.SimKernels.
//
// # Notes
//
// Call it from an init function of a test package (or from TestMain before m.Run), before
// any test opens a device: it is not safe to call while tests run. A second call replaces
// the first.
func UseSimKernels(bodies func() map[string]cudadrv.KernelBody) { registered = bodies }

// SimKernels returns the Go bodies a test's simulated device runs: those registered with
// UseSimKernels, add_one, then extra's, which win by name. The map is new.
func SimKernels(extra map[string]cudadrv.KernelBody) map[string]cudadrv.KernelBody {
	m := map[string]cudadrv.KernelBody{}
	if registered != nil {
		maps.Copy(m, registered())
	}
	m["add_one"] = addOne
	maps.Copy(m, extra)
	return m
}

// Leaks describes every kind of object created through the wrappers and not destroyed, or ""
// when everything was.
func Leaks(c cudadrv.Counters) string {
	var s string
	add := func(name string, made, gone uint64) {
		if made != gone {
			s += name + " " + strconv.FormatUint(made-gone, 10) + " "
		}
	}
	add("device-allocations", c.DeviceAllocs, c.DeviceFrees)
	add("pinned-buffers", c.PinnedAllocs, c.PinnedFrees)
	add("registrations", c.Registrations, c.Unregistrations)
	add("graphs", c.GraphsCreated, c.GraphsDestroyed)
	add("graph-execs", c.GraphExecsCreated, c.GraphExecsDestroyed)
	add("streams", c.StreamsCreated, c.StreamsDestroyed)
	add("events", c.EventsCreated, c.EventsDestroyed)
	add("modules", c.ModulesLoaded, c.ModulesUnloaded)
	add("blas-handles", c.BLASHandlesCreated, c.BLASHandlesDestroyed)
	return s
}

// BindHere locks the calling goroutine (a subtest's, say) to its OS thread and binds the env's
// context there, until t ends. Subtests run on goroutines of their own, so each one that calls
// the driver binds first — on the real driver as on the sim.
func (env *Env) BindHere(t testing.TB) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := env.Context.Bind(); err != nil {
		t.Fatalf("drivertest: bind context: %v", err)
	}
}
