#!/usr/bin/env python3
"""gen_decoder.py OUTDIR - write a tiny Llama-style decoder for ort_host's `decoder` case, in two
forms with the same weights: plain ONNX (OUTDIR/decoder.onnx, weights in decoder.weights.bin)
and the form ONNX Runtime's transformer optimizer makes of such an export, with contrib ops
(OUTDIR/decoder_contrib.onnx, weights in decoder_contrib.weights.bin):
SimplifiedLayerNormalization / com.microsoft SkipSimplifiedLayerNormalization for the RMSNorms
and residuals, and com.microsoft GroupQueryAttention with the rotary embedding inside. The
contrib form comes in two int4 weight-only forms too, as ORT's quantizer writes them: every
projection a com.microsoft MatMulNBits (block 32), symmetric (OUTDIR/decoder_int4_sym.onnx) and
with packed zero points (OUTDIR/decoder_int4_asym.onnx), weights in decoder_int4_*.weights.bin
(ort_host's `nbits` case runs them).

The architecture of the decoders people serve, at toy size: token embedding; per layer RMSNorm,
grouped-query attention with rotary position embeddings and a key/value cache, and a SiLU-gated
MLP, each with a residual; a final RMSNorm and the LM head. Plain ONNX operators only (opset
17), written with the protobuf helpers of gen_models.py (standard library only).

  inputs   input_ids int64 [1, S], position_ids int64 [1, S],
           attn_bias float [1, 1, S, P+S] (0 where a query may attend, -1e9 elsewhere),
           past_key_<l>, past_value_<l> float [1, KV_HEADS, P, HEAD_DIM] for each layer l
           (the contrib form takes seqlens_k int32 [1] = P+S-1 and total_sequence_length
           int32 [] = P+S instead of position_ids and attn_bias)
  outputs  logits float [1, S, VOCAB],
           present_key_<l>, present_value_<l> float [1, KV_HEADS, P+S, HEAD_DIM]

ort_host's case_decoder.c uses the same sizes (decoder.h).
"""
import math
import os
import random
import struct
import sys

from gen_models import (attr_int, f_bytes, f_varint, model, node, pack_floats, tensor_external, value_info,
                        write)

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, MAX_POS = 128, 64, 4, 2, 16, 128, 2, 64
EPS, THETA = 1e-5, 10000.0
INT64 = 7
INT32 = 6
ATTR_INTS = 7
MS = "com.microsoft"


def attr_ints(name, xs):
    return f_bytes(1, name) + b"".join(f_varint(8, x) for x in xs) + f_varint(20, ATTR_INTS)


def tensor_int64(name, values, dims=None):
    dims = [len(values)] if dims is None else dims
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, INT64) + f_bytes(8, name)
    return b + f_bytes(9, struct.pack("<%dq" % len(values), *values))


def tensor_float(name, values, dims):
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, 1) + f_bytes(8, name)
    return b + f_bytes(9, pack_floats(values))


class Graph:
    """Collects nodes, inline constants and external-data weights."""

    def __init__(self, data="decoder.weights.bin"):
        self.nodes, self.inits, self.blob, self.n, self.data = [], [], bytearray(), 0, data

    def op(self, op, inputs, attrs=(), outputs=None, domain=None, n_out=1):
        self.n += 1
        outs = outputs or [f"{op.lower()}_{self.n}_{i}" for i in range(n_out)]
        b = node(op, inputs, outs, f"{op}_{self.n}", attrs)
        if domain:
            b += f_bytes(7, domain)  # NodeProto.domain
        self.nodes.append(b)
        return outs[0] if len(outs) == 1 else outs

    def weight(self, name, dims, values):
        while len(self.blob) % 64:
            self.blob += b"\0"
        self.inits.append(tensor_external(name, dims, self.data, len(self.blob), 4 * len(values)))
        self.blob += pack_floats(values)
        return name

    def raw_weight(self, name, dims, elem, data):
        """An external-data weight of another element type, data its little-endian bytes."""
        while len(self.blob) % 64:
            self.blob += b"\0"
        self.inits.append(tensor_external(name, dims, self.data, len(self.blob), len(data), elem))
        self.blob += data
        return name

    def ints(self, name, values):
        self.inits.append(tensor_int64(name, values))
        return name

    def scalar(self, name, x):
        self.inits.append(tensor_float(name, [x], []))
        return name


def rmsnorm(g, x, gamma):
    sq = g.op("Mul", [x, x])
    ms = g.op("ReduceMean", [sq], [attr_ints("axes", [-1]), attr_int("keepdims", 1)])
    inv = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [ms, "eps"])])])
    return g.op("Mul", [g.op("Mul", [x, inv]), gamma])


