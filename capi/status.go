package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
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

// codeOf maps an error from anywhere below the ABI to its status code. It is the only place
// that does: every export reports errors through statusOf, which calls it. The order matters
// where an error matches several families: a refused graph state or a stale ticket wraps the
// driver's error that revealed it, and the state is what the host must act on.
func codeOf(err error) code {
	var (
		optErr    *ep.OptionError
		libErr    *cudadrv.LibraryError
		drvErr    *cudadrv.Error
		blasErr   *cudadrv.BLASError
		nvrtc     *cudadrv.CompileError
		regionErr *paging.RegionError
		sizeErr   *paging.LayerSizeError
		slotErr   *paging.SlotStateError
	)
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, handles.ErrStale), errors.Is(err, ep.ErrReleased), errors.Is(err, paging.ErrReleased):
		return codeStaleHandle
	case errors.Is(err, handles.ErrInvalid):
		return codeInvalidHandle
	case errors.Is(err, handles.ErrFull), errors.Is(err, graphs.ErrTooManySlots):
		return codeOutOfMemory
	case errors.Is(err, paging.ErrStaleGeneration):
		return codeStaleGeneration
	case errors.Is(err, paging.ErrDeclined):
		return codeDeclined
	case isGraphState(err):
		return codeWrongState
	case errors.Is(err, errInvalidArgument), errors.Is(err, ep.ErrInvalidArgument), errors.As(err, &optErr),
		errors.Is(err, kernels.ErrTensorMismatch), errors.Is(err, ep.ErrInvalidLaunch),
		errors.Is(err, graphs.ErrSegmentIndex), errors.Is(err, graphs.ErrInvalidArgument),
		errors.Is(err, paging.ErrInvalidWeight), errors.Is(err, paging.ErrForeignTicket),
		errors.As(err, &regionErr), errors.As(err, &sizeErr):
		return codeInvalidArgument
	case errors.Is(err, ep.ErrNoDevice), errors.As(err, &libErr),
		errors.Is(err, cudadrv.ErrorNoDevice), errors.Is(err, cudadrv.ErrorInvalidDevice),
		errors.Is(err, fs.ErrNotExist):
		return codeNotFound
	case errors.Is(err, cudadrv.ErrorOutOfMemory):
		return codeOutOfMemory
	case errors.As(err, &drvErr), errors.As(err, &blasErr), errors.As(err, &nvrtc):
		return codeCUDAError
	case errors.Is(err, cudadrv.ErrUnsupported), errors.Is(err, kernels.ErrUnsupported),
		errors.Is(err, graphs.ErrRejected):
		return codeUnsupported
	case errors.Is(err, ep.ErrClosed), errors.Is(err, ep.ErrCaptureLive), errors.Is(err, kernels.ErrClosed),
		errors.Is(err, paging.ErrClosed), errors.Is(err, paging.ErrNoFreeSlot),
		errors.Is(err, paging.ErrNotPrefetched), errors.Is(err, paging.ErrQuarantined),
		errors.As(err, &slotErr), errors.Is(err, cudadrv.ErrDestroyed):
		return codeWrongState
	}
	return codeFail
}

// graphStates are the graph lifecycle's refusals of a call in the wrong state: replay with
// nothing installed, end without begin, reset during capture, a capture broken by a drain,
// a call from the wrong thread.
var graphStates = []error{
	graphs.ErrNotInstalled, graphs.ErrRetired, graphs.ErrStreamCapturing, graphs.ErrCaptureActive,
	graphs.ErrNotCapturing, graphs.ErrWrongThread, graphs.ErrCaptureInvalidated,
	graphs.ErrDrainInCapture, graphs.ErrTokenMismatch, graphs.ErrClosed,
}

func isGraphState(err error) bool {
	for _, target := range graphStates {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
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
