"""Operator kernels."""

import ctypes

from . import _native
from ._handle import HandleObject
from .tensor import TensorInfo, fill_info, info_of, tensor_array

_ATTR_INT, _ATTR_FLOAT = _native.CUDAEP_ATTR_INT, _native.CUDAEP_ATTR_FLOAT
_ATTR_INTS, _ATTR_STRING = _native.CUDAEP_ATTR_INTS, _native.CUDAEP_ATTR_STRING


def attribute_array(attrs, keep):
    """A CudaEpAttribute array for a dict of Python values: int → INT, float → FLOAT, a
    sequence of ints → INTS, str → STRING."""
    if not attrs:
        return None, 0
    arr = (_native.CudaEpAttribute * len(attrs))()
    for a, (name, value) in zip(arr, attrs.items()):
        encoded = name.encode()
        keep.append(encoded)
        a.name = encoded
        if isinstance(value, bool) or isinstance(value, int):
            a.type, a.i = _ATTR_INT, int(value)
        elif isinstance(value, float):
            a.type, a.f = _ATTR_FLOAT, value
        elif isinstance(value, str):
            s = value.encode()
            keep.append(s)
            a.type, a.s = _ATTR_STRING, s
        elif isinstance(value, (list, tuple)):
            ints = (ctypes.c_int64 * max(len(value), 1))(*value)
            keep.append(ints)
            a.type, a.num_ints = _ATTR_INTS, len(value)
            a.ints = ctypes.cast(ints, ctypes.POINTER(ctypes.c_int64))
        else:
            raise TypeError(f"attribute {name!r}: {type(value).__name__} is not an int, float, str or int sequence")
    keep.append(arr)
    return arr, len(attrs)


class Kernel(HandleObject):
    """One operator instance of a provider, fixed to its input types and shapes
    (:meth:`Provider.kernel`). Calls on one kernel are serialized by the library."""

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleaseKernel)
        self.provider = provider

    @classmethod
    def _make(cls, provider, op, inputs, opset, attrs):
        keep = []
        infos = [info_of(i) for i in inputs]
        arr = (_native.CudaEpTensorInfo * max(len(infos), 1))()
        for c, info in zip(arr, infos):
            fill_info(c, info, None, keep)
        attr_arr, n_attrs = attribute_array(attrs or {}, keep)
        handle = _native.Handle(0)
        _native.CudaEpGetKernel(provider.handle, op.encode(), opset, arr if infos else None, len(infos),
                                attr_arr, n_attrs, ctypes.byref(handle))
        return cls(provider, handle.value)

    @property
    def name(self):
        """E.g. ``"Add(float32[2,3], float32[3])"``."""
        return _native.two_call_string(_native.CudaEpKernelGetName, self._handle)

    @property
    def capture_supported(self):
        """Whether the kernel's work may be recorded into a CUDA graph."""
        v = ctypes.c_int32()
        _native.CudaEpKernelGetCaptureSupport(self._handle, ctypes.byref(v))
        return bool(v.value)

    @property
    def capture_reason(self):
        """Why the kernel cannot be captured; ``""`` when it can."""
        return _native.two_call_string(_native.CudaEpKernelGetCaptureReason, self._handle)

    @property
    def outputs(self):
        """The :class:`TensorInfo` of every output :meth:`execute` must be given."""
        n = ctypes.c_size_t()
        _native.CudaEpKernelGetOutputCount(self._handle, ctypes.byref(n))
        infos = []
        for i in range(n.value):
            dtype, rank = ctypes.c_int32(), ctypes.c_size_t()
            _native.CudaEpKernelGetOutputInfo(self._handle, i, ctypes.byref(dtype), None, 0, ctypes.byref(rank))
            shape = (ctypes.c_int64 * max(rank.value, 1))()
            _native.CudaEpKernelGetOutputInfo(self._handle, i, ctypes.byref(dtype), shape, rank.value, ctypes.byref(rank))
            infos.append(TensorInfo(dtype.value, tuple(shape[: rank.value])))
        return infos

    def execute(self, inputs, outputs):
        """Queues the operator on the provider's compute stream (recorded instead inside a
        capture on this thread). inputs and outputs are lists of :class:`Tensor`."""
        keep = []
        ins, n_in = tensor_array(list(inputs), keep)
        outs, n_out = tensor_array(list(outputs), keep)
        _native.CudaEpKernelExecute(self._handle, ins, n_in, outs, n_out)

    __call__ = execute

    def nonzero_count(self, count):
        """For a NonZero kernel: the count its last execution found, read from its second output
        (an int64[1] :class:`Tensor`). Waits for the compute stream."""
        keep = []
        arr, _ = tensor_array([count], keep)
        n = ctypes.c_int64()
        _native.CudaEpKernelNonZeroCount(self._handle, arr, ctypes.byref(n))
        return n.value