def rotate(g, t, cos, sin):
    """t * cos + rotate_half(t) * sin over the last axis (HEAD_DIM)."""
    lo = g.op("Slice", [t, "zero", "half", "axis3"])
    hi = g.op("Slice", [t, "half", "dim", "axis3"])
    rot = g.op("Concat", [g.op("Neg", [hi]), lo], [attr_int("axis", 3)])
    return g.op("Add", [g.op("Mul", [t, cos]), g.op("Mul", [rot, sin])])


def heads(g, x, w, n):
    """x [1, S, HIDDEN] @ w -> [1, n, S, HEAD_DIM]."""
    y = g.op("Reshape", [g.op("MatMul", [x, w]), g.ints(f"shape_{g.n}", [0, 0, n, HEAD_DIM])])
    return g.op("Transpose", [y], [attr_ints("perm", [0, 2, 1, 3])])


def build(rng):
    g = Graph()

    def rand(name, dims, scale):
        return g.weight(name, dims, [rng.uniform(-scale, scale) for _ in range(math.prod(dims))])

    def ones(name, dims):
        return g.weight(name, dims, [1.0 + rng.uniform(-0.1, 0.1) for _ in range(math.prod(dims))])

    g.scalar("eps", EPS)
    g.scalar("scale", 1.0 / math.sqrt(HEAD_DIM))
    g.ints("zero", [0])
    g.ints("half", [HEAD_DIM // 2])
    g.ints("dim", [HEAD_DIM])
    g.ints("axis3", [3])
    g.ints("group", [1, 1, HEADS // KV_HEADS, 1, 1])
    g.ints("merged", [0, HEADS, -1, HEAD_DIM])
    g.ints("flat", [0, 0, HEADS * HEAD_DIM])
    inv_freq = [THETA ** (-2 * i / HEAD_DIM) for i in range(HEAD_DIM // 2)]
    angles = [[p * f for f in inv_freq] * 2 for p in range(MAX_POS)]
    g.weight("cos_table", [MAX_POS, HEAD_DIM], [math.cos(a) for row in angles for a in row])
    g.weight("sin_table", [MAX_POS, HEAD_DIM], [math.sin(a) for row in angles for a in row])
    rand("embed", [VOCAB, HIDDEN], 1.0)

    x = g.op("Gather", ["embed", "input_ids"], [attr_int("axis", 0)])
    cos = g.op("Unsqueeze", [g.op("Gather", ["cos_table", "position_ids"], [attr_int("axis", 0)]), g.ints("ax1", [1])])
    sin = g.op("Unsqueeze", [g.op("Gather", ["sin_table", "position_ids"], [attr_int("axis", 0)]), "ax1"])
    present = []
    s = 1.0 / math.sqrt(HIDDEN)
    for l in range(LAYERS):
        h = rmsnorm(g, x, ones(f"attn_norm_{l}", [HIDDEN]))
        q = rotate(g, heads(g, h, rand(f"wq_{l}", [HIDDEN, HEADS * HEAD_DIM], s), HEADS), cos, sin)
        k = rotate(g, heads(g, h, rand(f"wk_{l}", [HIDDEN, KV_HEADS * HEAD_DIM], s), KV_HEADS), cos, sin)
        v = heads(g, h, rand(f"wv_{l}", [HIDDEN, KV_HEADS * HEAD_DIM], s), KV_HEADS)
        pk = g.op("Concat", [f"past_key_{l}", k], [attr_int("axis", 2)], [f"present_key_{l}"])
        pv = g.op("Concat", [f"past_value_{l}", v], [attr_int("axis", 2)], [f"present_value_{l}"])
        present += [pk, pv]

        def expand(t):  # grouped-query attention: each KV head serves HEADS / KV_HEADS heads
            t = g.op("Expand", [g.op("Unsqueeze", [t, g.ints(f"ax2_{g.n}", [2])]), "group"])
            return g.op("Reshape", [t, "merged"])

        kt = g.op("Transpose", [expand(pk)], [attr_ints("perm", [0, 1, 3, 2])])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, kt]), "scale"]), "attn_bias"])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], [attr_int("axis", -1)]), expand(pv)])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], [attr_ints("perm", [0, 2, 1, 3])]), "flat"])
        x = g.op("Add", [x, g.op("MatMul", [ctx, rand(f"wo_{l}", [HEADS * HEAD_DIM, HIDDEN], s)])])
        h = rmsnorm(g, x, ones(f"mlp_norm_{l}", [HIDDEN]))
        gate = g.op("MatMul", [h, rand(f"wg_{l}", [HIDDEN, INTER], s)])
        up = g.op("MatMul", [h, rand(f"wu_{l}", [HIDDEN, INTER], s)])
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        x = g.op("Add", [x, g.op("MatMul", [act, rand(f"wd_{l}", [INTER, HIDDEN], 1.0 / math.sqrt(INTER))])])
    h = rmsnorm(g, x, ones("final_norm", [HIDDEN]))
    g.op("MatMul", [h, rand("lm_head", [HIDDEN, VOCAB], s)], outputs=["logits"])

    inputs = [value_info("input_ids", [1, "seq"], INT64), value_info("position_ids", [1, "seq"], INT64),
              value_info("attn_bias", [1, 1, "seq", "total"])]
    outputs = [value_info("logits", [1, "seq", VOCAB])]
    for l in range(LAYERS):
        for kind in ("key", "value"):
            inputs.append(value_info(f"past_{kind}_{l}", [1, KV_HEADS, "past", HEAD_DIM]))
            outputs.append(value_info(f"present_{kind}_{l}", [1, KV_HEADS, "total", HEAD_DIM]))
    return g, model("decoder", g.nodes, g.inits, inputs, outputs)


