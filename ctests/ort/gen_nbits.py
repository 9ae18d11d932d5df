#!/usr/bin/env python3
"""gen_nbits.py OUTDIR - write the com.microsoft.MatMulNBits models of ort_host's `nbits` case
into OUTDIR/nbits/ (gen_models.py calls write_nbits; standard library only, like the others).

MatMulNBits (ONNX Runtime's contrib operator, docs/ContribOperators.md there) computes
Y = A . dequant(B)^T (+ bias), with dequant(B)[n][k] = (q[n][k] - zero_point[n][b]) * scale[n][b]
for block b = k / block_size along K. The layout written here is the contract ORT's CPU kernel
reads (contrib_ops/cpu/quantization/matmul_nbits.cc and matmul_nbits_helper.h):

  B            uint8 [N, k_blocks, block_size * bits / 8], k_blocks = ceil(K / block_size); the
               codes of one block packed along K, the first in the low bits of a byte (for 4
               bits: element 2i in the low nibble of byte i, 2i+1 in the high nibble). When K is
               not a multiple of block_size the last block is padded: its codes past K are
               written here as random non-zero codes, which a kernel must ignore.
  scales       A's type, [N, k_blocks], or flattened [N * k_blocks] (older models)
  zero_points  optional; packed uint8 [N, ceil(k_blocks * bits / 8)] with B's packing (flattened
               [N * that] too; an odd k_blocks leaves a padding nibble, written non-zero here),
               or unpacked in A's type [N, k_blocks] (fractional values allowed); absent means
               2^(bits - 1)
  g_idx        optional int32 [K] (deprecated); bias optional [N] in A's type

Each model is one MatMulNBits node named "weight_only_matmul" with its weights as initializers, A of rank 2
[M, K] or rank 3 [B, S, K] (symbolic), in OUTDIR/nbits/<name>/model.onnx, with data sets
test_data_set_<i>/ holding

  input_0.pb      A (M = 1, 3 and 17 rows; rank 3: [1,1], [1,17] and [2,3] leading dims)
  exact.pb        the exact Y, computed here in double precision from the values as stored
  magnitude.pb    per element of Y: sum_k |a_k| * (|q_k| + |zero_point|) * |scale| + |bias| (double),
                  the scale of what a float32 accumulation can get wrong (case_nbits.c turns it
                  into a tolerance); it bounds sum_k |a_k * w_k| for either way of dequantising
  int8_bound.pb   (accuracy_level 4 only) per element of Y: sum_k (max_block |a| / 254) *
                  (|q_k| + |zero_point|) * |scale|, what quantising A to int8 per block (the
                  liberty accuracy_level 4 gives) can move Y by
  swapped.pb      (4 bits, the M = 3 set only) Y as a kernel reading each byte high nibble first
                  would compute it: the case's negative control (its bound must tell it apart)

Besides the valid 4-bit models, the set has an 8-bit one (CudaEp may take it or not), models
CudaEp must refuse that ORT's CPU EP runs (bits 2, weight_prepacked=1, a g_idx input), and
bfloat16 models, which ORT's CPU EP has no kernel for (it registers MatMulNBits for float and
float16 only): each of those has a float32 twin with the same values, <name>_f32, that the case
uses as the CPU reference.
"""
import math
import os
import random
import struct
import sys

from gen_models import IR_VERSION, attr_int, f_bytes, f_varint, node, value_info, write

FLOAT, UINT8, INT32, FLOAT16, DOUBLE, BFLOAT16 = 1, 2, 6, 10, 11, 16
MS = "com.microsoft"
NODE_NAME = "weight_only_matmul"  # case_nbits.c watches for CudaEp's decline of this node


# --- element types --------------------------------------------------------------------------


def to_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def to_f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def bf16_bits(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest, ties to even


def to_bf16(x):
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


ROUND = {FLOAT: to_f32, FLOAT16: to_f16, BFLOAT16: to_bf16, DOUBLE: float}


def pack_values(elem, values):
    if elem == FLOAT:
        return struct.pack("<%df" % len(values), *values)
    if elem == FLOAT16:
        return struct.pack("<%de" % len(values), *values)
    if elem == BFLOAT16:
        return struct.pack("<%dH" % len(values), *[bf16_bits(v) for v in values])
    if elem == DOUBLE:
        return struct.pack("<%dd" % len(values), *values)
    if elem == INT32:
        return struct.pack("<%di" % len(values), *values)
    if elem == UINT8:
        return bytes(values)
    raise ValueError(elem)


def tensor(name, dims, elem, values):
    """TensorProto with raw_data (an initializer, or a .pb file of a data set)."""
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, elem) + f_bytes(8, name)
    return b + f_bytes(9, pack_values(elem, values))


