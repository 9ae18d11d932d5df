#!/usr/bin/env python3
r"""llama_decode.py LIBCUDAEP WORKDIR [options]: a Llama-style model from `transformers`, exported
with `torch.onnx.export`, decoding through ONNX Runtime on cudaep, against the same model in
PyTorch: its correctness, and decode and prefill timings beside PyTorch's. Runs where torch,
transformers, onnx and onnxruntime (1.23+, plugin EPs) are installed and a CUDA GPU is present;
nothing is downloaded.

The model is `transformers`' LlamaForCausalLM built from a LlamaConfig with seeded random
weights (default ~1B parameters: hidden 2048, 16 layers, 32 query heads, 8 key/value heads,
MLP 8192, vocabulary 32000) in bfloat16. Its forward code is transformers'; the only code of
ours inside the export is the key/value cache object handed to it (`StaticKV`), which keeps a
fixed-size cache so that every shape in the graph is static:

  prefill graph  input_ids int64 [1, P]
                 -> logits float32 [1, P, V], present_key_<l>/present_value_<l> bf16 [1, KV, M, D]
                    (positions 0..P-1 filled, the rest zero)
  decode graph   input_ids int64 [1, 1], cache_position int64 [1],
                 past_key_<l>/past_value_<l> bf16 [1, KV, M, D]
                 -> logits float32 [1, 1, V], present_key_<l>/present_value_<l> [1, KV, M, D]
                    (the past with position cache_position replaced)

Attention is transformers' eager attention over the whole cache with an additive mask that hides
the positions after cache_position, which is also what PyTorch's own static cache does under CUDA
graphs. Static shapes are what CudaEp needs to claim every node (shape-deciding inputs must be
constants) and to replay one captured graph per step.

Checks (exit status 1 when one fails):
  * every node of every graph runs on CudaEp (session.disable_cpu_ep_fallback=1);
  * prefill logits against the same model in float32 PyTorch, within a stated tolerance, beside
    PyTorch bfloat16's own distance from float32;
  * TOKENS greedy tokens after the prompt, ORT + CudaEp against PyTorch bfloat16 running the same
    static-cache forward; a divergence is reported with both runs' logit margins there.
  * the contrib-op form (contrib_form): the same weights exported in float32, ORT's transformer
    optimizer and its float16 conversion, on CudaEp alone; its prefill logits and 8 decode steps'
    against the float32 model.

Benchmarks (printed as one table, same weights and dtype, one process; --bench picks the rows):
  * decode ms/token at contexts 128 and 2048 (cache sizes 128+TOKENS and 2048+TOKENS), the step
    timed at position ctx over and over (median_ms):
    - PyTorch eager (DynamicCache, the ordinary transformers loop); the exported forward
      (StaticKV, which rewrites every layer's whole cache out of place, and the additive mask)
      eager and under torch.cuda.CUDAGraph, with eager and SDPA attention: baselines slowed by
      that forward, not compiled;
    - the fair anchor, compiled PyTorch: FastLlama, the same weights written as gpt-fast writes a
      Llama (one GEMM for q, k, v and one for gate and up; each layer's cache [1, KV, M, D]
      allocated once and written in place with index_copy_; SDPA over the cache with a boolean
      mask and enable_gqa), under torch.compile(fullgraph=True) in each mode of
      --torch-compile-modes (default reduce-overhead and max-autotune, which autotunes for
      minutes; the compile time is logged); and transformers' own StaticCache forward under
      torch.compile reduce-overhead. Their inputs (token id [1, 1], cache_position [1]) are static
      CUDA tensors updated in place. Each is checked before it is timed: fed a 12-token prompt a
      token at a time and 4 greedy steps, its logits against transformers' eager forward
      (DynamicCache); over 0.1 x the largest |logit|, or an argmax differing other than at a
      tie, is logged loudly and the row is NaN, not timed;
    - ORT + CudaEp eager and with enable_cuda_graph=1 (IOBinding: the cache stays on the device
      between steps, one set of buffers bound as both past and present, which CudaEp updates in
      place; one graph arm binds two sets swapped);
  * bytes read per token (weights + cache) over the time, against the H200's 4.8 TB/s;
  * each decode time over the fastest compiled PyTorch arm's (vs_best_torch, the headline) and
    over the fastest static-cache CUDAGraph arm's (vs_torch_graph); None where that arm did not
    run; results["best_compiled_torch_ms"] per context, and each compiled arm's compile time,
    check and time in results["torch_compiled"];
  * prefill tokens/s for a 512-token prompt, PyTorch eager, ORT + CudaEp, and the compiled
    anchor: FastLlama (its cache sized for the prompt and the decode tokens) under
    torch.compile(fullgraph=True) in each mode of --torch-prefill-modes (default
    max-autotune-no-cudagraphs and reduce-overhead), its prompt ids and positions static CUDA
    tensors, its logits of every position cast to float32 as CudaEp's are (the same work), checked
    before timing: the last position's logits against transformers' eager forward of the same
    prompt (within 0.1 x the largest |logit|, the argmax the same but at a tie), else NaN;
  * prefill with paging=on and weight_budget_bytes at 25 % of the weights.

The int4 section (--int4 SCHEMES, and the int4 rows of --bench, which default to --int4 sym,asym),
weight-only int4, the form most LLM ONNX models ship in:
  * the models: the same weights exported in float16 (--int4-dtype; ORT's quantizer takes float16
    and float32 MatMul weights, not bfloat16), each graph quantised by ORT's own
    MatMulNBitsQuantizer (onnxruntime.quantization.matmul_nbits_quantizer, its default
    algorithm, block_size 32), symmetric (sym: is_symmetric=True, no zero points) and with zero
    points (asym): every MatMul with a constant weight, the LM head included, becomes
    com.microsoft.MatMulNBits; the embedding stays float. Saved with external data in
    WORK/int4_<scheme>_<dtype>_<graph>/ (kept by --reuse-exports); logged: the MatMulNBits
    nodes, the bytes of packed weights, scales and zero points, whether the LM head is
    quantised, and the bytes a decode step reads (those, the norms, one embedding row and the
    cache: the bandwidth column's);
  * where they run: each model on CudaEp alone first (session.disable_cpu_ep_fallback=1); when
    that fails, CudaEp's declines are logged (OrtRunner.declines) and the model runs with CPU
    fallback, its labels saying "MatMulNBits on ORT's CPU EP (CudaEp declined them)" and its
    decode rows given neither bandwidth nor ratios (the time is not cudaep's); each row says
    matmulnbits_ep, results["int4"]["placement"] why. Any decline fails the check (one for a
    pending MatMulNBits PTX, too: the PTX is committed, so that is a stale build);
  * the check (with --int4, unless --skip-check), per scheme at the check's cache size: prefill
    logits of ORT + CudaEp against ORT's CPU EP on the same int4 model and against float32
    PyTorch with the int4 weights dequantised (tolerance 3x PyTorch float16's own distance from
    float32 on those weights, at least 0.05), and against float32 PyTorch with the unquantised
    weights beside the bf16 model's own distance (the quantisation's error: information); then
    the bf16 check's PyTorch tokens teacher-forced through both EPs: each next token the CPU
    EP's but at measured ties (the CPU EP's two logits, or the dequantised float32 model's,
    closer than the EPs' difference at that step);
  * int4decode128, int4decode2048: decode ms/token, ORT eager and with enable_cuda_graph=1
    (IOBinding, as the decode rows), and the int4 anchor: FastLlamaInt4, the gpt-fast-style
    model on the same quantised weights through PyTorch's own int4 weight-only matmul
    (torch.ops.aten._weight_int4pack_mm; ORT's B, scales and zero points converted to its
    layout, verified on layer 0's q/k/v and on the LM head against a dequantised bf16 matmul,
    the model checked against transformers with the weights dequantised) under torch.compile
    in each of --int4-torch-modes (default reduce-overhead); logged plainly, and NaN, where
    torch has none. Ratios: vs_best_int4_torch (over the fastest int4 PyTorch arm),
    vs_best_bf16_torch (over the fastest bf16 compiled PyTorch arm of the same run's
    decode<ctx> row: put it in --bench too), vs_best_torch (over the faster of the two: below
    1 beats both), vs_torch_graph;
  * int4prefill512: the 512-token prefill, weights resident, and with paging=auto at 25 % of
    the int4 model's weights (only where CudaEp runs every node); vs_bf16_prefill, the bf16
    resident arm's time (the same run's prefill512) over it.
The whole of it in one run:
  llama_decode.py LIB WORK --int4 sym,asym --json out.json \
      --bench decode128,decode2048,prefill512,int4decode128,int4decode2048,int4prefill512

--arms REGEX keeps only the decode and prefill arms whose label it matches (re.search), e.g. one
ORT arm for an A/B of two library builds in two processes:
  llama_decode.py LIB WORK --skip-check --reuse-exports --bench decode128 \
      --arms 'ORT \+ CudaEp, enable_cuda_graph=1 \(IOBinding\)'
With --gpu-profile it also measures the GPU's busy time per step with CUPTI, which slows every
driver call the process makes afterwards (see device_busy_ms): time the rows without it.
"""

import argparse
import copy
from collections import Counter
import gc
import json
import logging
import os
import re
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

PEAK_BYTES_PER_S = 4.8e12
GPU_PROFILE = False  # --gpu-profile: trace with CUPTI for the GPU-busy breakdowns (see device_busy_ms)
VENDOR_NVIDIA = 0x10DE
BF16 = 16  # TensorProto.BFLOAT16
FLOAT32 = 1  # TensorProto.FLOAT
FLOAT16 = 10  # TensorProto.FLOAT16
MODEL_DTYPE = torch.bfloat16  # --dtype; float32 only for --export-only (the CI fixtures)


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------- the model and its export


def build_model(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.inter,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg)
    # transformers initialises with std 0.02 everywhere, which makes a random model's logits nearly
    # flat; a larger embedding/LM-head scale gives greedy decoding margins worth comparing.
    with torch.no_grad():
        model.lm_head.weight.mul_(args.head_scale)
    model = model.to(MODEL_DTYPE).cuda().eval()
    return cfg, model


class StaticKV:
    """The key/value cache handed to transformers' attention: fixed-size tensors, updated out of
    place (the export has no in-place writes), position `pos` replaced in decode, positions 0..S-1
    written in prefill."""

    def __init__(self, kv, pos=None, prefill_len=None):
        self.kv, self.pos, self.prefill_len = list(kv), pos, prefill_len

    def update(self, k, v, layer_idx, cache_kwargs=None):
        i = 2 * layer_idx
        out = []
        for past, new in ((self.kv[i], k), (self.kv[i + 1], v)):
            if self.prefill_len is not None:
                full = torch.cat([new, past[:, :, self.prefill_len:]], dim=2)
            else:
                m = past.shape[2]
                hit = (torch.arange(m, device=past.device) == self.pos).view(1, 1, m, 1)
                full = torch.where(hit, new.expand(-1, -1, m, -1), past)
            out.append(full)
        self.kv[i], self.kv[i + 1] = out
        return out[0], out[1]

    def get_seq_length(self, layer_idx=0):
        return 0


def additive_mask(cache_position, m, dtype):
    """[1, 1, S, M]: 0 where key position <= the query's position, the dtype's minimum after."""
    keys = torch.arange(m, device=cache_position.device).view(1, m)
    hidden = keys > cache_position.view(-1, 1)
    zero = torch.zeros((), dtype=dtype, device=cache_position.device)
    low = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=cache_position.device)
    return torch.where(hidden, low, zero).view(1, 1, -1, m)


class Prefill(torch.nn.Module):
    def __init__(self, model, cfg, m, dtype=None):
        super().__init__()
        self.model, self.cfg, self.m, self.dtype = model, cfg, m, dtype or MODEL_DTYPE

    def forward(self, input_ids):
        s = input_ids.shape[1]
        cfg, dev = self.cfg, input_ids.device
        hd = cfg.hidden_size // cfg.num_attention_heads
        zeros = torch.zeros(1, cfg.num_key_value_heads, self.m, hd, dtype=self.dtype, device=dev)
        kv = StaticKV([zeros] * (2 * cfg.num_hidden_layers), prefill_len=s)
        pos = torch.arange(s, device=dev)
        out = self.model(input_ids=input_ids, attention_mask=additive_mask(pos, self.m, self.dtype),
                         position_ids=pos.view(1, s), cache_position=pos, past_key_values=kv, use_cache=True)
        return (out.logits.float(), *kv.kv)


class Decode(torch.nn.Module):
    def __init__(self, model, cfg, m, dtype=None):
        super().__init__()
        self.model, self.cfg, self.m, self.dtype = model, cfg, m, dtype or MODEL_DTYPE

    def forward(self, input_ids, cache_position, *past):
        kv = StaticKV(past, pos=cache_position)
        out = self.model(input_ids=input_ids, attention_mask=additive_mask(cache_position, self.m, self.dtype),
                         position_ids=cache_position.view(1, 1), cache_position=cache_position,
                         past_key_values=kv, use_cache=True)
        return (out.logits.float(), *kv.kv)


def bf16_ulp(v):
    """The spacing of bfloat16 numbers at v (8 significant bits)."""
    v = abs(v)
    return 2.0 ** (np.floor(np.log2(v)) - 7) if v > 0 else 2.0 ** -133


def at_tie(ref, a, b, d):
    """Whether choosing token a where the reference logits ref chose b is a tie: ref's top logit
    above a's by no more than d (the two logit vectors' largest difference) or two bf16 spacings."""
    return float(ref[b] - ref[a]) <= max(d, 2 * bf16_ulp(float(ref[b])))


def kv_names(cfg, prefix):
    return [f"{prefix}_{kind}_{l}" for l in range(cfg.num_hidden_layers) for kind in ("key", "value")]


REUSE = False  # --reuse-exports: keep a model.onnx an earlier run of the same arguments wrote


def export(module, inputs, in_names, out_names, path, how):
    """torch.onnx.export with weights as external data; `how` is 'dynamo' or 'torchscript'.
    Returns (seconds, the exporter used)."""
    if REUSE and os.path.exists(path):
        return 0.0, "reused"
    module.eval()
    t0 = time.perf_counter()
    errors = []
    order = ["dynamo", "torchscript"] if how == "auto" else [how]
    for h in order:
        try:
            with torch.no_grad():
                if h == "dynamo":
                    prog = torch.onnx.export(module, inputs, dynamo=True, input_names=in_names,
                                             output_names=out_names, opset_version=18, external_data=True)
                    prog.save(path, external_data=True)
                else:
                    torch.onnx.export(module, inputs, path, dynamo=False, input_names=in_names,
                                      output_names=out_names, opset_version=18, external_data=True,
                                      do_constant_folding=True)
            return time.perf_counter() - t0, h
        except Exception as e:  # report and try the next exporter
            errors.append(f"{h}: {type(e).__name__}: {str(e)[:2000]}")
            log(f"export with {h} failed:\n{traceback.format_exc()[-4000:]}")
    raise RuntimeError("every exporter failed: " + " | ".join(errors))


