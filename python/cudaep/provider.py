"""Execution providers."""

import contextlib
import ctypes
import dataclasses
import os

from . import _native
from ._handle import HandleObject
from .buffer import Buffer
from .graphs import CaptureStatus, GraphStats, Slot
from .kernel import Kernel
from .options import Options
from .paging import (Boundary, Decline, DeclineReason, DoubleBuffer, LazyWeight, PagedWeight,
                     ResidencyStats, TransferMode, fields_of)
from .dtypes import dtype_of
from .user_kernels import Module


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What a provider reports about its device."""

    ordinal: int
    name: str
    compute_capability: tuple
    multiprocessors: int
    total_memory: int
    free_memory: int


@dataclasses.dataclass(frozen=True)
class ProviderStats:
    """A provider's device-memory counters (CudaEpProviderStats)."""

    device_allocs: int
    device_frees: int
    device_live_bytes: int


def _slot_args(slot):
    if not isinstance(slot, Slot):
        raise TypeError(f"{slot!r} is not a cudaep.Slot (Slot.PRIMARY, Slot.VERIFY or Slot.keyed(k))")
    return slot.kind, slot.key


def _handle_array(objects):
    objects = list(objects)
    if not objects:
        return None, 0
    return (_native.Handle * len(objects))(*(o.handle for o in objects)), len(objects)


