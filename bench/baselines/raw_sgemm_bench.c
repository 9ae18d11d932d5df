/*
 * raw_sgemm_bench: the raw cuBLAS baseline of bench/cudaep-bench's MatMul row. It computes the
 * row-major float32 product Y[M,N] = A[M,K] x B[K,N] with cublasSgemm in cuBLAS's default math
 * mode (no TF32), exactly as ep's MatMul kernel calls it (column-major: Y^T = B^T A^T), on a
 * non-blocking stream of device 0's primary context, from random inputs in +-[0.25, 1).
 *
 * Each sample runs PER_SAMPLE products between two stream synchronizations on the host clock
 * and reports TFLOP/s (2*M*N*K*PER_SAMPLE / seconds); REPS samples follow one warm-up sample.
 * Before timing, 32 random entries of one product are compared with a float64 host reference
 * (relative error under 1e-4, no NaN).
 *
 * Output (see bench/cudaep-bench/external.go):  info ...  and  sample sgemm TFLOP/s V1 V2 ...
 *
 * Build (bench/scripts/bench-gpu.sh does this on the GPU machine):
 *   gcc -O2 -Wall -Wextra -I/usr/local/cuda/include raw_sgemm_bench.c \
 *       -L/usr/local/cuda/lib64 -lcublas -lcuda -lm -o raw_sgemm_bench
 * Usage: raw_sgemm_bench M K N PER_SAMPLE REPS
 */
#include <cublas_v2.h>
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                         \
            const char *name_ = NULL;                                                     \
            cuGetErrorName(r_, &name_);                                                   \
            fprintf(stderr, "raw_sgemm_bench: %s:%d: %s: %s (%d)\n", __FILE__, __LINE__, \
                    #call, name_ ? name_ : "?", (int)r_);                                 \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK_BLAS(call)                                                                  \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
            fprintf(stderr, "raw_sgemm_bench: %s:%d: %s: cublas status %d\n", __FILE__,  \
                    __LINE__, #call, (int)s_);                                            \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* rnd is a small deterministic generator (xorshift64*): the inputs need not be secret, only
 * random-looking and never zero. */
static unsigned long long rnd_state = 0x9E3779B97F4A7C15ULL;
static double rnd(void) {
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return (double)((rnd_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static float random_value(void) {
    float v = 0.25f + 0.75f * (float)rnd();
    return rnd() < 0.5 ? -v : v;
}

struct gemm {
    cublasHandle_t h;
    CUstream stream;
    int m, k, n;
    CUdeviceptr a, b, y;
};

/* run queues one product: row-major Y = A B is column-major Y^T = B^T A^T. */
static void run(const struct gemm *g) {
    const float alpha = 1, beta = 0;
    CHECK_BLAS(cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->m, g->k, &alpha, (const float *)g->b, g->n,
                           (const float *)g->a, g->k, &beta, (float *)g->y, g->n));
}

static void check(const struct gemm *g, const float *ha, const float *hb) {
    CHECK(cuMemsetD8Async(g->y, 0xff, sizeof(float) * (size_t)g->m * (size_t)g->n, g->stream)); /* NaN */
    run(g);
    CHECK(cuStreamSynchronize(g->stream));
    double num = 0, den = 0;
    for (int t = 0; t < 32; t++) {
        int i = (int)(rnd() * g->m), j = (int)(rnd() * g->n);
        float got;
        CHECK(cuMemcpyDtoH(&got, g->y + sizeof(float) * ((size_t)i * (size_t)g->n + (size_t)j), sizeof got));
        double ref = 0;
        for (int l = 0; l < g->k; l++) {
            ref += (double)ha[(size_t)i * g->k + l] * (double)hb[(size_t)l * g->n + j];
        }
        if (isnan(got)) {
            fprintf(stderr, "raw_sgemm_bench: entry [%d,%d] not written\n", i, j);
            exit(1);
        }
        num += (got - ref) * (got - ref);
        den += ref * ref;
    }
    double rel = sqrt(num / den);
    if (!(rel < 1e-4)) {
        fprintf(stderr, "raw_sgemm_bench: relative error %g against the float64 reference\n", rel);
        exit(1);
    }
    printf("info sgemm_check relative error %.3g at 32 sampled entries\n", rel);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s M K N PER_SAMPLE REPS\n", argv[0]);
        return 2;
    }
    struct gemm g;
    g.m = atoi(argv[1]);
    g.k = atoi(argv[2]);
    g.n = atoi(argv[3]);
    int per = atoi(argv[4]), reps = atoi(argv[5]);
    if (g.m <= 0 || g.k <= 0 || g.n <= 0 || per <= 0 || reps <= 0 || reps > 1000) {
        fprintf(stderr, "raw_sgemm_bench: bad sizes\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    int version;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
    CHECK_BLAS(cublasCreate(&g.h));
    CHECK_BLAS(cublasSetStream(g.h, (cudaStream_t)g.stream));
    CHECK_BLAS(cublasSetMathMode(g.h, CUBLAS_DEFAULT_MATH));
    CHECK_BLAS(cublasGetVersion(g.h, &version));
    printf("info cublas_version %d\n", version);

    size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n, ny = (size_t)g.m * g.n;
    float *ha = malloc(sizeof(float) * na), *hb = malloc(sizeof(float) * nb);
    for (size_t i = 0; i < na; i++) {
        ha[i] = random_value();
    }
    for (size_t i = 0; i < nb; i++) {
        hb[i] = random_value();
    }
    CHECK(cuMemAlloc(&g.a, sizeof(float) * na));
    CHECK(cuMemAlloc(&g.b, sizeof(float) * nb));
    CHECK(cuMemAlloc(&g.y, sizeof(float) * ny));
    CHECK(cuMemcpyHtoD(g.a, ha, sizeof(float) * na));
    CHECK(cuMemcpyHtoD(g.b, hb, sizeof(float) * nb));
    check(&g, ha, hb);

    double flop = 2.0 * g.m * g.n * g.k * per;
    printf("sample sgemm TFLOP/s");
    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms up */
        double t0 = now_s();
        for (int i = 0; i < per; i++) {
            run(&g);
        }
        CHECK(cuStreamSynchronize(g.stream));
        double tflops = flop / (now_s() - t0) / 1e12;
        if (rep >= 0) {
            printf(" %.4f", tflops);
        }
    }
    printf("\n");

    CHECK_BLAS(cublasDestroy(g.h));
    CHECK(cuMemFree(g.a));
    CHECK(cuMemFree(g.b));
    CHECK(cuMemFree(g.y));
    CHECK(cuStreamDestroy(g.stream));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    free(ha);
    free(hb);
    return 0;
}
