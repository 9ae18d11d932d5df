/*
 * raw_step_bench: the raw C driver baselines of bench/cudaep-bench's graph, enqueue and eager
 * rows. It makes, directly through the CUDA driver API, the calls that cudaep makes through
 * Go, on the same device work:
 *
 *   the decode step   N launches of cudaep_add_f32 (ep's own float32 Add, loaded from
 *                     ep/kernels/ptx/elementwise.ptx) chained over three buffers of 1024
 *                     floats: c = a + b, a = c + b, c = a + b, ... with 256-thread blocks,
 *                     as ep's Add kernel launches it;
 *   the stream        one non-blocking stream of the highest priority, like ep's compute
 *                     stream, on device 0's primary context.
 *
 * Series (every sample is the mean per call or step over a batch; REPS samples after a
 * warm-up; arms measured together alternate their order from one repeat to the next):
 *
 *   replay_stream/N  cuGraphLaunch + cuStreamSynchronize per step, N = 1, 4, 32
 *   replay_ctx/N     cuGraphLaunch + cuCtxSynchronize per step
 *   replay_b2b/N     back-to-back replays: L x cuGraphLaunch, then one cuStreamSynchronize, in us
 *                    per replay (L = 2000; 50 quick), measured in turn with the two above
 *   replay_word_op/N cuGraphLaunch + cuStreamWriteValue32 of the next sequence number into a
 *                    32-bit word of pinned host memory mapped for the device
 *                    (cuMemHostAlloc with DEVICEMAP | PORTABLE), then the host spins on the
 *                    word (PAUSE / YIELD between reads) until the number arrives: the wait
 *                    cudaep's wait_mode=spin makes
 *   replay_word_node/N the same step captured with a cuStreamWriteValue32 of 1 at its end (a
 *                    write-value node); the host sets the word to 0, launches and spins until
 *                    it reads 1 (DESIGN.md measured this one at 5.74-6.08 us for N = 1)
 *                    Where the driver refuses stream writes, or their capture, an "info
 *                    word_unavailable" line says why and those series are left out
 *   enqueue_graph    host time of one cuGraphLaunch of the 1-kernel step; the stream is
 *                    synchronized every SYNC_EVERY launches with the clock stopped
 *   eager_launch     host time of one cuLaunchKernel of cudaep_add_f32 over 4096 floats, the
 *                    same way
 *   capture/N        capture -> ready: begin capture, N launches, end capture, instantiate
 *                    with node priority, upload (teardown untimed)
 *   update/N         recapture of an installed step: begin capture, N launches, end capture,
 *                    cuGraphExecUpdate of the installed executable, destroy the old graph,
 *                    upload
 *   seam_mono        launch of the 4-kernel step + a 4-byte D2H into pageable memory + sync
 *   seam_segmented   launch of kernels 1-2, 4-byte D2H + sync (the host seam), launch of
 *                    kernels 3-4, 4-byte D2H + sync
 *   seam_price       seam_segmented - seam_mono, per repeat
 *   seam_host        the host seam alone: 4-byte D2H + sync with nothing queued
 *   diag_ctx_set, diag_stream_sync_idle, diag_ctx_sync_idle
 *                    cuCtxSetCurrent, and cuStreamSynchronize / cuCtxSynchronize with nothing
 *                    queued: the pieces a miss of the Go rows is explained with
 *   diag_replay_add_plain, diag_replay_empty_plain
 *                    replay_stream/1 in plainer set-ups: a default-priority stream and no
 *                    node-priority flag, with the Add and with an empty kernel
 *
 * Before timing, the 4-kernel step's result is checked bit for bit against a host reference.
 * Every driver call is checked; a failure prints the call and exits with status 1.
 *
 * Output: the line format bench/cudaep-bench parses (see bench/cudaep-bench/external.go):
 *   info KEY VALUE...    and    sample KEY us V1 V2 ...
 *
 * Build (bench/scripts/bench-gpu.sh does this on the GPU machine):
 *   gcc -O2 -Wall -Wextra -I/usr/local/cuda/include raw_step_bench.c -lcuda -o raw_step_bench
 * Usage: raw_step_bench PATH/TO/elementwise.ptx quick|full
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        CUresult r_ = (call);                                                            \
        if (r_ != CUDA_SUCCESS) {                                                        \
            const char *name_ = NULL;                                                    \
            cuGetErrorName(r_, &name_);                                                  \
            fprintf(stderr, "raw_step_bench: %s:%d: %s: %s (%d)\n", __FILE__, __LINE__, \
                    #call, name_ ? name_ : "?", (int)r_);                                \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* CUDA 13 added cuCtxSynchronize_v2(ctx); should a header map the old name onto it, pass NULL
 * (the current context) through the macro. */
