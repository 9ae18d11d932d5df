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
ABI_VERSION = 2

#: Bounds on array counts (CUDAEP_MAX_RANK, CUDAEP_MAX_ARRAY, CUDAEP_MAX_KERNEL_ARGS).
MAX_RANK, MAX_ARRAY, MAX_KERNEL_ARGS = 32, 65536, 24

# Handles are uint64_t in the header: never let ctypes narrow them to a C int.
Handle = ctypes.c_uint64

_u32, _i32, _u64, _i64 = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64
_i64_p = ctypes.POINTER(ctypes.c_int64)


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


class ProviderStatsStruct(ctypes.Structure):
    """CudaEpProviderStats."""

    _fields_ = [("struct_size", _u32), ("reserved", _u32), ("device_allocs", _u64),
                ("device_frees", _u64), ("device_live_bytes", _u64)]


class TensorInfoStruct(ctypes.Structure):
    """CudaEpTensorInfo."""

    _fields_ = [("dtype", _i32), ("rank", _u32), ("shape", _i64_p), ("strides", _i64_p)]


class TensorStruct(ctypes.Structure):
    """CudaEpTensor."""

    _fields_ = [("info", TensorInfoStruct), ("memory", _u64), ("offset", _u64)]


class AttributeStruct(ctypes.Structure):
    """CudaEpAttribute."""

    _fields_ = [("name", ctypes.c_char_p), ("type", _i32), ("f", ctypes.c_float), ("i", _i64),
                ("ints", _i64_p), ("num_ints", _u64), ("s", ctypes.c_char_p)]


class ArgValue(ctypes.Union):
    """The value union of CudaEpKernelArg."""

    _fields_ = [("i32", _i32), ("u32", _u32), ("i64", _i64), ("u64", _u64), ("f32", ctypes.c_float),
                ("f64", ctypes.c_double), ("device_ptr", _u64), ("offset", _u64)]


class KernelArgStruct(ctypes.Structure):
    """CudaEpKernelArg."""

    _fields_ = [("type", _i32), ("reserved", _u32), ("value", ArgValue), ("memory", _u64)]


class LaunchConfigStruct(ctypes.Structure):
    """CudaEpLaunchConfig."""

    _fields_ = [("grid_x", _u32), ("grid_y", _u32), ("grid_z", _u32), ("block_x", _u32),
                ("block_y", _u32), ("block_z", _u32), ("shared_mem_bytes", _u32), ("reserved", _u32)]


class GraphStatsStruct(ctypes.Structure):
    """CudaEpGraphStats."""

    _fields_ = [("struct_size", _u32), ("reserved", _u32), ("lock_acquisitions", _u64),
                ("captures", _u64), ("replay_launches", _u64), ("instantiations", _u64),
                ("updates", _u64), ("update_refusals", _u64)]


class RegionStruct(ctypes.Structure):
    """CudaEpRegion."""

    _fields_ = [("mapping", _u64), ("offset", _u64), ("length", _u64)]


class WeightSpecStruct(ctypes.Structure):
    """CudaEpWeightSpec."""

    _fields_ = [("boundary", _i32), ("dtype", _i32), ("rank", _u32), ("reserved", _u32),
                ("shape", _i64_p), ("byte_count", _u64), ("regions", ctypes.POINTER(RegionStruct)),
                ("num_regions", _u64)]


class DeclineStruct(ctypes.Structure):
    """CudaEpDecline."""

    _fields_ = [("struct_size", _u32), ("reason", _i32), ("layer", _u64), ("boundary", _i32),
                ("reserved", _u32), ("layer_bytes", _u64), ("capacity", _u64)]


class ResidencyStatsStruct(ctypes.Structure):
    """CudaEpResidencyStats."""

    _fields_ = [("struct_size", _u32), ("active", _u32), ("routed", _u64), ("consumed", _u64),
                ("released", _u64), ("cancelled", _u64), ("declined_oversize", _u64),
                ("declined_busy", _u64), ("fill_errors", _u64), ("quarantined", _u64),
                ("zero_copy_layers", _u64), ("staging_layers", _u64), ("fallback_layers", _u64)]


