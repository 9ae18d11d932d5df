package sim

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cudaep/cudaep/cudadrv"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultName        = "cudaep simulated device"
	DefaultTotalMemory = 16 << 30
	DefaultSMCount     = 132
	// DriverVersion is what DriverVersion reports: CUDA 13.0.
	DriverVersion = 13000
)

// Options configure a simulated Device. The zero value is one device with the defaults above,
// compute capability 9.0 and no timing model.
type Options struct {
	// Devices is the number of simulated GPUs (default 1).
	Devices int
	// Name is what DeviceName reports for every ordinal (default DefaultName).
	Name string
	// ComputeMajor and ComputeMinor are the compute capability (default 9.0, used when both
	// are zero).
	ComputeMajor, ComputeMinor int
	// SMCount is the multiprocessor count (default DefaultSMCount).
	SMCount int
	// TotalMemory is each GPU's memory in bytes (default DefaultTotalMemory). An allocation
	// that would take the live total past it fails with CUDA_ERROR_OUT_OF_MEMORY.
	TotalMemory uint64
	// CopyBandwidth, in bytes per second, makes every copy a stream worker executes take
	// size/CopyBandwidth of wall time (0: copies are instantaneous). Synchronous copies run on
	// the legacy stream's worker, so they are modelled too.
	CopyBandwidth float64
	// KernelDuration is added to every kernel launch and GEMM a stream worker executes
	// (0: none).
	KernelDuration time.Duration
	// PeerAccess says whether device ordinal can access the memory of device peer directly:
	// DeviceCanAccessPeer answers it, and CtxEnablePeerAccess refuses a pair it denies with
	// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED. It is called with two distinct valid ordinals, under
	// the device's lock (it must not call back into the Device). nil: every pair can.
	PeerAccess func(device, peer int) bool
	// Kernels are the Go bodies of PTX entry points, by entry name: a module's entry runs the
	// body of its name (ep/kernels.SimKernels returns the library's). New copies the map. An
	// entry with no body here falls back to RegisterKernel's process-wide registrations; with
	// neither, ModuleGetFunction fails with CUDA_ERROR_NOT_FOUND naming the entry, so a
	// kernel the simulator cannot run is never launched.
	Kernels map[string]cudadrv.KernelBody
}

// Device is a simulated CUDA driver with one or more GPUs. It implements cudadrv.Backend;
// create it with New and stop its worker goroutines with Close.
//
// All methods are safe for concurrent use. Like the driver, calls that need a context use the
// one made current on the calling OS thread by CtxSetCurrent, so callers lock their goroutine
// to its thread (runtime.LockOSThread) around such work.
type Device struct {
	opts Options

	mu   sync.Mutex
	cond *sync.Cond // on mu; broadcast whenever stream work completes or waiters must recheck

	initialized bool
	closed      bool
	nextHandle  uintptr
	gpus        []*gpu
	contexts    map[cudadrv.RawContext]*context
	current     map[int]*context // OS thread id → current context
	streams     map[cudadrv.RawStream]*stream
	events      map[cudadrv.RawEvent]*event
	modules     map[cudadrv.RawModule]*module
	functions   map[cudadrv.RawFunction]*function
	graphs      map[cudadrv.RawGraph]*graph
	execs       map[cudadrv.RawGraphExec]*graphExec
	blas        map[cudadrv.RawBLAS]*blasHandle
	captures    map[*capture]struct{} // captures begun and not yet ended

	mem   memory
	fault faults
	calls map[string]uint64 // entry point → calls that reached it (Calls); every key present from New

	workers sync.WaitGroup

	// sleepHook, set only by tests (export_test.go) before any work is queued, replaces
	// time.Sleep for modelled time so that tests observe and order it without reading clocks.
	sleepHook func(time.Duration)
}

var _ cudadrv.Backend = (*Device)(nil)

// gpu is one simulated device ordinal and its primary context.
type gpu struct {
	ordinal int
	refs    int      // primary context retain count
	ctx     *context // nil while the primary context is not retained
	used    uint64   // bytes of live device allocations (rounded to the allocation granule)
}