#if defined(cuCtxSynchronize)
#define CTX_SYNC() cuCtxSynchronize(NULL)
#else
#define CTX_SYNC() cuCtxSynchronize()
#endif

#define STEP_ELEMS 1024
#define EAGER_ELEMS 4096
#define BLOCK 256
#define MAX_REPS 64

/* sizes are the batch and repeat counts of a run (quick: a smoke test). */
struct sizes {
    int reps;
    int step_iters[3]; /* replay steps per sample for N = 1, 4, 32 */
    int enqueue_calls, sync_every;
    int capture_iters[3];
    int seam_iters;
    int b2b_launches;
};

static const int step_kernels[3] = {1, 4, 32};

static const struct sizes full_sizes = {15, {500, 500, 150}, 2000, 100, {30, 30, 10}, 300, 2000};
static const struct sizes quick_sizes = {5, {20, 20, 5}, 200, 50, {4, 4, 2}, 20, 50};

struct rig {
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    CUmodule module;
    CUfunction add;
    CUdeviceptr a, b, c;    /* the step's buffers */
    CUdeviceptr ea, eb, ec; /* the eager Add's buffers */
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* read_file returns the contents of path, NUL-terminated (PTX is text). */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        exit(1);
    }
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "raw_step_bench: cannot read %s\n", path);
        exit(1);
    }
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* launch_add queues out = x + y over n floats, as ep's Add does. */
static void launch_add(const struct rig *r, CUdeviceptr out, CUdeviceptr x, CUdeviceptr y, unsigned long long n) {
    void *params[4] = {&out, &x, &y, &n};
    unsigned grid = (unsigned)((n + BLOCK - 1) / BLOCK);
    CHECK(cuLaunchKernel(r->add, grid, 1, 1, BLOCK, 1, 1, 0, r->stream, params, NULL));
}

/* chain queues kernels links of the step, starting at link first. */
static void chain(const struct rig *r, int first, int kernels) {
    for (int k = first; k < first + kernels; k++) {
        if (k % 2 == 0) {
            launch_add(r, r->c, r->a, r->b, STEP_ELEMS);
        } else {
            launch_add(r, r->a, r->c, r->b, STEP_ELEMS);
        }
    }
}

/* capture records kernels links of the step into a graph. */
static CUgraph capture(const struct rig *r, int first, int kernels) {
    CUgraph g;
    CHECK(cuStreamBeginCapture(r->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    chain(r, first, kernels);
    CHECK(cuStreamEndCapture(r->stream, &g));
    return g;
}

/* ready instantiates g with node priority (as cudaep's graphs package does) and uploads it. */
static CUgraphExec ready(const struct rig *r, CUgraph g) {
    CUgraphExec e;
    CHECK(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    CHECK(cuGraphUpload(e, r->stream));
    return e;
}

static void print_series(const char *key, const double *v, int n) {
    printf("sample %s us", key);
    for (int i = 0; i < n; i++) {
        printf(" %.4f", v[i]);
    }
    printf("\n");
    fflush(stdout);
}

/* fill_pattern writes n distinct, non-zero, exactly representable floats from base to p. */
static void fill_pattern(const struct rig *r, CUdeviceptr p, int n, float base) {
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        h[i] = base + (float)(i % 4096) * 0.5f + 1.0f;
    }
    CHECK(cuStreamSynchronize(r->stream));
    CHECK(cuMemcpyHtoD(p, h, sizeof(float) * (size_t)n));
    free(h);
}

/* check_step runs the 4-kernel step once from known inputs and compares a with a + 4b
 * computed on the host in float32, bit for bit. */
static void check_step(const struct rig *r, CUgraphExec four) {
    float ha[STEP_ELEMS], hb[STEP_ELEMS], got[STEP_ELEMS];
    fill_pattern(r, r->a, STEP_ELEMS, 0.25f);
    fill_pattern(r, r->b, STEP_ELEMS, 1.25f);
    CHECK(cuMemsetD8(r->c, 0xff, sizeof(float) * STEP_ELEMS));
    CHECK(cuMemcpyDtoH(ha, r->a, sizeof ha));
    CHECK(cuMemcpyDtoH(hb, r->b, sizeof hb));
    CHECK(cuGraphLaunch(four, r->stream));
    CHECK(cuStreamSynchronize(r->stream));
    CHECK(cuMemcpyDtoH(got, r->a, sizeof got));
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
            fprintf(stderr, "raw_step_bench: step result [%d] = %g, want %g\n", i, got[i], a);
            exit(1);
        }
    }
}

