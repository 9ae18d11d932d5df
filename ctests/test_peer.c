/*
 * test_peer.c — providers on several devices through the C ABI (ABI 4): CudaEpCopyPeer on every
 * path with byte-exact results, copies in opposite directions from two threads at once, a
 * capture on one device while another device drains, copies and reads, and the release of one
 * device's provider while another keeps working.
 *
 * On the simulator, CMake runs it on machines shaped by CUDAEP_SIM_DEVICES and CUDAEP_SIM_PEERS
 * (two devices that reach each other, two that do not, four in two islands); on a GPU it uses
 * the devices present, and the cases that need two say so and are skipped on one.
 */
#include <pthread.h>

#include "support.h"

#define MAX_DEVICES 4

static int devices;                       /* how many providers were made */
static CudaEpProvider provs[MAX_DEVICES]; /* one provider per device */

/* try_provider: a provider on device id, or 0 (without counting a failure) when the backend
 * has no such device. */
static CudaEpProvider try_provider(int id) {
    CudaEpOptions o = new_test_options();
    char v[16];
    snprintf(v, sizeof v, "%d", id);
    CHECK_OK(CudaEpSetOption(o, "device_id", v));
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CudaEpStatus* st = CudaEpCreateProvider(o, &p);
    CHECK_OK(CudaEpReleaseOptions(o));
    if (st != NULL) {
        CHECK(CudaEpGetErrorCode(st) == CUDAEP_NOT_FOUND);
        CudaEpReleaseStatus(st);
        return CUDAEP_NULL_HANDLE;
    }
    return p;
}

/* expected_path: the path a copy from device s to device d takes on the simulator, from the
 * peer matrix CMake gave it; -1 when it cannot be known (a GPU decides). */
static int expected_path(int d, int s) {
    if (d == s) return CUDAEP_PEER_PATH_DEVICE;
    if (!test_on_sim()) return -1;
    const char* peers = getenv("CUDAEP_SIM_PEERS");
    if (peers == NULL || strcmp(peers, "all") == 0) return CUDAEP_PEER_PATH_DIRECT;
    if (strcmp(peers, "none") == 0) return CUDAEP_PEER_PATH_STAGED;
    if (strcmp(peers, "0-1,2-3") == 0) return d / 2 == s / 2 ? CUDAEP_PEER_PATH_DIRECT : CUDAEP_PEER_PATH_STAGED;
    return -1;
}

/* filled: a buffer of n bytes of pattern seed on p. */
static CudaEpBuffer filled(CudaEpProvider p, size_t n, unsigned seed) {
    CudaEpBuffer b = new_buffer(p, n);
    unsigned char* host = malloc(n);
    pattern_bytes(host, n, seed);
    CHECK_OK(CudaEpCopyToDevice(b, 0, host, n));
    free(host);
    return b;
}

/* holds: whether b's first n bytes are pattern seed shifted by off (b[i] = pattern[i + off]). */
static int holds(CudaEpBuffer b, size_t n, unsigned seed, size_t off) {
    unsigned char* got = malloc(n);
    unsigned char* want = malloc(n + off);
    pattern_bytes(want, n + off, seed);
    int ok = download(b, got, n) && memcmp(got, want + off, n) == 0;
    free(got);
    free(want);
    return ok;
}

/* Every ordered pair of devices (and one device with itself): byte-exact, with the path the
 * peer matrix says, on either side of the call. */
