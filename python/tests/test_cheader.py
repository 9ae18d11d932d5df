"""scripts/cheader.py, the one reader of include/cudaep.h: it reads every declaration of the real
header, and refuses, naming the line, what it does not understand."""

import re
import unittest

from .header import HEADER, HEADER_PATH, cheader

PRELUDE = """
#ifndef T_H
#define T_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define CUDAEP_API
#define CUDAEP_MUST_USE
#define CUDAEP_IN
#define CUDAEP_IN_OPT
#define CUDAEP_OUT
#define CUDAEP_OUT_OPT
#define CUDAEP_INOUT
typedef struct CudaEpStatus CudaEpStatus;
"""
EPILOGUE = """
#ifdef __cplusplus
}
#endif
#endif
"""


def parse(body):
    return cheader.parse(PRELUDE + body + EPILOGUE)


class RealHeaderTest(unittest.TestCase):
    def test_every_api_declaration_is_read(self):
        text = HEADER_PATH.read_text(encoding="utf-8")
        declared = re.findall(r"^CUDAEP_API\b.*?\b(CudaEp\w+)\s*\(", text, flags=re.M)
        self.assertEqual([f.name for f in HEADER.functions], declared)
        self.assertGreater(len(HEADER.functions), 70)
        for f in HEADER.functions:
            for p in f.params:
                with self.subTest(function=f.name, param=p.name):
                    self.assertTrue(HEADER.known_type(p.base), p.type)
                    self.assertEqual(p.pointer, p.annotation is not None, "pointers and only pointers are annotated")

    def test_constants_enums_structs_and_pins(self):
        self.assertEqual(HEADER.constants["CUDAEP_MAX_RANK"], 32)
        self.assertEqual(HEADER.constants["CUDAEP_NULL_HANDLE"], 0)
        self.assertEqual(HEADER.enums["CudaEpErrorCode"].members[:2], (("CUDAEP_OK", 0), ("CUDAEP_FAIL", 1)))
        self.assertIn("CudaEpProvider", HEADER.handles)
        self.assertTrue(HEADER.structs["CudaEpStatus"].opaque)
        value = HEADER.structs["CudaEpKernelArg"].fields[2]
        self.assertEqual((value.name, value.type), ("value", "union"))
        self.assertIn("device_ptr", [f.name for f in value.aggregate.fields])
        self.assertIn(cheader.SizePin("CudaEpTensor", 40), HEADER.size_pins)
        self.assertIn(cheader.OffsetPin("CudaEpTicketInfo", "generation", 16), HEADER.offset_pins)
        self.assertIn(cheader.SizePin("CudaEpTicket", 8), HEADER.size_pins, "a pin inside a conjunction")

    def test_parameter_types_are_normalized(self):
        p = HEADER.function("CudaEpCompileModule").param("options")
        self.assertEqual((p.annotation, p.type, p.pointee, p.base), ("CUDAEP_IN_OPT", "const char* const*",
                                                                    "const char* const", "char"))
        self.assertTrue(HEADER.function("CudaEpReplay").returns_status)
        self.assertEqual(HEADER.function("CudaEpGetErrorMessage").returns, "const char*")
        self.assertIn("CUDAEP_MUST_USE", HEADER.function("CudaEpReplay").attributes)


class SubsetTest(unittest.TestCase):
    def test_declarations(self):
        h = parse("""
#define CUDAEP_LIMIT (8)
#define CUDAEP_WIDE \\
    ((uint64_t)16)
#if defined(__GNUC__)
#define CUDAEP_PICKED 1
#else
#define CUDAEP_PICKED 2
#endif
typedef uint64_t CudaEpThing;
typedef enum CudaEpKind { CUDAEP_KIND_A = 3, CUDAEP_KIND_B, CUDAEP_KIND_C = 0x10, } CudaEpKind;
typedef struct CudaEpS {
    uint32_t a, b;             /* two declarators */
    const CudaEpThing* things; // a pointer
    union { int32_t i; float f; } v;
    int64_t dims[4];
} CudaEpS;
CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpF(CudaEpThing t, CUDAEP_INOUT CudaEpS* s, CudaEpKind k);
CUDAEP_API void CudaEpG(void);
""")
        self.assertEqual(h.constants, {"CUDAEP_LIMIT": 8, "CUDAEP_WIDE": 16, "CUDAEP_PICKED": 1})
        self.assertEqual(h.enums["CudaEpKind"].members, (("CUDAEP_KIND_A", 3), ("CUDAEP_KIND_B", 4),
                                                          ("CUDAEP_KIND_C", 16)))
        self.assertEqual(h.enums["CudaEpKind"].short_members(), (("A", 3), ("B", 4), ("C", 16)))
        s = h.structs["CudaEpS"]
        self.assertEqual([(f.name, f.type, f.array) for f in s.fields],
                         [("a", "uint32_t", None), ("b", "uint32_t", None), ("things", "const CudaEpThing*", None),
                          ("v", "union", None), ("dims", "int64_t", 4)])
        f = h.function("CudaEpF")
        self.assertEqual([(p.annotation, p.type, p.name) for p in f.params],
                         [(None, "CudaEpThing", "t"), ("CUDAEP_INOUT", "CudaEpS*", "s"), (None, "CudaEpKind", "k")])
        self.assertEqual(h.function("CudaEpG").params, ())
        self.assertEqual([k for k, _ in h.order][-4:], ["enum", "struct", "function", "function"])

    def test_refusals_name_the_line(self):
        cases = {
            "int frobnicate;": "cannot read the declaration starting 'int'",
            "CUDAEP_API CudaEpStatus* CudaEpF(uint64_t);": "has no name",
            "CUDAEP_API CudaEpStatus* CudaEpF(void (*cb)(void));": "function pointers are not supported",
            "CUDAEP_API CudaEpStatus* CudaEpF(CudaEpNope n);": "unknown type 'CudaEpNope'",
            "CUDAEP_API CudaEpStatus* CudaEpF(const CUDAEP_IN char* s);": "an annotation must come first",
            "typedef enum CudaEpE { CUDAEP_E_A = CUDAEP_NOWHERE } CudaEpE;": "cannot evaluate CUDAEP_E_A",
            "#frobnicate": "unknown directive #frobnicate",
        }
        for body, message in cases.items():
            with self.subTest(body=body), self.assertRaisesRegex(cheader.HeaderError, message) as cm:
                parse(body)
            if not body.startswith("CUDAEP_API CudaEpStatus* CudaEpF(CudaEpNope"):
                self.assertRegex(str(cm.exception), r"^line \d+: ")

    def test_annotations_must_be_defined(self):
        with self.assertRaisesRegex(cheader.HeaderError, "CUDAEP_INOUT"):
            cheader.parse(PRELUDE.replace("#define CUDAEP_INOUT\n", "") + EPILOGUE)


if __name__ == "__main__":
    unittest.main()
