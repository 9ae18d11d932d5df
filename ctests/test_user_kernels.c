/*
 * test_user_kernels.c — user kernels through the C ABI: hand-written PTX loaded and launched
 * with typed arguments (checked against the PTX's declared parameters), at buffer offsets and
 * through raw device pointers, recorded into a graph and replayed; a module released before its
 * function; NVRTC compilation (CUDAEP_UNSUPPORTED on the simulator, a compiler log in the
 * message of a failed compile on the GPU).
 *
 * The PTX's entry is named cudaep_mul_f32 with the built-in kernel's contract
 * (out[i] = a[i] * b[i] for i < n): on the GPU the driver JIT-compiles this PTX; on the
 * simulator the built-in entry's Go body runs, since the simulator cannot execute PTX.
 */
#include "support.h"

static const char mul_ptx[] =
    ".version 7.5\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    "// cudaep_mul_f32(float* out, const float* a, const float* b, unsigned long long n)\n"
    ".visible .entry cudaep_mul_f32(\n"
    "\t.param .u64 p_out,\n"
    "\t.param .u64 p_a,\n"
    "\t.param .u64 p_b,\n"
    "\t.param .u64 p_n\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<4>;\n"
    "\t.reg .f32 %f<4>;\n"
    "\t.reg .b64 %rd<12>;\n"
    "\tld.param.u64 %rd1, [p_out];\n"
    "\tld.param.u64 %rd2, [p_a];\n"
    "\tld.param.u64 %rd3, [p_b];\n"
    "\tld.param.u64 %rd4, [p_n];\n"
    "\tmov.u32 %r1, %ctaid.x;\n"
    "\tmov.u32 %r2, %ntid.x;\n"
    "\tmov.u32 %r3, %tid.x;\n"
    "\tmul.wide.u32 %rd5, %r1, %r2;\n"
    "\tcvt.u64.u32 %rd6, %r3;\n"
    "\tadd.s64 %rd7, %rd5, %rd6;\n"
    "\tsetp.ge.u64 %p1, %rd7, %rd4;\n"
    "\t@%p1 bra DONE;\n"
    "\tshl.b64 %rd8, %rd7, 2;\n"
    "\tcvta.to.global.u64 %rd9, %rd2;\n"
    "\tadd.s64 %rd9, %rd9, %rd8;\n"
    "\tld.global.f32 %f1, [%rd9];\n"
    "\tcvta.to.global.u64 %rd10, %rd3;\n"
    "\tadd.s64 %rd10, %rd10, %rd8;\n"
    "\tld.global.f32 %f2, [%rd10];\n"
    "\tmul.rn.f32 %f3, %f1, %f2;\n"
    "\tcvta.to.global.u64 %rd11, %rd1;\n"
    "\tadd.s64 %rd11, %rd11, %rd8;\n"
    "\tst.global.f32 [%rd11], %f3;\n"
    "DONE:\n"
    "\tret;\n"
    "}\n"
    "\n"
    "// A by-value struct parameter, which typed arguments cannot pass.\n"
    ".visible .entry takes_struct(\n"
    "\t.param .align 8 .b8 p_s[16]\n"
    ")\n"
    "{\n"
    "\tret;\n"
    "}\n";

static const char add_one_source[] =
    "extern \"C\" __global__ void add_one(float* out, const float* in, unsigned long long n) {\n"
    "    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = in[i] + 1.0f;\n"
    "}\n";

static CudaEpProvider prov;

static CudaEpKernelArg arg_memory(uint64_t memory, uint64_t offset) {
    CudaEpKernelArg a;
    memset(&a, 0, sizeof a);
    a.type = CUDAEP_ARG_MEMORY;
    a.memory = memory;
    a.value.offset = offset;
    return a;
}

static CudaEpKernelArg arg_u64(uint64_t v) {
    CudaEpKernelArg a;
    memset(&a, 0, sizeof a);
    a.type = CUDAEP_ARG_U64;
    a.value.u64 = v;
    return a;
}

static CudaEpLaunchConfig config_for(uint32_t n) {
    CudaEpLaunchConfig c;
    memset(&c, 0, sizeof c);
    c.block_x = 128, c.block_y = 1, c.block_z = 1;
    c.grid_x = (n + 127) / 128, c.grid_y = 1, c.grid_z = 1;
    return c;
}