def describe_onnx(path):
    import onnx

    m = onnx.load(path, load_external_data=False)
    ops = {}
    for n in m.graph.node:
        key = (n.domain or "") + ("." if n.domain else "") + n.op_type
        ops[key] = ops.get(key, 0) + 1
    data = sum(os.path.getsize(os.path.join(os.path.dirname(path), f)) for f in os.listdir(os.path.dirname(path))
               if f.startswith(os.path.basename(path)) and f != os.path.basename(path))
    return len(m.graph.node), ops, [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")], data


# ---------------------------------------------------------------- ONNX Runtime with CudaEp


class OrtRunner:
    def __init__(self, lib):
        import onnxruntime as ort

        self.ort = ort
        ort.register_execution_provider_library("cudaep", lib)
        devs = [d for d in ort.get_ep_devices() if d.ep_name == "CudaEp"]
        if not devs:
            raise RuntimeError("get_ep_devices() lists no CudaEp device")
        self.dev = devs[0]
        from onnxruntime.capi import _pybind_state as C

        self.C = C
        self.cdev = C.OrtDevice(C.OrtDevice.gpu(), C.OrtDevice.default_memory(), VENDOR_NVIDIA, 0)

    def session(self, path, fallback=False, profile=None, **options):
        """A session of the model at path on CudaEp with the EP options given. profile: a path
        prefix: ORT's profiler records the session's runs (SessionOptions.enable_profiling) into
        a JSON trace named from it, whose path end_profiling() returns."""
        so = self.ort.SessionOptions()
        so.add_provider_for_devices([self.dev], {k: str(v) for k, v in options.items()})
        if not fallback:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.log_severity_level = 3
        if profile:
            so.enable_profiling = True
            so.profile_file_prefix = profile
        s = self.ort.InferenceSession(path, sess_options=so)
        if "CudaEp" not in s.get_providers():
            raise RuntimeError(f"the session runs on {s.get_providers()}, not CudaEp")
        return s

    def declines(self, path, logfile):
        """With CPU fallback allowed and the session logging at INFO into logfile: the reasons
        CudaEp gives for each node it leaves (one line per node)."""
        so = self.ort.SessionOptions()
        so.add_provider_for_devices([self.dev], {})
        so.log_severity_level = 1
        fd = os.dup(2)
        with open(logfile, "w") as f:
            os.dup2(f.fileno(), 2)
            try:
                self.ort.InferenceSession(path, sess_options=so)
            except Exception as e:
                print(f"session with fallback failed too: {e}", file=sys.stderr)
            finally:
                os.dup2(fd, 2)
                os.close(fd)
        lines = open(logfile, errors="replace").read().splitlines()
        out = []
        for l in lines:
            if "leaves node" in l:
                out.append(l[l.index("leaves node"):][:400])
            elif "placed on [" in l:
                out.append(l[l.index("Node(s)"):])
        return out

    def device_value(self, shape, onnx_type):
        """An OrtValue of onnx_type in CudaEp's device memory."""
        tries = []
        ov = self.ort.OrtValue
        tries.append(lambda: ov.ortvalue_from_shape_and_type(list(shape), onnx_type, "gpu", 0, VENDOR_NVIDIA))
        if hasattr(self.C.OrtValue, "ortvalue_from_shape_and_onnx_type"):
            tries.append(lambda: ov(self.C.OrtValue.ortvalue_from_shape_and_onnx_type(list(shape), onnx_type, self.cdev)))
        errs = []
        for t in tries:
            try:
                v = t()
                if v.device_name().lower() != "cpu":
                    return v
                errs.append("made a CPU tensor")
            except Exception as e:
                errs.append(str(e).splitlines()[0][:200])
        raise RuntimeError(f"cannot make a device OrtValue of ONNX type {onnx_type}: " + " | ".join(errs))


class OrtDecoder:
    """Prefill then greedy decode through ORT with the cache bound on the device (IOBinding): one
    set of cache buffers bound as both past and present (shared, as ORT's generative runtime binds
    a shared buffer: CudaEp updates the one new position in place), or two sets, each step's
    present becoming the next step's past (swapped)."""

    def __init__(self, runner, cfg, prefill_path, decode_path, m, graph, prefill_options=None, decode_options=None,
                 decode_profile=None, shared=True, kv_type=BF16, fallback=False):
        """Either path may be None (a decoder that only prefills, or only decodes);
        prefill_options and decode_options are the sessions' further CudaEp options;
        decode_profile, when given, profiles the decode session (OrtRunner.session's profile);
        shared picks one set of cache buffers (past and present alike) over two swapped;
        kv_type is the cache's ONNX element type (BF16, or FLOAT16 for the contrib-op form and
        the int4 models, FLOAT32 for a float32 int4 model); fallback lets ORT's CPU EP take the
        nodes CudaEp declines (OrtRunner.session)."""
        self.r, self.cfg, self.m, self.kv_type = runner, cfg, m, kv_type
        self.prefill = (runner.session(prefill_path, fallback=fallback, **(prefill_options or {}))
                        if prefill_path else None)
        self.decode = (runner.session(decode_path, fallback=fallback, profile=decode_profile,
                                      enable_cuda_graph=int(graph), **(decode_options or {}))
                       if decode_path else None)
        hd = cfg.hidden_size // cfg.num_attention_heads
        shape = (1, cfg.num_key_value_heads, m, hd)
        sets = 1 if shared else 2
        self.sets = [[runner.device_value(shape, kv_type) for _ in range(2 * cfg.num_hidden_layers)] for _ in range(sets)]
        self.shared = shared
        self.cur = 0
        self.past_names, self.present_names = kv_names(cfg, "past"), kv_names(cfg, "present")

    def run_prefill(self, ids, logits=None):
        """Runs the prompt; returns the logits as numpy, or, when logits (an OrtValue in device
        memory) is given, leaves them there, as PyTorch's prefill does."""
        b = self.prefill.io_binding()
        b.bind_cpu_input("input_ids", ids)
        if logits is None:
            b.bind_output("logits", "cpu")
        else:
            b.bind_ortvalue_output("logits", logits)
        for name, v in zip(self.present_names, self.sets[0]):
            b.bind_ortvalue_output(name, v)
        self.prefill.run_with_iobinding(b)
        self.cur = 0
        return b.get_outputs()[0].numpy() if logits is None else None

    def fill_random(self, seed):
        """For timing at a long context without a prefill: random cache contents (both sets), in
        the cache's element type."""
        rng = np.random.default_rng(seed)
        ort = self.r.ort
        for v in sum(self.sets, []):
            host = rng.standard_normal(v.shape()).astype(np.float32) * 0.5
            if self.kv_type == BF16:
                src = ort.OrtValue.ortvalue_from_numpy_with_onnx_type((host.view(np.uint32) >> 16).astype(np.uint16), BF16)
            else:
                src = ort.OrtValue.ortvalue_from_numpy(host.astype(np.float16 if self.kv_type == FLOAT16 else np.float32))
            ort.copy_tensors([src], [v])
        self.cur = 0

    def step_binding(self, ids, pos):
        b = self.decode.io_binding()
        b.bind_cpu_input("input_ids", ids)
        b.bind_cpu_input("cache_position", pos)
        b.bind_output("logits", "cpu")
        for name, v in zip(self.past_names, self.sets[self.cur]):
            b.bind_ortvalue_input(name, v)
        for name, v in zip(self.present_names, self.sets[self.written()]):
            b.bind_ortvalue_output(name, v)
        return b

    def written(self):
        """The set of cache buffers the next step writes: the one it reads when shared."""
        return self.cur if self.shared else 1 - self.cur

    def swapped_steps(self, ids, pos):
        """A step function for timing the same step over and over: with two sets, the step's two
        bindings (one set of cache buffers read and the other written, then the reverse),
        alternated at every call, as a decode loop alternates them; shared, its one binding."""
        b = [self.step_binding(ids, pos)]
        self.cur = self.written()
        b.append(self.step_binding(ids, pos))
        k = [0]

        def step():
            self.decode.run_with_iobinding(b[k[0] & 1])
            k[0] += 1

        return step

    def step(self, token, pos):
        b = self.step_binding(np.array([[token]], dtype=np.int64), np.array([pos], dtype=np.int64))
        self.decode.run_with_iobinding(b)
        self.cur = self.written()
        return b.get_outputs()[0].numpy()


# ---------------------------------------------------------------- PyTorch baselines


def torch_static_step(model, cfg, m):
    """PyTorch running the decode graph's forward (same StaticKV, same mask) on static buffers,
    eager and under a captured torch.cuda.CUDAGraph."""
    dec = Decode(model, cfg, m)
    hd = cfg.hidden_size // cfg.num_attention_heads
    kv = [torch.zeros(1, cfg.num_key_value_heads, m, hd, dtype=torch.bfloat16, device="cuda")
          for _ in range(2 * cfg.num_hidden_layers)]
    ids = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    return dec, kv, ids, pos


class attention:
    """with attention(model, impl): run the model with transformers' attention implementation impl."""

    def __init__(self, model, impl):
        self.model, self.impl = model, impl

    def __enter__(self):
        self.old = self.model.config._attn_implementation
        self._set(self.impl)

    def __exit__(self, *exc):
        self._set(self.old)

    def _set(self, impl):
        if hasattr(self.model, "set_attn_implementation"):
            try:
                self.model.set_attn_implementation(impl)
                return
            except Exception:
                pass
        self.model.config._attn_implementation = impl


# ---------------------------------------------------------------- compiled PyTorch baselines

COMPILED_TORCH = ("PyTorch gpt-fast-style, torch.compile", "PyTorch transformers StaticCache, torch.compile")
FAST_LABEL = "PyTorch gpt-fast-style, torch.compile {mode}"
HF_STATIC_LABEL = "PyTorch transformers StaticCache, torch.compile reduce-overhead"


def is_compiled_torch(label):
    """Whether label names a compiled PyTorch arm (the baselines of the vs_best_torch ratio)."""
    return label.startswith(COMPILED_TORCH)


def arm_filter(pattern):
    """The predicate of --arms: a label is kept when the regular expression pattern matches
    somewhere in it (re.search; anchor it with ^ and $ for one label); every label is kept when
    pattern is empty or None."""
    if not pattern:
        return lambda label: True
    r = re.compile(pattern)
    return lambda label: r.search(label) is not None


def decode_rows(ctx, m, timed, step_bytes):
    """The table rows of one context's decode arms from timed, (label, ms) pairs in table order,
    NaN for an arm that failed: ms; bw_eff, the bytes a step reads (step_bytes) over its time as a
    share of PEAK_BYTES_PER_S; vs_best_torch, the time over the fastest compiled PyTorch arm's
    (is_compiled_torch: the headline ratio); vs_torch_graph, over the fastest "PyTorch static
    cache + CUDAGraph" arm's. A ratio whose baseline did not run (filtered out, failed) is None.
    Returns (rows, the fastest compiled PyTorch ms or None, the fastest CUDAGraph ms or None)."""
    def fastest(pred):
        ts = [t for label, t in timed if pred(label) and t == t]
        return min(ts) if ts else None

    t_best = fastest(is_compiled_torch)
    t_graph = fastest(lambda label: "CUDAGraph" in label)
    rows = []
    for label, t in timed:
        ok = t == t
        rows.append(dict(row=f"decode ms/token, context {ctx} (cache {m})", arm=label, ms=t,
                         bw_eff=step_bytes / (t * 1e-3) / PEAK_BYTES_PER_S if ok else None,
                         vs_torch_graph=t / t_graph if ok and t_graph else None,
                         vs_best_torch=t / t_best if ok and t_best else None))
    return rows, t_best, t_graph


# ---------------------------------------------------------------- the int4 section: names and rows

BENCH_ROWS = ("decode128", "decode2048", "prefill512", "int4decode128", "int4decode2048", "int4prefill512")
INT4_SCHEMES = ("sym", "asym")  # --int4: MatMulNBitsQuantizer's is_symmetric=True (no zero points) and False
INT4_BLOCK = 32  # the quantizer's block_size: 4-bit values in blocks of 32 along K, one scale (and zero point) each
INT4_PENDING = "matmul_nbits.ptx"  # what CudaEp's decline of MatMulNBits names while that PTX is pending
INT4_TORCH_LABEL = "PyTorch gpt-fast-style int4 {scheme} (_weight_int4pack_mm), torch.compile {mode}"
INT4_DECODE_ROW = "int4 decode ms/token, context {ctx} (cache {m})"
INT4_PREFILL_ROW = "int4 prefill {p} tokens"


def is_int4_torch(label):
    """Whether label names an int4 PyTorch arm (the baselines of vs_best_int4_torch)."""
    return label.startswith("PyTorch gpt-fast-style int4 ")


def int4_ort_label(scheme, placement, what, binding=True):
    """The label of an ORT arm of the int4 model of scheme: what is "eager", "enable_cuda_graph=1"
    or a prefill's weight setting; placement is int4_placement's record (None or one with
    on_ep: CudaEp took every node alone). An arm whose MatMulNBits nodes ran on ORT's CPU EP says
    so in its label: its time is not cudaep's."""
    where = ""
    if placement is not None and not placement.get("on_ep"):
        where = (", MatMulNBits on ORT's CPU EP (CudaEp declined them)" if placement.get("matmulnbits")
                 else ", CPU EP fallback allowed (CudaEp alone failed)")
    return f"ORT int4 {scheme} + CudaEp{where}, {what}" + (" (IOBinding)" if binding else "")


def nbits_declines(lines):
    """What CudaEp's INFO lines ('CudaEp leaves node "N" (OP) to another EP: WHY', as
    OrtRunner.declines' log holds them) say about an int4 model: matmulnbits, how many
    MatMulNBits nodes it declined; pending, whether every one of them was declined because the
    MatMulNBits PTX is pending (the reason names INT4_PENDING: the library's known state until the
    PTX is generated on a GPU, not a fault); reasons, up to 3 distinct reasons, node names
    elided; others and other_count, the other nodes declined (a fault of the int4 model's float
    part)."""
    nb, pending, reasons, others = 0, True, [], []
    for line in lines:
        at = line.find("leaves node")
        if at < 0:
            continue
        line = line[at:]
        why = line.split("to another EP:", 1)[1].strip() if "to another EP:" in line else line
        if re.search(r"\([\w.]*MatMulNBits[,)]", line):
            nb += 1
            pending = pending and INT4_PENDING in why
            short = re.sub(r'"[^"]*"', '"…"', why)[:300]
            if short not in reasons and len(reasons) < 3:
                reasons.append(short)
        else:
            others.append(line[:300])
    return dict(matmulnbits=nb, pending=nb > 0 and pending, reasons=reasons, others=others[:6], other_count=len(others))


def int4_bytes(sizes, nodes, vocab):
    """The bytes of an int4 model by role, from sizes (initializer name -> (bytes, first dimension))
    and nodes ((op_type, input names, attributes) triples): packed (MatMulNBits' B), scales,
    zero_points, gather_tables (the initializers a Gather reads rows of: the embedding) and other
    (every other initializer: the norms, a MatMul left unquantised); total; step_weights, what a
    decode step reads of them (a Gather table counts one row); matmulnbits (nodes), zero_point_nodes,
    block_sizes, and lm_head_quantised (a MatMulNBits node has N = vocab)."""
    role = {}
    nb = [(ins, at) for op, ins, at in nodes if op == "MatMulNBits"]
    for ins, _ in nb:
        for i, r in ((1, "packed"), (2, "scales"), (3, "zero_points")):
            if len(ins) > i and ins[i] in sizes:
                role[ins[i]] = r
    for op, ins, _ in nodes:
        if op == "Gather" and ins and ins[0] in sizes and ins[0] not in role and sizes[ins[0]][1] > 1:
            role[ins[0]] = "gather_tables"
    out = {r: 0 for r in ("packed", "scales", "zero_points", "gather_tables", "other")}
    rows_read = 0
    for name, (nbytes, first) in sizes.items():
        r = role.get(name, "other")
        out[r] += nbytes
        if r == "gather_tables":
            rows_read += nbytes // max(first, 1)
    out["total"] = sum(out[r] for r in ("packed", "scales", "zero_points", "gather_tables", "other"))
    out["step_weights"] = out["total"] - out["gather_tables"] + rows_read
    out["matmulnbits"] = len(nb)
    out["zero_point_nodes"] = sum(1 for ins, _ in nb if len(ins) > 3 and ins[3])
    out["block_sizes"] = sorted({at.get("block_size") for _, at in nb if at.get("block_size") is not None})
    out["lm_head_quantised"] = any(at.get("N") == vocab for _, at in nb)
    return out


def int4_decode_rows(ctx, m, timed, step_bytes, fallback, t_bf16, t_graph):
    """The table rows of one context's int4 decode arms from timed, (label, ms) pairs in table
    order, NaN for an arm that failed: ms; matmulnbits_ep (for an ORT arm "CudaEp", or for one in
    fallback its value there, "CPUExecutionProvider" or "unknown"; None for PyTorch's); bw_eff,
    the bytes a step of the arm's model reads (step_bytes[label], its scheme's) over its time as
    a share of PEAK_BYTES_PER_S;
    vs_best_int4_torch, the time over the fastest int4 PyTorch arm's (is_int4_torch);
    vs_best_bf16_torch, over t_bf16, the fastest bf16 compiled PyTorch arm of the same context
    (None when that did not run); vs_best_torch, over the faster of the two (the headline: below
    1 when the arm beats both); vs_torch_graph, over t_graph (the bf16 static-cache CUDAGraph
    arm). An ORT arm in fallback (label -> where its MatMulNBits nodes ran) ran with ORT's CPU EP
    taking what CudaEp declined: its ms is shown, but neither bandwidth nor ratios (its time is not
    cudaep's). Returns (rows, the fastest int4 PyTorch ms or None)."""
    ts = [t for label, t in timed if is_int4_torch(label) and t == t]
    t_int4 = min(ts) if ts else None
    both = [t for t in (t_int4, t_bf16) if t]
    t_any = min(both) if both else None
    rows = []
    for label, t in timed:
        ok = t == t and label not in fallback
        sb = step_bytes.get(label)
        ep = None if label.startswith("PyTorch") else fallback.get(label, "CudaEp")
        rows.append(dict(row=INT4_DECODE_ROW.format(ctx=ctx, m=m), arm=label, ms=t, matmulnbits_ep=ep,
                         bw_eff=sb / (t * 1e-3) / PEAK_BYTES_PER_S if ok and sb else None,
                         vs_best_int4_torch=t / t_int4 if ok and t_int4 else None,
                         vs_best_bf16_torch=t / t_bf16 if ok and t_bf16 else None,
                         vs_best_torch=t / t_any if ok and t_any else None,
                         vs_torch_graph=t / t_graph if ok and t_graph else None))
    return rows, t_int4


def head_dim(cfg):
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def rope_settings(cfg):
    """(rope theta, rope type) from a LlamaConfig: transformers 5 keeps them in rope_parameters,
    4.x in rope_theta and rope_scaling."""
    theta, kind = getattr(cfg, "rope_theta", None), "default"
    for rp in (getattr(cfg, "rope_parameters", None), getattr(cfg, "rope_scaling", None)):
        if isinstance(rp, dict):
            theta = rp.get("rope_theta", theta)
            kind = rp.get("rope_type", rp.get("type", kind))
    return float(theta if theta is not None else 10000.0), kind


def rope_tables(model, cfg, m):
    """cos and sin [m, D] in the model's dtype for positions 0..m-1, as transformers' rotary
    embedding gives them (the model's own module, called over the positions: float32 angles, the
    result cast to the model's dtype). Beside them the same tables from the config by the default
    rope's formula (inv_freq = 1 / theta^(2i / D), angle = position * inv_freq, the angles
    repeated over both halves of D), their largest difference logged; these are used when the
    model's module cannot be called."""
    d = head_dim(cfg)
    theta, kind = rope_settings(cfg)
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    ang = torch.outer(torch.arange(m, dtype=torch.float32), inv).cuda()
    emb = torch.cat((ang, ang), dim=-1)
    cos_cfg, sin_cfg = emb.cos().to(MODEL_DTYPE), emb.sin().to(MODEL_DTYPE)
    try:
        rot = model.model.rotary_emb
        with torch.no_grad():
            c, s = rot(torch.zeros(1, 1, d, dtype=MODEL_DTYPE, device="cuda"), torch.arange(m, device="cuda").view(1, m))
        c, s = c.reshape(m, d).to(MODEL_DTYPE).contiguous(), s.reshape(m, d).to(MODEL_DTYPE).contiguous()
        diff = max(float((c.float() - cos_cfg.float()).abs().max()), float((s.float() - sin_cfg.float()).abs().max()))
        inv_model = getattr(rot, "inv_freq", None)
        log(f"rotary tables, {m} positions (rope {kind}, theta {theta:g}, head_dim {d}): transformers' rotary embedding "
            f"against the config's default-rope formula: max |diff| {diff:.3g} (the model's inv_freq is "
            f"{inv_model.dtype if inv_model is not None else 'absent'}); the gpt-fast-style model takes transformers'")
        return c, s
    except Exception as e:  # the config's tables still make a model to check against transformers
        log(f"transformers' rotary embedding not called ({type(e).__name__}: {str(e)[:200]}); the gpt-fast-style model "
            f"takes the config's default-rope tables (rope {kind}, theta {theta:g})")
        return cos_cfg, sin_cfg


def rms_norm(x, w, eps):
    """transformers' LlamaRMSNorm: normalized in float32, cast back, then scaled."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def rotate(x, cos, sin):
    """transformers' apply_rotary_pos_emb on one tensor [B, heads, S, D], cos and sin [S, D]."""
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


def fast_weights(model):
    """The gpt-fast-style model's weights from the transformers model, as parameters that need no
    gradient: the embedding, the norms, o_proj, down_proj and lm_head share the model's storage;
    q, k and v concatenated into one [(H + 2 KV) D, hidden] matrix and gate and up into one
    [2 I, hidden] are copies (about 1.2 GB at the default size)."""
    par = lambda t: torch.nn.Parameter(t.detach(), requires_grad=False)  # noqa: E731
    layers = []
    with torch.no_grad():
        for blk in model.model.layers:
            a, mlp = blk.self_attn, blk.mlp
            layers.append(dict(
                attn_norm=par(blk.input_layernorm.weight),
                wqkv=par(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).contiguous()),
                wo=par(a.o_proj.weight),
                mlp_norm=par(blk.post_attention_layernorm.weight),
                w13=par(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).contiguous()),
                w2=par(mlp.down_proj.weight)))
    return dict(embed=par(model.model.embed_tokens.weight), norm=par(model.model.norm.weight),
                lm_head=par(model.lm_head.weight), layers=layers)


