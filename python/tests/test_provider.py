"""Providers on the sim backend; the errors of backend=cuda without a driver and of a device
id out of range; context managers and finalizers: mirrors ctests/test_provider.c."""

import gc

import cudaep

from .support import TestCase


class ProviderTest(TestCase):
    def test_sim_provider(self):
        with cudaep.Provider(backend="sim") as p:
            self.assertEqual(p.backend_name, "sim")
            self.assertEqual(p.auto_reason, "")
            info = p.device_info()
            self.assertEqual(info.ordinal, 0)
            self.assertEqual(info.name, "cudaep simulated device")
            self.assertEqual(info.compute_capability, (9, 0))
            self.assertEqual(info.multiprocessors, 132)
            self.assertEqual(info.total_memory, 16 << 30)
            self.assertGreater(info.free_memory, 0)
            self.assertLessEqual(info.free_memory, info.total_memory)

    def test_provider_keeps_its_own_copy_of_the_options(self):
        opts = cudaep.Options(backend="sim")
        with cudaep.Provider(opts) as p:
            opts.set("backend", "cuda")
            opts.close()
            self.assertEqual(p.backend_name, "sim")

    def test_options_and_keywords_are_exclusive(self):
        with cudaep.Options(backend="sim") as o, self.assertRaises(TypeError):
            cudaep.Provider(o, backend="sim")

    def test_device_id_out_of_range_names_count(self):
        with self.assertRaises(cudaep.NotFound) as cm:
            cudaep.Provider(backend="sim", device_id=7)
        self.assertIn("device_id 7", cm.exception.message)
        self.assertIn("1 device", cm.exception.message)

    def test_cuda_backend_fails_clearly_or_is_cuda(self):
        try:
            p = cudaep.Provider()  # the default backend, cuda
        except cudaep.NotFound as e:
            self.assertIn("backend=sim", e.message)
        else:
            with p:
                self.assertEqual(p.backend_name, "cuda")

    def test_auto_backend_says_why(self):
        with cudaep.Provider(backend="auto") as p:
            self.assertIn(p.backend_name, ("cuda", "sim"))
            self.assertIn("auto chose " + p.backend_name, p.auto_reason)

    def test_finalizer_releases_an_unclosed_provider(self):
        p = cudaep.Provider(backend="sim")
        self.assertEqual(cudaep.live_handle_count(), 1)
        del p
        gc.collect()
        self.assertEqual(cudaep.live_handle_count(), 0)
