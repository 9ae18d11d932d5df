package ep

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// ErrInvalidLaunch is wrapped by the errors a user kernel returns for a launch it refuses
// before calling the driver: a zero grid or block extent, or arguments whose count or types
// differ from the kernel's declared parameters. Nothing is queued then.
var ErrInvalidLaunch = errors.New("ep: invalid user kernel launch")

// Dim3 is a grid or block extent of a user kernel launch.
type Dim3 = cudadrv.Dim3

// ParamType is the type of one parameter of a user kernel, as its PTX declares it.
type ParamType struct {
	// Name is the PTX type, such as "u64", "f32" or "s32".
	Name string
	// Size is the parameter's size in bytes: 1, 2, 4 or 8.
	Size int
	// Float reports a floating-point parameter (f32, f64).
	Float bool
}

// String returns the PTX type with its dot, e.g. ".u64".
func (t ParamType) String() string { return "." + t.Name }

// ArgKind is the type of a KernelArg.
type ArgKind uint8

// The argument kinds.
const (
	ArgKindPtr ArgKind = iota + 1 // a device address
	ArgKindI32
	ArgKindU32
	ArgKindI64
	ArgKindU64
	ArgKindF32
	ArgKindF64
)

// String names the kind as its constructor does ("ptr", "i32", …).
func (k ArgKind) String() string {
	switch k {
	case ArgKindPtr:
		return "ptr"
	case ArgKindI32:
		return "i32"
	case ArgKindU32:
		return "u32"
	case ArgKindI64:
		return "i64"
	case ArgKindU64:
		return "u64"
	case ArgKindF32:
		return "f32"
	case ArgKindF64:
		return "f64"
	}
	return "ArgKind(" + strconv.Itoa(int(k)) + ")"
}

// size is the argument's size in bytes.
func (k ArgKind) size() int {
	switch k {
	case ArgKindI32, ArgKindU32, ArgKindF32:
		return 4
	case ArgKindPtr, ArgKindI64, ArgKindU64, ArgKindF64:
		return 8
	}
	return 0
}

// KernelArg is one typed argument of a user kernel launch. Make one with ArgPtr, ArgBuffer,
// ArgI32, ArgU32, ArgI64, ArgU64, ArgF32 or ArgF64; the zero KernelArg has no kind and is
// refused by every launch.
type KernelArg struct {
	kind ArgKind
	bits uint64
	buf  *Buffer // ArgBuffer: checked at launch time (released, offset in range)
}

// Kind returns the argument's type.
func (a KernelArg) Kind() ArgKind { return a.kind }

// ArgPtr passes a raw device address. The kernel may read or write anything it points at:
// prefer ArgBuffer for memory the provider allocated, which is checked at launch.
func ArgPtr(p DevicePtr) KernelArg { return KernelArg{kind: ArgKindPtr, bits: uint64(p)} }

// ArgBuffer passes the device address off bytes into b. The launch refuses a released
// buffer or an offset past its end.
func ArgBuffer(b *Buffer, off uint64) KernelArg {
	return KernelArg{kind: ArgKindPtr, bits: off, buf: b}
}

// ArgI32 passes a 32-bit signed integer.
func ArgI32(v int32) KernelArg { return KernelArg{kind: ArgKindI32, bits: uint64(uint32(v))} }

// ArgU32 passes a 32-bit unsigned integer.
func ArgU32(v uint32) KernelArg { return KernelArg{kind: ArgKindU32, bits: uint64(v)} }

// ArgI64 passes a 64-bit signed integer.
func ArgI64(v int64) KernelArg { return KernelArg{kind: ArgKindI64, bits: uint64(v)} }

// ArgU64 passes a 64-bit unsigned integer.
func ArgU64(v uint64) KernelArg { return KernelArg{kind: ArgKindU64, bits: v} }

// ArgF32 passes a float.
func ArgF32(v float32) KernelArg {
	return KernelArg{kind: ArgKindF32, bits: uint64(math.Float32bits(v))}
}

// ArgF64 passes a double.
func ArgF64(v float64) KernelArg { return KernelArg{kind: ArgKindF64, bits: math.Float64bits(v)} }

// accepts reports whether a value of kind k may be passed for a parameter of type t: the
// sizes must match (a 4-byte integer also fills a 1- or 2-byte integer parameter, whose
// low bytes the kernel reads), floats go to float or untyped (.b) parameters only, and
// integers and pointers to integer or untyped ones.
func (t ParamType) accepts(k ArgKind) bool {
	untyped := strings.HasPrefix(t.Name, "b")
	switch k {
	case ArgKindF32, ArgKindF64:
		return (t.Float || untyped) && t.Size == k.size()
	case ArgKindI32, ArgKindU32:
		return !t.Float && t.Size <= 4
	case ArgKindPtr, ArgKindI64, ArgKindU64:
		return !t.Float && t.Size == 8
	}
	return false
}