static void test_ptx_launch_with_typed_args(void) {
    enum { N = 300 };
    CudaEpModule mod = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpLoadModule(prov, mul_ptx, sizeof mul_ptx - 1, &mod));
    size_t needed = 0;
    CHECK_OK(CudaEpModuleGetPTX(mod, NULL, 0, &needed));
    CHECK(needed == sizeof mul_ptx);
    char* text = malloc(needed);
    CHECK_OK(CudaEpModuleGetPTX(mod, text, needed, &needed));
    CHECK_CONTAINS(text, ".entry cudaep_mul_f32(");
    free(text);

    CudaEpFunction fn = CUDAEP_NULL_HANDLE, none = 0x31;
    CHECK_OK(CudaEpModuleGetFunction(mod, "cudaep_mul_f32", &fn));
    CHECK_ERR(CudaEpModuleGetFunction(mod, "nope", &none), CUDAEP_INVALID_ARGUMENT, "cudaep_mul_f32, takes_struct");
    CHECK_ERR(CudaEpModuleGetFunction(mod, "takes_struct", &none), CUDAEP_UNSUPPORTED, "by-value aggregate");
    CHECK(none == 0x31);

    float a[N], b[N], want[N], got[N];
    seeded_floats(a, N, 51);
    seeded_floats(b, N, 52);
    for (int i = 0; i < N; i++) want[i] = a[i] * b[i];
    CudaEpBuffer ab = upload_floats(prov, a, N), bb = upload_floats(prov, b, N);
    CudaEpBuffer out = new_buffer(prov, 4 * N + 64);
    CHECK_OK(CudaEpMemset(out, 0, 4 * N + 64, 0xA5));

    /* Checked memory arguments, the output at a 64-byte offset. */
    CudaEpLaunchConfig cfg = config_for(N);
    CudaEpKernelArg args[4] = {arg_memory(out, 64), arg_memory(ab, 0), arg_memory(bb, 0), arg_u64(N)};
    CHECK_OK(CudaEpLaunchFunction(fn, &cfg, args, 4));
    CHECK_OK(CudaEpCopyToHost(got, out, 64, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);
    unsigned char head[64], pattern[64];
    memset(pattern, 0xA5, sizeof pattern);
    CHECK_OK(CudaEpCopyToHost(head, out, 0, sizeof head));
    CHECK(memcmp(head, pattern, sizeof head) == 0);

    /* Raw device pointers work too (unchecked). */
    uint64_t pa = 0, po = 0;
    CHECK_OK(CudaEpBufferGetDevicePointer(ab, &pa));
    CHECK_OK(CudaEpBufferGetDevicePointer(out, &po));
    args[0].type = CUDAEP_ARG_DEVICE_PTR, args[0].value.device_ptr = po;
    args[1].type = CUDAEP_ARG_DEVICE_PTR, args[1].value.device_ptr = pa;
    CHECK_OK(CudaEpLaunchFunction(fn, &cfg, args, 4)); /* out = a * b at offset 0 */
    CHECK_OK(CudaEpCopyToHost(got, out, 0, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);

    /* Launches that do not fit the declaration are refused before anything is queued. */
    CudaEpKernelArg bad[4] = {arg_memory(out, 0), arg_memory(ab, 0), arg_memory(bb, 0), arg_u64(N)};
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 3), CUDAEP_INVALID_ARGUMENT, "declares 4 parameters, launched with 3");
    bad[3].type = CUDAEP_ARG_F32, bad[3].value.f32 = 1.0f;
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 4), CUDAEP_INVALID_ARGUMENT, "argument 3 is f32, parameter 3 is .u64");
    bad[3] = arg_u64(N);
    bad[3].type = 99;
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 4), CUDAEP_INVALID_ARGUMENT, "not a CudaEpArgType");
    bad[3] = arg_u64(N);
    bad[0] = arg_memory(out, 4 * N + 65);
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 4), CUDAEP_INVALID_ARGUMENT, "outside");
    bad[0] = arg_memory(fn, 0);
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 4), CUDAEP_INVALID_HANDLE, "memory must be a buffer");
    bad[0] = arg_memory(out, 0);
    bad[0].reserved = 1;
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, 4), CUDAEP_INVALID_ARGUMENT, "reserved");
    bad[0].reserved = 0;
    CudaEpLaunchConfig zero = cfg;
    zero.grid_y = 0;
    CHECK_ERR(CudaEpLaunchFunction(fn, &zero, bad, 4), CUDAEP_INVALID_ARGUMENT, "zero grid or block extent");
    CHECK_ERR(CudaEpLaunchFunction(fn, &cfg, bad, CUDAEP_MAX_KERNEL_ARGS + 1), CUDAEP_INVALID_ARGUMENT, "at most 24");

    /* A launch is recorded into a graph and replays over the buffers' current contents. */
    CudaEpBuffer keep[3] = {ab, bb, out};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, NULL, 0, keep, 3));
    CHECK_OK(CudaEpLaunchFunction(fn, &cfg, bad, 4));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    seeded_floats(a, N, 53);
    for (int i = 0; i < N; i++) want[i] = a[i] * b[i];
    CHECK_OK(CudaEpCopyToDevice(ab, 0, a, sizeof a));
    CHECK_OK(CudaEpMemset(out, 0, 4 * N, 0x5A));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpCopyToHost(got, out, 0, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));

    /* The function holds its module: releasing the module's handle first is safe. */
    CHECK_OK(CudaEpReleaseModule(mod));
    CHECK_ERR(CudaEpModuleGetFunction(mod, "cudaep_mul_f32", &none), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpLaunchFunction(fn, &cfg, bad, 4));
    RELEASE(CudaEpReleaseFunction, fn);
    RELEASE(CudaEpReleaseBuffer, ab);
    RELEASE(CudaEpReleaseBuffer, bb);
    RELEASE(CudaEpReleaseBuffer, out);
}

