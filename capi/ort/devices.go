package ort

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// cudaepOrtNewFactory registers the Go side of a new factory.
//
//export cudaepOrtNewFactory
func cudaepOrtNewFactory(f *C.CudaEpOrtFactory) (st *C.OrtStatus) {
	defer recoverInto(&st)
	h, err := factoryTable.Insert(&factory{})
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

// cudaepOrtGetSupportedDevices offers one EP device per CUDA device: on the NVIDIA hardware
// device ORT discovered for it when there is one, else on a virtual GPU hardware device the
// factory makes (ORT's discovery misses GPUs in some containers). Without a usable CUDA device
// it offers one simulated device, marked so in its metadata. It never claims the CPU.
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
	infos, backend, _, err := ep.ListDevices(ep.BackendAuto)
	if err != nil {
		return statusOf(err)
	}
	discovered := unsafe.Slice(devices, int(numDevices))
	var nvidia []*C.OrtHardwareDevice
	for _, hw := range discovered {
		if hw != nil && C.cudaep_ort_hw_type(hw) == C.OrtHardwareDeviceType_GPU && C.cudaep_ort_hw_vendor_id(hw) == 0x10DE {
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
			if hw, err = fac.virtualDevice(info, meta); err != nil {
				return statusOf(err)
			}
			if hw == nil {
				continue // this ORT cannot make virtual devices (API 23)
			}
		}
		options := map[string]string{"backend": backend, "device_id": strconv.Itoa(info.Ordinal)}
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

// virtualDevice makes a GPU hardware device for a CUDA (or simulated) device ORT did not
// discover, kept for the factory's life.
func (f *factory) virtualDevice(info ep.DeviceInfo, meta map[string]string) (*C.OrtHardwareDevice, error) {
	kv := newKV(meta)
	defer C.cudaep_ort_kv_release(kv)
	vendor := C.CString("NVIDIA")
	defer C.free(unsafe.Pointer(vendor))
	var hw *C.OrtHardwareDevice
	if err := errorOf(C.cudaep_ort_create_hw_device(C.uint32_t(info.Ordinal), vendor, kv, &hw), "create a hardware device"); err != nil {
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
