"""DLPack export of device memory (``__dlpack__`` / ``__dlpack_device__``), implemented with
ctypes after the DLPack C header's layout (the legacy, unversioned ``DLManagedTensor``).

An export makes a ``DLManagedTensor`` in memory this module owns and wraps it in a PyCapsule
named ``"dltensor"``. The managed tensor holds a strong reference to the exporting Python
object (a buffer, or a view of one), so its device memory stays allocated until the consumer
calls the deleter (or the capsule is dropped unconsumed). Nothing is copied.

On the simulated device the memory is not addressable by other libraries: export raises
:class:`cudaep.DLPackUnsupported` (a :class:`BufferError`) instead of pretending to be CUDA or
host memory.
"""

import ctypes
import threading

from .dtypes import DType
from .errors import DLPackUnsupported

#: DLDeviceType values used here.
KDL_CPU, KDL_CUDA = 1, 2

# DLDataTypeCode per DType: (code, bits). kDLInt=0, kDLUInt=1, kDLFloat=2, kDLBfloat=4, kDLBool=6.
_DL_DTYPES = {
    DType.FLOAT32: (2, 32), DType.FLOAT16: (2, 16), DType.FLOAT64: (2, 64), DType.BFLOAT16: (4, 16),
    DType.INT8: (0, 8), DType.INT16: (0, 16), DType.INT32: (0, 32), DType.INT64: (0, 64),
    DType.UINT8: (1, 8), DType.UINT16: (1, 16), DType.UINT32: (1, 32), DType.UINT64: (1, 64),
    DType.BOOL: (6, 8),
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]

# Exports alive, by the managed tensor's address: the ctypes objects (which own the memory the
# consumer reads) and the exporting object (which owns the device memory).
_live = {}
_live_lock = threading.Lock()


def _delete(managed):
    # The DLManagedTensor deleter: the consumer is done (or the capsule died unconsumed).
    with _live_lock:
        _live.pop(ctypes.addressof(managed.contents), None)


_deleter = _Deleter(_delete)

_CAPSULE_NAME = b"dltensor"
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# Private prototypes of the capsule API: attributes of ctypes.pythonapi are shared by every
# user of it in the process, whose argtypes could be changed under us.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _Destructor)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _destroy_capsule(capsule):
    # A capsule still named "dltensor" was never consumed: free the export. A consumer renames
    # it "used_dltensor" and calls the deleter itself when it is done.
    if _capsule_is_valid(capsule, _CAPSULE_NAME):
        address = _capsule_get_pointer(capsule, _CAPSULE_NAME)
        _delete(ctypes.cast(address, ctypes.POINTER(DLManagedTensor)))


_destructor = _Destructor(_destroy_capsule)


def live_exports():
    """The number of exports whose consumer has not yet released them."""
    with _live_lock:
        return len(_live)


def device_of(backend, ordinal):
    """The (device_type, device_id) DLPack reports for memory of a provider."""
    if backend != "cuda":
        raise DLPackUnsupported(
            f"DLPack export needs backend=cuda: the {backend} backend's device memory is simulated "
            "and not addressable by other libraries (and it is not host memory either)")
    return KDL_CUDA, ordinal


def export(owner, device, data, dtype, shape):
    """Makes a "dltensor" capsule over dense row-major device memory at data, keeping owner
    alive until the consumer releases it."""
    if dtype not in _DL_DTYPES:
        raise DLPackUnsupported(f"DLPack has no type for {dtype.name.lower()}")
    code, bits = _DL_DTYPES[dtype]
    managed = DLManagedTensor()
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data = data
    t.device = DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = None  # dense row-major
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    with _live_lock:
        _live[address] = (managed, dims, owner)
    try:
        return _capsule_new(address, _CAPSULE_NAME, _destructor)
    except BaseException:
        with _live_lock:
            _live.pop(address, None)
        raise