// New returns a simulated driver configured by opts. Call Init before anything else, as with
// the real driver, and Close when done.
func New(opts Options) *Device {
	if opts.Devices <= 0 {
		opts.Devices = 1
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.ComputeMajor == 0 && opts.ComputeMinor == 0 {
		opts.ComputeMajor = 9
	}
	if opts.SMCount <= 0 {
		opts.SMCount = DefaultSMCount
	}
	if opts.TotalMemory == 0 {
		opts.TotalMemory = DefaultTotalMemory
	}
	opts.Kernels = maps.Clone(opts.Kernels) // the caller may change its map afterwards
	d := &Device{
		opts:       opts,
		nextHandle: 0x1000,
		contexts:   map[cudadrv.RawContext]*context{},
		current:    map[int]*context{},
		streams:    map[cudadrv.RawStream]*stream{},
		events:     map[cudadrv.RawEvent]*event{},
		modules:    map[cudadrv.RawModule]*module{},
		functions:  map[cudadrv.RawFunction]*function{},
		graphs:     map[cudadrv.RawGraph]*graph{},
		execs:      map[cudadrv.RawGraphExec]*graphExec{},
		blas:       map[cudadrv.RawBLAS]*blasHandle{},
		captures:   map[*capture]struct{}{},
	}
	d.cond = sync.NewCond(&d.mu)
	d.mem.init()
	d.calls = make(map[string]uint64, len(opNames))
	for op := range opNames {
		d.calls[op] = 0 // counting a present key never allocates
	}
	for i := 0; i < opts.Devices; i++ {
		d.gpus = append(d.gpus, &gpu{ordinal: i})
	}
	return d
}

// Name returns "sim".
func (d *Device) Name() string { return "sim" }

// Close stops every stream worker and waits for them to exit; work still queued is abandoned.
// Afterwards every method fails with CUDA_ERROR_DEINITIALIZED. Close is idempotent and safe to
// call concurrently with other methods; it returns nil.
func (d *Device) Close() error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		for _, s := range d.streams {
			s.wake.Signal()
		}
		for _, c := range d.contexts {
			c.legacy.wake.Signal()
		}
		d.cond.Broadcast()
	}
	d.mu.Unlock()
	d.workers.Wait()
	return nil
}

// handle returns a fresh, never-zero handle number.
func (d *Device) handle() uintptr {
	d.nextHandle++
	return d.nextHandle
}

// fail returns a driver error for op with a formatted detail.
func fail(op string, r cudadrv.Result, format string, args ...any) error {
	return &cudadrv.Error{Op: op, Result: r, Detail: fmt.Sprintf(format, args...)}
}

// begin is the prologue of every driver entry point that needs no context: it refuses calls
// after Close or before Init and applies an injected fault. d.mu is held.
func (d *Device) begin(op string) error {
	d.calls[op]++
	if d.closed {
		return fail(op, cudadrv.ErrorDeinitialized, "the simulated device is closed")
	}
	if err := d.fault.take(op, d); err != nil {
		return err
	}
	if !d.initialized {
		return fail(op, cudadrv.ErrorNotInitialized, "cuInit has not been called")
	}
	return nil
}

// enter is the prologue of every entry point that needs the calling thread's current context:
// begin, then the context (CUDA_ERROR_INVALID_CONTEXT when none is bound or it was destroyed),
// then the context's sticky error. d.mu is held.
func (d *Device) enter(op string) (*context, error) {
	c, err := d.enterAny(op)
	if err != nil {
		return nil, err
	}
	if c.sticky != nil {
		return nil, c.stickyError(op)
	}
	return c, nil
}

// enterAny is enter without the sticky-error check, for the destroy calls, which still release
// their object in a faulted context (and then report the fault). d.mu is held.
func (d *Device) enterAny(op string) (*context, error) {
	if err := d.begin(op); err != nil {
		return nil, err
	}
	c := d.current[unix.Gettid()]
	if c == nil {
		return nil, fail(op, cudadrv.ErrorInvalidContext, "no context is current on this OS thread (call CtxSetCurrent on a locked thread)")
	}
	if c.destroyed {
		return nil, fail(op, cudadrv.ErrorInvalidContext, "the context current on this OS thread was destroyed")
	}
	return c, nil
}

// currentContext returns the calling thread's live current context, or nil. d.mu is held.
func (d *Device) currentContext() *context {
	if c := d.current[unix.Gettid()]; c != nil && !c.destroyed {
		return c
	}
	return nil
}

// stickyOf returns c's sticky fault as op's error, or nil.
func stickyOf(op string, c *context) error {
	if c.sticky != nil {
		return c.stickyError(op)
	}
	return nil
}

// Init initializes the simulated driver; calling it again is harmless.
func (d *Device) Init() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[OpInit]++
	if d.closed {
		return fail(OpInit, cudadrv.ErrorDeinitialized, "the simulated device is closed")
	}
	if err := d.fault.take(OpInit, d); err != nil {
		return err
	}
	d.initialized = true
	return nil
}

// DriverVersion reports DriverVersion.
func (d *Device) DriverVersion() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDriverVersion); err != nil {
		return 0, err
	}
	return DriverVersion, nil
}

// DeviceCount reports Options.Devices.
func (d *Device) DeviceCount() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDeviceCount); err != nil {
		return 0, err
	}
	return len(d.gpus), nil
}

