"""Loading libcudaep.so and declaring its C functions for ctypes.

The declarations are generated from include/cudaep.h into ``_cudaep_h`` (by
scripts/gen_ctypes.py): every function's argtypes and restype, every struct as a
``ctypes.Structure``, every enumerator and integer macro as a constant. This module re-exports
them, applies the function declarations to the loaded library (module attributes named as the
C functions), and gives every function that returns a ``CudaEpStatus*`` an ``errcheck`` that
turns a non-NULL status into the matching :class:`cudaep.Error` subclass (and frees the
status), so callers simply call them.

The library is found, in order, at ``$CUDAEP_LIBRARY``, at ``build/libcudaep.so`` of the source
tree this package sits in (when it is the repository's ``python/cudaep``), at
``onnxruntime_ep_cudaep/libcudaep.so`` beside this package (where the ``onnxruntime-ep-cudaep``
wheel installs the library, the file ONNX Runtime registers), and through the dynamic loader
(``libcudaep.so``).
"""

import ctypes
import ctypes.util
import os
from pathlib import Path

from . import _cudaep_h, errors
from ._cudaep_h import *  # noqa: F401,F403  the header's constants, handle types and structs
from ._cudaep_h import FUNCTIONS, STATUS_FUNCTIONS, STRUCTS  # noqa: F401

#: The ABI version these declarations describe (CUDAEP_ABI_VERSION of the header).
ABI_VERSION = _cudaep_h.CUDAEP_ABI_VERSION

# Handles are uint64_t in the header: never let ctypes narrow them to a C int.
Handle = ctypes.c_uint64

#: Functions that return a status without failing: they make one (for the host to return).
_STATUS_FACTORIES = frozenset({"CudaEpCreateStatus"})


def new_out_struct(cls):
    """An instance of a struct the library fills, with struct_size set."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


def _candidates():
    env = os.environ.get("CUDAEP_LIBRARY")
    if env:
        yield env
    package = Path(__file__).resolve().parent
    if package.parent.name == "python":  # the source tree: python/cudaep
        yield str(package.parents[1] / "build" / "libcudaep.so")
    # Installed from the wheel: the library lies in the plugin-EP package beside this one.
    yield str(package.parent / "onnxruntime_ep_cudaep" / "libcudaep.so")
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


def _check_status(status, func, args):
    """errcheck for CudaEpStatus* results: NULL is success, anything else raises."""
    if status:
        raise errors.from_status(status)
    return None


def _declare(name):
    restype, argtypes = FUNCTIONS[name]
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    if name in STATUS_FUNCTIONS and name not in _STATUS_FACTORIES:
        fn.errcheck = _check_status
    globals()[name] = fn
    return fn


# The version first: a library older than these declarations may lack functions they name.
for _name in ("CudaEpGetErrorCode", "CudaEpGetErrorMessage", "CudaEpReleaseStatus", "CudaEpGetVersion"):
    _declare(_name)
errors.bind(CudaEpGetErrorCode, CudaEpGetErrorMessage, CudaEpReleaseStatus)  # noqa: F405


def library_abi_version():
    """The ABI version the loaded library implements."""
    abi = ctypes.c_uint32(0)
    CudaEpGetVersion(ctypes.byref(abi), None)  # noqa: F405
    return abi.value


if library_abi_version() < ABI_VERSION:
    raise OSError(
        f"cudaep: {lib._name} implements ABI {library_abi_version()}, "
        f"these bindings need ABI {ABI_VERSION} or later")

for _name in FUNCTIONS:
    _declare(_name)
del _name


def two_call_string(fn, *leading):
    """Calls a two-call string function (``fn(*leading, buf, size, &needed)``) and decodes the
    result: once with no buffer for the size, then with a buffer of exactly that size."""
    needed = ctypes.c_size_t(0)
    fn(*leading, None, 0, ctypes.byref(needed))
    buf = ctypes.create_string_buffer(needed.value)
    fn(*leading, buf, needed.value, ctypes.byref(needed))
    return buf.value.decode("utf-8")

