"""Weight paging from Python, from a real external-data file: the residency one layer ahead
across wraparound, typed declines, cancel; the double buffer driven directly, cancel, stale
tickets, two pipelines, the capacity decline: mirrors ctests/test_paging.c."""

import os

import cudaep
from cudaep import Boundary, DeclineReason, SlotState, TransferMode

from .support import TestCase, pattern, provider

HEADER, LAYERS, SIZE = 100, 5, 12288 + 60


class PagingTest(TestCase):
    def setUp(self):
        os.environ.pop("CUDAEP_PREFILL_DOUBLE_BUFFER", None)
        self.layers = [pattern(SIZE, i + 1) for i in range(LAYERS)]
        self.path = self.temp_file(b"\xee" * HEADER + b"".join(self.layers), "layers.onnx.data")

    def weights(self, p, boundary=Boundary.MATMUL):
        mapping = p.open_external_data(self.path)
        out = []
        for i in range(LAYERS):
            off, half = HEADER + i * SIZE, SIZE // 2
            w = p.lazy_weight([(mapping, off, half), (mapping, off + half, SIZE - half)], "uint8", (SIZE,), boundary)
            self.assertEqual(w.size, SIZE)
            out.append(w)
        return out

    def read_back(self, p, memory, n):
        """The bytes of a paged weight or waited-for ticket, copied by Identity over bool."""
        with p.kernel("Identity", [("bool", (n,))], opset=13) as k, p.alloc(n) as out:
            k([memory.view("bool", (n,))], [out.view("bool", (n,))])
            return out.read()

    def test_residency_pages_one_layer_ahead_across_wraparound(self):
        with provider(prefill_double_buffer=True) as p:
            ws = self.weights(p)
            self.assertTrue(p.prefetch_weight(0, ws[0]).routed)
            ptrs = []
            for n in range(LAYERS):
                if n + 1 < LAYERS:
                    d = p.prefetch_weight(n + 1, ws[n + 1])
                    self.assertTrue(d.routed, d)
                with p.page_weight(n) as pw:
                    self.assertEqual(pw.size, SIZE)
                    ptrs.append(pw.device_ptr)
                    self.assertEqual(self.read_back(p, pw, SIZE), self.layers[n], f"layer {n}")
            self.assertEqual(len(set(ptrs)), 2, "two stable slots, reused")
            s = p.residency_stats()
            self.assertTrue(s.active)
            self.assertEqual((s.routed, s.consumed, s.released, s.quarantined), (LAYERS, LAYERS, LAYERS, 0))
            for w in ws:
                w.close()

    def test_declines_and_cancel(self):
        with provider() as off:
            ws = self.weights(off)
            d = off.prefetch_weight(0, ws[0])
            self.assertEqual(d.reason, DeclineReason.DISABLED)
            self.assertFalse(d.routed)
            with self.assertRaises(cudaep.WrongState):
                off.page_weight(0)
            self.assertFalse(off.residency_stats().active)
            for w in ws:
                w.close()
        with provider(prefill_double_buffer=True) as p:
            gather = self.weights(p, Boundary.GATHER)
            d = p.prefetch_weight(0, gather[0])
            self.assertEqual((d.reason, d.boundary), (DeclineReason.BOUNDARY, Boundary.GATHER))
            m = p.open_external_data(self.path)
            small = p.lazy_weight([(m, HEADER, 4096)], "uint8", (4096,))
            big = p.lazy_weight([(m, HEADER, 8192)], "uint8", (8192,))
            self.assertTrue(p.prefetch_weight(10, small).routed)
            d = p.prefetch_weight(11, big)
            self.assertEqual((d.reason, d.layer, d.layer_bytes, d.capacity), (DeclineReason.OVERSIZE, 11, 8192, 4096))
            self.assertTrue(p.prefetch_weight(12, small).routed)
            self.assertEqual(p.prefetch_weight(13, small).reason, DeclineReason.BUSY)
            p.cancel_weight(12)
            with self.assertRaises(cudaep.WrongState):
                p.cancel_weight(12)
            self.assertTrue(p.prefetch_weight(13, small).routed)
            with p.page_weight(10) as a, p.page_weight(13) as b:
                self.assertEqual(self.read_back(p, a, 4096), self.layers[0][:4096])
                self.assertEqual(self.read_back(p, b, 4096), self.layers[0][:4096])
            s = p.residency_stats()
            self.assertEqual((s.routed, s.consumed, s.released, s.cancelled, s.declined_oversize, s.declined_busy),
                             (3, 2, 2, 1, 1, 1))
            for w in gather + [small, big]:
                w.close()

    def test_external_data_errors(self):
        with provider() as p:
            with self.assertRaises(cudaep.NotFound):
                p.open_external_data(self.path + ".missing")
            m = p.open_external_data(self.path)
            with self.assertRaises(cudaep.InvalidArgument) as cm:
                p.lazy_weight([(m, HEADER + LAYERS * SIZE - 10, 20)], "uint8", (20,))
            self.assertIn("past the end of the file", cm.exception.message)
            with self.assertRaises(cudaep.InvalidArgument):
                p.lazy_weight([], "uint8", (20,))

    def test_one_mapping_per_file_closed_on_its_own_and_recovery(self):
        with provider() as p:
            a = p.open_external_data(self.path)
            self.assertEqual(a, p.open_external_data(self.path))
            p.close_external_data(a)
            p.lazy_weight([(a, HEADER, 16)], "uint8", (16,))  # still held by the second open
            p.close_external_data(a)
            with self.assertRaises(cudaep.InvalidArgument):
                p.lazy_weight([(a, HEADER, 16)], "uint8", (16,))
            with self.assertRaises(cudaep.InvalidArgument):
                p.close_external_data(a)
            self.assertEqual(p.recover_weights(), 0)
            self.assertEqual(p.weight_fallback(), "")
            with p.double_buffer(SIZE, TransferMode.STAGING) as db:
                self.assertEqual(db.recover(), 0)
                self.assertEqual(db.fallback(), "")

    def test_double_buffer_wraparound_in_both_modes(self):
        for mode in TransferMode:
            with self.subTest(mode=mode.name), provider() as p:
                ws = self.weights(p)
                with p.double_buffer(SIZE, mode) as db:
                    self.assertEqual(db.capacity, SIZE)
                    tickets = [db.prefetch(0, ws[0])]
                    for n in range(LAYERS):
                        if n + 1 < LAYERS:
                            tickets.append(db.prefetch(n + 1, ws[n + 1]))
                        t = tickets[n]
                        ptr, size = t.wait()
                        self.assertEqual(size, SIZE)
                        self.assertEqual(t.info.layer, n)
                        self.assertEqual(self.read_back(p, t, SIZE), self.layers[n])
                        t.release_layer()
                        t.close()
                    mt = db.metrics()
                    self.assertEqual((mt.layers_prefetched, mt.layers_consumed, mt.layers_released, mt.slot_reuses,
                                      mt.poisoned), (LAYERS, LAYERS, LAYERS, LAYERS - 2, 0))
                for w in ws:
                    w.close()

    def test_double_buffer_cancel_and_stale_ticket(self):
        with provider() as p:
            ws = self.weights(p)
            with p.double_buffer(SIZE, TransferMode.STAGING) as db:
                keep, doomed = db.prefetch(0, ws[0]), db.prefetch(1, ws[1])
                with self.assertRaises(cudaep.WrongState):
                    db.prefetch(2, ws[2])
                with self.assertRaises(cudaep.InvalidArgument):
                    self.read_back(p, doomed, 16)  # not waited for
                dptr, _ = doomed.wait()
                doomed.cancel_layer()
                self.assertEqual(db.metrics().cancelled, 1)
                reuse = db.prefetch(2, ws[2])
                rptr, _ = reuse.wait()
                self.assertEqual(rptr, dptr)
                self.assertEqual(self.read_back(p, reuse, SIZE), self.layers[2])
                with self.assertRaises(cudaep.StaleGeneration):
                    doomed.wait()
                self.assertGreaterEqual(db.metrics().stale_rejected, 1)
                reuse.release_layer()
                with self.assertRaises(cudaep.WrongState):
                    reuse.release_layer()
                keep.wait()
                self.assertEqual(self.read_back(p, keep, SIZE), self.layers[0])
                keep.release_layer()
                self.assertEqual([db.slot_state(i) for i in (0, 1)], [SlotState.DRAINING] * 2)
                with self.assertRaises(cudaep.InvalidArgument):
                    db.slot_state(2)
                for t in (keep, doomed, reuse):
                    t.close()
            for w in ws:
                w.close()

    def test_two_pipelines_are_isolated(self):
        with provider() as p:
            ws = self.weights(p)
            with p.double_buffer(SIZE) as a, p.double_buffer(SIZE, TransferMode.STAGING) as b:
                for n in range(3):
                    ta, tb = a.prefetch(n, ws[n]), b.prefetch(n, ws[LAYERS - 1 - n])
                    pb, _ = tb.wait()
                    pa, _ = ta.wait()
                    self.assertNotEqual(pa, pb)
                    self.assertEqual(self.read_back(p, ta, SIZE), self.layers[n])
                    self.assertEqual(self.read_back(p, tb, SIZE), self.layers[LAYERS - 1 - n])
                    for t in (ta, tb):
                        t.release_layer()
                        t.close()
            for w in ws:
                w.close()

    def test_capacity_decline_and_teardown_in_flight(self):
        with provider(staging_pool_cap_bytes="1MiB") as p:
            before = p.stats()
            with self.assertRaises(cudaep.Declined):
                p.double_buffer(1 << 20, TransferMode.STAGING)
            self.assertEqual(p.stats().device_allocs, before.device_allocs)
            ws = self.weights(p)
            db = p.double_buffer(SIZE, TransferMode.STAGING)
            t0, t1 = db.prefetch(0, ws[0]), db.prefetch(1, ws[1])
            t0.wait()
            db.close()  # the tickets keep the pipeline until they go
            self.assertEqual(self.read_back(p, t0, SIZE), self.layers[0])
            t0.close()
            t1.close()
            self.assertEqual(p.stats().device_live_bytes, before.device_live_bytes)
            for w in ws:
                w.close()
