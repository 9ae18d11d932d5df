#!/usr/bin/env python3
"""ort_python_check.py LIBCUDAEP: run cudaep inside ONNX Runtime from Python, as users will.

Needs the `onnxruntime` (1.23 or later, with the plugin-EP API) and `onnx` and `numpy` packages
(the GPU machine's /opt/torch/.venv has them). It registers libcudaep.so with
register_execution_provider_library, takes the CudaEp device from get_ep_devices(), builds a
2-layer MLP with its weights in an external-data file, and compares cudaep's outputs with ORT's
CPU EP: eagerly, and with enable_cuda_graph=1 over 100 runs with changing inputs. It prints a
per-Run time for both EPs (one process, same inputs) and exits nonzero on any mismatch.
"""

import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def mlp(path, d_in, d_hid, d_out, seed):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((d_in, d_hid)) / np.sqrt(d_in)).astype(np.float32)
    b1 = rng.standard_normal(d_hid).astype(np.float32)
    w2 = (rng.standard_normal((d_hid, d_out)) / np.sqrt(d_hid)).astype(np.float32)
    b2 = rng.standard_normal(d_out).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["y"]),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="mlp.onnx.data", size_threshold=0)


def timed_runs(sess, feeds):
    sess.run(None, feeds[0])  # warm up (captures, with CUDA graphs)
    t0 = time.perf_counter()
    outs = [sess.run(None, f)[0] for f in feeds]
    return outs, (time.perf_counter() - t0) / len(feeds)


def main():
    lib = os.path.abspath(sys.argv[1])
    print(f"onnxruntime {ort.__version__}, library {lib}")
    ort.register_execution_provider_library("cudaep", lib)
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "CudaEp"]
    if not devices:
        print("FAIL: get_ep_devices() lists no CudaEp device")
        return 1
    dev = devices[0]
    hw = getattr(dev, "hardware_device", None) or getattr(dev, "device", None)
    print(f"CudaEp device: vendor {getattr(dev, 'ep_vendor', '?')}, metadata {dict(getattr(dev, 'ep_metadata', {}))}, "
          f"hardware {getattr(hw, 'vendor', '?')} 0x{getattr(hw, 'vendor_id', 0):x} type {getattr(hw, 'type', '?')}")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.onnx")
        mlp(path, 256, 1024, 256, seed=7)
        cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        feeds = [{"x": rng.standard_normal((4, 256), dtype=np.float32)} for _ in range(100)]
        want, cpu_t = timed_runs(cpu, feeds)
        for graph in ("0", "1"):
            so = ort.SessionOptions()
            so.add_provider_for_devices([dev], {"enable_cuda_graph": graph})
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            sess = ort.InferenceSession(path, sess_options=so)
            if "CudaEp" not in sess.get_providers():
                print(f"FAIL: the session runs on {sess.get_providers()}, not CudaEp")
                failures += 1
            got, t = timed_runs(sess, feeds)
            worst = max(float(np.max(np.abs(g - w) / (np.abs(w) + 1e-3))) for g, w in zip(got, want))
            ok = all(np.allclose(g, w, rtol=1e-3, atol=1e-4) for g, w in zip(got, want))
            failures += not ok
            print(f"enable_cuda_graph={graph}: {len(feeds)} runs {'match' if ok else 'DIFFER FROM'} the CPU EP "
                  f"(worst rel err {worst:.2e}); per Run {t * 1e6:.1f} us vs CPU EP {cpu_t * 1e6:.1f} us "
                  f"(ratio {t / cpu_t:.2f})")
        so = ort.SessionOptions()
        so.add_provider_for_devices([dev], {"no_such_key": "1"})
        # ORT's Python layer retries on the CPU EP when an EP refuses to be created; the EP
        # refused when the session does not run on it.
        try:
            refused = "CudaEp" not in ort.InferenceSession(path, sess_options=so).get_providers()
        except Exception as e:  # ORT raises its own exception types
            refused = True
            print(f"unknown option refused: {str(e).splitlines()[0][:160]}")
        print("unknown option ep.cudaep.no_such_key:", "refused by CudaEp" if refused else "ACCEPTED")
        failures += not refused
    print("ort python check:", "ok" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