def keep_tensor(module, name, t):
    """module.<name> = t: a parameter as a parameter, any other tensor (the int4 model's packed
    weights) as a buffer, so that module.buffers() and mark_static see it."""
    if isinstance(t, torch.nn.Parameter):
        setattr(module, name, t)
    else:
        module.register_buffer(name, t)


class FastLayer(torch.nn.Module):
    """One decoder layer of FastLlama: its weights (fast_weights' per-layer dict, or
    fast_int4_weights') and its key and value caches [1, KV, m, D] in the dtype of its norm's
    weight, allocated once and written in place."""

    def __init__(self, w, kv_shape):
        super().__init__()
        for name, t in w.items():
            keep_tensor(self, name, t)
        norm = w["attn_norm"]
        self.register_buffer("k_cache", torch.zeros(kv_shape, dtype=norm.dtype, device=norm.device))
        self.register_buffer("v_cache", torch.zeros(kv_shape, dtype=norm.dtype, device=norm.device))


class FastLlama(torch.nn.Module):
    """The Llama of transformers written as gpt-fast writes it, for a fair compiled PyTorch
    baseline: per layer RMSNorm, one GEMM for q, k and v, the rotation, the new key and value
    written into the layer's static cache with index_copy_ (in place, fixed addresses), SDPA over
    the whole cache with a boolean mask of the positions <= input_pos and enable_gqa (the 8
    key/value heads are not copied to 32), o_proj and the residual, RMSNorm, one GEMM for gate and
    up, SiLU times up, down_proj and the residual; the final norm and lm_head. forward(idx [1, S]
    int64, input_pos [S] int64) -> logits [1, S, V] in the model's dtype. Batch 1. Not thread-safe:
    every call writes the caches."""

    def __init__(self, w, cfg, m, cos, sin):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, head_dim(cfg)
        self.eps = float(cfg.rms_norm_eps)
        self.gqa = True  # SDPA's enable_gqa; False repeats the key/value heads (gpt-fast's own way)
        for name, t in w.items():
            if name != "layers":
                keep_tensor(self, name, t)  # embed, norm, and lm_head (or its int4 form)
        self.layers = torch.nn.ModuleList(FastLayer(lw, (1, self.n_kv, m, self.head_dim)) for lw in w["layers"])
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("key_positions", torch.arange(m, device=cos.device))

    def linear(self, x, owner, name):
        """x times the weight `name` of owner (a layer, or the model for lm_head) transposed:
        F.linear; FastLlamaInt4 multiplies its int4 weights instead."""
        return F.linear(x, getattr(owner, name))

    def reset(self):
        """Zeroes every cache in place (the addresses stay)."""
        for layer in self.layers:
            layer.k_cache.zero_()
            layer.v_cache.zero_()

    def forward(self, idx, input_pos):
        s = idx.shape[1]
        nh, nkv, d = self.n_heads, self.n_kv, self.head_dim
        x = F.embedding(idx, self.embed)
        cos, sin = self.cos[input_pos], self.sin[input_pos]
        mask = (self.key_positions.view(1, -1) <= input_pos.view(-1, 1)).view(1, 1, s, -1)
        for layer in self.layers:
            q, k, v = self.linear(rms_norm(x, layer.attn_norm, self.eps), layer, "wqkv").split(
                [nh * d, nkv * d, nkv * d], dim=-1)
            q = rotate(q.view(1, s, nh, d).transpose(1, 2), cos, sin)
            k = rotate(k.view(1, s, nkv, d).transpose(1, 2), cos, sin)
            layer.k_cache.index_copy_(2, input_pos, k)
            layer.v_cache.index_copy_(2, input_pos, v.view(1, s, nkv, d).transpose(1, 2))
            if self.gqa:
                y = F.scaled_dot_product_attention(q, layer.k_cache, layer.v_cache, attn_mask=mask, enable_gqa=True)
            else:
                r = nh // nkv
                y = F.scaled_dot_product_attention(q, layer.k_cache.repeat_interleave(r, dim=1),
                                                   layer.v_cache.repeat_interleave(r, dim=1), attn_mask=mask)
            x = x + self.linear(y.transpose(1, 2).reshape(1, s, nh * d), layer, "wo")
            g, u = self.linear(rms_norm(x, layer.mlp_norm, self.eps), layer, "w13").chunk(2, dim=-1)
            x = x + self.linear(F.silu(g) * u, layer, "w2")
        return self.linear(rms_norm(x, self.norm, self.eps), self, "lm_head")


def mark_static(*tensors):
    """torch._dynamo.mark_static_address on each tensor: CUDA graphs of torch.compile read and
    write them where they are (no copy into the graph's own inputs), so in-place updates between
    calls are seen."""
    for t in tensors:
        try:
            torch._dynamo.mark_static_address(t)
        except Exception as e:  # the arm still runs; its CUDA graph copies the tensor instead
            log(f"(mark_static_address failed: {type(e).__name__}: {str(e)[:200]})")
            return


def forget_compiled():
    """Drops every torch.compile graph and CUDA graph tree of the process, and the memory they
    held (the next compile starts afresh: the shapes differ between contexts)."""
    for what, fn in (("torch._dynamo.reset", lambda: torch._dynamo.reset()),
                     ("reset_cudagraph_trees", lambda: __import__(
                         "torch._inductor.cudagraph_trees", fromlist=["reset_cudagraph_trees"]).reset_cudagraph_trees())):
        try:
            fn()
        except Exception as e:  # memory is released anyway once the objects are gone
            log(f"({what} failed: {type(e).__name__}: {str(e)[:200]})")
    gc.collect()
    torch.cuda.empty_cache()


def cudagraph_skips():
    """Inductor's count of compiled graphs it ran without a CUDA graph (0 when unknown)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["inductor"]["cudagraph_skips"])
    except Exception:
        return 0


def torch_reference(model, cfg, seed, prompt_len=12, steps=4):
    """transformers' own eager forward (the model's configured attention, the DynamicCache it makes)
    over a random prompt of prompt_len tokens, then steps greedy decode steps: the float32 logits
    of the prompt's last position and of each step (steps + 1 vectors), and the tokens chosen."""
    prompt = np.random.default_rng(seed).integers(0, cfg.vocab_size, size=prompt_len).tolist()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt], device="cuda"), use_cache=True)
        logits = [out.logits[0, -1].float().cpu().numpy()]
        tokens = [int(np.argmax(logits[-1]))]
        pkv = out.past_key_values
        for _ in range(steps):
            out = model(input_ids=torch.tensor([[tokens[-1]]], device="cuda"), past_key_values=pkv, use_cache=True)
            pkv = out.past_key_values
            logits.append(out.logits[0, -1].float().cpu().numpy())
            tokens.append(int(np.argmax(logits[-1])))
    del out, pkv
    return dict(prompt=prompt, tokens=tokens, logits=logits)


def verify_decode(label, step, ids, pos, reset, ref):
    """Checks a decode step against torch_reference's logits: reset() empties its cache, then
    step(ids, pos) is called once per token of the reference's prompt and its decode tokens, ids
    and pos updated in place before each call (as in the timed loop), and the logits of the last
    prompt position and of each decode step are compared. Fails when the largest |difference|
    exceeds 0.1 x the largest |logit|, or when an argmax differs and the reference's top logit is
    above the logit of the token chosen by more than that step's |difference| (and two bf16
    spacings): a difference at a tie is not a failure. Logs the outcome; returns (ok, details)."""
    reset()
    p0 = len(ref["prompt"])
    got = []
    for i, t in enumerate(ref["prompt"] + ref["tokens"][:-1]):
        ids.fill_(t)
        pos.fill_(i)
        out = step(ids, pos)
        if i >= p0 - 1:
            got.append(out[0, -1].float().cpu().numpy())
        del out
    top = max(float(np.max(np.abs(w))) for w in ref["logits"])
    worst, agree, ties, bad = 0.0, 0, 0, []
    for j, (g, w) in enumerate(zip(got, ref["logits"])):
        d = float(np.max(np.abs(g - w)))
        worst = max(worst, d)
        a, b = int(np.argmax(g)), int(np.argmax(w))
        if a == b:
            agree += 1
        elif at_tie(w, a, b, d):
            ties += 1
        else:
            bad.append((j, a, b, float(w[b] - w[a])))
    ok = bool(worst == worst and worst <= 0.1 * top and not bad)
    log(f"{label}: logits against transformers' eager forward (DynamicCache), the last of a {p0}-token prompt fed one "
        f"token a step and {len(got) - 1} decode steps: max |diff| {worst:.4f} (max |logit| {top:.3f}, bound 0.1x), "
        f"argmax the same at {agree} of {len(got)}, {ties} differing at a tie, {len(bad)} differing otherwise {bad[:3]}")
    if not ok:
        log(f"!!!!! {label}: FAILS the check against transformers: its rows are reported as NaN, not timed !!!!!")
    return ok, dict(ok=ok, max_abs_diff=worst, max_abs_logit=top, argmax_same=agree, ties=ties, steps=len(got),
                    differ_beyond_tie=bad)



def time_fast_arm(fast, ok, mode, label, ids, pos, ref, ctx, n, info):
    """Times a gpt-fast-style model compiled in mode, its check against ref passed (ok): with
    enable_gqa, else with the KV heads repeated (the label says so); returns (label, ms), ms NaN
    when neither compiles or the model failed its check. Each attempt's record goes in info."""
    ms, row_label = float("nan"), label
    for gqa in ((True, False) if ok else ()):
        fast.gqa = gqa
        row_label = label if gqa else label + " (KV heads repeated, no enable_gqa)"
        try:
            with torch.no_grad():
                ms, info[row_label] = compiled_arm(row_label, lambda i, p: fast(i, p), mode, ids, pos, fast.reset,
                                                   ref, ctx, n)
            break
        except Exception:
            log(f"context {ctx}: {row_label} failed:\n{traceback.format_exc()[-3000:]}")
            info[row_label] = dict(error=traceback.format_exc()[-600:])
            ms, row_label = float("nan"), label
        finally:
            forget_compiled()
    return row_label, ms

def compiled_arm(label, fn, mode, ids, pos, reset, ref, ctx, n):
    """One compiled PyTorch arm: torch.compile(fn, mode=mode, fullgraph=True); two calls (the first
    compiles, the second records the CUDA graph), timed and logged; verify_decode against the
    reference (more calls, each replaying the graph); 5 calls at position ctx, then median_ms of n.
    ids [1, 1] and pos [1] are the static inputs, updated in place. Returns (ms, or NaN when the
    check fails; details for the JSON). Exceptions are the caller's to log."""
    skips = cudagraph_skips()
    torch._dynamo.reset()
    step = torch.compile(fn, mode=mode, fullgraph=True)
    ids.fill_(5)
    pos.fill_(0)
    t0 = time.perf_counter()
    step(ids, pos)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    step(ids, pos)
    torch.cuda.synchronize()
    second = time.perf_counter() - t0
    log(f"{label}: first call (tracing, compiling{', autotuning' if 'autotune' in mode else ''}) {first:.1f} s, "
        f"second (CUDA graph recording) {second:.2f} s")
    ok, check = verify_decode(label, step, ids, pos, reset, ref)
    info = dict(compile_s=first, second_call_s=second, check=check)
    skipped = cudagraph_skips() - skips
    if skipped:
        log(f"{label}: inductor ran {skipped} graph(s) without a CUDA graph (see its 'skipping cudagraphs' warning)")
        info["cudagraph_skips"] = skipped
    if not ok:
        return float("nan"), info
    ids.fill_(5)
    pos.fill_(ctx)
    for _ in range(5):
        step(ids, pos)
    torch.cuda.synchronize()
    ms = median_ms(lambda: step(ids, pos), n)
    info["ms"] = ms
    gpu = device_busy_ms(lambda: step(ids, pos), 20)
    if gpu is not None:
        log(f"context {ctx}: {label} step {ms:.3f} ms wall, GPU busy {gpu[0]:.3f} ms in {gpu[1]:.0f} kernels and copies, "
            f"{gpu[2]:.3f} ms of gaps under 10 us")
        info.update(gpu_ms=gpu[0], ops=gpu[1], small_gaps_ms=gpu[2])
    return ms, info


def hf_static_arm(label, model, m, ctx, ids, pos, ref, n):
    """transformers' own compiled decode: model.forward with a StaticCache of m positions and
    cache_position, under torch.compile reduce-overhead (compiled_arm). The cache allocates its
    tensors at its first update, so one eager call comes first (transformers' generate never
    compiles that call either)."""
    from transformers import StaticCache

    try:
        cache = StaticCache(config=model.config, max_cache_len=m)  # transformers 4.56+ and 5.x
    except TypeError:
        cache = StaticCache(config=model.config, max_batch_size=1, max_cache_len=m, device="cuda", dtype=MODEL_DTYPE)

    def hf_step(ids, pos):
        return model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True).logits

    ids.fill_(5)
    pos.fill_(0)
    hf_step(ids, pos)
    torch.cuda.synchronize()
    return compiled_arm(label, hf_step, "reduce-overhead", ids, pos, cache.reset, ref, ctx, n)


def compiled_torch_arms(args, cfg, model, ctx, m, keep, shared, results, n):
    """The compiled PyTorch arms of one context that --arms keeps, each guarded (a failure is
    logged and its row is NaN): FastLlama at cache size m, checked eager against transformers,
    then compiled in each of --torch-compile-modes (with SDPA's enable_gqa; when that does not
    compile, once more with the key/value heads repeated, the label saying so); then transformers'
    StaticCache under reduce-overhead when that mode is among them. shared holds what the contexts
    share, made on first use: "ref" (torch_reference) and "weights" (fast_weights). Details go to
    results["torch_compiled"][ctx]. Returns [(label, ms)]."""
    modes = [s.strip() for s in args.torch_compile_modes.split(",") if s.strip()]
    fast_arms = [(mode, FAST_LABEL.format(mode=mode)) for mode in modes if keep(FAST_LABEL.format(mode=mode))]
    hf = "reduce-overhead" in modes and keep(HF_STATIC_LABEL)
    timed = []
    if not fast_arms and not hf:
        return timed
    info = results.setdefault("torch_compiled", {}).setdefault(str(ctx), {})
    try:
        if "ref" not in shared:
            shared["ref"] = torch_reference(model, cfg, args.seed + 2)
        ref = shared["ref"]
    except Exception:
        log(f"context {ctx}: the transformers reference for the compiled PyTorch arms failed; they are NaN:\n"
            f"{traceback.format_exc()[-3000:]}")
        return [(label, float("nan")) for _, label in fast_arms] + ([(HF_STATIC_LABEL, float("nan"))] if hf else [])
    ids = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    mark_static(ids, pos)
    if fast_arms:
        fast, ok = None, False
        try:
            if "weights" not in shared:
                shared["weights"] = fast_weights(model)
            fast = FastLlama(shared["weights"], cfg, m, *rope_tables(model, cfg, m))
            mark_static(*fast.buffers())
            with torch.no_grad():
                ok, check = verify_decode("PyTorch gpt-fast-style, eager", fast, ids, pos, fast.reset, ref)
            info["PyTorch gpt-fast-style, eager (check only)"] = dict(check=check)
        except Exception:
            log(f"context {ctx}: the gpt-fast-style model failed; its rows are NaN:\n{traceback.format_exc()[-3000:]}")
        for mode, label in fast_arms:
            timed.append(time_fast_arm(fast, ok, mode, label, ids, pos, ref, ctx, n, info))
        del fast
        forget_compiled()
    if hf:
        ms = float("nan")
        try:
            with torch.no_grad(), attention(model, "sdpa"):
                ms, info[HF_STATIC_LABEL] = hf_static_arm(HF_STATIC_LABEL, model, m, ctx, ids, pos, ref, n)
        except Exception:
            log(f"context {ctx}: {HF_STATIC_LABEL} failed:\n{traceback.format_exc()[-3000:]}")
            info[HF_STATIC_LABEL] = dict(error=traceback.format_exc()[-600:])
        finally:
            forget_compiled()
        timed.append((HF_STATIC_LABEL, ms))
    return timed


def device_busy_ms(fn, n):
    """GPU time per call of fn, from CUPTI (torch.profiler sees every kernel and copy of the
    process, cudaep's included): (busy ms per call, device operations per call), the busy time
    being the union of the operations' intervals. None when the profiler sees nothing, and
    without --gpu-profile: once CUPTI has traced a process, every later driver call in it is
    slower (on the H200 the decode step's 224-node graph launch took 50-135 us of host time after
    it and 2.7-3.3 us in a process that never traced), so every row timed after the first profile
    pays for it. Take the timings from a run without --gpu-profile and the breakdowns from one
    with it."""
    if not GPU_PROFILE:
        return None
    try:
        from torch.profiler import ProfilerActivity, profile

        fn()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start]
        spans = sorted((e.time_range.start, e.time_range.end) for e in events)
        if not spans:
            return None
        # The kernels that take the most time, per call: where the step's GPU time goes.
        by_name = {}
        for e in events:
            t, c = by_name.get(e.name, (0.0, 0))
            by_name[e.name] = (t + e.time_range.end - e.time_range.start, c + 1)
        top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:12]
        log("  top device operations per call: " + "; ".join(
            f"{name[:60]} {t / 1e3 / n:.3f} ms x{c / n:.0f}" for name, (t, c) in top))
        # The host's CUDA API calls CUPTI saw (driver calls, cudaep's included, and runtime
        # calls), per call of fn: where a step's host time inside the driver goes.
        api = {}
        for e in prof.events():
            if e.device_type.name == "CPU" and e.name.startswith("cu"):
                t, c = api.get(e.name, (0.0, 0))
                api[e.name] = (t + e.time_range.end - e.time_range.start, c + 1)
        if api:
            top = sorted(api.items(), key=lambda kv: -kv[1][0])[:10]
            log("  top host API calls per call: " + "; ".join(
                f"{name[:40]} {t / 1e3 / n:.3f} ms x{c / n:.1f}" for name, (t, c) in top))
        busy, small, cur_s, cur_e = 0.0, 0.0, spans[0][0], spans[0][1]
        for a, b in spans[1:]:
            if a > cur_e:
                busy += cur_e - cur_s
                if a - cur_e < 10:  # µs: the device waiting between dependent operations
                    small += a - cur_e
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        busy += cur_e - cur_s
        return busy / 1e3 / n, len(spans) / n, small / 1e3 / n
    except Exception as e:  # the profiler is a diagnostic; its absence is reported, not fatal
        log(f"(device time not measured: {str(e)[:200]})")
        return None


def pinned_h2d_bytes_per_s():
    """The host-to-device rate of 256 MiB copies from pinned memory (median of 10): the link."""
    n = 256 << 20
    src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    return n / (median_ms(lambda: dst.copy_(src, non_blocking=True), 10) * 1e-3)


