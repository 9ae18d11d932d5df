/*
 * capi_replay_bench: bench/cudaep-bench's rows "through the C ABI" — what a C inference server
 * pays when it drives cudaep through include/cudaep.h and libcudaep.so, measured the same way
 * as the raw C driver baselines of raw_step_bench.c on the same device work:
 *
 *   the decode step   N executions of one cudaep Add kernel (float32[1024] + float32[1024]),
 *                     chained over three buffers: c = a + b, a = c + b, ... captured into the
 *                     PRIMARY graph slot;
 *
 *   replay/N       CudaEpReplay + CudaEpSynchronizeCompute per step, N = 1, 4, 32 (the wait
 *                  the ABI offers a host; CudaEpSynchronize is deferred by design), on a
 *                  provider with the default options (wait_mode=auto)
 *   replay_block/N the same on a second provider created with wait_mode=block (the driver's
 *                  stream synchronization), measured in turn with replay/N
 *   b2b/N          back-to-back replays: L x CudaEpReplay, then one CudaEpSynchronizeCompute,
 *                  in us per replay (L = 2000; 50 quick)
 *   enqueue_graph  host time of one CudaEpReplay of the 1-kernel step; CudaEpSynchronizeCompute
 *                  every SYNC_EVERY calls with the clock stopped
 *   eager_execute  host time of one CudaEpKernelExecute of Add over float32[4096], the same way
 *   allocs/device  device allocations over the replay samples (CudaEpProviderGetStats): 0
 *   diag_export_version, diag_export_sync
 *                  CudaEpGetVersion and CudaEpSynchronize (deferred: no device work), the cost
 *                  of one call into the library
 *   raw_replay/N, raw_b2b/N, raw_enqueue_graph, raw_eager
 *                  the raw C baselines of the rows above measured in this process, alternating
 *                  with them: bench/baselines/raw_inproc.c, loaded with dlopen from RAWLIB (its own
 *                  stream, graphs and buffers in the same primary context), when RAWLIB is
 *                  given and the backend is cuda
 *
 * Before timing, the 4-kernel step's result is checked bit for bit against a host reference.
 * Every call's status is checked; a failure prints the library's message and exits 1.
 *
 * Output: the line format bench/cudaep-bench parses (see bench/cudaep-bench/external.go).
 *
 * Build (bench/scripts/bench-gpu.sh does this):
 *   gcc -O2 -Wall -Wextra -Iinclude capi_replay_bench.c -Lbuild/bench -lcudaep \
 *       -Wl,-rpath,'$ORIGIN' -o build/bench/capi_replay_bench
 * Usage: capi_replay_bench quick|full [cuda|sim] [RAWLIB PTX]
 *        (sim runs it without a GPU, for testing; RAWLIB is libcudaep_rawbench.so, PTX the
 *        path of ep/kernels/ptx/elementwise.ptx)
 */
#include "cudaep.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEP_ELEMS 1024
#define EAGER_ELEMS 4096
#define MAX_REPS 64

