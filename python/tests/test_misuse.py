"""Every function of the header, called through ctypes with a zero, forged, released or
wrong-type handle, raises (never crashes) and leaves the library usable: the Python mirror of
the generated C misuse test (ctests/misuse), derived from the header the same way, so a new
function is covered without editing this file."""

import ctypes
import re

import cudaep
from cudaep import _native

from .header import HEADER
from .support import TestCase, provider

HANDLES = HEADER.handles
EXEMPT = {"CudaEpCreateStatus", "CudaEpGetErrorCode", "CudaEpGetErrorMessage", "CudaEpReleaseStatus",
          "CudaEpGetErrorCodeName", "CudaEpGetVersion", "CudaEpGetLiveHandleCount", "CudaEpCreateOptions",
          "CudaEpGetOrtStats"}


def params_of(name):
    """(annotation, type without qualifiers, name) of each parameter of the function name."""
    return [(p.annotation, re.sub(r"\bconst\b|\s", "", p.type), p.name) for p in HEADER.function(name).params]


def dummy(argtype, ctype):
    """A harmless valid-looking argument: zeroed storage (struct_size set) for pointers."""
    if argtype in (ctypes.c_char_p,):
        return b"x"
    if argtype is ctypes.c_void_p:
        return ctypes.cast(ctypes.create_string_buffer(64), ctypes.c_void_p)
    if hasattr(argtype, "_type_") and isinstance(argtype._type_, type) and issubclass(argtype._type_, ctypes.Structure):
        s = argtype._type_()
        if hasattr(s, "struct_size"):
            s.struct_size = ctypes.sizeof(s)
        return ctypes.pointer(s)
    if hasattr(argtype, "_type_") and argtype._type_ is ctypes.c_char_p:
        return (ctypes.c_char_p * 1)(b"x")
    if hasattr(argtype, "contents"):
        return ctypes.pointer(argtype._type_())
    return 0 if argtype is not ctypes.c_size_t else 0


class MisuseTest(TestCase):
    def test_every_function_refuses_bad_handles(self):
        with provider() as p, p.alloc(64) as live_buffer:
            released = p.alloc(64)
            released.close()
            bad = {
                "zero": (0, (cudaep.InvalidHandle,)),
                "forged": (0xDEADBEEFDEADBEEF, (cudaep.InvalidHandle,)),
                "next generation": (live_buffer.handle + (1 << 32), (cudaep.InvalidHandle,)),
                "wrong type": (p.handle, (cudaep.InvalidHandle,)),
                "released buffer": (released.handle, (cudaep.InvalidHandle, cudaep.StaleHandle)),
            }
            tested = 0
            for name in (f.name for f in HEADER.functions):
                if name in EXEMPT:
                    continue
                fn = getattr(_native, name)
                params = params_of(name)
                handle_positions = [i for i, (_a, t, _n) in enumerate(params) if t in HANDLES]
                self.assertTrue(handle_positions, f"{name} takes no handle and is not exempt")
                for pos in handle_positions:
                    for label, (value, accepted) in bad.items():
                        if params[pos][1] == "CudaEpProvider" and label == "wrong type":
                            value = live_buffer.handle
                        if params[pos][1] == "CudaEpBuffer" and label == "released buffer":
                            accepted = (cudaep.StaleHandle,)
                        args = [dummy(t, params[i][1]) for i, t in enumerate(fn.argtypes)]
                        live = {"CudaEpProvider": p.handle, "CudaEpBuffer": live_buffer.handle}
                        for i in handle_positions:
                            args[i] = value if i == pos else live.get(params[i][1], value)
                        with self.subTest(function=name, parameter=params[pos][2], handle=label):
                            # Another argument may be refused first (a zeroed struct, a NULL
                            # name): the call must still fail with an argument or handle error.
                            with self.assertRaises(cudaep.Error) as cm:
                                fn(*args)
                            self.assertIsInstance(cm.exception, accepted + (cudaep.InvalidArgument,))
                            tested += 1
            self.assertGreater(tested, 300)
            self.assertEqual(live_buffer.read(4), live_buffer.read(4))  # still usable
            self.assertEqual(p.backend_name, p._backend)

    def test_null_out_parameters(self):
        with provider() as p, p.alloc(64) as b:
            for fn, args in ((_native.CudaEpBufferGetSize, (b.handle, None)),
                             (_native.CudaEpProviderGetStats, (p.handle, None)),
                             (_native.CudaEpAllocBuffer, (p.handle, 16, 0, None)),
                             (_native.CudaEpGetCaptureStatus, (p.handle, None))):
                with self.subTest(fn=fn.__name__), self.assertRaises(cudaep.InvalidArgument):
                    fn(*args)

