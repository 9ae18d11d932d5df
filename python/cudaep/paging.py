"""Weight paging: external data, lazy weights, the residency and the double buffer."""

import ctypes
import dataclasses

from . import _native
from ._enum import header_enum
from ._handle import HandleObject
from .tensor import Tensor


Boundary = header_enum("Boundary", "CudaEpBoundary", "CudaEpBoundary: the kind of operator that consumes a weight.",
                       __name__)

DeclineReason = header_enum("DeclineReason", "CudaEpDeclineReason",
                            "CudaEpDeclineReason; NONE means the weight was routed.", __name__)


@dataclasses.dataclass(frozen=True)
class Decline:
    """The outcome of :meth:`Provider.prefetch_weight`. ``routed`` is true when the upload was
    queued; otherwise ``reason`` says why the host must load the layer the ordinary way."""

    reason: DeclineReason
    layer: int
    boundary: Boundary
    layer_bytes: int
    capacity: int

    @property
    def routed(self):
        return self.reason == DeclineReason.NONE


TransferMode = header_enum("TransferMode", "CudaEpTransferMode",
                           "CudaEpTransferMode: how a double buffer moves bytes to the device.", __name__)

SlotState = header_enum("SlotState", "CudaEpSlotState", "CudaEpSlotState: where a double-buffer slot is in its cycle.",
                        __name__)


@dataclasses.dataclass(frozen=True)
class ResidencyStats:
    """The residency's counters (CudaEpResidencyStats); ``active`` once the pipeline is built."""

    active: bool
    routed: int
    consumed: int
    released: int
    cancelled: int
    declined_oversize: int
    declined_busy: int
    fill_errors: int
    quarantined: int
    zero_copy_layers: int
    staging_layers: int
    fallback_layers: int


@dataclasses.dataclass(frozen=True)
class DoubleBufferMetrics:
    """A double buffer's counters (CudaEpDoubleBufferMetrics)."""

    layers_prefetched: int
    layers_consumed: int
    layers_released: int
    cancelled: int
    stale_rejected: int
    poisoned: int
    slot_reuses: int
    drained_at_close: int
    bytes_prefetched: int
    zero_copy_layers: int
    staging_layers: int
    fallback_layers: int


@dataclasses.dataclass(frozen=True)
class TicketInfo:
    """What a ticket names: its slot, layer and the slot generation it is valid for."""

    slot: int
    layer: int
    generation: int


def fields_of(struct, cls, **overrides):
    """Builds the dataclass cls from the same-named fields of a ctypes struct."""
    values = {f.name: getattr(struct, f.name) for f in dataclasses.fields(cls) if f.name not in overrides}
    return cls(**values, **overrides)


class LazyWeight(HandleObject):
    """A weight that lives in external-data files of its provider until paged
    (:meth:`Provider.lazy_weight`)."""

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleaseLazyWeight)
        self.provider = provider
        n = ctypes.c_uint64()
        _native.CudaEpLazyWeightGetSize(handle, ctypes.byref(n))
        self.size = n.value


class PagedWeight(HandleObject):
    """A layer's weight image in a residency slot (:meth:`Provider.page_weight`): use it as
    :class:`Tensor` memory, then close it once the kernels reading it are queued, so the slot
    can take a later layer."""

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleasePagedWeight)
        self.provider = provider
        ptr, n = ctypes.c_uint64(), ctypes.c_uint64()
        _native.CudaEpPagedWeightGetPointer(handle, ctypes.byref(ptr))
        _native.CudaEpPagedWeightGetSize(handle, ctypes.byref(n))
        self.device_ptr, self.size = ptr.value, n.value

    def view(self, dtype, shape, offset=0):
        """A :class:`Tensor` over the paged image."""
        return Tensor(self, dtype, shape, offset)


class DoubleBuffer(HandleObject):
    """A two-slot prefill pipeline driven directly with tickets (:meth:`Provider.double_buffer`).
    Closing it drains and frees it once its tickets are closed too."""

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleaseDoubleBuffer)
        self.provider = provider

    @property
    def capacity(self):
        """The slot size in bytes."""
        n = ctypes.c_uint64()
        _native.CudaEpDoubleBufferGetCapacity(self._handle, ctypes.byref(n))
        return n.value

    def slot_state(self, slot):
        """Slot 0 or 1's :class:`SlotState`."""
        s = ctypes.c_int32()
        _native.CudaEpDoubleBufferGetSlotState(self._handle, slot, ctypes.byref(s))
        return SlotState(s.value)

    def metrics(self):
        """A :class:`DoubleBufferMetrics` snapshot."""
        m = _native.new_out_struct(_native.CudaEpDoubleBufferMetrics)
        _native.CudaEpDoubleBufferGetMetrics(self._handle, ctypes.byref(m))
        return fields_of(m, DoubleBufferMetrics)

    def recover(self):
        """Puts quarantined slots back in service; returns how many."""
        n = ctypes.c_uint32()
        _native.CudaEpDoubleBufferRecover(self._handle, ctypes.byref(n))
        return n.value

    def fallback(self):
        """Why the last zero-copy fill fell back to staging, or ""."""
        return _native.two_call_string(_native.CudaEpDoubleBufferGetFallback, self._handle)

    def prefetch(self, layer, weight):
        """Queues layer's image into a free slot and returns its :class:`Ticket`."""
        t = _native.Handle(0)
        _native.CudaEpDoubleBufferPrefetch(self._handle, layer, weight.handle, ctypes.byref(t))
        return Ticket(self, t.value)


class Ticket(HandleObject):
    """The claim on one prefetched layer. :meth:`wait` makes it usable as :class:`Tensor`
    memory; :meth:`release_layer` or :meth:`cancel_layer` frees its slot; :meth:`close` drops
    the handle (not the layer). A ticket whose slot was reused raises
    :class:`cudaep.StaleGeneration`."""

    def __init__(self, double_buffer, handle):
        self._own(handle, _native.CudaEpReleaseTicket)
        self.double_buffer = double_buffer
        self.provider = double_buffer.provider
        self.device_ptr, self.size = 0, 0

    def wait(self):
        """Fences the compute stream on the upload (the host does not wait); returns
        ``(device_ptr, size)``."""
        ptr, n = ctypes.c_uint64(), ctypes.c_uint64()
        _native.CudaEpDoubleBufferWaitLayer(self._handle, ctypes.byref(ptr), ctypes.byref(n))
        self.device_ptr, self.size = ptr.value, n.value
        return self.device_ptr, self.size

    def release_layer(self):
        """Records the release fence and frees the slot for a later layer."""
        _native.CudaEpDoubleBufferReleaseLayer(self._handle)

    def cancel_layer(self):
        """Abandons the layer and frees its slot without quarantine."""
        _native.CudaEpDoubleBufferCancelLayer(self._handle)

    @property
    def info(self):
        """A :class:`TicketInfo`."""
        i = _native.new_out_struct(_native.CudaEpTicketInfo)
        _native.CudaEpTicketGetInfo(self._handle, ctypes.byref(i))
        return TicketInfo(i.slot, i.layer, i.generation)

    def view(self, dtype, shape, offset=0):
        """A :class:`Tensor` over the waited-for layer."""
        return Tensor(self, dtype, shape, offset)