// ErrUnloaded is returned by a second Unload and by launches and lookups of an unloaded
// module. It is cudadrv.ErrDestroyed, so errors.Is matches either.
var ErrUnloaded = cudadrv.ErrDestroyed

// UserModule is device code a host brought to the provider: PTX text it loaded, or CUDA C it
// had compiled with NVRTC. Take kernels from it with Function. It is safe for concurrent use.
// Unload it before closing the provider; its functions fail afterwards.
//
// # The simulated device
//
// On backend=sim, NVRTC does not exist (CompileUserModule fails with an error wrapping
// cudadrv.ErrUnsupported), and a PTX entry point runs only if the simulator has a Go body
// registered under its name (sim.RegisterKernel): the library's built-in entry points
// (cudaep_*) have one; any other entry fails at Function with the driver's
// CUDA_ERROR_NOT_FOUND naming the missing body.
type UserModule struct {
	p       *Provider
	mod     *cudadrv.Module
	ptx     []byte
	entries map[string][]ParamType // nil slice: the entry has a parameter typed args cannot pass
	bad     map[string]string      // why such an entry cannot be launched

	// mu is held shared by launches and function lookups, exclusively by Unload, so a module
	// is never unloaded under a launch that is being queued.
	mu       sync.RWMutex
	unloaded bool
	recorded atomic.Bool // a launch was recorded into a graph
}

// CompileUserModule compiles CUDA C source with NVRTC (the program is named name in
// messages; options are NVRTC's, e.g. "--use_fast_math") and loads the PTX. Entry points
// must be declared extern "C" to be found by their source names.
//
// # Errors
//
// On the simulated device: an error wrapping cudadrv.ErrUnsupported that says so. A compile
// error is a *cudadrv.CompileError whose message carries the compiler's log. A module load
// failure is the driver's error.
func (p *Provider) CompileUserModule(source, name string, options []string) (*UserModule, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.BackendName() == BackendSim {
		return nil, fmt.Errorf("ep: compile %s: %w: the simulated device has no NVRTC; load PTX instead "+
			"(on sim its entry points need simulator bodies) or use backend=cuda", name, cudadrv.ErrUnsupported)
	}
	ptx, err := p.drv.CompilePTX(source, name, options)
	if err != nil {
		return nil, fmt.Errorf("ep: compile %s: %w", name, err)
	}
	return p.LoadUserModule(ptx)
}