def ort_stats(lib):
    """cudaep's ORT counters (CudaEpGetOrtStats through the repository's ctypes package, from the
    library file ORT loaded), or None when they cannot be read."""
    try:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        sys.path.insert(0, os.path.join(root, "python"))
        os.environ.setdefault("CUDAEP_LIBRARY", lib)
        import cudaep

        return cudaep.ort_stats()
    except Exception as e:  # a diagnostic: its absence is reported, not fatal
        log(f"(cudaep counters not read: {str(e)[:200]})")
        return None


def median_ms(fn, n, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e3)


# ---------------------------------------------------------------- the int4 section (MatMulNBits)

ONNX_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
INT4_PACKINGS = ("uint8 [N, K/2], even k in the high nibble (torch >= 2.5, as torchao packs it)",
                 "uint8 [N, K/2], even k in the low nibble",
                 "int32 [N, K] (torch < 2.5)")


def float_ulp(v, mantissa):
    """The spacing of floating-point numbers with mantissa explicit bits at v (float16: 10)."""
    v = abs(v)
    return 2.0 ** (np.floor(np.log2(v)) - mantissa) if v > 0 else 2.0 ** -(mantissa + 14)


def int4_state(args, schemes):
    """What the int4 section keeps between its check and its rows: the schemes, the dtype the
    quantizer takes (--int4-dtype), the cache's ONNX type and element size, and caches filled on
    first use: the float copy of the model (src_model), the float graphs (sources), the int4
    graphs (paths) and their contents, where each runs (placement), the quantised weights matched
    to the model's parameters (matched), the int4 PyTorch models' weights and references
    (torch_prep). Not thread-safe."""
    dtype = getattr(torch, args.int4_dtype)
    half = dtype == torch.float16
    return dict(schemes=list(schemes), dtype=dtype, dtype_name=args.int4_dtype, kv_type=FLOAT16 if half else FLOAT32,
                elem=2 if half else 4, mantissa=10 if half else 23, src_model=None, sources={}, paths={}, contents={},
                placement={}, matched={}, torch_prep={})


def int4_release(state):
    """Drops what the int4 section holds in memory (the float copy of the model, the int4 PyTorch
    weights, the quantised weights read back); the graphs on disk stay."""
    state["src_model"] = None
    state["torch_prep"].clear()
    state["matched"].clear()
    gc.collect()
    torch.cuda.empty_cache()


def to_dtype_keep_rope(src, dtype):
    """A copy of the transformers model src in dtype whose rotary inv_freq buffers keep src's values
    in float32 (float16 would round the lowest frequencies, which fall below its normal range)."""
    m = copy.deepcopy(src).to(dtype)
    for name, buf in src.named_buffers():
        if name.endswith("inv_freq"):
            owner, _, attr = name.rpartition(".")
            setattr(m.get_submodule(owner), attr, buf.detach().float().clone())
    return m.eval()


def int4_source(args, cfg, model, state, kind, s, m):
    """The float graph ORT's quantizer starts from: the prefill (kind "prefill", s tokens) or decode
    (s = 1) graph at cache size m of the model in the int4 section's dtype (the same weights as
    the bf16 model, cast), exported as the plain form is, into
    WORK/int4src_<dtype>_<kind>_<s>_<m>/model.onnx (kept by --reuse-exports). Returns its path."""
    key = (kind, s, m)
    if key in state["sources"]:
        return state["sources"][key]
    name = f"int4src_{state['dtype_name']}_{kind}_{s}_{m}"
    d = os.path.join(args.work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    if not (REUSE and os.path.exists(path)):
        if state["src_model"] is None:
            state["src_model"] = to_dtype_keep_rope(model, state["dtype"])
        fm, dt = state["src_model"], state["dtype"]
        outs = ["logits"] + kv_names(cfg, "present")
        if kind == "prefill":
            mod, inputs, ins = Prefill(fm, cfg, m, dt), (torch.zeros(1, s, dtype=torch.long, device="cuda"),), ["input_ids"]
        else:
            kv = [torch.zeros(1, cfg.num_key_value_heads, m, head_dim(cfg), dtype=dt, device="cuda")
                  for _ in range(2 * cfg.num_hidden_layers)]
            mod = Decode(fm, cfg, m, dt)
            inputs = (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"),
                      *kv)
            ins = ["input_ids", "cache_position"] + kv_names(cfg, "past")
        secs, how = export(mod, inputs, ins, outs, path, args.exporter)
        log(f"int4 source {name}: exported with {how} in {secs:.1f} s")
    state["sources"][key] = path
    return path


def fold_weight_transposes(mp):
    """Folds each Transpose of a 2-D initializer that feeds only a MatMul's weight input into a
    transposed initializer of the Transpose's output name (ORT's quantizer quantises only a
    MatMul whose weight is an initializer). Returns how many it folded."""
    from onnx import numpy_helper

    g = mp.graph
    inits = {t.name: t for t in g.initializer}
    uses = Counter(i for n in g.node for i in n.input)
    producer = {o: n for n in g.node for o in n.output}
    drop = []
    for n in g.node:
        if n.op_type != "MatMul" or len(n.input) < 2 or n.input[1] in inits:
            continue
        t = producer.get(n.input[1])
        if t is None or t.op_type != "Transpose" or t.input[0] not in inits or uses[n.input[1]] != 1:
            continue
        perm = [list(a.ints) for a in t.attribute if a.name == "perm"]
        a = numpy_helper.to_array(inits[t.input[0]])
        if a.ndim != 2 or (perm and perm[0] != [1, 0]):
            continue
        g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(a.T), t.output[0]))
        drop.append(t)
    for t in drop:
        g.node.remove(t)
    return len(drop)


def quantize_int4(src, dst, symmetric, block=INT4_BLOCK):
    """ORT's own int4 quantizer (onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer,
    its default algorithm: round to nearest, block-wise along K) over the float graph at src: every
    MatMul whose weight is a 2-D initializer (q/k/v/o, gate/up/down, the LM head) becomes a
    com.microsoft.MatMulNBits of 4 bits in blocks of block, symmetric (is_symmetric=True: no zero
    points, 8) or with zero points; the rest is untouched (the embedding's Gather stays float).
    Written to dst with every tensor over 1 KiB as external data (dst + ".data"). Returns
    (seconds, the weight transposes folded first)."""
    import onnx

    root = logging.getLogger()
    level = root.level
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    root.setLevel(level)  # importing it sets the root logger to INFO (logging.basicConfig)
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    mp = onnx.load(src)  # the weights too
    folded = fold_weight_transposes(mp)
    q = MatMulNBitsQuantizer(mp, block_size=block, is_symmetric=symmetric)
    q.process()
    out = q.model.model if hasattr(q.model, "model") else q.model
    d = os.path.dirname(dst)
    os.makedirs(d, exist_ok=True)
    data = os.path.basename(dst) + ".data"
    for f in (dst, os.path.join(d, data)):
        if os.path.exists(f):
            os.remove(f)  # onnx appends to a data file that is there
    onnx.save_model(out, dst, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                    size_threshold=1024)
    return time.perf_counter() - t0, folded


def int4_contents(path, cfg):
    """int4_bytes of the model at path from its initializers' shapes and types (the external data is
    not read), and its op counts (ops)."""
    import onnx

    mp = onnx.load(path, load_external_data=False)
    sizes = {}
    for t in mp.graph.initializer:
        count = 1
        for d in t.dims:
            count *= d
        sizes[t.name] = (count * ONNX_ITEMSIZE.get(t.data_type, 4), int(t.dims[0]) if len(t.dims) > 1 else 1)
    nodes = [(n.op_type, list(n.input), {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute
                                         if a.type == onnx.AttributeProto.INT})
             for n in mp.graph.node]
    out = int4_bytes(sizes, nodes, cfg.vocab_size)
    out["ops"] = dict(Counter((n.domain + "." if n.domain else "") + n.op_type for n in mp.graph.node))
    return out


def int4_graph(args, cfg, model, state, kind, s, m, scheme, results):
    """The int4 model of scheme for int4_source's graph (kind, s, m): quantize_int4 of it into
    WORK/int4_<scheme>_<dtype>_<kind>_<s>_<m>/model.onnx (kept by --reuse-exports), its contents
    (int4_contents) logged and stored in results["int4"]["graphs"]. Returns its path; raises when
    the quantizer made no MatMulNBits node."""
    key = (kind, s, m, scheme)
    if key in state["paths"]:
        return state["paths"][key]
    name = f"int4_{scheme}_{state['dtype_name']}_{kind}_{s}_{m}"
    path = os.path.join(args.work, name, "model.onnx")
    if REUSE and os.path.exists(path):
        how = "reused from an earlier run"
    else:
        src = int4_source(args, cfg, model, state, kind, s, m)
        secs, folded = quantize_int4(src, path, scheme == "sym")
        how = f"quantised in {secs:.1f} s" + (f" ({folded} weight transposes folded first)" if folded else "")
    c = int4_contents(path, cfg)
    results.setdefault("int4", {}).setdefault("graphs", {})[name] = dict(c, how=how)
    MB = 1e6
    log(f"int4 {name} ({how}; ORT's MatMulNBitsQuantizer, block_size {INT4_BLOCK}, is_symmetric={scheme == 'sym'}, "
        f"over the {state['dtype_name']} export): {c['matmulnbits']} MatMulNBits nodes (block sizes {c['block_sizes']}, "
        f"{c['zero_point_nodes']} with zero points); packed weights {c['packed'] / MB:.1f} MB, scales "
        f"{c['scales'] / MB:.1f} MB, zero points {c['zero_points'] / MB:.1f} MB; the LM head "
        f"{'quantised' if c['lm_head_quantised'] else 'not quantised'}; embedding table {c['gather_tables'] / MB:.1f} MB "
        f"(a step reads a row), other initializers {c['other'] / MB:.1f} MB; {c['total'] / MB:.1f} MB in all, "
        f"{c['step_weights'] / MB:.1f} MB of it read by a decode step")
    log(f"  ops: {json.dumps(c['ops'], sort_keys=True)}")
    if not c["matmulnbits"]:
        raise RuntimeError(f"{name}: the quantizer made no MatMulNBits node (are the MatMul weights initializers?)")
    state["contents"][path] = c
    state["paths"][key] = path
    return path


def int4_placement(state, runner, path, work, results):
    """Where the int4 model at path runs (found once per path): on_ep when a session on CudaEp
    alone opens (session.disable_cpu_ep_fallback=1: every node, its MatMulNBits included, is
    CudaEp's); otherwise CudaEp's declines (OrtRunner.declines at INFO, the log in
    WORK/declines_<graph>.log) as nbits_declines reads them, ep "CPUExecutionProvider" when
    MatMulNBits nodes are among them (ORT's CPU EP runs what CudaEp leaves), "unknown" when not.
    Logged loudly unless on_ep; stored in results["int4"]["placement"][graph]. Returns the
    record."""
    if path in state["placement"]:
        return state["placement"][path]
    name = os.path.basename(os.path.dirname(path))
    nodes = state["contents"].get(path, {}).get("matmulnbits", "?")
    try:
        s = runner.session(path)
        del s
        rec = dict(on_ep=True, ep="CudaEp", matmulnbits=0, pending=False, reasons=[], others=[], other_count=0)
        log(f"int4 {name}: a session on CudaEp alone opens: CudaEp runs every node, its {nodes} MatMulNBits included")
    except Exception as e:
        logfile = os.path.join(work, f"declines_{name}.log")
        lines = []
        try:
            runner.declines(path, logfile)
            lines = open(logfile, errors="replace").read().splitlines()
        except Exception as e2:  # the placement is still reported, without reasons
            log(f"(CudaEp's declines of {name} not read: {str(e2)[:200]})")
        rec = dict(on_ep=False, alone_error=str(e)[:400], **nbits_declines(lines))
        rec["ep"] = "CPUExecutionProvider" if rec["matmulnbits"] else "unknown"
        if rec["matmulnbits"]:
            why = ("because its MatMulNBits PTX is pending (the library's state until the PTX is generated on a GPU)"
                   if rec["pending"] else "for another reason: " + " | ".join(rec["reasons"]))
            log(f"!!!!! int4 {name}: CudaEp declines {rec['matmulnbits']} of its {nodes} MatMulNBits nodes {why}; ORT's "
                f"CPU EP runs them. The arms of this model are labelled so; their times are not cudaep's !!!!!")
        else:
            log(f"!!!!! int4 {name}: a session on CudaEp alone fails ({str(e)[:300]}), and CudaEp's log declines no "
                f"MatMulNBits node; the arms of this model run with CPU fallback allowed, labelled so !!!!!")
        if rec["other_count"]:
            log(f"!!!!! int4 {name}: CudaEp also leaves {rec['other_count']} other node(s): " + "; ".join(rec["others"][:3]))
    state["placement"][path] = rec
    results.setdefault("int4", {}).setdefault("placement", {})[name] = rec
    return rec


def int4_weights(path):
    """The quantised weights of the int4 model at path as ORT's quantizer wrote them, unpacked: for
    each MatMulNBits node in graph order a dict of node, K, N, block, q (uint8 [N, K], the 4-bit
    values: B is [N, k_blocks, block / 2] bytes packed along K, the low nibble first), scales
    (float32 [N, k_blocks]) and zero (float32 [N, k_blocks]: the packed uint8 zero points
    unpacked the same way, or zero points in A's type, or 8 where the node has none)."""
    import onnx
    from onnx import numpy_helper

    mp = onnx.load(path)
    inits = {t.name: t for t in mp.graph.initializer}
    out = []
    for n in mp.graph.node:
        if n.op_type != "MatMulNBits":
            continue
        at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute if a.type == onnx.AttributeProto.INT}
        k, nn, bits, bs = int(at["K"]), int(at["N"]), int(at.get("bits", 4)), int(at["block_size"])
        if bits != 4:
            raise ValueError(f"{n.name}: bits={bits}; the int4 section reads 4-bit weights only")
        kb = (k + bs - 1) // bs
        b = numpy_helper.to_array(inits[n.input[1]]).reshape(nn, kb * bs // 2)
        q = np.empty((nn, kb * bs), np.uint8)
        q[:, 0::2], q[:, 1::2] = b & 0xF, b >> 4
        s = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32).reshape(nn, kb)
        if len(n.input) > 3 and n.input[3]:
            zt = numpy_helper.to_array(inits[n.input[3]])
            if zt.dtype == np.uint8:
                zp = zt.reshape(nn, -1)
                z = np.empty((nn, zp.shape[1] * 2), np.uint8)
                z[:, 0::2], z[:, 1::2] = zp & 0xF, zp >> 4
                z = z[:, :kb].astype(np.float32)
            else:
                z = zt.astype(np.float32).reshape(nn, kb)
        else:
            z = np.full((nn, kb), 8.0, np.float32)
        out.append(dict(node=n.name, K=k, N=nn, block=bs, q=np.ascontiguousarray(q[:, :k]), scales=s, zero=z))
    return out


def match_int4_weights(model, ws, corner=64):
    """The transformers model's parameter that each int4 weight of ws quantises, found by content
    (the exporter names initializers as it likes): the dequantised top-left corner (corner x
    corner) against that of every 2-D parameter of the same shape [N, K]; the best must be within
    0.5 of the parameter's norm (block-wise int4 is off by about 0.1) and the second best beyond
    0.8 (an unrelated random matrix is off by about 1.4). Returns the names in ws' order; raises
    when a weight matches none, two, or one already taken."""
    cands = {}
    for name, p in model.named_parameters():
        if p.dim() == 2:
            cands.setdefault(tuple(p.shape), []).append((name, p))
    names, taken = [], set()
    for w in ws:
        group = cands.get((w["N"], w["K"]), [])
        if not group:
            raise ValueError(f"{w['node']}: the model has no parameter of shape [{w['N']}, {w['K']}]")
        r, c = min(corner, w["N"]), min(corner, w["K"])
        idx = np.arange(c) // w["block"]
        deq = (w["q"][:r, :c].astype(np.float32) - w["zero"][:r][:, idx]) * w["scales"][:r][:, idx]
        ref = torch.stack([p.detach()[:r, :c].float() for _, p in group]).cpu().numpy().reshape(len(group), -1)
        err = np.linalg.norm(ref - deq.reshape(1, -1), axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-30)
        order = np.argsort(err)
        best, second = int(order[0]), float(err[order[1]]) if len(group) > 1 else float("inf")
        name = group[best][0]
        if err[best] > 0.5 or second < 0.8 or name in taken:
            raise ValueError(f"{w['node']} [{w['N']}, {w['K']}]: no one parameter matches it: the best, {name}, is off by "
                             f"{err[best]:.3f}, the second by {second:.3f}{' (already taken)' if name in taken else ''}")
        taken.add(name)
        names.append(name)
    return names


def int4_dequant(w, device="cuda"):
    """(q - zero) * scale of one int4_weights entry, block-wise along K: float32 [N, K] on device."""
    q = torch.from_numpy(w["q"]).to(device)
    s = torch.from_numpy(w["scales"]).to(device)
    z = torch.from_numpy(w["zero"]).to(device)
    idx = torch.arange(w["K"], device=device) // w["block"]
    return (q.float() - z[:, idx]) * s[:, idx]


def int4_matched(model, state, scheme, path):
    """int4_weights of the int4 model at path (any graph of scheme: they hold the same weights) and
    match_int4_weights' names for them, once per scheme; logged with the quantisation's error on
    two weights. Returns (ws, names)."""
    if scheme not in state["matched"]:
        t0 = time.perf_counter()
        ws = int4_weights(path)
        names = match_int4_weights(model, ws)
        params = dict(model.named_parameters())
        left = [n for n, p in params.items() if p.dim() == 2 and n not in set(names)]
        errs = []
        for w, name in list(zip(ws, names))[:1] + [(w, n) for w, n in zip(ws, names) if n == "lm_head.weight"]:
            ref = params[name].detach().float()
            errs.append(f"{name} {float((int4_dequant(w) - ref).norm() / ref.norm()):.4f}")
        log(f"int4 {scheme}: {len(ws)} quantised weights read from {os.path.basename(os.path.dirname(path))} and matched by "
            f"content to the model's parameters in {time.perf_counter() - t0:.1f} s; 2-D parameters left float: {left}; "
            f"the quantisation's error, |dequantised - bf16| / |bf16|: {', '.join(errs)}")
        state["matched"][scheme] = (ws, names)
    return state["matched"][scheme]


def tinygemm_inner_k_tiles(k):
    """The inner k-tiles of _convert_weight_to_int4pack for K: 8, 4 or 2 (K a multiple of 16 x that)."""
    for t in (8, 4, 2):
        if k % (t * 16) == 0:
            return t
    raise ValueError(f"K = {k}: the int4 matmul needs K a multiple of 32")


