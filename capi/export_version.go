package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"github.com/cudaep/cudaep/capi/abi"
	"github.com/cudaep/cudaep/ep"
)

// The ABI version is defined twice, as CUDAEP_ABI_VERSION for C and abi.Version for Go; these
// array lengths go negative, failing the build, if the two ever differ.
var (
	_ [C.CUDAEP_ABI_VERSION - abi.Version]struct{}
	_ [abi.Version - C.CUDAEP_ABI_VERSION]struct{}
)

// libraryVersion is ep.Version in the C heap, allocated once and never freed, so the pointer
// CudaEpGetVersion hands out is valid for the life of the process.
var libraryVersion = C.CString(ep.Version)

// CudaEpGetVersion reports the ABI version and the library version (see cudaep.h).
//
//export CudaEpGetVersion
func CudaEpGetVersion(outABIVersion *C.uint32_t, outLibraryVersion **C.cudaep_cchar) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outABIVersion != nil {
		*outABIVersion = abi.Version
	}
	if outLibraryVersion != nil {
		*outLibraryVersion = libraryVersion
	}
	return nil
}

// CudaEpGetLiveHandleCount reports the number of live handles of every type (see cudaep.h).
//
//export CudaEpGetLiveHandleCount
func CudaEpGetLiveHandleCount(outCount *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outCount == nil {
		return statusOf(argError("out_count is NULL"))
	}
	*outCount = C.uint64_t(liveHandles())
	return nil
}
