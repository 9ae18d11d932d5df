"""Kernels from Python: attributes, output infos, execution against references, capture
support, NonZero, strides: mirrors ctests/test_kernels.c."""

import array
import math

import cudaep

from .support import TestCase, floats, pattern, provider, read_floats


def matmul(a, b, m, k, n):
    return [sum(a[i * k + t] * b[t * n + j] for t in range(k)) for i in range(m) for j in range(n)]


class KernelTest(TestCase):
    def test_matmul_add_and_output_info(self):
        x, w, bias = floats(6, 1), floats(12, 2), floats(4, 3)
        want = [v + bias[i % 4] for i, v in enumerate(matmul(x, w, 2, 3, 4))]
        with provider() as p, p.alloc(4096) as buf:
            mm = p.kernel("MatMul", [("float32", (2, 3)), ("float32", (3, 4))], opset=13)
            add = p.kernel("Add", [cudaep.TensorInfo("float32", (2, 4)), ("float32", (4,))])
            self.assertEqual(mm.name, "MatMul(float32[2,3], float32[3,4])")
            self.assertEqual(mm.outputs, [cudaep.TensorInfo(cudaep.DType.FLOAT32, (2, 4))])
            self.assertTrue(mm.capture_supported)
            self.assertEqual(mm.capture_reason, "")
            buf.write(x, 0).write(w, 256).write(bias, 512)
            mm([buf.view("float32", (2, 3)), buf.view("float32", (3, 4), 256)], [buf.view("float32", (2, 4), 1024)])
            add([buf.view("float32", (2, 4), 1024), buf.view("float32", (4,), 512)],
                [buf.view("float32", (2, 4), 2048)])
            self.assertFloatsNear(read_floats(buf, 8, 2048), want)
            mm.close()
            add.close()

    def test_typed_attributes(self):
        a, b, c = floats(6, 4), floats(12, 5), floats(4, 6)
        want = [0.5 * sum(a[i * 3 + t] * b[j * 3 + t] for t in range(3)) + 2.0 * c[j]
                for i in range(2) for j in range(4)]
        with provider() as p:
            gemm = p.kernel("Gemm", [("float32", (2, 3)), ("float32", (4, 3)), ("float32", (4,))], opset=13,
                            attrs={"alpha": 0.5, "beta": 2.0, "transB": 1})
            ab, bb, cb, yb = p.upload(a), p.upload(b), p.upload(c), p.alloc(32)
            gemm.execute([ab.view("float32", (2, 3)), bb.view("float32", (4, 3)), cb.view("float32", (4,))],
                         [yb.view("float32", (2, 4))])
            self.assertFloatsNear(read_floats(yb), want)
            softmax = p.kernel("Softmax", [("float32", (2, 4))], attrs={"axis": -1}, opset=13)
            softmax([yb.view("float32", (2, 4))], [yb.view("float32", (2, 4))])  # in place
            got = read_floats(yb)
            for r in range(2):
                row = want[4 * r:4 * r + 4]
                m = max(row)
                s = sum(math.exp(v - m) for v in row)
                self.assertFloatsNear(got[4 * r:4 * r + 4], [math.exp(v - m) / s for v in row])
            gelu = p.kernel("Gelu", [("float32", (2, 4))], attrs={"approximate": "tanh"})
            with self.assertRaises(cudaep.Unsupported):
                p.kernel("Gelu", [("float32", (2, 4))], attrs={"approximate": "nope"})
            with self.assertRaises(TypeError):
                p.kernel("Gelu", [("float32", (2, 4))], attrs={"approximate": object()})
            for k in (gemm, softmax, gelu, ab, bb, cb, yb):
                k.close()

    def test_unsupported_and_strides(self):
        with provider() as p:
            with self.assertRaises(cudaep.Unsupported) as cm:
                p.kernel("Conv", [("float32", (1, 1, 4, 4))])
            self.assertIn("Conv", cm.exception.message)
            with self.assertRaises(cudaep.Unsupported) as cm:  # Relu takes float32, float16, bfloat16
                p.kernel("Relu", [("float64", (4,))])
            self.assertIn("float64", cm.exception.message)
            with self.assertRaises(cudaep.InvalidArgument):
                p.kernel("Relu", [("float32", (2, -3))])
            with self.assertRaises(cudaep.InvalidArgument):
                p.kernel("Relu", [("float32", (4,))], opset=0)
            with p.kernel("Relu", [("float32", (1, 3))]) as relu, p.alloc(64) as b:
                relu([b.view("float32", (1, 3), strides=(1000, 1))], [b.view("float32", (1, 3))])
                with self.assertRaises(cudaep.Unsupported) as cm:
                    relu([b.view("float32", (1, 3), strides=(3, 2))], [b.view("float32", (1, 3))])
                self.assertIn("dense row-major", cm.exception.message)
                with self.assertRaises(cudaep.InvalidArgument):
                    relu([b.view("float32", (1, 3), offset=60)], [b.view("float32", (1, 3))])
                with self.assertRaises(TypeError):
                    relu([b], [b.view("float32", (1, 3))])

    def test_nonzero(self):
        x = array.array("f", [0.0, 1.5, 0.0, -2.0, 0.0, 3.0])
        with provider() as p:
            nz = p.kernel("NonZero", [("float32", (2, 3))], opset=13)
            self.assertFalse(nz.capture_supported)
            self.assertIn("NonZero", nz.capture_reason)
            self.assertEqual([o.shape for o in nz.outputs], [(2, 6), (1,)])
            xb, idx, cnt = p.upload(x), p.alloc(96), p.alloc(8)
            nz([xb.view("float32", (2, 3))], [idx.view("int64", (2, 6)), cnt.view("int64", (1,))])
            self.assertEqual(nz.nonzero_count(cnt.view("int64", (1,))), 3)
            got = array.array("q", idx.read(48))
            self.assertEqual(list(got), [0, 1, 1, 1, 0, 2])
            with p.kernel("Relu", [("float32", (2, 3))]) as relu, self.assertRaises(cudaep.InvalidArgument):
                relu.nonzero_count(cnt.view("int64", (1,)))
            for o in (nz, xb, idx, cnt):
                o.close()

    def test_identity_copies_raw_bytes(self):
        data = pattern(999, 5)
        with provider() as p, p.upload(data) as a, p.alloc(999) as b:
            with p.kernel("Identity", [("bool", (999,))], opset=13) as k:
                k([a.view("bool", (999,))], [b.view("bool", (999,))])
            self.assertEqual(b.read(), data)
