#!/usr/bin/env python3
"""gen_models.py OUTDIR - write the ONNX models of ort_host's model cases into OUTDIR.

Pure Python 3 standard library: the ONNX protobuf messages are written by hand (field numbers
from onnx/onnx.proto), so no onnx package is needed. Weights come from a seeded generator, so
two runs write identical files (the absolute-path model excepted, which names OUTDIR).

  OUTDIR/mlp.onnx           X[batch,64] -> MatMul+Add -> Relu -> MatMul+Add -> Y[batch,16];
                            W1, B1, W2 in OUTDIR/mlp.weights.bin (external data), B2 inline.
  OUTDIR/deep.onnx          X[batch,64] -> 6 x (MatMul+Add -> Relu) -> Y[batch,64], every
                            weight in OUTDIR/deep.weights.bin (external data): 6 layers of
                            16,640 bytes, 99,840 in all, for paging under a weight budget.
  OUTDIR/decoder.onnx       a tiny Llama-style decoder with a key/value cache (gen_decoder.py),
                            also in contrib-op form and in two int4 (MatMulNBits) forms
  OUTDIR/nbits/             single com.microsoft.MatMulNBits nodes with exact results and error
                            scales per data set, valid and refused (gen_nbits.py)
  OUTDIR/cache.onnx         a static key and value cache updated at one position:
                            present_k[1,2,8,4] = Where(cond[1,1,8,1], new_k[1,2,1,4], past_k[1,2,8,4]),
                            present_v likewise from new_v and past_v, over the same cond, and
                            both = Add(present_k, present_v), which a decoder's attention
                            stands for (it makes the graph one partition)
  OUTDIR/cache_reread.onnx  the key cache's update, then sum = Add(past_k, present_k): past_k is
                            read after the update, so a present_k bound to past_k's memory
                            cannot be written there
  OUTDIR/split.onnx         the same layers with LeakyRelu (not a CudaEp op) in the middle:
                            two CudaEp partitions around one CPU node. Weights inline.
  OUTDIR/misuse/ext_*.onnx  X[2,4] -> MatMul(W[4,3]) -> Y[2,3] with W in external data:
      ext_ok          a valid location (control: must load and compute X @ W)
      ext_past_end    offset + length past the end of the file
      ext_offset_past_end  offset beyond the end of the file
      ext_dotdot      location "../outside.bin" (a real file outside the model's folder)
      ext_absolute    location is the absolute path of OUTDIR/outside.bin
      ext_symlink     location "link.bin", a symlink to ../outside.bin
      ext_size_mismatch  length 40, but a float [4,3] tensor is 48 bytes
      ext_missing     location names a file that does not exist
      ext_directory   location names a directory inside the model's folder
      ext_no_length   no length entry (valid ONNX: the tensor's 48 bytes; must compute X @ W)
      ext_no_length_past_end  no length entry, and the file holds 24 of the 48 bytes
  OUTDIR/misuse/gather_indices.onnx  Y[1,3] = Gather(T[4,3] inline, I[1] int64 input): bad
                            device data (an index outside [-4, 4)) must fail the run
  OUTDIR/weight_reads/      X[1,2048] through MatMuls whose weights are one external-data file
                            (32 MiB here; `--weight-reads-mib MIB OUTDIR` writes another size)
  OUTDIR/node_extra/test_cudaep_*/   more node tests in ONNX's layout (model.onnx,
                            test_data_set_0/{input,output}_N.pb), outputs computed here in
                            double precision: Gelu (opset 20, not in ONNX 1.12's data),
                            broadcasting patterns, a wide Softmax, batched MatMul, Gemm with
                            both transposes, and multi-node chains of supported ops
  OUTDIR/node_selftest/     one node test whose expected output is wrong in one element: the
                            harness must report it as a failure
"""
import math
import os
import random
import struct
import sys

# --- protobuf wire format ----------------------------------------------------------------------