def tinygemm_pack(q, scales, zero, packing):
    """One weight in the form torch.ops.aten._weight_int4pack_mm takes: q (uint8 [N, K] on the GPU,
    values 0..15), scales and zero (float32 [N, K / group]) -> (_convert_weight_to_int4pack's int32
    tensor, bfloat16 [K / group, N, 2] of scale and zero). That kernel dequantises
    (q - 8) * scale + zero, so the zero of ORT's (q - zero_point) * scale is
    (8 - zero_point) * scale. packing indexes INT4_PACKINGS (the input the conversion takes)."""
    n, k = q.shape
    if n % 8:
        raise ValueError(f"N = {n}: the int4 matmul needs N a multiple of 8")
    if packing == 0:
        b = (q[:, 0::2] << 4) | q[:, 1::2]
    elif packing == 1:
        b = (q[:, 1::2] << 4) | q[:, 0::2]
    else:
        b = q.to(torch.int32)
    packed = torch.ops.aten._convert_weight_to_int4pack(b.contiguous(), tinygemm_inner_k_tiles(k))
    sz = torch.stack([scales, (8.0 - zero) * scales], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, sz


def int4_mm(x, wq, sz, group):
    """x [..., K] bfloat16 times the int4 weight (wq, sz: tinygemm_pack's, [N, K]) transposed:
    [..., N] bfloat16, by torch.ops.aten._weight_int4pack_mm over x's rows flattened."""
    y = torch.ops.aten._weight_int4pack_mm(x.reshape(-1, x.shape[-1]).contiguous(), wq, group, sz)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def int4_fused(tens, names):
    """The int4 weights of the parameters names stacked along N, as F.linear over their
    concatenation takes them: (q, scales, zero) on the GPU (each row is quantised on its own, so
    stacking keeps every value)."""
    parts = [tens[n] for n in names]
    return tuple(torch.cat([p[i] for p in parts]) for i in range(3))


def int4_layer_check(q, scales, zero, group, packing):
    """One int4 weight through the int4 matmul (tinygemm_pack with packing, int4_mm) against
    F.linear with the weight dequantised to bfloat16, and against float32, for x of 1 and of 16
    seeded rows: the largest |difference| over the largest |reference|. Returns (against bf16,
    against float32)."""
    packed, sz = tinygemm_pack(q, scales, zero, packing)
    k = q.shape[1]
    w32 = (q.float() - zero.repeat_interleave(group, dim=1)[:, :k]) * scales.repeat_interleave(group, dim=1)[:, :k]
    g = torch.Generator(device="cuda").manual_seed(11)
    worst, worst32 = 0.0, 0.0
    for rows in (1, 16):
        x = torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16)
        got = int4_mm(x, packed, sz, group).float()
        ref = F.linear(x, w32.to(torch.bfloat16)).float()
        ref32 = x.float() @ w32.T
        worst = max(worst, float((got - ref).abs().max() / ref.abs().max()))
        worst32 = max(worst32, float((got - ref32).abs().max() / ref32.abs().max()))
    return worst, worst32


