"""bench/scripts/llama_decode.py's decode table, without torch or a GPU: the functions that make
its rows and its --arms filter, taken from the script's source (the script itself imports torch):
the headline ratio is over the fastest compiled PyTorch arm that ran (a failed one, NaN, is no
baseline); with every PyTorch arm filtered out or failed the ratios are None and the table still
prints; --arms keeps exactly the labels its expression matches. Needs no library."""

import io
import math
import unittest
from contextlib import redirect_stdout

from .llama_script import load

NAMES = {"PEAK_BYTES_PER_S", "COMPILED_TORCH", "FAST_LABEL", "HF_STATIC_LABEL", "log", "is_compiled_torch",
         "arm_filter", "decode_rows", "report"}

ORT = "ORT + CudaEp, enable_cuda_graph=1 (IOBinding)"
ORT_ARMS = ("ORT + CudaEp, eager (IOBinding)", "ORT + CudaEp, enable_cuda_graph=1, fusion=off (IOBinding)",
            "ORT + CudaEp, enable_cuda_graph=1, two cache sets swapped (IOBinding)", ORT)


ld = load(NAMES)


class DecodeTableTest(unittest.TestCase):
    def rows(self, timed):
        return ld["decode_rows"](128, 192, timed, 4.8e9)

    def test_headline_ratio_is_over_the_fastest_compiled_arm_that_ran(self):
        fast_ro = ld["FAST_LABEL"].format(mode="reduce-overhead")
        fast_ma = ld["FAST_LABEL"].format(mode="max-autotune")
        timed = [("PyTorch static cache + CUDAGraph, sdpa", 2.4), ("PyTorch static cache + CUDAGraph, eager", 2.0),
                 (fast_ro, 1.6), (fast_ma, float("nan")), (ld["HF_STATIC_LABEL"], 1.2), (ORT, 0.9)]
        rows, best, graph = self.rows(timed)
        self.assertEqual(best, 1.2)
        self.assertEqual(graph, 2.0)
        by = {r["arm"]: r for r in rows}
        self.assertEqual([r["arm"] for r in rows], [label for label, _ in timed])
        self.assertAlmostEqual(by[ORT]["vs_best_torch"], 0.9 / 1.2)
        self.assertAlmostEqual(by[ORT]["vs_torch_graph"], 0.9 / 2.0)
        self.assertAlmostEqual(by[fast_ro]["vs_best_torch"], 1.6 / 1.2)
        self.assertAlmostEqual(by[ORT]["bw_eff"], 4.8e9 / 0.9e-3 / ld["PEAK_BYTES_PER_S"])
        self.assertTrue(math.isnan(by[fast_ma]["ms"]))
        for k in ("bw_eff", "vs_best_torch", "vs_torch_graph"):
            self.assertIsNone(by[fast_ma][k])

    def test_no_pytorch_arm_leaves_the_ratios_none(self):
        for timed in ([(ORT, 0.9)], [(ld["FAST_LABEL"].format(mode="reduce-overhead"), float("nan")), (ORT, 0.9)]):
            rows, best, graph = self.rows(timed)
            self.assertIsNone(best)
            self.assertIsNone(graph)
            ort = rows[-1]
            self.assertIsNone(ort["vs_best_torch"])
            self.assertIsNone(ort["vs_torch_graph"])
            self.assertIsNotNone(ort["bw_eff"])
            results, out = {}, io.StringIO()
            with redirect_stdout(out):
                ld["report"](rows, results)
            self.assertIs(results["bench"], rows)
            self.assertIn(f"| {ORT} | 0.900 |", out.getvalue())

    def test_old_baselines_are_not_compiled_arms(self):
        for label in ("PyTorch eager, DynamicCache, sdpa", "PyTorch static cache + CUDAGraph, sdpa",
                      "PyTorch eager, static cache, eager", ORT):
            self.assertFalse(ld["is_compiled_torch"](label), label)
        for label in (ld["FAST_LABEL"].format(mode="max-autotune"), ld["HF_STATIC_LABEL"],
                      ld["FAST_LABEL"].format(mode="reduce-overhead") + " (KV heads repeated, no enable_gqa)"):
            self.assertTrue(ld["is_compiled_torch"](label), label)

    def test_arms_keeps_the_labels_it_matches(self):
        keep = ld["arm_filter"](r"ORT \+ CudaEp, enable_cuda_graph=1 \(IOBinding\)")
        self.assertEqual([label for label in ORT_ARMS if keep(label)], [ORT])
        self.assertFalse(keep(ld["HF_STATIC_LABEL"]))
        keep = ld["arm_filter"]("^PyTorch")
        self.assertTrue(keep(ld["FAST_LABEL"].format(mode="reduce-overhead")))
        self.assertFalse(any(keep(label) for label in ORT_ARMS))
        for everything in ("", None):
            self.assertTrue(all(ld["arm_filter"](everything)(label) for label in ORT_ARMS + (ld["HF_STATIC_LABEL"],)))


if __name__ == "__main__":
    unittest.main()
