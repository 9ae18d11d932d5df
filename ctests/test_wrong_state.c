/*
 * test_wrong_state.c — calls made in a state that forbids them return their documented status
 * and leave the library usable: replay with nothing captured, end without begin, reset during
 * capture, capture calls from another thread, host reads inside a capture, paging calls out of
 * order, stale tickets, double releases, and calls on other providers from a capturing thread.
 *
 * Each case is a function state_NAME; ctests/misuse/gen_misuse.py checks that every function
 * the header declares is mapped to the cases (or the reason it has none) that exercise it, so a
 * new function cannot be added without considering its states.
 */
#include <pthread.h>

#include "support.h"

static CudaEpProvider prov;
static CudaEpKernel relu;
static CudaEpBuffer buf;
static const int64_t s4[1] = {4};

static void begin(int32_t kind) {
    CHECK_OK(CudaEpBeginCapture(prov, kind, 0, &relu, 1, &buf, 1));
    CHECK(exec1(relu, f32_tensor(buf, 1, s4), f32_tensor(buf, 1, s4)));
}

static void capture_primary(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
}

/* usable: the provider still works after the case. */
static void usable(void) {
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status == CUDAEP_CAPTURE_NONE);
    float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f}, y[4];
    CHECK_OK(CudaEpCopyToDevice(buf, 0, x, sizeof x));
    CHECK(exec1(relu, f32_tensor(buf, 1, s4), f32_tensor(buf, 1, s4)));
    CHECK(download(buf, y, sizeof y) && y[0] == 0.0f && y[1] == 2.0f && y[2] == 0.0f && y[3] == 4.0f);
}

static void state_replay_nothing_captured(void) {
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "no executable is installed");
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 12345), CUDAEP_WRONG_STATE, "");
}

static void state_replay_segment_nothing_captured(void) {
    CHECK_ERR(CudaEpReplaySegment(prov, CUDAEP_SLOT_VERIFY, 0, 0), CUDAEP_WRONG_STATE, "no executable is installed");
}

static void state_replay_segment_past_segments(void) {
    capture_primary();
    CHECK_ERR(CudaEpReplaySegment(prov, CUDAEP_SLOT_PRIMARY, 0, 1), CUDAEP_INVALID_ARGUMENT, "segment index");
    CHECK_OK(CudaEpReplaySegment(prov, CUDAEP_SLOT_PRIMARY, 0, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

static void state_replay_during_capture(void) {
    capture_primary();
    begin(CUDAEP_SLOT_VERIFY);
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "capturing");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

static void state_replay_after_reset(void) {
    capture_primary();
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    int32_t had = -1;
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    CHECK(had == 1);
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "");
}

static void state_end_without_begin(void) {
    CHECK_ERR(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "capture is not active");
    CHECK_ERR(CudaEpEndCapture(prov, CUDAEP_SLOT_KEYED, 3), CUDAEP_WRONG_STATE, "");
}

static void state_abort_without_begin(void) {
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0)); /* documented: nothing to do */
}

static void* end_from_thread(void* arg) {
    CudaEpStatus** out = arg;
    out[0] = CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0);
    out[1] = CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0);
    return NULL;
}

static void state_end_on_another_thread(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CudaEpStatus* got[2] = {NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, end_from_thread, got) == 0);
    pthread_join(t, NULL);
    CHECK_ERR(got[0], CUDAEP_WRONG_STATE, "OS thread");
    CHECK_ERR(got[1], CUDAEP_WRONG_STATE, "OS thread");
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status == CUDAEP_CAPTURE_ACTIVE); /* the capture stayed live... */
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0)); /* ...for its own thread to end */
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

static void state_abort_on_another_thread(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CudaEpStatus* got[2] = {NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, end_from_thread, got) == 0);
    pthread_join(t, NULL);
    CHECK_ERR(got[0], CUDAEP_WRONG_STATE, "");
    CHECK_ERR(got[1], CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
}

/* A refused drain never touches the driver, so the capture survives it and ends normally. */
static void state_end_after_refused_drain(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_ERR(CudaEpForceSynchronize(prov), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    int32_t has = -1;
    CHECK_OK(CudaEpHasExecutable(prov, CUDAEP_SLOT_PRIMARY, 0, &has));
    CHECK(has == 1);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

static void state_reset_during_capture(void) {
    capture_primary();
    begin(CUDAEP_SLOT_VERIFY);
    int32_t had = 77;
    CHECK_ERR(CudaEpResetGraph(prov, CUDAEP_SLOT_VERIFY, 0, &had), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had), CUDAEP_WRONG_STATE, "");
    CHECK(had == 77);
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    CHECK(had == 1);
}

static void state_reset_nothing_captured(void) {
    int32_t had = 77;
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_KEYED, -9, &had));
    CHECK(had == 0);
}

static void state_begin_during_capture(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_ERR(CudaEpBeginCapture(prov, CUDAEP_SLOT_VERIFY, 0, &relu, 1, &buf, 1), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, &relu, 1, &buf, 1), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
}

static void state_recapture_during_capture(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_ERR(CudaEpRecapture(prov, CUDAEP_SLOT_PRIMARY, 0, &relu, 1, &buf, 1), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
}

static void state_begin_rejected_by_audit(void) {
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel nz = get_kernel(prov, "NonZero", 13, 1, &in);
    CudaEpKernel seq[2] = {relu, nz};
    CHECK_ERR(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, seq, 2, NULL, 0), CUDAEP_UNSUPPORTED,
              "rejected before begin_capture");
    CHECK_ERR(CudaEpRecapture(prov, CUDAEP_SLOT_PRIMARY, 0, seq, 2, NULL, 0), CUDAEP_UNSUPPORTED, "rejected");
    RELEASE(CudaEpReleaseKernel, nz);
}