/* CHECK aborts the run with the library's message when a call fails. */
#define CHECK(call)                                                                           \
    do {                                                                                      \
        CudaEpStatus *st_ = (call);                                                           \
        if (st_ != NULL) {                                                                    \
            fprintf(stderr, "capi_replay_bench: %s:%d: %s: %s: %s\n", __FILE__, __LINE__,    \
                    #call, CudaEpGetErrorCodeName(CudaEpGetErrorCode(st_)),                   \
                    CudaEpGetErrorMessage(st_));                                              \
            CudaEpReleaseStatus(st_);                                                         \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

struct sizes {
    int reps;
    int step_iters[3];
    int enqueue_calls, sync_every;
    int b2b_launches;
};

static const int step_kernels[3] = {1, 4, 32};
static const struct sizes full_sizes = {15, {500, 500, 150}, 2000, 100, 2000};
static const struct sizes quick_sizes = {5, {20, 20, 5}, 200, 50, 50};

/* raw is the in-process raw C baseline library (raw_inproc.c), or all NULL without one. */
static struct {
    int64_t (*replay_sync)(int n, int iters);
    int64_t (*back_to_back)(int n, int launches);
    int64_t (*enqueue_graph)(int calls, int every);
    int64_t (*eager)(int calls, int every);
    const char *(*error)(void);
} raw;

/* open_raw loads the raw C library and opens it on ptx; without it the raw_* series are left
 * out, after a skip line saying why. */
static void open_raw(const char *path, const char *ptx) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("skip raw_inproc cannot load %s: %s\n", path, dlerror());
        return;
    }
    int64_t (*open)(const char *) = (int64_t(*)(const char *))dlsym(lib, "rawbench_open");
    raw.error = (const char *(*)(void))dlsym(lib, "rawbench_error");
    raw.replay_sync = (int64_t(*)(int, int))dlsym(lib, "rawbench_replay_sync");
    raw.back_to_back = (int64_t(*)(int, int))dlsym(lib, "rawbench_back_to_back");
    raw.enqueue_graph = (int64_t(*)(int, int))dlsym(lib, "rawbench_enqueue_graph");
    raw.eager = (int64_t(*)(int, int))dlsym(lib, "rawbench_eager");
    if (!open || !raw.error || !raw.replay_sync || !raw.back_to_back || !raw.enqueue_graph || !raw.eager) {
        printf("skip raw_inproc %s lacks an entry point\n", path);
        memset(&raw, 0, sizeof raw);
        return;
    }
    if (open(ptx) < 0) {
        printf("skip raw_inproc rawbench_open: %s\n", raw.error());
        memset(&raw, 0, sizeof raw);
    }
}

/* raw_us turns a raw library result (nanoseconds, or < 0 on failure) into us per op. */
static double raw_us(int64_t ns, int per) {
    if (ns < 0) {
        fprintf(stderr, "capi_replay_bench: raw C baseline: %s\n", raw.error());
        exit(1);
    }
    return (double)ns / 1e3 / per;
}

/* rig is one provider with the step's buffers and kernels. */
struct rig {
    CudaEpProvider p;
    CudaEpKernel add;                 /* Add float32[1024] + float32[1024] */
    CudaEpKernel eager;               /* Add float32[4096] + float32[4096] */
    CudaEpBuffer a, b, c, ea, eb, ec; /* step and eager buffers */
    int64_t step_shape[1], eager_shape[1];
    CudaEpTensor in[2][2], out[2][1]; /* the two links of the chain */
    CudaEpTensor ein[2], eout[1];
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static CudaEpTensor tensor(CudaEpBuffer buf, const int64_t *shape) {
    CudaEpTensor t;
    memset(&t, 0, sizeof t);
    t.info.dtype = CUDAEP_DTYPE_FLOAT32;
    t.info.rank = 1;
    t.info.shape = shape;
    t.info.strides = NULL;
    t.memory = buf;
    t.offset = 0;
    return t;
}

static void fill_pattern(CudaEpBuffer buf, int n, float base) {
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        h[i] = base + (float)(i % 4096) * 0.5f + 1.0f;
    }
    CHECK(CudaEpCopyToDevice(buf, 0, h, sizeof(float) * (uint64_t)n));
    free(h);
}

static CudaEpKernel add_kernel(CudaEpProvider p, const int64_t *shape) {
    CudaEpTensorInfo info[2];
    memset(info, 0, sizeof info);
    for (int i = 0; i < 2; i++) {
        info[i].dtype = CUDAEP_DTYPE_FLOAT32;
        info[i].rank = 1;
        info[i].shape = shape;
    }
    CudaEpKernel k;
    CHECK(CudaEpGetKernel(p, "Add", 14, info, 2, NULL, 0, &k));
    return k;
}

/* open_rig opens a provider on backend (with wait_mode set when wait_mode is not NULL) and
 * the step's buffers and kernels on it. */
