"""The exceptions of cudaep: one class per CudaEpErrorCode, all deriving from :class:`Error`."""

from ._enum import header_enum

ErrorCode = header_enum("ErrorCode", "CudaEpErrorCode", "CudaEpErrorCode, with the header's names and numbers.",
                        __name__)


class Error(Exception):
    """A failed cudaep call. ``code`` is the :class:`ErrorCode`, ``message`` the library's text.

    Catch :class:`Error` for every failure, or one of its subclasses for one code.
    """

    code = ErrorCode.FAIL

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code

    def __str__(self):
        name = self.code.name if isinstance(self.code, ErrorCode) else str(self.code)
        return f"[CUDAEP_{name}] {self.message}"


class Fail(Error):
    """CUDAEP_FAIL: an internal failure with no better code (including recovered panics)."""

    code = ErrorCode.FAIL


class InvalidArgument(Error):
    """CUDAEP_INVALID_ARGUMENT: a bad option key or value, a NULL pointer, a short buffer."""

    code = ErrorCode.INVALID_ARGUMENT


class InvalidHandle(Error):
    """CUDAEP_INVALID_HANDLE: a handle that is 0, forged, or of another object type."""

    code = ErrorCode.INVALID_HANDLE


class StaleHandle(Error):
    """CUDAEP_STALE_HANDLE: a handle that was released (including a double release)."""

    code = ErrorCode.STALE_HANDLE


class NotFound(Error):
    """CUDAEP_NOT_FOUND: no such device, or no loadable CUDA driver."""

    code = ErrorCode.NOT_FOUND


class OutOfMemory(Error):
    """CUDAEP_OUT_OF_MEMORY: host, device or handle-table memory ran out."""

    code = ErrorCode.OUT_OF_MEMORY


class CudaError(Error):
    """CUDAEP_CUDA_ERROR: a CUDA driver, cuBLAS or NVRTC failure (the message names it)."""

    code = ErrorCode.CUDA_ERROR


class Unsupported(Error):
    """CUDAEP_UNSUPPORTED: the backend cannot do this at all."""

    code = ErrorCode.UNSUPPORTED


class WrongState(Error):
    """CUDAEP_WRONG_STATE: the object's state forbids the call."""

    code = ErrorCode.WRONG_STATE


class StaleGeneration(Error):
    """CUDAEP_STALE_GENERATION: a double-buffer ticket whose slot was reused for another layer."""

    code = ErrorCode.STALE_GENERATION


class Declined(Error):
    """CUDAEP_DECLINED: weight paging declined the request; load the weight the ordinary way."""

    code = ErrorCode.DECLINED


class DLPackUnsupported(Unsupported, BufferError):
    """A buffer that cannot be exported through DLPack (its memory is not addressable by other
    libraries, as on the simulated device). It is also a BufferError, which DLPack consumers
    expect from a producer that cannot export."""


#: The exception class for each code.
BY_CODE = {cls.code: cls for cls in (
    Fail, InvalidArgument, InvalidHandle, StaleHandle, NotFound, OutOfMemory, CudaError,
    Unsupported, WrongState, StaleGeneration, Declined)}

_get_code = _get_message = _release = None


def bind(get_code, get_message, release):
    """Called once by the loader with the status functions of the library."""
    global _get_code, _get_message, _release
    _get_code, _get_message, _release = get_code, get_message, release


def from_status(status):
    """Turns a non-NULL CudaEpStatus* into an exception instance and frees the status."""
    try:
        code = _get_code(status)
        message = (_get_message(status) or b"").decode("utf-8", errors="replace")
    finally:
        _release(status)
    cls = BY_CODE.get(code, Error)
    return cls(message, code)