def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def f_varint(field, n):
    return key(field, 0) + varint(n)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, x):
    return key(field, 5) + struct.pack("<f", x)


# --- ONNX messages (onnx.proto field numbers) ----------------------------------------------------

FLOAT = 1  # TensorProto.FLOAT
INT64 = 7  # TensorProto.INT64
BOOL = 9  # TensorProto.BOOL
ATTR_FLOAT = 1  # AttributeProto.FLOAT
ATTR_INT = 2
IR_VERSION = 8
OPSET = 17


def tensor_type(elem, dims):
    """TypeProto{tensor_type{elem_type, shape{dim{dim_value | dim_param}}}}."""
    shape = b"".join(f_bytes(1, f_varint(1, d) if isinstance(d, int) else f_bytes(2, d)) for d in dims)
    return f_bytes(1, f_varint(1, elem) + f_bytes(2, shape))


def value_info(name, dims, elem=FLOAT):
    return f_bytes(1, name) + f_bytes(2, tensor_type(elem, dims))


def attr_float(name, x):
    return f_bytes(1, name) + f_float(2, x) + f_varint(20, ATTR_FLOAT)


def node(op, inputs, outputs, name, attrs=()):
    b = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    b += f_bytes(3, name) + f_bytes(4, op)
    b += b"".join(f_bytes(5, a) for a in attrs)
    return b


def pack_floats(values):
    return struct.pack("<%df" % len(values), *values)


def tensor_inline(name, dims, values):
    """TensorProto with raw_data (little-endian float32)."""
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, FLOAT) + f_bytes(8, name)
    return b + f_bytes(9, pack_floats(values))


def tensor_external(name, dims, location, offset, length, elem=FLOAT):
    """TensorProto with data_location = EXTERNAL (14) and external_data entries (13); a length of
    None writes no length entry (valid ONNX: the tensor's size from offset)."""
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, elem) + f_bytes(8, name)
    entries = [("location", location), ("offset", str(offset))]
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        b += f_bytes(13, f_bytes(1, k) + f_bytes(2, v))
    return b + f_varint(14, 1)


def model(graph_name, nodes, initializers, inputs, outputs):
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, graph_name)
    g += b"".join(f_bytes(5, t) for t in initializers)
    g += b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs)
    opset = f_bytes(1, "") + f_varint(2, OPSET)
    return f_varint(1, IR_VERSION) + f_bytes(2, "cudaep-ctests-ort") + f_bytes(7, g) + f_bytes(8, opset)


# --- weights -----------------------------------------------------------------------------------

IN, HIDDEN, OUT = 64, 128, 16  # ort_host's case_models.c uses the same sizes


def weights(rng, fan_in, count):
    bound = 1.0 / fan_in ** 0.5
    return [rng.uniform(-bound, bound) for _ in range(count)]


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def mlp_layers(rng):
    w1 = weights(rng, IN, IN * HIDDEN)
    b1 = weights(rng, IN, HIDDEN)
    w2 = weights(rng, HIDDEN, HIDDEN * OUT)
    b2 = weights(rng, HIDDEN, OUT)
    return w1, b1, w2, b2


def write_mlp(outdir):
    w1, b1, w2, b2 = mlp_layers(random.Random(20240601))
    # External data: W1 at 0, B1 at a 64-byte aligned offset, W2 after it (ORT and the EP must
    # honour the offsets; the gaps hold a non-zero filler so a wrong offset gives wrong numbers).
    blob = bytearray()
    placed = {}
    for name, values in (("W1", w1), ("B1", b1), ("W2", w2)):
        while len(blob) % 64:
            blob += b"\x7f"
        placed[name] = (len(blob), 4 * len(values))
        blob += pack_floats(values)
    write(os.path.join(outdir, "mlp.weights.bin"), bytes(blob))
    inits = [
        tensor_external("W1", [IN, HIDDEN], "mlp.weights.bin", *placed["W1"]),
        tensor_external("B1", [HIDDEN], "mlp.weights.bin", *placed["B1"]),
        tensor_external("W2", [HIDDEN, OUT], "mlp.weights.bin", *placed["W2"]),
        tensor_inline("B2", [OUT], b2),
    ]
    nodes = [
        node("MatMul", ["X", "W1"], ["h0"], "fc1_matmul"),
        node("Add", ["h0", "B1"], ["h1"], "fc1_add"),
        node("Relu", ["h1"], ["h2"], "relu"),
        node("MatMul", ["h2", "W2"], ["h3"], "fc2_matmul"),
        node("Add", ["h3", "B2"], ["Y"], "fc2_add"),
    ]
    m = model("mlp", nodes, inits, [value_info("X", ["batch", IN])], [value_info("Y", ["batch", OUT])])
    write(os.path.join(outdir, "mlp.onnx"), m)


