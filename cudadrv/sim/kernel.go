package sim

import (
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// KernelFunc is the Go body of a simulated kernel (cudadrv.KernelBody, which it is). It is
// called once per launch, on the launching stream's worker goroutine, and covers the whole grid
// itself (l.Grid and l.Block give the extents). It reads its arguments and device memory
// through l, which is valid only during the call. Returning an error faults the launch's
// context with a sticky error: an *AccessError from one of l's views gives
// CUDA_ERROR_ILLEGAL_ADDRESS (or CUDA_ERROR_MISALIGNED_ADDRESS), an error carrying a sticky
// cudadrv.Result gives that result, anything else CUDA_ERROR_LAUNCH_FAILED. A panic is
// recovered and becomes CUDA_ERROR_LAUNCH_FAILED.
type KernelFunc = cudadrv.KernelBody

var kernels = struct {
	sync.RWMutex
	m map[string]KernelFunc
}{m: map[string]KernelFunc{}}

// RegisterKernel registers fn as the body of the PTX entry point name, process-wide, for
// every Device whose Options.Kernels has no body of that name. Registering a name again
// replaces it for functions looked up afterwards (ModuleGetFunction binds the body at lookup);
// a nil fn removes the registration. Safe for concurrent use.
//
// # Notes
//
// It is for tests and tools that bring a kernel of their own. A library hands its kernels to
// the devices it opens in Options.Kernels instead, so that nothing depends on which packages'
// init functions ran.
func RegisterKernel(name string, fn KernelFunc) {
	kernels.Lock()
	defer kernels.Unlock()
	if fn == nil {
		delete(kernels.m, name)
		return
	}
	kernels.m[name] = fn
}

// lookupKernel returns the body of the entry point name: the device's own (Options.Kernels),
// else the process-wide registration, else nil.
func (d *Device) lookupKernel(name string) KernelFunc {
	if fn := d.opts.Kernels[name]; fn != nil {
		return fn
	}
	kernels.RLock()
	defer kernels.RUnlock()
	return kernels.m[name]
}

// module is a loaded PTX image: its entry points and the parameter count of each.
type module struct {
	handle    cudadrv.RawModule
	ctx       *context
	entries   map[string]int
	functions map[string]*function
	unloaded  bool
}

// function is a CUfunction: a module's entry bound to its registered Go body.
type function struct {
	handle cudadrv.RawFunction
	module *module
	name   string
	params int
	fn     KernelFunc
}

// readModule reads the entry points of a PTX image and their parameter counts with the PTX
// reader (cudadrv.ParsePTX), and refuses what the driver refuses at load: anything that is not
// PTX text with CUDA_ERROR_INVALID_IMAGE, PTX without a .target or with an entry declared twice
// with CUDA_ERROR_INVALID_PTX. The reason is "" on success.
func readModule(image []byte) (map[string]int, cudadrv.Result, string) {
	ptx, err := cudadrv.ParsePTX(image)
	if err != nil {
		var pe *cudadrv.PTXError
		if errors.As(err, &pe) {
			return nil, cudadrv.ErrorInvalidImage, "the image is " + pe.Reason + "; the simulator loads PTX text only"
		}
		return nil, cudadrv.ErrorInvalidImage, err.Error()
	}
	if ptx.Target == "" {
		return nil, cudadrv.ErrorInvalidPTX, "PTX without a .target directive"
	}
	entries := make(map[string]int, len(ptx.Entries))
	for _, e := range ptx.Entries {
		if _, dup := entries[e.Name]; dup {
			return nil, cudadrv.ErrorInvalidPTX, "entry " + e.Name + " is declared twice"
		}
		entries[e.Name] = len(e.Params)
	}
	return entries, cudadrv.Success, ""
}

// ModuleLoadData loads a PTX image (text, optionally NUL-terminated), finding its entry
// points from their `.entry NAME(...)` declarations.
//
// # Errors
//
// CUDA_ERROR_INVALID_IMAGE for anything that is not PTX text (including cubins);
// CUDA_ERROR_INVALID_PTX for PTX without .target or with a duplicate entry;
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED where a live capture prohibits it.
func (d *Device) ModuleLoadData(image []byte) (cudadrv.RawModule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpModuleLoadData)
	if err != nil {
		return 0, err
	}
	if err := d.checkUnsafe(OpModuleLoadData); err != nil {
		return 0, err
	}
	entries, r, why := readModule(image)
	if r != cudadrv.Success {
		return 0, fail(OpModuleLoadData, r, "%s", why)
	}
	m := &module{handle: cudadrv.RawModule(d.handle()), ctx: c, entries: entries, functions: map[string]*function{}}
	d.modules[m.handle] = m
	return m.handle, nil
}

// unloadModule forgets m and its functions. d.mu is held.
func (d *Device) unloadModule(h cudadrv.RawModule, m *module) {
	m.unloaded = true
	for _, f := range m.functions {
		delete(d.functions, f.handle)
	}
	delete(d.modules, h)
}

