/*
 * raw_inproc: the raw C driver baselines of bench/cudaep-bench, built as a shared library that
 * the benchmark loads into its own process (cudaep-bench through purego, the C ABI client
 * bench/baselines/capi_replay_bench.c through dlopen). Each function runs a whole timed loop in C
 * and returns the nanoseconds it took, so the one call into it per sample costs nothing
 * measurable, and the raw arm runs on the same thread of the same process as the arm it is
 * compared with, alternating with it: whatever the process or the machine's placement of it
 * adds (measured between separate processes on the H200: up to 0.9 us on one graph launch)
 * is shared by both sides.
 *
 * The device work is raw_step_bench.c's: N launches of cudaep_add_f32 (ep's float32 Add, from
 * ep/kernels/ptx/elementwise.ptx) chained over three buffers of 1024 floats, captured into a
 * graph instantiated with node priority and uploaded, on a non-blocking stream of the highest
 * priority in device 0's primary context (the context cudaep's providers use).
 *
 * The library needs no CUDA header at build time: it loads libcuda.so.1 with dlopen and
 * declares the few entry points it calls with the driver API's C types spelled out.
 *
 * Functions (all return >= 0 nanoseconds of the timed part, or < 0 on failure, with the
 * message in rawbench_error()):
 *
 *   rawbench_open(ptx)                 set everything up; the 4-kernel step is checked bit for
 *                                      bit against a host reference first
 *   rawbench_replay_sync(n, iters)     iters x (cuGraphLaunch + cuStreamSynchronize)
 *   rawbench_replay_word(n, iters)     iters x (cuGraphLaunch + cuStreamWriteValue32 of the next
 *                                      number into a mapped pinned word + spin until it arrives)
 *   rawbench_back_to_back(n, launches) launches x cuGraphLaunch, then one cuStreamSynchronize
 *   rawbench_enqueue_graph(calls, every) host time of calls x cuGraphLaunch (1-kernel step),
 *                                      the stream synchronized every `every` with the clock
 *                                      stopped
 *   rawbench_eager(calls, every)       the same for cuLaunchKernel of the Add over 4096 floats
 *   rawbench_close()
 *
 * n is 1, 4 or 32. Every function first makes the primary context current on the calling
 * thread (off the clock). Not thread-safe: one caller at a time.
 *
 * Build (bench/scripts/bench-gpu.sh does this):
 *   gcc -O2 -Wall -Wextra -shared -fPIC raw_inproc.c -ldl -o libcudaep_rawbench.so
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_NON_BLOCKING 0x1
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY 8ull
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

#define STEP_ELEMS 1024
#define EAGER_ELEMS 4096
#define BLOCK 256

/* The driver entry points, resolved by rawbench_open. */
static struct {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetStreamPriorityRange)(int *, int *);
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned, int);
    CUresult (*cuStreamDestroy_v2)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamWriteValue32_v2)(CUstream, CUdeviceptr, uint32_t, unsigned);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemHostGetDevicePointer_v2)(CUdeviceptr *, void *, unsigned);
    CUresult (*cuStreamBeginCapture_v2)(CUstream, int);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphUpload)(CUgraphExec, CUstream);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuGetErrorName)(CUresult, const char **);
} drv;

static const char *const drv_names[] = {
    "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent", "cuCtxGetStreamPriorityRange", "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamWriteValue32_v2", "cuModuleLoadData",
    "cuModuleUnload", "cuModuleGetFunction", "cuLaunchKernel", "cuMemAlloc_v2", "cuMemFree_v2",
    "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemHostAlloc", "cuMemFreeHost",
    "cuMemHostGetDevicePointer_v2", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags", "cuGraphUpload", "cuGraphLaunch", "cuGraphExecDestroy",
    "cuGraphDestroy", "cuGetErrorName",
};

static const int step_kernels[3] = {1, 4, 32};

