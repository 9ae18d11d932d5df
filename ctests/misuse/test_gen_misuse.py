#!/usr/bin/env python3
"""The misuse generator refuses a header it has no rules for, so a function cannot be added
without misuse cases. Run by ctest: test_gen_misuse.py HEADER WRONG_STATE_C."""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_misuse  # noqa: E402

HEADER, WRONG_STATE = sys.argv[1], sys.argv[2]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class GeneratorRulesTest(unittest.TestCase):
    def setUp(self):
        self.header = read(HEADER)
        self.wrong = read(WRONG_STATE)

    def generate(self, extra):
        return gen_misuse.generate(self.header + "\n" + extra + "\n", self.wrong)

    def test_the_real_header_generates(self):
        text, cases, funcs = gen_misuse.generate(self.header, self.wrong)
        self.assertGreater(cases, 400)
        self.assertIn("misuse_CudaEpReplay", text)
        exported = len([1 for line in self.header.splitlines() if line.startswith("CUDAEP_API")])
        self.assertEqual(funcs + len(gen_misuse.EXEMPT), exported, "every function is tested or exempt")

    def test_error_cases_run_in_every_capture_window(self):
        text, _, _ = gen_misuse.generate(self.header, self.wrong)
        self.assertIn("for (int window = 0; window < WINDOWS; window++)", text)
        # The argument error of CloseExternalData runs in every window; a success only without
        # a capture (it would do its work, or be refused, during one).
        body = text[text.index("static void misuse_CudaEpCloseExternalData(int window)"):]
        body = body[:body.index("\n}\n")]
        self.assertIn("{ /* mapping = 0: CUDAEP_INVALID_ARGUMENT */", body)
        self.assertNotIn("if (window == WINDOW_NONE) { /* mapping = 0", body)
        reset = text[text.index("static void misuse_CudaEpResetGraph(int window)"):]
        self.assertIn("if (window == WINDOW_NONE) { /* out_had_graph = NULL (optional): CUDAEP_OK */", reset)

    def test_a_new_function_needs_a_state_entry(self):
        with self.assertRaisesRegex(gen_misuse.GenError, "CudaEpFrobnicate: no entry in STATES"):
            self.generate("CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpFrobnicate(CudaEpProvider provider);")

    def test_a_new_scalar_needs_a_rule(self):
        gen_misuse.STATES["CudaEpFrobnicate"] = "test only"
        try:
            with self.assertRaisesRegex(gen_misuse.GenError, "no misuse rule for the scalar parameter widgets"):
                self.generate("CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpFrobnicate(CudaEpProvider provider, "
                              "uint64_t widgets);")
            with self.assertRaisesRegex(gen_misuse.GenError, "pointer parameter out has no CUDAEP_IN/OUT annotation"):
                self.generate("CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpFrobnicate(CudaEpProvider provider, "
                              "uint64_t* out);")
            with self.assertRaisesRegex(gen_misuse.GenError, "no fixture value for the input pointer gadget"):
                self.generate("CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpFrobnicate(CudaEpProvider provider, "
                              "CUDAEP_IN const char* gadget);")
        finally:
            del gen_misuse.STATES["CudaEpFrobnicate"]

    def test_a_declaration_the_header_reader_cannot_read_is_refused(self):
        with self.assertRaisesRegex(gen_misuse.GenError, "function pointers are not supported"):
            self.generate("CUDAEP_API CUDAEP_MUST_USE CudaEpStatus* CudaEpFrobnicate(void (*callback)(void));")

    def test_a_new_handle_type_needs_a_fixture(self):
        with self.assertRaisesRegex(gen_misuse.GenError, "CudaEpWidget"):
            self.generate("typedef uint64_t CudaEpWidget;")

    def test_a_state_case_must_exist(self):
        saved = gen_misuse.STATES["CudaEpReplay"]
        gen_misuse.STATES["CudaEpReplay"] = ["no_such_case"]
        try:
            with self.assertRaisesRegex(gen_misuse.GenError, "state_no_such_case"):
                gen_misuse.generate(self.header, self.wrong)
        finally:
            gen_misuse.STATES["CudaEpReplay"] = saved


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
