"""Execution providers."""

import ctypes
import dataclasses
import weakref

from . import _native
from .options import Options


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What a provider reports about its device."""

    ordinal: int
    name: str
    compute_capability: tuple
    multiprocessors: int
    total_memory: int
    free_memory: int


def _release_quietly(handle):
    # Runs from a finalizer (garbage collection or interpreter exit): never raise there.
    try:
        _native.CudaEpReleaseProvider(handle)
    except Exception:  # noqa: BLE001 - an already released handle is fine here
        pass


class Provider:
    """A CUDA execution provider on one device.

    Pass an :class:`Options`, or option keywords: ``Provider(backend="sim")``. The default
    backend is ``cuda``, which raises :class:`cudaep.NotFound` on a machine without a usable
    CUDA driver (never falling back silently); ``backend="auto"`` falls back to the simulator
    and says why in :attr:`auto_reason`.

    Use it as a context manager, or call :meth:`close`; an unclosed provider is released when
    garbage-collected.
    """

    def __init__(self, options=None, **keywords):
        if options is not None and keywords:
            raise TypeError("pass either an Options object or option keywords, not both")
        handle = _native.Handle(0)
        if options is None:
            with Options(**keywords) as opts:
                _native.CudaEpCreateProvider(opts.handle, ctypes.byref(handle))
        else:
            _native.CudaEpCreateProvider(options.handle, ctypes.byref(handle))
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, _release_quietly, self._handle)

    @property
    def handle(self):
        """The 64-bit handle, for passing to the C functions in :mod:`cudaep._native`."""
        return self._handle

    @property
    def backend_name(self):
        """``"cuda"`` or ``"sim"``."""
        return _native.two_call_string(_native.CudaEpProviderGetBackendName, self._handle)

    @property
    def auto_reason(self):
        """Why ``backend="auto"`` chose its backend; ``""`` for an explicit backend."""
        return _native.two_call_string(_native.CudaEpProviderGetAutoReason, self._handle)

    def device_info(self):
        """The device's :class:`DeviceInfo` (free memory is read now)."""
        raw = _native.DeviceInfoStruct()
        raw.struct_size = ctypes.sizeof(raw)
        _native.CudaEpProviderGetDeviceInfo(self._handle, ctypes.byref(raw))
        name = _native.two_call_string(_native.CudaEpProviderGetDeviceName, self._handle)
        return DeviceInfo(
            ordinal=raw.ordinal, name=name,
            compute_capability=(raw.compute_major, raw.compute_minor),
            multiprocessors=raw.multiprocessors,
            total_memory=raw.total_memory_bytes, free_memory=raw.free_memory_bytes)

    def close(self):
        """Releases the provider. Closing twice is harmless; using it afterwards raises
        :class:`cudaep.StaleHandle`."""
        if self._finalizer.detach() is not None:
            _native.CudaEpReleaseProvider(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