static void state_host_copy_during_capture(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
    CHECK_ERR(CudaEpCopyToDevice(buf, 0, x, sizeof x), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpCopyToHost(y, buf, 0, sizeof y), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK(y[0] == 9);
    CHECK_ERR(CudaEpSynchronizeCompute(prov), CUDAEP_WRONG_STATE, "inside a capture");
    /* Device-side copies and memsets are recorded, not refused. */
    CHECK_OK(CudaEpMemset(buf, 0, 16, 0));
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
}

static void state_drain_during_capture(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_OK(CudaEpSynchronize(prov)); /* deferred: harmless inside a capture */
    CHECK_ERR(CudaEpDrainForUnmap(prov), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpDrainForUnmap(prov));
}

static void state_nonzero_count_during_capture(void) {
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel nz = get_kernel(prov, "NonZero", 13, 1, &in);
    CudaEpBuffer idx = new_buffer(prov, 32), cnt = new_buffer(prov, 8);
    const int64_t is[2] = {1, 4}, cs[1] = {1};
    CudaEpTensor outs[2] = {tensor_at(idx, 0, CUDAEP_DTYPE_INT64, 2, is), tensor_at(cnt, 0, CUDAEP_DTYPE_INT64, 1, cs)};
    CudaEpTensor x = f32_tensor(buf, 1, s4);
    CHECK_OK(CudaEpKernelExecute(nz, &x, 1, outs, 2));
    begin(CUDAEP_SLOT_PRIMARY);
    int64_t n = -5;
    CHECK_ERR(CudaEpKernelNonZeroCount(nz, &outs[1], &n), CUDAEP_WRONG_STATE, "end or abort the capture");
    CHECK(n == -5);
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpKernelNonZeroCount(nz, &outs[1], &n));
    CHECK(n >= 0 && n <= 4);
    RELEASE(CudaEpReleaseKernel, nz);
    RELEASE(CudaEpReleaseBuffer, idx);
    RELEASE(CudaEpReleaseBuffer, cnt);
}

static void state_nonzero_count_on_other_kernel(void) {
    CudaEpBuffer cnt = new_buffer(prov, 8);
    const int64_t cs[1] = {1};
    CudaEpTensor c = tensor_at(cnt, 0, CUDAEP_DTYPE_INT64, 1, cs);
    int64_t n = -5;
    CHECK_ERR(CudaEpKernelNonZeroCount(relu, &c, &n), CUDAEP_INVALID_ARGUMENT, "not a NonZero kernel");
    CHECK(n == -5);
    RELEASE(CudaEpReleaseBuffer, cnt);
}

/* --- the capture window: one rule for every thread ------------------------------------- */

static CudaEpBuffer window_buf;

static void* other_thread_work(void* arg) {
    CudaEpStatus** got = arg;
    float x[4] = {1, 2, 3, 4};
    CudaEpTensor t = f32_tensor(buf, 1, s4);
    got[0] = CudaEpMemset(window_buf, 0, 16, 0x22);
    got[1] = CudaEpCopyBuffer(window_buf, 0, buf, 0, 16);
    got[2] = CudaEpKernelExecute(relu, &t, 1, &t, 1);
    got[3] = CudaEpCopyToDevice(window_buf, 0, x, sizeof x);
    got[4] = CudaEpForceSynchronize(prov);
    got[5] = CudaEpResetGraph(prov, CUDAEP_SLOT_KEYED, 5, NULL);
    return NULL;
}

/* Another thread's stream work during a capture is refused, not silently recorded into it. */
static void state_other_thread_work_during_capture(void) {
    window_buf = new_buffer(prov, 16);
    CHECK_OK(CudaEpMemset(window_buf, 0, 16, 0x11));
    CudaEpBuffer keep[2] = {buf, window_buf};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, &relu, 1, keep, 2));
    CHECK(exec1(relu, f32_tensor(buf, 1, s4), f32_tensor(buf, 1, s4)));
    CudaEpStatus* got[6] = {NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread_work, got) == 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 6; i++) CHECK_ERR(got[i], CUDAEP_WRONG_STATE, "captures on the provider's stream");
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    unsigned char b[16];
    CHECK(download(window_buf, b, sizeof b));
    for (int i = 0; i < 16; i++) CHECK(b[i] == 0x11);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    RELEASE(CudaEpReleaseBuffer, window_buf);
}

/* On the capturing thread, driver work is refused before it reaches the driver: the capture
 * survives and ends normally; an impossible size is still an argument error. */