# --- packing --------------------------------------------------------------------------------


def pack_codes(codes, bits):
    """Codes (each < 2^bits) packed into bytes, the first in the low bits; bits divides 8."""
    per = 8 // bits
    out = []
    for i in range(0, len(codes), per):
        byte = 0
        for j, c in enumerate(codes[i:i + per]):
            byte |= c << (j * bits)
        out.append(byte)
    return out


class Spec:
    """One MatMulNBits model: the attributes and inputs it has."""

    def __init__(self, name, elem=FLOAT, K=64, N=16, block=32, bits=4, zp=None, scales_1d=False, zp_1d=False,
                 bias=False, rank=2, level=None, prepacked=None, g_idx=False):
        self.name, self.elem, self.K, self.N, self.block, self.bits = name, elem, K, N, block, bits
        self.zp, self.scales_1d, self.zp_1d, self.bias, self.rank = zp, scales_1d, zp_1d, bias, rank
        self.level, self.prepacked, self.g_idx = level, prepacked, g_idx


# The valid models: float32 and float16 A, every block size 16..256, K a multiple of the block
# and not (the last block padded), zero points absent, packed (2-D and flattened) and unpacked,
# scales 2-D and flattened, with and without bias, A of rank 2 and 3, accuracy_level 0, 1 and 4.
# N is odd in some, so no kernel may assume a multiple of anything.
VALID = [
    Spec("f32_b16_k64_sym", K=64, N=24, block=16),
    Spec("f32_b16_k40_zp_pad", K=40, N=9, block=16, zp="packed"),  # 3 blocks: a padding nibble
    Spec("f32_b32_k256_zp_bias", K=256, N=40, block=32, zp="packed", bias=True),
    Spec("f32_b32_k200_zp_pad", K=200, N=33, block=32, zp="packed"),  # 7 blocks, K pads 24
    Spec("f32_b64_k320_uzp_bias", K=320, N=24, block=64, zp="unpacked", bias=True),
    Spec("f32_b128_k384_sym_s1d", K=384, N=16, block=128, scales_1d=True),
    Spec("f32_b128_k100_zp1d_pad", K=100, N=20, block=128, zp="packed", zp_1d=True, scales_1d=True),
    Spec("f32_b256_k512_sym_bias", K=512, N=16, block=256, bias=True),
    Spec("f32_b256_k300_zp_pad", K=300, N=12, block=256, zp="packed"),
    Spec("f32_b32_k96_rank3_bias", K=96, N=24, block=32, bias=True, rank=3),
    Spec("f32_b64_k160_rank3_uzp_pad", K=160, N=17, block=64, zp="unpacked", rank=3),
    Spec("f32_b32_k128_level1", K=128, N=32, block=32, zp="packed", level=1),
    Spec("f32_b32_k128_level4", K=128, N=32, block=32, zp="packed", level=4),
    Spec("f16_b16_k72_zp_bias_pad", elem=FLOAT16, K=72, N=24, block=16, zp="packed", bias=True),
    Spec("f16_b32_k128_sym", elem=FLOAT16, K=128, N=32, block=32),
    Spec("f16_b64_k256_uzp", elem=FLOAT16, K=256, N=40, block=64, zp="unpacked"),
    Spec("f16_b128_k160_zp1d_s1d_pad", elem=FLOAT16, K=160, N=16, block=128, zp="packed", zp_1d=True, scales_1d=True),
    Spec("f16_b256_k256_sym_bias", elem=FLOAT16, K=256, N=24, block=256, bias=True),
    Spec("f16_b32_k64_rank3_zp", elem=FLOAT16, K=64, N=16, block=32, zp="packed", rank=3),
    Spec("bf16_b32_k128_zp_bias", elem=BFLOAT16, K=128, N=24, block=32, zp="packed", bias=True),
    Spec("bf16_b64_k200_sym_pad", elem=BFLOAT16, K=200, N=16, block=64),
    # 8 bits: one byte per code and per packed zero point; CudaEp may take it ("8 if cheap").
    Spec("f32_b32_k96_bits8_zp", K=96, N=16, block=32, bits=8, zp="packed"),
]

