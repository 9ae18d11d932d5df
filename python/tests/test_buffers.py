"""Device buffers from Python, host data through the buffer protocol: mirrors
ctests/test_buffers.c."""

import array
import ctypes

import cudaep

from .support import TestCase, pattern, provider


class BufferTest(TestCase):
    def test_alignment_size_and_pointer(self):
        with provider() as p:
            for align in (0, 256, 4096, 1 << 16):
                with self.subTest(align=align), p.alloc(1000, align) as b:
                    self.assertEqual(b.size, 1000)
                    self.assertEqual(b.device_ptr % (align or 256), 0)
                    b.write(pattern(1000, align & 0xFF))
            with self.assertRaises(cudaep.InvalidArgument) as cm:
                p.alloc(0)
            self.assertIn("size is 0", cm.exception.message)
            with self.assertRaises(cudaep.InvalidArgument):
                p.alloc(64, 48)
            with self.assertRaises(cudaep.InvalidArgument) as cm:
                p.alloc(1 << 62)
            self.assertIn("larger than the device", cm.exception.message)

    def test_host_data_in_and_out_through_the_buffer_protocol(self):
        src = pattern(4096, 3)
        with provider() as p, p.alloc(4096) as a, p.alloc(4096) as b:
            a.memset(0x5A)
            a.write(src[:1000], offset=100)                  # bytes
            want = bytearray(b"\x5a" * 4096)
            want[100:1100] = src[:1000]
            self.assertEqual(a.read(), bytes(want))
            out = bytearray(200)
            a.read_into(memoryview(out), offset=150)         # a writable memoryview
            self.assertEqual(bytes(out), src[50:250])
            floats = array.array("f", [1.5, -2.25, 3.0])      # array.array, typed
            a.write(floats, offset=8)
            back = array.array("f", [0.0] * 3)
            a.read_into(back, offset=8)
            self.assertEqual(back, floats)
            a.write(memoryview(bytearray(src[:16])).toreadonly(), offset=0)  # read-only, not bytes
            self.assertEqual(a.read(16), src[:16])

            b.memset(0xC3)
            b.copy_from(a, 1000, dst_offset=8, src_offset=100)
            b.memset(0x7E, offset=1500, size=16)
            want_b = bytearray(b"\xc3" * 4096)
            want_b[8:1008] = want[100:1100]
            want_b[1500:1516] = b"\x7e" * 16
            self.assertEqual(b.read(), bytes(want_b))

            with self.assertRaises(cudaep.InvalidArgument) as cm:
                a.write(src[:11], offset=4086)
            self.assertIn("outside the 4096-byte buffer", cm.exception.message)
            with self.assertRaises(TypeError):
                a.read_into(b"immutable")
            with self.assertRaises(ValueError):
                a.write(memoryview(bytearray(64))[::2])  # not contiguous

    def test_counters(self):
        with provider() as p:
            before = p.stats()
            b = p.alloc(12345)
            mid = p.stats()
            self.assertEqual(mid.device_allocs, before.device_allocs + 1)
            self.assertGreaterEqual(mid.device_live_bytes, before.device_live_bytes + 12345)
            b.close()
            after = p.stats()
            self.assertEqual(after.device_frees, before.device_frees + 1)
            self.assertEqual(after.device_live_bytes, before.device_live_bytes)

    def test_provider_closed_before_its_buffer(self):
        p = provider()
        b = p.alloc(256)
        p.close()
        with self.assertRaises(cudaep.StaleHandle):
            p.alloc(16)
        data = pattern(256, 9)
        b.write(data)                      # the buffer keeps the provider alive
        self.assertEqual(b.read(), data)
        b.close()
        b.close()                          # twice is harmless
        with self.assertRaises(cudaep.StaleHandle):
            b.read(4)

    def test_finalizer_releases_a_dropped_buffer(self):
        with provider() as p:
            p.alloc(64)                    # dropped at once
        import gc
        gc.collect()
        self.assertEqual(cudaep.live_handle_count(), 0)

    def test_synchronize(self):
        with provider() as p:
            p.synchronize()
            p.force_synchronize()
            p.synchronize_compute()
            p.drain_for_unmap()

    def test_out_parameters_untouched_on_error(self):
        from cudaep import _native
        size = ctypes.c_uint64(0xA5A5)
        with self.assertRaises(cudaep.InvalidHandle):
            _native.CudaEpBufferGetSize(0, ctypes.byref(size))
        self.assertEqual(size.value, 0xA5A5)
