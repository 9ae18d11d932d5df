"""cudaep: Python bindings (ctypes) for libcudaep.so, the CUDA execution provider.

>>> import cudaep
>>> with cudaep.Provider(backend="sim") as p:
...     p.backend_name
'sim'

The library is loaded from ``$CUDAEP_LIBRARY``, else from ``build/libcudaep.so`` of the source
tree, else from the ``onnxruntime-ep-cudaep`` wheel's ``onnxruntime_ep_cudaep/libcudaep.so`` (the
file ONNX Runtime registers, when the package was installed from the wheel), else through the
dynamic loader. Failures raise a subclass of :class:`cudaep.Error` — one per status code —
carrying ``code`` and ``message``.

The namespace holds what ``__all__`` lists, ``__version__`` (the loaded library's version, as
:func:`version` reports it) and the package's submodules.
"""

import ctypes as _ctypes
import dataclasses as _dataclasses

from . import _native
from .buffer import Buffer, PeerPath
from .dlpack import live_exports as dlpack_live_exports
from .dtypes import DType
from .errors import (
    CudaError,
    Declined,
    DLPackUnsupported,
    Error,
    ErrorCode,
    Fail,
    InvalidArgument,
    InvalidHandle,
    NotFound,
    OutOfMemory,
    StaleGeneration,
    StaleHandle,
    Unsupported,
    WrongState,
)
from .graphs import CaptureStatus, GraphStats, Slot
from .kernel import Kernel
from .options import Options
from .paging import (
    Boundary,
    Decline,
    DeclineReason,
    DoubleBuffer,
    DoubleBufferMetrics,
    LazyWeight,
    PagedWeight,
    ResidencyStats,
    SlotState,
    Ticket,
    TicketInfo,
    TransferMode,
)
from .provider import DeviceInfo, Provider, ProviderStats
from .tensor import Tensor, TensorInfo
from .user_kernels import Arg, Function, Module

__all__ = [
    "Arg", "Boundary", "Buffer", "CaptureStatus", "CudaError", "DLPackUnsupported", "DType", "Decline",
    "DeclineReason", "Declined", "DeviceInfo", "DoubleBuffer", "DoubleBufferMetrics", "Error", "ErrorCode",
    "Fail", "Function", "GraphStats", "InvalidArgument", "InvalidHandle", "Kernel", "LazyWeight", "Module",
    "NotFound", "Options", "OrtStats", "OutOfMemory", "PagedWeight", "PeerPath", "Provider", "ProviderStats", "ResidencyStats",
    "Slot", "SlotState", "StaleGeneration", "StaleHandle", "Tensor", "TensorInfo", "Ticket", "TicketInfo",
    "TransferMode", "Unsupported", "WrongState", "dlpack_live_exports", "live_handle_count", "ort_stats", "version",
]


def version():
    """``(abi_version, library_version)`` of the loaded library, e.g. ``(5, "0.1.0")``."""
    abi = _ctypes.c_uint32(0)
    lib_version = _ctypes.c_char_p()
    _native.CudaEpGetVersion(_ctypes.byref(abi), _ctypes.byref(lib_version))
    return abi.value, lib_version.value.decode()


#: The loaded library's version (ep.Version, the one source the wheel's version comes from too).
__version__ = version()[1]


@_dataclasses.dataclass(frozen=True)
class OrtStats:
    """The ONNX Runtime adapter's process-wide counters (CudaEpOrtStats): sessions and
    partitions alive, bytes read from external-data files and copied from ORT's values, layers
    paged, runs, graph captures and replays, the device bytes held (cached included), the sync
    streams ORT holds, the runs queued on them unwaited and the notifications ORT activated;
    since ABI 5 the graph nodes run inside fused kernels and the partition inputs and outputs
    read or written in ORT's device tensors in place or copied through plan buffers."""

    sessions: int
    partitions: int
    weight_file_bytes: int
    weight_ort_bytes: int
    paged_layers: int
    paged_bytes: int
    runs: int
    captures: int
    replays: int
    device_live_bytes: int
    device_cached_bytes: int
    sync_streams: int
    stream_runs: int
    notifications: int
    fused_nodes: int
    values_in_place: int
    values_copied: int


def ort_stats():
    """The :class:`OrtStats` of the ONNX Runtime plugin EP in this process (all zero until ONNX
    Runtime loads the library as an execution provider; load it from the same file)."""
    s = _native.new_out_struct(_native.CudaEpOrtStats)
    _native.CudaEpGetOrtStats(_ctypes.byref(s))
    return OrtStats(**{f.name: getattr(s, f.name) for f in _dataclasses.fields(OrtStats)})


def live_handle_count():
    """How many library handles (of every type) are live now: 0 after everything is closed."""
    count = _ctypes.c_uint64(0)
    _native.CudaEpGetLiveHandleCount(_ctypes.byref(count))
    return count.value
