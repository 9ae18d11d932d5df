package ep

import (
	"errors"
	"io/fs"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
)

// ErrorCode classifies every error that leaves ep, so that each front end maps errors to its
// own status codes with one table (the C ABI to CUDAEP_*, the ONNX Runtime adapter to
// OrtErrorCode) and never inspects the layers below ep.
type ErrorCode uint8

// The error codes. Their numbering is internal; front ends map them by name.
const (
	// CodeOK: no error.
	CodeOK ErrorCode = iota
	// CodeFail: an error that fits no other code (an internal fault).
	CodeFail
	// CodeInvalidArgument: a value the call cannot take; nothing was done.
	CodeInvalidArgument
	// CodeReleased: an object used after its owner released it.
	CodeReleased
	// CodeNotFound: no such device, driver library or file.
	CodeNotFound
	// CodeOutOfMemory: device memory, or a bounded table (keyed graph slots), is exhausted.
	CodeOutOfMemory
	// CodeDriver: the CUDA driver, cuBLAS or NVRTC failed.
	CodeDriver
	// CodeUnsupported: the provider cannot run this (op, dtype, capture of a seam kernel, a
	// feature missing on the backend).
	CodeUnsupported
	// CodeWrongState: the call is not allowed in the object's current state (a live capture,
	// nothing installed, a closed provider, a slot not ready); nothing was done.
	CodeWrongState
	// CodeStaleGeneration: a paging ticket whose slot was reused since.
	CodeStaleGeneration
	// CodeDeclined: paging declined a layer (the host loads it the ordinary way).
	CodeDeclined
)

var codeNames = [...]string{
	CodeOK: "OK", CodeFail: "FAIL", CodeInvalidArgument: "INVALID_ARGUMENT", CodeReleased: "RELEASED",
	CodeNotFound: "NOT_FOUND", CodeOutOfMemory: "OUT_OF_MEMORY", CodeDriver: "DRIVER",
	CodeUnsupported: "UNSUPPORTED", CodeWrongState: "WRONG_STATE", CodeStaleGeneration: "STALE_GENERATION",
	CodeDeclined: "DECLINED",
}

// String returns the code's name, e.g. "WRONG_STATE".
func (c ErrorCode) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "UNKNOWN"
}

// Codes returns every error code, in order, for front ends that check their tables cover all.
func Codes() []ErrorCode {
	out := make([]ErrorCode, len(codeNames))
	for i := range out {
		out[i] = ErrorCode(i)
	}
	return out
}

// Code classifies err: CodeOK for nil, otherwise the code of the first family in the order
// below that err wraps. It is the only place that knows the error families of the layers
// under ep.
func Code(err error) ErrorCode {
	if err == nil {
		return CodeOK
	}
	for _, f := range families {
		if f.match(err) {
			return f.code
		}
	}
	return CodeFail
}

// family is one class of errors and its code. The order of families matters: the first match
// wins (a paging FillError wraps a driver error and is a driver failure; an invalidated capture
// wraps the driver's CAPTURE_INVALIDATED and is a wrong state).
type family struct {
	code  ErrorCode
	match func(error) bool
}

func is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

func as[T error]() func(error) bool {
	return func(err error) bool {
		var target T
		return errors.As(err, &target)
	}
}

func anyOf(ms ...func(error) bool) func(error) bool {
	return func(err error) bool {
		for _, m := range ms {
			if m(err) {
				return true
			}
		}
		return false
	}
}

var families = []family{
	{CodeReleased, is(ErrReleased, paging.ErrReleased)},
	{CodeOutOfMemory, is(graphs.ErrTooManySlots)},
	{CodeStaleGeneration, is(paging.ErrStaleGeneration)},
	{CodeDeclined, is(paging.ErrDeclined)},
	{CodeWrongState, is(graphs.ErrNotInstalled, graphs.ErrRetired, graphs.ErrStreamCapturing,
		graphs.ErrCaptureActive, graphs.ErrNotCapturing, graphs.ErrWrongThread,
		graphs.ErrCaptureInvalidated, graphs.ErrDrainInCapture, graphs.ErrTokenMismatch,
		graphs.ErrClosed)},
	{CodeInvalidArgument, anyOf(
		is(ErrInvalidArgument, kernels.ErrTensorMismatch, kernels.ErrDataFault, ErrInvalidLaunch, graphs.ErrSegmentIndex,
			graphs.ErrInvalidArgument, paging.ErrInvalidWeight, paging.ErrForeignTicket),
		as[*OptionError](), as[*paging.RegionError](), as[*paging.LayerSizeError]())},
	{CodeNotFound, anyOf(
		is(ErrNoDevice, cudadrv.ErrorNoDevice, cudadrv.ErrorInvalidDevice, fs.ErrNotExist),
		as[*cudadrv.LibraryError]())},
	{CodeOutOfMemory, is(cudadrv.ErrorOutOfMemory)},
	{CodeDriver, anyOf(as[*cudadrv.Error](), as[*cudadrv.BLASError](), as[*cudadrv.CompileError]())},
	{CodeUnsupported, is(cudadrv.ErrUnsupported, kernels.ErrUnsupported, graphs.ErrRejected)},
	{CodeWrongState, is(ErrClosed, ErrCaptureLive, ErrThreadCaptures, kernels.ErrClosed, paging.ErrClosed,
		paging.ErrNoFreeSlot, paging.ErrNotPrefetched, paging.ErrQuarantined, paging.ErrFileBusy, cudadrv.ErrDestroyed)},
	{CodeWrongState, as[*paging.SlotStateError]()},
}