static void state_driver_work_on_capturing_thread(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CudaEpBuffer b = 0x99;
    CHECK_ERR(CudaEpAllocBuffer(prov, 64, 0, &b), CUDAEP_WRONG_STATE, "on the capturing thread");
    CHECK_ERR(CudaEpAllocBuffer(prov, UINT64_MAX, 0, &b), CUDAEP_INVALID_ARGUMENT, "larger than the device");
    CHECK(b == 0x99);
    CudaEpDoubleBuffer db = 0x99;
    CHECK_ERR(CudaEpCreateDoubleBuffer(prov, 4096, CUDAEP_TRANSFER_STAGING, &db), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK(db == 0x99);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = 0x99;
    CHECK_ERR(CudaEpGetKernel(prov, "Relu", 14, &in, 1, NULL, 0, &k), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

/* A release during a capture succeeds at once (a second one says stale) and frees when the
 * capture ends; releasing the provider is refused with its handle still valid. */
static void state_release_during_capture(void) {
    CudaEpBuffer spare = new_buffer(prov, 4096);
    CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(prov, 4096, CUDAEP_TRANSFER_STAGING, &db));
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_OK(CudaEpReleaseBuffer(spare));
    CHECK_ERR(CudaEpReleaseBuffer(spare), CUDAEP_STALE_HANDLE, "");
    CHECK_OK(CudaEpReleaseDoubleBuffer(db));
    CHECK_ERR(CudaEpReleaseProvider(prov), CUDAEP_WRONG_STATE, "handle stays valid");
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status != CUDAEP_CAPTURE_NONE);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

/* A provider whose handle went before its last child keeps living through a capture that
 * child's release happens in: the teardown waits for the capture to end. */
static void state_last_child_released_during_capture(void) {
    CudaEpProvider p = new_provider(NULL);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(p, "Relu", 14, 1, &in);
    CudaEpBuffer b = new_buffer(p, 16);
    CHECK_OK(CudaEpMemset(b, 0, 16, 0x3F));
    CHECK_OK(CudaEpBeginCapture(p, CUDAEP_SLOT_PRIMARY, 0, &k, 1, &b, 1));
    CHECK(exec1(k, f32_tensor(b, 1, s4), f32_tensor(b, 1, s4)));
    CHECK_ERR(CudaEpReleaseProvider(p), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpAbortCapture(p, CUDAEP_SLOT_PRIMARY, 0));
    RELEASE(CudaEpReleaseKernel, k);
    RELEASE(CudaEpReleaseBuffer, b);
    RELEASE(CudaEpReleaseProvider, p);
}

/* A float32 tensor at a byte offset that is not a multiple of 4 is refused before the device
 * sees it (a misaligned access is a sticky fault that poisons every provider on the GPU). */
static void state_misaligned_tensor(void) {
    CudaEpBuffer wide = new_buffer(prov, 32);
    CudaEpTensor t = tensor_at(wide, 3, CUDAEP_DTYPE_FLOAT32, 1, s4);
    CudaEpTensor ok = f32_tensor(buf, 1, s4);
    CHECK_ERR(CudaEpKernelExecute(relu, &t, 1, &ok, 1), CUDAEP_INVALID_ARGUMENT, "not aligned");
    CHECK_ERR(CudaEpKernelExecute(relu, &ok, 1, &t, 1), CUDAEP_INVALID_ARGUMENT, "not aligned");
    RELEASE(CudaEpReleaseBuffer, wide);
}

/* Reset while another slot captures is refused, whether or not the named slot holds a graph. */
static void state_reset_during_other_capture(void) {
    capture_primary();
    begin(CUDAEP_SLOT_VERIFY);
    CHECK_ERR(CudaEpResetGraph(prov, CUDAEP_SLOT_KEYED, 5, NULL), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

/* --- paging ---------------------------------------------------------------------------- */

static char data_path[512];

static CudaEpLazyWeight weight_of(CudaEpProvider p, uint64_t offset) {
    uint64_t mapping = 0;
    CHECK_OK(CudaEpOpenExternalData(p, data_path, &mapping));
    CudaEpRegion r = {mapping, offset, 1024};
    const int64_t shape[1] = {1024};
    CudaEpWeightSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.boundary = CUDAEP_BOUNDARY_MATMUL, spec.dtype = CUDAEP_DTYPE_UINT8, spec.rank = 1;
    spec.shape = shape, spec.regions = &r, spec.num_regions = 1;
    CudaEpLazyWeight w = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateLazyWeight(p, &spec, &w));
    return w;
}

static CudaEpDecline decline(void) {
    CudaEpDecline d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    return d;
}

static void state_page_not_prefetched(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpPagedWeight pw = 0x99;
    CHECK_ERR(CudaEpPageWeight(p, 3, &pw), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK(pw == 0x99);
    RELEASE(CudaEpReleaseProvider, p);
}

static void state_page_twice(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpLazyWeight w = weight_of(p, 0);
    CudaEpDecline d = decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 1, w, &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE);
    CudaEpPagedWeight pw = 0, again = 0x99;
    CHECK_OK(CudaEpPageWeight(p, 1, &pw));
    CHECK_ERR(CudaEpPageWeight(p, 1, &again), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK_ERR(CudaEpCancelWeight(p, 1), CUDAEP_WRONG_STATE, "");
    RELEASE(CudaEpReleasePagedWeight, pw);
    RELEASE(CudaEpReleaseLazyWeight, w);
    RELEASE(CudaEpReleaseProvider, p);
}

static void state_cancel_not_pending(void) {
    CHECK_ERR(CudaEpCancelWeight(prov, 42), CUDAEP_WRONG_STATE, "not prefetched");
}

static void state_prefetch_disabled_declines(void) {
    CudaEpLazyWeight w = weight_of(prov, 0); /* prov has prefill_double_buffer off */
    CudaEpDecline d = decline();
    CHECK_OK(CudaEpPrefetchWeight(prov, 0, w, &d));
    CHECK(d.reason == CUDAEP_DECLINE_DISABLED);
    RELEASE(CudaEpReleaseLazyWeight, w);
}

static void state_prefetch_busy_declines(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpLazyWeight w = weight_of(p, 0);
    for (uint64_t layer = 0; layer < 3; layer++) {
        CudaEpDecline d = decline();
        CHECK_OK(CudaEpPrefetchWeight(p, layer, w, &d));
        CHECK(d.reason == (layer < 2 ? CUDAEP_DECLINE_NONE : CUDAEP_DECLINE_BUSY));
    }
    RELEASE(CudaEpReleaseLazyWeight, w);
    RELEASE(CudaEpReleaseProvider, p); /* teardown drains the two unconsumed layers */
}

static void state_release_paged_twice(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpLazyWeight w = weight_of(p, 1024);
    CudaEpDecline d = decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 0, w, &d));
    CudaEpPagedWeight pw = 0;
    CHECK_OK(CudaEpPageWeight(p, 0, &pw));
    CHECK_OK(CudaEpReleasePagedWeight(pw));
    CHECK_ERR(CudaEpReleasePagedWeight(pw), CUDAEP_STALE_HANDLE, "released");
    uint64_t ptr = 7;
    CHECK_ERR(CudaEpPagedWeightGetPointer(pw, &ptr), CUDAEP_STALE_HANDLE, "released");
    CHECK(ptr == 7);
    RELEASE(CudaEpReleaseLazyWeight, w);
    RELEASE(CudaEpReleaseProvider, p);
}

static void state_db_create_declined(void) {
    CudaEpProvider p = new_provider("staging_pool_cap_bytes", "64KiB", NULL);
    CudaEpDoubleBuffer db = 0x55;
    CHECK_ERR(CudaEpCreateDoubleBuffer(p, 64 << 10, CUDAEP_TRANSFER_ZERO_COPY, &db), CUDAEP_DECLINED, "");
    CHECK(db == 0x55);
    RELEASE(CudaEpReleaseProvider, p);
}

/* db_setup: a direct double buffer on prov with three one-KiB layers of the file. */
static CudaEpDoubleBuffer db_setup(CudaEpLazyWeight* w) {
    for (int i = 0; i < 3; i++) w[i] = weight_of(prov, 1024 * (uint64_t)i);
    CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(prov, 1024, CUDAEP_TRANSFER_STAGING, &db));
    return db;
}

static void db_teardown(CudaEpDoubleBuffer db, CudaEpLazyWeight* w) {
    RELEASE(CudaEpReleaseDoubleBuffer, db);
    for (int i = 0; i < 3; i++) RELEASE(CudaEpReleaseLazyWeight, w[i]);
}

static void state_db_prefetch_both_busy(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket a = 0, b = 0, c = 0x66;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &a));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 1, w[1], &b));
    CHECK_ERR(CudaEpDoubleBufferPrefetch(db, 2, w[2], &c), CUDAEP_WRONG_STATE, "no free slot");
    CHECK(c == 0x66);
    RELEASE(CudaEpReleaseTicket, a);
    RELEASE(CudaEpReleaseTicket, b);
    db_teardown(db, w);
}

