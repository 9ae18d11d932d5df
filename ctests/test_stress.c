/*
 * test_stress.c — 16 threads create, use and release options and sim providers at once, while
 * also hammering a shared provider and the handles other threads are releasing. Every call
 * must return success or a handle error; nothing may crash or leak.
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

    CHECK_OK(CudaEpReleaseProvider(shared_provider));
    check_no_live_handles();
    return check_result("test_stress");
}