def attr_float_(name, x):
    return f_bytes(1, name) + key_float(2, x) + f_varint(20, 1)


def key_float(field, x):
    return f_varint_key(field, 5) + struct.pack("<f", x)


def f_varint_key(field, wire):
    from gen_models import key

    return key(field, wire)


INT4_BLOCK = 32  # the block size ORT's quantizer and model builder use by default
UINT8 = 2


def quantise_int4(w, k, n, asym):
    """w [k, n] (x @ w) as MatMulNBits takes it: B uint8 [n, k_blocks, 16] (codes of W's column
    along k, the first in the low nibble), scales float [n, k_blocks] and, when asym, packed
    zero points uint8 [n, ceil(k_blocks / 2)]. Symmetric: scale = max|w| / 7, codes
    round(w / scale) + 8 clamped to [0, 15] (the zero point ORT assumes when there is none).
    Asymmetric: the block's [min, max] (widened to hold 0) over 15 steps, zero point
    round(-min / scale)."""
    kb = (k + INT4_BLOCK - 1) // INT4_BLOCK
    b, scales, zps = bytearray(), [], []
    for j in range(n):
        col = [w[i * n + j] for i in range(k)]
        row_zp = []
        for blk in range(kb):
            vals = col[blk * INT4_BLOCK:(blk + 1) * INT4_BLOCK]
            if asym:
                lo, hi = min(min(vals), 0.0), max(max(vals), 0.0)
                scale = (hi - lo) / 15 or 1.0
                zp = min(15, max(0, round(-lo / scale)))
            else:
                scale = max(abs(v) for v in vals) / 7 or 1.0
                zp = 8
            scale = struct.unpack("<f", struct.pack("<f", scale))[0]
            codes = [min(15, max(0, round(v / scale) + zp)) for v in vals]
            codes += [zp] * (INT4_BLOCK - len(codes))  # K padding (none at these sizes)
            b += bytes(codes[i] | codes[i + 1] << 4 for i in range(0, INT4_BLOCK, 2))
            scales.append(scale)
            row_zp.append(zp)
        row_zp += [0] * (len(row_zp) % 2)
        zps += [row_zp[i] | row_zp[i + 1] << 4 for i in range(0, len(row_zp), 2)]
    return kb, bytes(b), scales, bytes(zps)


