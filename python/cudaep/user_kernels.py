"""User kernels: PTX or CUDA C (NVRTC) modules and typed launches."""

import ctypes

from . import _native
from ._handle import HandleObject


class Arg:
    """A typed user-kernel argument (CudaEpKernelArg). Make one with the class methods."""

    MEMORY, DEVICE_PTR = _native.CUDAEP_ARG_MEMORY, _native.CUDAEP_ARG_DEVICE_PTR
    I32, U32, I64, U64 = _native.CUDAEP_ARG_I32, _native.CUDAEP_ARG_U32, _native.CUDAEP_ARG_I64, _native.CUDAEP_ARG_U64
    F32, F64 = _native.CUDAEP_ARG_F32, _native.CUDAEP_ARG_F64

    __slots__ = ("type", "value", "target")

    def __init__(self, type_, value, target=None):
        self.type, self.value, self.target = type_, value, target

    @classmethod
    def memory(cls, memory, offset=0):
        """The checked device address offset bytes into a Buffer, PagedWeight or waited-for Ticket."""
        return cls(cls.MEMORY, int(offset), memory)

    @classmethod
    def ptr(cls, address):
        """A raw device address (unchecked)."""
        return cls(cls.DEVICE_PTR, int(address))

    @classmethod
    def i32(cls, v):
        return cls(cls.I32, int(v))

    @classmethod
    def u32(cls, v):
        return cls(cls.U32, int(v))

    @classmethod
    def i64(cls, v):
        return cls(cls.I64, int(v))

    @classmethod
    def u64(cls, v):
        return cls(cls.U64, int(v))

    @classmethod
    def f32(cls, v):
        return cls(cls.F32, float(v))

    @classmethod
    def f64(cls, v):
        return cls(cls.F64, float(v))

    def _fill(self, c):
        c.type = self.type
        if self.type == Arg.MEMORY:
            c.memory = self.target.handle
            c.value.offset = self.value
        elif self.type == Arg.DEVICE_PTR:
            c.value.device_ptr = self.value
        else:
            field = {Arg.I32: "i32", Arg.U32: "u32", Arg.I64: "i64", Arg.U64: "u64",
                     Arg.F32: "f32", Arg.F64: "f64"}[self.type]
            setattr(c.value, field, self.value)


class Module(HandleObject):
    """Device code a host brought (:meth:`Provider.load_module`, :meth:`Provider.compile_module`).
    Its functions keep it loaded."""

    def __init__(self, provider, handle):
        self._own(handle, _native.CudaEpReleaseModule)
        self.provider = provider

    @property
    def ptx(self):
        """The module's PTX text."""
        return _native.two_call_string(_native.CudaEpModuleGetPTX, self._handle)

    def function(self, name):
        """The entry point name, as a :class:`Function`."""
        h = _native.Handle(0)
        _native.CudaEpModuleGetFunction(self._handle, name.encode(), ctypes.byref(h))
        return Function(self, h.value)


def _dim3(v):
    v = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(v) <= 3:
        raise ValueError(f"a grid or block has 1 to 3 extents, not {len(v)}")
    return v + (1,) * (3 - len(v))


class Function(HandleObject):
    """One entry point of a module, launched on the provider's compute stream."""

    def __init__(self, module, handle):
        self._own(handle, _native.CudaEpReleaseFunction)
        self.module = module
        self.provider = module.provider

    def launch(self, grid, block, args=(), shared_mem=0):
        """Queues the kernel over grid × block threads (ints or up to 3 extents) with typed
        :class:`Arg` arguments in declaration order (recorded instead inside a capture on this
        thread). The library checks the arguments against the PTX's parameters."""
        cfg = _native.CudaEpLaunchConfig(*_dim3(grid), *_dim3(block), shared_mem, 0)
        args = list(args)
        arr = (_native.CudaEpKernelArg * max(len(args), 1))()
        for c, a in zip(arr, args):
            if not isinstance(a, Arg):
                raise TypeError(f"{a!r} is not a cudaep.Arg")
            a._fill(c)
        _native.CudaEpLaunchFunction(self._handle, ctypes.byref(cfg), arr if args else None, len(args))
