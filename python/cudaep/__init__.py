"""cudaep: Python bindings (ctypes) for libcudaep.so, the CUDA execution provider.

>>> import cudaep
>>> with cudaep.Provider(backend="sim") as p:
...     p.backend_name
'sim'

The library is loaded from ``$CUDAEP_LIBRARY``, else from ``build/libcudaep.so`` of the source
tree, else through the dynamic loader. Failures raise a subclass of :class:`cudaep.Error` — one
per status code — carrying ``code`` and ``message``.
"""

import ctypes

from . import _native
from .errors import (
    CudaError,
    Error,
    ErrorCode,
    Fail,
    InvalidArgument,
    InvalidHandle,
    NotFound,
    OutOfMemory,
    StaleHandle,
    Unsupported,
    WrongState,
)
from .options import Options
from .provider import DeviceInfo, Provider

__all__ = [
    "CudaError", "DeviceInfo", "Error", "ErrorCode", "Fail", "InvalidArgument", "InvalidHandle",
    "NotFound", "Options", "OutOfMemory", "Provider", "StaleHandle", "Unsupported", "WrongState",
    "live_handle_count", "version",
]


def version():
    """``(abi_version, library_version)``, e.g. ``(1, "0.1.0")``."""
    abi = ctypes.c_uint32(0)
    lib_version = ctypes.c_char_p()
    _native.CudaEpGetVersion(ctypes.byref(abi), ctypes.byref(lib_version))
    return abi.value, lib_version.value.decode()


def live_handle_count():
    """How many library handles (of every type) are live now: 0 after everything is closed."""
    count = ctypes.c_uint64(0)
    _native.CudaEpGetLiveHandleCount(ctypes.byref(count))
    return count.value