static void state_db_wait_after_release(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket t = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(t, &ptr, &len));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(t, &ptr, &len)); /* waiting again is fine */
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(t));
    CHECK_ERR(CudaEpDoubleBufferWaitLayer(t, &ptr, &len), CUDAEP_WRONG_STATE, "");
    RELEASE(CudaEpReleaseTicket, t);
    db_teardown(db, w);
}

static void state_db_wait_stale(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket a = 0, b = 0, c = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &a));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 1, w[1], &b));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(b, &ptr, &len));
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(b));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 2, w[2], &c)); /* reuses b's slot */
    CHECK_ERR(CudaEpDoubleBufferWaitLayer(b, &ptr, &len), CUDAEP_STALE_GENERATION, "stale");
    CudaEpTicketInfo ib, ic;
    memset(&ib, 0, sizeof ib);
    ib.struct_size = sizeof ib;
    ic = ib;
    CHECK_OK(CudaEpTicketGetInfo(b, &ib));
    CHECK_OK(CudaEpTicketGetInfo(c, &ic));
    CHECK(ib.slot == ic.slot && ic.generation > ib.generation && ib.layer == 1 && ic.layer == 2);
    RELEASE(CudaEpReleaseTicket, a);
    RELEASE(CudaEpReleaseTicket, b);
    RELEASE(CudaEpReleaseTicket, c);
    db_teardown(db, w);
}

static void state_db_release_not_waited(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket t = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t));
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(t), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpDoubleBufferCancelLayer(t)); /* a cancel needs no wait */
    RELEASE(CudaEpReleaseTicket, t);
    db_teardown(db, w);
}

static void state_db_release_twice(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket t = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(t, &ptr, &len));
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(t));
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(t), CUDAEP_WRONG_STATE, "");
    RELEASE(CudaEpReleaseTicket, t);
    db_teardown(db, w);
}

static void state_db_cancel_after_release(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket t = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(t, &ptr, &len));
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(t));
    CHECK_ERR(CudaEpDoubleBufferCancelLayer(t), CUDAEP_WRONG_STATE, "");
    RELEASE(CudaEpReleaseTicket, t);
    db_teardown(db, w);
}

static void state_execute_ticket_not_waited(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket t = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t));
    CudaEpTensor in = tensor_at(t, 0, CUDAEP_DTYPE_FLOAT32, 1, s4), out = f32_tensor(buf, 1, s4);
    CHECK_ERR(CudaEpKernelExecute(relu, &in, 1, &out, 1), CUDAEP_INVALID_ARGUMENT, "not waited for");
    RELEASE(CudaEpReleaseTicket, t);
    db_teardown(db, w);
}

/* --- lifetimes ------------------------------------------------------------------------- */

static void state_execute_with_provider_handle_released(void) {
    CudaEpProvider p = new_provider(NULL);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(p, "Relu", 14, 1, &in);
    CudaEpBuffer b = new_buffer(p, 16);
    CHECK_OK(CudaEpReleaseProvider(p)); /* the children keep the provider alive */
    CHECK(exec1(k, f32_tensor(b, 1, s4), f32_tensor(b, 1, s4)));
    CudaEpBuffer more = 0x44;
    CHECK_ERR(CudaEpAllocBuffer(p, 16, 0, &more), CUDAEP_STALE_HANDLE, "released");
    RELEASE(CudaEpReleaseKernel, k);
    RELEASE(CudaEpReleaseBuffer, b);
}

static const char noop_ptx[] =
    ".version 7.5\n.target sm_75\n.address_size 64\n"
    ".visible .entry cudaep_relu_f32(.param .u64 out, .param .u64 x, .param .u64 n) { ret; }\n";

static void state_module_released_before_function(void) {
    CudaEpModule m = 0;
    CudaEpFunction f = 0, g = 0x12;
    CHECK_OK(CudaEpLoadModule(prov, noop_ptx, sizeof noop_ptx, &m));
    CHECK_OK(CudaEpModuleGetFunction(m, "cudaep_relu_f32", &f));
    CHECK_OK(CudaEpReleaseModule(m));
    CHECK_ERR(CudaEpModuleGetFunction(m, "cudaep_relu_f32", &g), CUDAEP_STALE_HANDLE, "released");
    CHECK(g == 0x12);
    size_t needed = 0;
    CHECK_ERR(CudaEpModuleGetPTX(m, NULL, 0, &needed), CUDAEP_STALE_HANDLE, "released");
    CudaEpLaunchConfig cfg = {1, 1, 1, 4, 1, 1, 0, 0};
    CudaEpKernelArg args[3];
    memset(args, 0, sizeof args);
    args[0].type = CUDAEP_ARG_MEMORY, args[0].memory = buf;
    args[1].type = CUDAEP_ARG_MEMORY, args[1].memory = buf;
    args[2].type = CUDAEP_ARG_U64, args[2].value.u64 = 4;
    CHECK_OK(CudaEpLaunchFunction(f, &cfg, args, 3)); /* the function keeps its module loaded */
    RELEASE(CudaEpReleaseFunction, f);
}