DEEP_LAYERS = 6  # ort_host's case_paging uses the same count and sizes (IN x IN weights)


def write_deep(outdir):
    rng = random.Random(20240603)
    blob = bytearray()
    inits, nodes, x = [], [], "X"
    for i in range(DEEP_LAYERS):
        w, b = weights(rng, IN, IN * IN), weights(rng, IN, IN)
        for name, dims, values in ((f"W{i}", [IN, IN], w), (f"B{i}", [IN], b)):
            inits.append(tensor_external(name, dims, "deep.weights.bin", len(blob), 4 * len(values)))
            blob += pack_floats(values)
        nodes += [
            node("MatMul", [x, f"W{i}"], [f"m{i}"], f"fc{i}_matmul"),
            node("Add", [f"m{i}", f"B{i}"], [f"a{i}"], f"fc{i}_add"),
            node("Relu", [f"a{i}"], ["Y" if i == DEEP_LAYERS - 1 else f"r{i}"], f"relu{i}"),
        ]
        x = f"r{i}"
    write(os.path.join(outdir, "deep.weights.bin"), bytes(blob))
    m = model("deep", nodes, inits, [value_info("X", ["batch", IN])], [value_info("Y", ["batch", IN])])
    write(os.path.join(outdir, "deep.onnx"), m)


CACHE_HEADS, CACHE_LEN, CACHE_DIM = 2, 8, 4  # case_iobinding.c's check_cache uses the same


def write_cache(outdir):
    kv = [1, CACHE_HEADS, CACHE_LEN, CACHE_DIM]
    cond = value_info("cond", [1, 1, CACHE_LEN, 1], BOOL)
    inputs, outputs, nodes = [cond], [], []
    for c in ("k", "v"):
        inputs += [value_info(f"new_{c}", [1, CACHE_HEADS, 1, CACHE_DIM]), value_info(f"past_{c}", kv)]
        outputs.append(value_info(f"present_{c}", kv))
        nodes.append(node("Where", ["cond", f"new_{c}", f"past_{c}"], [f"present_{c}"], f"update_{c}"))
    both = node("Add", ["present_k", "present_v"], ["both"], "both")  # one partition, as attention makes it
    m = model("cache", nodes + [both], [], inputs, outputs + [value_info("both", kv)])
    write(os.path.join(outdir, "cache.onnx"), m)
    nodes = [nodes[0], node("Add", ["past_k", "present_k"], ["sum"], "reread")]
    m = model("cache_reread", nodes, [], inputs[:3], [outputs[0], value_info("sum", kv)])
    write(os.path.join(outdir, "cache_reread.onnx"), m)


