package cudadrv

import (
	"errors"
	"fmt"
	"strconv"
)

// Result is a CUDA driver status code (CUresult). Zero is success.
type Result int32

// The CUresult values the project names. The numbers are the driver's.
const (
	Success                          Result = 0
	ErrorInvalidValue                Result = 1
	ErrorOutOfMemory                 Result = 2
	ErrorNotInitialized              Result = 3
	ErrorDeinitialized               Result = 4
	ErrorNoDevice                    Result = 100
	ErrorInvalidDevice               Result = 101
	ErrorInvalidImage                Result = 200
	ErrorInvalidContext              Result = 201
	ErrorNoBinaryForGPU              Result = 209
	ErrorPeerAccessUnsupported       Result = 217
	ErrorInvalidPTX                  Result = 218
	ErrorInvalidSource               Result = 300
	ErrorFileNotFound                Result = 301
	ErrorInvalidHandle               Result = 400
	ErrorIllegalState                Result = 401
	ErrorNotFound                    Result = 500
	ErrorNotReady                    Result = 600
	ErrorIllegalAddress              Result = 700
	ErrorLaunchOutOfResources        Result = 701
	ErrorLaunchTimeout               Result = 702
	ErrorPeerAccessAlreadyEnabled    Result = 704
	ErrorPeerAccessNotEnabled        Result = 705
	ErrorTooManyPeers                Result = 711
	ErrorHostMemoryAlreadyRegistered Result = 712
	ErrorHostMemoryNotRegistered     Result = 713
	ErrorHardwareStackError          Result = 714
	ErrorIllegalInstruction          Result = 715
	ErrorMisalignedAddress           Result = 716
	ErrorInvalidAddressSpace         Result = 717
	ErrorInvalidPC                   Result = 718
	ErrorLaunchFailed                Result = 719
	ErrorNotPermitted                Result = 800
	ErrorNotSupported                Result = 801
	ErrorStreamCaptureUnsupported    Result = 900
	ErrorStreamCaptureInvalidated    Result = 901
	ErrorStreamCaptureMerge          Result = 902
	ErrorStreamCaptureUnmatched      Result = 903
	ErrorStreamCaptureUnjoined       Result = 904
	ErrorStreamCaptureIsolation      Result = 905
	ErrorStreamCaptureImplicit       Result = 906
	ErrorCapturedEvent               Result = 907
	ErrorStreamCaptureWrongThread    Result = 908
	ErrorTimeout                     Result = 909
	ErrorGraphExecUpdateFailure      Result = 910
	ErrorUnknown                     Result = 999
)

var resultNames = map[Result]string{
	Success:                          "CUDA_SUCCESS",
	ErrorInvalidValue:                "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:                 "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:              "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:               "CUDA_ERROR_DEINITIALIZED",
	ErrorNoDevice:                    "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:               "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidImage:                "CUDA_ERROR_INVALID_IMAGE",
	ErrorInvalidContext:              "CUDA_ERROR_INVALID_CONTEXT",
	ErrorNoBinaryForGPU:              "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrorPeerAccessUnsupported:       "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	ErrorInvalidPTX:                  "CUDA_ERROR_INVALID_PTX",
	ErrorInvalidSource:               "CUDA_ERROR_INVALID_SOURCE",
	ErrorFileNotFound:                "CUDA_ERROR_FILE_NOT_FOUND",
	ErrorInvalidHandle:               "CUDA_ERROR_INVALID_HANDLE",
	ErrorIllegalState:                "CUDA_ERROR_ILLEGAL_STATE",
	ErrorNotFound:                    "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:                    "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:              "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchOutOfResources:        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrorLaunchTimeout:               "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrorPeerAccessAlreadyEnabled:    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrorPeerAccessNotEnabled:        "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	ErrorTooManyPeers:                "CUDA_ERROR_TOO_MANY_PEERS",
	ErrorHostMemoryAlreadyRegistered: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	ErrorHostMemoryNotRegistered:     "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	ErrorHardwareStackError:          "CUDA_ERROR_HARDWARE_STACK_ERROR",
	ErrorIllegalInstruction:          "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrorMisalignedAddress:           "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrorInvalidAddressSpace:         "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	ErrorInvalidPC:                   "CUDA_ERROR_INVALID_PC",
	ErrorLaunchFailed:                "CUDA_ERROR_LAUNCH_FAILED",
	ErrorNotPermitted:                "CUDA_ERROR_NOT_PERMITTED",
	ErrorNotSupported:                "CUDA_ERROR_NOT_SUPPORTED",
	ErrorStreamCaptureUnsupported:    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	ErrorStreamCaptureInvalidated:    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	ErrorStreamCaptureMerge:          "CUDA_ERROR_STREAM_CAPTURE_MERGE",
	ErrorStreamCaptureUnmatched:      "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	ErrorStreamCaptureUnjoined:       "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
	ErrorStreamCaptureIsolation:      "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	ErrorStreamCaptureImplicit:       "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	ErrorCapturedEvent:               "CUDA_ERROR_CAPTURED_EVENT",
	ErrorStreamCaptureWrongThread:    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	ErrorTimeout:                     "CUDA_ERROR_TIMEOUT",
	ErrorGraphExecUpdateFailure:      "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
	ErrorUnknown:                     "CUDA_ERROR_UNKNOWN",
}

// Name returns the driver's name for r, such as "CUDA_ERROR_OUT_OF_MEMORY", or
// "CUresult(N)" for a number this package does not name.
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