static void test_load_refusals(void) {
    CudaEpModule mod = 0x21;
    const unsigned char elf[10] = {0x7f, (unsigned char)0x45, (unsigned char)0x4c, (unsigned char)0x46, 2, 1, 1, 0, 0xff, 0xfe};
    CHECK_ERR(CudaEpLoadModule(prov, elf, sizeof elf, &mod), CUDAEP_INVALID_ARGUMENT, "not PTX text");
    const char no_entry[] = ".version 7.5\n.target sm_75\n.address_size 64\n";
    CHECK_ERR(CudaEpLoadModule(prov, no_entry, sizeof no_entry, &mod), CUDAEP_INVALID_ARGUMENT, "no .entry");
    CHECK_ERR(CudaEpLoadModule(prov, mul_ptx, 0, &mod), CUDAEP_INVALID_ARGUMENT, "ptx_size is 0");
    CHECK(mod == 0x21);

    /* An entry the simulator has no body for loads, but only the GPU can run it. */
    static const char custom[] =
        ".version 7.5\n.target sm_75\n.address_size 64\n"
        ".visible .entry user_noop(.param .u64 p) { ret; }\n";
    CHECK_OK(CudaEpLoadModule(prov, custom, sizeof custom - 1, &mod));
    CudaEpFunction fn = 0x22;
    if (test_on_sim()) {
        CHECK_ERR(CudaEpModuleGetFunction(mod, "user_noop", &fn), CUDAEP_CUDA_ERROR, "no sim kernel is registered");
        CHECK(fn == 0x22);
    } else {
        CHECK_OK(CudaEpModuleGetFunction(mod, "user_noop", &fn));
        CudaEpLaunchConfig cfg = config_for(1);
        CudaEpKernelArg a = arg_u64(7);
        CHECK_OK(CudaEpLaunchFunction(fn, &cfg, &a, 1));
        CHECK_OK(CudaEpForceSynchronize(prov));
        RELEASE(CudaEpReleaseFunction, fn);
    }
    RELEASE(CudaEpReleaseModule, mod);
}

static void test_nvrtc(void) {
    CudaEpModule mod = 0x41;
    const char* opts[1] = {"--std=c++17"};
    if (test_on_sim()) {
        CHECK_ERR(CudaEpCompileModule(prov, add_one_source, "add_one.cu", opts, 1, &mod), CUDAEP_UNSUPPORTED,
                  "simulated device has no NVRTC");
        CHECK(mod == 0x41);
        return;
    }
    CHECK_OK(CudaEpCompileModule(prov, add_one_source, "add_one.cu", opts, 1, &mod));
    CudaEpFunction fn = 0;
    CHECK_OK(CudaEpModuleGetFunction(mod, "add_one", &fn));
    enum { N = 200 };
    float in[N], want[N], got[N];
    seeded_floats(in, N, 61);
    for (int i = 0; i < N; i++) want[i] = in[i] + 1.0f;
    CudaEpBuffer ib = upload_floats(prov, in, N), ob = new_buffer(prov, 4 * N);
    CudaEpLaunchConfig cfg = config_for(N);
    CudaEpKernelArg args[3] = {arg_memory(ob, 0), arg_memory(ib, 0), arg_u64(N)};
    CHECK_OK(CudaEpLaunchFunction(fn, &cfg, args, 3));
    CHECK(download(ob, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);
    RELEASE(CudaEpReleaseFunction, fn);
    RELEASE(CudaEpReleaseModule, mod);
    RELEASE(CudaEpReleaseBuffer, ib);
    RELEASE(CudaEpReleaseBuffer, ob);

    mod = 0x42;
    CHECK_ERR(CudaEpCompileModule(prov, "extern \"C\" __global__ void broken( {", "broken.cu", NULL, 0, &mod),
              CUDAEP_CUDA_ERROR, "broken.cu");
    CHECK(mod == 0x42);
}

int main(void) {
    prov = new_provider(NULL);
    test_ptx_launch_with_typed_args();
    test_load_refusals();
    test_nvrtc();
    CHECK_OK(CudaEpReleaseProvider(prov));
    check_no_live_handles();
    return check_result("test_user_kernels");
}
