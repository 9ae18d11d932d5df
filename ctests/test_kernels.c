/*
 * test_kernels.c — operator kernels through the C ABI: typed attributes, output infos,
 * execution at offsets against CPU references, capture support and its reason, NonZero and its
 * host-read count, strides (dense accepted, others refused clearly), every tensor error, and
 * bad device data reported by the next wait.
 */
#include "support.h"

static CudaEpProvider prov;

static void test_matmul_add_and_output_info(void) {
    const int64_t xs[2] = {2, 3}, ws[2] = {3, 4}, ys[2] = {2, 4}, bs[1] = {4};
    CudaEpTensorInfo ins[2] = {f32_info(2, xs), f32_info(2, ws)};
    CudaEpKernel mm = get_kernel(prov, "MatMul", 13, 2, ins);

    size_t n = 0, rank = 99;
    int32_t dtype = 0;
    int64_t shape[4] = {-1, -1, -1, -1};
    CHECK_OK(CudaEpKernelGetOutputCount(mm, &n));
    CHECK(n == 1);
    CHECK_OK(CudaEpKernelGetOutputInfo(mm, 0, &dtype, NULL, 0, &rank)); /* rank only */
    CHECK(dtype == CUDAEP_DTYPE_FLOAT32 && rank == 2 && shape[0] == -1);
    CHECK_ERR(CudaEpKernelGetOutputInfo(mm, 0, &dtype, shape, 1, &rank), CUDAEP_INVALID_ARGUMENT, "shape_capacity is 1");
    CHECK(shape[0] == -1);
    CHECK_OK(CudaEpKernelGetOutputInfo(mm, 0, &dtype, shape, 4, &rank));
    CHECK(shape[0] == 2 && shape[1] == 4 && shape[2] == -1);
    CHECK_ERR(CudaEpKernelGetOutputInfo(mm, 1, &dtype, shape, 4, &rank), CUDAEP_INVALID_ARGUMENT, "1 outputs");

    char name[64];
    size_t needed = 0;
    CHECK_OK(CudaEpKernelGetName(mm, NULL, 0, &needed));
    CHECK(needed > 1 && needed <= sizeof name);
    CHECK_OK(CudaEpKernelGetName(mm, name, sizeof name, &needed));
    CHECK_STR(name, "MatMul(float32[2,3], float32[3,4])");

    float x[6], w[12], b[4], y[8], want[8];
    seeded_floats(x, 6, 1);
    seeded_floats(w, 12, 2);
    seeded_floats(b, 4, 3);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 3; k++) acc += (double)x[i * 3 + k] * w[k * 4 + j];
            want[i * 4 + j] = (float)(acc + b[j]);
        }

    /* All operands in one buffer at different offsets. */
    CudaEpBuffer buf = new_buffer(prov, 4096);
    CHECK_OK(CudaEpCopyToDevice(buf, 0, x, sizeof x));
    CHECK_OK(CudaEpCopyToDevice(buf, 256, w, sizeof w));
    CHECK_OK(CudaEpCopyToDevice(buf, 512, b, sizeof b));
    CudaEpTensorInfo addin[2] = {f32_info(2, ys), f32_info(1, bs)};
    CudaEpKernel add = get_kernel(prov, "Add", 14, 2, addin);
    exec2(mm, tensor_at(buf, 0, CUDAEP_DTYPE_FLOAT32, 2, xs), tensor_at(buf, 256, CUDAEP_DTYPE_FLOAT32, 2, ws),
          tensor_at(buf, 1024, CUDAEP_DTYPE_FLOAT32, 2, ys));
    exec2(add, tensor_at(buf, 1024, CUDAEP_DTYPE_FLOAT32, 2, ys), tensor_at(buf, 512, CUDAEP_DTYPE_FLOAT32, 1, bs),
          tensor_at(buf, 2048, CUDAEP_DTYPE_FLOAT32, 2, ys));
    CHECK_OK(CudaEpCopyToHost(y, buf, 2048, sizeof y));
    CHECK_FLOATS_NEAR(y, want, 8);

    RELEASE(CudaEpReleaseKernel, mm);
    RELEASE(CudaEpReleaseKernel, add);
    RELEASE(CudaEpReleaseBuffer, buf);
}