// LoadUserModule loads PTX text (NUL-terminated or not) into the provider's context. The
// PTX's .entry declarations are read for their parameter types, which every launch is
// checked against; cubin and fatbin images are refused, since they cannot be checked.
//
// # Errors
//
// Text that is not PTX (no .version, not UTF-8) or declares no entry point: an error
// wrapping ErrInvalidLaunch. The driver's error when the module does not load.
func (p *Provider) LoadUserModule(ptx []byte) (*UserModule, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	text := bytes.TrimRight(ptx, "\x00")
	entries, bad, err := userEntries(text)
	if err != nil {
		return nil, err
	}
	e, err := p.enter("load a user module", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	image := append(append(make([]byte, 0, len(text)+1), text...), 0) // a copy: ptx is the host's
	mod, err := p.ctx.LoadModule(image)
	if err != nil {
		return nil, fmt.Errorf("ep: load user module: %w", err)
	}
	m := &UserModule{p: p, mod: mod, ptx: image[:len(text)], entries: entries, bad: bad}
	p.owned.add(m)
	return m, nil
}

// PTX returns the module's PTX text (a copy), e.g. what NVRTC produced.
func (m *UserModule) PTX() []byte { return append([]byte(nil), m.ptx...) }

// Entries returns the names of the module's entry points, sorted.
func (m *UserModule) Entries() []string {
	names := make([]string, 0, len(m.entries))
	for n := range m.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Function returns the entry point name of the module, ready to launch.
//
// # Errors
//
// A name the PTX does not declare, or an entry with a parameter typed arguments cannot pass
// (a by-value struct): an error wrapping ErrInvalidLaunch (cudadrv.ErrUnsupported for the
// latter). An unloaded module: cudadrv.ErrDestroyed. The driver's error otherwise (on sim:
// CUDA_ERROR_NOT_FOUND for an entry with no simulator body).
func (m *UserModule) Function(name string) (*UserFunction, error) {
	params, ok := m.entries[name]
	if !ok {
		return nil, fmt.Errorf("%w: the module has no entry %q (entries: %s)", ErrInvalidLaunch, name, strings.Join(m.Entries(), ", "))
	}
	if why := m.bad[name]; why != "" {
		return nil, fmt.Errorf("ep: user kernel %q: %s: %w", name, why, cudadrv.ErrUnsupported)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.unloaded {
		return nil, fmt.Errorf("ep: user module: %w", cudadrv.ErrDestroyed)
	}
	e, err := m.p.enter("look up a user kernel", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	f, err := m.mod.Function(name)
	if err != nil {
		return nil, fmt.Errorf("ep: user kernel %q: %w", name, err)
	}
	return &UserFunction{m: m, f: f, params: params, args: new(cudadrv.KernelArgs)}, nil
}

// Unload gives the module up: its functions fail from this call on. The code itself is
// unloaded once nothing can run it: a graph never outlives the code it launches, so a module
// one of whose launches a graph recorded (see Recorded) stays loaded until the provider is
// closed, after its graphs are destroyed; otherwise the unload waits for the work queued on the
// compute stream (a queued launch reads the code) and, during a capture (on the provider, or
// of the calling OS thread for another provider), for the capture to end.
//
// # Errors
//
// A second Unload: cudadrv.ErrDestroyed. The driver's error from the wait or the unload when
// they run in this call.
func (m *UserModule) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unloaded {
		return cudadrv.ErrDestroyed
	}
	m.unloaded = true
	if m.recorded.Load() {
		return nil // the provider's Close unloads it after the graphs
	}
	return m.p.releaseLater("unload a user module", func() error {
		m.p.owned.remove(m)
		return m.unload()
	})
}

// unload waits for the compute stream and unloads the code. A failed wait (a device fault) must
// not keep the module loaded forever: it unloads anyway and reports the fault.
func (m *UserModule) unload() error {
	return errors.Join(m.p.compute.Synchronize(), m.mod.Unload())
}

// Recorded reports whether a launch of one of the module's functions was recorded into a
// graph (launched while the compute stream was capturing). Such a module must outlive the
// graphs that recorded it.
func (m *UserModule) Recorded() bool { return m.recorded.Load() }

// UserFunction is one entry point of a UserModule, with its declared parameter types. Its
// methods are safe for concurrent use (launches serialize on the function).
type UserFunction struct {
	m      *UserModule
	f      *cudadrv.Function
	params []ParamType

	mu   sync.Mutex
	args *cudadrv.KernelArgs // reused, so a launch allocates nothing
}

// Name is the entry point's name.
func (f *UserFunction) Name() string { return f.f.Name() }

// Params returns the declared parameter types (a copy).
func (f *UserFunction) Params() []ParamType { return append([]ParamType(nil), f.params...) }

// Launch queues the kernel on the provider's compute stream over grid×block threads with
// sharedMem bytes of dynamic shared memory, passing args in declaration order. It does not
// wait. Inside a capture on this thread the launch is recorded instead (a user launch is pure
// stream work, so it may be captured; it is not part of the capturability audit); during a
// capture on another thread it is refused with ErrCaptureLive.
//
// # Errors
//
// A zero grid or block extent, an argument count that differs from the declaration, an
// argument whose kind does not fit its parameter, or an ArgBuffer that is released or out
// of range: an error wrapping ErrInvalidLaunch (or ErrReleased), nothing queued. An unloaded
// module: cudadrv.ErrDestroyed. The driver's error for a launch it refuses (limits).
func (f *UserFunction) Launch(grid, block Dim3, sharedMem uint32, args ...KernelArg) error {
	name := f.f.Name()
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("%w: %s: zero grid or block extent (grid %v, block %v)", ErrInvalidLaunch, name, grid, block)
	}
	if len(args) != len(f.params) {
		return fmt.Errorf("%w: %s declares %d parameters, launched with %d arguments", ErrInvalidLaunch, name, len(f.params), len(args))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.args.Reset()
	for i, a := range args {
		t := f.params[i]
		if !t.accepts(a.kind) {
			return fmt.Errorf("%w: %s: argument %d is %v, parameter %d is %v", ErrInvalidLaunch, name, i, a.kind, i, t)
		}
		bits := a.bits
		if a.buf != nil {
			if err := a.buf.check(a.bits, 0); err != nil {
				return fmt.Errorf("%w: %s: argument %d: %w", ErrInvalidLaunch, name, i, err)
			}
			bits = uint64(a.buf.ptr) + a.bits
		}
		f.args.U64(bits)
	}
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	if f.m.unloaded {
		return fmt.Errorf("ep: user kernel %s: %w", name, cudadrv.ErrDestroyed)
	}
	e, err := f.m.p.enter("launch a user kernel", accessRecord)
	if err != nil {
		return err
	}
	defer e.leave()
	if err := f.m.p.compute.Launch(f.f, grid, block, sharedMem, f.args); err != nil {
		return err
	}
	if f.m.p.CaptureLive() {
		f.m.recorded.Store(true) // the launch was recorded: keep the module for the graphs
	}
	return nil
}
