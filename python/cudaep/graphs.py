"""Graph slots, capture status and graph counters."""

import dataclasses

from . import _cudaep_h as _h
from ._enum import header_enum


class Slot:
    """A graph slot of a provider: :attr:`PRIMARY` (the M=1 decode step), :attr:`VERIFY` (the
    fixed-width verify step) or :meth:`keyed` (one per int64 key, e.g. a batch size). Slots
    capture, replay and reset independently."""

    PRIMARY_KIND, VERIFY_KIND, KEYED_KIND = _h.CUDAEP_SLOT_PRIMARY, _h.CUDAEP_SLOT_VERIFY, _h.CUDAEP_SLOT_KEYED

    __slots__ = ("kind", "key")

    def __init__(self, kind, key=0):
        self.kind, self.key = int(kind), int(key)

    @classmethod
    def keyed(cls, key):
        """The slot of the graph captured for key."""
        return cls(cls.KEYED_KIND, key)

    def __eq__(self, other):
        return isinstance(other, Slot) and (self.kind, self.key) == (other.kind, other.key)

    def __hash__(self):
        return hash((self.kind, self.key))

    def __repr__(self):
        if self.kind == self.PRIMARY_KIND:
            return "Slot.PRIMARY"
        if self.kind == self.VERIFY_KIND:
            return "Slot.VERIFY"
        return f"Slot.keyed({self.key})"


Slot.PRIMARY = Slot(Slot.PRIMARY_KIND)
Slot.VERIFY = Slot(Slot.VERIFY_KIND)


CaptureStatus = header_enum("CaptureStatus", "CudaEpCaptureStatus",
                            "CudaEpCaptureStatus: the compute stream's capture status.", __name__)


@dataclasses.dataclass(frozen=True)
class GraphStats:
    """One slot's counters (CudaEpGraphStats)."""

    lock_acquisitions: int
    captures: int
    replay_launches: int
    instantiations: int
    updates: int
    update_refusals: int
