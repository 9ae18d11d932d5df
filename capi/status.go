package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// status is the C status object, named so that test files (which cannot use cgo) can hold one.
type status = C.CudaEpStatus

// code is a CudaEpErrorCode.
type code int32

// The status codes, taken from the header so that they cannot drift.
const (
	codeOK              code = C.CUDAEP_OK
	codeFail            code = C.CUDAEP_FAIL
	codeInvalidArgument code = C.CUDAEP_INVALID_ARGUMENT
	codeInvalidHandle   code = C.CUDAEP_INVALID_HANDLE
	codeStaleHandle     code = C.CUDAEP_STALE_HANDLE
	codeNotFound        code = C.CUDAEP_NOT_FOUND
	codeOutOfMemory     code = C.CUDAEP_OUT_OF_MEMORY
	codeCUDAError       code = C.CUDAEP_CUDA_ERROR
	codeUnsupported     code = C.CUDAEP_UNSUPPORTED
	codeWrongState      code = C.CUDAEP_WRONG_STATE
	codeStaleGeneration code = C.CUDAEP_STALE_GENERATION
	codeDeclined        code = C.CUDAEP_DECLINED
)

// errInvalidArgument marks a bad argument detected by the shims themselves (a NULL pointer, a
// short buffer, a range outside a buffer, a count past its bound); errors about option keys
// and values come from ep as *ep.OptionError.
var errInvalidArgument = errors.New("cudaep: invalid argument")

// argError returns an error wrapping errInvalidArgument with a description.
func argError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalidArgument, fmt.Sprintf(format, args...))
}

// codes maps each ep.ErrorCode to its CUDAEP_* code: the one table between ep's
// classification of errors and the C ABI.
var codes = [...]code{
	ep.CodeOK:              codeOK,
	ep.CodeFail:            codeFail,
	ep.CodeInvalidArgument: codeInvalidArgument,
	ep.CodeReleased:        codeStaleHandle,
	ep.CodeNotFound:        codeNotFound,
	ep.CodeOutOfMemory:     codeOutOfMemory,
	ep.CodeDriver:          codeCUDAError,
	ep.CodeUnsupported:     codeUnsupported,
	ep.CodeWrongState:      codeWrongState,
	ep.CodeStaleGeneration: codeStaleGeneration,
	ep.CodeDeclined:        codeDeclined,
}

// codeOf maps err to its status code: the C layer's own errors (handles, arguments it checks
// itself) first, then ep's classification through the table.
func codeOf(err error) code {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, handles.ErrStale):
		return codeStaleHandle
	case errors.Is(err, handles.ErrInvalid):
		return codeInvalidHandle
	case errors.Is(err, handles.ErrFull):
		return codeOutOfMemory
	case errors.Is(err, errInvalidArgument):
		return codeInvalidArgument
	}
	if c := ep.Code(err); int(c) < len(codes) {
		return codes[c]
	}
	return codeFail
}

// statusOf turns err into a status for the caller to own, or nil for a nil error.
func statusOf(err error) *C.CudaEpStatus {
	if err == nil {
		return nil
	}
	return newStatus(codeOf(err), err.Error())
}

// newStatus allocates a status in the C heap. The message bytes are passed to C only for the
// duration of the call, which copies them: no Go pointer is retained by C.
func newStatus(c code, msg string) *C.CudaEpStatus {
	return C.cudaep_status_new(C.CudaEpErrorCode(c),
		(*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// recoverInto is deferred first by every export: a panic anywhere below turns into a
// CUDAEP_FAIL status carrying the panic's message instead of unwinding into C (which would
// abort the host).
func recoverInto(st **C.CudaEpStatus) {
	if r := recover(); r != nil {
		*st = newStatus(codeFail, panicMessage(r))
	}
}

// panicMessage formats a recovered panic value for a status.
func panicMessage(r any) string {
	return fmt.Sprintf("cudaep: internal error (recovered panic): %v", r)
}

// readStatus returns a status's code and message, and frees it. Tests use it to inspect
// what an export returned.
func readStatus(st *C.CudaEpStatus) (code, string) {
	defer C.CudaEpReleaseStatus(st)
	return code(C.CudaEpGetErrorCode(st)), C.GoString(C.CudaEpGetErrorMessage(st))
}
