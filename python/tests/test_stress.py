"""16 threads create, use and release providers at once: mirrors ctests/test_stress.c.

ctypes releases the GIL around each foreign call, so the library really sees 16 concurrent
callers."""

import ctypes
import threading

import cudaep
from cudaep import _native

from .support import TestCase

THREADS, ROUNDS = 16, 25


class StressTest(TestCase):
    def test_sixteen_threads_create_and_release(self):
        failures = []
        recent = [0] * THREADS
        shared = cudaep.Provider(backend="sim")

        def worker(tid):
            try:
                for i in range(ROUNDS):
                    with cudaep.Options(backend="sim") as opts, cudaep.Provider(opts) as p:
                        recent[tid] = p.handle
                        if p.backend_name != "sim":
                            failures.append(f"thread {tid}: backend {p.backend_name}")
                        other = recent[(tid + 1 + i) % THREADS]
                        if other:
                            try:
                                needed = ctypes.c_size_t(0)
                                _native.CudaEpProviderGetBackendName(
                                    other, None, 0, ctypes.byref(needed))
                            except cudaep.StaleHandle:
                                pass  # released by its owner meanwhile: the documented answer
                        if shared.device_info().multiprocessors != 132:
                            failures.append(f"thread {tid}: shared provider changed")
            except Exception as e:  # noqa: BLE001 - collected and reported below
                failures.append(f"thread {tid}: {e!r}")

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shared.close()
        self.assertEqual(failures, [])