def write_split(outdir):
    w1, b1, w2, b2 = mlp_layers(random.Random(20240602))
    inits = [
        tensor_inline("W1", [IN, HIDDEN], w1),
        tensor_inline("B1", [HIDDEN], b1),
        tensor_inline("W2", [HIDDEN, OUT], w2),
        tensor_inline("B2", [OUT], b2),
    ]
    nodes = [
        node("MatMul", ["X", "W1"], ["h0"], "fc1_matmul"),
        node("Add", ["h0", "B1"], ["h1"], "fc1_add"),
        node("LeakyRelu", ["h1"], ["h2"], "leaky_relu", [attr_float("alpha", 0.1)]),
        node("MatMul", ["h2", "W2"], ["h3"], "fc2_matmul"),
        node("Add", ["h3", "B2"], ["Y"], "fc2_add"),
    ]
    m = model("split", nodes, inits, [value_info("X", ["batch", IN])], [value_info("Y", ["batch", OUT])])
    write(os.path.join(outdir, "split.onnx"), m)


def write_misuse(outdir):
    mdir = os.path.join(outdir, "misuse")
    os.makedirs(mdir, exist_ok=True)
    w = [0.25 * (i + 1) * (-1) ** i for i in range(12)]  # distinct, non-zero: X @ W is checkable
    good = pack_floats(w)
    write(os.path.join(mdir, "ext_ok.bin"), good)
    write(os.path.join(mdir, "short.bin"), good[:24])  # half of W
    write(os.path.join(outdir, "outside.bin"), good)  # outside misuse/, next to it
    os.makedirs(os.path.join(mdir, "a_directory"), exist_ok=True)
    link = os.path.join(mdir, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join("..", "outside.bin"), link)
    absolute = os.path.abspath(os.path.join(outdir, "outside.bin"))
    cases = {
        "ext_ok": ("ext_ok.bin", 0, 48),
        "ext_no_length": ("ext_ok.bin", 0, None),  # valid: the tensor's 48 bytes
        "ext_no_length_past_end": ("short.bin", 0, None),  # 48 bytes needed, 24 in the file
        "ext_past_end": ("short.bin", 0, 48),
        "ext_offset_past_end": ("ext_ok.bin", 4096, 48),
        "ext_dotdot": (os.path.join("..", "outside.bin"), 0, 48),
        "ext_absolute": (absolute, 0, 48),
        "ext_symlink": ("link.bin", 0, 48),
        "ext_size_mismatch": ("ext_ok.bin", 0, 40),
        "ext_missing": ("no_such_file.bin", 0, 48),
        "ext_directory": ("a_directory", 0, 48),  # inside the folder, but no regular file
    }
    # Bad device data: Gather of T[4,3] (inline) by a runtime index I[1]; an index outside
    # [-4, 4) is an error on ORT's CPU EP, and CudaEp must report it too.
    t = [0.5 * (i + 1) for i in range(12)]
    m = model("gather_indices", [node("Gather", ["T", "I"], ["Y"], "gather_rows")], [tensor_inline("T", [4, 3], t)],
              [value_info("I", [1], INT64)], [value_info("Y", [1, 3])])
    write(os.path.join(mdir, "gather_indices.onnx"), m)
    for name, (location, offset, length) in cases.items():
        nodes = [node("MatMul", ["X", "W"], ["Y"], "matmul")]
        inits = [tensor_external("W", [4, 3], location, offset, length)]
        m = model(name, nodes, inits, [value_info("X", [2, 4])], [value_info("Y", [2, 3])])
        write(os.path.join(mdir, name + ".onnx"), m)


# --- extra node tests ----------------------------------------------------------------------------


def tensor_pb(name, dims, values, packed_floats=False):
    """A TensorProto file: raw_data, or packed float_data (4) to exercise both reader paths."""
    b = b"".join(f_varint(1, d) for d in dims) + f_varint(2, FLOAT) + f_bytes(8, name)
    if packed_floats:
        return b + f_bytes(4, pack_floats(values))
    return b + f_bytes(9, pack_floats(values))


def attr_int(name, x):
    return f_bytes(1, name) + f_varint(3, x) + f_varint(20, ATTR_INT)


def attr_string(name, x):
    return f_bytes(1, name) + f_bytes(4, x) + f_varint(20, 3)  # AttributeProto.STRING


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def strides(dims):
    st, acc = [0] * len(dims), 1
    for i in range(len(dims) - 1, -1, -1):
        st[i] = acc
        acc *= dims[i]
    return st


