package ort

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// EnvBackend names the environment variable that chooses, when ONNX Runtime registers the
// library (CreateEpFactories), which devices CudaEp lists: "cuda" (the default: the NVIDIA
// driver's devices, or none), "sim" (the simulated device) or "auto" (cuda when a device is
// usable, else sim). ORT asks for devices before any session option exists, so this is the
// one channel that can ask for the simulator.
const EnvBackend = "CUDAEP_BACKEND"

// backendFromEnv returns the backend CUDAEP_BACKEND's value v names ("" is cuda), or an error
// naming a bad value.
func backendFromEnv(v string) (string, error) {
	switch v {
	case "":
		return ep.BackendCUDA, nil
	case ep.BackendCUDA, ep.BackendSim, ep.BackendAuto:
		return v, nil
	}
	return "", fmt.Errorf("%w: %s=%q: expected cuda (the default), sim or auto", errInvalid, EnvBackend, v)
}

// cudaepOrtNewFactory registers the Go side of a new factory, with the backend CUDAEP_BACKEND
// names; a bad value fails the registration.
//
//export cudaepOrtNewFactory
func cudaepOrtNewFactory(f *C.CudaEpOrtFactory) (st *C.OrtStatus) {
	defer recoverInto(&st)
	// C's environment, not Go's copy of it (taken when the library was loaded): a host may set
	// the variable after loading it, before (re-)registering.
	name := C.CString(EnvBackend)
	defer C.free(unsafe.Pointer(name))
	backend, err := backendFromEnv(goString(C.getenv(name)))
	if err != nil {
		return statusOf(err)
	}
	h, err := factoryTable.Insert(&factory{backend: backend, logger: (*C.OrtLogger)(unsafe.Pointer(f.logger))})
	if err != nil {
		return statusOf(err)
	}
	f.handle = C.uint64_t(h)
	return nil
}

// cudaepOrtReleaseFactory releases the factory's hardware devices and handle.
//
//export cudaepOrtReleaseFactory
func cudaepOrtReleaseFactory(f *C.CudaEpOrtFactory) {
	defer recoverQuietly()
	_ = factoryTable.Remove(handles.Handle(f.handle))
}

