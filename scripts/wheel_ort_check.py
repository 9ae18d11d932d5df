#!/usr/bin/env python3
"""wheel_ort_check.py: run the installed onnxruntime-ep-cudaep wheel inside ONNX Runtime, from
Python, the way a user of the wheel does, and compare every result with ORT's CPU EP.

    python3 -m pip install --no-index --no-deps --target /tmp/cudaep-wheel \\
        build/wheel/onnxruntime_ep_cudaep-*.whl
    PYTHONPATH=/tmp/cudaep-wheel python3 scripts/wheel_ort_check.py

Needs onnxruntime (1.23 or later: the plugin-EP API) and numpy in the interpreter, and the wheel
installed where it imports from (not the repository's python/ folder: the script says where it
imported both modules from). It:

  * registers the library with ort.register_execution_provider_library("cudaep",
    onnxruntime_ep_cudaep.get_library_path()) and selects the device by the helpers' EP names
    from ort.get_ep_devices() (CUDAEP_BACKEND, read at registration, picks the backend: cuda by
    default; sim or auto for the simulated device);
  * runs, on CudaEp alone (session.disable_cpu_ep_fallback=1), the MLP test model with its
    weights in an external-data file (built with onnx.helper when onnx is importable, else with
    ctests/ort/gen_models.py's hand-written protobuf), eagerly at three batch sizes and with
    enable_cuda_graph=1 over 20 runs with changing inputs; README's IOBinding form (device
    tensors from OrtValue.ortvalue_from_shape_and_type(..., "gpu", 0, 0x10DE), ort.copy_tensors);
    and the tiny Llama-style decoder of ctests/ort/gen_decoder.py, 8 prompt tokens and 16 greedy
    decode steps over its key/value cache;
  * compares each with a CPU EP session (rtol 1e-3, atol 1e-4; the generated tokens identical);
  * reads cudaep's ORT counters through the wheel's ctypes package (`import cudaep`), which must
    have loaded the same file ORT registered.

It prints a line per check and "wheel_ort_check: N passed, N failed" last. Exit status: 0 when
every check passed, 1 when one failed, 2 when onnxruntime or numpy is missing (nothing ran).
"""

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEN_DIR = HERE.parent / "ctests" / "ort"  # gen_models.py, gen_decoder.py (hand-written protobuf)
NVIDIA = 0x10DE
RTOL, ATOL = 1e-3, 1e-4
IN, HIDDEN, OUT = 64, 128, 16  # gen_models.py's MLP sizes
PROMPT, STEPS = [3, 17, 42, 99, 5, 64, 101, 7], 16  # case_decoder.c's

results = []


def check(what, cond, detail=""):
    results.append(bool(cond))
    print(f"  {'ok  ' if cond else 'FAIL'} {what}{' (' + detail + ')' if detail else ''}", flush=True)
    return bool(cond)