class DoubleBufferMetricsStruct(ctypes.Structure):
    """CudaEpDoubleBufferMetrics."""

    _fields_ = [("struct_size", _u32), ("reserved", _u32), ("layers_prefetched", _u64),
                ("layers_consumed", _u64), ("layers_released", _u64), ("cancelled", _u64),
                ("stale_rejected", _u64), ("poisoned", _u64), ("slot_reuses", _u64),
                ("drained_at_close", _u64), ("bytes_prefetched", _u64), ("zero_copy_layers", _u64),
                ("staging_layers", _u64), ("fallback_layers", _u64)]


class TicketInfoStruct(ctypes.Structure):
    """CudaEpTicketInfo."""

    _fields_ = [("struct_size", _u32), ("slot", _u32), ("layer", _u64), ("generation", _u64)]


#: Every struct of the header, by its C name, for the layout test.
STRUCTS = {
    "CudaEpDeviceInfo": DeviceInfoStruct, "CudaEpProviderStats": ProviderStatsStruct,
    "CudaEpTensorInfo": TensorInfoStruct, "CudaEpTensor": TensorStruct,
    "CudaEpAttribute": AttributeStruct, "CudaEpKernelArg": KernelArgStruct,
    "CudaEpLaunchConfig": LaunchConfigStruct, "CudaEpGraphStats": GraphStatsStruct,
    "CudaEpRegion": RegionStruct, "CudaEpWeightSpec": WeightSpecStruct,
    "CudaEpDecline": DeclineStruct, "CudaEpResidencyStats": ResidencyStatsStruct,
    "CudaEpDoubleBufferMetrics": DoubleBufferMetricsStruct, "CudaEpTicketInfo": TicketInfoStruct,
}

assert ctypes.sizeof(DeviceInfoStruct) == 40, "CudaEpDeviceInfo ABI 1 layout"


