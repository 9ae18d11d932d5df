/*
 * test_stress.c — 16 threads create, use and release options and sim providers at once, while
 * also hammering a shared provider and the handles other threads are releasing. Every call
 * must return success or a handle error; nothing may crash or leak.
 *
 * A second phase (ABI 2) has 16 threads each make a provider with a buffer and a kernel,
 * release the provider's handle first and keep using the children, while they all replay one
 * graph of the shared provider and poke at each other's buffers as those are released.
 */
#include <pthread.h>
#include <string.h>

#include "check.h"

enum { THREADS = 16, ROUNDS = 40 };

static CudaEpProvider shared_provider;
/* The handle each thread most recently created, published for the others to poke at. */
static uint64_t recent[THREADS];

static void* worker(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CudaEpOptions o = CUDAEP_NULL_HANDLE;
        if (!CHECK_OK(CudaEpCreateOptions(&o))) return NULL;
        CHECK_OK(CudaEpSetOption(o, "backend", "sim"));
        CudaEpProvider p = CUDAEP_NULL_HANDLE;
        if (CHECK_OK(CudaEpCreateProvider(o, &p))) {
            __atomic_store_n(&recent[id], p, __ATOMIC_RELAXED);
            char name[8];
            size_t needed = 0;
            CHECK_OK(CudaEpProviderGetBackendName(p, name, sizeof name, &needed));
            CHECK_STR(name, "sim");
        }

        /* Another thread's recent provider: alive, or already released (stale). */
        uint64_t other = __atomic_load_n(&recent[(id + 1 + i) % THREADS], __ATOMIC_RELAXED);
        if (other != CUDAEP_NULL_HANDLE) {
            CudaEpDeviceInfo info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            CudaEpStatus* st = CudaEpProviderGetDeviceInfo(other, &info);
            if (st == NULL) {
                CHECK(info.multiprocessors == 132);
            } else {
                CHECK(CudaEpGetErrorCode(st) == CUDAEP_STALE_HANDLE);
                CudaEpReleaseStatus(st);
            }
        }

        /* The shared provider stays valid throughout. */
        size_t needed = 0;
        CHECK_OK(CudaEpProviderGetDeviceName(shared_provider, NULL, 0, &needed));
        CHECK(needed == strlen("cudaep simulated device") + 1);

        if (p != CUDAEP_NULL_HANDLE) CHECK_OK(CudaEpReleaseProvider(p));
        CHECK_OK(CudaEpReleaseOptions(o));
        /* Our own released handle is stale now, and a second release is an error, not a crash. */
        if (p != CUDAEP_NULL_HANDLE) CHECK_ERR(CudaEpReleaseProvider(p), CUDAEP_STALE_HANDLE, "");
    }
    return NULL;
}

enum { CHILD_ROUNDS = 10, N = 64 };
static const int64_t shape[1] = {N};
static uint64_t recent_buffer[THREADS];

static void* children_worker(void* arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < CHILD_ROUNDS; i++) {
        CudaEpOptions o = new_sim_options();
        CudaEpProvider p = CUDAEP_NULL_HANDLE;
        if (!CHECK_OK(CudaEpCreateProvider(o, &p))) return NULL;
        CHECK_OK(CudaEpReleaseOptions(o));
        CudaEpBuffer b = CUDAEP_NULL_HANDLE;
        CudaEpKernel k = CUDAEP_NULL_HANDLE;
        CudaEpTensorInfo info = {CUDAEP_DTYPE_FLOAT32, 1, shape, NULL};
        CHECK_OK(CudaEpAllocBuffer(p, 4 * N, 0, &b));
        CHECK_OK(CudaEpGetKernel(p, "Relu", 14, &info, 1, NULL, 0, &k));
        __atomic_store_n(&recent_buffer[id], b, __ATOMIC_RELAXED);
        CHECK_OK(CudaEpReleaseProvider(p)); /* the children keep it alive */

        float x[N], y[N];
        for (int j = 0; j < N; j++) x[j] = (float)(j % 7) - 3.0f + (float)id;
        CHECK_OK(CudaEpCopyToDevice(b, 0, x, sizeof x));
        CudaEpTensor t = {info, b, 0};
        CHECK_OK(CudaEpKernelExecute(k, &t, 1, &t, 1));
        CHECK_OK(CudaEpCopyToHost(y, b, 0, sizeof y));
        for (int j = 0; j < N; j++) CHECK(y[j] == (x[j] > 0 ? x[j] : 0.0f));

        /* Another thread's buffer: alive, or already released (stale). */
        uint64_t other = __atomic_load_n(&recent_buffer[(id + 1 + i) % THREADS], __ATOMIC_RELAXED);
        if (other != CUDAEP_NULL_HANDLE) {
            uint64_t size = 0;
            CudaEpStatus* st = CudaEpBufferGetSize(other, &size);
            if (st == NULL) {
                CHECK(size == 4 * N);
            } else {
                CHECK(CudaEpGetErrorCode(st) == CUDAEP_STALE_HANDLE);
                CudaEpReleaseStatus(st);
            }
        }
        /* The shared graph replays from every thread at once. */
        CHECK_OK(CudaEpReplay(shared_provider, CUDAEP_SLOT_PRIMARY, 0));

        CHECK_OK(CudaEpReleaseKernel(k));
        CHECK_OK(CudaEpReleaseBuffer(b)); /* the last child: the provider is destroyed here */
    }
    return NULL;
}

int main(void) {
    CudaEpOptions o = new_sim_options();
    CHECK_OK(CudaEpCreateProvider(o, &shared_provider));
    CHECK_OK(CudaEpReleaseOptions(o));

    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        int rc = pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i);
        CHECK(rc == 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);

    /* Phase 2: children outliving their providers' handles, and concurrent replays. */
    CudaEpTensorInfo info = {CUDAEP_DTYPE_FLOAT32, 1, shape, NULL};
    CudaEpKernel relu = CUDAEP_NULL_HANDLE;
    CudaEpBuffer g = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpGetKernel(shared_provider, "Relu", 14, &info, 1, NULL, 0, &relu));
    CHECK_OK(CudaEpAllocBuffer(shared_provider, 4 * N, 0, &g));
    CHECK_OK(CudaEpMemset(g, 0, 4 * N, 0x3F));
    CHECK_OK(CudaEpBeginCapture(shared_provider, CUDAEP_SLOT_PRIMARY, 0, &relu, 1, &g, 1));
    CudaEpTensor gt = {info, g, 0};
    CHECK_OK(CudaEpKernelExecute(relu, &gt, 1, &gt, 1));
    CHECK_OK(CudaEpEndCapture(shared_provider, CUDAEP_SLOT_PRIMARY, 0));
    for (int i = 0; i < THREADS; i++) {
        int rc = pthread_create(&threads[i], NULL, children_worker, (void*)(intptr_t)i);
        CHECK(rc == 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    CudaEpGraphStats gs;
    memset(&gs, 0, sizeof gs);
    gs.struct_size = sizeof gs;
    CHECK_OK(CudaEpGetGraphStats(shared_provider, CUDAEP_SLOT_PRIMARY, 0, &gs));
    CHECK(gs.replay_launches == THREADS * CHILD_ROUNDS);
    CHECK_OK(CudaEpResetGraph(shared_provider, CUDAEP_SLOT_PRIMARY, 0, NULL));
    CHECK_OK(CudaEpReleaseKernel(relu));
    CHECK_OK(CudaEpReleaseBuffer(g));

    CHECK_OK(CudaEpReleaseProvider(shared_provider));
    check_no_live_handles();
    return check_result("test_stress");
}