# What CudaEp must refuse, naming the reason, while ORT's CPU EP runs the model. Left out because
# ORT itself refuses them (see case_nbits.c's header): bits 3 (the CPU kernel's constructor
# accepts 2, 4 and 8 only), block_size 8 (1.30.0's constructor takes 16 to 256; 1.24.3 fails the
# Run), scales of another type than A (the schema binds both to T1). ORT 1.24.3 refuses
# weight_prepacked itself (no such attribute in its schema): the case skips that model there.
REFUSED = [
    Spec("refuse_bits2", K=64, N=16, block=32, bits=2, zp="packed"),
    Spec("refuse_weight_prepacked", K=64, N=16, block=32, prepacked=1),
    Spec("refuse_g_idx", K=64, N=16, block=32, g_idx=True),
]


def model_bytes(spec, inits, a_dims):
    inputs = ["A", "B", "scales"]
    inputs.append("zero_points" if spec.zp else "")
    inputs.append("g_idx" if spec.g_idx else "")
    inputs.append("bias" if spec.bias else "")
    while inputs[-1] == "":
        inputs.pop()
    attrs = [attr_int("K", spec.K), attr_int("N", spec.N), attr_int("bits", spec.bits),
             attr_int("block_size", spec.block)]
    if spec.level is not None:
        attrs.append(attr_int("accuracy_level", spec.level))
    if spec.prepacked is not None:
        attrs.append(attr_int("weight_prepacked", spec.prepacked))
    nd = node("MatMulNBits", inputs, ["Y"], NODE_NAME, attrs) + f_bytes(7, MS)
    y_dims = a_dims[:-1] + [spec.N]
    g = f_bytes(1, nd) + f_bytes(2, spec.name)
    g += b"".join(f_bytes(5, t) for t in inits)
    g += f_bytes(11, value_info("A", a_dims, spec.elem)) + f_bytes(12, value_info("Y", y_dims, spec.elem))
    opsets = f_bytes(8, f_bytes(1, "") + f_varint(2, 17)) + f_bytes(8, f_bytes(1, MS) + f_varint(2, 1))
    return f_varint(1, IR_VERSION) + f_bytes(2, "cudaep-ctests-ort") + f_bytes(7, g) + opsets