static void state_compile_module(void) {
    CudaEpModule m = 0x13;
    if (test_on_sim()) {
        CHECK_ERR(CudaEpCompileModule(prov, "extern \"C\" __global__ void k() {}", "k.cu", NULL, 0, &m),
                  CUDAEP_UNSUPPORTED, "NVRTC");
    } else {
        CHECK_ERR(CudaEpCompileModule(prov, "this is not CUDA", "bad.cu", NULL, 0, &m), CUDAEP_CUDA_ERROR, "bad.cu");
    }
    CHECK(m == 0x13);
}

/* Every release function refuses a second release of the same handle. */
static void state_release_twice(void) {
    CudaEpOptions o = new_test_options();
    CHECK_OK(CudaEpReleaseOptions(o));
    CHECK_ERR(CudaEpReleaseOptions(o), CUDAEP_STALE_HANDLE, "released");
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpBuffer b = new_buffer(p, 8);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(p, "Relu", 14, 1, &in);
    CudaEpModule m = 0;
    CudaEpFunction f = 0;
    CHECK_OK(CudaEpLoadModule(p, noop_ptx, sizeof noop_ptx, &m));
    CHECK_OK(CudaEpModuleGetFunction(m, "cudaep_relu_f32", &f));
    CudaEpLazyWeight w = weight_of(p, 0);
    CudaEpDecline d = decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 0, w, &d));
    CudaEpPagedWeight pw = 0;
    CHECK_OK(CudaEpPageWeight(p, 0, &pw));
    CudaEpDoubleBuffer db = 0;
    CHECK_OK(CudaEpCreateDoubleBuffer(p, 1024, CUDAEP_TRANSFER_STAGING, &db));
    CudaEpTicket t = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 5, w, &t));

    CHECK_OK(CudaEpReleaseTicket(t));
    CHECK_ERR(CudaEpReleaseTicket(t), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseDoubleBuffer(db));
    CHECK_ERR(CudaEpReleaseDoubleBuffer(db), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleasePagedWeight(pw));
    CHECK_ERR(CudaEpReleasePagedWeight(pw), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseLazyWeight(w));
    CHECK_ERR(CudaEpReleaseLazyWeight(w), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseFunction(f));
    CHECK_ERR(CudaEpReleaseFunction(f), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseModule(m));
    CHECK_ERR(CudaEpReleaseModule(m), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseKernel(k));
    CHECK_ERR(CudaEpReleaseKernel(k), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseBuffer(b));
    CHECK_ERR(CudaEpReleaseBuffer(b), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpReleaseProvider(p));
    CHECK_ERR(CudaEpReleaseProvider(p), CUDAEP_STALE_HANDLE, "released");
}

/* --- lifecycle additions (ABI 3) -------------------------------------------------------- */

/* Keyed slots can be removed (making room for new keys); primary and verify cannot; removal is
 * refused during a capture. */
static void state_remove_graph(void) {
    CHECK_ERR(CudaEpRemoveGraph(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_INVALID_ARGUMENT, "only keyed slots");
    CHECK_ERR(CudaEpRemoveGraph(prov, CUDAEP_SLOT_VERIFY, 0), CUDAEP_INVALID_ARGUMENT, "only keyed slots");
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_KEYED, 41, &relu, 1, &buf, 1));
    CHECK(exec1(relu, f32_tensor(buf, 1, s4), f32_tensor(buf, 1, s4)));
    CHECK_ERR(CudaEpRemoveGraph(prov, CUDAEP_SLOT_KEYED, 41), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_KEYED, 41));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 41));
    CHECK_OK(CudaEpRemoveGraph(prov, CUDAEP_SLOT_KEYED, 41));
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 41), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpRemoveGraph(prov, CUDAEP_SLOT_KEYED, 41)); /* not held: nothing to do */
}

/* One mapping per path; each open takes a reference; the last close unmaps. */
static void state_close_external_data(void) {
    static unsigned char bytes[256];
    static char path[512];
    pattern_bytes(bytes, sizeof bytes, 31);
    temp_path(path, sizeof path, "close-external.onnx.data");
    write_file(path, bytes, sizeof bytes);
    uint64_t a = 0, b = 0;
    CHECK_OK(CudaEpOpenExternalData(prov, path, &a));
    CHECK_OK(CudaEpOpenExternalData(prov, path, &b));
    CHECK(a == b);
    CHECK_OK(CudaEpCloseExternalData(prov, a));
    CHECK_OK(CudaEpCloseExternalData(prov, b));
    CHECK_ERR(CudaEpCloseExternalData(prov, a), CUDAEP_INVALID_ARGUMENT, "");
    CudaEpRegion r = {a, 0, 64};
    const int64_t shape[1] = {64};
    CudaEpWeightSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.boundary = CUDAEP_BOUNDARY_MATMUL, spec.dtype = CUDAEP_DTYPE_UINT8, spec.rank = 1;
    spec.shape = shape, spec.regions = &r, spec.num_regions = 1;
    CudaEpLazyWeight w = 0x99;
    CHECK_ERR(CudaEpCreateLazyWeight(prov, &spec, &w), CUDAEP_INVALID_ARGUMENT, "");
    CHECK(w == 0x99);
    unlink(path);
}

/* Recovery touches the device, so the capture window refuses it; outside a capture, with
 * nothing quarantined, it recovers nothing; no fallback has happened, so the reasons are "". */
