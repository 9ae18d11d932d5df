"""PyTorch baseline of ep/kernels' op benchmark (TestOpBenchTable, driven by
bench/scripts/op-bench.sh).

For every memory-bound row (Add, Sigmoid, LayerNormalization over the last axis, ReduceSum over
the last axis and a 2-D Transpose of 256 MiB float32 and float16 tensors) and every MatMul row
(float16 and bfloat16, M = 1, 16, 512, 4096, K = N = 4096) it runs the same op on tensors of the
same shapes and dtypes, writing into preallocated outputs where PyTorch offers out=, and times a
batch of calls with torch.cuda.Event after a warm-up: SAMPLES samples of milliseconds per call,
the same batch sizes as the Go side. Inputs hold the same kind of values (0.25 + (i mod 97)/97).

Output: JSON on stdout, {"info": ..., "rows": {ID: [ms, ...]}, "notes": {ID: why}}; a row that
cannot run says why in notes. Exit status 0 whenever JSON was written (a missing PyTorch is a
fact about the machine, not a failure of the benchmark).

Usage: python3 torch_ops.py [quick]

CUDAEP_OPBENCH_ROWS, a regular expression, limits the rows to the IDs it matches (unanchored, as
TestOpBenchTable reads it); unset or empty: every row.
"""

import json
import os
import re
import sys


def main(argv):
    quick = len(argv) > 1 and argv[1] == "quick"
    out = {"info": "", "rows": {}, "notes": {}}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no baseline
        out["info"] = f"torch not importable: {e}"
        print(json.dumps(out))
        return 0
    if not torch.cuda.is_available():
        out["info"] = f"torch {torch.__version__}: no CUDA device"
        print(json.dumps(out))
        return 0
    dev = torch.device("cuda")
    out["info"] = f"torch {torch.__version__} cuda {torch.version.cuda} on {torch.cuda.get_device_name(0)}"
    tensor_bytes = (64 << 10) if quick else (256 << 20)
    samples, batch = (3, 2) if quick else (15, 20)
    hidden = 256 if quick else 4096
    side = 128 if quick else 8192

    def fill(shape, dtype):
        n = 1
        for d in shape:
            n *= d
        base = 0.25 + (torch.arange(n, device=dev, dtype=torch.float32) % 97) / 97
        return base.to(dtype).reshape(shape)

    def timed(calls, fn):
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    wanted = re.compile(os.environ.get("CUDAEP_OPBENCH_ROWS", ""))

    def row(rid, calls, fn):
        if not wanted.search(rid):
            return
        try:
            out["rows"][rid] = [timed(calls, fn) for _ in range(samples)]
        except Exception as e:  # noqa: BLE001 - report, go on with the other rows
            out["notes"][rid] = " ".join(str(e).split())[:300]
        torch.cuda.synchronize()

    for name, dtype in (("float32", torch.float32), ("float16", torch.float16)):
        n = tensor_bytes // torch.tensor([], dtype=dtype).element_size()
        a, b, y = fill((n,), dtype), fill((n,), dtype), torch.empty(n, device=dev, dtype=dtype)
        row(f"add/{name}", batch, lambda: torch.add(a, b, out=y))
        row(f"sigmoid/{name}", batch, lambda: torch.sigmoid(a, out=y))
        x2 = a.view(n // hidden, hidden)
        w, bias = fill((hidden,), dtype), fill((hidden,), dtype)
        row(f"layernorm/{name}", batch, lambda: torch.nn.functional.layer_norm(x2, (hidden,), w, bias, 1e-5))
        s = torch.empty(n // hidden, device=dev, dtype=dtype)
        row(f"reducesum/{name}", batch, lambda: torch.sum(x2, dim=-1, out=s))
        xt = a.view(side, n // side)
        yt = y.view(n // side, side)
        row(f"transpose/{name}", batch, lambda: yt.copy_(xt.t()))
        del a, b, y, x2, s, xt, yt
        torch.cuda.empty_cache()

    src = torch.empty(tensor_bytes, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    row("copy", batch, lambda: dst.copy_(src))
    del src, dst

    kn = 64 if quick else 4096
    ms = (1, 16) if quick else (1, 16, 512, 4096)
    for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        for m in ms:
            a, b = fill((m, kn), dtype), fill((kn, kn), dtype)
            y = torch.empty(m, kn, device=dev, dtype=dtype)
            row(f"matmul/{name}/m{m}", batch if m > 16 else 10 * batch, lambda: torch.matmul(a, b, out=y))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