// cudaepOrtGetSupportedDevices offers one EP device per device of the factory's backend (see
// listDevices): a CUDA device on the NVIDIA hardware device ORT discovered for it when there is
// one, else on a virtual GPU hardware device the factory makes (ORT's discovery misses GPUs in
// some containers); a simulated device on a virtual hardware device of no GPU vendor, marked
// simulated=1 in its metadata. It never claims the CPU, and says on ORT's log what it listed or
// why it listed nothing.
//
//export cudaepOrtGetSupportedDevices
func cudaepOrtGetSupportedDevices(f *C.CudaEpOrtFactory, devices **C.OrtHardwareDevice, numDevices C.size_t,
	out **C.OrtEpDevice, maxOut C.size_t, numOut *C.size_t) (st *C.OrtStatus) {
	defer recoverInto(&st)
	*numOut = 0
	fac, err := factoryTable.Get(handles.Handle(f.handle))
	if err != nil {
		return statusOf(err)
	}
	l := listDevices(fac.backend, ep.ListDevices)
	fac.log(l.level, l.message)
	infos, backend := l.infos, l.backend
	if backend != "" {
		setDeviceBackend(backend)
	}
	discovered := unsafe.Slice(devices, int(numDevices))
	var nvidia []*C.OrtHardwareDevice
	for _, hw := range discovered {
		if hw != nil && C.cudaep_ort_hw_type(hw) == C.OrtHardwareDeviceType_GPU && C.cudaep_ort_hw_vendor_id(hw) == vendorNVIDIA {
			nvidia = append(nvidia, hw)
		}
	}
	outs := unsafe.Slice(out, int(maxOut))
	for i, info := range infos {
		if int(*numOut) >= len(outs) {
			break
		}
		meta := map[string]string{"backend": backend}
		if backend == ep.BackendSim {
			meta["simulated"] = "1"
		} else {
			meta["cuda_ordinal"] = strconv.Itoa(info.Ordinal)
			meta["name"] = info.Name
			meta["compute_capability"] = fmt.Sprintf("%d.%d", info.Major, info.Minor)
		}
		var hw *C.OrtHardwareDevice
		if backend == ep.BackendCUDA && i < len(nvidia) {
			hw = nvidia[i]
		} else {
			var err error
			if hw, err = fac.virtualDevice(info, backend, meta); err != nil {
				return statusOf(err)
			}
			if hw == nil {
				continue // this ORT cannot make virtual devices (API 23)
			}
		}
		// The backend is the device's (its metadata), not a default a session option may
		// override: ORT would warn that the user's key overwrites it, and a session would run
		// elsewhere than on the device it chose (CreateEp refuses a contradicting one).
		options := map[string]string{"device_id": strconv.Itoa(info.Ordinal)}
		if err := createEpDevice(&f.f, hw, meta, options, &outs[*numOut]); err != nil {
			return statusOf(err)
		}
		// Tensors may live in the device's memory, or in pinned host memory of the device:
		// ORT then allocates them through the factory's allocators and moves them with its
		// data transfer.
		for _, pinned := range []C.int{0, 1} {
			var kept *C.OrtMemoryInfo
			if err := errorOf(C.cudaep_ort_add_allocator_info(outs[*numOut], C.int32_t(info.Ordinal), pinned, &kept), "declare the device's memory"); err != nil {
				return statusOf(err)
			}
			fac.mu.Lock()
			fac.infos = append(fac.infos, kept) // ORT keeps the pointer: it lives as long as the factory
			fac.mu.Unlock()
		}
		*numOut++
	}
	return nil
}

// Hardware vendors of the virtual devices: a CUDA device ORT did not discover is NVIDIA's; the
// simulated device belongs to no GPU vendor, so nothing that selects devices by vendor (ORT's
// GPU policies, a host's own filter) takes it for an NVIDIA GPU.
const (
	vendorNVIDIA    = 0x10DE
	vendorSimulated = 0
	// SimulatedVendor is the vendor name of the simulated device's hardware device.
	SimulatedVendor = "cudaep simulator"
)

// virtualDevice makes a GPU hardware device for a CUDA device ORT did not discover, or for a
// simulated device, kept for the factory's life.
func (f *factory) virtualDevice(info ep.DeviceInfo, backend string, meta map[string]string) (*C.OrtHardwareDevice, error) {
	kv := newKV(meta)
	defer C.cudaep_ort_kv_release(kv)
	vendorID, name := C.uint32_t(vendorNVIDIA), "NVIDIA"
	if backend == ep.BackendSim {
		vendorID, name = vendorSimulated, SimulatedVendor
	}
	vendor := C.CString(name)
	defer C.free(unsafe.Pointer(vendor))
	var hw *C.OrtHardwareDevice
	if err := errorOf(C.cudaep_ort_create_hw_device(vendorID, C.uint32_t(info.Ordinal), vendor, kv, &hw), "create a hardware device"); err != nil {
		return nil, err
	}
	if hw != nil {
		f.mu.Lock()
		f.hws = append(f.hws, hw)
		f.mu.Unlock()
	}
	return hw, nil
}

func createEpDevice(f *C.OrtEpFactory, hw *C.OrtHardwareDevice, meta, options map[string]string, out **C.OrtEpDevice) error {
	m, o := newKV(meta), newKV(options)
	defer C.cudaep_ort_kv_release(m)
	defer C.cudaep_ort_kv_release(o)
	return errorOf(C.cudaep_ort_create_ep_device(f, hw, m, o, out), "create an EP device")
}