static void state_recover_during_capture(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(p, 4096, CUDAEP_TRANSFER_STAGING, &db));
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(p, "Relu", 14, 1, &in);
    CudaEpBuffer b = new_buffer(p, 16);
    CHECK_OK(CudaEpMemset(b, 0, 16, 0x3F));
    CHECK_OK(CudaEpBeginCapture(p, CUDAEP_SLOT_PRIMARY, 0, &k, 1, &b, 1));
    uint32_t n = 77;
    CHECK_ERR(CudaEpRecoverWeights(p, &n), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpDoubleBufferRecover(db, &n), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK(n == 77);
    CHECK_OK(CudaEpAbortCapture(p, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpRecoverWeights(p, &n));
    CHECK(n == 0);
    CHECK_OK(CudaEpDoubleBufferRecover(db, NULL));
    char text[64] = "untouched";
    size_t needed = 0;
    CHECK_OK(CudaEpGetWeightFallback(p, text, sizeof text, &needed));
    CHECK(needed == 1 && text[0] == 0);
    CHECK_OK(CudaEpDoubleBufferGetFallback(db, text, sizeof text, &needed));
    CHECK(needed == 1 && text[0] == 0);
    RELEASE(CudaEpReleaseDoubleBuffer, db);
    RELEASE(CudaEpReleaseKernel, k);
    RELEASE(CudaEpReleaseBuffer, b);
    RELEASE(CudaEpReleaseProvider, p);
}

/* A copy between providers cannot be recorded: a capture on either side refuses it, on the
 * capturing thread too, and the capture survives. */
static void state_copy_peer_during_capture(void) {
    CudaEpProvider other = new_provider(NULL);
    CudaEpBuffer theirs = new_buffer(other, 16), mine = new_buffer(prov, 16);
    CHECK_OK(CudaEpMemset(theirs, 0, 16, 0x44));
    CHECK_OK(CudaEpMemset(mine, 0, 16, 0x55));
    begin(CUDAEP_SLOT_PRIMARY);
    int32_t path = -7;
    CHECK_ERR(CudaEpCopyPeer(mine, 0, theirs, 0, 16, &path), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpCopyPeer(theirs, 0, mine, 0, 16, &path), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK(path == -7);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    unsigned char b[16];
    CHECK(download(mine, b, sizeof b));
    for (int i = 0; i < 16; i++) CHECK(b[i] == 0x55);
    CHECK_OK(CudaEpCopyPeer(mine, 0, theirs, 0, 16, &path));
    CHECK(path == CUDAEP_PEER_PATH_DEVICE);
    CHECK(download(mine, b, sizeof b));
    for (int i = 0; i < 16; i++) CHECK(b[i] == 0x44);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    RELEASE(CudaEpReleaseBuffer, mine);
    RELEASE(CudaEpReleaseBuffer, theirs);
    RELEASE(CudaEpReleaseProvider, other);
}


/* --- one capture window per capturing thread (issue 30, item 8) --------------------------- */

static CudaEpProvider other_prov;
static CudaEpBuffer other_buf;
static CudaEpTicket other_ticket;

static void* other_provider_from_thread(void* arg) {
    CudaEpStatus** got = arg;
    CudaEpBuffer b = 0;
    got[0] = CudaEpAllocBuffer(other_prov, 64, 0, &b);
    if (got[0] == NULL) got[1] = CudaEpReleaseBuffer(b);
    got[2] = CudaEpMemset(other_buf, 0, 16, 0x66);
    return NULL;
}

/* While prov captures on this thread, calls on another provider that would touch the driver
 * are refused on this thread before the driver (cuMemAlloc there would invalidate prov's
 * capture), and run on any other thread; prov's capture ends and replays. */
static void state_other_provider_on_capturing_thread(void) {
    other_prov = new_provider(NULL);
    other_buf = new_buffer(other_prov, 64);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(other_prov, "Relu", 14, 1, &in);
    begin(CUDAEP_SLOT_PRIMARY);
    CudaEpBuffer b = 0x99;
    const char* why = "captures for another provider";
    CHECK_ERR(CudaEpAllocBuffer(other_prov, 64, 0, &b), CUDAEP_WRONG_STATE, why);
    CHECK(b == 0x99);
    float x[4] = {1, 2, 3, 4};
    CHECK_ERR(CudaEpCopyToDevice(other_buf, 0, x, sizeof x), CUDAEP_WRONG_STATE, why);
    CHECK_ERR(CudaEpCopyToHost(x, other_buf, 0, sizeof x), CUDAEP_WRONG_STATE, why);
    CHECK_ERR(CudaEpMemset(other_buf, 0, 16, 0x22), CUDAEP_WRONG_STATE, why);
    CudaEpTensor t4 = f32_tensor(other_buf, 1, s4);
    CHECK_ERR(CudaEpKernelExecute(k, &t4, 1, &t4, 1), CUDAEP_WRONG_STATE, why);
    CHECK_ERR(CudaEpForceSynchronize(other_prov), CUDAEP_WRONG_STATE, why);
    CHECK_ERR(CudaEpSynchronizeCompute(other_prov), CUDAEP_WRONG_STATE, why);
    CudaEpKernel k2 = 0x99;
    CHECK_ERR(CudaEpGetKernel(other_prov, "Relu", 14, &in, 1, NULL, 0, &k2), CUDAEP_WRONG_STATE, why);
    CHECK_ERR(CudaEpBeginCapture(other_prov, CUDAEP_SLOT_PRIMARY, 0, &k, 1, &other_buf, 1), CUDAEP_WRONG_STATE, why);
    CudaEpDoubleBuffer db = 0x99;
    CHECK_ERR(CudaEpCreateDoubleBuffer(other_prov, 4096, CUDAEP_TRANSFER_STAGING, &db), CUDAEP_WRONG_STATE, why);
    CHECK(db == 0x99 && k2 == 0x99);
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(other_prov, &status)); /* queries answer */
    CHECK(status == CUDAEP_CAPTURE_NONE);
    CudaEpStatus* got[3] = {NULL, NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_provider_from_thread, got) == 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 3; i++) CHECK_OK(got[i]); /* another thread is not the capture's */
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status == CUDAEP_CAPTURE_ACTIVE); /* nothing invalidated it */
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    CudaEpBuffer after = 0;
    CHECK_OK(CudaEpAllocBuffer(other_prov, 64, 0, &after)); /* and this thread may again */
    RELEASE(CudaEpReleaseBuffer, after);
    RELEASE(CudaEpReleaseKernel, k);
    RELEASE(CudaEpReleaseBuffer, other_buf);
    RELEASE(CudaEpReleaseProvider, other_prov);
}

/* Releases on another provider from the capturing thread succeed at once (the handle is gone; a
 * second release is stale) and free when the capture ends, the provider's handle included (its
 * teardown waits for the capture); cuMemFree there returned CUDA_ERROR and released anyway. */