def fast_int4_weights(model, tens, packing):
    """fast_weights' dicts for FastLlamaInt4: each quantised projection as <name>_q (the int4
    matmul's int32 tensor) and <name>_sz (its bfloat16 scales and zeros), q/k/v and gate/up
    stacked as fast_weights concatenates them; the embedding and the norms shared with the
    model; the LM head int4 when the quantizer made it MatMulNBits, else the model's. tens:
    parameter name -> (q, scales, zero) on the GPU."""
    par = lambda t: torch.nn.Parameter(t.detach(), requires_grad=False)  # noqa: E731
    layers = []
    for i, blk in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        lw = dict(attn_norm=par(blk.input_layernorm.weight), mlp_norm=par(blk.post_attention_layernorm.weight))
        for key, parts in (("wqkv", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
                           ("wo", ("self_attn.o_proj",)), ("w13", ("mlp.gate_proj", "mlp.up_proj")),
                           ("w2", ("mlp.down_proj",))):
            lw[key + "_q"], lw[key + "_sz"] = tinygemm_pack(*int4_fused(tens, [p + x + ".weight" for x in parts]), packing)
        layers.append(lw)
    top = dict(embed=par(model.model.embed_tokens.weight), norm=par(model.model.norm.weight), layers=layers)
    if "lm_head.weight" in tens:
        top["lm_head_q"], top["lm_head_sz"] = tinygemm_pack(*tens["lm_head.weight"], packing)
    else:
        top["lm_head"] = par(model.lm_head.weight)
    return top


class FastLlamaInt4(FastLlama):
    """FastLlama over ORT's int4 weights (fast_int4_weights): each projection, and the LM head when
    it is quantised, multiplied by PyTorch's own int4 weight-only matmul
    (torch.ops.aten._weight_int4pack_mm: bfloat16 activations, the weights dequantised in the
    kernel); everything else as FastLlama. Not thread-safe (the caches)."""

    def __init__(self, w, cfg, m, cos, sin, group):
        super().__init__(w, cfg, m, cos, sin)
        self.group = group
        self.lm_int4 = "lm_head_q" in w

    def linear(self, x, owner, name):
        if name == "lm_head" and not self.lm_int4:
            return F.linear(x, self.lm_head)
        return int4_mm(x, getattr(owner, name + "_q"), getattr(owner, name + "_sz"), self.group)


def int4_torch_prep(args, cfg, model, state, scheme, path, results):
    """What the int4 PyTorch arms of scheme need, made once per scheme (a failure is kept and
    raised again): PyTorch's int4 matmul (torch.ops.aten._weight_int4pack_mm and
    _convert_weight_to_int4pack; plainly reported when absent); the quantised weights of the int4
    model at path (int4_matched); the input layout its conversion takes, found by
    int4_layer_check on layer 0's fused q/k/v and on the LM head (within 0.02 of the dequantised
    bf16 matmul, else the next of INT4_PACKINGS); the gpt-fast-style weights (fast_int4_weights);
    and the reference, torch_reference of transformers' model with the int4 weights dequantised
    to bfloat16. Logged; stored in results["int4"]["torch_prep"][scheme]. Returns dict(weights,
    ref, group, packing)."""
    prep = state["torch_prep"].get(scheme)
    if isinstance(prep, Exception):
        raise prep
    if prep is not None:
        return prep
    info = results.setdefault("int4", {}).setdefault("torch_prep", {}).setdefault(scheme, {})
    try:
        try:
            torch.ops.aten._weight_int4pack_mm, torch.ops.aten._convert_weight_to_int4pack  # noqa: B018
        except Exception as e:
            raise RuntimeError(f"torch {torch.__version__} has no int4 weight-only matmul "
                               f"(torch.ops.aten._weight_int4pack_mm, _convert_weight_to_int4pack: {e})") from e
        if MODEL_DTYPE != torch.bfloat16:
            raise RuntimeError("PyTorch's int4 matmul takes bfloat16 activations; the model is " + str(MODEL_DTYPE))
        ws, names = int4_matched(model, state, scheme, path)
        groups = {w["block"] for w in ws}
        if len(groups) != 1 or next(iter(groups)) not in (32, 64, 128, 256):
            raise RuntimeError(f"block sizes {sorted(groups)}: PyTorch's int4 matmul takes one of 32, 64, 128, 256")
        group = groups.pop()
        tens = {name: (torch.from_numpy(w["q"]).cuda(), torch.from_numpy(w["scales"]).cuda(),
                       torch.from_numpy(w["zero"]).cuda()) for w, name in zip(ws, names)}
        p0 = "model.layers.0."
        probes = [(what, ns) for what, ns in (
            ("layer 0 q/k/v, fused", [p0 + "self_attn.q_proj.weight", p0 + "self_attn.k_proj.weight",
                                      p0 + "self_attn.v_proj.weight"]),
            ("the LM head", ["lm_head.weight"])) if all(n in tens for n in ns)]
        if not probes:
            raise RuntimeError("neither layer 0's q/k/v nor the LM head is among the quantised weights")
        packing, tried = None, {}
        for pk, desc in enumerate(INT4_PACKINGS):
            try:
                errs = {what: int4_layer_check(*int4_fused(tens, ns), group, pk) for what, ns in probes}
            except Exception as e:  # this layout is refused: try the next
                tried[desc] = f"{type(e).__name__}: {str(e)[:200]}"
                log(f"int4 {scheme}: PyTorch's int4 matmul with its input as {desc}: {tried[desc]}")
                continue
            tried[desc] = {what: dict(vs_bf16=e16, vs_float32=e32) for what, (e16, e32) in errs.items()}
            ok = all(e16 <= 0.02 for e16, _ in errs.values())
            log(f"int4 {scheme}: PyTorch's int4 matmul (group {group}) with its input as {desc}, against the weights "
                f"dequantised, max |diff| / max |ref| for 1 and 16 rows: " + "; ".join(
                    f"{what}: {e16:.4f} (bf16 matmul), {e32:.4f} (float32)" for what, (e16, e32) in errs.items())
                + ("" if ok else " -- over 0.02: the layout is wrong"))
            if ok:
                packing = pk
                break
        info.update(layer_check=tried, packing=INT4_PACKINGS[packing] if packing is not None else None, group=group)
        if packing is None:
            raise RuntimeError("no input layout of PyTorch's int4 matmul reproduces the dequantised weights (see above)")
        weights = fast_int4_weights(model, tens, packing)
        del tens
        with torch.no_grad():
            mdeq = copy.deepcopy(model)
            params = dict(mdeq.named_parameters())
            for w, name in zip(ws, names):
                params[name].copy_(int4_dequant(w).to(params[name].dtype))
        ref = torch_reference(mdeq, cfg, args.seed + 2)
        del mdeq
        gc.collect()
        torch.cuda.empty_cache()
        prep = dict(weights=weights, ref=ref, group=group, packing=INT4_PACKINGS[packing])
    except Exception as e:
        info["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        state["torch_prep"][scheme] = e
        raise
    state["torch_prep"][scheme] = prep
    return prep


def int4_torch_arms(args, cfg, model, state, ctx, m, keep, results, n, paths):
    """The int4 PyTorch arms of one context that --arms keeps, each guarded (a failure is logged and
    its row is NaN; torch without an int4 matmul is said plainly): per scheme with a model in
    paths, FastLlamaInt4 at cache size m on int4_torch_prep's weights, checked eager against
    transformers with the same weights dequantised (verify_decode), then compiled in each of
    --int4-torch-modes (compiled_arm, its check against the same reference; with SDPA's
    enable_gqa, else once more with the key/value heads repeated). Details go to
    results["int4"]["torch"][ctx]. Returns [(label, ms, scheme)]."""
    modes = [x.strip() for x in args.int4_torch_modes.split(",") if x.strip()]
    info = results.setdefault("int4", {}).setdefault("torch", {}).setdefault(str(ctx), {})
    out = []
    ids = pos = None
    for scheme in state["schemes"]:
        arms = [(mode, INT4_TORCH_LABEL.format(scheme=scheme, mode=mode)) for mode in modes
                if keep(INT4_TORCH_LABEL.format(scheme=scheme, mode=mode))]
        if not arms:
            continue
        if ids is None:
            ids = torch.zeros(1, 1, dtype=torch.long, device="cuda")
            pos = torch.zeros(1, dtype=torch.long, device="cuda")
            mark_static(ids, pos)
        fast, prep, ok = None, None, False
        try:
            if scheme not in paths:
                raise RuntimeError(f"no int4 {scheme} model at this context (see above)")
            prep = int4_torch_prep(args, cfg, model, state, scheme, paths[scheme], results)
            fast = FastLlamaInt4(prep["weights"], cfg, m, *rope_tables(model, cfg, m), prep["group"])
            mark_static(*fast.buffers())
            label = f"PyTorch gpt-fast-style int4 {scheme}, eager"
            with torch.no_grad():
                ok, check = verify_decode(label + " (against transformers with the int4 weights dequantised)", fast, ids,
                                          pos, fast.reset, prep["ref"])
            info[label + " (check only)"] = dict(check=check, packing=prep["packing"])
        except Exception as e:
            log(f"context {ctx}: the int4 PyTorch arms ({scheme}) are not run ({type(e).__name__}: {str(e)[:400]}); "
                f"their rows are NaN:\n{traceback.format_exc()[-2000:]}")
            info[f"int4 {scheme}"] = dict(error=f"{type(e).__name__}: {str(e)[:400]}")
        for mode, label in arms:
            out.append(time_fast_arm(fast, ok, mode, label, ids, pos, prep["ref"], ctx, n, info) + (scheme,))
        fast = prep = None  # the compiled graphs and their memory go with it
        forget_compiled()
    return out


def cpu_session(runner, path):
    """A session of the model at path on ORT's CPU EP alone: the reference implementation."""
    so = runner.ort.SessionOptions()
    so.log_severity_level = 3
    return runner.ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def int4_references(cfg, model, state, ws, names, M, prompt, tokens):
    """The int4 weights' own references (the quantisation's error taken out of the comparison):
    transformers' model with the parameters names replaced by ws dequantised, in float32 over the
    prompt (prefill logits, prefill32) and then tokens[:-1] teacher-forced at positions P, P+1,
    ... (each step's logits, steps32), and in the int4 model's dtype over the prompt (prefill_act:
    that dtype's own distance from float32 on these weights). numpy float32."""
    P = prompt.shape[1]
    ids = torch.from_numpy(prompt).cuda()
    out = {}
    with torch.no_grad():
        m32 = copy.deepcopy(model).float()
        p32 = dict(m32.named_parameters())
        for w, name in zip(ws, names):
            p32[name].copy_(int4_dequant(w))
        ref = Prefill(m32, cfg, M, torch.float32)(ids)
        out["prefill32"] = ref[0].float().cpu().numpy()
        kv, d32, steps = list(ref[1:]), Decode(m32, cfg, M, torch.float32), []
        del ref
        for i in range(len(tokens) - 1):
            o = d32(torch.tensor([[tokens[i]]], device="cuda"), torch.tensor([P + i], device="cuda"), *kv)
            kv = list(o[1:])
            steps.append(o[0][0, -1].float().cpu().numpy())
            del o
        out["steps32"] = steps
        del kv, d32
        if state["dtype"] == torch.float32:
            out["prefill_act"] = out["prefill32"]
        else:
            ma = to_dtype_keep_rope(m32, state["dtype"])
            del m32
            out["prefill_act"] = Prefill(ma, cfg, M, state["dtype"])(ids)[0].float().cpu().numpy()
            del ma
    gc.collect()
    torch.cuda.empty_cache()
    return out


def int4_check(args, cfg, model, runner, state, M, prompt, logits_f32, scale, tol, err_bf16, tokens, results, failures):
    """The int4 correctness check, per scheme of --int4, on the int4 models of the check's prefill
    and decode graphs (cache size M): where their nodes run (int4_placement: CudaEp alone, or ORT's
    CPU EP taking the nodes CudaEp declines, which fails the check, a MatMulNBits declined for a
    pending PTX included); ORT + CudaEp's prefill logits against ORT's CPU EP on the same
    int4 model, against float32 PyTorch with the int4 weights dequantised, and against float32
    PyTorch with the unquantised weights beside the bf16 model's own distance (err_bf16;
    information: the quantisation's error); then tokens (PyTorch bf16's greedy tokens, as the bf16
    check uses) teacher-forced through both EPs: each next token the same, or differing at a
    measured tie (the CPU EP's logits of the two tokens closer than that step's max |difference|
    between the EPs or 2 spacings of the dtype, or the dequantised float32 model's closer than
    that difference). Tolerance for the logits (max |diff| / std of the float32 logits):
    3 x PyTorch's own distance from float32 in the int4 model's dtype on the dequantised weights,
    at least 0.05 (the bf16 check's tol when those references fail). Failures go to failures; a
    failed export or quantisation (ORT's tools, not ours) is logged only. Stored in
    results["int4"]["check"][scheme]."""
    P = prompt.shape[1]
    store = results.setdefault("int4", {}).setdefault("check", {})
    dist = lambda a, b: float(np.max(np.abs(a - b))) / scale  # noqa: E731
    for scheme in state["schemes"]:
        rec = store.setdefault(scheme, {})
        stage = "export and quantisation"
        try:
            pre = int4_graph(args, cfg, model, state, "prefill", P, M, scheme, results)
            dec_path = int4_graph(args, cfg, model, state, "decode", 1, M, scheme, results)
            stage = "placement"
            places = [int4_placement(state, runner, p, args.work, results) for p in (pre, dec_path)]
            on_ep = all(pl["on_ep"] for pl in places)
            rec["matmulnbits_ep"] = "CudaEp" if on_ep else "/".join(sorted({pl["ep"] for pl in places if not pl["on_ep"]}))
            for pl, what in zip(places, ("prefill", "decode")):
                if pl["on_ep"]:
                    continue
                if pl["other_count"]:
                    failures.append(f"int4 {scheme} {what}: CudaEp declines {pl['other_count']} node(s) besides MatMulNBits")
                if pl["matmulnbits"]:  # the PTX is committed: a pending one is a stale build too
                    failures.append(f"int4 {scheme} {what}: CudaEp declines MatMulNBits"
                                    f"{' (its PTX pending)' if pl['pending'] else ''}: "
                                    f"{(pl['reasons'] or ['?'])[0][:200]}")
                if not pl["matmulnbits"] and not pl["other_count"]:
                    failures.append(f"int4 {scheme} {what}: a session on CudaEp alone fails: "
                                    f"{pl.get('alone_error', '')[:200]}")
            stage = "the dequantised references"
            refs = None
            try:
                ws, names = int4_matched(model, state, scheme, pre)
                refs = int4_references(cfg, model, state, ws, names, M, prompt, tokens)
            except Exception:
                log(f"!!!!! int4 {scheme}: the dequantised PyTorch references failed; the check compares with ORT's CPU EP "
                    f"under the bf16 check's tolerance only:\n{traceback.format_exc()[-2000:]}")
            noise = dist(refs["prefill_act"], refs["prefill32"]) if refs else None
            tol4 = max(3 * noise, 0.05) if refs else tol
            stage = "ORT + CudaEp"
            dec = OrtDecoder(runner, cfg, pre, dec_path, M, graph=on_ep, kv_type=state["kv_type"], fallback=not on_ep)
            l_ep = dec.run_prefill(prompt).astype(np.float32)
            stage = "ORT's CPU EP"
            cpu_pre = cpu_session(runner, pre)
            names_out = [o.name for o in cpu_pre.get_outputs()]
            o = cpu_pre.run(None, {"input_ids": prompt})
            l_cpu = o[names_out.index("logits")].astype(np.float32)
            kv = {nm: v for nm, v in zip(names_out, o) if nm != "logits"}
            del cpu_pre, o
            where = "MatMulNBits on CudaEp" if on_ep else f"MatMulNBits on {rec['matmulnbits_ep']}, the rest on CudaEp"
            d = dict(ep_vs_cpu=dist(l_ep, l_cpu), ep_vs_f32=dist(l_ep, logits_f32), cpu_vs_f32=dist(l_cpu, logits_f32),
                     torch_bf16_vs_f32=err_bf16, tol=tol4)
            if refs:
                d.update(ep_vs_dequant_f32=dist(l_ep, refs["prefill32"]), cpu_vs_dequant_f32=dist(l_cpu, refs["prefill32"]),
                         torch_act_vs_dequant_f32=noise)
            log(f"int4 {scheme} ({state['dtype_name']}, {where}): prefill logits ({P} tokens), max |diff| / std: "
                f"ORT + CudaEp against ORT's CPU EP {d['ep_vs_cpu']:.4f} (tolerance {tol4:.4f}" +
                (f": 3x PyTorch {state['dtype_name']}'s {noise:.4f} from float32 on the dequantised weights, at least "
                 f"0.05); "
                 f"against float32 PyTorch with the int4 weights dequantised: ORT + CudaEp {d['ep_vs_dequant_f32']:.4f}, "
                 f"CPU EP {d['cpu_vs_dequant_f32']:.4f}" if refs else "; the bf16 check's"))
            log(f"int4 {scheme}: prefill logits against float32 PyTorch with the unquantised weights (the quantisation's "
                f"error): ORT + CudaEp {d['ep_vs_f32']:.4f}, ORT's CPU EP {d['cpu_vs_f32']:.4f}; beside the bf16 model's "
                f"own distance (PyTorch bf16) {err_bf16:.4f}")
            if not d["ep_vs_cpu"] <= tol4:
                failures.append(f"int4 {scheme}: prefill logits off ORT's CPU EP's by {d['ep_vs_cpu']:.4f} std > {tol4:.4f}")
            if refs and not d["ep_vs_dequant_f32"] <= tol4:
                failures.append(f"int4 {scheme}: prefill logits off the dequantised float32 model's by "
                                f"{d['ep_vs_dequant_f32']:.4f} std > {tol4:.4f}")
            stage = "teacher-forced decode"
            cpu_dec = cpu_session(runner, dec_path)
            dec_in, dec_out = [x.name for x in cpu_dec.get_inputs()], [x.name for x in cpu_dec.get_outputs()]
            agree, ties, unexplained, worst = 0, 0, [], 0.0
            for i in range(len(tokens) - 1):
                tok, p = tokens[i], P + i
                l = dec.step(tok, p)[0, -1].astype(np.float32)
                feeds = {"input_ids": np.array([[tok]], dtype=np.int64), "cache_position": np.array([p], dtype=np.int64)}
                for nm in dec_in:
                    if nm.startswith("past_"):
                        feeds[nm] = kv["present_" + nm[len("past_"):]]
                oc = cpu_dec.run(None, feeds)
                w = oc[dec_out.index("logits")][0, -1].astype(np.float32)
                kv = {nm: v for nm, v in zip(dec_out, oc) if nm != "logits"}
                step_d = float(np.max(np.abs(l - w)))
                worst = max(worst, step_d / scale)
                a, b = int(np.argmax(l)), int(np.argmax(w))
                if a == b:
                    agree += 1
                    continue
                gap = float(w[b] - w[a])
                gap32 = abs(float(refs["steps32"][i][a] - refs["steps32"][i][b])) if refs else None
                tie = gap <= max(step_d, 2 * float_ulp(float(w[b]), state["mantissa"]))
                if tie or (gap32 is not None and gap32 <= step_d):
                    ties += 1
                    log(f"  int4 {scheme} step {i + 1}: ORT + CudaEp {a}, CPU EP {b}: the CPU EP's logits of the two "
                        f"{gap:.4f} apart, the EPs' max |diff| at this step {step_d:.4f}" +
                        (f", the dequantised float32 model's {gap32:.4f} apart" if gap32 is not None else ""))
                else:
                    unexplained.append((i + 1, a, b, gap, step_d, gap32))
            log(f"int4 {scheme}: teacher-forced decode, {len(tokens) - 1} steps (PyTorch bf16's tokens): {agree} next "
                f"tokens identical to ORT's CPU EP's, {ties} differ at a measured tie, {len(unexplained)} differ otherwise "
                f"{unexplained[:4]}; logits max |diff| / std against the CPU EP over the steps {worst:.4f}")
            if unexplained:
                failures.append(f"int4 {scheme}: teacher-forced tokens differ from ORT's CPU EP's beyond ties at "
                                f"{len(unexplained)} steps")
            if not worst <= tol4:
                failures.append(f"int4 {scheme}: teacher-forced logits off ORT's CPU EP's by {worst:.4f} std > {tol4:.4f}")
            rec.update(prefill=d, teacher_forced=dict(steps=len(tokens) - 1, agree=agree, ties=ties, unexplained=unexplained,
                                                      worst=worst))
            del dec, cpu_dec
        except Exception:
            log(f"!!!!! int4 {scheme}: the check failed in {stage}:\n{traceback.format_exc()[-3000:]}")
            rec["error"] = f"{stage}: {traceback.format_exc()[-600:]}"
            if stage != "export and quantisation":
                failures.append(f"int4 {scheme}: the check failed in {stage}")
    state["src_model"] = None  # made again if the rows export more graphs
    gc.collect()
    torch.cuda.empty_cache()


PENDING_PLACEMENT = dict(on_ep=False, matmulnbits=1)  # what int4_ort_label says for declined MatMulNBits
OTHER_PLACEMENT = dict(on_ep=False, matmulnbits=0)  # ... and for a session on CudaEp alone failing otherwise


def int4_bench(args, cfg, model, runner, results, state, wanted, keep, rows, n):
    """The int4 rows of --bench (int4decode128, int4decode2048, int4prefill512), each row family
    guarded; rows: the bf16 rows already made (the int4 prefill's vs_bf16_prefill takes the bf16
    resident arm's time from them). Returns the new rows."""
    out = []
    for ctx in (128, 2048):
        if f"int4decode{ctx}" in wanted:
            try:
                out += int4_decode_context(args, cfg, model, runner, results, state, ctx, keep, n)
            except Exception:
                log(f"!!!!! int4 decode at context {ctx} failed:\n{traceback.format_exc()[-3000:]}")
    if "int4prefill512" in wanted:
        try:
            out += int4_prefill_rows(args, cfg, model, runner, results, state, keep, rows)
        except Exception:
            log(f"!!!!! int4 prefill failed:\n{traceback.format_exc()[-3000:]}")
    return out


def int4_decode_context(args, cfg, model, runner, results, state, ctx, keep, n):
    """One context's int4 decode rows (int4_decode_rows): per scheme the int4 model of the decode
    graph at cache size ctx + TOKENS, the bytes a step reads (its weights as int4_bytes counts
    them, and the cache), the int4 PyTorch arms (int4_torch_arms), then ORT's arms eager and with
    enable_cuda_graph=1 (IOBinding, one shared set of cache buffers, the step at position ctx over
    and over, median_ms), on CudaEp alone or, where CudaEp declines nodes, with CPU fallback and
    labelled so (int4_placement). Ratios over the best bf16 compiled PyTorch arm of the same run's
    decode<ctx> row (None when that row did not run)."""
    T = args.tokens
    m = ctx + T
    kv_bytes = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * m * head_dim(cfg) * state["elem"]
    modes = [x.strip() for x in args.int4_torch_modes.split(",") if x.strip()]
    whats = (("eager", False), ("enable_cuda_graph=1", True))
    paths, sbytes, placements, ort_wanted = {}, {}, {}, set()
    for scheme in state["schemes"]:
        ort_kept = any(keep(int4_ort_label(scheme, pl, w)) for pl in (None, PENDING_PLACEMENT, OTHER_PLACEMENT)
                       for w, _ in whats)
        torch_kept = any(keep(INT4_TORCH_LABEL.format(scheme=scheme, mode=mode)) for mode in modes)
        if not (ort_kept or torch_kept):
            continue
        if ort_kept:
            ort_wanted.add(scheme)
        try:
            paths[scheme] = int4_graph(args, cfg, model, state, "decode", 1, m, scheme, results)
            c = state["contents"][paths[scheme]]
            sbytes[scheme] = c["step_weights"] + kv_bytes
            log(f"context {ctx}, int4 {scheme}: a decode step reads {sbytes[scheme] / 1e9:.3f} GB: "
                f"{c['step_weights'] / 1e9:.3f} GB of weights (packed {c['packed'] / 1e9:.3f}, scales "
                f"{c['scales'] / 1e9:.3f}, zero points {c['zero_points'] / 1e9:.3f}, the LM head "
                f"{'int4' if c['lm_head_quantised'] else 'float'}) and {kv_bytes / 1e9:.3f} GB of cache")
            if ort_kept:
                placements[scheme] = int4_placement(state, runner, paths[scheme], args.work, results)
        except Exception:
            log(f"!!!!! context {ctx}: the int4 {scheme} decode model failed; its rows are NaN:\n"
                f"{traceback.format_exc()[-3000:]}")
    timed, step_bytes, fallback = [], {}, {}
    for label, ms, scheme in int4_torch_arms(args, cfg, model, state, ctx, m, keep, results, n, paths):
        timed.append((label, ms))
        if scheme in sbytes:
            step_bytes[label] = sbytes[scheme]
    ids, pos = np.array([[5]], dtype=np.int64), np.array([ctx], dtype=np.int64)
    for scheme in state["schemes"]:
        if scheme not in ort_wanted:
            continue
        pl = placements.get(scheme)
        for what, graph in whats:
            label = int4_ort_label(scheme, pl, what)
            if not keep(label):
                continue
            ms = float("nan")
            if pl is not None:
                step_bytes[label] = sbytes[scheme]
                if not pl["on_ep"]:
                    fallback[label] = pl["ep"]
                try:
                    d = OrtDecoder(runner, cfg, None, paths[scheme], m, graph, kv_type=state["kv_type"],
                                   fallback=not pl["on_ep"])
                    try:
                        d.fill_random(7)
                    except Exception as e:  # timing only: the contents do not change the work
                        log(f"(cache left unfilled: {str(e)[:200]})")
                    step = d.swapped_steps(ids, pos)
                    ms = median_ms(step, n)
                    if graph:
                        gpu = device_busy_ms(step, 20)
                        if gpu is not None:
                            log(f"context {ctx}: {label}: step {ms:.3f} ms wall, GPU busy {gpu[0]:.3f} ms in {gpu[1]:.0f} "
                                f"kernels and copies, {gpu[2]:.3f} ms of gaps under 10 us")
                    del d, step
                except Exception as e:
                    log(f"ORT int4 decode at context {ctx} ({label}) failed: {str(e)[:600]}")
            timed.append((label, ms))
    t_bf16 = results.get("best_compiled_torch_ms", {}).get(str(ctx))
    t_graph = results.get("best_torch_graph_ms", {}).get(str(ctx))
    if t_bf16 is None:
        log(f"context {ctx}: no bf16 compiled PyTorch time in this run (decode{ctx} in --bench makes one): the int4 rows' "
            f"vs_best_bf16_torch is None")
    ctx_rows, t_int4 = int4_decode_rows(ctx, m, timed, step_bytes, fallback, t_bf16, t_graph)
    results.setdefault("best_int4_torch_ms", {})[str(ctx)] = t_int4
    fmt = lambda t: f"{t:.3f} ms" if t is not None else "not measured"  # noqa: E731
    log(f"context {ctx}, int4: best int4 PyTorch {fmt(t_int4)}; best bf16 compiled PyTorch {fmt(t_bf16)}")
    return ctx_rows


def int4_prefill_rows(args, cfg, model, runner, results, state, keep, rows):
    """The int4 prefill rows: per scheme the int4 model of a 512-token prefill graph (cache
    512 + TOKENS) through ort_prefill_row, the weights resident, then with paging=auto and
    weight_budget_bytes at 25 % of the int4 model's initializer bytes (only where CudaEp runs
    every node: paging measures nothing of the nodes ORT's CPU EP runs); each row's
    vs_bf16_prefill is the bf16 resident arm's time (rows) over its own (above 1: faster)."""
    T, P = args.tokens, 512
    m = P + T
    prompt = np.random.default_rng(3).integers(0, cfg.vocab_size, size=(1, P), dtype=np.int64)
    base = next((r["ms"] for r in rows if r.get("row") == f"prefill {P} tokens"
                 and r.get("arm") == "ORT + CudaEp, weights resident" and r["ms"] == r["ms"]), None)
    arms = (("weights resident", None), ("paging=auto, weight_budget_bytes = 25 % of the weights (the rest paged)", 0.25))
    h2d, out = None, []
    for scheme in state["schemes"]:
        if not any(keep(int4_ort_label(scheme, pl, w, binding=False))
                   for pl in (None, PENDING_PLACEMENT, OTHER_PLACEMENT) for w, _ in arms):
            continue
        try:
            path = int4_graph(args, cfg, model, state, "prefill", P, m, scheme, results)
            pl = int4_placement(state, runner, path, args.work, results)
        except Exception:
            log(f"!!!!! the int4 {scheme} prefill model failed; its rows are left out:\n{traceback.format_exc()[-3000:]}")
            continue
        wb = state["contents"][path]["total"]
        for what, share in arms:
            label = int4_ort_label(scheme, pl, what, binding=False)
            if not keep(label):
                continue
            if share is not None and not pl["on_ep"]:
                log(f"int4 prefill {P} ({label}): not run: CudaEp does not run every node of the int4 model")
                continue
            opts = {} if share is None else {"paging": "auto", "weight_budget_bytes": int(wb * share)}
            try:
                if share is not None and h2d is None:
                    h2d = results.get("pinned_h2d_gbps", 0) * 1e9 or pinned_h2d_bytes_per_s()
                    results["pinned_h2d_gbps"] = h2d / 1e9
                row = ort_prefill_row(runner, cfg, path, m, prompt, label, opts, INT4_PREFILL_ROW.format(p=P), h2d, wb,
                                      args.lib, kv_type=state["kv_type"], fallback=not pl["on_ep"])
                row.update(matmulnbits_ep=pl["ep"], model_bytes=wb,
                           vs_bf16_prefill=base / row["ms"] if base and pl["on_ep"] else None)
                log(f"int4 prefill {P} ({label}): {row['ms']:.2f} ms, {row['tokens_per_s']:.0f} tokens/s" +
                    (f"; the bf16 resident arm's {base:.2f} ms over it: {row['vs_bf16_prefill']:.3f}"
                     if row["vs_bf16_prefill"] else ""))
                out.append(row)
            except Exception as e:
                log(f"ORT int4 prefill ({label}) failed: {str(e)[:600]}")
    return out


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lib")
    ap.add_argument("work")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--inter", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--head-scale", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--exporter", default="auto", choices=["auto", "dynamo", "torchscript"])
    ap.add_argument("--bench", default="", help="benchmark rows to run, comma-separated: " + ", ".join(BENCH_ROWS))
    ap.add_argument("--skip-check", action="store_true", help="skip the correctness checks (and their two exports)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--reuse-exports", action="store_true",
                    help="reuse the graphs in WORK from an earlier run with the same arguments (the weights are seeded)")
    ap.add_argument("--export-only", metavar="TGZ", help="export the two graphs, pack them into TGZ and stop")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"],
                    help="the model's dtype (float32 only with --export-only)")
    ap.add_argument("--arms", default="", metavar="REGEX",
                    help="time only the decode and prefill arms whose label this regular expression matches (re.search), "
                         "PyTorch and ORT alike; default: every arm")
    ap.add_argument("--torch-compile-modes", default="reduce-overhead,max-autotune", metavar="MODES",
                    help="torch.compile modes of the gpt-fast-style PyTorch arms, comma-separated (transformers' "
                         "StaticCache arm runs when reduce-overhead is among them); empty: no compiled PyTorch arm")
    ap.add_argument("--torch-prefill-modes", default="max-autotune-no-cudagraphs,reduce-overhead", metavar="MODES",
                    help="torch.compile modes of the gpt-fast-style PyTorch prefill arms (prefill512), comma-separated; "
                         "empty: none")
    ap.add_argument("--int4", default="", metavar="SCHEMES",
                    help="the int4 section's quantisations, comma-separated: sym (no zero points), asym (zero points); "
                         "given, the check adds the int4 correctness check; the int4 rows of --bench default to sym,asym")
    ap.add_argument("--int4-dtype", default="float16", choices=["float16", "float32"],
                    help="the export ORT's quantizer quantises (it takes float16 and float32 MatMul weights, not bfloat16): "
                         "the int4 model's activations, scales and cache are in it")
    ap.add_argument("--int4-torch-modes", default="reduce-overhead", metavar="MODES",
                    help="torch.compile modes of the int4 PyTorch arms (gpt-fast-style, _weight_int4pack_mm), "
                         "comma-separated; empty: none")
    ap.add_argument("--gpu-profile", action="store_true",
                    help="trace with CUPTI (torch.profiler) for the GPU-busy breakdowns; every row timed after the "
                         "first trace is slowed by it (see device_busy_ms)")
    args = ap.parse_args()
    try:
        arm_filter(args.arms)
    except re.error as e:
        ap.error(f"--arms: {e}")
    unknown = sorted(set(filter(None, args.bench.split(","))) - set(BENCH_ROWS))
    if unknown:
        ap.error(f"--bench: unknown rows {unknown}; the rows are {', '.join(BENCH_ROWS)}")
    schemes = [x.strip() for x in args.int4.split(",") if x.strip()]
    if any(x not in INT4_SCHEMES for x in schemes):
        ap.error(f"--int4: the schemes are {', '.join(INT4_SCHEMES)}, not {args.int4!r}")
    if not schemes and "int4" in args.bench:
        schemes = list(INT4_SCHEMES)
    global GPU_PROFILE
    GPU_PROFILE = args.gpu_profile
    global REUSE
    REUSE = args.reuse_exports
    args.lib = os.path.abspath(args.lib)
    global MODEL_DTYPE
    MODEL_DTYPE = getattr(torch, args.dtype)
    if args.dtype != "bfloat16" and not args.export_only:
        ap.error("--dtype float32 is for --export-only")
    os.makedirs(args.work, exist_ok=True)
    results = {"args": vars(args), "torch": torch.__version__}
    failures = []
    int4 = int4_state(args, schemes) if schemes and not args.export_only else None

    import onnxruntime as ort
    import transformers

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, onnxruntime {ort.__version__}, "
        f"GPU {torch.cuda.get_device_name(0)}")
    cfg, model = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    hd = cfg.hidden_size // cfg.num_attention_heads
    log(f"model: LlamaForCausalLM, {params / 1e9:.3f} B parameters, {weight_bytes / 2**30:.2f} GiB bf16")
    results.update(params=params, weight_bytes=weight_bytes)

    P, T = args.prompt, args.tokens
    M = P + T
    graphs = {}

    def make(kind, s_or_m, m):
        name = f"{kind}_{s_or_m}_{m}"
        d = os.path.join(args.work, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        if kind == "prefill":
            mod, inputs = Prefill(model, cfg, m), (torch.zeros(1, s_or_m, dtype=torch.long, device="cuda"),)
            ins, outs = ["input_ids"], ["logits"] + kv_names(cfg, "present")
        else:
            kv = [torch.zeros(1, cfg.num_key_value_heads, m, hd, dtype=MODEL_DTYPE, device="cuda")
                  for _ in range(2 * cfg.num_hidden_layers)]
            mod = Decode(model, cfg, m)
            inputs = (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"), *kv)
            ins, outs = ["input_ids", "cache_position"] + kv_names(cfg, "past"), ["logits"] + kv_names(cfg, "present")
        secs, how = export(mod, inputs, ins, outs, path, args.exporter)
        nodes, ops, opset, data = describe_onnx(path)
        log(f"exported {name} with {how} in {secs:.1f} s: {nodes} nodes, opset {opset}, {data / 2**20:.1f} MiB external data")
        log(f"  ops: {json.dumps(ops, sort_keys=True)}")
        graphs[name] = dict(seconds=secs, exporter=how, nodes=nodes, ops=ops, data=data)
        return path

    def check():
        """Exports the prefill and decode graphs at cache size M and runs the correctness checks;
        returns (exit code or None to go on, the ORT runner, the decode graph's path)."""
        prefill_path = make("prefill", P, M)
        decode_path = make("decode", 1, M)
        if args.export_only:
            import tarfile

            with tarfile.open(args.export_only, "w:gz") as t:
                for p in (prefill_path, decode_path):
                    t.add(os.path.dirname(p), arcname=os.path.basename(os.path.dirname(p)))
            log(f"wrote {args.export_only}")
            return 0, None, None

        runner = OrtRunner(args.lib)
        try:
            dec = OrtDecoder(runner, cfg, prefill_path, decode_path, M, graph=True)
        except Exception as e:
            log(f"FAIL: a session on CudaEp alone: {str(e)[:3000]}")
            for p in (prefill_path, decode_path):
                log(f"  {os.path.basename(os.path.dirname(p))}:")
                for l in runner.declines(p, os.path.join(args.work, "declines.log")):
                    log("    " + l)
            results["graphs"] = graphs
            if args.json:
                json.dump(results, open(args.json, "w"), indent=1)
            return 1, None, None

        # ---- correctness: prefill logits against float32 PyTorch
        rng = np.random.default_rng(args.seed + 1)
        prompt = rng.integers(0, cfg.vocab_size, size=(1, P), dtype=np.int64)
        ids_t = torch.from_numpy(prompt).cuda()
        with torch.no_grad():
            ref_bf16 = Prefill(model, cfg, M)(ids_t)
            logits_bf16 = ref_bf16[0].cpu().numpy()
            # The float32 reference: the same weights in float32 (a copy; the bf16 model stays).
            m32 = copy.deepcopy(model).float()
            ref_f32 = Prefill(m32, cfg, M, torch.float32)(ids_t)
            logits_f32 = ref_f32[0].cpu().numpy()
        t0 = time.perf_counter()
        logits_ort = dec.run_prefill(prompt)
        log(f"ORT prefill ({P} tokens) first run {1e3 * (time.perf_counter() - t0):.1f} ms")
        scale = float(np.std(logits_f32))
        err_ort = float(np.max(np.abs(logits_ort - logits_f32))) / scale
        err_bf16 = float(np.max(np.abs(logits_bf16 - logits_f32))) / scale
        tol = max(3 * err_bf16, 0.05)
        log(f"prefill logits vs PyTorch float32: max |diff| / std = {err_ort:.4f} (ORT + CudaEp, bf16), "
            f"{err_bf16:.4f} (PyTorch bf16); tolerance 3x PyTorch bf16's, at least 0.05: {tol:.4f}")
        if not err_ort <= tol:
            failures.append(f"prefill logits off by {err_ort:.4f} std > {tol:.4f}")
        results["prefill_logits"] = dict(err_ort=err_ort, err_torch_bf16=err_bf16, tol=tol)

        # ---- greedy decode: ORT + CudaEp against PyTorch bf16 (same static forward)
        def margin(l):
            s = np.sort(l)
            return float(s[-1] - s[-2])

        tok_ort, tok_pt, marg_ort, marg_pt, logits_pt = [], [], [], [], []
        nxt = int(np.argmax(logits_ort[0, -1]))
        tok_ort.append(nxt)
        marg_ort.append(margin(logits_ort[0, -1]))
        t0 = time.perf_counter()
        for i in range(T - 1):
            l = dec.step(nxt, P + i)
            nxt = int(np.argmax(l[0, -1]))
            tok_ort.append(nxt)
            marg_ort.append(margin(l[0, -1]))
        log(f"ORT decode: {T - 1} steps in {1e3 * (time.perf_counter() - t0):.1f} ms (first includes the capture)")
        with torch.no_grad():
            kv = list(ref_bf16[1:])
            d = Decode(model, cfg, M)
            nxt = int(np.argmax(logits_bf16[0, -1]))
            tok_pt.append(nxt)
            marg_pt.append(margin(logits_bf16[0, -1]))
            top_logit = [float(np.max(logits_bf16[0, -1]))]
            for i in range(T - 1):
                out = d(torch.tensor([[nxt]], device="cuda"), torch.tensor([P + i], device="cuda"), *kv)
                kv = list(out[1:])
                l = out[0][0, -1].float().cpu().numpy()
                logits_pt.append(l)
                top_logit.append(float(np.max(l)))
                nxt = int(np.argmax(l))
                tok_pt.append(nxt)
                marg_pt.append(margin(l))
        same = next((i for i, (a, b) in enumerate(zip(tok_ort, tok_pt)) if a != b), None)
        if same is None:
            log(f"greedy decode: {T} tokens identical to PyTorch bf16; smallest logit margin {min(marg_pt):.4f}")
        else:
            log(f"greedy decode: first divergence at token {same} of {T}: ORT {tok_ort[same]} (margin {marg_ort[same]:.4f}), "
                f"PyTorch {tok_pt[same]} (margin {marg_pt[same]:.4f}, bf16 spacing at the top logit "
                f"{bf16_ulp(top_logit[same]):.4f})")
        # The float32 model fed the same tokens: at each step, how far PyTorch bf16's logits are
        # from float32's (the bf16 noise of this model at this step).
        with torch.no_grad():
            kv32, d32, noise = list(ref_f32[1:]), Decode(m32, cfg, M, torch.float32), []
            logits32 = []
            for i in range(T - 1):
                out = d32(torch.tensor([[tok_pt[i]]], device="cuda"), torch.tensor([P + i], device="cuda"), *kv32)
                kv32 = list(out[1:])
                l32 = out[0][0, -1].float().cpu().numpy()
                logits32.append(l32)
                noise.append(float(np.max(np.abs(logits_pt[i] - l32))))
            del m32, d32, kv32, ref_f32
            torch.cuda.empty_cache()
        # Teacher-forced: ORT decodes PyTorch's tokens, so every step is compared, not only those
        # before the first divergence. A next token may differ only where the two tokens are tied
        # within bf16's resolution: PyTorch's top-2 margin within two bf16 spacings, or the two
        # tokens' float32 logits closer than PyTorch bf16's own distance from float32 at that step.
        dec.run_prefill(prompt)
        agree, explained, unexplained, worst = 0, 0, [], 0.0
        for i in range(T - 1):
            l = dec.step(tok_pt[i], P + i)[0, -1]
            want = logits_pt[i]
            worst = max(worst, float(np.max(np.abs(l - want))) / scale)
            ours = int(np.argmax(l))
            gap32 = abs(float(logits32[i][ours] - logits32[i][tok_pt[i + 1]]))
            if ours == tok_pt[i + 1]:
                agree += 1
            elif marg_pt[i + 1] <= 2 * bf16_ulp(float(np.max(want))) or gap32 <= noise[i]:
                explained += 1
                log(f"  step {i + 1}: ORT {ours}, PyTorch bf16 {tok_pt[i + 1]}: PyTorch's top-2 margin "
                    f"{marg_pt[i + 1]:.4f}, the two tokens' float32 logits {gap32:.4f} apart, PyTorch bf16 within "
                    f"{noise[i]:.4f} of float32 at this step")
            else:
                unexplained.append((i + 1, ours, tok_pt[i + 1], marg_pt[i + 1], gap32, noise[i]))
        log(f"teacher-forced decode, {T - 1} steps: {agree} next tokens identical to PyTorch bf16, {explained} differ at a "
            f"bf16 tie (within 2 bf16 spacings, or closer in float32 than bf16's noise), {len(unexplained)} differ otherwise "
            f"{unexplained[:4]}; logits max |diff| / std over the steps {worst:.4f}")
        if unexplained:
            failures.append(f"teacher-forced tokens differ beyond bf16 ties at {len(unexplained)} steps")
        if not worst <= tol:
            failures.append(f"teacher-forced logits off by {worst:.4f} std > {tol:.4f}")
        results["greedy"] = dict(ort=tok_ort, torch=tok_pt, margin_ort=marg_ort, margin_torch=marg_pt, first_divergence=same,
                                 teacher_forced=dict(agree=agree, ties=explained, unexplained=unexplained, worst=worst))
        results["graphs"] = graphs
        contrib_form(args, cfg, model, runner, M, prompt, logits_f32, scale, tol, results, failures)
        if int4 is not None:
            try:
                int4_check(args, cfg, model, runner, int4, M, prompt, logits_f32, scale, tol, err_bf16, tok_pt, results,
                           failures)
            except Exception:
                log(f"!!!!! the int4 check failed:\n{traceback.format_exc()[-3000:]}")
                failures.append("the int4 check did not complete")
        if args.json:
            json.dump(results, open(args.json, "w"), indent=1)

        return None, runner, decode_path

    runner, decode_path, prefill_path = None, None, None
    if args.skip_check:
        runner = OrtRunner(args.lib)
    else:
        code, runner, decode_path = check()
        if code is not None:
            return code

    if args.bench:
        bench(args, cfg, model, runner, results, weight_bytes, decode_path, int4)
        if args.json:
            json.dump(results, open(args.json, "w"), indent=1)

    log("llama decode check:", "ok" if not failures else "FAILED: " + "; ".join(failures))
    return 1 if failures else 0


def contrib_form(args, cfg, model, runner, M, prompt, logits_f32, scale, tol, results, failures):
    """The contrib-op form of the model, made the way ONNX Runtime's own tools make one: the same
    weights in float32 (ORT's fusion patterns match float32 graphs; in a bfloat16 export the
    Casts around every normalization stop them), exported as the plain form is (prefill and
    decode at cache size M), ONNX Runtime's transformer optimizer over each graph
    (onnxruntime.transformers.optimizer, model_type gpt2, its Python fusions only: opt_level 0,
    as the deeper levels bake in CPU-EP fusions such as QuickGelu), then its float16 conversion
    of everything, inputs and outputs too (convert_float_to_float16, keep_io_types=False): a
    float16 model with com.microsoft ops where the patterns matched. Logs the fused operator
    counts; runs the graphs on CudaEp alone (else logs the nodes it leaves and why): the prefill
    logits and 8 greedy decode steps' logits against the float32 PyTorch model fed the same
    tokens (the plain form's tolerance; over it is a failure of the check), and one decode step
    timed with enable_cuda_graph=1. Stored under results["contrib"]. The optimizer missing or
    failing is logged, not a failure (it is not our code)."""
    out = {}
    results["contrib"] = out
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except Exception as e:
        log(f"contrib-op form: onnxruntime.transformers is not available ({str(e)[:200]})")
        out["skipped"] = str(e)[:200]
        return
    P, hd = prompt.shape[1], cfg.hidden_size // cfg.num_attention_heads
    m32 = copy.deepcopy(model).float()
    kv = [torch.zeros(1, cfg.num_key_value_heads, M, hd, dtype=torch.float32, device="cuda")
          for _ in range(2 * cfg.num_hidden_layers)]
    sources = {
        "prefill": (Prefill(m32, cfg, M, torch.float32), (torch.zeros(1, P, dtype=torch.long, device="cuda"),),
                    ["input_ids"]),
        "decode": (Decode(m32, cfg, M, torch.float32),
                   (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"), *kv),
                   ["input_ids", "cache_position"] + kv_names(cfg, "past")),
    }
    paths = {}
    for name, (mod, inputs, ins) in sources.items():
        d = os.path.join(args.work, f"contrib_{name}")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "float32.onnx")
        try:
            secs, how = export(mod, inputs, ins, ["logits"] + kv_names(cfg, "present"), src, args.exporter)
            t0 = time.perf_counter()
            om = optimize_model(src, model_type="gpt2", num_heads=cfg.num_attention_heads,
                                hidden_size=cfg.hidden_size, opt_level=0, use_gpu=False)
            stats = {k: v for k, v in om.get_fused_operator_statistics().items() if v}
            om.convert_float_to_float16(keep_io_types=False)
            paths[name] = os.path.join(d, "model.onnx")
            om.save_model_to_file(paths[name], use_external_data_format=True, all_tensors_to_one_file=True)
            ops = Counter(n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}.{n.op_type}"
                          for n in om.model.graph.node)
            log(f"contrib-op form of {name}: float32 export with {how} in {secs:.1f} s, optimized and converted to "
                f"float16 in {time.perf_counter() - t0:.1f} s; fused {stats}; {sum(ops.values())} nodes: "
                f"{json.dumps(dict(ops), sort_keys=True)}")
            out[name] = dict(fused=stats, nodes=sum(ops.values()), ops=dict(ops))
            del om
        except Exception as e:
            log(f"contrib-op form: making the {name} graph failed: {type(e).__name__}: {str(e)[:400]}")
            out[name] = dict(error=str(e)[:400])
            return
    try:
        dec = OrtDecoder(runner, cfg, paths["prefill"], paths["decode"], M, graph=True, kv_type=FLOAT16)
    except Exception as e:
        log(f"contrib-op form: a session on CudaEp alone fails: {str(e)[:600]}")
        for name, pth in paths.items():
            declined = runner.declines(pth, os.path.join(args.work, f"declines_contrib_{name}.log"))
            log(f"  {name}: CudaEp leaves {len(declined)} node(s): " + "; ".join(declined[:6]))
            out[name]["declined"] = declined[:20]
        failures.append("the contrib-op form does not run on CudaEp alone")
        return
    logits = dec.run_prefill(prompt).astype(np.float32)
    err = float(np.max(np.abs(logits - logits_f32))) / scale
    log(f"contrib-op form (float16): prefill logits vs PyTorch float32: max |diff| / std = {err:.4f} (tolerance {tol:.4f})")
    out["prefill_err"] = err
    if not err <= tol:
        failures.append(f"contrib-op form: prefill logits off by {err:.4f} std > {tol:.4f}")
    # Greedy steps of the contrib form, the float32 model fed the same tokens (the first steps
    # capture the graphs).
    nxt, worst, tokens = int(np.argmax(logits[0, -1])), 0.0, []
    with torch.no_grad():
        ref = Prefill(m32, cfg, M, torch.float32)(torch.from_numpy(prompt).cuda())
        kv32, d32 = list(ref[1:]), Decode(m32, cfg, M, torch.float32)
        for i in range(8):
            tokens.append(nxt)
            l = dec.step(nxt, P + i)[0, -1].astype(np.float32)
            o = d32(torch.tensor([[nxt]], device="cuda"), torch.tensor([P + i], device="cuda"), *kv32)
            kv32 = list(o[1:])
            worst = max(worst, float(np.max(np.abs(l - o[0][0, -1].cpu().numpy()))) / scale)
            nxt = int(np.argmax(l))
    log(f"contrib-op form (float16): 8 greedy decode steps {tokens}, logits vs PyTorch float32 fed the same tokens: "
        f"max |diff| / std = {worst:.4f} (tolerance {tol:.4f})")
    out["decode_err"], out["tokens"] = worst, tokens
    if not worst <= tol:
        failures.append(f"contrib-op form: decode logits off by {worst:.4f} std > {tol:.4f}")
    del m32, d32, kv32, ref, kv, sources
    torch.cuda.empty_cache()
    ids, pos = np.array([[nxt]], dtype=np.int64), np.array([P + 8], dtype=np.int64)
    t = median_ms(dec.swapped_steps(ids, pos), 50)
    log(f"contrib-op form (float16): decode step at context {P + 8} (cache {M}), enable_cuda_graph=1: {t:.3f} ms")
    out["decode_ms"] = t
    del dec


def bench(args, cfg, model, runner, results, weight_bytes, decode_path, int4=None):
    """The benchmark rows of --bench, the arms --arms keeps; see the module doc. int4: the int4
    section's state (int4_state), None without --int4 and int4 rows."""
    rows = []
    hd = cfg.hidden_size // cfg.num_attention_heads
    T = args.tokens
    n = 50
    wanted = set(filter(None, args.bench.split(",")))
    keep = arm_filter(args.arms)
    shared = {}  # what the contexts' compiled PyTorch arms share (compiled_torch_arms)

    def finish():
        """The int4 rows (after the bf16 ones, whose best times their ratios take), then the table."""
        if int4 is not None and any(w.startswith("int4") for w in wanted):
            try:
                rows.extend(int4_bench(args, cfg, model, runner, results, int4, wanted, keep, rows, n))
            except Exception:
                log(f"!!!!! the int4 rows failed:\n{traceback.format_exc()[-3000:]}")
            int4_release(int4)
        report(rows, results)
    for ctx in (128, 2048):
        if f"decode{ctx}" not in wanted:
            continue
        m = ctx + T
        kv_bytes = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * m * hd * 2
        # Bytes a decode step must read: every weight but the embedding table (one row of it), and
        # the whole static cache.
        emb = model.model.embed_tokens.weight
        step_bytes = weight_bytes - emb.numel() * emb.element_size() + kv_bytes
        # PyTorch eager, the ordinary transformers loop (DynamicCache, SDPA attention) from a
        # ctx-token prompt; then the exported forward (static cache) eager and under CUDAGraph,
        # with eager attention (what the export holds) and with SDPA.
        torch_rows = []
        label = "PyTorch eager, DynamicCache, sdpa"
        if keep(label):
            try:
                with torch.no_grad(), attention(model, "sdpa"):
                    ids = torch.randint(0, cfg.vocab_size, (1, ctx), device="cuda")
                    out = model(input_ids=ids, use_cache=True)
                    state = {"pkv": out.past_key_values, "tok": out.logits[:, -1:].argmax(-1)}

                    def eager_dynamic():
                        o = model(input_ids=state["tok"], past_key_values=state["pkv"], use_cache=True)
                        state["pkv"], state["tok"] = o.past_key_values, o.logits[:, -1:].argmax(-1)

                    torch_rows.append((label, median_ms(eager_dynamic, min(n, T - 4), warm=2)))
                    del out, state
            except Exception:
                log(f"context {ctx}: {label} failed:\n{traceback.format_exc()[-3000:]}")
                torch_rows.append((label, float("nan")))
        for impl in ("eager", "sdpa"):
            l_eager, l_graph = f"PyTorch eager, static cache, {impl}", f"PyTorch static cache + CUDAGraph, {impl}"
            if not (keep(l_eager) or keep(l_graph)):
                continue
            try:
                with torch.no_grad(), attention(model, impl):
                    dec, kv, tid, tpos = torch_static_step(model, cfg, m)
                    tpos.fill_(ctx)
                    if keep(l_eager):
                        torch_rows.append((l_eager, median_ms(lambda: dec(tid, tpos, *kv), n)))
                    if keep(l_graph):
                        s = torch.cuda.Stream()
                        s.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(s):
                            for _ in range(3):
                                dec(tid, tpos, *kv)
                        torch.cuda.current_stream().wait_stream(s)
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g):
                            gout = dec(tid, tpos, *kv)
                        torch_rows.append((l_graph, median_ms(g.replay, n)))
                        gpu = device_busy_ms(g.replay, 20)
                        if gpu is not None:
                            log(f"context {ctx}: PyTorch CUDAGraph ({impl}) step {torch_rows[-1][1]:.3f} ms wall, GPU busy "
                                f"{gpu[0]:.3f} ms in {gpu[1]:.0f} kernels and copies, {gpu[2]:.3f} ms of gaps under 10 us")
                        del g, gout
                    del dec, kv
            except Exception:
                log(f"context {ctx}: PyTorch static cache ({impl}) failed:\n{traceback.format_exc()[-3000:]}")
                torch_rows += [(l, float("nan")) for l in (l_eager, l_graph) if keep(l) and l not in dict(torch_rows)]
            torch.cuda.empty_cache()
        # The fair anchor: a gpt-fast-style model and transformers' StaticCache, compiled.
        torch_rows += compiled_torch_arms(args, cfg, model, ctx, m, keep, shared, results, n)
        # ORT + CudaEp at this cache size.
        ort_rows = {}
        # (label, CUDA graph, further options, shared): fusion=off shows what fusing the exported
        # chains gives, measured in the same run. Every arm binds one shared set of cache buffers
        # but the "two cache sets swapped" one.
        arms = (("ORT + CudaEp, eager (IOBinding)", False, {}, True),
                ("ORT + CudaEp, enable_cuda_graph=1, fusion=off (IOBinding)", True, {"fusion": "off"}, True),
                ("ORT + CudaEp, enable_cuda_graph=1, two cache sets swapped (IOBinding)", True, {}, False),
                ("ORT + CudaEp, enable_cuda_graph=1 (IOBinding)", True, {}, True))
        arms = tuple(a for a in arms if keep(a[0]))
        path = None
        if arms:
            try:
                if decode_path and m == args.prompt + T:
                    path = decode_path
                else:
                    path = make_decode_only(args, cfg, model, m)
            except Exception:
                log(f"context {ctx}: the decode graph's export failed; the ORT rows are NaN:\n"
                    f"{traceback.format_exc()[-3000:]}")
        for label, graph, opts, shared_set in arms:
            try:
                if path is None:
                    raise RuntimeError("no decode graph")
                d = OrtDecoder(runner, cfg, None, path, m, graph, decode_options=opts, shared=shared_set)
                try:
                    d.fill_random(7)
                except Exception as e:  # timing only: the contents do not change the work
                    log(f"(cache left unfilled: {str(e)[:200]})")
                ids = np.array([[5]], dtype=np.int64)
                pos = np.array([ctx], dtype=np.int64)
                ort_step = d.swapped_steps(ids, pos)
                ort_rows[label] = median_ms(ort_step, n)
                if graph:
                    gpu = device_busy_ms(ort_step, 20)
                    if gpu is not None:
                        log(f"context {ctx}: {label}: step {ort_rows[label]:.3f} ms wall, GPU busy "
                            f"{gpu[0]:.3f} ms per step in {gpu[1]:.0f} kernels and copies, {gpu[2]:.3f} ms of gaps "
                            f"under 10 us between them: {ort_rows[label] - gpu[0] - gpu[2]:.3f} ms per step outside "
                            f"the GPU's work")
                        results.setdefault("host_outside_gpu", {}).setdefault(str(ctx), {})[label] = dict(
                            wall_ms=ort_rows[label], gpu_ms=gpu[0], ops=gpu[1], small_gaps_ms=gpu[2])
                del d, ort_step
                if graph and not opts and shared_set:
                    host_breakdown(runner, cfg, path, m, ctx, label, results, os.path.join(args.work, f"profile_{ctx}"))
            except Exception as e:
                log(f"ORT decode at context {ctx} ({label}) failed: {str(e)[:600]}")
                ort_rows[label] = float("nan")
        ctx_rows, t_best, t_graph = decode_rows(ctx, m, torch_rows + list(ort_rows.items()), step_bytes)
        rows += ctx_rows
        measured = [t for _, t in torch_rows if t == t]
        fmt = lambda t: f"{t:.3f} ms" if t is not None else "not measured"  # noqa: E731
        log(f"context {ctx}: step reads {step_bytes / 1e9:.3f} GB; best compiled PyTorch {fmt(t_best)}; "
            f"best PyTorch static cache + CUDAGraph {fmt(t_graph)}; best PyTorch {fmt(min(measured) if measured else None)}")
        results.setdefault("best_compiled_torch_ms", {})[str(ctx)] = t_best
        results.setdefault("best_torch_graph_ms", {})[str(ctx)] = t_graph
    shared.clear()
    gc.collect()
    torch.cuda.empty_cache()
    # Prefill of 512 tokens, weights resident; then with paging at 25 % of the weights.
    if "prefill512" not in wanted:
        finish()
        return
    P = 512
    m = P + T
    t_pt = None
    if keep("PyTorch eager"):
        with torch.no_grad(), attention(model, "sdpa"):
            pre = Prefill(model, cfg, m)
            ids = torch.randint(0, cfg.vocab_size, (1, P), device="cuda")
            t_pt = median_ms(lambda: pre(ids), 10)
    prefill_arms = tuple(a for a in (
        ("ORT + CudaEp, weights resident", {}),
        ("ORT + CudaEp, weights resident, fusion=off", {"fusion": "off"}),
        ("ORT + CudaEp, paging=auto, weight_budget_bytes = 25 % of the weights (the rest paged)",
         {"paging": "auto", "weight_budget_bytes": weight_bytes // 4}),
        ("ORT + CudaEp, paging=on (every weight paged)", {"paging": "on"})) if keep(a[0]))
    if prefill_arms:
        path = make_prefill_only(args, cfg, model, P, m)
        prompt = np.random.default_rng(3).integers(0, cfg.vocab_size, size=(1, P), dtype=np.int64)
        h2d = pinned_h2d_bytes_per_s()
        log(f"pinned host-to-device copies (PyTorch, 256 MiB): {h2d / 1e9:.1f} GB/s")
        results["pinned_h2d_gbps"] = h2d / 1e9
    for label, opts in prefill_arms:
        try:
            rows.append(ort_prefill_row(runner, cfg, path, m, prompt, label, opts, f"prefill {P} tokens", h2d,
                                        weight_bytes, args.lib, vs_torch=lambda t: t_pt / t if t_pt is not None else None))
        except Exception as e:
            log(f"ORT prefill ({label}) failed: {str(e)[:600]}")
    if t_pt is not None:
        rows.append(dict(row=f"prefill {P} tokens", arm="PyTorch eager", ms=t_pt, tokens_per_s=P / (t_pt * 1e-3)))
    compiled = compiled_prefill_arms(args, cfg, model, P, m, keep, results)
    for label, ms in compiled:
        rows.append(dict(row=f"prefill {P} tokens", arm=label, ms=ms, tokens_per_s=P / (ms * 1e-3)))
    best = min((ms for _, ms in compiled if ms == ms), default=None)
    results.setdefault("best_compiled_torch_prefill_ms", {})[str(P)] = best
    for r in rows:  # the headline ratio, as the decode rows': the time over the fastest compiled arm's
        if best and r["row"] == f"prefill {P} tokens" and r["arm"].startswith("ORT"):
            r["vs_best_torch"] = r["ms"] / best
    finish()


def compiled_prefill_arms(args, cfg, model, P, m, keep, results):
    """The compiled PyTorch prefill arms that --arms keeps: FastLlama at cache size m over a
    random P-token prompt (static ids [1, P] and positions [P]), returning float32 logits of every
    position, under torch.compile(fullgraph=True) in each mode of --torch-prefill-modes. Each is
    checked against transformers' eager forward of the same prompt before it is timed
    (median_ms of 10 after 3); a failed check or compile is logged and its ms is NaN. Details go
    to results["torch_prefill"]. Returns [(label, ms)]."""
    modes = [s.strip() for s in args.torch_prefill_modes.split(",") if s.strip()]
    arms = [(mode, FAST_LABEL.format(mode=mode)) for mode in modes if keep(FAST_LABEL.format(mode=mode))]
    if not arms:
        return []
    info = results.setdefault("torch_prefill", {}).setdefault(str(P), {})
    ids = torch.from_numpy(np.random.default_rng(args.seed + 3).integers(0, cfg.vocab_size, size=(1, P))).cuda()
    pos = torch.arange(P, device="cuda")
    timed = []
    try:
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits[0, -1].float()
        fast = FastLlama(fast_weights(model), cfg, m, *rope_tables(model, cfg, m))
        mark_static(ids, pos, *fast.buffers())
    except Exception:
        log(f"prefill {P}: the gpt-fast-style model failed; its rows are NaN:\n{traceback.format_exc()[-3000:]}")
        return [(label, float("nan")) for _, label in arms]
    for mode, label in arms:
        ms = float("nan")
        try:
            torch._dynamo.reset()
            step = torch.compile(lambda i, p: fast(i, p).float(), mode=mode, fullgraph=True)
            with torch.no_grad():
                t0 = time.perf_counter()
                got = step(ids, pos)[0, -1]
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                d = float((got - want).abs().max())
                top = float(want.abs().max())
                a, b = int(got.argmax()), int(want.argmax())
                tie = a == b or at_tie(want, a, b, d)
                ok = d == d and d <= 0.1 * top and tie
                log(f"prefill {P}: {label}: first call (compiling) {first:.1f} s; last position's logits against "
                    f"transformers' eager forward: max |diff| {d:.4f} (max |logit| {top:.3f}, bound 0.1x), argmax "
                    f"{'the same' if a == b else 'differs at a tie' if tie else 'DIFFERS'}")
                info[label] = dict(compile_s=first, max_abs_diff=d, max_abs_logit=top, argmax_same=a == b, ok=ok)
                if ok:
                    ms = median_ms(lambda: step(ids, pos), 10)
                    info[label]["ms"] = ms
                else:
                    log(f"!!!!! prefill {P}: {label} FAILS its check: NaN, not timed !!!!!")
        except Exception:
            log(f"prefill {P}: {label} failed:\n{traceback.format_exc()[-3000:]}")
            info[label] = dict(error=traceback.format_exc()[-600:])
        finally:
            forget_compiled()
        timed.append((label, ms))
    del fast
    forget_compiled()
    return timed


def ort_prefill_row(runner, cfg, path, m, prompt, label, opts, row_name, h2d, model_bytes, lib, vs_torch=None,
                    **decoder):
    """One ORT prefill arm: the prefill graph at path (cache size m) with the CudaEp options opts,
    the prompt run 10 times after 2 (median_ms), the logits left in device memory. Returns its row
    (row_name, label, ms, tokens_per_s; vs_torch(ms) when given; with paging in opts, the bytes
    paged per run from cudaep's counters, the link bound at h2d bytes/s and the share of it,
    model_bytes being the model's weights). decoder: OrtDecoder's further arguments (kv_type,
    fallback). Exceptions are the caller's to log."""
    P = prompt.shape[1]
    d = OrtDecoder(runner, cfg, path, None, m, False, prefill_options=opts, **decoder)
    calls = [0]
    # The logits stay in device memory, as PyTorch's do: their copy to the host (float32
    # [1, 512, vocab], 4.5-4.9 ms into pageable memory) is no part of the prefill's work.
    logits = runner.device_value((1, P, cfg.vocab_size), FLOAT32)

    def run():
        calls[0] += 1
        d.run_prefill(prompt, logits)

    before = ort_stats(lib)
    t = median_ms(run, 10, warm=2)
    after = ort_stats(lib)
    row = dict(row=row_name, arm=label, ms=t, tokens_per_s=P / (t * 1e-3))
    if vs_torch is not None:
        row["vs_torch"] = vs_torch(t)
    if opts.get("paging") and after is not None and before is not None:
        paged = (after.paged_bytes - before.paged_bytes) / calls[0]
        bound = paged / h2d * 1e3
        row.update(paged_bytes_per_run=paged, link_bound_ms=bound, of_link_bound=bound / t)
        log(f"{row_name} ({label}): {paged / 1e9:.3f} GB paged per run of {model_bytes / 1e9:.3f} GB, "
            f"{bound:.2f} ms at the pinned rate: {t:.2f} ms is {bound / t:.3f} of the link bound")
    if not opts.get("paging"):
        device_busy_ms(run, 3)  # logs the top kernels
    return row


def host_breakdown(runner, cfg, path, m, ctx, label, results, prefix, n=30):
    """Where the host time of an enable_cuda_graph=1 decode step goes, from ONNX Runtime's own
    profiler: a decode session like the benchmarked one with profiling on, the same two bindings
    swapped, n steps after a warm-up; the medians per step of the wall time of
    run_with_iobinding (Python), ORT's model_run event and the CudaEp nodes' *_kernel_time
    events (the fused partition node is named CudaEp_...). Logged and stored in
    results["host_breakdown"][ctx]; any failure is logged, never fatal."""
    try:
        d = OrtDecoder(runner, cfg, None, path, m, True, decode_profile=prefix)
        try:
            d.fill_random(7)
        except Exception:  # timing only: the contents do not change the work
            pass
        ids = np.array([[5]], dtype=np.int64)
        pos = np.array([ctx], dtype=np.int64)
        step = d.swapped_steps(ids, pos)
        for _ in range(6):  # the first two capture the graphs
            step()
        wall = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            wall.append((time.perf_counter() - t0) * 1e3)
        trace_path = d.decode.end_profiling()
        with open(trace_path) as f:
            trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        runs = sorted((e for e in events if e.get("name") == "model_run" and "dur" in e), key=lambda e: e["ts"])[-n:]
        kernels = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")
                   and (str(e.get("args", {}).get("provider", "")) == "CudaEp" or str(e["name"]).startswith("CudaEp"))]
        if len(runs) < n or not kernels:
            raise RuntimeError(f"the trace {trace_path} has {len(runs)} model_run events of {n} and "
                               f"{len(kernels)} CudaEp kernel_time events")
        # A step's kernel time: its CudaEp nodes' events within its model_run (µs in the trace).
        kt = [sum(e["dur"] for e in kernels if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]) / 1e3 for r in runs]
        med = lambda v: float(np.median(v))  # noqa: E731
        w, mr, kn = med(wall), med([r["dur"] / 1e3 for r in runs]), med(kt)
        gpu = results.get("host_outside_gpu", {}).get(str(ctx), {}).get(label, {}).get("gpu_ms")
        busy = f", {gpu:.3f} ms of GPU work per step" if gpu is not None else ""
        log(f"context {ctx}: host breakdown ({label}, ORT profiler on, medians of {n} steps): run_with_iobinding "
            f"{w:.3f} ms wall, model_run {mr:.3f} ms, CudaEp kernel_time {kn:.3f} ms. "
            f"wall - model_run = {w - mr:.3f} ms in Python and the binding; "
            f"model_run - kernel_time = {mr - kn:.3f} ms in ORT's executor and copies (the logits to the host, "
            f"which waits for the step's GPU work{busy}); kernel_time = {kn:.3f} ms in CudaEp's Compute (it only "
            f"queues the graph replay, plus the input copies)")
        results.setdefault("host_breakdown", {})[str(ctx)] = dict(
            arm=label, steps=n, wall_ms=w, model_run_ms=mr, kernel_time_ms=kn, python_binding_ms=w - mr,
            ort_executor_copies_ms=mr - kn, gpu_busy_ms=gpu, trace=trace_path,
            kernel_events=sorted({e["name"] for e in kernels})[:8])
        del d, step
    except Exception as e:  # a diagnostic: its absence is reported, not fatal
        log(f"(host breakdown at context {ctx} not measured: {str(e)[:300]})")


