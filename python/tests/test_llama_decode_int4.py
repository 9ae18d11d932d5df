"""bench/scripts/llama_decode.py's int4 section, without torch, ORT or a GPU: the functions that make
its rows and read CudaEp's declines, taken from the script's source (the script itself imports
torch): an ORT arm whose MatMulNBits nodes ran on ORT's CPU EP shows its time but no ratio or
bandwidth, and its label says so; the headline ratio is over the faster of the best int4 PyTorch
arm and the best bf16 compiled PyTorch arm; a decline naming the pending MatMulNBits PTX is told
from any other; the bytes a decode step reads count one row of the embedding. Needs no library."""

import io
import math
import unittest
from contextlib import redirect_stdout

from .llama_script import load

NAMES = {"PEAK_BYTES_PER_S", "COMPILED_TORCH", "FAST_LABEL", "HF_STATIC_LABEL", "BENCH_ROWS", "INT4_SCHEMES",
         "INT4_PENDING", "INT4_TORCH_LABEL", "INT4_DECODE_ROW", "INT4_PREFILL_ROW", "PENDING_PLACEMENT",
         "OTHER_PLACEMENT", "log", "is_compiled_torch", "is_int4_torch", "int4_ort_label", "nbits_declines",
         "int4_bytes", "int4_decode_rows", "report"}

PENDING = ('2026-12-03 [I:onnxruntime:, capability.go] CudaEp leaves node "node_MatMul_{i}_Q4" '
           '(com.microsoft.MatMulNBits) to another EP: kernels: node "node_MatMul_{i}_Q4" (MatMulNBits): the kernel\'s '
           'entry point cudaep_mmnb_gemv_q4_f16 is not available: the library\'s PTX has no ptx/matmul_nbits.ptx: '
           'ep/kernels/cuda/matmul_nbits.cu is newer than the committed PTX (regenerate it with ep/kernels/mkptx.sh)')
REFUSED = ('CudaEp leaves node "node_MatMul_9_Q4" (com.microsoft.MatMulNBits) to another EP: kernels: node '
           '"node_MatMul_9_Q4" (MatMulNBits): attribute "weight_prepacked" is 1; only 0 is supported')
OTHER = 'CudaEp leaves node "node_Add_3" (Add, opset 18) to another EP: kernels: Add: float16 [3] and [4] do not broadcast'


ld = load(NAMES)
TORCH_SYM = ld["INT4_TORCH_LABEL"].format(scheme="sym", mode="reduce-overhead")
TORCH_ASYM = ld["INT4_TORCH_LABEL"].format(scheme="asym", mode="reduce-overhead")


class Int4RowsTest(unittest.TestCase):
    def test_ratios_are_over_the_faster_of_the_int4_and_bf16_anchors(self):
        on_ep = ld["int4_ort_label"]("sym", dict(on_ep=True), "enable_cuda_graph=1")
        declined = ld["int4_ort_label"]("asym", dict(on_ep=False, matmulnbits=113, pending=True), "enable_cuda_graph=1")
        timed = [(TORCH_SYM, 0.4), (TORCH_ASYM, float("nan")), (on_ep, 0.2), (declined, 30.0)]
        step = {TORCH_SYM: 6e8, on_ep: 6e8, declined: 6.1e8}
        rows, t_int4 = ld["int4_decode_rows"](128, 192, timed, step, {declined: "CPUExecutionProvider"}, 0.3, 2.0)
        self.assertEqual(t_int4, 0.4)
        self.assertEqual([r["arm"] for r in rows], [label for label, _ in timed])
        by = {r["arm"]: r for r in rows}
        ort = by[on_ep]
        self.assertEqual(ort["row"], "int4 decode ms/token, context 128 (cache 192)")
        self.assertEqual(ort["matmulnbits_ep"], "CudaEp")
        self.assertAlmostEqual(ort["vs_best_int4_torch"], 0.2 / 0.4)
        self.assertAlmostEqual(ort["vs_best_bf16_torch"], 0.2 / 0.3)
        self.assertAlmostEqual(ort["vs_best_torch"], 0.2 / 0.3)  # the bf16 anchor is the faster here
        self.assertAlmostEqual(ort["vs_torch_graph"], 0.2 / 2.0)
        self.assertAlmostEqual(ort["bw_eff"], 6e8 / 0.2e-3 / ld["PEAK_BYTES_PER_S"])
        self.assertIsNone(by[TORCH_SYM]["matmulnbits_ep"])
        self.assertAlmostEqual(by[TORCH_SYM]["vs_best_int4_torch"], 1.0)
        self.assertTrue(math.isnan(by[TORCH_ASYM]["ms"]))

    def test_a_cpu_ep_arm_shows_its_time_but_no_ratio(self):
        declined = ld["int4_ort_label"]("sym", ld["PENDING_PLACEMENT"], "eager")
        self.assertIn("MatMulNBits on ORT's CPU EP", declined)
        rows, _ = ld["int4_decode_rows"](2048, 2112, [(TORCH_SYM, 0.5), (declined, 40.0)], {declined: 7e8},
                                         {declined: "CPUExecutionProvider"}, 0.9, None)
        r = rows[1]
        self.assertEqual(r["ms"], 40.0)
        self.assertEqual(r["matmulnbits_ep"], "CPUExecutionProvider")
        for k in ("bw_eff", "vs_best_int4_torch", "vs_best_bf16_torch", "vs_best_torch", "vs_torch_graph"):
            self.assertIsNone(r[k], k)

    def test_no_anchor_leaves_the_ratios_none_and_the_table_prints(self):
        label = ld["int4_ort_label"]("sym", None, "enable_cuda_graph=1")
        rows, t_int4 = ld["int4_decode_rows"](128, 192, [(TORCH_SYM, float("nan")), (label, 0.25)], {label: 6e8}, {},
                                              None, None)
        self.assertIsNone(t_int4)
        r = rows[1]
        for k in ("vs_best_int4_torch", "vs_best_bf16_torch", "vs_best_torch", "vs_torch_graph"):
            self.assertIsNone(r[k], k)
        self.assertIsNotNone(r["bw_eff"])
        out = io.StringIO()
        with redirect_stdout(out):
            ld["report"](rows, {})
        self.assertIn("| over best int4 PyTorch | over best bf16 compiled PyTorch |", out.getvalue())
        self.assertIn(f"| {label} | 0.250 |", out.getvalue())

    def test_labels(self):
        self.assertEqual(ld["int4_ort_label"]("asym", dict(on_ep=True), "eager"), "ORT int4 asym + CudaEp, eager (IOBinding)")
        self.assertEqual(ld["int4_ort_label"]("sym", None, "weights resident", binding=False),
                         "ORT int4 sym + CudaEp, weights resident")
        self.assertIn("CPU EP fallback allowed", ld["int4_ort_label"]("sym", ld["OTHER_PLACEMENT"], "eager"))
        # the int4 anchors are no bf16 compiled arms, nor the other way round
        for label in (TORCH_SYM, TORCH_SYM + " (KV heads repeated, no enable_gqa)"):
            self.assertTrue(ld["is_int4_torch"](label))
            self.assertFalse(ld["is_compiled_torch"](label))
        for label in (ld["FAST_LABEL"].format(mode="reduce-overhead"), ld["HF_STATIC_LABEL"]):
            self.assertFalse(ld["is_int4_torch"](label))
        self.assertEqual(set(ld["INT4_SCHEMES"]), {"sym", "asym"})
        self.assertTrue({"int4decode128", "int4decode2048", "int4prefill512"} <= set(ld["BENCH_ROWS"]))