static struct {
    int open;
    void *lib;
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    CUmodule module;
    CUfunction add;
    CUdeviceptr a, b, c, ea, eb, ec;
    CUgraph graph[3];
    CUgraphExec exec[3];
    uint32_t *word; /* mapped pinned host memory the stream writes; read with atomic loads */
    CUdeviceptr word_dev;
    uint32_t last;
} rig;

static char errbuf[512];

/* rawbench_error returns the message of the last failure. */
const char *rawbench_error(void) { return errbuf; }

static int64_t fail(const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(errbuf, sizeof errbuf, format, ap);
    va_end(ap);
    return -1;
}

/* TRY returns -1 from the enclosing function, with the call and the driver's error name in
 * rawbench_error(), when a driver call fails. */
#define TRY(call)                                                                      \
    do {                                                                               \
        CUresult r_ = (call);                                                          \
        if (r_ != 0) {                                                                 \
            const char *name_ = NULL;                                                  \
            if (drv.cuGetErrorName) {                                                  \
                drv.cuGetErrorName(r_, &name_);                                        \
            }                                                                          \
            return fail("%s:%d: %s: %s (%d)", __FILE__, __LINE__, #call, name_ ? name_ : "?", r_); \
        }                                                                              \
    } while (0)

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t launch_add(CUdeviceptr out, CUdeviceptr x, CUdeviceptr y, unsigned long long n) {
    void *params[4] = {&out, &x, &y, &n};
    unsigned grid = (unsigned)((n + BLOCK - 1) / BLOCK);
    TRY(drv.cuLaunchKernel(rig.add, grid, 1, 1, BLOCK, 1, 1, 0, rig.stream, params, NULL));
    return 0;
}

/* chain queues the first kernels links of the step: c = a + b, a = c + b, ... */
static int64_t chain(int kernels) {
    for (int k = 0; k < kernels; k++) {
        int64_t r = k % 2 == 0 ? launch_add(rig.c, rig.a, rig.b, STEP_ELEMS) : launch_add(rig.a, rig.c, rig.b, STEP_ELEMS);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int64_t fill(CUdeviceptr p, int n, float base) {
    float *h = malloc(sizeof(float) * (size_t)n);
    if (!h) {
        return fail("out of host memory");
    }
    for (int i = 0; i < n; i++) {
        h[i] = base + (float)(i % 4096) * 0.5f + 1.0f;
    }
    CUresult r = drv.cuMemcpyHtoD_v2(p, h, sizeof(float) * (size_t)n);
    free(h);
    TRY(r);
    return 0;
}

/* check_step replays the 4-kernel step from known inputs and compares a with the host's
 * float32 chain, bit for bit. */
static int64_t check_step(void) {
    static float ha[STEP_ELEMS], hb[STEP_ELEMS], got[STEP_ELEMS];
    if (fill(rig.a, STEP_ELEMS, 0.25f) < 0 || fill(rig.b, STEP_ELEMS, 1.25f) < 0) {
        return -1;
    }
    TRY(drv.cuMemcpyDtoH_v2(ha, rig.a, sizeof ha));
    TRY(drv.cuMemcpyDtoH_v2(hb, rig.b, sizeof hb));
    TRY(drv.cuGraphLaunch(rig.exec[1], rig.stream));
    TRY(drv.cuStreamSynchronize(rig.stream));
    TRY(drv.cuMemcpyDtoH_v2(got, rig.a, sizeof got));
    for (int i = 0; i < STEP_ELEMS; i++) {
        float a = ha[i], c = 0;
        for (int k = 0; k < 4; k++) {
            if (k % 2 == 0) {
                c = a + hb[i];
            } else {
                a = c + hb[i];
            }
        }
        if (memcmp(&a, &got[i], sizeof a) != 0) {
            return fail("the 4-kernel step's result [%d] is %g, want %g", i, got[i], a);
        }
    }
    return 0;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        rewind(f);
        buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = 0;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* bind makes the primary context current on the calling thread. */
static int64_t bind(void) {
    if (!rig.open) {
        return fail("rawbench_open was not called (or failed)");
    }
    TRY(drv.cuCtxSetCurrent(rig.ctx));
    return 0;
}

/* step_index maps n (1, 4, 32) to its graph. */
static int step_index(int n) {
    for (int i = 0; i < 3; i++) {
        if (step_kernels[i] == n) {
            return i;
        }
    }
    return -1;
}

int64_t rawbench_open(const char *ptx_path) {
    if (rig.open) {
        return 0;
    }
    memset(&rig, 0, sizeof rig);
    rig.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!rig.lib) {
        return fail("dlopen libcuda.so.1: %s", dlerror());
    }
    /* drv is a struct of function pointers in the order of drv_names. */
    _Static_assert(sizeof drv == sizeof drv_names / sizeof drv_names[0] * sizeof(void *), "drv and drv_names differ");
    for (size_t i = 0; i < sizeof drv_names / sizeof drv_names[0]; i++) {
        void *sym = dlsym(rig.lib, drv_names[i]);
        if (!sym) {
            return fail("libcuda.so.1 lacks %s", drv_names[i]);
        }
        memcpy((char *)&drv + i * sizeof sym, &sym, sizeof sym);
    }
    char *ptx = read_file(ptx_path);
    if (!ptx) {
        return fail("cannot read %s", ptx_path);
    }
    int least, greatest;
    TRY(drv.cuInit(0));
    TRY(drv.cuDeviceGet(&rig.device, 0));
    TRY(drv.cuDevicePrimaryCtxRetain(&rig.ctx, rig.device));
    TRY(drv.cuCtxSetCurrent(rig.ctx));
    TRY(drv.cuCtxGetStreamPriorityRange(&least, &greatest));
    TRY(drv.cuStreamCreateWithPriority(&rig.stream, CU_STREAM_NON_BLOCKING, greatest));
    CUresult r = drv.cuModuleLoadData(&rig.module, ptx);
    free(ptx);
    TRY(r);
    TRY(drv.cuModuleGetFunction(&rig.add, rig.module, "cudaep_add_f32"));
    CUdeviceptr *bufs[6] = {&rig.a, &rig.b, &rig.c, &rig.ea, &rig.eb, &rig.ec};
    for (int i = 0; i < 6; i++) {
        int n = i < 3 ? STEP_ELEMS : EAGER_ELEMS;
        TRY(drv.cuMemAlloc_v2(bufs[i], sizeof(float) * (size_t)n));
        if (fill(*bufs[i], n, (float)i + 0.25f) < 0) {
            return -1;
        }
    }
    for (int s = 0; s < 3; s++) {
        TRY(drv.cuStreamBeginCapture_v2(rig.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        int64_t cr = chain(step_kernels[s]);
        CUresult er = drv.cuStreamEndCapture(rig.stream, &rig.graph[s]);
        if (cr < 0) {
            return cr;
        }
        TRY(er);
        TRY(drv.cuGraphInstantiateWithFlags(&rig.exec[s], rig.graph[s], CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
        TRY(drv.cuGraphUpload(rig.exec[s], rig.stream));
    }
    void *word = NULL;
    TRY(drv.cuMemHostAlloc(&word, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    rig.word = word;
    __atomic_store_n(rig.word, 0, __ATOMIC_RELEASE);
    TRY(drv.cuMemHostGetDevicePointer_v2(&rig.word_dev, word, 0));
    TRY(drv.cuStreamSynchronize(rig.stream));
    rig.open = 1;
    return check_step();
}

int64_t rawbench_replay_sync(int n, int iters) {
    int s = step_index(n);
    if (s < 0 || bind() < 0) {
        return s < 0 ? fail("no %d-kernel step", n) : -1;
    }
    int64_t t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        TRY(drv.cuGraphLaunch(rig.exec[s], rig.stream));
        TRY(drv.cuStreamSynchronize(rig.stream));
    }
    return now_ns() - t0;
}

/* spin_until reads the word until it reaches seq (modulo 2^32). After a second without it,
 * it synchronizes the stream (a fault shows there) and fails if the number still has not
 * arrived. */
static int64_t spin_until(uint32_t seq) {
    int64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        if ((int32_t)(__atomic_load_n(rig.word, __ATOMIC_ACQUIRE) - seq) >= 0) {
            return 0;
        }
        cpu_pause();
        if ((i & 1023) == 1023) {
            if (t0 == 0) {
                t0 = now_ns();
            } else if (now_ns() - t0 > 1000000000) {
                TRY(drv.cuStreamSynchronize(rig.stream));
                if ((int32_t)(__atomic_load_n(rig.word, __ATOMIC_ACQUIRE) - seq) >= 0) {
                    return 0;
                }
                return fail("the mapped word holds %u after a synchronization, not %u", __atomic_load_n(rig.word, __ATOMIC_ACQUIRE), seq);
            }
        }
    }
}

int64_t rawbench_replay_word(int n, int iters) {
    int s = step_index(n);
    if (s < 0 || bind() < 0) {
        return s < 0 ? fail("no %d-kernel step", n) : -1;
    }
    int64_t t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        TRY(drv.cuGraphLaunch(rig.exec[s], rig.stream));
        uint32_t seq = ++rig.last;
        TRY(drv.cuStreamWriteValue32_v2(rig.stream, rig.word_dev, seq, 0));
        if (spin_until(seq) < 0) {
            return -1;
        }
    }
    return now_ns() - t0;
}

int64_t rawbench_back_to_back(int n, int launches) {
    int s = step_index(n);
    if (s < 0 || bind() < 0) {
        return s < 0 ? fail("no %d-kernel step", n) : -1;
    }
    TRY(drv.cuStreamSynchronize(rig.stream));
    int64_t t0 = now_ns();
    for (int i = 0; i < launches; i++) {
        TRY(drv.cuGraphLaunch(rig.exec[s], rig.stream));
    }
    TRY(drv.cuStreamSynchronize(rig.stream));
    return now_ns() - t0;
}

/* enqueue times calls enqueues (graph launches, or eager Adds), synchronizing every `every`
 * with the clock stopped. */
static int64_t enqueue(int calls, int every, int eager) {
    if (bind() < 0) {
        return -1;
    }
    if (every < 1) {
        return fail("every is %d", every);
    }
    TRY(drv.cuStreamSynchronize(rig.stream));
    int64_t spent = 0;
    for (int done = 0; done < calls;) {
        int batch = calls - done < every ? calls - done : every;
        int64_t t0 = now_ns();
        for (int i = 0; i < batch; i++) {
            if (eager) {
                if (launch_add(rig.ec, rig.ea, rig.eb, EAGER_ELEMS) < 0) {
                    return -1;
                }
            } else {
                TRY(drv.cuGraphLaunch(rig.exec[0], rig.stream));
            }
        }
        spent += now_ns() - t0;
        TRY(drv.cuStreamSynchronize(rig.stream));
        done += batch;
    }
    return spent;
}

int64_t rawbench_enqueue_graph(int calls, int every) { return enqueue(calls, every, 0); }

int64_t rawbench_eager(int calls, int every) { return enqueue(calls, every, 1); }

void rawbench_close(void) {
    if (!rig.open) {
        return;
    }
    drv.cuCtxSetCurrent(rig.ctx);
    drv.cuStreamSynchronize(rig.stream);
    for (int s = 0; s < 3; s++) {
        drv.cuGraphExecDestroy(rig.exec[s]);
        drv.cuGraphDestroy(rig.graph[s]);
    }
    CUdeviceptr bufs[6] = {rig.a, rig.b, rig.c, rig.ea, rig.eb, rig.ec};
    for (int i = 0; i < 6; i++) {
        drv.cuMemFree_v2(bufs[i]);
    }
    drv.cuMemFreeHost(rig.word);
    drv.cuModuleUnload(rig.module);
    drv.cuStreamDestroy_v2(rig.stream);
    drv.cuDevicePrimaryCtxRelease_v2(rig.device);
    rig.open = 0;
}
