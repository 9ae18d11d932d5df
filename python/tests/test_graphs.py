"""Graph capture and replay from Python: live buffers, a segmented capture around a NonZero
seam, the audit, abort after a forced drain, slot independence, recapture, and the reset race
with threads: mirrors ctests/test_graphs.c and ctests/test_reset_race.c."""

import array
import threading

import cudaep
from cudaep import Slot

from .support import TestCase, floats, provider, read_floats

IN, HID, OUT = 16, 24, 8


class MLP:
    """y = relu(x·W1 + b1)·W2 + b2, with NonZero over the hidden layer as the seam."""

    def __init__(self, p):
        self.p = p
        self.w1, self.b1, self.w2, self.b2 = floats(IN * HID, 11), floats(HID, 12), floats(HID * OUT, 13), floats(OUT, 14)
        self.x = p.alloc(4 * IN)
        self.w1b, self.b1b, self.w2b, self.b2b = (p.upload(a) for a in (self.w1, self.b1, self.w2, self.b2))
        self.h0, self.h1, self.h2 = (p.alloc(4 * HID) for _ in range(3))
        self.y0, self.y = p.alloc(4 * OUT), p.alloc(4 * OUT)
        self.idx, self.cnt = p.alloc(8 * 2 * HID), p.alloc(8)
        f = "float32"
        self.mm1 = p.kernel("MatMul", [(f, (1, IN)), (f, (IN, HID))])
        self.add1 = p.kernel("Add", [(f, (1, HID)), (f, (HID,))])
        self.relu = p.kernel("Relu", [(f, (1, HID))])
        self.mm2 = p.kernel("MatMul", [(f, (1, HID)), (f, (HID, OUT))])
        self.add2 = p.kernel("Add", [(f, (1, OUT)), (f, (OUT,))])
        self.nonzero = p.kernel("NonZero", [(f, (1, HID))])

    def buffers(self):
        return [self.x, self.w1b, self.b1b, self.w2b, self.b2b, self.h0, self.h1, self.h2, self.y0, self.y]

    def close(self):
        for o in self.buffers() + [self.idx, self.cnt, self.mm1, self.add1, self.relu, self.mm2, self.add2,
                                   self.nonzero]:
            o.close()

    def layer1(self):
        v = lambda b, *s: b.view("float32", s)  # noqa: E731
        self.mm1([v(self.x, 1, IN), v(self.w1b, IN, HID)], [v(self.h0, 1, HID)])
        self.add1([v(self.h0, 1, HID), v(self.b1b, HID)], [v(self.h1, 1, HID)])
        self.relu([v(self.h1, 1, HID)], [v(self.h2, 1, HID)])

    def layer2(self):
        v = lambda b, *s: b.view("float32", s)  # noqa: E731
        self.mm2([v(self.h2, 1, HID), v(self.w2b, HID, OUT)], [v(self.y0, 1, OUT)])
        self.add2([v(self.y0, 1, OUT), v(self.b2b, OUT)], [v(self.y, 1, OUT)])

    def seam(self):
        self.nonzero([self.h2.view("float32", (1, HID))],
                     [self.idx.view("int64", (2, HID)), self.cnt.view("int64", (1,))])
        return self.nonzero.nonzero_count(self.cnt.view("int64", (1,)))

    def ref(self, x):
        h = [max(0.0, self.b1[j] + sum(x[k] * self.w1[k * HID + j] for k in range(IN))) for j in range(HID)]
        y = [self.b2[j] + sum(h[k] * self.w2[k * OUT + j] for k in range(HID)) for j in range(OUT)]
        return y, sum(1 for v in h if v != 0)

    def set_input(self, seed):
        x = floats(IN, seed)
        self.x.write(x)
        self.y.memset(0xFF)
        self.h2.memset(0xFF)
        return x