static double replay_sample(const struct rig *r, CUgraphExec e, int iters, int ctx_sync) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        CHECK(cuGraphLaunch(e, r->stream));
        if (ctx_sync) {
            CHECK(CTX_SYNC());
        } else {
            CHECK(cuStreamSynchronize(r->stream));
        }
    }
    return (now_us() - t0) / iters;
}

/* b2b_sample queues launches replays back to back and synchronizes once; us per replay. */
static double b2b_sample(const struct rig *r, CUgraphExec e, int launches) {
    double t0 = now_us();
    for (int i = 0; i < launches; i++) {
        CHECK(cuGraphLaunch(e, r->stream));
    }
    CHECK(cuStreamSynchronize(r->stream));
    return (now_us() - t0) / launches;
}

static void bench_replay(const struct rig *r, const struct sizes *sz) {
    for (int s = 0; s < 3; s++) {
        int n = step_kernels[s], iters = sz->step_iters[s];
        CUgraph g = capture(r, 0, n);
        CUgraphExec e = ready(r, g);
        double v[3][MAX_REPS];
        for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
            for (int arm = 0; arm < 3; arm++) {
                int which = (arm + (rep < 0 ? 0 : rep)) % 3;
                double x = which == 2 ? b2b_sample(r, e, sz->b2b_launches) : replay_sample(r, e, iters, which);
                if (rep >= 0) {
                    v[which][rep] = x;
                }
            }
        }
        char key[64];
        snprintf(key, sizeof key, "replay_stream/%d", n);
        print_series(key, v[0], sz->reps);
        snprintf(key, sizeof key, "replay_ctx/%d", n);
        print_series(key, v[1], sz->reps);
        snprintf(key, sizeof key, "replay_b2b/%d", n);
        print_series(key, v[2], sz->reps);
        CHECK(cuStreamSynchronize(r->stream));
        CHECK(cuGraphExecDestroy(e));
        CHECK(cuGraphDestroy(g));
    }
}

/* enqueue_sample times calls enqueues of one operation, synchronizing every sync_every calls
 * with the clock stopped, and returns the host microseconds per call. */
static double enqueue_sample(const struct rig *r, const struct sizes *sz, CUgraphExec e) {
    double spent = 0;
    for (int done = 0; done < sz->enqueue_calls;) {
        int batch = sz->enqueue_calls - done < sz->sync_every ? sz->enqueue_calls - done : sz->sync_every;
        double t0 = now_us();
        for (int i = 0; i < batch; i++) {
            if (e) {
                CHECK(cuGraphLaunch(e, r->stream));
            } else {
                launch_add(r, r->ec, r->ea, r->eb, EAGER_ELEMS);
            }
        }
        spent += now_us() - t0;
        CHECK(cuStreamSynchronize(r->stream));
        done += batch;
    }
    return spent / sz->enqueue_calls;
}

static void bench_enqueue(const struct rig *r, const struct sizes *sz) {
    CUgraph g = capture(r, 0, 1);
    CUgraphExec e = ready(r, g);
    double graph[MAX_REPS], eager[MAX_REPS];
    enqueue_sample(r, sz, e);
    enqueue_sample(r, sz, NULL);
    for (int rep = 0; rep < sz->reps; rep++) {
        if (rep % 2 == 0) {
            graph[rep] = enqueue_sample(r, sz, e);
            eager[rep] = enqueue_sample(r, sz, NULL);
        } else {
            eager[rep] = enqueue_sample(r, sz, NULL);
            graph[rep] = enqueue_sample(r, sz, e);
        }
    }
    print_series("enqueue_graph", graph, sz->reps);
    print_series("eager_launch", eager, sz->reps);
    CHECK(cuStreamSynchronize(r->stream));
    CHECK(cuGraphExecDestroy(e));
    CHECK(cuGraphDestroy(g));
}

