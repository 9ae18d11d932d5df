package cudadrv

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrDestroyed is returned by a method of a handle that was already destroyed, freed or
// released: the wrappers refuse it instead of handing a dangling handle to the driver.
var ErrDestroyed = errors.New("cudadrv: handle already destroyed")

// Driver is an initialized backend: the entry point to devices. It is safe for concurrent use.
type Driver struct {
	b Backend
}

// NewDriver initializes b (cuInit) and returns a Driver over it.
func NewDriver(b Backend) (*Driver, error) {
	if b == nil {
		return nil, errors.New("cudadrv: nil backend")
	}
	if err := b.Init(); err != nil {
		return nil, err
	}
	return &Driver{b: b}, nil
}

// Backend returns the backend, for backend-specific controls (the sim's fault injection).
func (d *Driver) Backend() Backend { return d.b }

// Name is the backend's name: "cuda" or "sim".
func (d *Driver) Name() string { return d.b.Name() }

// Version returns the driver version as the driver encodes it (1000·major + 10·minor).
func (d *Driver) Version() (int, error) { return d.b.DriverVersion() }

// DeviceCount returns the number of devices.
func (d *Driver) DeviceCount() (int, error) { return d.b.DeviceCount() }

// Device returns the device with the given ordinal and its static properties.
//
// # Errors
//
// An ordinal outside [0, DeviceCount) is an *Error with ErrorInvalidDevice whose detail names
// the device count.
func (d *Driver) Device(ordinal int) (*Device, error) {
	n, err := d.b.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, &Error{Op: "cuDeviceGet", Result: ErrorInvalidDevice,
			Detail: fmt.Sprintf("device id %d is out of range: %d device(s) present", ordinal, n)}
	}
	dev := &Device{d: d, ordinal: ordinal}
	if dev.name, err = d.b.DeviceName(ordinal); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		attr DeviceAttribute
		dst  *int
	}{
		{AttrComputeCapabilityMajor, &dev.major},
		{AttrComputeCapabilityMinor, &dev.minor},
		{AttrMultiprocessorCount, &dev.sms},
	} {
		if *a.dst, err = d.b.DeviceAttribute(ordinal, a.attr); err != nil {
			return nil, err
		}
	}
	if dev.totalMem, err = d.b.DeviceTotalMem(ordinal); err != nil {
		return nil, err
	}
	return dev, nil
}

// CompilePTX compiles CUDA C source to PTX with NVRTC (cuda backend only; the sim returns an
// error wrapping ErrUnsupported). A compile error is a *CompileError carrying the log.
func (d *Driver) CompilePTX(source, name string, options []string) ([]byte, error) {
	return d.b.CompilePTX(source, name, options)
}

// Device is one GPU and its static properties.
type Device struct {
	d            *Driver
	ordinal      int
	name         string
	major, minor int
	sms          int
	totalMem     uint64
}

// Driver returns the driver the device belongs to.
func (dev *Device) Driver() *Driver { return dev.d }

// Ordinal is the device's index.
func (dev *Device) Ordinal() int { return dev.ordinal }

// Name is the device's marketing name, e.g. "NVIDIA H200".
func (dev *Device) Name() string { return dev.name }

// ComputeCapability returns the major and minor compute capability.
func (dev *Device) ComputeCapability() (major, minor int) { return dev.major, dev.minor }

// Multiprocessors is the number of streaming multiprocessors.
func (dev *Device) Multiprocessors() int { return dev.sms }

// TotalMemory is the device memory size in bytes.
func (dev *Device) TotalMemory() uint64 { return dev.totalMem }

// RetainPrimaryContext retains the device's primary context. Each successful call is paired
// with one Context.Release.
func (dev *Device) RetainPrimaryContext() (*Context, error) {
	raw, err := dev.d.b.PrimaryCtxRetain(dev.ordinal)
	if err != nil {
		return nil, err
	}
	return &Context{b: dev.d.b, dev: dev, raw: raw}, nil
}

// Counters are a context's resource counters: every allocation, registration and graph object
// made and destroyed through the wrappers. Tests compare them with a baseline to prove that
// nothing leaked and that a replay allocated nothing.
type Counters struct {
	DeviceAllocs, DeviceFrees                uint64
	DeviceLiveBytes                          uint64
	PinnedAllocs, PinnedFrees                uint64
	PinnedLiveBytes                          uint64
	Registrations, Unregistrations           uint64
	RegisteredLiveBytes                      uint64
	GraphsCreated, GraphsDestroyed           uint64
	GraphExecsCreated, GraphExecsDestroyed   uint64
	StreamsCreated, StreamsDestroyed         uint64
	EventsCreated, EventsDestroyed           uint64
	ModulesLoaded, ModulesUnloaded           uint64
	BLASHandlesCreated, BLASHandlesDestroyed uint64
}

type counters struct {
	deviceAllocs, deviceFrees, deviceLive          atomic.Uint64
	pinnedAllocs, pinnedFrees, pinnedLive          atomic.Uint64
	registrations, unregistrations, registeredLive atomic.Uint64
	graphsCreated, graphsDestroyed                 atomic.Uint64
	execsCreated, execsDestroyed                   atomic.Uint64
	streamsCreated, streamsDestroyed               atomic.Uint64
	eventsCreated, eventsDestroyed                 atomic.Uint64
	modulesLoaded, modulesUnloaded                 atomic.Uint64
	blasCreated, blasDestroyed                     atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		DeviceAllocs: c.deviceAllocs.Load(), DeviceFrees: c.deviceFrees.Load(), DeviceLiveBytes: c.deviceLive.Load(),
		PinnedAllocs: c.pinnedAllocs.Load(), PinnedFrees: c.pinnedFrees.Load(), PinnedLiveBytes: c.pinnedLive.Load(),
		Registrations: c.registrations.Load(), Unregistrations: c.unregistrations.Load(), RegisteredLiveBytes: c.registeredLive.Load(),
		GraphsCreated: c.graphsCreated.Load(), GraphsDestroyed: c.graphsDestroyed.Load(),
		GraphExecsCreated: c.execsCreated.Load(), GraphExecsDestroyed: c.execsDestroyed.Load(),
		StreamsCreated: c.streamsCreated.Load(), StreamsDestroyed: c.streamsDestroyed.Load(),
		EventsCreated: c.eventsCreated.Load(), EventsDestroyed: c.eventsDestroyed.Load(),
		ModulesLoaded: c.modulesLoaded.Load(), ModulesUnloaded: c.modulesUnloaded.Load(),
		BLASHandlesCreated: c.blasCreated.Load(), BLASHandlesDestroyed: c.blasDestroyed.Load(),
	}
}