def new_out_struct(cls):
    """An instance of a struct the library fills, with struct_size set."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


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

_P = ctypes.POINTER
_size_p = _P(_size_t)
_string_query = (_status_p, Handle, ctypes.c_char_p, _size_t, _size_p)


def _status_fn(name, *argtypes):
    return _declare(name, _status_p, *argtypes, status=True)


# Version and handles.
CudaEpGetVersion = _status_fn("CudaEpGetVersion", _P(_u32), _P(_char_p))
CudaEpGetLiveHandleCount = _status_fn("CudaEpGetLiveHandleCount", _P(_u64))

# Options.
CudaEpCreateOptions = _status_fn("CudaEpCreateOptions", _P(Handle))
CudaEpSetOption = _status_fn("CudaEpSetOption", Handle, _char_p, _char_p)
CudaEpGetOption = _status_fn("CudaEpGetOption", Handle, _char_p, ctypes.c_char_p, _size_t, _size_p)
CudaEpReleaseOptions = _status_fn("CudaEpReleaseOptions", Handle)

# Provider.
CudaEpCreateProvider = _status_fn("CudaEpCreateProvider", Handle, _P(Handle))
CudaEpReleaseProvider = _status_fn("CudaEpReleaseProvider", Handle)
CudaEpProviderGetBackendName = _declare("CudaEpProviderGetBackendName", *_string_query, status=True)
CudaEpProviderGetAutoReason = _declare("CudaEpProviderGetAutoReason", *_string_query, status=True)
CudaEpProviderGetDeviceName = _declare("CudaEpProviderGetDeviceName", *_string_query, status=True)
CudaEpProviderGetDeviceInfo = _status_fn("CudaEpProviderGetDeviceInfo", Handle, _P(DeviceInfoStruct))
CudaEpProviderGetStats = _status_fn("CudaEpProviderGetStats", Handle, _P(ProviderStatsStruct))
CudaEpSynchronize = _status_fn("CudaEpSynchronize", Handle)
CudaEpForceSynchronize = _status_fn("CudaEpForceSynchronize", Handle)
CudaEpSynchronizeCompute = _status_fn("CudaEpSynchronizeCompute", Handle)
CudaEpDrainForUnmap = _status_fn("CudaEpDrainForUnmap", Handle)

# Buffers.
CudaEpAllocBuffer = _status_fn("CudaEpAllocBuffer", Handle, _u64, _u64, _P(Handle))
CudaEpReleaseBuffer = _status_fn("CudaEpReleaseBuffer", Handle)
CudaEpBufferGetSize = _status_fn("CudaEpBufferGetSize", Handle, _P(_u64))
CudaEpBufferGetDevicePointer = _status_fn("CudaEpBufferGetDevicePointer", Handle, _P(_u64))
CudaEpCopyToDevice = _status_fn("CudaEpCopyToDevice", Handle, _u64, ctypes.c_void_p, _u64)
CudaEpCopyToHost = _status_fn("CudaEpCopyToHost", ctypes.c_void_p, Handle, _u64, _u64)
CudaEpCopyBuffer = _status_fn("CudaEpCopyBuffer", Handle, _u64, Handle, _u64, _u64)
CudaEpMemset = _status_fn("CudaEpMemset", Handle, _u64, _u64, ctypes.c_uint8)

# Kernels.
CudaEpGetKernel = _status_fn("CudaEpGetKernel", Handle, _char_p, _i32, _P(TensorInfoStruct), _size_t,
                             _P(AttributeStruct), _size_t, _P(Handle))
CudaEpReleaseKernel = _status_fn("CudaEpReleaseKernel", Handle)
CudaEpKernelGetName = _declare("CudaEpKernelGetName", *_string_query, status=True)
CudaEpKernelGetCaptureSupport = _status_fn("CudaEpKernelGetCaptureSupport", Handle, _P(_i32))
CudaEpKernelGetCaptureReason = _declare("CudaEpKernelGetCaptureReason", *_string_query, status=True)
CudaEpKernelGetOutputCount = _status_fn("CudaEpKernelGetOutputCount", Handle, _size_p)
CudaEpKernelGetOutputInfo = _status_fn("CudaEpKernelGetOutputInfo", Handle, _size_t, _P(_i32), _i64_p, _size_t,
                                       _size_p)
CudaEpKernelExecute = _status_fn("CudaEpKernelExecute", Handle, _P(TensorStruct), _size_t, _P(TensorStruct),
                                 _size_t)
CudaEpKernelNonZeroCount = _status_fn("CudaEpKernelNonZeroCount", Handle, _P(TensorStruct), _i64_p)

# User kernels.
CudaEpCompileModule = _status_fn("CudaEpCompileModule", Handle, _char_p, _char_p, _P(_char_p), _size_t, _P(Handle))
CudaEpLoadModule = _status_fn("CudaEpLoadModule", Handle, ctypes.c_void_p, _size_t, _P(Handle))
CudaEpReleaseModule = _status_fn("CudaEpReleaseModule", Handle)
CudaEpModuleGetPTX = _declare("CudaEpModuleGetPTX", *_string_query, status=True)
CudaEpModuleGetFunction = _status_fn("CudaEpModuleGetFunction", Handle, _char_p, _P(Handle))
CudaEpReleaseFunction = _status_fn("CudaEpReleaseFunction", Handle)
CudaEpLaunchFunction = _status_fn("CudaEpLaunchFunction", Handle, _P(LaunchConfigStruct), _P(KernelArgStruct),
                                  _size_t)

# Graphs.
_slot = (Handle, _i32, _i64)
CudaEpBeginCapture = _status_fn("CudaEpBeginCapture", *_slot, _P(Handle), _size_t, _P(Handle), _size_t)
CudaEpRecapture = _status_fn("CudaEpRecapture", *_slot, _P(Handle), _size_t, _P(Handle), _size_t)
CudaEpEndCapture = _status_fn("CudaEpEndCapture", *_slot)
CudaEpAbortCapture = _status_fn("CudaEpAbortCapture", *_slot)
CudaEpReplay = _status_fn("CudaEpReplay", *_slot)
CudaEpReplaySegment = _status_fn("CudaEpReplaySegment", *_slot, _size_t)
CudaEpResetGraph = _status_fn("CudaEpResetGraph", *_slot, _P(_i32))
CudaEpHasExecutable = _status_fn("CudaEpHasExecutable", *_slot, _P(_i32))
CudaEpGetSegmentCount = _status_fn("CudaEpGetSegmentCount", *_slot, _size_p)
CudaEpGetCaptureStatus = _status_fn("CudaEpGetCaptureStatus", Handle, _P(_i32))
CudaEpGetGraphStats = _status_fn("CudaEpGetGraphStats", *_slot, _P(GraphStatsStruct))

# Weight paging.
CudaEpOpenExternalData = _status_fn("CudaEpOpenExternalData", Handle, _char_p, _P(_u64))
CudaEpCreateLazyWeight = _status_fn("CudaEpCreateLazyWeight", Handle, _P(WeightSpecStruct), _P(Handle))
CudaEpReleaseLazyWeight = _status_fn("CudaEpReleaseLazyWeight", Handle)
CudaEpLazyWeightGetSize = _status_fn("CudaEpLazyWeightGetSize", Handle, _P(_u64))
CudaEpPrefetchWeight = _status_fn("CudaEpPrefetchWeight", Handle, _u64, Handle, _P(DeclineStruct))
CudaEpPageWeight = _status_fn("CudaEpPageWeight", Handle, _u64, _P(Handle))
CudaEpPagedWeightGetPointer = _status_fn("CudaEpPagedWeightGetPointer", Handle, _P(_u64))
CudaEpPagedWeightGetSize = _status_fn("CudaEpPagedWeightGetSize", Handle, _P(_u64))
CudaEpReleasePagedWeight = _status_fn("CudaEpReleasePagedWeight", Handle)
CudaEpCancelWeight = _status_fn("CudaEpCancelWeight", Handle, _u64)
CudaEpGetResidencyStats = _status_fn("CudaEpGetResidencyStats", Handle, _P(ResidencyStatsStruct))

# The double buffer.
CudaEpCreateDoubleBuffer = _status_fn("CudaEpCreateDoubleBuffer", Handle, _u64, _i32, _P(Handle))
CudaEpReleaseDoubleBuffer = _status_fn("CudaEpReleaseDoubleBuffer", Handle)
CudaEpDoubleBufferGetCapacity = _status_fn("CudaEpDoubleBufferGetCapacity", Handle, _P(_u64))
CudaEpDoubleBufferGetSlotState = _status_fn("CudaEpDoubleBufferGetSlotState", Handle, _u32, _P(_i32))
CudaEpDoubleBufferGetMetrics = _status_fn("CudaEpDoubleBufferGetMetrics", Handle, _P(DoubleBufferMetricsStruct))
CudaEpDoubleBufferPrefetch = _status_fn("CudaEpDoubleBufferPrefetch", Handle, _u64, Handle, _P(Handle))
CudaEpDoubleBufferWaitLayer = _status_fn("CudaEpDoubleBufferWaitLayer", Handle, _P(_u64), _P(_u64))
CudaEpDoubleBufferReleaseLayer = _status_fn("CudaEpDoubleBufferReleaseLayer", Handle)
CudaEpDoubleBufferCancelLayer = _status_fn("CudaEpDoubleBufferCancelLayer", Handle)
CudaEpTicketGetInfo = _status_fn("CudaEpTicketGetInfo", Handle, _P(TicketInfoStruct))
CudaEpReleaseTicket = _status_fn("CudaEpReleaseTicket", Handle)

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