/* capture_sample times iters capture -> ready of an n-kernel step. */
static double capture_sample(const struct rig *r, int n, int iters) {
    double spent = 0;
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        CUgraph g = capture(r, 0, n);
        CUgraphExec e = ready(r, g);
        spent += now_us() - t0;
        CHECK(cuStreamSynchronize(r->stream));
        CHECK(cuGraphExecDestroy(e));
        CHECK(cuGraphDestroy(g));
    }
    return spent / iters;
}

/* update_sample times iters recaptures of the installed n-kernel step *e, updated in place;
 * *g is the graph the executable was last made from, destroyed and replaced each time. */
static double update_sample(const struct rig *r, int n, int iters, CUgraphExec e, CUgraph *g) {
    double spent = 0;
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        CUgraph next = capture(r, 0, n);
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        CHECK(cuGraphExecUpdate(e, next, &info));
        if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            fprintf(stderr, "raw_step_bench: cuGraphExecUpdate refused an unchanged topology (%d)\n", (int)info.result);
            exit(1);
        }
        CHECK(cuGraphDestroy(*g));
        *g = next;
        CHECK(cuGraphUpload(e, r->stream));
        spent += now_us() - t0;
    }
    return spent / iters;
}

static void bench_capture(const struct rig *r, const struct sizes *sz) {
    for (int s = 0; s < 3; s++) {
        int n = step_kernels[s], iters = sz->capture_iters[s];
        CUgraph g = capture(r, 0, n);
        CUgraphExec e = ready(r, g);
        double cap[MAX_REPS], upd[MAX_REPS];
        capture_sample(r, n, iters);
        update_sample(r, n, iters, e, &g);
        for (int rep = 0; rep < sz->reps; rep++) {
            if (rep % 2 == 0) {
                cap[rep] = capture_sample(r, n, iters);
                upd[rep] = update_sample(r, n, iters, e, &g);
            } else {
                upd[rep] = update_sample(r, n, iters, e, &g);
                cap[rep] = capture_sample(r, n, iters);
            }
        }
        char key[64];
        snprintf(key, sizeof key, "capture/%d", n);
        print_series(key, cap, sz->reps);
        snprintf(key, sizeof key, "update/%d", n);
        print_series(key, upd, sz->reps);
        CHECK(cuStreamSynchronize(r->stream));
        CHECK(cuGraphExecDestroy(e));
        CHECK(cuGraphDestroy(g));
    }
}

/* read4 is the host seam and the result read: a 4-byte D2H of a into pageable memory (as a
 * Go host's CopyToHost into Go memory) and a stream synchronization. */
static void read4(const struct rig *r, void *host) {
    CHECK(cuMemcpyDtoHAsync(host, r->a, 4, r->stream));
    CHECK(cuStreamSynchronize(r->stream));
}

static void bench_seam(const struct rig *r, const struct sizes *sz) {
    CUgraph g4 = capture(r, 0, 4), g0 = capture(r, 0, 2), g1 = capture(r, 2, 2);
    CUgraphExec e4 = ready(r, g4), e0 = ready(r, g0), e1 = ready(r, g1);
    check_step(r, e4);
    void *host = malloc(4);
    double mono[MAX_REPS], seg[MAX_REPS], price[MAX_REPS], alone[MAX_REPS];
    for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
        double m = 0, s = 0, h = 0;
        for (int arm = 0; arm < 3; arm++) {
            int which = (arm + (rep < 0 ? 0 : rep)) % 3;
            double t0 = now_us();
            for (int i = 0; i < sz->seam_iters; i++) {
                switch (which) {
                case 0:
                    CHECK(cuGraphLaunch(e4, r->stream));
                    read4(r, host);
                    break;
                case 1:
                    CHECK(cuGraphLaunch(e0, r->stream));
                    read4(r, host);
                    CHECK(cuGraphLaunch(e1, r->stream));
                    read4(r, host);
                    break;
                default:
                    read4(r, host);
                }
            }
            double per = (now_us() - t0) / sz->seam_iters;
            if (which == 0) {
                m = per;
            } else if (which == 1) {
                s = per;
            } else {
                h = per;
            }
        }
        if (rep >= 0) {
            mono[rep] = m;
            seg[rep] = s;
            price[rep] = s - m;
            alone[rep] = h;
        }
    }
    print_series("seam_mono", mono, sz->reps);
    print_series("seam_segmented", seg, sz->reps);
    print_series("seam_price", price, sz->reps);
    print_series("seam_host", alone, sz->reps);
    free(host);
    CHECK(cuStreamSynchronize(r->stream));
    CUgraphExec execs[3] = {e4, e0, e1};
    CUgraph graphs[3] = {g4, g0, g1};
    for (int i = 0; i < 3; i++) {
        CHECK(cuGraphExecDestroy(execs[i]));
        CHECK(cuGraphDestroy(graphs[i]));
    }
}