func (d *Device) gpu(op string, ordinal int) (*gpu, error) {
	if ordinal < 0 || ordinal >= len(d.gpus) {
		return nil, fail(op, cudadrv.ErrorInvalidDevice, "device ordinal %d is not in [0, %d)", ordinal, len(d.gpus))
	}
	return d.gpus[ordinal], nil
}

// DeviceName reports Options.Name.
func (d *Device) DeviceName(ordinal int) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDeviceName); err != nil {
		return "", err
	}
	if _, err := d.gpu(OpDeviceName, ordinal); err != nil {
		return "", err
	}
	return d.opts.Name, nil
}

// Device attributes the simulator answers beyond the ones cudadrv names, with the driver's
// numbers.
const (
	attrMaxThreadsPerBlock           cudadrv.DeviceAttribute = 1
	attrMaxBlockDimX                 cudadrv.DeviceAttribute = 2
	attrMaxBlockDimY                 cudadrv.DeviceAttribute = 3
	attrMaxBlockDimZ                 cudadrv.DeviceAttribute = 4
	attrMaxGridDimX                  cudadrv.DeviceAttribute = 5
	attrMaxGridDimY                  cudadrv.DeviceAttribute = 6
	attrMaxGridDimZ                  cudadrv.DeviceAttribute = 7
	attrMaxSharedMemoryPerBlock      cudadrv.DeviceAttribute = 8
	attrWarpSize                     cudadrv.DeviceAttribute = 10
	attrUnifiedAddressing            cudadrv.DeviceAttribute = 41
	attrMaxSharedMemoryPerBlockOptin cudadrv.DeviceAttribute = 97
)

// Launch limits, as on compute capability 9.0.
const (
	maxThreadsPerBlock = 1024
	maxSharedMem       = 48 << 10 // without cuFuncSetAttribute, which the Backend does not expose
	maxGridX           = 1<<31 - 1
	maxGridYZ          = 65535
)

// DeviceAttribute answers the attributes the project reads plus the launch limits; any other
// attribute is CUDA_ERROR_INVALID_VALUE.
func (d *Device) DeviceAttribute(ordinal int, attr cudadrv.DeviceAttribute) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDeviceAttribute); err != nil {
		return 0, err
	}
	if _, err := d.gpu(OpDeviceAttribute, ordinal); err != nil {
		return 0, err
	}
	switch attr {
	case cudadrv.AttrMultiprocessorCount:
		return d.opts.SMCount, nil
	case cudadrv.AttrComputeCapabilityMajor:
		return d.opts.ComputeMajor, nil
	case cudadrv.AttrComputeCapabilityMinor:
		return d.opts.ComputeMinor, nil
	case attrMaxThreadsPerBlock, attrMaxBlockDimX, attrMaxBlockDimY:
		return maxThreadsPerBlock, nil
	case attrMaxBlockDimZ:
		return 64, nil
	case attrMaxGridDimX:
		return maxGridX, nil
	case attrMaxGridDimY, attrMaxGridDimZ:
		return maxGridYZ, nil
	case attrMaxSharedMemoryPerBlock:
		return maxSharedMem, nil
	case attrWarpSize:
		return 32, nil
	case attrUnifiedAddressing:
		return 1, nil
	case attrMaxSharedMemoryPerBlockOptin:
		return 227 << 10, nil
	}
	return 0, fail(OpDeviceAttribute, cudadrv.ErrorInvalidValue, "the simulator does not model device attribute %d", int32(attr))
}

// DeviceTotalMem reports Options.TotalMemory.
func (d *Device) DeviceTotalMem(ordinal int) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpDeviceTotalMem); err != nil {
		return 0, err
	}
	if _, err := d.gpu(OpDeviceTotalMem, ordinal); err != nil {
		return 0, err
	}
	return d.opts.TotalMemory, nil
}

// CompilePTX always fails: the simulated device has no NVRTC. The error wraps
// cudadrv.ErrUnsupported.
func (d *Device) CompilePTX(source, name string, options []string) ([]byte, error) {
	d.mu.Lock()
	d.calls[OpCompilePTX]++
	closed := d.closed
	ferr := d.fault.take(OpCompilePTX, d)
	d.mu.Unlock()
	if closed {
		return nil, fail(OpCompilePTX, cudadrv.ErrorDeinitialized, "the simulated device is closed")
	}
	if ferr != nil {
		return nil, ferr
	}
	return nil, fmt.Errorf("%w: the sim backend has no NVRTC and cannot compile %q; load PTX whose entry points have Go bodies (sim.Options.Kernels, sim.RegisterKernel), or use backend=cuda", cudadrv.ErrUnsupported, name)
}