// ModuleUnload unloads a module. Its functions become invalid handles, and a graph node or
// queued launch of one faults with CUDA_ERROR_LAUNCH_FAILED when it runs.
func (d *Device) ModuleUnload(h cudadrv.RawModule) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpModuleUnload)
	if err != nil {
		return err
	}
	m := d.modules[h]
	if m == nil || m.ctx != c {
		return fail(OpModuleUnload, cudadrv.ErrorInvalidHandle, "module %#x does not exist in this context", uintptr(h))
	}
	if err := d.checkUnsafe(OpModuleUnload); err != nil {
		return err
	}
	d.unloadModule(h, m)
	return stickyOf(OpModuleUnload, c)
}

// ModuleGetFunction returns the entry point name of module m, bound to the Go body of that
// name (Options.Kernels, else RegisterKernel). The same name gives the same handle.
//
// # Errors
//
// CUDA_ERROR_NOT_FOUND when the PTX declares no such entry, or declares it but the simulator
// has no body of that name; the detail says which.
func (d *Device) ModuleGetFunction(h cudadrv.RawModule, name string) (cudadrv.RawFunction, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpModuleGetFunction)
	if err != nil {
		return 0, err
	}
	m := d.modules[h]
	if m == nil || m.ctx != c {
		return 0, fail(OpModuleGetFunction, cudadrv.ErrorInvalidHandle, "module %#x does not exist in this context", uintptr(h))
	}
	if f := m.functions[name]; f != nil {
		return f.handle, nil
	}
	params, ok := m.entries[name]
	if !ok {
		names := make([]string, 0, len(m.entries))
		for n := range m.entries {
			names = append(names, n)
		}
		sort.Strings(names)
		return 0, fail(OpModuleGetFunction, cudadrv.ErrorNotFound, "the module has no entry %q (entries: %s)", name, strings.Join(names, ", "))
	}
	fn := d.lookupKernel(name)
	if fn == nil {
		return 0, fail(OpModuleGetFunction, cudadrv.ErrorNotFound, "entry %q is in the PTX but no sim kernel is registered under that name (pass its Go body in sim.Options.Kernels, or sim.RegisterKernel it)", name)
	}
	f := &function{handle: cudadrv.RawFunction(d.handle()), module: m, name: name, params: params, fn: fn}
	m.functions[name] = f
	d.functions[f.handle] = f
	return f.handle, nil
}

// LaunchKernel queues a launch of f on stream s with a copy of args (nil: no arguments), or
// records it as a kernel node when s captures.
//
// # Errors
//
// CUDA_ERROR_INVALID_HANDLE for an unknown function; CUDA_ERROR_INVALID_VALUE for a zero or
// over-limit grid or block, more than 48 KiB of dynamic shared memory, an overflowed argument
// list, or an argument count that differs from the PTX declaration.
func (d *Device) LaunchKernel(fh cudadrv.RawFunction, grid, block cudadrv.Dim3, sharedMem uint32, sh cudadrv.RawStream, args *cudadrv.KernelArgs) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpLaunchKernel)
	if err != nil {
		return err
	}
	f := d.functions[fh]
	if f == nil || f.module.ctx != c {
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidHandle, "function %#x does not exist in this context (module unloaded?)", uintptr(fh))
	}
	if err := checkLaunchDims(f.name, grid, block, sharedMem); err != nil {
		return err
	}
	n := 0
	if args != nil {
		if args.Overflowed() {
			return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q: more than %d arguments", f.name, cudadrv.MaxKernelArgs)
		}
		n = args.Len()
	}
	if n != f.params {
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q declares %d parameters, launched with %d arguments", f.name, f.params, n)
	}
	o := op{kind: opKernel, fn: f, grid: grid, block: block, shared: sharedMem, nargs: n}
	for i := 0; i < n; i++ {
		o.args[i] = args.Word(i)
	}
	return d.asyncOp(OpLaunchKernel, c, sh, &o)
}

// checkLaunchDims validates a launch configuration against compute capability 9.0's limits.
func checkLaunchDims(name string, grid, block cudadrv.Dim3, shared uint32) error {
	switch {
	case grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0:
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q: zero grid or block extent (grid %v, block %v)", name, grid, block)
	case grid.X > maxGridX || grid.Y > maxGridYZ || grid.Z > maxGridYZ:
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q: grid %v exceeds the device limits", name, grid)
	case block.X > maxThreadsPerBlock || block.Y > maxThreadsPerBlock || block.Z > 64 ||
		uint64(block.X)*uint64(block.Y)*uint64(block.Z) > maxThreadsPerBlock:
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q: block %v exceeds %d threads or the per-dimension limits", name, block, maxThreadsPerBlock)
	case shared > maxSharedMem:
		return fail(OpLaunchKernel, cudadrv.ErrorInvalidValue, "kernel %q: %d bytes of dynamic shared memory exceed %d", name, shared, maxSharedMem)
	}
	return nil
}