static void test_typed_attributes(void) {
    /* Gemm: y = 0.5 * A * B^T + 2 * C, with B given as [N, K]. */
    const int64_t as[2] = {2, 3}, bs[2] = {4, 3}, cs[1] = {4}, ys[2] = {2, 4};
    CudaEpTensorInfo ins[3] = {f32_info(2, as), f32_info(2, bs), f32_info(1, cs)};
    CudaEpAttribute attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "alpha", attrs[0].type = CUDAEP_ATTR_FLOAT, attrs[0].f = 0.5f;
    attrs[1].name = "beta", attrs[1].type = CUDAEP_ATTR_FLOAT, attrs[1].f = 2.0f;
    attrs[2].name = "transB", attrs[2].type = CUDAEP_ATTR_INT, attrs[2].i = 1;
    CudaEpKernel gemm = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(prov, "Gemm", 13, ins, 3, attrs, 3, &gemm));
    float a[6], b[12], c[4], y[8], want[8];
    seeded_floats(a, 6, 4);
    seeded_floats(b, 12, 5);
    seeded_floats(c, 4, 6);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 3; k++) acc += (double)a[i * 3 + k] * b[j * 3 + k];
            want[i * 4 + j] = (float)(0.5 * acc + 2.0 * c[j]);
        }
    CudaEpBuffer ab = upload_floats(prov, a, 6), bb = upload_floats(prov, b, 12), cb = upload_floats(prov, c, 4);
    CudaEpBuffer yb = new_buffer(prov, sizeof y);
    CudaEpTensor gin[3] = {f32_tensor(ab, 2, as), f32_tensor(bb, 2, bs), f32_tensor(cb, 1, cs)};
    CudaEpTensor gout = f32_tensor(yb, 2, ys);
    CHECK_OK(CudaEpKernelExecute(gemm, gin, 3, &gout, 1));
    CHECK(download(yb, y, sizeof y));
    CHECK_FLOATS_NEAR(y, want, 8);

    /* Gelu with a string attribute; Softmax with a negative int axis. */
    const int64_t vs[2] = {2, 4};
    CudaEpTensorInfo vin = f32_info(2, vs);
    CudaEpAttribute approx;
    memset(&approx, 0, sizeof approx);
    approx.name = "approximate", approx.type = CUDAEP_ATTR_STRING, approx.s = "tanh";
    CudaEpKernel gelu = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(prov, "Gelu", 20, &vin, 1, &approx, 1, &gelu));
    approx.s = "erf-ish";
    CudaEpKernel bad = 0x77;
    CHECK_ERR(CudaEpGetKernel(prov, "Gelu", 20, &vin, 1, &approx, 1, &bad), CUDAEP_UNSUPPORTED, "approximate");
    CudaEpAttribute axis;
    memset(&axis, 0, sizeof axis);
    axis.name = "axis", axis.type = CUDAEP_ATTR_INT, axis.i = -1;
    CudaEpKernel softmax = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(prov, "Softmax", 13, &vin, 1, &axis, 1, &softmax));
    CHECK_OK(CudaEpKernelExecute(softmax, &gout, 1, &gout, 1)); /* in place */
    CHECK(download(yb, y, sizeof y));
    for (int r = 0; r < 2; r++) {
        double sum = 0, mx = -1e30;
        for (int j = 0; j < 4; j++) mx = want[r * 4 + j] > mx ? want[r * 4 + j] : mx;
        for (int j = 0; j < 4; j++) sum += exp(want[r * 4 + j] - mx);
        for (int j = 0; j < 4; j++) CHECK(near(y[r * 4 + j], exp(want[r * 4 + j] - mx) / sum));
    }

    /* Attribute errors: an unknown type, a duplicate, a NULL name, NULL ints with a count. */
    CudaEpAttribute wrong[2];
    memset(wrong, 0, sizeof wrong);
    wrong[0].name = "axis", wrong[0].type = 42;
    CHECK_ERR(CudaEpGetKernel(prov, "Softmax", 13, &vin, 1, wrong, 1, &bad), CUDAEP_INVALID_ARGUMENT, "not a CudaEpAttributeType");
    wrong[0].type = CUDAEP_ATTR_INT, wrong[1] = wrong[0];
    CHECK_ERR(CudaEpGetKernel(prov, "Softmax", 13, &vin, 1, wrong, 2, &bad), CUDAEP_INVALID_ARGUMENT, "given twice");
    wrong[0].name = NULL;
    CHECK_ERR(CudaEpGetKernel(prov, "Softmax", 13, &vin, 1, wrong, 1, &bad), CUDAEP_INVALID_ARGUMENT, "attributes[0].name is NULL");
    wrong[0].name = "perm", wrong[0].type = CUDAEP_ATTR_INTS, wrong[0].num_ints = 3;
    CHECK_ERR(CudaEpGetKernel(prov, "Softmax", 13, &vin, 1, wrong, 1, &bad), CUDAEP_INVALID_ARGUMENT, "ints is NULL");
    CHECK(bad == 0x77);

    RELEASE(CudaEpReleaseKernel, gemm);
    RELEASE(CudaEpReleaseKernel, gelu);
    RELEASE(CudaEpReleaseKernel, softmax);
    RELEASE(CudaEpReleaseBuffer, ab);
    RELEASE(CudaEpReleaseBuffer, bb);
    RELEASE(CudaEpReleaseBuffer, cb);
    RELEASE(CudaEpReleaseBuffer, yb);
}