class DeclinesTest(unittest.TestCase):
    def test_the_pending_ptx_is_told_from_other_reasons(self):
        lines = ["unrelated line"] + [PENDING.format(i=i) for i in range(5)] + [OTHER]
        d = ld["nbits_declines"](lines)
        self.assertEqual(d["matmulnbits"], 5)
        self.assertTrue(d["pending"])
        self.assertEqual(len(d["reasons"]), 1, d["reasons"])  # node names elided: one reason
        self.assertIn(ld["INT4_PENDING"], d["reasons"][0])
        self.assertEqual(d["other_count"], 1)
        self.assertIn("node_Add_3", d["others"][0])
        d = ld["nbits_declines"]([PENDING.format(i=0), REFUSED])
        self.assertEqual(d["matmulnbits"], 2)
        self.assertFalse(d["pending"])
        self.assertEqual(len(d["reasons"]), 2)
        d = ld["nbits_declines"]([OTHER])
        self.assertEqual((d["matmulnbits"], d["pending"], d["other_count"]), (0, False, 1))
        self.assertEqual(ld["nbits_declines"]([])["matmulnbits"], 0)


class BytesTest(unittest.TestCase):
    def test_roles_and_the_step_reading_one_embedding_row(self):
        sizes = {"emb": (32000 * 2048 * 2, 32000), "norm": (2048 * 2, 1), "b0": (1000, 64), "s0": (125, 1),
                 "z0": (32, 64), "b1": (4000, 32000), "s1": (500, 1)}
        nodes = [("Gather", ["emb", "ids"], {}),
                 ("MatMulNBits", ["x", "b0", "s0", "z0"], {"K": 2048, "N": 64, "bits": 4, "block_size": 32}),
                 ("MatMulNBits", ["x", "b1", "s1"], {"K": 2048, "N": 32000, "bits": 4, "block_size": 32}),
                 ("Mul", ["x", "norm"], {})]
        b = ld["int4_bytes"](sizes, nodes, 32000)
        self.assertEqual((b["packed"], b["scales"], b["zero_points"]), (5000, 625, 32))
        self.assertEqual(b["gather_tables"], 32000 * 2048 * 2)
        self.assertEqual(b["other"], 2048 * 2)
        self.assertEqual(b["total"], sum(v for v, _ in sizes.values()))
        self.assertEqual(b["step_weights"], 5000 + 625 + 32 + 2048 * 2 + 2048 * 2)
        self.assertEqual((b["matmulnbits"], b["zero_point_nodes"], b["block_sizes"]), (2, 1, [32]))
        self.assertTrue(b["lm_head_quantised"])
        self.assertFalse(ld["int4_bytes"](sizes, nodes[:2], 32000)["lm_head_quantised"])


if __name__ == "__main__":
    unittest.main()
