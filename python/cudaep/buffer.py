"""Device buffers, with host data through the buffer protocol."""

import ctypes

from . import _native
from ._enum import header_enum
from ._handle import HandleObject
from .dtypes import DType
from .tensor import Tensor


def _host_view(data, writable):
    """A contiguous byte memoryview of any buffer-protocol object (bytes, bytearray,
    array.array, memoryview, numpy arrays, …) and the address of its first byte. The view must
    be kept alive while the address is used."""
    mv = memoryview(data)
    if not mv.contiguous:
        raise ValueError("host data must be contiguous")
    mv = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    if writable and mv.readonly:
        raise TypeError("the destination is read-only")
    if mv.nbytes == 0:
        return mv, None
    if mv.readonly:
        # ctypes cannot take the address of read-only memory: bytes have a stable buffer, other
        # read-only objects are copied once.
        obj = mv.obj if isinstance(mv.obj, bytes) and len(mv.obj) == mv.nbytes else mv.tobytes()
        return obj, ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value
    return mv, ctypes.addressof(ctypes.c_char.from_buffer(mv))


PeerPath = header_enum("PeerPath", "CudaEpPeerPath",
                       "CudaEpPeerPath: how :meth:`Buffer.copy_peer` moved the bytes (NONE for 0 bytes, DEVICE "
                       "within one device, DIRECT between devices that reach each other, STAGED through pinned "
                       "host memory between devices that do not).", __name__)


class Buffer(HandleObject):
    """Device memory of a provider (:meth:`Provider.alloc`). Its handle holds the provider
    alive. Host data goes in and out through the buffer protocol; numpy is optional.

    It is DLPack-exportable as ``uint8[size]`` (on the cuda backend); :meth:`view` makes typed
    views. Closing releases it; a captured graph that embeds it keeps the memory until the
    graph is destroyed.
    """

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleaseBuffer)
        self.provider = provider
        size, ptr = ctypes.c_uint64(), ctypes.c_uint64()
        _native.CudaEpBufferGetSize(handle, ctypes.byref(size))
        _native.CudaEpBufferGetDevicePointer(handle, ctypes.byref(ptr))
        self.size, self.device_ptr = size.value, ptr.value

    def write(self, data, offset=0):
        """Copies host data (any buffer-protocol object) into the buffer at offset, after the
        work already queued; returns once data may be reused."""
        view, address = _host_view(data, writable=False)
        n = len(view) if isinstance(view, bytes) else view.nbytes
        if n:
            _native.CudaEpCopyToDevice(self._handle, offset, address, n)
        return self

    def read(self, size=None, offset=0):
        """Returns size bytes (default: to the end) from offset as ``bytes``, after the work
        already queued."""
        n = self.size - offset if size is None else size
        out = bytearray(n)
        self.read_into(out, offset)
        return bytes(out)

    def read_into(self, out, offset=0):
        """Fills a writable buffer-protocol object (bytearray, array.array, numpy array, …)
        from the buffer at offset; returns out."""
        view, address = _host_view(out, writable=True)
        if view.nbytes:
            _native.CudaEpCopyToHost(address, self._handle, offset, view.nbytes)
        return out

    def memset(self, value, offset=0, size=None):
        """Queues setting size bytes (default: to the end) at offset to value."""
        n = self.size - offset if size is None else size
        _native.CudaEpMemset(self._handle, offset, n, value)
        return self

    def copy_from(self, src, size=None, dst_offset=0, src_offset=0):
        """Queues a device-to-device copy of size bytes (default: all of src from src_offset)
        from src into this buffer."""
        n = src.size - src_offset if size is None else size
        _native.CudaEpCopyBuffer(self._handle, dst_offset, src.handle, src_offset, n)
        return self

    def copy_peer(self, src, size=None, dst_offset=0, src_offset=0):
        """Queues a copy of size bytes (default: all of src from src_offset) from src, a buffer
        of a provider on any device of the same backend, into this buffer, and returns the
        :class:`PeerPath` taken. It runs after the work already queued by both buffers'
        providers, and their later work runs after it (CudaEpCopyPeer)."""
        n = src.size - src_offset if size is None else size
        path = ctypes.c_int32(-1)
        _native.CudaEpCopyPeer(self._handle, dst_offset, src.handle, src_offset, n, ctypes.byref(path))
        return PeerPath(path.value)

    def view(self, dtype, shape, offset=0, strides=None):
        """A :class:`Tensor` over this buffer."""
        return Tensor(self, dtype, shape, offset, strides)

    def __dlpack_device__(self):
        return self.view(DType.UINT8, (self.size,)).__dlpack_device__()

    def __dlpack__(self, **kwargs):
        """Exports the whole buffer as uint8 (see :meth:`Tensor.__dlpack__`)."""
        return self.view(DType.UINT8, (self.size,)).__dlpack__(**kwargs)
