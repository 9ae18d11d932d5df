"""The bindings against the header: every CUDAEP_API function is declared in cudaep._native
with argtypes and restype matching its prototype, and every struct's ctypes layout matches the
header's static assertions (sizes and offsets)."""

import ctypes
import pathlib
import re
import unittest

from cudaep import _native

HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "cudaep.h"
HANDLES = {"CudaEpOptions", "CudaEpProvider", "CudaEpBuffer", "CudaEpKernel", "CudaEpModule",
           "CudaEpFunction", "CudaEpLazyWeight", "CudaEpPagedWeight", "CudaEpDoubleBuffer", "CudaEpTicket"}
SCALARS = {"uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
           "int32_t": ctypes.c_int32, "uint8_t": ctypes.c_uint8, "size_t": ctypes.c_size_t,
           "CudaEpErrorCode": ctypes.c_int}


def prototypes():
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    for m in re.finditer(r"^CUDAEP_API\b(.*?)\b(CudaEp\w+)\s*\((.*?)\)\s*;", text, flags=re.S | re.M):
        ret = m.group(1).replace("CUDAEP_MUST_USE", "").strip()
        params = []
        for p in m.group(3).split(","):
            words = [w for w in p.replace("*", " * ").split() if not w.startswith("CUDAEP_")]
            params.append(" ".join(words[:-1]).replace(" *", "*"))
        yield m.group(2), ret, params


def expected_ctype(ctype):
    """The ctypes type a C type must be declared as."""
    t = re.sub(r"\bconst\b", "", ctype).replace(" ", "")
    if t in HANDLES:
        return _native.Handle
    if t in SCALARS:
        return SCALARS[t]
    if t in ("char*",):
        return ctypes.c_char_p
    if t in ("void*", "CudaEpStatus*"):
        return ctypes.c_void_p
    if t == "char**":
        return ctypes.POINTER(ctypes.c_char_p)
    base = t[:-1]
    if t.endswith("*") and base in HANDLES:
        return ctypes.POINTER(_native.Handle)
    if t.endswith("*") and base in SCALARS:
        return ctypes.POINTER(SCALARS[base])
    if t.endswith("*") and base in _native.STRUCTS:
        return ctypes.POINTER(_native.STRUCTS[base])
    raise AssertionError(f"no ctypes rule for {ctype!r}")


class DeclarationsTest(unittest.TestCase):
    def test_every_function_is_declared_with_its_prototype(self):
        protos = list(prototypes())
        self.assertGreater(len(protos), 70)
        for name, ret, params in protos:
            with self.subTest(function=name):
                fn = getattr(_native, name, None)
                self.assertIsNotNone(fn, f"{name} is not declared in cudaep._native")
                want = [expected_ctype(p) for p in params if p != "void"]
                self.assertEqual(len(fn.argtypes), len(want))
                for i, (got, exp) in enumerate(zip(fn.argtypes, want)):
                    self.assertEqual(got, exp, f"{name} argument {i} ({params[i]})")
                if ret == "void":
                    self.assertIsNone(fn.restype)
                elif ret == "const char*":
                    self.assertEqual(fn.restype, ctypes.c_char_p)
                else:
                    self.assertEqual(fn.restype, expected_ctype(ret))


class LayoutTest(unittest.TestCase):
    def test_struct_layouts_match_the_static_assertions(self):
        text = HEADER.read_text()
        checked = 0
        for m in re.finditer(r"sizeof\((CudaEp\w+)\) == (\d+)", text):
            if m.group(1) in _native.STRUCTS:
                self.assertEqual(ctypes.sizeof(_native.STRUCTS[m.group(1)]), int(m.group(2)), m.group(1))
                checked += 1
        for m in re.finditer(r"offsetof\((CudaEp\w+), (\w+)\) == (\d+)", text):
            cls = _native.STRUCTS[m.group(1)]
            self.assertEqual(getattr(cls, m.group(2)).offset, int(m.group(3)), f"{m.group(1)}.{m.group(2)}")
            checked += 1
        self.assertGreater(checked, 50)
        for name, cls in _native.STRUCTS.items():
            self.assertRegex(text, rf"sizeof\({name}\) ==", f"{name} has no size pin in the header")

    def test_bounds_match_the_header(self):
        text = HEADER.read_text()
        for macro, value in (("CUDAEP_MAX_RANK", _native.MAX_RANK), ("CUDAEP_MAX_ARRAY", _native.MAX_ARRAY),
                             ("CUDAEP_MAX_KERNEL_ARGS", _native.MAX_KERNEL_ARGS),
                             ("CUDAEP_ABI_VERSION", _native.ABI_VERSION)):
            self.assertRegex(text, rf"#define {macro} {value}\b")


if __name__ == "__main__":
    unittest.main()
