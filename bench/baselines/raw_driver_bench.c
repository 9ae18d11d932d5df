/*
 * raw_driver_bench: host cost per call of the hot CUDA driver calls, made directly from C.
 *
 * It is the baseline for the Go benchmarks of package cudadrv/cuda (BenchmarkLaunchKernel,
 * BenchmarkMemcpyHtoDAsync, BenchmarkEventRecord, BenchmarkGraphLaunch), which make the same
 * calls the same way: an empty kernel launch (kernel from embedded PTX, no parameters), a 4-byte
 * host-to-device copy from pinned memory, an event record (timing disabled), and the launch of
 * a graph holding one empty kernel, all on one non-blocking stream of device 0's primary
 * context. Only the enqueueing is timed: the stream is synchronized every SYNC_EVERY calls with
 * the clock stopped. Each measurement is the median of REPS repetitions of CALLS calls, after a
 * warm-up.
 *
 * Output, one line per call:  raw <name> <ns/call>
 *
 * Build:  gcc -O2 -I/usr/local/cuda/include raw_driver_bench.c \
 *             -L/usr/local/cuda/lib64/stubs -lcuda -o raw_driver_bench
 * Usage:  raw_driver_bench [calls-per-repetition]   (default 20000)
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define REPS 7
#define WARMUP 2000
#define SYNC_EVERY 1000

static const char ptx[] =
    ".version 8.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry empty()\n"
    "{\n"
    "\tret;\n"
    "}\n";

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            const char *name_ = NULL;                                            \
            cuGetErrorName(r_, &name_);                                          \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,   \
                    name_ ? name_ : "?", (int)r_);                               \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

enum op { OP_LAUNCH, OP_HTOD, OP_EVENT, OP_GRAPH };

static const char *op_names[] = {"LaunchKernel", "MemcpyHtoDAsync", "EventRecord", "GraphLaunch"};

struct state {
    CUstream stream;
    CUfunction empty;
    CUdeviceptr dev;
    void *pinned;
    CUevent event;
    CUgraphExec exec;
};

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void call(const struct state *s, enum op op) {
    switch (op) {
    case OP_LAUNCH:
        CHECK(cuLaunchKernel(s->empty, 1, 1, 1, 1, 1, 1, 0, s->stream, NULL, NULL));
        break;
    case OP_HTOD:
        CHECK(cuMemcpyHtoDAsync(s->dev, s->pinned, 4, s->stream));
        break;
    case OP_EVENT:
        CHECK(cuEventRecord(s->event, s->stream));
        break;
    case OP_GRAPH:
        CHECK(cuGraphLaunch(s->exec, s->stream));
        break;
    }
}

/* run makes n calls and returns the time spent enqueueing them, in ns. */
static double run(const struct state *s, enum op op, int n) {
    double total = 0;
    int i = 0;
    while (i < n) {
        int batch = n - i < SYNC_EVERY ? n - i : SYNC_EVERY;
        double t0 = now_ns();
        for (int j = 0; j < batch; j++) {
            call(s, op);
        }
        total += now_ns() - t0;
        CHECK(cuStreamSynchronize(s->stream));
        i += batch;
    }
    return total;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    if (calls <= 0) {
        fprintf(stderr, "usage: %s [calls-per-repetition]\n", argv[0]);
        return 2;
    }

    CUdevice device;
    CUcontext ctx;
    CUmodule module;
    CUgraph graph;
    struct state s;

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING));
    CHECK(cuModuleLoadData(&module, ptx));
    CHECK(cuModuleGetFunction(&s.empty, module, "empty"));
    CHECK(cuMemAlloc(&s.dev, 4));
    CHECK(cuMemHostAlloc(&s.pinned, 4, CU_MEMHOSTALLOC_PORTABLE));
    ((unsigned char *)s.pinned)[0] = 1;
    CHECK(cuEventCreate(&s.event, CU_EVENT_DISABLE_TIMING));

    CHECK(cuStreamBeginCapture(s.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK(cuLaunchKernel(s.empty, 1, 1, 1, 1, 1, 1, 0, s.stream, NULL, NULL));
    CHECK(cuStreamEndCapture(s.stream, &graph));
    CHECK(cuGraphInstantiateWithFlags(&s.exec, graph, 0));
    CHECK(cuGraphUpload(s.exec, s.stream));
    CHECK(cuStreamSynchronize(s.stream));

    for (int op = OP_LAUNCH; op <= OP_GRAPH; op++) {
        double per_call[REPS];
        run(&s, (enum op)op, WARMUP);
        for (int r = 0; r < REPS; r++) {
            per_call[r] = run(&s, (enum op)op, calls) / calls;
        }
        qsort(per_call, REPS, sizeof per_call[0], cmp_double);
        printf("raw %s %.1f\n", op_names[op], per_call[REPS / 2]);
    }

    CHECK(cuGraphExecDestroy(s.exec));
    CHECK(cuGraphDestroy(graph));
    CHECK(cuEventDestroy(s.event));
    CHECK(cuMemFreeHost(s.pinned));
    CHECK(cuMemFree(s.dev));
    CHECK(cuModuleUnload(module));
    CHECK(cuStreamDestroy(s.stream));
    CHECK(cuDevicePrimaryCtxRelease(device));
    return 0;
}
