"""Buffer.copy_peer (CudaEpCopyPeer): copies between buffers of providers on any devices, and the
path each took. Two simulated devices need the library loaded with CUDAEP_SIM_DEVICES set (the
Go runtime reads the environment when the library loads), so those cases run in a child
process."""

import os
import subprocess
import sys
import textwrap
import unittest

import cudaep

from .support import TestCase, on_sim, pattern, provider

# The child: two providers on devices 0 and 1, copies both ways, prints each path's name.
CHILD = textwrap.dedent("""
    import sys
    import cudaep
    backend = sys.argv[1]
    try:
        p1 = cudaep.Provider(backend=backend, device_id=1)
    except cudaep.NotFound as e:
        print("SKIP", e)
        sys.exit(0)
    with cudaep.Provider(backend=backend, device_id=0) as p0, p1:
        n = 3 * 1024 * 1024 + 5
        data = bytes((i * 7 + 3) % 251 + 1 for i in range(n))
        with p1.alloc(n) as src, p0.alloc(n) as dst, p1.alloc(n) as back:
            src.write(data)
            print(dst.copy_peer(src).name)
            assert dst.read() == data, "device 0 got other bytes"
            print(back.copy_peer(dst).name)
            assert back.read() == data, "device 1 got other bytes"
    assert cudaep.live_handle_count() == 0
""")


class CopyPeerTest(TestCase):
    def test_within_one_device_it_is_a_device_copy(self):
        with provider() as p, provider() as q, p.alloc(4096) as a, q.alloc(4096) as b:
            a.write(pattern(4096, 3))
            b.write(pattern(4096, 4))
            self.assertEqual(b.copy_peer(a, 1000, dst_offset=16, src_offset=8), cudaep.PeerPath.DEVICE)
            want = bytearray(pattern(4096, 4))
            want[16:1016] = pattern(4096, 3)[8:1008]
            self.assertEqual(b.read(), bytes(want))
            self.assertEqual(b.copy_peer(a, 0), cudaep.PeerPath.NONE)

    def test_bad_ranges_are_refused(self):
        with provider() as p, p.alloc(256) as a, p.alloc(256) as b:
            b.write(pattern(256, 1))
            for kwargs in ({"size": 257}, {"size": 16, "src_offset": 250}, {"size": 16, "dst_offset": 2**64 - 1},
                           {"size": 2**64 - 1}):
                with self.subTest(**kwargs), self.assertRaises(cudaep.InvalidArgument):
                    b.copy_peer(a, **kwargs)
            with self.assertRaises(cudaep.InvalidArgument):
                b.copy_peer(b, 32, dst_offset=0, src_offset=16)  # overlapping
            self.assertEqual(b.read(), pattern(256, 1))

    def run_child(self, peers):
        env = dict(os.environ, CUDAEP_SIM_DEVICES="2", CUDAEP_SIM_PEERS=peers)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(os.path.dirname(__file__), ".."),
                                                          env.get("PYTHONPATH")]))
        backend = os.environ.get("CUDAEP_TEST_BACKEND") or "sim"
        out = subprocess.run([sys.executable, "-c", CHILD, backend], env=env, capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        if out.stdout.startswith("SKIP"):
            self.skipTest("needs two CUDA devices: " + out.stdout.strip())
        return out.stdout.split()

    def test_two_devices_that_reach_each_other_copy_directly(self):
        paths = self.run_child("all")
        if on_sim():
            self.assertEqual(paths, ["DIRECT", "DIRECT"])
        else:
            self.assertEqual(len(paths), 2)

    @unittest.skipUnless(on_sim(), "the simulator's peer matrix makes two devices that cannot reach each other")
    def test_two_devices_that_do_not_stage(self):
        self.assertEqual(self.run_child("none"), ["STAGED", "STAGED"])