static void open_rig(struct rig *r, const char *backend, const char *wait_mode) {
    CudaEpOptions opts;
    CHECK(CudaEpCreateOptions(&opts));
    CHECK(CudaEpSetOption(opts, "backend", backend));
    if (wait_mode != NULL) {
        CHECK(CudaEpSetOption(opts, "wait_mode", wait_mode));
    }
    CHECK(CudaEpCreateProvider(opts, &r->p));
    CHECK(CudaEpReleaseOptions(opts));
    r->step_shape[0] = STEP_ELEMS;
    r->eager_shape[0] = EAGER_ELEMS;
    r->add = add_kernel(r->p, r->step_shape);
    r->eager = add_kernel(r->p, r->eager_shape);
    CudaEpBuffer *bufs[6] = {&r->a, &r->b, &r->c, &r->ea, &r->eb, &r->ec};
    for (int i = 0; i < 6; i++) {
        int n = i < 3 ? STEP_ELEMS : EAGER_ELEMS;
        CHECK(CudaEpAllocBuffer(r->p, sizeof(float) * (uint64_t)n, 0, bufs[i]));
        fill_pattern(*bufs[i], n, (float)i + 0.25f);
    }
    r->in[0][0] = tensor(r->a, r->step_shape);
    r->in[0][1] = tensor(r->b, r->step_shape);
    r->out[0][0] = tensor(r->c, r->step_shape);
    r->in[1][0] = tensor(r->c, r->step_shape);
    r->in[1][1] = tensor(r->b, r->step_shape);
    r->out[1][0] = tensor(r->a, r->step_shape);
    r->ein[0] = tensor(r->ea, r->eager_shape);
    r->ein[1] = tensor(r->eb, r->eager_shape);
    r->eout[0] = tensor(r->ec, r->eager_shape);
}

static void close_rig(struct rig *r) {
    CHECK(CudaEpForceSynchronize(r->p));
    CudaEpBuffer bufs[6] = {r->a, r->b, r->c, r->ea, r->eb, r->ec};
    for (int i = 0; i < 6; i++) {
        CHECK(CudaEpReleaseBuffer(bufs[i]));
    }
    CHECK(CudaEpReleaseKernel(r->add));
    CHECK(CudaEpReleaseKernel(r->eager));
    CHECK(CudaEpReleaseProvider(r->p));
}

/* capture records an n-kernel step into the PRIMARY slot. */
static void capture(const struct rig *r, int n) {
    CudaEpBuffer retain[3] = {r->a, r->b, r->c};
    CHECK(CudaEpBeginCapture(r->p, CUDAEP_SLOT_PRIMARY, 0, &r->add, 1, retain, 3));
    for (int k = 0; k < n; k++) {
        CHECK(CudaEpKernelExecute(r->add, r->in[k % 2], 2, r->out[k % 2], 1));
    }
    CHECK(CudaEpEndCapture(r->p, CUDAEP_SLOT_PRIMARY, 0));
}

static void reset(const struct rig *r) {
    int32_t had = 0;
    CHECK(CudaEpResetGraph(r->p, CUDAEP_SLOT_PRIMARY, 0, &had));
}

/* check_step replays the installed 4-kernel step once from known inputs and compares a with
 * a + 4b computed on the host in float32, bit for bit. */
static void check_step(const struct rig *r) {
    float ha[STEP_ELEMS], hb[STEP_ELEMS], got[STEP_ELEMS];
    fill_pattern(r->a, STEP_ELEMS, 0.25f);
    fill_pattern(r->b, STEP_ELEMS, 1.25f);
    CHECK(CudaEpCopyToHost(ha, r->a, 0, sizeof ha));
    CHECK(CudaEpCopyToHost(hb, r->b, 0, sizeof hb));
    CHECK(CudaEpReplay(r->p, CUDAEP_SLOT_PRIMARY, 0));
    CHECK(CudaEpCopyToHost(got, r->a, 0, sizeof got));
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
            fprintf(stderr, "capi_replay_bench: step result [%d] = %g, want %g\n", i, got[i], a);
            exit(1);
        }
    }
}

static void print_series(const char *key, const char *unit, const double *v, int n) {
    printf("sample %s %s", key, unit);
    for (int i = 0; i < n; i++) {
        printf(" %.4f", v[i]);
    }
    printf("\n");
    fflush(stdout);
}