def quantised(spec, rng):
    """Random codes, scales, zero points and bias for spec, rounded to A's type."""
    rnd = ROUND[spec.elem]
    kb = (spec.K + spec.block - 1) // spec.block
    levels = 1 << spec.bits
    # Codes for every position of every block, the padding past K included (random, non-zero:
    # a kernel that reads them into the sum is wrong by far more than any tolerance).
    codes = [[rng.randrange(levels) if k < spec.K else rng.randrange(1, levels) for k in range(kb * spec.block)]
             for _ in range(spec.N)]
    scales = [[rnd(rng.uniform(0.02, 0.12)) for _ in range(kb)] for _ in range(spec.N)]
    if spec.zp == "packed":
        zps = [[rng.randrange(levels) for _ in range(kb)] for _ in range(spec.N)]
    elif spec.zp == "unpacked":
        zps = [[rnd(rng.randrange(levels) + rng.choice((0.0, 0.25, 0.5))) for _ in range(kb)] for _ in range(spec.N)]
    else:
        zps = [[float(levels // 2)] * kb for _ in range(spec.N)]
    bias = [rnd(rng.uniform(-0.5, 0.5)) for _ in range(spec.N)] if spec.bias else None
    return kb, codes, scales, zps, bias


def initializers(spec, elem, kb, codes, scales, zps, bias):
    blob = spec.block * spec.bits // 8
    b = []
    for row in codes:
        b += pack_codes(row, spec.bits)
    inits = [tensor("B", [spec.N, kb, blob], UINT8, b)]
    flat = [s for row in scales for s in row]
    inits.append(tensor("scales", [spec.N * kb] if spec.scales_1d else [spec.N, kb], elem, flat))
    if spec.zp == "packed":
        per = 8 // spec.bits
        width = (kb + per - 1) // per
        packed = []
        for row in zps:
            padded = row + [(1 << spec.bits) - 1] * (width * per - kb)  # padding codes: all ones
            packed += pack_codes(padded, spec.bits)
        inits.append(tensor("zero_points", [spec.N * width] if spec.zp_1d else [spec.N, width], UINT8, packed))
    elif spec.zp == "unpacked":
        inits.append(tensor("zero_points", [spec.N, kb], elem, [z for row in zps for z in row]))
    if spec.g_idx:  # the trivial grouping: element k in block k / block_size
        inits.append(tensor("g_idx", [spec.K], INT32, [k // spec.block for k in range(spec.K)]))
    if bias is not None:
        inits.append(tensor("bias", [spec.N], elem, bias))
    return inits


def data_sets(spec, rng, kb, codes, scales, zps, bias):
    """[(a_dims, a, exact, magnitude, int8_bound, swapped)] for M = 1, 3, 17 rows (swapped: None
    but for the M = 3 set of a 4-bit model)."""
    rnd = ROUND[spec.elem]
    K = spec.K
    # The dequantised weights and the per-weight magnitude bound, row n of B at a time.
    w = [[(codes[n][k] - zps[n][k // spec.block]) * scales[n][k // spec.block] for k in range(K)]
         for n in range(spec.N)]
    # The weights a kernel reading the high nibble first would see (codes 2i and 2i+1 swapped).
    ws = [[(codes[n][k ^ 1] - zps[n][k // spec.block]) * scales[n][k // spec.block] for k in range(K)]
          for n in range(spec.N)] if spec.bits == 4 else None
    wmag = [[(codes[n][k] + abs(zps[n][k // spec.block])) * abs(scales[n][k // spec.block]) for k in range(K)]
            for n in range(spec.N)]
    shapes = [[1, K], [3, K], [17, K]] if spec.rank == 2 else [[1, 1, K], [1, 17, K], [2, 3, K]]
    out = []
    for i, dims in enumerate(shapes):
        rows = math.prod(dims[:-1])
        a = [rnd(rng.uniform(-1.0, 1.0)) for _ in range(rows * K)]
        exact, mag, bound = [], [], []
        swapped = [] if ws is not None and i == 1 else None
        for r in range(rows):
            ar = a[r * K:(r + 1) * K]
            aabs = [abs(x) for x in ar]
            amax = [max(aabs[b * spec.block:(b + 1) * spec.block]) / 254.0 for b in range(kb)]
            ablock = [amax[k // spec.block] for k in range(K)]
            for n in range(spec.N):
                y = math.fsum(map(float.__mul__, ar, w[n]))
                m = math.fsum(map(float.__mul__, aabs, wmag[n]))
                if bias is not None:
                    y += bias[n]
                    m += abs(bias[n])
                exact.append(y)
                mag.append(m)
                bound.append(math.fsum(map(float.__mul__, ablock, wmag[n])))
                if swapped is not None:
                    swapped.append(math.fsum(map(float.__mul__, ar, ws[n])) + (bias[n] if bias is not None else 0.0))
        out.append((dims, a, exact, mag, bound, swapped))
    return out


def write_spec(root, spec, elem=None, name=None, seed_name=None):
    """Writes spec (in A's type elem, under name) with the values seeded by seed_name."""
    elem = elem or spec.elem
    name = name or spec.name
    rng = random.Random("cudaep-nbits-" + (seed_name or name))
    kb, codes, scales, zps, bias = quantised(spec, rng)
    mdir = os.path.join(root, name)
    os.makedirs(mdir, exist_ok=True)
    inits = initializers(spec, elem, kb, codes, scales, zps, bias)
    a_dims = ["M", spec.K] if spec.rank == 2 else ["batch", "seq", spec.K]
    twin = Spec(**{**spec.__dict__, "name": name, "elem": elem})
    write(os.path.join(mdir, "model.onnx"), model_bytes(twin, inits, a_dims))
    for i, (dims, a, exact, mag, bound, swapped) in enumerate(data_sets(spec, rng, kb, codes, scales, zps, bias)):
        ddir = os.path.join(mdir, "test_data_set_%d" % i)
        os.makedirs(ddir, exist_ok=True)
        y_dims = dims[:-1] + [spec.N]
        write(os.path.join(ddir, "input_0.pb"), tensor("A", dims, elem, a))
        write(os.path.join(ddir, "exact.pb"), tensor("Y", y_dims, DOUBLE, exact))
        write(os.path.join(ddir, "magnitude.pb"), tensor("magnitude", y_dims, DOUBLE, mag))
        if spec.level == 4:
            write(os.path.join(ddir, "int8_bound.pb"), tensor("int8_bound", y_dims, DOUBLE, bound))
        if swapped is not None:
            write(os.path.join(ddir, "swapped.pb"), tensor("swapped", y_dims, DOUBLE, swapped))


def write_nbits(outdir):
    root = os.path.join(outdir, "nbits")
    os.makedirs(root, exist_ok=True)
    for spec in VALID + REFUSED:
        write_spec(root, spec)
        if spec.elem == BFLOAT16:  # the float32 twin: the same (bfloat16-exact) values
            write_spec(root, spec, elem=FLOAT, name=spec.name + "_f32", seed_name=spec.name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_nbits(sys.argv[1])
