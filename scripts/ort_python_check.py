#!/usr/bin/env python3
"""ort_python_check.py LIBCUDAEP: run cudaep inside ONNX Runtime from Python, as users will.

Needs the `onnxruntime` (1.23 or later, with the plugin-EP API), `onnx` and `numpy` packages (the
GPU machine's /opt/torch/.venv has them); the repository's `python/cudaep` package is imported
from the same library file for its counters (CudaEpGetOrtStats) and for the C-ABI baseline.

It registers libcudaep.so with register_execution_provider_library, takes the CudaEp device from
get_ep_devices(), builds a 2-layer MLP with its weights in an external-data file, and checks,
against ORT's CPU EP on the same inputs:

  * eager runs and enable_cuda_graph=1 runs (100 runs with changing inputs), NumPy in and out;
  * IOBinding: the input and output in CudaEp's device memory, eager and with CUDA graphs;
  * paging=on: the weights streamed from the file through the double buffer at every run;
  * that CudaEp read the external-data weights from the file itself (its counters).

Then it times, in this one process, a Run of each form against the same MLP replayed through
the cudaep C ABI (capture once, then copy in, replay, copy out; and replay alone on device
buffers) and against ORT's CPU EP, and runs the demo's 8-layer 2048-wide MLP through ORT. It
prints one table and exits nonzero on any mismatch.
"""

import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

VENDOR_NVIDIA = 0x10DE
RUNS = 100


def save_mlp(path, widths, seed):
    """An MLP of MatMul+Add(+Relu between layers) over widths, every weight external data.
    Returns the weights (w0, b0, w1, b1, ...) and the external-data file's size."""
    rng = np.random.default_rng(seed)
    nodes, inits, arrays, x = [], [], [], "x"
    layers = len(widths) - 1
    for i in range(layers):
        w = (rng.standard_normal((widths[i], widths[i + 1])) / np.sqrt(widths[i])).astype(np.float32)
        b = rng.standard_normal(widths[i + 1]).astype(np.float32) * 0.1
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        arrays += [w, b]
        last = i == layers - 1
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], ["y" if last else f"a{i}"])]
        if not last:
            nodes.append(helper.make_node("Relu", [f"a{i}"], [f"r{i}"]))
            x = f"r{i}"
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", widths[-1]])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = os.path.basename(path) + ".data"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=0)
    return arrays, os.path.getsize(os.path.join(os.path.dirname(path), data))


def per_run(fn, feeds):
    fn(feeds[0])  # warm up (captures, with CUDA graphs)
    t0 = time.perf_counter()
    outs = [fn(f) for f in feeds]
    return outs, (time.perf_counter() - t0) / len(feeds)


def compare(got, want):
    worst = max(float(np.max(np.abs(g - w) / (np.abs(w) + 1e-3))) for g, w in zip(got, want))
    ok = all(np.allclose(g, w, rtol=1e-3, atol=1e-4) for g, w in zip(got, want))
    repeats = sum(np.array_equal(a, b) for a, b in zip(got, got[1:]))
    return ok and repeats == 0, worst, repeats


class DeviceTensors:
    """Makes OrtValues in CudaEp's device memory and copies them, with the first API of this
    onnxruntime build that works (they changed between releases); says which one it used."""

    def __init__(self, sess):
        self.sess, self.how, self.errors = sess, None, []

    def empty(self, shape):
        tries = []
        if hasattr(self.sess, "create_ortvalue_from_shape_and_type"):
            tries.append(("InferenceSession.create_ortvalue_from_shape_and_type(gpu, vendor 0x10de)",
                          lambda: self.sess.create_ortvalue_from_shape_and_type(shape, np.float32, "gpu", 0, VENDOR_NVIDIA)))
        tries.append(("OrtValue.ortvalue_from_shape_and_type(gpu)",
                      lambda: ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "gpu", 0)))
        try:
            from onnxruntime.capi import _pybind_state as C
            dev = C.OrtDevice(C.OrtDevice.gpu(), C.OrtDevice.default_memory(), VENDOR_NVIDIA, 0)
            tries.append(("C.OrtDevice(gpu, default, 0x10de, 0)",
                          lambda: ort.OrtValue(C.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, dev))))
        except Exception as e:  # the four-argument OrtDevice is newer than some builds
            self.errors.append(f"C.OrtDevice with a vendor: {e}")
        for how, make in tries:
            if self.how and how != self.how:
                continue
            try:
                v = make()
            except Exception as e:
                self.errors.append(f"{how}: {str(e).splitlines()[0][:200]}")
                continue
            if v.device_name().lower() == "cpu":
                self.errors.append(f"{how}: made a CPU tensor")
                continue
            self.how = how
            return v
        raise RuntimeError("no way to make a CudaEp device tensor: " + " | ".join(self.errors))

    @staticmethod
    def upload(dst, host):
        if hasattr(ort, "copy_tensors"):
            ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(host)], [dst])
        else:
            dst.update_inplace(host)

    @staticmethod
    def download(src):
        if hasattr(ort, "copy_tensors"):
            out = np.full(src.shape(), np.nan, dtype=np.float32)
            ort.copy_tensors([src], [ort.OrtValue.ortvalue_from_numpy(out)])
            return out
        return src.numpy()