static void test_unsupported_and_strides(void) {
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    CudaEpKernel k = 0x99;
    CudaEpTensorInfo in = f32_info(2, s23);
    CHECK_ERR(CudaEpGetKernel(prov, "Conv", 11, &in, 1, NULL, 0, &k), CUDAEP_UNSUPPORTED, "Conv");
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 0, &in, 1, NULL, 0, &k), CUDAEP_INVALID_ARGUMENT, "opset");
    CudaEpTensorInfo wide = in; /* Relu takes float32, float16 and bfloat16 */
    wide.dtype = CUDAEP_DTYPE_FLOAT64;
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 14, &wide, 1, NULL, 0, &k), CUDAEP_UNSUPPORTED, "float64");
    const int64_t negative[2] = {2, -3};
    CudaEpTensorInfo neg = f32_info(2, negative);
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 14, &neg, 1, NULL, 0, &k), CUDAEP_INVALID_ARGUMENT, "dimension 1 is -3");
    CudaEpTensorInfo deep = in;
    deep.rank = CUDAEP_MAX_RANK + 1;
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 14, &deep, 1, NULL, 0, &k), CUDAEP_INVALID_ARGUMENT, "rank");

    /* A transposed view's strides are refused at GetKernel and at Execute. */
    const int64_t transposed[2] = {1, 3};
    CudaEpTensorInfo view = f32_info(2, s32);
    view.strides = transposed;
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 14, &view, 1, NULL, 0, &k), CUDAEP_UNSUPPORTED, "dense row-major");
    CHECK(k == 0x99);

    /* Dense strides given explicitly are fine (an extent-1 dimension may carry any stride). */
    const int64_t s13[2] = {1, 3}, any[2] = {1000, 1};
    CudaEpTensorInfo row = f32_info(2, s13);
    row.strides = any;
    CudaEpKernel relu = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(prov, "Relu", 14, &row, 1, NULL, 0, &relu));
    CudaEpBuffer b = new_buffer(prov, 64);
    CudaEpTensor t = f32_tensor(b, 2, s13);
    t.info.strides = any;
    CHECK_OK(CudaEpKernelExecute(relu, &t, 1, &t, 1));
    const int64_t bad_strides[2] = {3, 2};
    t.info.strides = bad_strides;
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &t, 1), CUDAEP_UNSUPPORTED, "not the dense row-major strides");
    RELEASE(CudaEpReleaseKernel, relu);
    RELEASE(CudaEpReleaseBuffer, b);
}

static void test_execute_errors(void) {
    const int64_t s4[1] = {4}, s5[1] = {5};
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel relu = get_kernel(prov, "Relu", 14, 1, &in);
    CudaEpBuffer b = new_buffer(prov, 16);
    CudaEpTensor ok = f32_tensor(b, 1, s4);

    CudaEpTensor t = f32_tensor(b, 1, s5); /* wrong shape */
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_ARGUMENT, "");
    CHECK_ERR(CudaEpKernelExecute(relu, &ok, 1, &ok, 0), CUDAEP_INVALID_ARGUMENT, "");
    t = ok, t.offset = 4; /* past the 16-byte buffer */
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_ARGUMENT, "inputs[0]: cudaep: invalid argument: range [4, 4+16) is outside the 16-byte tensor memory");
    t = ok, t.offset = UINT64_MAX;
    CHECK_ERR(CudaEpKernelExecute(relu, &ok, 1, &t, 1), CUDAEP_INVALID_ARGUMENT, "outputs[0]");
    t = ok, t.memory = 0;
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_HANDLE, "memory must be a buffer, paged weight or ticket");
    t = ok, t.memory = relu; /* a kernel is not memory */
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_HANDLE, "wrong type");
    t = ok, t.memory = b + ((uint64_t)1 << 32); /* forged: the next generation */
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_HANDLE, "never issued");
    CHECK_ERR(CudaEpKernelExecute(relu, NULL, 1, &ok, 1), CUDAEP_INVALID_ARGUMENT, "inputs is NULL");
    CHECK_ERR(CudaEpKernelExecute(relu, &ok, SIZE_MAX, &ok, 1), CUDAEP_INVALID_ARGUMENT, "at most");

    /* Memory of another provider is refused. */
    CudaEpProvider other = new_provider(NULL);
    CudaEpBuffer ob = new_buffer(other, 16);
    t = ok, t.memory = ob;
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_ARGUMENT, "another provider");
    RELEASE(CudaEpReleaseBuffer, ob);
    RELEASE(CudaEpReleaseProvider, other);

    /* A released buffer is stale. */
    CudaEpBuffer gone = new_buffer(prov, 16);
    CHECK_OK(CudaEpReleaseBuffer(gone));
    t = ok, t.memory = gone;
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_STALE_HANDLE, "released");

    RELEASE(CudaEpReleaseKernel, relu);
    RELEASE(CudaEpReleaseBuffer, b);
}

