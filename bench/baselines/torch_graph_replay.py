"""PyTorch baseline of bench/cudaep-bench's graph replay rows.

It captures the same decode step as the other baselines -- N float32 adds over three tensors
of 1024 elements, chained c = a + b, a = c + b, ... -- into a torch.cuda.CUDAGraph, and times
g.replay() followed by a synchronization of the replay stream, per step, N = 1, 4, 32. Every
sample is the mean per step over a batch; REPS samples follow a warm-up. Before timing, the
4-kernel step's result is checked bit for bit against a + 4b computed the same way eagerly.

Output: the line format bench/cudaep-bench parses (bench/cudaep-bench/external.go):
    info KEY VALUE...            sample replay/N us V1 V2 ...
and, when PyTorch cannot run here, one "skip replay/N REASON" line per series (exit status 0:
a missing PyTorch is a fact about the machine, not a failure of the benchmark).

Usage: python3 torch_graph_replay.py quick|full
"""

import sys
import time

STEP_ELEMS = 1024
KERNELS = (1, 4, 32)
SIZES = {
    "full": {"reps": 15, "iters": {1: 500, 4: 500, 32: 150}},
    "quick": {"reps": 5, "iters": {1: 20, 4: 20, 32: 5}},
}


def skip_all(reason):
    """Print a skip line for every series and return the exit status."""
    reason = " ".join(str(reason).split())  # one line
    for n in KERNELS:
        print(f"skip replay/{n} {reason}")
    return 0


def main(argv):
    if len(argv) != 2 or argv[1] not in SIZES:
        print("usage: torch_graph_replay.py quick|full", file=sys.stderr)
        return 2
    size = SIZES[argv[1]]
    try:
        import torch
    except Exception as e:  # ImportError, or a broken installation
        return skip_all(f"torch not importable: {type(e).__name__}: {e}")
    if not torch.cuda.is_available():
        return skip_all(f"torch {torch.__version__} sees no CUDA device")

    dev = torch.device("cuda", 0)
    print(f"info torch_version {torch.__version__}")
    print(f"info torch_cuda {torch.version.cuda}")
    print(f"info torch_device {torch.cuda.get_device_name(dev)}")

    # The highest priority, like ep's compute stream (lower numbers are higher priorities).
    try:
        stream = torch.cuda.Stream(device=dev, priority=-1)
    except (RuntimeError, TypeError):
        stream = torch.cuda.Stream(device=dev)

    idx = torch.arange(STEP_ELEMS, device=dev, dtype=torch.float32).remainder(4096)

    def pattern(base):
        return base + idx * 0.5 + 1.0

    a, b, c = pattern(0.25), pattern(1.25), pattern(2.25)

    def step(n):
        for k in range(n):
            if k % 2 == 0:
                torch.add(a, b, out=c)
            else:
                torch.add(c, b, out=a)

    for n in KERNELS:
        iters = size["iters"][n]
        with torch.cuda.stream(stream):
            for _ in range(3):  # eager warm-up on the capture stream, as the CUDA graphs docs ask
                step(n)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step(n)
        stream.synchronize()

        if n == 4:
            a.copy_(pattern(0.25))
            b.copy_(pattern(1.25))
            torch.cuda.synchronize()
            want_a, want_c = a.clone(), c.clone()
            for k in range(4):
                if k % 2 == 0:
                    want_c = want_a + b
                else:
                    want_a = want_c + b
            with torch.cuda.stream(stream):
                graph.replay()
            stream.synchronize()
            if not torch.equal(a, want_a):
                print("torch_graph_replay: the replayed step's result differs from the eager one", file=sys.stderr)
                return 1

        samples = []
        with torch.cuda.stream(stream):
            for rep in range(size["reps"] + 1):  # the first batch warms up
                t0 = time.perf_counter()
                for _ in range(iters):
                    graph.replay()
                    stream.synchronize()
                per_step_us = (time.perf_counter() - t0) / iters * 1e6
                if rep > 0:
                    samples.append(per_step_us)
        print(f"sample replay/{n} us " + " ".join(f"{v:.4f}" for v in samples), flush=True)
        del graph
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
