package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// newModule stores a loaded module under a new handle holding c's provider lease.
func newModule(c child, m *ep.UserModule, out *C.CudaEpModule) *C.CudaEpStatus {
	h, err := insertChild(moduleTable, &moduleObject{child: c, m: m}, (*moduleObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*out = C.CudaEpModule(h)
	return nil
}

// CudaEpCompileModule compiles CUDA C with NVRTC and loads it (see cudaep.h).
//
//export CudaEpCompileModule
func CudaEpCompileModule(provider C.CudaEpProvider, source, programName *C.cudaep_cchar, options *C.cudaep_cstring, numOptions C.size_t, outModule *C.CudaEpModule) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outModule == nil {
		return statusOf(argError("out_module is NULL"))
	}
	src, err := goString(source, "source")
	if err != nil {
		return statusOf(err)
	}
	name, err := goString(programName, "program_name")
	if err != nil {
		return statusOf(err)
	}
	copts, err := cArray((**C.char)(unsafe.Pointer(options)), uint64(numOptions), maxArray, "options")
	if err != nil {
		return statusOf(err)
	}
	opts := make([]string, len(copts))
	for i, o := range copts {
		if opts[i], err = goString((*C.cudaep_cchar)(unsafe.Pointer(o)), fmt.Sprintf("options[%d]", i)); err != nil {
			return statusOf(err)
		}
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	m, err := c.p.CompileUserModule(src, name, opts)
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	return newModule(c, m, outModule)
}

// CudaEpLoadModule loads PTX text (see cudaep.h).
//
//export CudaEpLoadModule
func CudaEpLoadModule(provider C.CudaEpProvider, ptx *C.cudaep_cvoid, ptxSize C.size_t, outModule *C.CudaEpModule) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outModule == nil {
		return statusOf(argError("out_module is NULL"))
	}
	if ptxSize == 0 {
		return statusOf(argError("ptx_size is 0"))
	}
	text, err := hostBytes(unsafe.Pointer(ptx), uint64(ptxSize), "ptx")
	if err != nil {
		return statusOf(err)
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	m, err := c.p.LoadUserModule(text) // copies the text
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	return newModule(c, m, outModule)
}

// CudaEpReleaseModule releases a module handle (see cudaep.h).
//
//export CudaEpReleaseModule
func CudaEpReleaseModule(module C.CudaEpModule) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(moduleTable.Remove(handles.Handle(module)))
}

// CudaEpModuleGetPTX returns a module's PTX (see cudaep.h).
//
//export CudaEpModuleGetPTX
func CudaEpModuleGetPTX(module C.CudaEpModule, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := stringOut{buf, bufSize, outNeeded}
	var s string
	if err := with(moduleTable, handles.Handle(module), func(m *moduleObject) error {
		s = string(m.m.PTX())
		return out.check(s)
	}); err != nil {
		return statusOf(err)
	}
	out.write(s)
	return nil
}

// CudaEpModuleGetFunction returns an entry point (see cudaep.h).
//
//export CudaEpModuleGetFunction
func CudaEpModuleGetFunction(module C.CudaEpModule, name *C.cudaep_cchar, outFunction *C.CudaEpFunction) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outFunction == nil {
		return statusOf(argError("out_function is NULL"))
	}
	entry, err := goString(name, "name")
	if err != nil {
		return statusOf(err)
	}
	lease, err := moduleTable.Acquire(handles.Handle(module))
	if err != nil {
		return statusOf(err)
	}
	mod := lease.Value()
	f, err := mod.m.Function(entry)
	if err != nil {
		_ = lease.Release()
		return statusOf(err)
	}
	fo := &functionObject{mod: mod, module: lease, f: f}
	h, err := insertChild(functionTable, fo, (*functionObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outFunction = C.CudaEpFunction(h)
	return nil
}

// CudaEpReleaseFunction releases a function handle (see cudaep.h).
//
//export CudaEpReleaseFunction
func CudaEpReleaseFunction(function C.CudaEpFunction) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(functionTable.Remove(handles.Handle(function)))
}

// CudaEpLaunchFunction queues a user kernel (see cudaep.h).
//
//export CudaEpLaunchFunction
func CudaEpLaunchFunction(function C.CudaEpFunction, config *C.cudaep_claunch_config, args *C.cudaep_ckernel_arg, numArgs C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if config == nil {
		return statusOf(argError("config is NULL"))
	}
	if config.reserved != 0 {
		return statusOf(argError("config->reserved is %d; it must be 0", uint32(config.reserved)))
	}
	grid := ep.Dim3{X: uint32(config.grid_x), Y: uint32(config.grid_y), Z: uint32(config.grid_z)}
	block := ep.Dim3{X: uint32(config.block_x), Y: uint32(config.block_y), Z: uint32(config.block_z)}
	shared := uint32(config.shared_mem_bytes)
	cargs, err := cArray((*C.CudaEpKernelArg)(unsafe.Pointer(args)), uint64(numArgs), maxKernelArgs, "args")
	if err != nil {
		return statusOf(err)
	}
	return statusOf(with(functionTable, handles.Handle(function), func(f *functionObject) error {
		var holds []*memoryHold
		defer func() {
			for _, h := range holds {
				h.release()
			}
		}()
		kargs := make([]ep.KernelArg, len(cargs))
		for i := range cargs {
			ca := &cargs[i]
			what := fmt.Sprintf("args[%d]", i)
			if ca.reserved != 0 {
				return argError("%s.reserved is %d; it must be 0", what, uint32(ca.reserved))
			}
			word := *(*uint64)(unsafe.Pointer(&ca.value))
			switch ca._type {
			case C.CUDAEP_ARG_MEMORY:
				m, err := acquireMemory(uint64(ca.memory), what)
				if err != nil {
					return err
				}
				holds = append(holds, m)
				if m.p != f.mod.p {
					return argError("%s: its memory belongs to another provider", what)
				}
				if m.buf != nil {
					if err := checkRange(word, 0, m.size, what+" memory"); err != nil {
						return err
					}
					kargs[i] = ep.ArgBuffer(m.buf, word)
					continue
				}
				ptr, err := m.at(word, 0, what)
				if err != nil {
					return err
				}
				kargs[i] = ep.ArgPtr(ptr)
			case C.CUDAEP_ARG_DEVICE_PTR:
				kargs[i] = ep.ArgPtr(ep.DevicePtr(word))
			case C.CUDAEP_ARG_I32:
				kargs[i] = ep.ArgI32(int32(uint32(word)))
			case C.CUDAEP_ARG_U32:
				kargs[i] = ep.ArgU32(uint32(word))
			case C.CUDAEP_ARG_I64:
				kargs[i] = ep.ArgI64(int64(word))
			case C.CUDAEP_ARG_U64:
				kargs[i] = ep.ArgU64(word)
			case C.CUDAEP_ARG_F32:
				kargs[i] = ep.ArgF32(*(*float32)(unsafe.Pointer(&ca.value)))
			case C.CUDAEP_ARG_F64:
				kargs[i] = ep.ArgF64(*(*float64)(unsafe.Pointer(&ca.value)))
			default:
				return argError("%s has type %d, not a CudaEpArgType", what, int32(ca._type))
			}
		}
		return f.f.Launch(grid, block, shared, kargs...)
	}))
}
