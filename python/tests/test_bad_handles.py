"""Every kind of bad handle returns its code as an exception, never a crash: mirrors
ctests/test_bad_handles.c."""

import ctypes

import cudaep
from cudaep import _native

from .support import TestCase


def options_calls(h):
    size = ctypes.c_size_t(0)
    out = _native.Handle(0)
    return {
        "set": lambda: _native.CudaEpSetOption(h, b"backend", b"sim"),
        "get": lambda: _native.CudaEpGetOption(h, b"backend", None, 0, ctypes.byref(size)),
        "create provider": lambda: _native.CudaEpCreateProvider(h, ctypes.byref(out)),
        "release": lambda: _native.CudaEpReleaseOptions(h),
    }


def provider_calls(h):
    size = ctypes.c_size_t(0)
    info = _native.CudaEpDeviceInfo(struct_size=ctypes.sizeof(_native.CudaEpDeviceInfo))
    return {
        "backend": lambda: _native.CudaEpProviderGetBackendName(h, None, 0, ctypes.byref(size)),
        "reason": lambda: _native.CudaEpProviderGetAutoReason(h, None, 0, ctypes.byref(size)),
        "name": lambda: _native.CudaEpProviderGetDeviceName(h, None, 0, ctypes.byref(size)),
        "info": lambda: _native.CudaEpProviderGetDeviceInfo(h, ctypes.byref(info)),
        "release": lambda: _native.CudaEpReleaseProvider(h),
    }


class BadHandleTest(TestCase):
    def assert_all_raise(self, calls, cls, fragment):
        for name, call in calls.items():
            with self.subTest(call=name), self.assertRaises(cls) as cm:
                call()
            self.assertIn(fragment, cm.exception.message)

    def test_zero(self):
        self.assert_all_raise(options_calls(0), cudaep.InvalidHandle, "null handle")
        self.assert_all_raise(provider_calls(0), cudaep.InvalidHandle, "null handle")

    def test_wrong_type(self):
        with cudaep.Options(backend="sim") as opts, cudaep.Provider(opts) as prov:
            self.assert_all_raise(options_calls(prov.handle), cudaep.InvalidHandle, "wrong type")
            self.assert_all_raise(provider_calls(opts.handle), cudaep.InvalidHandle, "wrong type")
            self.assertEqual(prov.backend_name, "sim")

    def test_forged(self):
        with cudaep.Options(backend="sim") as opts, cudaep.Provider(opts) as prov:
            for forged in (0xDEADBEEFDEADBEEF, 0xFFFFFFFFFFFFFFFF, 1,
                           opts.handle + (1 << 32), prov.handle + (1 << 32),
                           opts.handle + 1000, prov.handle + 1000):
                with self.subTest(handle=hex(forged)):
                    self.assert_all_raise(options_calls(forged), cudaep.InvalidHandle, "")
                    self.assert_all_raise(provider_calls(forged), cudaep.InvalidHandle, "")
            self.assertEqual(opts.get("backend"), "sim")

    def test_stale_and_double_release(self):
        opts = cudaep.Options(backend="sim")
        prov = cudaep.Provider(opts)
        o, p = opts.handle, prov.handle
        prov.close()
        opts.close()
        self.assert_all_raise(options_calls(o), cudaep.StaleHandle, "released")
        self.assert_all_raise(provider_calls(p), cudaep.StaleHandle, "released")

    def test_closed_wrappers_raise_stale_and_close_twice_is_harmless(self):
        opts = cudaep.Options()
        opts.close()
        opts.close()
        with self.assertRaises(cudaep.StaleHandle):
            opts.set("tf32", True)
        prov = cudaep.Provider(backend="sim")
        prov.close()
        prov.close()
        with self.assertRaises(cudaep.StaleHandle):
            prov.backend_name

    def test_out_parameters_untouched_on_error(self):
        out = _native.Handle(0xA5A5A5A5A5A5A5A5)
        with self.assertRaises(cudaep.InvalidHandle):
            _native.CudaEpCreateProvider(0, ctypes.byref(out))
        self.assertEqual(out.value, 0xA5A5A5A5A5A5A5A5)

    def test_null_out_parameters(self):
        with self.assertRaises(cudaep.InvalidArgument) as cm:
            _native.CudaEpCreateOptions(None)
        self.assertIn("out_options is NULL", cm.exception.message)