def attempt(what, fn):
    """Runs fn(); a raised exception fails the check `what`, naming it. Returns fn's result."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  every failure is reported, then the next check runs
        check(what, False, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
        return None


def gen_module(name):
    path = GEN_DIR / f"{name}.py"
    if not path.is_file():
        return None
    sys.path.insert(0, str(GEN_DIR))
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def mlp_model(np, workdir):
    """mlp.onnx in workdir: X[batch,64] -> MatMul+Add -> Relu -> MatMul+Add -> Y[batch,16], the
    weights in mlp.weights.bin. Returns (path, how it was built)."""
    path = os.path.join(workdir, "mlp.onnx")
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        gen = gen_module("gen_models")
        if gen is None:
            raise RuntimeError(f"neither onnx nor {GEN_DIR / 'gen_models.py'} is available to build the MLP")
        gen.write_mlp(workdir)
        return path, "ctests/ort/gen_models.py (protobuf by hand)"
    rng = np.random.default_rng(20240601)
    w1 = (rng.uniform(-1, 1, (IN, HIDDEN)) / np.sqrt(IN)).astype(np.float32)
    b1 = (rng.uniform(-1, 1, HIDDEN) / np.sqrt(IN)).astype(np.float32)
    w2 = (rng.uniform(-1, 1, (HIDDEN, OUT)) / np.sqrt(HIDDEN)).astype(np.float32)
    b2 = (rng.uniform(-1, 1, OUT) / np.sqrt(HIDDEN)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"))]
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h0"]), helper.make_node("Add", ["h0", "B1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["h3"]),
             helper.make_node("Add", ["h3", "B2"], ["Y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", IN])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", OUT])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="mlp.weights.bin", size_threshold=0)
    return path, f"onnx.helper (onnx {onnx.__version__})"


def close(np, got, want):
    """(allclose, worst relative error) of two lists of arrays."""
    worst = max(float(np.max(np.abs(g - w) / (np.abs(w) + ATOL))) for g, w in zip(got, want))
    return all(g.shape == w.shape and np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got, want)), worst


def main():
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"wheel_ort_check: {e.name or e} is not importable ({e}): this check needs onnxruntime (1.23 or later) "
              "and numpy in the interpreter that runs it; nothing ran", file=sys.stderr)
        print("wheel_ort_check: 0 passed, 0 failed (not run)")
        return 2
    import onnxruntime_ep_cudaep as cudaep_ep

    print(f"wheel_ort_check: onnxruntime {ort.__version__} from {Path(ort.__file__).parent}")
    print(f"wheel_ort_check: onnxruntime_ep_cudaep from {Path(cudaep_ep.__file__).parent}")
    print(f"wheel_ort_check: CUDAEP_BACKEND={os.environ.get('CUDAEP_BACKEND', '(unset: cuda)')}")
    path = attempt("get_library_path()", cudaep_ep.get_library_path)
    if path is None:
        return summary()
    check("get_library_path() names the wheel's library, beside the module (not a source tree's build/)",
          os.path.isfile(path) and Path(path).parent == Path(cudaep_ep.__file__).resolve().parent, path)
    names = cudaep_ep.get_ep_names()
    if attempt("register_execution_provider_library", lambda: ort.register_execution_provider_library("cudaep", path)
               or True) is None:
        return summary()
    devices = [d for d in ort.get_ep_devices() if d.ep_name in names]
    if not check(f"get_ep_devices() lists a device of {names}", devices,
                 f"{len(devices)} device(s)" if devices else "none: is the GPU visible, or CUDAEP_BACKEND=sim set?"):
        return summary()
    dev = devices[0]
    try:
        hw = dev.device
        print(f"wheel_ort_check: device {dev.ep_name} ({dev.ep_vendor}), hardware vendor 0x{hw.vendor_id:04x}, "
              f"metadata {dict(dev.ep_metadata)}")
    except Exception as e:  # noqa: BLE001  only a report: the checks below decide
        print(f"wheel_ort_check: device {dev.ep_name} (cannot describe it: {e})")
    check(f"the selected device's EP is get_ep_name() ({cudaep_ep.get_ep_name()})", dev.ep_name == cudaep_ep.get_ep_name())

    def session(model, options=None, fallback=False):
        so = ort.SessionOptions()
        if not fallback:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices([dev], {k: str(v) for k, v in (options or {}).items()})
        return ort.InferenceSession(model, sess_options=so)

    def cpu(model):
        return ort.InferenceSession(model, providers=["CPUExecutionProvider"])

    rng = np.random.default_rng(7)
    keep = []  # sessions alive until the counters are read
    with tempfile.TemporaryDirectory(prefix="cudaep-wheel-ort-") as work:
        mlp = attempt("build the MLP", lambda: mlp_model(np, work))
        if mlp:
            model, how = mlp
            print(f"wheel_ort_check: MLP built with {how}")
            ref = cpu(model)
            s = attempt("MLP session on CudaEp alone", lambda: session(model))
            if s is not None:
                keep.append(s)
                check("the MLP session runs on CudaEp", s.get_providers()[0] == cudaep_ep.get_ep_name(),
                      str(s.get_providers()))
                for batch in (1, 3, 8):
                    x = rng.standard_normal((batch, IN), dtype=np.float32)
                    got = attempt(f"MLP batch {batch}", lambda: s.run(None, {"X": x}))
                    if got is not None:
                        ok, worst = close(np, got, ref.run(None, {"X": x}))
                        check(f"MLP batch {batch} on CudaEp matches the CPU EP", ok, f"worst rel err {worst:.2e}")
            g = attempt("MLP session with enable_cuda_graph=1", lambda: session(model, {"enable_cuda_graph": 1}))
            if g is not None:
                keep.append(g)
                xs = [rng.standard_normal((4, IN), dtype=np.float32) for _ in range(20)]
                got = attempt("20 graph runs", lambda: [g.run(None, {"X": x})[0] for x in xs])
                if got is not None:
                    ok, worst = close(np, got, [ref.run(None, {"X": x})[0] for x in xs])
                    fresh = sum(not np.array_equal(a, b) for a, b in zip(got, got[1:])) == len(got) - 1
                    check("20 runs with enable_cuda_graph=1 (changing inputs) match the CPU EP", ok and fresh,
                          f"worst rel err {worst:.2e}{'' if fresh else ', an output repeated its predecessor'}")
            if s is not None:
                def iobinding():
                    # README's form: device tensors through ORT's public API only.
                    x = rng.standard_normal((4, IN), dtype=np.float32)
                    x_dev = ort.OrtValue.ortvalue_from_shape_and_type([4, IN], np.float32, "gpu", 0, NVIDIA)
                    y_dev = ort.OrtValue.ortvalue_from_shape_and_type([4, OUT], np.float32, "gpu", 0, NVIDIA)
                    ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(x)], [x_dev])
                    binding = s.io_binding()
                    binding.bind_ortvalue_input("X", x_dev)
                    binding.bind_ortvalue_output("Y", y_dev)
                    s.run_with_iobinding(binding)
                    y = np.full((4, OUT), np.nan, dtype=np.float32)
                    ort.copy_tensors([y_dev], [ort.OrtValue.ortvalue_from_numpy(y)])
                    return x_dev.device_name(), y, ref.run(None, {"X": x})[0]
                io = attempt("IOBinding with OrtValue.ortvalue_from_shape_and_type(..., 'gpu', 0, 0x10DE)", iobinding)
                if io is not None:
                    where, y, want = io
                    ok, worst = close(np, [y], [want])
                    check("IOBinding (README's form) on device tensors matches the CPU EP", ok and where != "cpu",
                          f"tensors on {where}, worst rel err {worst:.2e}")

        dec = gen_module("gen_decoder")
        if not check("the decoder's generator is beside the script", dec is not None, str(GEN_DIR / "gen_decoder.py")):
            return summary()
        attempt("build the decoder", lambda: dec.write_decoder(work))
        model = os.path.join(work, "decoder.onnx")
        d = attempt("decoder session on CudaEp alone", lambda: session(model)) if os.path.isfile(model) else None
        if d is not None:
            keep.append(d)
            check("the decoder session runs on CudaEp", d.get_providers()[0] == cudaep_ep.get_ep_name(),
                  str(d.get_providers()))
            got = attempt("greedy generation on CudaEp", lambda: generate(np, d, dec))
            want = attempt("greedy generation on the CPU EP", lambda: generate(np, cpu(model), dec))
            if got is not None and want is not None:
                tokens, logits = got
                ok, worst = close(np, logits, want[1])
                check(f"{STEPS} greedy tokens after an {len(PROMPT)}-token prompt match the CPU EP, every step's "
                      "logits too", ok and tokens == want[0], f"tokens {tokens[len(PROMPT):]}, worst rel err {worst:.2e}")

        # The wheel's ctypes package loads the same file (it looks beside itself, unless
        # CUDAEP_LIBRARY names another: then two Go runtimes would share the process).
        os.environ.pop("CUDAEP_LIBRARY", None)
        cudaep = attempt("import cudaep (the wheel's ctypes package)", lambda: __import__("cudaep"))
        if cudaep is not None:
            from cudaep import _native
            check("cudaep loaded the library ORT registered", os.path.samefile(_native.lib._name, path),
                  _native.lib._name)
            stats = cudaep.ort_stats()
            check("cudaep.ort_stats() counts the sessions and runs", stats.sessions >= len(keep) > 0 and stats.runs > 0,
                  f"sessions {stats.sessions}, partitions {stats.partitions}, runs {stats.runs}, "
                  f"captures {stats.captures}, replays {stats.replays}")
        del keep
    return summary()


def generate(np, sess, dec):
    """Greedy generation: the prompt, then STEPS tokens, each step feeding the present keys and
    values back as the next past. Returns (tokens, every step's logits)."""
    names = [o.name for o in sess.get_outputs()]
    past = {f"past_{kind}_{layer}": np.zeros((1, dec.KV_HEADS, 0, dec.HEAD_DIM), np.float32)
            for layer in range(dec.LAYERS) for kind in ("key", "value")}
    tokens, all_logits, start = list(PROMPT), [], 0
    for _ in range(STEPS + 1):
        ids = np.array([tokens[start:]], np.int64)
        seq, cached = ids.shape[1], past["past_key_0"].shape[2]
        total = cached + seq
        bias = np.where(np.arange(total)[None, :] <= cached + np.arange(seq)[:, None], 0.0, -1e9).astype(np.float32)
        feeds = {"input_ids": ids, "position_ids": np.arange(cached, total, dtype=np.int64)[None, :],
                 "attn_bias": bias[None, None], **past}
        out = dict(zip(names, sess.run(names, feeds)))
        all_logits.append(out["logits"])
        past = {k: out["present" + k[len("past"):]] for k in past}
        start = len(tokens)
        if len(tokens) < len(PROMPT) + STEPS:
            tokens.append(int(np.argmax(out["logits"][0, -1])))
    return tokens, all_logits


def summary():
    failed = results.count(False)
    print(f"wheel_ort_check: {len(results) - failed} passed, {failed} failed")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