static void test_nonzero_and_capture_support(void) {
    const int64_t xs[2] = {2, 3};
    CudaEpTensorInfo in = f32_info(2, xs);
    CudaEpKernel nz = get_kernel(prov, "NonZero", 13, 1, &in);
    CudaEpKernel relu = get_kernel(prov, "Relu", 14, 1, &in);

    int32_t supported = 7;
    char reason[512];
    size_t needed = 0;
    CHECK_OK(CudaEpKernelGetCaptureSupport(relu, &supported));
    CHECK(supported == 1);
    CHECK_OK(CudaEpKernelGetCaptureReason(relu, reason, sizeof reason, &needed));
    CHECK_STR(reason, "");
    CHECK_OK(CudaEpKernelGetCaptureSupport(nz, &supported));
    CHECK(supported == 0);
    CHECK_OK(CudaEpKernelGetCaptureReason(nz, reason, sizeof reason, &needed));
    CHECK_CONTAINS(reason, "NonZero");
    CHECK_CONTAINS(reason, "host");

    /* Output 0: int64 [rank, numel] indices; output 1: int64 [1] count. */
    int32_t dtype = 0;
    int64_t shape[2];
    size_t rank = 0;
    CHECK_OK(CudaEpKernelGetOutputInfo(nz, 0, &dtype, shape, 2, &rank));
    CHECK(dtype == CUDAEP_DTYPE_INT64 && rank == 2 && shape[0] == 2 && shape[1] == 6);
    const float x[6] = {0.0f, 1.5f, 0.0f, -2.0f, 0.0f, 3.0f};
    CudaEpBuffer xb = upload_floats(prov, x, 6);
    CudaEpBuffer idx = new_buffer(prov, 2 * 6 * 8), cnt = new_buffer(prov, 8);
    const int64_t is[2] = {2, 6}, cs[1] = {1};
    CudaEpTensor outs[2] = {tensor_at(idx, 0, CUDAEP_DTYPE_INT64, 2, is), tensor_at(cnt, 0, CUDAEP_DTYPE_INT64, 1, cs)};
    CudaEpTensor xt = f32_tensor(xb, 2, xs);
    CHECK_OK(CudaEpKernelExecute(nz, &xt, 1, outs, 2));
    int64_t count = -1;
    CHECK_OK(CudaEpKernelNonZeroCount(nz, &outs[1], &count));
    CHECK(count == 3);
    int64_t got[6];
    CHECK_OK(CudaEpCopyToHost(got, idx, 0, sizeof got)); /* [2, 3]: rows then columns */
    const int64_t want[6] = {0, 1, 1, 1, 0, 2};
    CHECK(memcmp(got, want, sizeof want) == 0);

    int64_t untouched = 42;
    CHECK_ERR(CudaEpKernelNonZeroCount(relu, &outs[1], &untouched), CUDAEP_INVALID_ARGUMENT, "not a NonZero kernel");
    CHECK_ERR(CudaEpKernelNonZeroCount(nz, &outs[0], &untouched), CUDAEP_INVALID_ARGUMENT, "");
    CHECK(untouched == 42);

    RELEASE(CudaEpReleaseKernel, nz);
    RELEASE(CudaEpReleaseKernel, relu);
    RELEASE(CudaEpReleaseBuffer, xb);
    RELEASE(CudaEpReleaseBuffer, idx);
    RELEASE(CudaEpReleaseBuffer, cnt);
}

