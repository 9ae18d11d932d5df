"""Tensor descriptors: a type and shape (TensorInfo), and a view of device memory (Tensor)."""

import ctypes
import dataclasses
import math

from . import _native, dlpack
from .dtypes import DType, dtype_of


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """An element type and a row-major shape; ``()`` is a scalar."""

    dtype: DType
    shape: tuple

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_of(self.dtype))
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def nbytes(self):
        """The tensor's size in bytes."""
        return math.prod(self.shape) * self.dtype.itemsize


def info_of(value):
    """Converts a TensorInfo, a Tensor, or a (dtype, shape) pair to a TensorInfo."""
    if isinstance(value, TensorInfo):
        return value
    if isinstance(value, Tensor):
        return value.info
    dtype, shape = value
    return TensorInfo(dtype, shape)


class Tensor:
    """A tensor in device memory: element type, shape and byte offset into ``memory`` (a
    :class:`Buffer`, a :class:`PagedWeight` or a waited-for :class:`Ticket`), optionally with
    strides in elements. Kernels need dense row-major tensors: other strides are refused by the
    library with :class:`cudaep.Unsupported`.

    A Tensor keeps its memory object alive. It exports itself through DLPack (on the cuda
    backend) without a copy: ``torch.from_dlpack(tensor)``.
    """

    def __init__(self, memory, dtype, shape, offset=0, strides=None):
        self.memory = memory
        self.info = TensorInfo(dtype, shape)
        self.offset = int(offset)
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.info.shape):
            raise ValueError(f"{len(self.strides)} strides for a rank {len(self.info.shape)} shape")

    @property
    def dtype(self):
        return self.info.dtype

    @property
    def shape(self):
        return self.info.shape

    def __repr__(self):
        return f"<cudaep.Tensor {self.dtype.name.lower()}{list(self.shape)} at +{self.offset} of {self.memory!r}>"

    # --- DLPack -------------------------------------------------------------------------

    def __dlpack_device__(self):
        """``(kDLCUDA, ordinal)``; raises :class:`cudaep.DLPackUnsupported` on the simulator."""
        provider = self.memory.provider
        return dlpack.device_of(provider._backend, provider.device_ordinal)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the tensor as a "dltensor" capsule without copying.

        Work the provider has queued is waited for first (the consumer may read the memory
        on any stream) unless ``stream == -1`` (the consumer asks for no synchronization).
        The export keeps the memory alive until the consumer releases it. ``max_version`` is
        accepted and a legacy (unversioned) capsule returned, as DLPack allows; ``copy=True``
        and another ``dl_device`` are refused with BufferError (this producer never copies).
        """
        device = self.__dlpack_device__()
        if copy:
            raise BufferError("cudaep exports device memory without copying; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"cudaep memory lives on {device}, not {tuple(dl_device)}")
        if self.strides is not None and self.strides != _dense_strides(self.shape):
            raise BufferError("only dense row-major tensors are exported")
        end = self.offset + self.info.nbytes
        if end > self.memory.size:
            raise BufferError(f"the tensor's bytes [{self.offset}, {end}) lie outside its {self.memory.size}-byte memory")
        if stream != -1:
            self.memory.provider.force_synchronize()
        return dlpack.export(self, device, self.memory.device_ptr + self.offset, self.dtype, self.shape)

    # --- the C struct -------------------------------------------------------------------

    def _fill(self, c, keep):
        """Fills a CudaEpTensor; keep collects the ctypes arrays it points at."""
        fill_info(c.info, self.info, self.strides, keep)
        c.memory = self.memory.handle
        c.offset = self.offset


def _dense_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def fill_info(c, info, strides, keep):
    """Fills a CudaEpTensorInfo from info (and strides); keep collects the arrays."""
    c.dtype = int(info.dtype)
    c.rank = len(info.shape)
    shape = (ctypes.c_int64 * max(len(info.shape), 1))(*info.shape)
    keep.append(shape)
    c.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    if strides is None:
        c.strides = None
    else:
        s = (ctypes.c_int64 * max(len(strides), 1))(*strides)
        keep.append(s)
        c.strides = ctypes.cast(s, ctypes.POINTER(ctypes.c_int64))


def tensor_array(tensors, keep):
    """A CudaEpTensor array (or None when empty) for a list of Tensors."""
    if not tensors:
        return None, 0
    arr = (_native.CudaEpTensor * len(tensors))()
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"tensor {i} is a {type(t).__name__}, not a cudaep.Tensor")
        t._fill(arr[i], keep)
    keep.append(arr)
    return arr, len(tensors)