static void state_release_other_provider_on_capturing_thread(void) {
    CudaEpProvider q = new_provider(NULL);
    CudaEpBuffer qb = new_buffer(q, 4096), kept = new_buffer(q, 64);
    CudaEpDoubleBuffer qdb = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(q, 4096, CUDAEP_TRANSFER_STAGING, &qdb));
    uint64_t live = 0, during = 0;
    CHECK_OK(CudaEpGetLiveHandleCount(&live));
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_OK(CudaEpReleaseBuffer(qb));
    CHECK_ERR(CudaEpReleaseBuffer(qb), CUDAEP_STALE_HANDLE, "");
    CHECK_OK(CudaEpReleaseDoubleBuffer(qdb));
    CHECK_OK(CudaEpReleaseProvider(q)); /* kept holds it; the provider goes with kept */
    CHECK_OK(CudaEpReleaseBuffer(kept)); /* its last child: destroyed when the capture ends */
    CHECK_OK(CudaEpGetLiveHandleCount(&during));
    CHECK(during + 4 == live);
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status == CUDAEP_CAPTURE_ACTIVE);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

/* A cancel that cannot succeed is refused at the call during a capture (it returned OK, and
 * every later release, even of an unrelated buffer or the provider, returned WRONG_STATE); one
 * that can succeeds, and the layer is no longer pending at once. */
static void state_cancel_not_pending_during_capture(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpTensorInfo in = f32_info(1, s4);
    CudaEpKernel k = get_kernel(p, "Relu", 14, 1, &in);
    CudaEpBuffer b = new_buffer(p, 16), spare = new_buffer(p, 64);
    CHECK_OK(CudaEpMemset(b, 0, 16, 0x3F));
    CudaEpLazyWeight w = weight_of(p, 0);
    CudaEpDecline d = decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 1, w, &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE);
    CHECK_OK(CudaEpBeginCapture(p, CUDAEP_SLOT_PRIMARY, 0, &k, 1, &b, 1));
    CHECK(exec1(k, f32_tensor(b, 1, s4), f32_tensor(b, 1, s4)));
    CHECK_ERR(CudaEpCancelWeight(p, 7), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK_OK(CudaEpCancelWeight(p, 1));
    CHECK_ERR(CudaEpCancelWeight(p, 1), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK_OK(CudaEpEndCapture(p, CUDAEP_SLOT_PRIMARY, 0));
    CudaEpPagedWeight pw = 0x99;
    CHECK_ERR(CudaEpPageWeight(p, 1, &pw), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK(pw == 0x99);
    CHECK_OK(CudaEpReleaseBuffer(spare)); /* nothing deferred reports through these */
    CHECK_OK(CudaEpReleaseKernel(k));
    CHECK_OK(CudaEpReleaseLazyWeight(w));
    CHECK_OK(CudaEpReleaseBuffer(b));
    CHECK_OK(CudaEpReleaseProvider(p));
}

/* Cancels succeed during a capture, on the capturing thread and on another (the header says so;
 * CudaEpDoubleBufferCancelLayer returned WRONG_STATE), are checked at the call, and the slots
 * are reusable after the capture. */
static CudaEpTicket cancel_on_thread_ticket;

static void* cancel_on_thread(void* arg) {
    *(CudaEpStatus**)arg = CudaEpDoubleBufferCancelLayer(cancel_on_thread_ticket);
    return NULL;
}

static void state_db_cancel_during_capture(void) {
    CudaEpLazyWeight w[3];
    CudaEpDoubleBuffer db = db_setup(w);
    CudaEpTicket a = 0, b = 0, c = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &a));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 1, w[1], &b));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(a, &ptr, &len));
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_OK(CudaEpDoubleBufferCancelLayer(a));
    CHECK_ERR(CudaEpDoubleBufferCancelLayer(a), CUDAEP_WRONG_STATE, "cancel");
    CudaEpStatus* got = NULL;
    cancel_on_thread_ticket = b;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_on_thread, &got) == 0);
    pthread_join(t, NULL);
    CHECK_OK(got);
    int32_t state = -1;
    CHECK_OK(CudaEpDoubleBufferGetSlotState(db, 0, &state));
    CHECK(state == CUDAEP_SLOT_STATE_DRAINING);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 2, w[2], &c)); /* a cancelled slot is reusable */
    CHECK_OK(CudaEpDoubleBufferWaitLayer(c, &ptr, &len));
    CHECK(len == 1024);
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(c));
    RELEASE(CudaEpReleaseTicket, a);
    RELEASE(CudaEpReleaseTicket, b);
    RELEASE(CudaEpReleaseTicket, c);
    db_teardown(db, w);
}

/* Argument errors before state errors: closing a mapping that is not open during a capture is
 * INVALID_ARGUMENT (it was WRONG_STATE), on the capturing thread and on another. */
static CudaEpStatus* close_999_status;

static void* close_999(void* arg) {
    (void)arg;
    close_999_status = CudaEpCloseExternalData(prov, 999);
    return NULL;
}

static void state_close_external_data_during_capture(void) {
    begin(CUDAEP_SLOT_PRIMARY);
    CHECK_ERR(CudaEpCloseExternalData(prov, 999), CUDAEP_INVALID_ARGUMENT, "unknown mapping");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, close_999, NULL) == 0);
    pthread_join(t, NULL);
    CHECK_ERR(close_999_status, CUDAEP_INVALID_ARGUMENT, "unknown mapping");
    CudaEpDoubleBuffer db = 0x99;
    CHECK_ERR(CudaEpCreateDoubleBuffer(prov, UINT64_MAX / 2, CUDAEP_TRANSFER_STAGING, &db), CUDAEP_DECLINED, "declined");
    CHECK(db == 0x99);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
}

/* Two staging buffers fit the cap when twice the slot size in whole host pages does: a 64-byte
 * double buffer under a 64 KiB cap was DECLINED (each buffer was counted at the pool's 64 KiB
 * reuse granule); the decline names the rounded size. */