def report(rows, results):
    results["bench"] = rows
    log("\n| row | arm | ms | bytes/s over 4.8 TB/s | over best compiled PyTorch | over PyTorch static cache + CUDAGraph "
        "| tokens/s | over best int4 PyTorch | over best bf16 compiled PyTorch |")
    log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        f = lambda k, fmt: format(r[k], fmt) if r.get(k) is not None else ""  # noqa: E731
        log(f"| {r['row']} | {r['arm']} | {r['ms']:.3f} | {f('bw_eff', '.3f')} | {f('vs_best_torch', '.3f')} | "
            f"{f('vs_torch_graph', '.3f')} | {f('tokens_per_s', '.0f')} | {f('vs_best_int4_torch', '.3f')} | "
            f"{f('vs_best_bf16_torch', '.3f')} |")


def make_decode_only(args, cfg, model, m):
    d = os.path.join(args.work, f"decode_1_{m}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    hd = cfg.hidden_size // cfg.num_attention_heads
    kv = [torch.zeros(1, cfg.num_key_value_heads, m, hd, dtype=torch.bfloat16, device="cuda")
          for _ in range(2 * cfg.num_hidden_layers)]
    inputs = (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"), *kv)
    secs, how = export(Decode(model, cfg, m), inputs, ["input_ids", "cache_position"] + kv_names(cfg, "past"),
                       ["logits"] + kv_names(cfg, "present"), path, args.exporter)
    log(f"exported decode_1_{m} with {how} in {secs:.1f} s")
    return path


def make_prefill_only(args, cfg, model, p, m):
    d = os.path.join(args.work, f"prefill_{p}_{m}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    secs, how = export(Prefill(model, cfg, m), (torch.zeros(1, p, dtype=torch.long, device="cuda"),), ["input_ids"],
                       ["logits"] + kv_names(cfg, "present"), path, args.exporter)
    log(f"exported prefill_{p}_{m} with {how} in {secs:.1f} s")
    return path


if __name__ == "__main__":
    sys.exit(main())
