"""Options defaults, validation and read-back: mirrors ctests/test_options.c."""

import cudaep

from .support import TestCase

KEYS = ["backend", "device_id", "tf32", "staging_pool_cap_bytes", "residency_budget_bytes",
        "prefill_double_buffer", "wait_mode", "paging_path", "register_cap_bytes",
        "residency_slot_bytes"]


class OptionsTest(TestCase):
    def test_defaults(self):
        with cudaep.Options() as o:
            self.assertEqual({k: o.get(k) for k in KEYS}, {
                "backend": "cuda", "device_id": "0", "tf32": "false",
                "staging_pool_cap_bytes": "536870912", "residency_budget_bytes": "0",
                "prefill_double_buffer": "false", "wait_mode": "auto", "paging_path": "auto",
                "register_cap_bytes": "0", "residency_slot_bytes": "0"})

    def test_values_read_back_canonically(self):
        cases = [("backend", "sim", "sim"), ("backend", "auto", "auto"), ("device_id", 3, "3"),
                 ("tf32", True, "true"), ("tf32", "0", "false"),
                 ("staging_pool_cap_bytes", "256MiB", "268435456"),
                 ("residency_budget_bytes", 3 << 30, "3221225472"),
                 ("prefill_double_buffer", "1", "true"), ("wait_mode", "spin", "spin"),
                 ("wait_mode", "block", "block"), ("paging_path", "staging", "staging"),
                 ("register_cap_bytes", "16GiB", "17179869184"),
                 ("residency_slot_bytes", 64 << 20, "67108864")]
        with cudaep.Options() as o:
            for key, value, canonical in cases:
                with self.subTest(key=key, value=value):
                    o.set(key, value)
                    self.assertEqual(o.get(key), canonical)

    def test_keywords(self):
        with cudaep.Options(backend="sim", device_id=2, tf32=True) as o:
            self.assertEqual((o.get("backend"), o.get("device_id"), o.get("tf32")),
                             ("sim", "2", "true"))

    def test_bad_values_name_key_and_allowed(self):
        cases = [("backend", "gpu", "cuda, sim or auto"), ("device_id", -1, "0..2147483647"),
                 ("tf32", "yes", "true, false, 1 or 0"),
                 ("staging_pool_cap_bytes", 0, "greater than 0"),
                 ("residency_budget_bytes", "12MB", "KiB, MiB, GiB or TiB"),
                 ("wait_mode", "poll", "spin, block or auto"),
                 ("paging_path", "zero-copy", "auto, zero_copy or staging")]
        with cudaep.Options() as o:
            for key, value, allowed in cases:
                with self.subTest(key=key, value=value):
                    before = o.get(key)
                    with self.assertRaises(cudaep.InvalidArgument) as cm:
                        o.set(key, value)
                    self.assertIn(key, cm.exception.message)
                    self.assertIn(allowed, cm.exception.message)
                    self.assertEqual(o.get(key), before)

    def test_unknown_key_lists_known_keys(self):
        with cudaep.Options() as o:
            with self.assertRaises(cudaep.InvalidArgument) as cm:
                o.set("devcie_id", 0)
            self.assertIn("unknown option", cm.exception.message)
            for key in KEYS:
                self.assertIn(key, cm.exception.message)
            with self.assertRaises(cudaep.InvalidArgument):
                o.get("nope")

    def test_bad_keyword_in_constructor_releases_the_handle(self):
        with self.assertRaises(cudaep.InvalidArgument):
            cudaep.Options(backend="sim", tf32="maybe")
        self.assertEqual(cudaep.live_handle_count(), 0)
