"""Shared test scaffolding: every test must leave no live library handle behind, and the ABI 2
tests run on the backend CUDAEP_TEST_BACKEND names (default sim), like the C tests."""

import array
import gc
import os
import random
import tempfile
import unittest

import cudaep


def backend():
    """The backend the ABI 2 tests run on: $CUDAEP_TEST_BACKEND, default "sim"."""
    return os.environ.get("CUDAEP_TEST_BACKEND") or "sim"


def on_sim():
    return backend() == "sim"


def provider(**options):
    """A provider on the test backend with extra options."""
    return cudaep.Provider(backend=backend(), **options)


def floats(n, seed):
    """n deterministic non-zero floats in [-1, 1] as an array.array('f')."""
    rng = random.Random(seed)
    return array.array("f", (rng.choice((-1, 1)) * rng.uniform(0.05, 1.0) for _ in range(n)))


def pattern(n, seed):
    """n bytes that are a distinct non-zero function of (seed, index)."""
    return bytes((i * 7 + seed * 31) % 251 + 1 for i in range(n))


def read_floats(buffer, count=None, offset=0):
    out = array.array("f", bytes(4 * (count if count is not None else (buffer.size - offset) // 4)))
    buffer.read_into(out, offset)
    return out


class TestCase(unittest.TestCase):
    """A TestCase that checks, after each test, that all handles were released."""

    def tearDown(self):
        gc.collect()  # finalizers of objects a test dropped without closing
        self.assertEqual(cudaep.live_handle_count(), 0, "handles still live after the test")

    def assertFloatsNear(self, got, want, tol=1e-4):
        self.assertEqual(len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            if abs(g - w) > tol * (1 + abs(w)):
                self.fail(f"element {i}: {g} != {w}")

    def temp_file(self, data, name="data"):
        fd, path = tempfile.mkstemp(prefix="cudaep-", suffix="-" + name)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        self.addCleanup(os.unlink, path)
        return path