/* Identity over bool copies raw bytes: the way to read a paged slot back. */
static void test_identity_copies_bytes(void) {
    enum { N = 999 };
    const int64_t s[1] = {N};
    CudaEpTensorInfo in = {CUDAEP_DTYPE_BOOL, 1, s, NULL};
    CudaEpKernel id = get_kernel(prov, "Identity", 13, 1, &in);
    unsigned char src[N], back[N];
    pattern_bytes(src, N, 5);
    CudaEpBuffer a = new_buffer(prov, N + 1), b = new_buffer(prov, N);
    CHECK_OK(CudaEpCopyToDevice(a, 1, src, N));
    CHECK(exec1(id, tensor_at(a, 1, CUDAEP_DTYPE_BOOL, 1, s), tensor_at(b, 0, CUDAEP_DTYPE_BOOL, 1, s)));
    CHECK(download(b, back, N) && memcmp(src, back, N) == 0);
    RELEASE(CudaEpReleaseKernel, id);
    RELEASE(CudaEpReleaseBuffer, a);
    RELEASE(CudaEpReleaseBuffer, b);
}

/* Bad device data (the header's "Bad device data"): a Gather index outside the table gives a
 * memory-safe output, and the next call that waits for the compute stream fails with
 * CUDAEP_INVALID_ARGUMENT naming the op, the input and the value; once. */
static void test_bad_device_data_is_reported(void) {
    const int64_t ts[2] = {4, 2}, is[1] = {1}, os[2] = {1, 2};
    CudaEpTensorInfo ins[2] = {f32_info(2, ts), {CUDAEP_DTYPE_INT64, 1, is, NULL}};
    CudaEpKernel gather = get_kernel(prov, "Gather", 13, 2, ins);
    float table[8], y[2];
    seeded_floats(table, 8, 4);
    CudaEpBuffer buf = new_buffer(prov, 1024);
    CHECK_OK(CudaEpCopyToDevice(buf, 0, table, sizeof table));
    const int64_t good = -1, bad = 9;
    CHECK_OK(CudaEpCopyToDevice(buf, 256, &good, sizeof good));
    exec2(gather, tensor_at(buf, 0, CUDAEP_DTYPE_FLOAT32, 2, ts), tensor_at(buf, 256, CUDAEP_DTYPE_INT64, 1, is),
          tensor_at(buf, 512, CUDAEP_DTYPE_FLOAT32, 2, os));
    CHECK_OK(CudaEpSynchronizeCompute(prov));
    CHECK_OK(CudaEpCopyToHost(y, buf, 512, sizeof y));
    CHECK(y[0] == table[6] && y[1] == table[7]); /* index -1: the last row, as ONNX says */

    CHECK_OK(CudaEpCopyToDevice(buf, 256, &bad, sizeof bad));
    exec2(gather, tensor_at(buf, 0, CUDAEP_DTYPE_FLOAT32, 2, ts), tensor_at(buf, 256, CUDAEP_DTYPE_INT64, 1, is),
          tensor_at(buf, 512, CUDAEP_DTYPE_FLOAT32, 2, os));
    CHECK_ERR(CudaEpSynchronizeCompute(prov), CUDAEP_INVALID_ARGUMENT, "Gather(float32[4,2], int64[1]) (kernel ");
    CHECK_OK(CudaEpSynchronizeCompute(prov)); /* reported once */

    exec2(gather, tensor_at(buf, 0, CUDAEP_DTYPE_FLOAT32, 2, ts), tensor_at(buf, 256, CUDAEP_DTYPE_INT64, 1, is),
          tensor_at(buf, 512, CUDAEP_DTYPE_FLOAT32, 2, os));
    CHECK_ERR(CudaEpCopyToHost(y, buf, 512, sizeof y), CUDAEP_INVALID_ARGUMENT, "input 'indices' holds 9, outside [-4, 4)");
    CHECK_OK(CudaEpForceSynchronize(prov));
    RELEASE(CudaEpReleaseKernel, gather);
    RELEASE(CudaEpReleaseBuffer, buf);
}

int main(void) {
    prov = new_provider(NULL);
    test_matmul_add_and_output_info();
    test_typed_attributes();
    test_unsupported_and_strides();
    test_execute_errors();
    test_nonzero_and_capture_support();
    test_identity_copies_bytes();
    test_bad_device_data_is_reported();
    CHECK_OK(CudaEpReleaseProvider(prov));
    check_no_live_handles();
    return check_result("test_kernels");
}
