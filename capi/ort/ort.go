// Package ort is cudaep's second front end: an ONNX Runtime plugin execution provider, linked
// into libcudaep.so beside the C ABI. ONNX Runtime loads the library with
// RegisterExecutionProviderLibrary and calls CreateEpFactories; the factory offers one EP
// device per GPU (or one simulated device), and each session gets an OrtEp that claims the
// nodes cudaep's kernels run (GetCapability), turns each claimed group into a partition of ep
// kernels with its weights on the device (Compile), and runs it (Compute).
//
// It translates ORT calls into ep calls and nothing more: the C shim (shim.c) owns ORT's
// tables and entry points, this package decides. ORT objects map to Go objects through
// generation-checked handle tables (capi/handles); no Go pointer is stored in C memory. Every
// callback recovers panics into an ORT error status.
package ort

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// EPName is the name ORT knows the EP by; session options are "ep.cudaep.<key>".
const EPName = "CudaEp"

func init() {
	v := C.CString(ep.Version)
	C.cudaep_ort_set_library_version(v)
	C.free(unsafe.Pointer(v))
}

// The handle kinds of the ORT objects (distinct from the C ABI's kinds 1-10).
const (
	kindFactory   handles.Kind = 20
	kindEP        handles.Kind = 21
	kindFusedNode handles.Kind = 22
)

var (
	factoryTable   = handles.NewTable(handles.Config[*factory]{Kind: kindFactory, Name: "ORT factory", Finalize: retire})
	epTable        = handles.NewTable(handles.Config[*session]{Kind: kindEP, Name: "ORT EP", Finalize: (*session).close})
	fusedNodeTable = handles.NewTable(handles.Config[*fusedNode]{Kind: kindFusedNode, Name: "ORT fused node", Finalize: (*fusedNode).close})
)

// ortCodes maps ep's error codes to ORT's: one table, as the C ABI has its own.
var ortCodes = [...]C.OrtErrorCode{
	ep.CodeOK:              C.ORT_OK,
	ep.CodeFail:            C.ORT_EP_FAIL,
	ep.CodeInvalidArgument: C.ORT_INVALID_ARGUMENT,
	ep.CodeReleased:        C.ORT_INVALID_ARGUMENT,
	ep.CodeNotFound:        C.ORT_NO_SUCHFILE,
	ep.CodeOutOfMemory:     C.ORT_EP_FAIL,
	ep.CodeDriver:          C.ORT_EP_FAIL,
	ep.CodeUnsupported:     C.ORT_NOT_IMPLEMENTED,
	ep.CodeWrongState:      C.ORT_FAIL,
	ep.CodeStaleGeneration: C.ORT_FAIL,
	ep.CodeDeclined:        C.ORT_FAIL,
}

// errInvalid marks an argument error the adapter finds itself (an ORT value it cannot use).
var errInvalid = errors.New("cudaep: invalid argument")

// statusOf returns a new ORT status for err (nil for nil), its message prefixed with the EP.
func statusOf(err error) *C.OrtStatus {
	if err == nil {
		return nil
	}
	code := C.OrtErrorCode(C.ORT_EP_FAIL)
	if errors.Is(err, errInvalid) {
		code = C.ORT_INVALID_ARGUMENT
	} else if c := ep.Code(err); int(c) < len(ortCodes) {
		code = ortCodes[c]
	}
	msg := C.CString(EPName + ": " + err.Error())
	defer C.free(unsafe.Pointer(msg))
	return C.cudaep_ort_status(code, msg)
}

// errorOf turns an ORT status into an error and releases it.
func errorOf(st *C.OrtStatus, what string) error {
	if st == nil {
		return nil
	}
	msg := C.GoString(C.cudaep_ort_error_message(st))
	C.cudaep_ort_release_status(st)
	return fmt.Errorf("cudaep: ONNX Runtime: %s: %s", what, msg)
}

// recoverInto is deferred first by every export that returns a status.
func recoverInto(st **C.OrtStatus) {
	if r := recover(); r != nil {
		*st = statusOf(fmt.Errorf("cudaep: internal error (recovered panic): %v", r))
	}
}

// recoverQuietly is deferred by the exports that return nothing (ORT's Release callbacks): a
// panic there has nowhere to go and must not reach ORT.
func recoverQuietly() { _ = recover() }

// factory is what ORT's OrtEpFactory stands for: the backend its devices come from, read from
// CUDAEP_BACKEND when ORT registered the library, ORT's default logger, and the hardware
// devices and memory infos it made (released with it).
type factory struct {
	backend string
	logger  *C.OrtLogger // may be nil: then nothing is logged
	mu      sync.Mutex
	hws     []*C.OrtHardwareDevice
	infos   []*C.OrtMemoryInfo // the memory infos of the EP devices' memory (ORT keeps the pointers)
}

// retire is the factory table's finalizer (see retireFactory).
func retire(f *factory) error {
	retireFactory(f)
	return nil
}

func (f *factory) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, hw := range f.hws {
		C.cudaep_ort_release_hw_device(hw)
	}
	for _, info := range f.infos {
		C.cudaep_ort_release_memory_info(info)
	}
	f.hws, f.infos = nil, nil
	return nil
}

// goString copies a C string, "" for NULL.
func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