static double replay_sample(const struct rig *r, int iters) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        CHECK(CudaEpReplay(r->p, CUDAEP_SLOT_PRIMARY, 0));
        CHECK(CudaEpSynchronizeCompute(r->p));
    }
    return (now_us() - t0) / iters;
}

static uint64_t device_allocs(const struct rig *r) {
    CudaEpProviderStats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK(CudaEpProviderGetStats(r->p, &st));
    return st.device_allocs;
}

/* b2b_sample queues launches replays back to back and waits once; us per replay. */
static double b2b_sample(const struct rig *r, int launches) {
    double t0 = now_us();
    for (int i = 0; i < launches; i++) {
        CHECK(CudaEpReplay(r->p, CUDAEP_SLOT_PRIMARY, 0));
    }
    CHECK(CudaEpSynchronizeCompute(r->p));
    return (now_us() - t0) / launches;
}

/* bench_replay measures replay/N on r (the default options), replay_block/N on rb
 * (wait_mode=block), b2b/N on r and, with the raw library, raw_replay/N and raw_b2b/N, the arms
 * of one kind rotating which goes first. */
static void bench_replay(const struct rig *r, const struct rig *rb, const struct sizes *sz) {
    double allocs[3];
    for (int s = 0; s < 3; s++) {
        int n = step_kernels[s], iters = sz->step_iters[s], arms = raw.replay_sync ? 3 : 2;
        capture(r, n);
        capture(rb, n);
        if (n == 4) {
            check_step(r);
            check_step(rb);
        }
        double v[3][MAX_REPS], b2b[2][MAX_REPS];
        uint64_t before = device_allocs(r);
        for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
            for (int a = 0; a < arms; a++) {
                int which = (a + (rep < 0 ? 0 : rep)) % arms;
                double x = which == 0 ? replay_sample(r, iters)
                         : which == 1 ? replay_sample(rb, iters)
                                      : raw_us(raw.replay_sync(n, iters), iters);
                if (rep >= 0) {
                    v[which][rep] = x;
                }
            }
            for (int a = 0; a < arms - 1; a++) {
                int which = (a + (rep < 0 ? 0 : rep)) % (arms - 1);
                double x = which == 0 ? b2b_sample(r, sz->b2b_launches)
                                      : raw_us(raw.back_to_back(n, sz->b2b_launches), sz->b2b_launches);
                if (rep >= 0) {
                    b2b[which][rep] = x;
                }
            }
        }
        allocs[s] = (double)(device_allocs(r) - before);
        char key[64];
        snprintf(key, sizeof key, "replay/%d", n);
        print_series(key, "us", v[0], sz->reps);
        snprintf(key, sizeof key, "replay_block/%d", n);
        print_series(key, "us", v[1], sz->reps);
        snprintf(key, sizeof key, "b2b/%d", n);
        print_series(key, "us", b2b[0], sz->reps);
        if (raw.replay_sync) {
            snprintf(key, sizeof key, "raw_replay/%d", n);
            print_series(key, "us", v[2], sz->reps);
            snprintf(key, sizeof key, "raw_b2b/%d", n);
            print_series(key, "us", b2b[1], sz->reps);
        }
        reset(r);
        reset(rb);
    }
    print_series("allocs_device", "count", allocs, 3);
}

/* enqueue_sample times sz->enqueue_calls enqueues (a replay, or an eager execute), draining
 * every sz->sync_every calls with the clock stopped; it returns host microseconds per call. */
static double enqueue_sample(const struct rig *r, const struct sizes *sz, int eager) {
    double spent = 0;
    for (int done = 0; done < sz->enqueue_calls;) {
        int batch = sz->enqueue_calls - done < sz->sync_every ? sz->enqueue_calls - done : sz->sync_every;
        double t0 = now_us();
        for (int i = 0; i < batch; i++) {
            if (eager) {
                CHECK(CudaEpKernelExecute(r->eager, r->ein, 2, r->eout, 1));
            } else {
                CHECK(CudaEpReplay(r->p, CUDAEP_SLOT_PRIMARY, 0));
            }
        }
        spent += now_us() - t0;
        CHECK(CudaEpSynchronizeCompute(r->p));
        done += batch;
    }
    return spent / sz->enqueue_calls;
}

