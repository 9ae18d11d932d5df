/*
 * support.h — helpers for the ABI 2 C tests: providers on the test backend, buffers with
 * distinct non-zero contents, float32 tensors, kernels, external-data files. Every helper
 * checks what it calls (a failure counts through check.h) and returns 0 handles on failure, so
 * a test keeps going and reports every problem.
 */
#ifndef CUDAEP_CTESTS_SUPPORT_H
#define CUDAEP_CTESTS_SUPPORT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/*
 * new_provider: a provider on the test backend with extra options, given as NULL-terminated
 * key/value pairs: new_provider("prefill_double_buffer", "true", NULL).
 */
static inline CudaEpProvider new_provider(const char* key, ...) {
    CudaEpOptions o = new_test_options();
    va_list ap;
    va_start(ap, key);
    for (const char* k = key; k != NULL; k = va_arg(ap, const char*)) {
        const char* v = va_arg(ap, const char*);
        CHECK_OK(CudaEpSetOption(o, k, v));
    }
    va_end(ap);
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateProvider(o, &p));
    CHECK_OK(CudaEpReleaseOptions(o));
    return p;
}

/* new_buffer: size bytes of device memory. */
static inline CudaEpBuffer new_buffer(CudaEpProvider p, uint64_t size) {
    CudaEpBuffer b = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpAllocBuffer(p, size, 0, &b));
    return b;
}

/* release: frees a handle of any type the tests make, by its release function. */
#define RELEASE(fn, h)                        \
    do {                                      \
        if ((h) != CUDAEP_NULL_HANDLE) {      \
            CHECK_OK(fn(h));                  \
            (h) = CUDAEP_NULL_HANDLE;         \
        }                                     \
    } while (0)

/* seeded_floats: n deterministic floats in [-1, 1], none of them zero. */
static inline void seeded_floats(float* out, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        float v = (float)((x >> 8) & 0xFFFF) / 32768.0f - 1.0f;
        out[i] = v == 0.0f ? 0.5f : v;
    }
}

/* pattern_bytes: n bytes that are a distinct non-zero function of (seed, index). */
static inline void pattern_bytes(unsigned char* out, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)((i * 7 + seed * 31) % 251 + 1);
}

/* upload_floats: a new buffer holding n floats. */
static inline CudaEpBuffer upload_floats(CudaEpProvider p, const float* f, size_t n) {
    CudaEpBuffer b = new_buffer(p, 4 * n);
    CHECK_OK(CudaEpCopyToDevice(b, 0, f, 4 * n));
    return b;
}

/* download: n bytes of b into out. */
static inline int download(CudaEpBuffer b, void* out, uint64_t n) {
    return CHECK_OK(CudaEpCopyToHost(out, b, 0, n));
}

/* f32_info: a float32 tensor info over shape (rank dims). */
static inline CudaEpTensorInfo f32_info(uint32_t rank, const int64_t* shape) {
    CudaEpTensorInfo i;
    memset(&i, 0, sizeof i);
    i.dtype = CUDAEP_DTYPE_FLOAT32;
    i.rank = rank;
    i.shape = shape;
    return i;
}

/* tensor_at: a tensor of dtype and shape on memory at byte offset. */
static inline CudaEpTensor tensor_at(uint64_t memory, uint64_t offset, int32_t dtype, uint32_t rank,
                                     const int64_t* shape) {
    CudaEpTensor t;
    memset(&t, 0, sizeof t);
    t.info.dtype = dtype;
    t.info.rank = rank;
    t.info.shape = shape;
    t.memory = memory;
    t.offset = offset;
    return t;
}

/* f32_tensor: a float32 tensor at the start of memory. */
static inline CudaEpTensor f32_tensor(uint64_t memory, uint32_t rank, const int64_t* shape) {
    return tensor_at(memory, 0, CUDAEP_DTYPE_FLOAT32, rank, shape);
}

/* get_kernel: a kernel for op over float32 inputs (each given as rank + shape pointer). */
static inline CudaEpKernel get_kernel(CudaEpProvider p, const char* op, int32_t opset, size_t n,
                                      const CudaEpTensorInfo* inputs) {
    CudaEpKernel k = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(p, op, opset, inputs, n, NULL, 0, &k));
    return k;
}

/* exec1/exec2: execute a kernel with one or two inputs and one output. */
static inline int exec1(CudaEpKernel k, CudaEpTensor in, CudaEpTensor out) {
    return CHECK_OK(CudaEpKernelExecute(k, &in, 1, &out, 1));
}

static inline int exec2(CudaEpKernel k, CudaEpTensor a, CudaEpTensor b, CudaEpTensor out) {
    CudaEpTensor ins[2] = {a, b};
    return CHECK_OK(CudaEpKernelExecute(k, ins, 2, &out, 1));
}

/* near: whether got is within a relative/absolute tolerance of want. */
static inline int near(double got, double want) {
    return fabs(got - want) <= 1e-4 * (1.0 + fabs(want));
}

/* check_floats_near: every element of got is near want. */
#define CHECK_FLOATS_NEAR(got, want, n)                                                            \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                                              \
            if (!near((got)[i_], (want)[i_])) {                                                    \
                check_fail(__FILE__, __LINE__, "%s[%zu] is %g, want %g", #got, i_, (double)(got)[i_], \
                           (double)(want)[i_]);                                                    \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* temp_path: a fresh file name in $TMPDIR (or /tmp) for name; the caller unlinks it. */
static inline void temp_path(char* out, size_t cap, const char* name) {
    const char* dir = getenv("TMPDIR");
    snprintf(out, cap, "%s/cudaep-%ld-%s", (dir && *dir) ? dir : "/tmp", (long)getpid(), name);
}

/* write_file: writes n bytes to path. */
static inline int write_file(const char* path, const void* data, size_t n) {
    FILE* f = fopen(path, "wb");
    if (f == NULL) {
        check_fail(__FILE__, __LINE__, "cannot create %s", path);
        return 0;
    }
    int ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) check_fail(__FILE__, __LINE__, "cannot write %s", path);
    return ok;
}

#endif /* CUDAEP_CTESTS_SUPPORT_H */