static void case_every_pair(void) {
    const size_t n = 3 * 1024 * 1024 + 7;
    for (int d = 0; d < devices; d++) {
        for (int s = 0; s < devices; s++) {
            unsigned seed = (unsigned)(10 * d + s + 1);
            CudaEpBuffer src = filled(provs[s], n, seed), dst = filled(provs[d], n + 64, 200);
            int32_t path = -1;
            CHECK_OK(CudaEpCopyPeer(dst, 64, src, 3, n - 3, &path));
            int want = expected_path(d, s);
            if (want >= 0) {
                CHECK(path == want);
            } else {
                CHECK(path == CUDAEP_PEER_PATH_DIRECT || path == CUDAEP_PEER_PATH_STAGED);
            }
            unsigned char head[64], want_head[64];
            CHECK(download(dst, head, sizeof head));
            pattern_bytes(want_head, sizeof want_head, 200);
            CHECK(memcmp(head, want_head, sizeof head) == 0); /* before dst_offset: untouched */
            unsigned char* got = malloc(n + 64);
            unsigned char* exp = malloc(n);
            pattern_bytes(exp, n, seed);
            CHECK(download(dst, got, n + 64) && memcmp(got + 64, exp + 3, n - 3) == 0);
            free(got);
            free(exp);
            CHECK(holds(src, n, seed, 0)); /* the source is unchanged */
            RELEASE(CudaEpReleaseBuffer, src);
            RELEASE(CudaEpReleaseBuffer, dst);
        }
    }
    printf("peer: every ordered pair of %d device(s) copied byte-exact\n", devices);
}

/* Two providers of one device: the device path; NULL out_path; size 0; bad ranges. */
static void case_one_device(void) {
    CudaEpProvider q = new_provider(NULL);
    CudaEpBuffer a = filled(provs[0], 4096, 5), b = filled(q, 4096, 6);
    int32_t path = -1;
    CHECK_OK(CudaEpCopyPeer(b, 0, a, 0, 4096, NULL));
    CHECK(holds(b, 4096, 5, 0));
    CHECK_OK(CudaEpCopyPeer(b, 0, a, 0, 0, &path));
    CHECK(path == CUDAEP_PEER_PATH_NONE);
    path = -1;
    CHECK_ERR(CudaEpCopyPeer(b, 1, a, 0, 4096, &path), CUDAEP_INVALID_ARGUMENT, "dst buffer");
    CHECK_ERR(CudaEpCopyPeer(b, 0, a, UINT64_MAX, 2, &path), CUDAEP_INVALID_ARGUMENT, "src buffer");
    CHECK_ERR(CudaEpCopyPeer(a, 0, a, 8, 64, &path), CUDAEP_INVALID_ARGUMENT, "overlap");
    CHECK(path == -1);
    RELEASE(CudaEpReleaseBuffer, a);
    RELEASE(CudaEpReleaseBuffer, b);
    RELEASE(CudaEpReleaseProvider, q);
}

/* --- copies in opposite directions from two threads at once ---------------------------------- */

typedef struct {
    CudaEpBuffer dst, src;
    size_t n;
    unsigned seed;
    int rounds, ok;
} copier;

static void* copy_rounds(void* arg) {
    copier* c = arg;
    c->ok = 1;
    for (int r = 0; r < c->rounds && c->ok; r++) {
        CHECK_OK(CudaEpMemset(c->dst, 0, c->n, (uint8_t)r));
        if (!CHECK_OK(CudaEpCopyPeer(c->dst, 0, c->src, 0, c->n, NULL)) || !holds(c->dst, c->n, c->seed, 0)) c->ok = 0;
    }
    return NULL;
}

static void case_opposite_directions_at_once(void) {
    if (devices < 2) {
        printf("peer: skipped copies in opposite directions: needs 2 devices, the %s backend has %d\n", test_backend(), devices);
        return;
    }
    const size_t n = 1 << 20;
    copier c[2] = {
        {.dst = filled(provs[0], n, 1), .src = filled(provs[1], n, 31), .n = n, .seed = 31, .rounds = 20},
        {.dst = filled(provs[1], n, 2), .src = filled(provs[0], n, 41), .n = n, .seed = 41, .rounds = 20},
    };
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, copy_rounds, &c[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK(c[i].ok);
        RELEASE(CudaEpReleaseBuffer, c[i].dst);
        RELEASE(CudaEpReleaseBuffer, c[i].src);
    }
    printf("peer: 2 threads x 20 copies in opposite directions\n");
}

/* --- a capture on device 0 while device 1 works ------------------------------------------------ */

typedef struct {
    CudaEpProvider p;
    int ok;
} worker;