static void state_db_create_small_cap(void) {
    CudaEpProvider p = new_provider("staging_pool_cap_bytes", "64KiB", NULL);
    const uint64_t sizes[3] = {64, 4096, 32 << 10};
    for (int i = 0; i < 3; i++) {
        CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
        CHECK_OK(CudaEpCreateDoubleBuffer(p, sizes[i], CUDAEP_TRANSFER_STAGING, &db));
        RELEASE(CudaEpReleaseDoubleBuffer, db);
    }
    CudaEpDoubleBuffer db = 0x55;
    CHECK_ERR(CudaEpCreateDoubleBuffer(p, (32 << 10) + 1, CUDAEP_TRANSFER_STAGING, &db), CUDAEP_DECLINED,
              "rounded up to whole");
    CHECK(db == 0x55);
    RELEASE(CudaEpReleaseProvider, p);
}

static void* wait_other_ticket(void* arg) {
    CudaEpStatus** got = arg;
    uint64_t ptr = 0, len = 0;
    got[0] = CudaEpDoubleBufferWaitLayer(other_ticket, &ptr, &len);
    got[1] = got[0] ? NULL : CudaEpDoubleBufferReleaseLayer(other_ticket);
    return NULL;
}

/* Another provider's double buffer waited on from the capturing thread made an event query
 * there (CUDA_ERROR), quarantined the slot and invalidated the capture. It is refused before the
 * driver, nothing is quarantined, and from another thread the same calls work. */
static void state_other_provider_db_on_capturing_thread(void) {
    other_prov = new_provider(NULL);
    CudaEpLazyWeight w = weight_of(other_prov, 0);
    CudaEpDoubleBuffer qdb = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(other_prov, 1024, CUDAEP_TRANSFER_STAGING, &qdb));
    CHECK_OK(CudaEpDoubleBufferPrefetch(qdb, 0, w, &other_ticket));
    begin(CUDAEP_SLOT_PRIMARY);
    uint64_t ptr = 7, len = 7;
    const char* why = "captures for another provider";
    CHECK_ERR(CudaEpDoubleBufferWaitLayer(other_ticket, &ptr, &len), CUDAEP_WRONG_STATE, why);
    CHECK(ptr == 7 && len == 7);
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(other_ticket), CUDAEP_WRONG_STATE, why);
    CudaEpTicket t2 = 0x99;
    CHECK_ERR(CudaEpDoubleBufferPrefetch(qdb, 1, w, &t2), CUDAEP_WRONG_STATE, why);
    int32_t state = -1;
    CHECK_OK(CudaEpDoubleBufferGetSlotState(qdb, 0, &state)); /* answered without the driver */
    CHECK(state != CUDAEP_SLOT_STATE_QUARANTINED);
    CudaEpStatus* got[2] = {NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_other_ticket, got) == 0);
    pthread_join(t, NULL);
    CHECK_OK(got[0]);
    CHECK_OK(got[1]);
    CHECK_OK(CudaEpDoubleBufferGetSlotState(qdb, 0, &state));
    CHECK(state == CUDAEP_SLOT_STATE_DRAINING);
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &status));
    CHECK(status == CUDAEP_CAPTURE_ACTIVE);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    RELEASE(CudaEpReleaseTicket, other_ticket);
    RELEASE(CudaEpReleaseDoubleBuffer, qdb);
    RELEASE(CudaEpReleaseLazyWeight, w);
    RELEASE(CudaEpReleaseProvider, other_prov);
}

int main(void) {
    unsetenv("CUDAEP_PREFILL_DOUBLE_BUFFER");
    static unsigned char file[4096];
    pattern_bytes(file, sizeof file, 77);
    temp_path(data_path, sizeof data_path, "wrong-state.onnx.data");
    write_file(data_path, file, sizeof file);

    prov = new_provider(NULL);
    CudaEpTensorInfo in = f32_info(1, s4);
    relu = get_kernel(prov, "Relu", 14, 1, &in);
    buf = new_buffer(prov, 16);
    CHECK_OK(CudaEpMemset(buf, 0, 16, 0x3F));

    void (*cases[])(void) = {
        state_replay_nothing_captured, state_replay_segment_nothing_captured,
        state_replay_segment_past_segments, state_replay_during_capture, state_replay_after_reset,
        state_end_without_begin, state_abort_without_begin, state_end_on_another_thread,
        state_abort_on_another_thread, state_end_after_refused_drain, state_reset_during_capture,
        state_reset_nothing_captured, state_begin_during_capture, state_recapture_during_capture,
        state_begin_rejected_by_audit, state_host_copy_during_capture, state_drain_during_capture,
        state_nonzero_count_during_capture, state_nonzero_count_on_other_kernel,
        state_page_not_prefetched, state_page_twice, state_cancel_not_pending,
        state_prefetch_disabled_declines, state_prefetch_busy_declines, state_release_paged_twice,
        state_db_create_declined, state_db_prefetch_both_busy, state_db_wait_after_release,
        state_db_wait_stale, state_db_release_not_waited, state_db_release_twice,
        state_db_cancel_after_release, state_execute_ticket_not_waited,
        state_execute_with_provider_handle_released, state_module_released_before_function,
        state_compile_module, state_release_twice, state_other_thread_work_during_capture,
        state_driver_work_on_capturing_thread, state_release_during_capture,
        state_last_child_released_during_capture, state_misaligned_tensor,
        state_reset_during_other_capture, state_remove_graph, state_close_external_data,
        state_recover_during_capture, state_copy_peer_during_capture,
        state_other_provider_on_capturing_thread, state_release_other_provider_on_capturing_thread,
        state_cancel_not_pending_during_capture, state_db_cancel_during_capture,
        state_close_external_data_during_capture, state_db_create_small_cap,
        state_other_provider_db_on_capturing_thread,
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cases[i]();
        usable();
    }

    RELEASE(CudaEpReleaseKernel, relu);
    RELEASE(CudaEpReleaseBuffer, buf);
    CHECK_OK(CudaEpReleaseProvider(prov));
    unlink(data_path);
    check_no_live_handles();
    printf("wrong state: %zu cases\n", sizeof cases / sizeof cases[0]);
    return check_result("test_wrong_state");
}