/* diag_sample times iters calls of one cheap driver call with nothing queued. */
static double diag_sample(const struct rig *r, int which, int iters) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        switch (which) {
        case 0:
            CHECK(cuCtxSetCurrent(r->ctx));
            break;
        case 1:
            CHECK(cuStreamSynchronize(r->stream));
            break;
        default:
            CHECK(CTX_SYNC());
        }
    }
    return (now_us() - t0) / iters;
}

static void bench_diag(const struct rig *r, const struct sizes *sz) {
    static const char *keys[3] = {"diag_ctx_set", "diag_stream_sync_idle", "diag_ctx_sync_idle"};
    double v[3][MAX_REPS];
    CHECK(cuStreamSynchronize(r->stream));
    for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
        for (int arm = 0; arm < 3; arm++) {
            int which = (arm + (rep < 0 ? 0 : rep)) % 3;
            double per = diag_sample(r, which, sz->enqueue_calls);
            if (rep >= 0) {
                v[which][rep] = per;
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        print_series(keys[i], v[i], sz->reps);
    }
}

/* word is the completion word of the replay_word_* series: host-mapped pinned memory the
 * stream writes sequence numbers into. */
struct word {
    uint32_t *host;  /* read with atomic loads: the device writes it */
    CUdeviceptr dev; /* its device address */
    uint32_t last;   /* the latest number queued */
};

/* cpu_pause is the CPU's spin-wait hint, as cudaep's spin uses between reads. */
static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* spin_until reads the word until it reaches seq (compared modulo 2^32, as cudaep does).
 * After a second without it, it synchronizes the stream (a fault shows there) and fails the
 * run if the number still has not arrived. */
static void spin_until(const struct rig *r, const struct word *w, uint32_t seq) {
    double t0 = 0;
    for (unsigned i = 0;; i++) {
        if ((int32_t)(__atomic_load_n(w->host, __ATOMIC_ACQUIRE) - seq) >= 0) {
            return;
        }
        cpu_pause();
        if ((i & 1023) == 1023) {
            if (t0 == 0) {
                t0 = now_us();
            } else if (now_us() - t0 > 1e6) {
                CHECK(cuStreamSynchronize(r->stream));
                if ((int32_t)(__atomic_load_n(w->host, __ATOMIC_ACQUIRE) - seq) >= 0) {
                    return;
                }
                fprintf(stderr, "raw_step_bench: the mapped word holds %u after a synchronization, not %u\n",
                        __atomic_load_n(w->host, __ATOMIC_ACQUIRE), seq);
                exit(1);
            }
        }
    }
}

/* word_op_sample times iters steps of launch + a write of the next number + spin. */
static double word_op_sample(const struct rig *r, struct word *w, CUgraphExec e, int iters) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        CHECK(cuGraphLaunch(e, r->stream));
        uint32_t seq = ++w->last;
        CHECK(cuStreamWriteValue32(r->stream, w->dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
        spin_until(r, w, seq);
    }
    return (now_us() - t0) / iters;
}

/* word_node_sample times iters steps of: the host sets the word to 0, launches the graph that
 * ends in a write of 1, and spins until it reads 1. */
static double word_node_sample(const struct rig *r, struct word *w, CUgraphExec e, int iters) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        __atomic_store_n(w->host, 0, __ATOMIC_RELEASE);
        CHECK(cuGraphLaunch(e, r->stream));
        spin_until(r, w, 1);
    }
    w->last = 1; /* the word now holds 1: the op arm's numbers continue past it */
    return (now_us() - t0) / iters;
}

/* word_ok reports a refused call of the word series (they are then left out) and
 * returns 0; it returns 1 when the call succeeded. */
