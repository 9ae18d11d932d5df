"""Loading libcudaep.so and declaring its C functions for ctypes.

Every function of include/cudaep.h is declared here once, with its full argtypes and restype.
Functions that return a ``CudaEpStatus*`` get an ``errcheck`` that turns a non-NULL status into
the matching :class:`cudaep.Error` subclass (and frees the status), so callers simply call them.

The library is found, in order, at ``$CUDAEP_LIBRARY``, at ``build/libcudaep.so`` of the source
tree this package sits in, and through the dynamic loader (``libcudaep.so``).
"""

import ctypes
import ctypes.util
import os
from pathlib import Path

from . import errors

#: The ABI version these declarations describe (CUDAEP_ABI_VERSION of the header).
ABI_VERSION = 1

# Handles are uint64_t in the header: never let ctypes narrow them to a C int.
Handle = ctypes.c_uint64


class DeviceInfoStruct(ctypes.Structure):
    """CudaEpDeviceInfo, field for field (the header pins the layout with static asserts)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("ordinal", ctypes.c_int32),
        ("compute_major", ctypes.c_int32),
        ("compute_minor", ctypes.c_int32),
        ("multiprocessors", ctypes.c_int32),
        ("reserved", ctypes.c_uint32),
        ("total_memory_bytes", ctypes.c_uint64),
        ("free_memory_bytes", ctypes.c_uint64),
    ]


assert ctypes.sizeof(DeviceInfoStruct) == 40, "CudaEpDeviceInfo ABI 1 layout"


def _candidates():
    env = os.environ.get("CUDAEP_LIBRARY")
    if env:
        yield env
    yield str(Path(__file__).resolve().parents[2] / "build" / "libcudaep.so")
    yield ctypes.util.find_library("cudaep") or "libcudaep.so"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise OSError(
        "cudaep: cannot load libcudaep.so; tried: " + "; ".join(tried)
        + ". Build it with `make`, or set CUDAEP_LIBRARY to its path."
    )


lib = _load()

_status_p = ctypes.c_void_p
_char_p = ctypes.c_char_p
_size_t = ctypes.c_size_t


def _check_status(status, func, args):
    """errcheck for CudaEpStatus* results: NULL is success, anything else raises."""
    if status:
        raise errors.from_status(status)
    return None


def _declare(name, restype, *argtypes, status=False):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    if status:
        fn.errcheck = _check_status
    return fn


# Status (implemented in C: never raise, no errcheck).
CudaEpCreateStatus = _declare("CudaEpCreateStatus", _status_p, ctypes.c_int, _char_p)
CudaEpGetErrorCode = _declare("CudaEpGetErrorCode", ctypes.c_int, _status_p)
CudaEpGetErrorMessage = _declare("CudaEpGetErrorMessage", _char_p, _status_p)
CudaEpReleaseStatus = _declare("CudaEpReleaseStatus", None, _status_p)
CudaEpGetErrorCodeName = _declare("CudaEpGetErrorCodeName", _char_p, ctypes.c_int)

# Version and handles.
CudaEpGetVersion = _declare(
    "CudaEpGetVersion", _status_p, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(_char_p),
    status=True)
CudaEpGetLiveHandleCount = _declare(
    "CudaEpGetLiveHandleCount", _status_p, ctypes.POINTER(ctypes.c_uint64), status=True)

# Options.
CudaEpCreateOptions = _declare(
    "CudaEpCreateOptions", _status_p, ctypes.POINTER(Handle), status=True)
CudaEpSetOption = _declare("CudaEpSetOption", _status_p, Handle, _char_p, _char_p, status=True)
CudaEpGetOption = _declare(
    "CudaEpGetOption", _status_p, Handle, _char_p, ctypes.c_char_p, _size_t,
    ctypes.POINTER(_size_t), status=True)
CudaEpReleaseOptions = _declare("CudaEpReleaseOptions", _status_p, Handle, status=True)

# Provider.
CudaEpCreateProvider = _declare(
    "CudaEpCreateProvider", _status_p, Handle, ctypes.POINTER(Handle), status=True)
CudaEpReleaseProvider = _declare("CudaEpReleaseProvider", _status_p, Handle, status=True)
_string_query = (_status_p, Handle, ctypes.c_char_p, _size_t, ctypes.POINTER(_size_t))
CudaEpProviderGetBackendName = _declare(
    "CudaEpProviderGetBackendName", *_string_query, status=True)
CudaEpProviderGetAutoReason = _declare("CudaEpProviderGetAutoReason", *_string_query, status=True)
CudaEpProviderGetDeviceName = _declare("CudaEpProviderGetDeviceName", *_string_query, status=True)
CudaEpProviderGetDeviceInfo = _declare(
    "CudaEpProviderGetDeviceInfo", _status_p, Handle, ctypes.POINTER(DeviceInfoStruct),
    status=True)

errors.bind(CudaEpGetErrorCode, CudaEpGetErrorMessage, CudaEpReleaseStatus)


def two_call_string(fn, *leading):
    """Calls a two-call string function (``fn(*leading, buf, size, &needed)``) and decodes the
    result: once with no buffer for the size, then with a buffer of exactly that size."""
    needed = _size_t(0)
    fn(*leading, None, 0, ctypes.byref(needed))
    buf = ctypes.create_string_buffer(needed.value)
    fn(*leading, buf, needed.value, ctypes.byref(needed))
    return buf.value.decode("utf-8")


def library_abi_version():
    """The ABI version the loaded library implements."""
    abi = ctypes.c_uint32(0)
    CudaEpGetVersion(ctypes.byref(abi), None)
    return abi.value


if library_abi_version() < ABI_VERSION:
    raise OSError(
        f"cudaep: {lib._name} implements ABI {library_abi_version()}, "
        f"these bindings need ABI {ABI_VERSION} or later")
