"""Status round trip, error classes and the version: mirrors ctests/test_status.c."""

import ctypes
import os
import re
import unittest

import cudaep
from cudaep import _native, errors

from .support import TestCase


class StatusTest(TestCase):
    def test_codes_are_pinned(self):
        self.assertEqual(
            [(c.name, int(c)) for c in cudaep.ErrorCode],
            [("OK", 0), ("FAIL", 1), ("INVALID_ARGUMENT", 2), ("INVALID_HANDLE", 3),
             ("STALE_HANDLE", 4), ("NOT_FOUND", 5), ("OUT_OF_MEMORY", 6), ("CUDA_ERROR", 7),
             ("UNSUPPORTED", 8), ("WRONG_STATE", 9), ("STALE_GENERATION", 10), ("DECLINED", 11)])
        for code in cudaep.ErrorCode:
            self.assertEqual(_native.CudaEpGetErrorCodeName(code).decode(), "CUDAEP_" + code.name)

    def test_round_trip_every_code_into_its_exception_class(self):
        classes = {
            cudaep.ErrorCode.FAIL: cudaep.Fail,
            cudaep.ErrorCode.INVALID_ARGUMENT: cudaep.InvalidArgument,
            cudaep.ErrorCode.INVALID_HANDLE: cudaep.InvalidHandle,
            cudaep.ErrorCode.STALE_HANDLE: cudaep.StaleHandle,
            cudaep.ErrorCode.NOT_FOUND: cudaep.NotFound,
            cudaep.ErrorCode.OUT_OF_MEMORY: cudaep.OutOfMemory,
            cudaep.ErrorCode.CUDA_ERROR: cudaep.CudaError,
            cudaep.ErrorCode.UNSUPPORTED: cudaep.Unsupported,
            cudaep.ErrorCode.WRONG_STATE: cudaep.WrongState,
            cudaep.ErrorCode.STALE_GENERATION: cudaep.StaleGeneration,
            cudaep.ErrorCode.DECLINED: cudaep.Declined,
        }
        for code, cls in classes.items():
            message = f"message for {code.name} ✓"
            status = _native.CudaEpCreateStatus(code, message.encode())
            self.assertTrue(status)
            self.assertEqual(_native.CudaEpGetErrorCode(status), code)
            self.assertEqual(_native.CudaEpGetErrorMessage(status).decode(), message)
            err = errors.from_status(status)  # frees the status
            self.assertIs(type(err), cls)
            self.assertIsInstance(err, cudaep.Error)
            self.assertEqual(err.code, code)
            self.assertEqual(err.message, message)
            self.assertIn(message, str(err))
            self.assertIn("CUDAEP_" + code.name, str(err))

    def test_null_semantics(self):
        self.assertIsNone(_native.CudaEpCreateStatus(cudaep.ErrorCode.OK, b"ignored"))
        self.assertEqual(_native.CudaEpGetErrorCode(None), 0)
        self.assertEqual(_native.CudaEpGetErrorMessage(None), b"")
        _native.CudaEpReleaseStatus(None)
        status = _native.CudaEpCreateStatus(1234, b"odd code")
        self.assertEqual(_native.CudaEpGetErrorCode(status), cudaep.ErrorCode.FAIL)
        _native.CudaEpReleaseStatus(status)

    def test_library_errors_raise_their_class(self):
        with self.assertRaises(cudaep.InvalidHandle) as cm:
            _native.CudaEpSetOption(0, b"backend", b"sim")
        self.assertEqual(cm.exception.code, cudaep.ErrorCode.INVALID_HANDLE)
        self.assertIn("null handle", cm.exception.message)

    def test_version(self):
        abi, version = cudaep.version()
        self.assertEqual(abi, _native.ABI_VERSION)
        self.assertRegex(version, r"^\d+\.\d+\.\d+")
        expected = os.environ.get("CUDAEP_EXPECTED_VERSION")
        if expected:
            self.assertEqual(version, expected)
        self.assertTrue(re.match(r"^\d+$", str(abi)))


class OrtStatsTest(unittest.TestCase):
    """CudaEpGetOrtStats through the bindings: with no ONNX Runtime in this process nothing of
    the adapter is alive, and a short struct is refused."""

    def test_nothing_alive_without_onnx_runtime(self):
        s = cudaep.ort_stats()
        self.assertIsInstance(s, cudaep.OrtStats)
        self.assertEqual((s.sessions, s.partitions, s.device_live_bytes), (0, 0, 0))

    def test_short_struct_is_refused(self):
        raw = _native.CudaEpOrtStats()
        raw.struct_size = 8
        with self.assertRaises(cudaep.InvalidArgument):
            _native.CudaEpGetOrtStats(ctypes.byref(raw))
