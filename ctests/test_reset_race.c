/*
 * test_reset_race.c — the seed's reset race through the C ABI, with pthreads: several threads
 * replay one captured graph in a loop while another resets it. Every replay either enqueues
 * (success) or is refused with CUDAEP_WRONG_STATE; a replay that starts after the reset has
 * returned is always refused (no launch is enqueued after reset returns); the output is the
 * graph's result; and the library is usable and leak-free afterwards.
 */
#include <pthread.h>
#include <sched.h>

#include "support.h"

enum { N = 64, REPLAYERS = 4, MIN_REPLAYS = 20 };

static CudaEpProvider prov;
static int reset_returned;   /* set (release) once CudaEpResetGraph has returned */
static int stop;             /* set once every replayer may stop */
static int replays_done;     /* successful replays, all threads */
static int refused_after;    /* refusals of replays started after the reset returned */
static int started_after;    /* replays started after the reset returned */

static void* replayer(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        int after = __atomic_load_n(&reset_returned, __ATOMIC_ACQUIRE);
        if (after) __atomic_add_fetch(&started_after, 1, __ATOMIC_RELAXED);
        CudaEpStatus* st = CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0);
        if (st == NULL) {
            if (after) check_fail(__FILE__, __LINE__, "a replay started after the reset returned was enqueued");
            __atomic_add_fetch(&replays_done, 1, __ATOMIC_RELAXED);
            continue;
        }
        CudaEpErrorCode code = CudaEpGetErrorCode(st);
        if (code != CUDAEP_WRONG_STATE) {
            check_fail(__FILE__, __LINE__, "replay returned %s: %s", CudaEpGetErrorCodeName(code),
                       CudaEpGetErrorMessage(st));
        }
        CudaEpReleaseStatus(st);
        if (after) __atomic_add_fetch(&refused_after, 1, __ATOMIC_RELAXED);
        if (after && __atomic_load_n(&started_after, __ATOMIC_RELAXED) >= 2 * REPLAYERS) {
            __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

int main(void) {
    prov = new_provider(NULL);
    const int64_t s[1] = {N};
    float in[N], want[N], got[N];
    for (int i = 0; i < N; i++) in[i] = (float)i + 0.25f, want[i] = in[i] + 1.0f;
    float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    CudaEpTensorInfo in2[2] = {f32_info(1, s), f32_info(1, s)};
    CudaEpKernel add = get_kernel(prov, "Add", 14, 2, in2);
    CudaEpBuffer x = upload_floats(prov, in, N), one = upload_floats(prov, ones, N), y = new_buffer(prov, 4 * N);
    CudaEpBuffer keep[3] = {x, one, y};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, &add, 1, keep, 3));
    exec2(add, f32_tensor(x, 1, s), f32_tensor(one, 1, s), f32_tensor(y, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    /* The replayers' buffers may go: the graph retains them until it is destroyed. */
    RELEASE(CudaEpReleaseBuffer, x);
    RELEASE(CudaEpReleaseBuffer, one);

    pthread_t threads[REPLAYERS];
    for (int i = 0; i < REPLAYERS; i++) CHECK(pthread_create(&threads[i], NULL, replayer, NULL) == 0);
    /* Let the replayers get going (a count, not a time), then reset under them. */
    while (__atomic_load_n(&replays_done, __ATOMIC_RELAXED) < MIN_REPLAYS) sched_yield();
    int32_t had = -1;
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    __atomic_store_n(&reset_returned, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < REPLAYERS; i++) pthread_join(threads[i], NULL);

    CHECK(had == 1);
    CHECK(replays_done >= MIN_REPLAYS);
    CHECK(refused_after == started_after && started_after >= 2 * REPLAYERS);
    int32_t has = -1;
    CHECK_OK(CudaEpHasExecutable(prov, CUDAEP_SLOT_PRIMARY, 0, &has));
    CHECK(has == 0);

    /* Every enqueued replay completed with the graph's result. */
    CHECK(download(y, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);
    CudaEpGraphStats gs;
    memset(&gs, 0, sizeof gs);
    gs.struct_size = sizeof gs;
    CHECK_OK(CudaEpGetGraphStats(prov, CUDAEP_SLOT_PRIMARY, 0, &gs));
    CHECK(gs.replay_launches == (uint64_t)replays_done);

    RELEASE(CudaEpReleaseBuffer, y);
    RELEASE(CudaEpReleaseKernel, add);
    CHECK_OK(CudaEpReleaseProvider(prov));
    check_no_live_handles();
    printf("reset race: %d replays enqueued before the reset, %d refused after it\n", replays_done, refused_after);
    return check_result("test_reset_race");
}