// String returns r's name and number, such as "CUDA_ERROR_OUT_OF_MEMORY (2)".
func (r Result) String() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

// Sticky reports whether r is one of the errors after which the driver refuses every further
// call in the context (a kernel fault). A context that saw one must be torn down.
func (r Result) Sticky() bool {
	switch r {
	case ErrorIllegalAddress, ErrorHardwareStackError, ErrorIllegalInstruction,
		ErrorMisalignedAddress, ErrorInvalidAddressSpace, ErrorInvalidPC, ErrorLaunchFailed:
		return true
	}
	return false
}

// Error is a failed driver call: the entry point, the CUresult it returned, and, where the
// backend knows more (the sim names the allocation an access fell outside of), a detail.
type Error struct {
	Op     string // driver entry point, e.g. "cuMemAlloc_v2"
	Result Result // what it returned
	Detail string // optional, backend-specific explanation
}

// NewError returns an *Error for op and r, or nil when r is Success. Backends use it so that a
// successful call returns a nil error interface without allocating.
func NewError(op string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Op: op, Result: r}
}

// Error formats e as "cudadrv: OP: NAME (N): DETAIL".
func (e *Error) Error() string {
	s := "cudadrv: " + e.Op + ": " + e.Result.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes errors.Is(err, ErrorOutOfMemory)-style checks work: an *Error matches a Result
// target with the same number.
func (e *Error) Is(target error) bool {
	if r, ok := target.(Result); ok {
		return e.Result == r
	}
	return false
}

// Error lets a bare Result be used as an errors.Is target, as in
// errors.Is(err, cudadrv.ErrorNotReady).
func (r Result) Error() string { return "cudadrv: " + r.String() }

// ResultOf returns the CUresult carried by err, Success for nil, and ErrorUnknown for an error
// that carries none.
func ResultOf(err error) Result {
	if err == nil {
		return Success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Result
	}
	var r Result
	if errors.As(err, &r) {
		return r
	}
	return ErrorUnknown
}

// BLASStatus is a cuBLAS status code (cublasStatus_t). Zero is success.
type BLASStatus int32

// The cuBLAS status values, with the library's numbers.
const (
	BLASSuccess         BLASStatus = 0
	BLASNotInitialized  BLASStatus = 1
	BLASAllocFailed     BLASStatus = 3
	BLASInvalidValue    BLASStatus = 7
	BLASArchMismatch    BLASStatus = 8
	BLASMappingError    BLASStatus = 11
	BLASExecutionFailed BLASStatus = 13
	BLASInternalError   BLASStatus = 14
	BLASNotSupported    BLASStatus = 15
	BLASLicenseError    BLASStatus = 16
)

var blasNames = map[BLASStatus]string{
	BLASSuccess:         "CUBLAS_STATUS_SUCCESS",
	BLASNotInitialized:  "CUBLAS_STATUS_NOT_INITIALIZED",
	BLASAllocFailed:     "CUBLAS_STATUS_ALLOC_FAILED",
	BLASInvalidValue:    "CUBLAS_STATUS_INVALID_VALUE",
	BLASArchMismatch:    "CUBLAS_STATUS_ARCH_MISMATCH",
	BLASMappingError:    "CUBLAS_STATUS_MAPPING_ERROR",
	BLASExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED",
	BLASInternalError:   "CUBLAS_STATUS_INTERNAL_ERROR",
	BLASNotSupported:    "CUBLAS_STATUS_NOT_SUPPORTED",
	BLASLicenseError:    "CUBLAS_STATUS_LICENSE_ERROR",
}

// Name returns the library's name for s, or "cublasStatus(N)".
func (s BLASStatus) Name() string {
	if n, ok := blasNames[s]; ok {
		return n
	}
	return "cublasStatus(" + strconv.Itoa(int(s)) + ")"
}

// BLASError is a failed cuBLAS call.
type BLASError struct {
	Op     string // e.g. "cublasSgemm_v2"
	Status BLASStatus
	Detail string
}

// NewBLASError returns a *BLASError for op and s, or nil when s is BLASSuccess.
func NewBLASError(op string, s BLASStatus) error {
	if s == BLASSuccess {
		return nil
	}
	return &BLASError{Op: op, Status: s}
}

// Error formats e as "cudadrv: OP: NAME (N)".
func (e *BLASError) Error() string {
	s := fmt.Sprintf("cudadrv: %s: %s (%d)", e.Op, e.Status.Name(), int32(e.Status))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// CompileError is a failed NVRTC compilation; Log is the compiler's log, which names the
// offending lines.
type CompileError struct {
	Program string // the program name given to the compiler
	Result  int    // nvrtcResult
	Name    string // e.g. "NVRTC_ERROR_COMPILATION"
	Log     string
}

// Error formats e with the compiler log.
func (e *CompileError) Error() string {
	s := fmt.Sprintf("cudadrv: nvrtc: compiling %q: %s (%d)", e.Program, e.Name, e.Result)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// ErrUnsupported is returned (wrapped, with the reason) by a backend that cannot do what was
// asked at all, such as NVRTC on the simulated device.
var ErrUnsupported = errors.New("cudadrv: unsupported by this backend")

// LibraryError says a shared library could not be loaded, naming every place searched.
type LibraryError struct {
	Library string   // e.g. "cuBLAS"
	Tried   []string // every name or path that was tried, in order
	Reason  string   // the last loader message
}

// Error lists what was tried.
func (e *LibraryError) Error() string {
	return fmt.Sprintf("cudadrv: cannot load %s: tried %v: %s", e.Library, e.Tried, e.Reason)
}