def build_contrib(rng, int4=None):
    """The decoder as ORT's transformer optimizer leaves a Llama export: the same weights as
    build (the same random draws, in the same order), the RMSNorms and residual adds fused into
    (Skip)SimplifiedLayerNormalization, attention with rotary inside GroupQueryAttention.

    int4 "sym" or "asym" writes the form ORT's int4 quantizer makes of it: every projection
    (q, k, v, o, gate, up, down and the LM head) a com.microsoft MatMulNBits over the same
    weights quantised in blocks of 32 (quantise_int4), with packed zero points when "asym"."""
    data = "decoder_contrib.weights.bin" if int4 is None else f"decoder_int4_{int4}.weights.bin"
    g = Graph(data)

    def rand(name, dims, scale):
        values = [rng.uniform(-scale, scale) for _ in range(math.prod(dims))]
        if int4 is None or not name.startswith(("w", "lm_head")):
            return g.weight(name, dims, values)
        k, n = dims
        kb, b, scales, zps = quantise_int4(values, k, n, int4 == "asym")
        inputs = [g.raw_weight(f"{name}_q", [n, kb, INT4_BLOCK // 2], UINT8, b),
                  g.weight(f"{name}_scales", [n, kb], scales)]
        if int4 == "asym":
            inputs.append(g.raw_weight(f"{name}_zp", [n, (kb + 1) // 2], UINT8, zps))
        return inputs, [attr_int("K", k), attr_int("N", n), attr_int("bits", 4), attr_int("block_size", INT4_BLOCK)]

    def matmul(x, w, outputs=None):
        if isinstance(w, str):
            return g.op("MatMul", [x, w], outputs=outputs)
        inputs, attrs = w
        return g.op("MatMulNBits", [x] + inputs, attrs, outputs=outputs, domain=MS)

    def ones(name, dims):
        return g.weight(name, dims, [1.0 + rng.uniform(-0.1, 0.1) for _ in range(math.prod(dims))])

    inv_freq = [THETA ** (-2 * i / HEAD_DIM) for i in range(HEAD_DIM // 2)]
    g.weight("cos_cache", [MAX_POS, HEAD_DIM // 2], [math.cos(p * f) for p in range(MAX_POS) for f in inv_freq])
    g.weight("sin_cache", [MAX_POS, HEAD_DIM // 2], [math.sin(p * f) for p in range(MAX_POS) for f in inv_freq])
    rand("embed", [VOCAB, HIDDEN], 1.0)
    eps = attr_float_("epsilon", EPS)
    x = g.op("Gather", ["embed", "input_ids"], [attr_int("axis", 0)])
    s = 1.0 / math.sqrt(HIDDEN)
    residual = x
    h = None
    for l in range(LAYERS):
        gamma = ones(f"attn_norm_{l}", [HIDDEN])
        if l == 0:
            h = g.op("SimplifiedLayerNormalization", [x, gamma], [eps, attr_int("axis", -1)])
        else:
            h, residual = g.op("SkipSimplifiedLayerNormalization", [x, residual, gamma], [eps], domain=MS, n_out=4)[0::3]
        q = matmul(h, rand(f"wq_{l}", [HIDDEN, HEADS * HEAD_DIM], s))
        k = matmul(h, rand(f"wk_{l}", [HIDDEN, KV_HEADS * HEAD_DIM], s))
        v = matmul(h, rand(f"wv_{l}", [HIDDEN, KV_HEADS * HEAD_DIM], s))
        attn = g.op("GroupQueryAttention",
                    [q, k, v, f"past_key_{l}", f"past_value_{l}", "seqlens_k", "total_sequence_length",
                     "cos_cache", "sin_cache"],
                    [attr_int("num_heads", HEADS), attr_int("kv_num_heads", KV_HEADS), attr_int("do_rotary", 1)],
                    outputs=[f"attn_{l}", f"present_key_{l}", f"present_value_{l}"], domain=MS)[0]
        x = matmul(attn, rand(f"wo_{l}", [HEADS * HEAD_DIM, HIDDEN], s))
        h, residual = g.op("SkipSimplifiedLayerNormalization", [x, residual, ones(f"mlp_norm_{l}", [HIDDEN])], [eps],
                           domain=MS, n_out=4)[0::3]
        gate = matmul(h, rand(f"wg_{l}", [HIDDEN, INTER], s))
        up = matmul(h, rand(f"wu_{l}", [HIDDEN, INTER], s))
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        x = matmul(act, rand(f"wd_{l}", [INTER, HIDDEN], 1.0 / math.sqrt(INTER)))
    h = g.op("SkipSimplifiedLayerNormalization", [x, residual, ones("final_norm", [HIDDEN])], [eps], domain=MS,
             n_out=4)[0]
    matmul(h, rand("lm_head", [HIDDEN, VOCAB], s), outputs=["logits"])

    inputs = [value_info("input_ids", [1, "seq"], INT64), value_info("seqlens_k", [1], INT32),
              value_info("total_sequence_length", [], INT32)]
    outputs = [value_info("logits", [1, "seq", VOCAB])]
    for l in range(LAYERS):
        for kind in ("key", "value"):
            inputs.append(value_info(f"past_{kind}_{l}", [1, KV_HEADS, "past", HEAD_DIM]))
            outputs.append(value_info(f"present_{kind}_{l}", [1, KV_HEADS, "total", HEAD_DIM]))
    m = model("decoder_contrib" if int4 is None else f"decoder_int4_{int4}", g.nodes, g.inits, inputs, outputs)
    return g, m + f_bytes(8, f_bytes(1, MS) + f_varint(2, 1))  # opset_import com.microsoft 1


def write_decoder(outdir):
    g, m = build(random.Random(20240604))
    write(os.path.join(outdir, "decoder.weights.bin"), bytes(g.blob))
    write(os.path.join(outdir, "decoder.onnx"), m)
    g, m = build_contrib(random.Random(20240604))
    write(os.path.join(outdir, "decoder_contrib.weights.bin"), bytes(g.blob))
    write(os.path.join(outdir, "decoder_contrib.onnx"), m)
    for int4 in ("sym", "asym"):
        g, m = build_contrib(random.Random(20240604), int4)
        write(os.path.join(outdir, f"decoder_int4_{int4}.weights.bin"), bytes(g.blob))
        write(os.path.join(outdir, f"decoder_int4_{int4}.onnx"), m)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    write_decoder(sys.argv[1])