/* bench_enqueue measures enqueue_graph and eager_execute and, with the raw library,
 * raw_enqueue_graph and raw_eager, rotating which goes first. */
static void bench_enqueue(const struct rig *r, const struct sizes *sz) {
    capture(r, 1);
    double v[4][MAX_REPS];
    int arms = raw.enqueue_graph ? 4 : 2, calls = sz->enqueue_calls;
    for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
        for (int a = 0; a < arms; a++) {
            int which = (a + (rep < 0 ? 0 : rep)) % arms;
            double x;
            switch (which) {
            case 0:
                x = enqueue_sample(r, sz, 0);
                break;
            case 1:
                x = enqueue_sample(r, sz, 1);
                break;
            case 2:
                x = raw_us(raw.enqueue_graph(calls, sz->sync_every), calls);
                break;
            default:
                x = raw_us(raw.eager(calls, sz->sync_every), calls);
            }
            if (rep >= 0) {
                v[which][rep] = x;
            }
        }
    }
    print_series("enqueue_graph", "us", v[0], sz->reps);
    print_series("eager_execute", "us", v[1], sz->reps);
    if (raw.enqueue_graph) {
        print_series("raw_enqueue_graph", "us", v[2], sz->reps);
        print_series("raw_eager", "us", v[3], sz->reps);
    }
    reset(r);
}

/* bench_exports times C ABI calls that do no device work: CudaEpGetVersion (no handle) and
 * CudaEpSynchronize (a handle lookup; deferred, so it returns at once), the price of crossing
 * into the library that every call pays. */
static void bench_exports(const struct rig *r, const struct sizes *sz) {
    double v[2][MAX_REPS];
    int calls = sz->enqueue_calls;
    for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
        for (int arm = 0; arm < 2; arm++) {
            int which = (arm + (rep < 0 ? 0 : rep)) % 2;
            double t0 = now_us();
            for (int i = 0; i < calls; i++) {
                if (which == 0) {
                    uint32_t abi;
                    CHECK(CudaEpGetVersion(&abi, NULL));
                } else {
                    CHECK(CudaEpSynchronize(r->p));
                }
            }
            if (rep >= 0) {
                v[which][rep] = (now_us() - t0) / calls;
            }
        }
    }
    print_series("diag_export_version", "us", v[0], sz->reps);
    print_series("diag_export_sync", "us", v[1], sz->reps);
}

int main(int argc, char **argv) {
    if ((argc != 2 && argc != 3 && argc != 5) || (strcmp(argv[1], "quick") != 0 && strcmp(argv[1], "full") != 0)) {
        fprintf(stderr, "usage: %s quick|full [cuda|sim] [RAWLIB PTX]\n", argv[0]);
        return 2;
    }
    const struct sizes *sz = strcmp(argv[1], "quick") == 0 ? &quick_sizes : &full_sizes;
    const char *backend = argc >= 3 ? argv[2] : "cuda";
    uint32_t abi = 0;
    const char *lib = NULL;
    CHECK(CudaEpGetVersion(&abi, &lib));
    printf("info abi_version %u\n", (unsigned)abi);
    printf("info library_version %s\n", lib);
    printf("info replay_label CudaEpReplay + CudaEpSynchronizeCompute (C, libcudaep.so)\n");

    struct rig r, rb;
    open_rig(&r, backend, NULL);
    open_rig(&rb, backend, "block");
    if (argc == 5 && strcmp(backend, "cuda") == 0) {
        open_raw(argv[3], argv[4]); /* after the providers: the primary context is theirs */
    }
    bench_replay(&r, &rb, sz);
    bench_enqueue(&r, sz);
    bench_exports(&r, sz);
    close_rig(&rb);
    close_rig(&r);
    uint64_t live = 0;
    CHECK(CudaEpGetLiveHandleCount(&live));
    if (live != 0) {
        fprintf(stderr, "capi_replay_bench: %llu handles still live at exit\n", (unsigned long long)live);
        return 1;
    }
    return 0;
}