class GraphTest(TestCase):
    def test_capture_replay_uses_live_buffers(self):
        with provider() as p:
            m = MLP(p)
            with p.capture(Slot.PRIMARY, [m.mm1, m.add1, m.relu, m.mm2, m.add2], m.buffers()):
                self.assertEqual(p.capture_status, cudaep.CaptureStatus.ACTIVE)
                m.layer1()
                m.layer2()
            self.assertEqual(p.capture_status, cudaep.CaptureStatus.NONE)
            self.assertTrue(p.has_executable())
            self.assertEqual(p.segment_count(), 1)
            m.w1b.close()  # the graph retains the weights' memory
            before = p.stats()
            for step in range(4):
                x = m.set_input(100 + step)
                p.replay()
                self.assertFloatsNear(read_floats(m.y), m.ref(x)[0])
            self.assertEqual(p.stats().device_allocs, before.device_allocs)
            gs = p.graph_stats()
            self.assertEqual((gs.captures, gs.replay_launches, gs.instantiations), (1, 4, 1))
            self.assertTrue(p.reset_graph())
            self.assertEqual(p.stats().device_frees, before.device_frees + 1)
            with self.assertRaises(cudaep.WrongState):
                p.replay()
            m.close()

    def test_segmented_capture_with_a_host_seam(self):
        with provider() as p:
            m = MLP(p)
            with self.assertRaises(cudaep.Unsupported) as cm:
                p.begin_capture(Slot.PRIMARY, [m.relu, m.nonzero])
            self.assertIn("rejected before begin_capture", cm.exception.message)
            self.assertEqual(p.capture_status, cudaep.CaptureStatus.NONE)
            with p.capture(Slot.PRIMARY, [m.mm1, m.add1, m.relu], m.buffers()):
                m.layer1()
            with p.capture(Slot.PRIMARY, [m.mm2, m.add2], m.buffers()):
                m.layer2()
            self.assertEqual(p.segment_count(Slot.PRIMARY), 2)
            for step in range(3):
                x = m.set_input(200 + step)
                want, want_nz = m.ref(x)
                p.replay_segment(Slot.PRIMARY, 0)
                self.assertEqual(m.seam(), want_nz)
                p.replay_segment(Slot.PRIMARY, 1)
                self.assertFloatsNear(read_floats(m.y), want)
            with self.assertRaises(cudaep.InvalidArgument):
                p.replay_segment(Slot.PRIMARY, 2)
            p.reset_graph()
            m.close()

    def test_abort_after_a_mid_capture_failure(self):
        with provider() as p:
            m = MLP(p)
            ks = [m.mm1, m.add1, m.relu, m.mm2, m.add2]
            with self.assertRaises(cudaep.WrongState):
                with p.capture(Slot.PRIMARY, ks, m.buffers()):
                    m.layer1()
                    p.drain_for_unmap()  # illegal inside a capture: the block raises, capture() aborts
            self.assertEqual(p.capture_status, cudaep.CaptureStatus.NONE)
            self.assertFalse(p.reset_graph())
            x = m.set_input(300)
            m.layer1()
            m.layer2()
            self.assertFloatsNear(read_floats(m.y), m.ref(x)[0])
            with p.capture(Slot.PRIMARY, ks, m.buffers()):
                m.layer1()
                m.layer2()
            x = m.set_input(301)
            p.replay()
            self.assertFloatsNear(read_floats(m.y), m.ref(x)[0])
            self.assertTrue(p.reset_graph())
            # Reset during a capture is refused, end without begin too.
            p.begin_capture(Slot.VERIFY, ks, m.buffers())
            with self.assertRaises(cudaep.WrongState):
                p.reset_graph(Slot.VERIFY)
            p.abort_capture(Slot.VERIFY)
            with self.assertRaises(cudaep.WrongState):
                p.end_capture(Slot.VERIFY)
            m.close()

    def test_slots_are_independent_and_recapture_updates(self):
        n = 32
        base = array.array("f", (i + 0.5 for i in range(n)))
        with provider() as p:
            add = p.kernel("Add", [("float32", (n,)), ("float32", (n,))])
            one = p.upload(array.array("f", [1.0] * n))
            pin, pout = p.upload(base), p.alloc(4 * n)
            vin, vmid, vout = p.upload(base), p.alloc(4 * n), p.alloc(4 * n)
            v = lambda b: b.view("float32", (n,))  # noqa: E731
            with p.capture(Slot.PRIMARY, [add], [one, pin, pout]):
                add([v(pin), v(one)], [v(pout)])
            with p.capture(Slot.VERIFY, [add], [one, vin, vmid, vout]):
                add([v(vin), v(one)], [v(vmid)])
                add([v(vmid), v(one)], [v(vout)])
            for _ in range(3):
                p.replay(Slot.PRIMARY)
                p.replay(Slot.VERIFY)
            self.assertFloatsNear(read_floats(pout), [b + 1 for b in base])
            self.assertFloatsNear(read_floats(vout), [b + 2 for b in base])
            p.reset_graph(Slot.PRIMARY)
            self.assertFalse(p.has_executable(Slot.PRIMARY))
            self.assertTrue(p.has_executable(Slot.VERIFY))
            vout.memset(0xFF)
            p.replay(Slot.VERIFY)
            self.assertFloatsNear(read_floats(vout), [b + 2 for b in base])

            k = Slot.keyed(4)
            with p.capture(k, [add], [one, pin, pout]):
                add([v(pin), v(one)], [v(pout)])
            with p.capture(k, [add], [one, pin, vout], recapture=True):
                add([v(pin), v(one)], [v(vout)])
            gs = p.graph_stats(k)
            self.assertEqual((gs.captures, gs.instantiations, gs.updates), (2, 1, 1))
            vout.memset(0xFF)
            pout.memset(0x11)
            p.replay(k)
            self.assertFloatsNear(read_floats(vout), [b + 1 for b in base])
            self.assertEqual(pout.read(), b"\x11" * (4 * n))
            with self.assertRaises(TypeError):
                p.replay("primary")
            p.reset_graph(Slot.VERIFY)
            p.reset_graph(k)
            for o in (add, one, pin, pout, vin, vmid, vout):
                o.close()

    def test_remove_graph_frees_a_keyed_slot(self):
        with provider() as p:
            with self.assertRaises(cudaep.InvalidArgument):
                p.remove_graph(Slot.PRIMARY)
            p.remove_graph(Slot.keyed(5))  # not held: nothing to do
            self.assertFalse(p.has_executable(Slot.keyed(5)))

    def test_reset_race_with_threads(self):
        """Threads replay while the main thread resets: every replay succeeds or is refused with
        WrongState, and none that starts after the reset returned is enqueued."""
        n = 64
        x = array.array("f", (i + 0.25 for i in range(n)))
        with provider() as p:
            add = p.kernel("Add", [("float32", (n,)), ("float32", (n,))])
            xb, one, y = p.upload(x), p.upload(array.array("f", [1.0] * n)), p.alloc(4 * n)
            with p.capture(Slot.PRIMARY, [add], [xb, one, y]):
                add([xb.view("float32", (n,)), one.view("float32", (n,))], [y.view("float32", (n,))])
            xb.close()
            one.close()
            state = {"reset": False, "ok": 0, "after": 0, "errors": []}
            lock = threading.Lock()
            started = threading.Event()
            done = threading.Event()

            def replayer():
                while not done.is_set():
                    after = state["reset"]
                    try:
                        p.replay()
                    except cudaep.WrongState:
                        if after:
                            with lock:
                                state["after"] += 1
                                if state["after"] >= 8:
                                    done.set()
                        continue
                    except cudaep.Error as e:  # noqa: PERF203
                        state["errors"].append(repr(e))
                        done.set()
                        continue
                    if after:
                        state["errors"].append("a replay started after the reset was enqueued")
                    with lock:
                        state["ok"] += 1
                        if state["ok"] >= 10:
                            started.set()

            threads = [threading.Thread(target=replayer) for _ in range(4)]
            for t in threads:
                t.start()
            started.wait(60)
            self.assertTrue(p.reset_graph())
            state["reset"] = True
            for t in threads:
                t.join()
            self.assertEqual(state["errors"], [])
            self.assertGreaterEqual(state["ok"], 10)
            self.assertEqual(p.graph_stats().replay_launches, state["ok"])
            self.assertFloatsNear(read_floats(y), [v + 1 for v in x])
            add.close()
            y.close()