static int word_ok(CUresult r, const char *call) {
    if (r == CUDA_SUCCESS) {
        return 1;
    }
    const char *name = NULL;
    cuGetErrorName(r, &name);
    printf("info word_unavailable %s: %s (%d)\n", call, name ? name : "?", (int)r);
    fflush(stdout);
    return 0;
}

/* capture_word_node records the n-kernel step followed by a write of 1 into the word; it
 * returns NULL (after an info line) where the driver cannot capture the write. */
static CUgraph capture_word_node(const struct rig *r, const struct word *w, int n) {
    CUgraph g = NULL;
    CHECK(cuStreamBeginCapture(r->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    chain(r, 0, n);
    CUresult wr = cuStreamWriteValue32(r->stream, w->dev, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    CUresult er = cuStreamEndCapture(r->stream, &g);
    if (!word_ok(wr, "cuStreamWriteValue32 (captured)") || !word_ok(er, "cuStreamEndCapture (write-value node)")) {
        if (er == CUDA_SUCCESS && g != NULL) {
            CHECK(cuGraphDestroy(g));
        }
        return NULL;
    }
    return g;
}

/* bench_word measures replay_word_op/N and replay_word_node/N, alternating which runs first. */
static void bench_word(const struct rig *r, const struct sizes *sz) {
    void *p = NULL;
    struct word w;
    memset(&w, 0, sizeof w);
    if (!word_ok(cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc")) {
        return;
    }
    w.host = (uint32_t *)p;
    __atomic_store_n(w.host, 0, __ATOMIC_RELEASE);
    int ok = word_ok(cuMemHostGetDevicePointer(&w.dev, p, 0), "cuMemHostGetDevicePointer");
    if (ok) { /* one round trip before timing: the stream writes, the host reads */
        ok = word_ok(cuStreamWriteValue32(r->stream, w.dev, ++w.last, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
    }
    if (ok) {
        CHECK(cuStreamSynchronize(r->stream));
        if (__atomic_load_n(w.host, __ATOMIC_ACQUIRE) != w.last) {
            printf("info word_unavailable the host reads %u, the stream wrote %u\n", __atomic_load_n(w.host, __ATOMIC_ACQUIRE), w.last);
            ok = 0;
        }
    }
    for (int s = 0; ok && s < 3; s++) {
        int n = step_kernels[s], iters = sz->step_iters[s];
        CUgraph g = capture(r, 0, n);
        CUgraphExec e = ready(r, g);
        CUgraph gn = capture_word_node(r, &w, n);
        CUgraphExec en = gn != NULL ? ready(r, gn) : NULL;
        int arms = en != NULL ? 2 : 1;
        double op[MAX_REPS], node[MAX_REPS];
        for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
            for (int a = 0; a < arms; a++) {
                int which = (a + (rep < 0 ? 0 : rep)) % arms;
                double v = which == 0 ? word_op_sample(r, &w, e, iters) : word_node_sample(r, &w, en, iters);
                if (rep >= 0) {
                    if (which == 0) {
                        op[rep] = v;
                    } else {
                        node[rep] = v;
                    }
                }
            }
        }
        char key[64];
        snprintf(key, sizeof key, "replay_word_op/%d", n);
        print_series(key, op, sz->reps);
        if (en != NULL) {
            snprintf(key, sizeof key, "replay_word_node/%d", n);
            print_series(key, node, sz->reps);
        }
        CHECK(cuStreamSynchronize(r->stream));
        if (en != NULL) {
            CHECK(cuGraphExecDestroy(en));
            CHECK(cuGraphDestroy(gn));
        }
        CHECK(cuGraphExecDestroy(e));
        CHECK(cuGraphDestroy(g));
    }
    CHECK(cuStreamSynchronize(r->stream));
    CHECK(cuMemFreeHost(p));
}

/* The empty kernel of the plain set-up: what a minimal replay loop launches. */
static const char empty_ptx[] =
    ".version 7.8\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry cudaep_bench_empty()\n"
    "{\n"
    "\tret;\n"
    "}\n";

/* plain_sample times iters launch + stream synchronize steps of e on stream s. */
static double plain_sample(CUstream s, CUgraphExec e, int iters) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        CHECK(cuGraphLaunch(e, s));
        CHECK(cuStreamSynchronize(s));
    }
    return (now_us() - t0) / iters;
}

/* bench_plain replays a 1-kernel graph in plainer set-ups than the suite's, to place its
 * figures next to minimal loops: the same Add on a default-priority stream instantiated
 * without node priority, and an empty kernel the same way. */
static void bench_plain(const struct rig *r, const struct sizes *sz) {
    CUstream s;
    CUmodule m;
    CUfunction empty;
    CUgraph g[2];
    CUgraphExec e[2];
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuModuleLoadData(&m, empty_ptx));
    CHECK(cuModuleGetFunction(&empty, m, "cudaep_bench_empty"));
    for (int k = 0; k < 2; k++) {
        CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        if (k == 0) {
            CUdeviceptr out = r->c, x = r->a, y = r->b;
            unsigned long long n = STEP_ELEMS;
            void *params[4] = {&out, &x, &y, &n};
            CHECK(cuLaunchKernel(r->add, STEP_ELEMS / BLOCK, 1, 1, BLOCK, 1, 1, 0, s, params, NULL));
        } else {
            CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        }
        CHECK(cuStreamEndCapture(s, &g[k]));
        CHECK(cuGraphInstantiateWithFlags(&e[k], g[k], 0));
        CHECK(cuGraphUpload(e[k], s));
    }
    double v[2][MAX_REPS];
    int iters = sz->step_iters[0];
    for (int rep = -1; rep < sz->reps; rep++) { /* rep -1 warms up */
        for (int arm = 0; arm < 2; arm++) {
            int k = (arm + (rep < 0 ? 0 : rep)) % 2;
            double per = plain_sample(s, e[k], iters);
            if (rep >= 0) {
                v[k][rep] = per;
            }
        }
    }
    print_series("diag_replay_add_plain", v[0], sz->reps);
    print_series("diag_replay_empty_plain", v[1], sz->reps);
    CHECK(cuStreamSynchronize(s));
    for (int k = 0; k < 2; k++) {
        CHECK(cuGraphExecDestroy(e[k]));
        CHECK(cuGraphDestroy(g[k]));
    }
    CHECK(cuModuleUnload(m));
    CHECK(cuStreamDestroy(s));
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "quick") != 0 && strcmp(argv[2], "full") != 0)) {
        fprintf(stderr, "usage: %s PATH/TO/elementwise.ptx quick|full\n", argv[0]);
        return 2;
    }
    const struct sizes *sz = strcmp(argv[2], "quick") == 0 ? &quick_sizes : &full_sizes;
    struct rig r;
    int least, greatest, driver;
    char name[256];

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&r.device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&r.ctx, r.device));
    CHECK(cuCtxSetCurrent(r.ctx));
    CHECK(cuDeviceGetName(name, sizeof name, r.device));
    CHECK(cuDriverGetVersion(&driver));
    printf("info device %s\n", name);
    printf("info driver %d\n", driver);
    CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CHECK(cuStreamCreateWithPriority(&r.stream, CU_STREAM_NON_BLOCKING, greatest));
    char *ptx = read_file(argv[1]);
    CHECK(cuModuleLoadData(&r.module, ptx));
    free(ptx);
    CHECK(cuModuleGetFunction(&r.add, r.module, "cudaep_add_f32"));
    CUdeviceptr *bufs[6] = {&r.a, &r.b, &r.c, &r.ea, &r.eb, &r.ec};
    for (int i = 0; i < 6; i++) {
        int n = i < 3 ? STEP_ELEMS : EAGER_ELEMS;
        CHECK(cuMemAlloc(bufs[i], sizeof(float) * (size_t)n));
        fill_pattern(&r, *bufs[i], n, (float)i + 0.25f);
    }

    bench_seam(&r, sz); /* checks the step's result first */
    bench_replay(&r, sz);
    bench_word(&r, sz);
    bench_enqueue(&r, sz);
    bench_capture(&r, sz);
    bench_diag(&r, sz);
    bench_plain(&r, sz);

    CHECK(cuStreamSynchronize(r.stream));
    for (int i = 0; i < 6; i++) {
        CHECK(cuMemFree(*bufs[i]));
    }
    CHECK(cuModuleUnload(r.module));
    CHECK(cuStreamDestroy(r.stream));
    CHECK(cuDevicePrimaryCtxRelease(r.device));
    return 0;
}
