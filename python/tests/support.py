"""Shared test scaffolding: every test must leave no live library handle behind."""

import gc
import unittest

import cudaep


class TestCase(unittest.TestCase):
    """A TestCase that checks, after each test, that all handles were released."""

    def tearDown(self):
        gc.collect()  # finalizers of objects a test dropped without closing
        self.assertEqual(cudaep.live_handle_count(), 0, "handles still live after the test")