class Provider(HandleObject):
    """A CUDA execution provider on one device.

    Pass an :class:`Options`, or option keywords: ``Provider(backend="sim")``. The default
    backend is ``cuda``, which raises :class:`cudaep.NotFound` on a machine without a usable
    CUDA driver (never falling back silently); ``backend="auto"`` falls back to the simulator
    and says why in :attr:`auto_reason`.

    Use it as a context manager, or call :meth:`close`; an unclosed provider is released when
    garbage-collected. Objects made from it (buffers, kernels, …) keep it alive in the library
    until they are closed too.
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
        self._own(handle.value, _native.CudaEpReleaseProvider)
        # Fixed for the provider's life; cached so that DLPack exports of its memory know their
        # device after the provider's own handle was closed.
        self._backend = self.backend_name
        self.device_ordinal = self.device_info().ordinal

    # --- the device ---------------------------------------------------------------------

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
        raw = _native.new_out_struct(_native.CudaEpDeviceInfo)
        _native.CudaEpProviderGetDeviceInfo(self._handle, ctypes.byref(raw))
        name = _native.two_call_string(_native.CudaEpProviderGetDeviceName, self._handle)
        return DeviceInfo(
            ordinal=raw.ordinal, name=name,
            compute_capability=(raw.compute_major, raw.compute_minor),
            multiprocessors=raw.multiprocessors,
            total_memory=raw.total_memory_bytes, free_memory=raw.free_memory_bytes)

    def stats(self):
        """The :class:`ProviderStats` device-memory counters."""
        s = _native.new_out_struct(_native.CudaEpProviderStats)
        _native.CudaEpProviderGetStats(self._handle, ctypes.byref(s))
        return fields_of(s, ProviderStats)

    def synchronize(self):
        """The deferred synchronization hook: returns at once (reads wait for what they need)."""
        _native.CudaEpSynchronize(self._handle)

    def force_synchronize(self):
        """Waits for all work of the device (and for live captures on other threads to end)."""
        _native.CudaEpForceSynchronize(self._handle)

    def synchronize_compute(self):
        """Waits for the work queued on the compute stream (one stream synchronization): how a
        host waits for a replayed step. Refused while a graph slot is capturing."""
        _native.CudaEpSynchronizeCompute(self._handle)

    def drain_for_unmap(self):
        """:meth:`force_synchronize` before unmapping host memory queued work may read."""
        _native.CudaEpDrainForUnmap(self._handle)

    # --- memory and kernels -------------------------------------------------------------

    def alloc(self, size, alignment=0):
        """A :class:`Buffer` of size bytes (uninitialized), aligned to alignment (0: 256)."""
        h = _native.Handle(0)
        _native.CudaEpAllocBuffer(self._handle, size, alignment, ctypes.byref(h))
        return Buffer(self, h.value)

    def upload(self, data, alignment=0):
        """A new :class:`Buffer` holding the bytes of data (any buffer-protocol object)."""
        n = memoryview(data).nbytes
        b = self.alloc(max(n, 1), alignment)
        try:
            b.write(data)
        except BaseException:
            b.close()
            raise
        return b

    def kernel(self, op, inputs, attrs=None, opset=21):
        """The :class:`Kernel` for an ONNX op over inputs (TensorInfos, Tensors or
        ``(dtype, shape)`` pairs) with attributes (a dict: int, float, str, int sequence)."""
        return Kernel._make(self, op, inputs, opset, attrs)

    def load_module(self, ptx):
        """A user :class:`Module` from PTX text (str or bytes)."""
        data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        h = _native.Handle(0)
        _native.CudaEpLoadModule(self._handle, data, len(data), ctypes.byref(h))
        return Module(self, h.value)

    def compile_module(self, source, name="module.cu", options=()):
        """A user :class:`Module` compiled from CUDA C with NVRTC (raises
        :class:`cudaep.Unsupported` on the simulator; a compile error's message carries the
        compiler's log)."""
        opts = [o.encode() for o in options]
        arr = (ctypes.c_char_p * max(len(opts), 1))(*opts)
        h = _native.Handle(0)
        _native.CudaEpCompileModule(self._handle, source.encode(), name.encode(), arr if opts else None,
                                    len(opts), ctypes.byref(h))
        return Module(self, h.value)

    # --- graphs -------------------------------------------------------------------------

    def begin_capture(self, slot=Slot.PRIMARY, kernels=(), retain=()):
        """Audits kernels and begins capturing the slot (see the header's capture thread rule:
        the recorded calls and :meth:`end_capture` must run on this OS thread). retain lists
        the buffers the step touches, kept until the graph is destroyed."""
        ks, nk = _handle_array(kernels)
        bs, nb = _handle_array(retain)
        _native.CudaEpBeginCapture(self._handle, *_slot_args(slot), ks, nk, bs, nb)

    def recapture(self, slot=Slot.PRIMARY, kernels=(), retain=()):
        """Retires the slot's graph and captures its successor (updated in place where the
        topology is unchanged)."""
        ks, nk = _handle_array(kernels)
        bs, nb = _handle_array(retain)
        _native.CudaEpRecapture(self._handle, *_slot_args(slot), ks, nk, bs, nb)

    def end_capture(self, slot=Slot.PRIMARY):
        """Ends, instantiates and installs the slot's capture."""
        _native.CudaEpEndCapture(self._handle, *_slot_args(slot))

    def abort_capture(self, slot=Slot.PRIMARY):
        """Discards the slot's live capture (nothing to do without one)."""
        _native.CudaEpAbortCapture(self._handle, *_slot_args(slot))

    @contextlib.contextmanager
    def capture(self, slot=Slot.PRIMARY, kernels=(), retain=(), recapture=False):
        """Captures the calls of the ``with`` block into slot: ends the capture when the block
        completes, aborts it when the block raises."""
        (self.recapture if recapture else self.begin_capture)(slot, kernels, retain)
        try:
            yield self
        except BaseException:
            self.abort_capture(slot)
            raise
        self.end_capture(slot)

    def replay(self, slot=Slot.PRIMARY):
        """Launches every installed segment of the slot (no lock, no allocation)."""
        _native.CudaEpReplay(self._handle, *_slot_args(slot))

    def replay_segment(self, slot, index):
        """Launches one installed segment of the slot."""
        _native.CudaEpReplaySegment(self._handle, *_slot_args(slot), index)

    def reset_graph(self, slot=Slot.PRIMARY):
        """Destroys the slot's graph; returns whether one was installed."""
        had = ctypes.c_int32()
        _native.CudaEpResetGraph(self._handle, *_slot_args(slot), ctypes.byref(had))
        return bool(had.value)

    def remove_graph(self, slot):
        """Resets a keyed slot and forgets its key, making room for another (at most 128 keyed
        slots at a time); removing a key not held does nothing."""
        _native.CudaEpRemoveGraph(self._handle, *_slot_args(slot))

    def has_executable(self, slot=Slot.PRIMARY):
        """Whether the slot has a graph to replay."""
        v = ctypes.c_int32()
        _native.CudaEpHasExecutable(self._handle, *_slot_args(slot), ctypes.byref(v))
        return bool(v.value)

    def segment_count(self, slot=Slot.PRIMARY):
        """The number of installed segments of the slot."""
        n = ctypes.c_size_t()
        _native.CudaEpGetSegmentCount(self._handle, *_slot_args(slot), ctypes.byref(n))
        return n.value

    @property
    def capture_status(self):
        """The compute stream's :class:`CaptureStatus`."""
        v = ctypes.c_int32()
        _native.CudaEpGetCaptureStatus(self._handle, ctypes.byref(v))
        return CaptureStatus(v.value)

    def graph_stats(self, slot=Slot.PRIMARY):
        """The slot's :class:`GraphStats`."""
        s = _native.new_out_struct(_native.CudaEpGraphStats)
        _native.CudaEpGetGraphStats(self._handle, *_slot_args(slot), ctypes.byref(s))
        return fields_of(s, GraphStats)

    # --- weight paging ------------------------------------------------------------------

    def open_external_data(self, path):
        """Maps an external-data file read-only; returns its mapping id for regions."""
        m = ctypes.c_uint64()
        _native.CudaEpOpenExternalData(self._handle, os.fsencode(path), ctypes.byref(m))
        return m.value

    def close_external_data(self, mapping):
        """Gives up one reference to an opened file (each open of a path took one); the last
        close unmaps it. Refused with :class:`cudaep.WrongState` while a layer read from it is in
        flight."""
        _native.CudaEpCloseExternalData(self._handle, mapping)

    def recover_weights(self):
        """Puts the residency's quarantined slots back in service; returns how many."""
        n = ctypes.c_uint32()
        _native.CudaEpRecoverWeights(self._handle, ctypes.byref(n))
        return n.value

    def weight_fallback(self):
        """Why the residency's last zero-copy fill fell back to staging, or ""."""
        return _native.two_call_string(_native.CudaEpGetWeightFallback, self._handle)

    def lazy_weight(self, regions, dtype, shape, boundary=Boundary.MATMUL, byte_count=0):
        """A :class:`LazyWeight`: regions are ``(mapping, offset, length)`` triples whose
        concatenation is the weight's image."""
        regions = list(regions)
        shape = tuple(int(d) for d in shape)
        rs = (_native.CudaEpRegion * max(len(regions), 1))(*(_native.CudaEpRegion(*r) for r in regions))
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        spec = _native.CudaEpWeightSpec(
            boundary=int(boundary), dtype=int(dtype_of(dtype)), rank=len(shape), reserved=0,
            shape=ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)) if shape else None,
            byte_count=byte_count, regions=rs if regions else None, num_regions=len(regions))
        h = _native.Handle(0)
        _native.CudaEpCreateLazyWeight(self._handle, ctypes.byref(spec), ctypes.byref(h))
        return LazyWeight(self, h.value)

    def prefetch_weight(self, layer, weight):
        """Routes layer's weight through the residency; returns a :class:`Decline` (``routed``
        when the upload was queued)."""
        d = _native.new_out_struct(_native.CudaEpDecline)
        _native.CudaEpPrefetchWeight(self._handle, layer, weight.handle, ctypes.byref(d))
        return Decline(DeclineReason(d.reason), d.layer, Boundary(d.boundary), d.layer_bytes, d.capacity)

    def page_weight(self, layer):
        """Consumes a prefetched layer: a :class:`PagedWeight` (close it once its kernels are
        queued)."""
        h = _native.Handle(0)
        _native.CudaEpPageWeight(self._handle, layer, ctypes.byref(h))
        return PagedWeight(self, h.value)

    def cancel_weight(self, layer):
        """Abandons a prefetched layer that will not be paged."""
        _native.CudaEpCancelWeight(self._handle, layer)

    def residency_stats(self):
        """The residency's :class:`ResidencyStats`."""
        s = _native.new_out_struct(_native.CudaEpResidencyStats)
        _native.CudaEpGetResidencyStats(self._handle, ctypes.byref(s))
        return fields_of(s, ResidencyStats, active=bool(s.active))

    def double_buffer(self, slot_bytes, mode=TransferMode.ZERO_COPY):
        """A directly driven :class:`DoubleBuffer` of two slots of slot_bytes (raises
        :class:`cudaep.Declined` when the staging pool cannot hold two such layers)."""
        h = _native.Handle(0)
        _native.CudaEpCreateDoubleBuffer(self._handle, slot_bytes, int(mode), ctypes.byref(h))
        return DoubleBuffer(self, h.value)