def iobinding_runs(sess, feeds, out_dim):
    """Runs feeds with x and y bound in device memory (one input tensor refilled in place every
    run, as ORT's CUDA-graph contract asks). Returns the outputs, the per-Run time with the
    copies in and out, the per-Run time of the bound Run alone, and how device tensors were
    made."""
    dt = DeviceTensors(sess)
    shape = feeds[0]["x"].shape
    x = dt.empty(shape)
    y = dt.empty((shape[0], out_dim))
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)

    def run(feed):
        dt.upload(x, feed["x"])
        sess.run_with_iobinding(binding)
        return dt.download(y)

    def run_device_only(_):
        sess.run_with_iobinding(binding)

    outs, t = per_run(run, feeds)
    _, t_dev = per_run(run_device_only, feeds)
    return outs, t, t_dev, dt.how


def capi_replay(lib, weights, feeds):
    """The same MLP through the cudaep C ABI (python/cudaep): Gemm, Relu, Gemm captured once;
    per run copy in, replay, copy out; and replay + wait alone."""
    os.environ["CUDAEP_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import cudaep

    w1, b1, w2, b2 = weights
    batch, d_in = feeds[0]["x"].shape
    with cudaep.Provider(backend="cuda", tf32=False) as p:
        bufs = [p.upload(a.tobytes()) for a in (w1, b1, w2, b2)]
        x = p.alloc(batch * d_in * 4)
        h = p.alloc(batch * w1.shape[1] * 4)
        r = p.alloc(batch * w1.shape[1] * 4)
        y = p.alloc(batch * w2.shape[1] * 4)
        f32 = cudaep.DType.FLOAT32
        T = lambda b, shape: cudaep.Tensor(b, f32, shape)  # noqa: E731
        g1 = p.kernel("Gemm", [(f32, (batch, d_in)), (f32, w1.shape), (f32, b1.shape)])
        relu = p.kernel("Relu", [(f32, (batch, w1.shape[1]))])
        g2 = p.kernel("Gemm", [(f32, (batch, w1.shape[1])), (f32, w2.shape), (f32, b2.shape)])
        with p.capture(kernels=[g1, relu, g2], retain=bufs + [x, h, r, y]):
            g1([T(x, (batch, d_in)), T(bufs[0], w1.shape), T(bufs[1], b1.shape)], [T(h, (batch, w1.shape[1]))])
            relu([T(h, (batch, w1.shape[1]))], [T(r, (batch, w1.shape[1]))])
            g2([T(r, (batch, w1.shape[1])), T(bufs[2], w2.shape), T(bufs[3], b2.shape)], [T(y, (batch, w2.shape[1]))])

        def run(feed):
            x.write(feed["x"].tobytes())
            p.replay()
            return np.frombuffer(y.read(), dtype=np.float32).reshape(batch, w2.shape[1])

        def replay_only(_):
            p.replay()
            p.synchronize_compute()

        outs, t = per_run(run, feeds)
        _, t_dev = per_run(replay_only, feeds)
        for b in bufs + [x, h, r, y]:
            b.close()
    return outs, t, t_dev


def main():
    lib = os.path.abspath(sys.argv[1])
    os.environ["CUDAEP_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import cudaep

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
    checks = 0  # every check counted once, so the closing line says how many ran
    rows = []

    def counted(failed):
        nonlocal checks
        checks += 1
        return int(bool(failed))

    def session(path, **options):
        so = ort.SessionOptions()
        so.add_provider_for_devices([dev], {k: str(v) for k, v in options.items()})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        s = ort.InferenceSession(path, sess_options=so)
        if "CudaEp" not in s.get_providers():
            raise RuntimeError(f"the session runs on {s.get_providers()}, not CudaEp")
        return s

    def check(label, got, want, t, base=None):
        nonlocal failures
        ok, worst, repeats = compare(got, want)
        failures += counted(not ok)
        print(f"{label}: {len(got)} runs {'match' if ok else 'DIFFER FROM'} the CPU EP (worst rel err {worst:.2e}"
              f"{f', {repeats} repeated outputs' if repeats else ''})")
        rows.append((label, t, base))

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.onnx")
        weights, file_bytes = save_mlp(path, [256, 1024, 256], seed=7)
        cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        feeds = [{"x": rng.standard_normal((4, 256), dtype=np.float32)} for _ in range(RUNS)]
        want, cpu_t = per_run(lambda f: cpu.run(None, f)[0], feeds)
        rows.append(("ORT CPU EP, NumPy in and out", cpu_t, None))

        before = cudaep.ort_stats()
        for graph in (0, 1):
            s = session(path, enable_cuda_graph=graph)
            got, t = per_run(lambda f: s.run(None, f)[0], feeds)
            check(f"CudaEp, enable_cuda_graph={graph}, NumPy in and out", got, want, t, cpu_t)
            try:
                got, t, t_dev, how = iobinding_runs(s, feeds, want[0].shape[1])
                check(f"CudaEp, enable_cuda_graph={graph}, IOBinding ({how})", got, want, t, cpu_t)
                rows.append((f"CudaEp, enable_cuda_graph={graph}, IOBinding, Run alone (device in and out)", t_dev, None))
            except Exception as e:
                failures += counted(True)
                print(f"FAIL IOBinding with enable_cuda_graph={graph}: {e}")
                print("  onnxruntime has:", [n for n in dir(ort) if "copy" in n.lower() or "device" in n.lower()],
                      [n for n in dir(ort.OrtValue) if not n.startswith("__")],
                      [n for n in dir(ort.InferenceSession) if "ortvalue" in n.lower() or "binding" in n.lower()])
            del s
        after = cudaep.ort_stats()
        read = after.weight_file_bytes - before.weight_file_bytes
        print(f"CudaEp read {read} bytes of external data itself for 2 sessions ({file_bytes} in the file)")
        failures += counted(read != 2 * file_bytes)

        s = session(path, paging="on")
        before = cudaep.ort_stats()
        got, t = per_run(lambda f: s.run(None, f)[0], feeds)
        after = cudaep.ort_stats()
        check("CudaEp, paging=on (weights streamed from the file at every run), NumPy in and out", got, want, t, cpu_t)
        layers = after.paged_layers - before.paged_layers
        print(f"paging=on: {layers} layers paged over {RUNS + 1} runs ({after.paged_bytes - before.paged_bytes} bytes)")
        failures += counted(layers != 2 * (RUNS + 1))
        del s

        try:
            got, t, t_dev = capi_replay(lib, weights, feeds)
            check("cudaep C ABI: copy in, replay, copy out", got, want, t, cpu_t)
            rows.append(("cudaep C ABI: replay + wait alone (device in and out)", t_dev, None))
        except Exception as e:
            failures += counted(True)
            print(f"FAIL the C-ABI baseline: {e}")

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
        failures += counted(not refused)

        # The demo's model: 8 layers of 2048 (128 MiB of float32 weights), prefill of 128 rows and
        # decode steps of one row.
        path = os.path.join(tmp, "demo.onnx")
        save_mlp(path, [2048] * 9, seed=11)
        cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        for rows_n, label, runs in ((128, "prefill, 128 rows", 10), (1, "decode step, 1 row", 50)):
            fs = [{"x": rng.standard_normal((rows_n, 2048), dtype=np.float32)} for _ in range(runs)]
            want, cpu_t = per_run(lambda f: cpu.run(None, f)[0], fs)
            rows.append((f"demo MLP 8x2048, {label}: ORT CPU EP", cpu_t, None))
            for opts, name in (({"tf32": 0}, "resident"), ({"tf32": 0, "enable_cuda_graph": 1}, "CUDA graphs"),
                               ({"tf32": 0, "paging": "on"}, "paging=on")):
                s = session(path, **opts)
                got, t = per_run(lambda f: s.run(None, f)[0], fs)
                check(f"demo MLP 8x2048, {label}: CudaEp {name}", got, want, t, cpu_t)
                del s

    st = cudaep.ort_stats()
    print(f"after closing every session: {st.sessions} sessions, {st.partitions} partitions, {st.sync_streams} streams,"
          f" {st.device_live_bytes - st.device_cached_bytes} device bytes beyond {st.device_cached_bytes} cached")
    failures += counted(st.sessions != 0 or st.partitions != 0)

    print("\nper Run, one process (ratio: over ORT's CPU EP on the same model and inputs)")
    for label, t, base in rows:
        print(f"  {label:<100} {t * 1e6:9.1f} us" + (f"  ({t / base:.2f}x CPU EP)" if base else ""))
    print(f"ort python check: {checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
