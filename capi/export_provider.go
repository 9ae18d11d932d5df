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

// CudaEpCreateProvider creates a provider from an options object (see cudaep.h).
//
//export CudaEpCreateProvider
func CudaEpCreateProvider(options C.CudaEpOptions, outProvider *C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	obj, err := optionsTable.Get(handles.Handle(options))
	if err != nil {
		return statusOf(err)
	}
	if outProvider == nil {
		return statusOf(argError("out_provider is NULL"))
	}
	p, err := ep.New(obj.snapshot())
	if err != nil {
		return statusOf(err)
	}
	h, err := providerTable.Insert(p)
	if err != nil {
		_ = p.Close() // the table-full error is the one to report
		return statusOf(err)
	}
	*outProvider = C.CudaEpProvider(h)
	return nil
}

// CudaEpReleaseProvider releases a provider handle (see cudaep.h).
//
//export CudaEpReleaseProvider
func CudaEpReleaseProvider(provider C.CudaEpProvider) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(providerTable.RemoveIf(handles.Handle(provider), func(p *ep.Provider) error {
		if p.CaptureLive() {
			return fmt.Errorf("%w: release the provider: end or abort its capture first (the handle stays valid)", ep.ErrCaptureLive)
		}
		return nil
	}))
}

// providerString answers the two-call string queries about a provider.
func providerString(provider C.CudaEpProvider, get func(*ep.Provider) string, out stringOut) *C.CudaEpStatus {
	var s string
	err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		s = get(p)
		return out.check(s)
	})
	if err != nil {
		return statusOf(err)
	}
	out.write(s)
	return nil
}

// CudaEpProviderGetBackendName returns "cuda" or "sim" (see cudaep.h).
//
//export CudaEpProviderGetBackendName
func CudaEpProviderGetBackendName(provider C.CudaEpProvider, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return providerString(provider, (*ep.Provider).BackendName, stringOut{buf, bufSize, outNeeded})
}

// CudaEpProviderGetAutoReason returns why backend=auto chose its backend (see cudaep.h).
//
//export CudaEpProviderGetAutoReason
func CudaEpProviderGetAutoReason(provider C.CudaEpProvider, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return providerString(provider, (*ep.Provider).AutoReason, stringOut{buf, bufSize, outNeeded})
}

// CudaEpProviderGetDeviceName returns the device's name (see cudaep.h).
//
//export CudaEpProviderGetDeviceName
func CudaEpProviderGetDeviceName(provider C.CudaEpProvider, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return providerString(provider, func(p *ep.Provider) string { return p.Device().Name },
		stringOut{buf, bufSize, outNeeded})
}

// deviceInfoV1Size is the size of the ABI 1 layout of CudaEpDeviceInfo, the least a caller's
// struct_size may say. It stays 40 when later ABI versions append fields, so hosts built
// against ABI 1 keep working; the array below fails the build if the struct ever shrinks.
const deviceInfoV1Size = 40

var _ [C.sizeof_CudaEpDeviceInfo - deviceInfoV1Size]struct{}

// CudaEpProviderGetDeviceInfo fills a CudaEpDeviceInfo (see cudaep.h).
//
//export CudaEpProviderGetDeviceInfo
func CudaEpProviderGetDeviceInfo(provider C.CudaEpProvider, info *C.CudaEpDeviceInfo) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if info == nil {
		return statusOf(argError("info is NULL"))
	}
	callerSize := info.struct_size
	if callerSize < deviceInfoV1Size {
		return statusOf(argError("info->struct_size is %d; set it to sizeof(CudaEpDeviceInfo) (at least %d)",
			uint32(callerSize), deviceInfoV1Size))
	}
	var d ep.DeviceInfo
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		d = p.Device()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	// Fill a local copy, then copy only the bytes the caller's struct has room for, so a host
	// built against an older (shorter) layout is never overrun.
	v := C.CudaEpDeviceInfo{
		struct_size:        callerSize,
		ordinal:            C.int32_t(d.Ordinal),
		compute_major:      C.int32_t(d.Major),
		compute_minor:      C.int32_t(d.Minor),
		multiprocessors:    C.int32_t(d.Multiprocessors),
		total_memory_bytes: C.uint64_t(d.TotalMemory),
		free_memory_bytes:  C.uint64_t(d.FreeMemory),
	}
	n := min(uintptr(callerSize), unsafe.Sizeof(v))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(info)), n), unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
	return nil
}