static void* other_device_work(void* arg) {
    worker* w = arg;
    unsigned char in[4096], out[4096];
    pattern_bytes(in, sizeof in, 9);
    CudaEpBuffer b = new_buffer(w->p, sizeof in);
    w->ok = CHECK_OK(CudaEpForceSynchronize(w->p)) && CHECK_OK(CudaEpCopyToDevice(b, 0, in, sizeof in)) &&
            download(b, out, sizeof out) && memcmp(in, out, sizeof in) == 0;
    RELEASE(CudaEpReleaseBuffer, b);
    return NULL;
}

static void case_capture_does_not_hold_back_another_device(void) {
    if (devices < 2) {
        printf("peer: skipped the capture isolation case: needs 2 devices, the %s backend has %d\n", test_backend(), devices);
        return;
    }
    const int64_t s4[1] = {4};
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel relu = get_kernel(provs[0], "Relu", 14, 1, &in);
    float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f}, y[4];
    CudaEpBuffer xb = upload_floats(provs[0], x, 4), yb = new_buffer(provs[0], 16);
    CudaEpBuffer keep[2] = {xb, yb};
    CHECK_OK(CudaEpBeginCapture(provs[0], CUDAEP_SLOT_PRIMARY, 0, &relu, 1, keep, 2));
    CHECK(exec1(relu, f32_tensor(xb, 1, s4), f32_tensor(yb, 1, s4)));
    worker w = {.p = provs[1]};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_device_work, &w) == 0);
    pthread_join(t, NULL);
    CHECK(w.ok);
    CHECK_OK(CudaEpEndCapture(provs[0], CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(provs[0], CUDAEP_SLOT_PRIMARY, 0));
    CHECK(download(yb, y, sizeof y) && y[0] == 0.0f && y[1] == 2.0f && y[2] == 0.0f && y[3] == 4.0f);
    CHECK_OK(CudaEpResetGraph(provs[0], CUDAEP_SLOT_PRIMARY, 0, NULL));
    RELEASE(CudaEpReleaseKernel, relu);
    RELEASE(CudaEpReleaseBuffer, xb);
    RELEASE(CudaEpReleaseBuffer, yb);
    printf("peer: device 1 drained, copied and read during device 0's capture\n");
}

/* --- releasing one device's provider while another works ------------------------------------- */

static void case_release_one_device(void) {
    if (devices < 2) {
        printf("peer: skipped the release case: needs 2 devices, the %s backend has %d\n", test_backend(), devices);
        return;
    }
    const size_t n = 1 << 16;
    CudaEpBuffer src = filled(provs[0], n, 71), dst = filled(provs[1], n, 72);
    CHECK_OK(CudaEpCopyPeer(dst, 0, src, 0, n, NULL));
    RELEASE(CudaEpReleaseProvider, provs[0]); /* src still holds it */
    CHECK(holds(dst, n, 71, 0));
    RELEASE(CudaEpReleaseBuffer, src); /* the provider of device 0 is destroyed here */
    worker w = {.p = provs[1]};
    other_device_work(&w);
    CHECK(w.ok);
    CHECK(holds(dst, n, 71, 0));
    RELEASE(CudaEpReleaseBuffer, dst);
    printf("peer: device 1 kept working after device 0's provider was destroyed\n");
}

int main(void) {
    for (int id = 0; id < MAX_DEVICES; id++) {
        provs[id] = try_provider(id);
        if (provs[id] == CUDAEP_NULL_HANDLE) break;
        devices++;
    }
    CHECK(devices >= 1);
    if (devices == 0) return check_result("test_peer");
    printf("peer: %d device(s) on the %s backend (CUDAEP_SIM_PEERS=%s)\n", devices, test_backend(),
           getenv("CUDAEP_SIM_PEERS") ? getenv("CUDAEP_SIM_PEERS") : "unset");
    case_one_device();
    case_every_pair();
    case_opposite_directions_at_once();
    case_capture_does_not_hold_back_another_device();
    case_release_one_device();
    for (int i = 0; i < devices; i++) RELEASE(CudaEpReleaseProvider, provs[i]);
    check_no_live_handles();
    return check_result("test_peer");
}