// newKV makes ORT key-value pairs (which copy the strings).
func newKV(m map[string]string) *C.OrtKeyValuePairs {
	kv := C.cudaep_ort_kv_new()
	for k, v := range m {
		ck, cv := C.CString(k), C.CString(v)
		C.cudaep_ort_kv_add(kv, ck, cv)
		C.free(unsafe.Pointer(ck))
		C.free(unsafe.Pointer(cv))
	}
	return kv
}

// kvMap copies ORT key-value pairs into a map.
func kvMap(kv *C.OrtKeyValuePairs) map[string]string {
	var keys, values **C.char
	var n C.size_t
	C.cudaep_ort_kv_entries(kv, &keys, &values, &n)
	out := make(map[string]string, int(n))
	if n == 0 {
		return out
	}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(values, int(n))
	for i := range ks {
		out[goString(ks[i])] = goString(vs[i])
	}
	return out
}

// The levels the factory logs at.
const (
	logInfo    C.OrtLoggingLevel = C.ORT_LOGGING_LEVEL_INFO
	logWarning C.OrtLoggingLevel = C.ORT_LOGGING_LEVEL_WARNING
)

// deviceListing is what GetSupportedDevices offers and what it says about it on ORT's log.
type deviceListing struct {
	infos   []ep.DeviceInfo
	backend string // the backend the devices belong to (cuda or sim); "" with no device
	level   C.OrtLoggingLevel
	message string
}

// listDevices decides what a factory of backend lists, with list enumerating a backend's
// devices (ep.ListDevices). cuda lists the driver's devices or, when there is no usable driver
// or no device, nothing, with a WARNING saying what was tried, the device count and how to ask
// for the simulator; sim lists the simulated devices (INFO); auto lists cuda's devices when one
// is usable and otherwise the simulated ones, with a WARNING saying why. It never falls back to
// the simulator unless asked to.
func listDevices(backend string, list func(string) ([]ep.DeviceInfo, string, string, error)) deviceListing {
	howSim := fmt.Sprintf("set %s=sim before registering the library to list the simulated device "+
		"(a pure-Go model of a GPU for development and tests, far slower than one), or %s=auto to "+
		"list it only when no CUDA device is usable", EnvBackend, EnvBackend)
	infos, got, reason, err := list(backend)
	switch {
	case err != nil:
		return deviceListing{level: logWarning, message: fmt.Sprintf(
			"%s lists no device: %s=%s found no usable CUDA device (%v); %s", EPName, EnvBackend, backend, err, howSim)}
	case len(infos) == 0:
		return deviceListing{level: logWarning, message: fmt.Sprintf(
			"%s lists no device: %s=%s, and the %s backend reports 0 devices; %s", EPName, EnvBackend, backend, got, howSim)}
	case got == ep.BackendSim && backend == ep.BackendAuto:
		return deviceListing{infos: infos, backend: got, level: logWarning, message: fmt.Sprintf(
			"%s lists %d simulated device(s), not a GPU: %s=auto, and %s", EPName, len(infos), EnvBackend, reason)}
	case got == ep.BackendSim:
		return deviceListing{infos: infos, backend: got, level: logInfo, message: fmt.Sprintf(
			"%s lists %d simulated device(s), not a GPU (%s=sim)", EPName, len(infos), EnvBackend)}
	}
	names := make([]string, len(infos))
	for i, d := range infos {
		names[i] = fmt.Sprintf("%d: %s (sm_%d%d)", d.Ordinal, d.Name, d.Major, d.Minor)
	}
	return deviceListing{infos: infos, backend: got, level: logInfo, message: fmt.Sprintf(
		"%s lists %d CUDA device(s) (%s=%s): %s", EPName, len(infos), EnvBackend, backend, strings.Join(names, ", "))}
}

// log writes msg to ORT's default logger at level (ORT drops it below the environment's
// severity); a factory without a logger logs nothing.
func (f *factory) log(level C.OrtLoggingLevel, msg string) {
	if f.logger == nil || msg == "" {
		return
	}
	c := C.CString(msg)
	defer C.free(unsafe.Pointer(c))
	C.cudaep_ort_log(f.logger, level, c)
}
