"""The bindings against the header (read by scripts/cheader.py): every CUDAEP_API function is
declared in cudaep._native with the argtypes and restype its prototype needs, by a mapping
written here independently of the generator's; functions returning a status raise; every
struct's ctypes layout matches the header's static assertions (sizes and offsets); and the
public enums hold the header's enumerators."""

import ctypes
import re
import unittest

import cudaep
from cudaep import _native

from .header import HEADER

HANDLES = HEADER.handles
SCALARS = {"uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
           "int32_t": ctypes.c_int32, "uint8_t": ctypes.c_uint8, "size_t": ctypes.c_size_t}


def expected_ctype(ctype):
    """The ctypes type a C type must be declared as."""
    t = re.sub(r"\bconst\b", "", ctype).replace(" ", "")
    if t in HANDLES:
        return _native.Handle
    if t in SCALARS:
        return SCALARS[t]
    if t in HEADER.enums:
        return ctypes.c_int
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
        self.assertGreater(len(HEADER.functions), 70)
        for f in HEADER.functions:
            with self.subTest(function=f.name):
                fn = getattr(_native, f.name, None)
                self.assertIsNotNone(fn, f"{f.name} is not declared in cudaep._native")
                want = [expected_ctype(p.type) for p in f.params]
                self.assertEqual(len(fn.argtypes), len(want))
                for i, (got, exp) in enumerate(zip(fn.argtypes, want)):
                    self.assertEqual(got, exp, f"{f.name} argument {i} ({f.params[i].type} {f.params[i].name})")
                if f.returns == "void":
                    self.assertIsNone(fn.restype)
                elif f.returns == "const char*":
                    self.assertEqual(fn.restype, ctypes.c_char_p)
                else:
                    self.assertEqual(fn.restype, expected_ctype(f.returns))

    def test_status_functions_raise(self):
        for f in HEADER.functions:
            with self.subTest(function=f.name):
                fn = getattr(_native, f.name)
                if f.returns_status and f.name != "CudaEpCreateStatus":
                    self.assertIs(fn.errcheck, _native._check_status)
                else:
                    self.assertIsNone(fn.errcheck, "only functions returning a status check it")


class LayoutTest(unittest.TestCase):
    def test_struct_layouts_match_the_static_assertions(self):
        checked = 0
        for pin in HEADER.size_pins:
            if pin.type in _native.STRUCTS:
                self.assertEqual(ctypes.sizeof(_native.STRUCTS[pin.type]), pin.size, pin.type)
                checked += 1
            elif pin.type in HANDLES or pin.type in HEADER.enums:
                self.assertEqual(ctypes.sizeof(expected_ctype(pin.type)), pin.size, pin.type)
                checked += 1
        for pin in HEADER.offset_pins:
            cls = _native.STRUCTS[pin.type]
            self.assertEqual(getattr(cls, pin.field).offset, pin.offset, f"{pin.type}.{pin.field}")
            checked += 1
        self.assertGreater(checked, 60)
        pinned = {pin.type for pin in HEADER.size_pins}
        for name, st in HEADER.structs.items():
            if st.opaque:
                continue
            self.assertIn(name, _native.STRUCTS, f"{name} has no ctypes layout")
            self.assertIn(name, pinned, f"{name} has no size pin in the header")


class EnumsTest(unittest.TestCase):
    def test_public_enums_hold_the_header_enumerators(self):
        public = {
            "CudaEpErrorCode": cudaep.ErrorCode, "CudaEpDType": cudaep.DType,
            "CudaEpCaptureStatus": cudaep.CaptureStatus, "CudaEpBoundary": cudaep.Boundary,
            "CudaEpDeclineReason": cudaep.DeclineReason, "CudaEpTransferMode": cudaep.TransferMode,
            "CudaEpSlotState": cudaep.SlotState,
        }
        for c_name, cls in public.items():
            with self.subTest(enum=c_name):
                members = HEADER.enums[c_name].members
                self.assertEqual([m.value for m in cls], [v for _, v in members])
                for (c_member, value), m in zip(members, cls):
                    self.assertTrue(c_member.endswith("_" + m.name), f"{c_member} is {cls.__name__}.{m.name}")
        self.assertEqual(cudaep.DType.FLOAT16.itemsize, 2)
        self.assertEqual(cudaep.DType.INT4.bits, 4)

    def test_numbers_the_package_passes_come_from_the_header(self):
        c = HEADER.enum_constants
        self.assertEqual((cudaep.Slot.PRIMARY.kind, cudaep.Slot.VERIFY.kind, cudaep.Slot.keyed(5).kind),
                         (c["CUDAEP_SLOT_PRIMARY"], c["CUDAEP_SLOT_VERIFY"], c["CUDAEP_SLOT_KEYED"]))
        self.assertEqual((cudaep.Arg.MEMORY, cudaep.Arg.DEVICE_PTR, cudaep.Arg.F64),
                         (c["CUDAEP_ARG_MEMORY"], c["CUDAEP_ARG_DEVICE_PTR"], c["CUDAEP_ARG_F64"]))
        self.assertEqual(_native.ABI_VERSION, HEADER.constants["CUDAEP_ABI_VERSION"])


if __name__ == "__main__":
    unittest.main()