def broadcast(op, a, ad, b, bd):
    """Numpy-style broadcasting of a binary op over flat lists."""
    rank = max(len(ad), len(bd))
    ad2 = [1] * (rank - len(ad)) + list(ad)
    bd2 = [1] * (rank - len(bd)) + list(bd)
    od = [max(x, y) for x, y in zip(ad2, bd2)]
    ast, bst, ost = strides(ad2), strides(bd2), strides(od)
    out = []
    for i in range(numel(od)):
        ai = bi = 0
        for k in range(rank):
            idx = (i // ost[k]) % od[k]
            ai += (idx if ad2[k] > 1 else 0) * ast[k]
            bi += (idx if bd2[k] > 1 else 0) * bst[k]
        out.append(op(a[ai], b[bi]))
    return out, od


def matmul(a, ad, b, bd):
    """a[..., M, K] @ b[K, N] (b 2-D)."""
    m, k = ad[-2], ad[-1]
    n = bd[1]
    batch = numel(ad[:-2])
    out = []
    for bt in range(batch):
        for i in range(m):
            for j in range(n):
                acc = 0.0
                for t in range(k):
                    acc += a[bt * m * k + i * k + t] * b[t * n + j]
                out.append(acc)
    return out, list(ad[:-2]) + [m, n]


def softmax_last(x, dims):
    n = dims[-1]
    out = []
    for r in range(numel(dims) // n):
        row = x[r * n:(r + 1) * n]
        mx = max(row)
        e = [math.exp(v - mx) for v in row]
        s = sum(e)
        out += [v / s for v in e]
    return out


def gelu(x, tanh_approx=False):
    if tanh_approx:
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def write_node_test(root, name, nodes, inputs, outputs, opset=OPSET, packed=False):
    """inputs: [(name, dims, values)]; outputs: [(name, dims, values)] (values in double)."""
    tdir = os.path.join(root, name)
    ddir = os.path.join(tdir, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    g += b"".join(f_bytes(11, value_info(n, d)) for n, d, _ in inputs)
    g += b"".join(f_bytes(12, value_info(n, d)) for n, d, _ in outputs)
    opset_import = f_bytes(1, "") + f_varint(2, opset)
    m = f_varint(1, IR_VERSION if opset < 20 else 9) + f_bytes(2, "cudaep-ctests-ort") + f_bytes(7, g)
    write(os.path.join(tdir, "model.onnx"), m + f_bytes(8, opset_import))
    for i, (n, d, v) in enumerate(inputs):
        write(os.path.join(ddir, "input_%d.pb" % i), tensor_pb(n, d, [f32(x) for x in v], packed and i % 2 == 0))
    for i, (n, d, v) in enumerate(outputs):
        write(os.path.join(ddir, "output_%d.pb" % i), tensor_pb(n, d, [f32(x) for x in v], packed))


def write_node_extra(outdir):
    root = os.path.join(outdir, "node_extra")
    rng = random.Random(20240603)

    def rand(dims, lo=-2.0, hi=2.0):
        return [f32(rng.uniform(lo, hi)) for _ in range(numel(dims))]

    x = rand([3, 7], -4, 4)
    for name, approx in (("test_cudaep_gelu", False), ("test_cudaep_gelu_tanh", True)):
        attrs = [attr_string("approximate", "tanh")] if approx else []
        write_node_test(root, name, [node("Gelu", ["x"], ["y"], "gelu", attrs)], [("x", [3, 7], x)],
                        [("y", [3, 7], [gelu(v, approx) for v in x])], opset=20)

    binary = {
        "Add": lambda p, q: p + q,
        "Sub": lambda p, q: p - q,
        "Mul": lambda p, q: p * q,
        "Div": lambda p, q: p / q,
    }
    shapes = {
        "row": ([4, 5], [5]),
        "col": ([4, 5], [4, 1]),
        "outer": ([4, 1], [1, 5]),
        "scalar": ([2, 3, 4], []),
        "rank3": ([2, 1, 4], [3, 1]),
    }
    for op, fn in binary.items():
        for sname, (ad, bd) in shapes.items():
            a = rand(ad)
            b = rand(bd, 0.5, 2.0) if op == "Div" else rand(bd)
            y, yd = broadcast(fn, a, ad, b, bd)
            write_node_test(root, "test_cudaep_%s_bcast_%s" % (op.lower(), sname),
                            [node(op, ["a", "b"], ["y"], op.lower())], [("a", ad, a), ("b", bd, b)],
                            [("y", yd, y)], packed=(sname == "row"))

    for op, fn in (("Relu", lambda v: max(v, 0.0)), ("Sigmoid", lambda v: 1 / (1 + math.exp(-v))),
                   ("Tanh", math.tanh), ("Identity", lambda v: v)):
        d = [2, 3, 33]
        a = rand(d, -6, 6)
        write_node_test(root, "test_cudaep_%s_3d" % op.lower(), [node(op, ["x"], ["y"], op.lower())],
                        [("x", d, a)], [("y", d, [fn(v) for v in a])])

    d = [2, 300]
    a = rand(d, -8, 8)
    write_node_test(root, "test_cudaep_softmax_wide", [node("Softmax", ["x"], ["y"], "softmax")],
                    [("x", d, a)], [("y", d, softmax_last(a, d))])

    ad, bd = [2, 3, 4, 5], [5, 6]
    a, b = rand(ad), rand(bd)
    y, yd = matmul(a, ad, b, bd)
    write_node_test(root, "test_cudaep_matmul_batched", [node("MatMul", ["a", "b"], ["y"], "matmul")],
                    [("a", ad, a), ("b", bd, b)], [("y", yd, y)])

    # Gemm: Y = 0.5 * A^T @ B^T + 2 * C, A[3,4] (K=3, M=4), B[5,3] (N=5), C[5].
    a, b, c = rand([3, 4]), rand([5, 3]), rand([5])
    y = []
    for i in range(4):
        for j in range(5):
            acc = sum(a[k * 4 + i] * b[j * 3 + k] for k in range(3))
            y.append(0.5 * acc + 2.0 * c[j])
    gemm = node("Gemm", ["a", "b", "c"], ["y"], "gemm",
                [attr_float("alpha", 0.5), attr_float("beta", 2.0), attr_int("transA", 1), attr_int("transB", 1)])
    write_node_test(root, "test_cudaep_gemm_transposed", [gemm], [("a", [3, 4], a), ("b", [5, 3], b), ("c", [5], c)],
                    [("y", [4, 5], y)])

    # A chain of supported ops, all one partition: Softmax(Relu(X @ W + B)) * S, Tanh, Sigmoid.
    xd, wd = [3, 8], [8, 6]
    xv, wv, bv, sv = rand(xd), rand(wd), rand([6]), rand([6])
    h, hd = matmul(xv, xd, wv, wd)
    h, hd = broadcast(lambda p, q: p + q, h, hd, bv, [6])
    h = [max(v, 0.0) for v in h]
    h = softmax_last(h, hd)
    h, hd = broadcast(lambda p, q: p * q, h, hd, sv, [6])
    y = [1 / (1 + math.exp(-math.tanh(v))) for v in h]
    nodes = [
        node("MatMul", ["x", "w"], ["h0"], "mm"),
        node("Add", ["h0", "b"], ["h1"], "add"),
        node("Relu", ["h1"], ["h2"], "relu"),
        node("Softmax", ["h2"], ["h3"], "softmax"),
        node("Mul", ["h3", "s"], ["h4"], "mul"),
        node("Tanh", ["h4"], ["h5"], "tanh"),
        node("Sigmoid", ["h5"], ["y"], "sigmoid"),
    ]
    write_node_test(root, "test_cudaep_chain", nodes,
                    [("x", xd, xv), ("w", wd, wv), ("b", [6], bv), ("s", [6], sv)], [("y", hd, y)])


def write_node_selftest(outdir):
    root = os.path.join(outdir, "node_selftest")
    a = [0.5 * i - 3 for i in range(12)]
    b = [1.25 - 0.25 * i for i in range(12)]
    y = [p + q for p, q in zip(a, b)]
    y[7] += 1e-3  # far outside rtol 1e-4 / atol 1e-5
    write_node_test(root, "test_selftest_wrong_output", [node("Add", ["a", "b"], ["y"], "add")],
                    [("a", [3, 4], a), ("b", [3, 4], b)], [("y", [3, 4], y)])


WEIGHT_READS_WIDTH = 2048  # one layer: a float32 [2048, 2048] matrix, 16 MiB


def write_weight_reads(outdir, mib):
    """OUTDIR/weight_reads/model.onnx: X[1,2048] through mib/16 MatMuls by [2048,2048] float32
    weights, each followed by the Add of one shared bias, all in one external-data file
    weights.bin of mib MiB and 8 KiB (the weight_reads case measures who reads it). Each layer's weights are 0.5/2048 * (+1 or -1), alternating by row, so the
    output stays finite and no page of the file is zero."""
    d = WEIGHT_READS_WIDTH
    layers = max(1, mib // 16)
    root = os.path.join(outdir, "weight_reads")
    os.makedirs(root, exist_ok=True)
    row_pos = struct.pack("<f", 0.5 / d) * d
    row_neg = struct.pack("<f", -0.5 / d) * d
    layer = (row_pos + row_neg) * (d // 2)
    tmp = os.path.join(root, "weights.bin.tmp")
    with open(tmp, "wb") as f:
        for _ in range(layers):
            f.write(layer)
    bias = struct.pack("<f", 0.125) * d
    with open(tmp, "ab") as f:
        f.write(bias)
    os.replace(tmp, os.path.join(root, "weights.bin"))
    nodes, inits = [], []
    for i in range(layers):
        src = "X" if i == 0 else "h%d" % (i - 1)
        dst = "Y" if i == layers - 1 else "h%d" % i
        # MatMul then Add of a bias, which ORT's optimizer fuses into a Gemm: the graph ORT
        # transforms before CudaEp sees it, as an exporter's would be.
        nodes.append(node("MatMul", [src, "W%d" % i], ["m%d" % i], "matmul%d" % i))
        nodes.append(node("Add", ["m%d" % i, "B"], [dst], "bias%d" % i))
        inits.append(tensor_external("W%d" % i, [d, d], "weights.bin", i * len(layer), len(layer)))
    inits.append(tensor_external("B", [d], "weights.bin", layers * len(layer), len(bias)))
    m = model("weight_reads", nodes, inits, [value_info("X", [1, d])], [value_info("Y", [1, d])])
    write(os.path.join(root, "model.onnx"), m)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--weight-reads-mib":
        write_weight_reads(sys.argv[3], int(sys.argv[2]))
        return
    if len(sys.argv) != 2:
        sys.exit("usage: gen_models.py OUTDIR | gen_models.py --weight-reads-mib MIB OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    write_mlp(outdir)
    write_deep(outdir)
    from gen_decoder import write_decoder  # it imports this module's helpers

    write_decoder(outdir)
    from gen_nbits import write_nbits  # it imports this module's helpers

    write_nbits(outdir)
    write_cache(outdir)
    write_split(outdir)
    write_misuse(outdir)
    write_node_extra(outdir)
    write_node_selftest(outdir)
    write_weight_reads(outdir, 32)  # the ctest's size; scripts/ort-weight-reads.sh writes 2 GiB
    # The stamp the build depends on: written last, so a failed run is redone.
    write(os.path.join(outdir, "models.stamp"), b"gen_models.py\n")


if __name__ == "__main__":
    main()
