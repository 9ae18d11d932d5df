/*
 * test_graphs.c — CUDA graph capture and replay through the C ABI, porting the seed scenarios:
 * capture/replay over live buffers with no device allocation per replay (and buffers released
 * while a graph embeds them), segmented capture around a NonZero host seam, the audit that
 * rejects a non-capturable kernel before the stream enters capture, recovery by abort after a
 * forced drain invalidated a capture, Primary/Verify/keyed slot independence, and recapture
 * updating the executable in place.
 */
#include "support.h"

enum { IN = 16, HID = 24, OUT = 8 };

static CudaEpProvider prov;

/* A 2-layer MLP decode step y = relu(x·W1 + b1)·W2 + b2 and a NonZero over the hidden layer. */
typedef struct {
    float w1[IN * HID], b1[HID], w2[HID * OUT], b2[OUT];
    CudaEpBuffer x, w1b, b1b, w2b, b2b, h0, h1, h2, y0, y, nz_idx, nz_count;
    CudaEpKernel mm1, add1, relu, mm2, add2, nonzero;
} mlp;

static const int64_t s_x[2] = {1, IN}, s_w1[2] = {IN, HID}, s_h[2] = {1, HID}, s_b1[1] = {HID};
static const int64_t s_w2[2] = {HID, OUT}, s_y[2] = {1, OUT}, s_b2[1] = {OUT};
static const int64_t s_idx[2] = {2, HID}, s_cnt[1] = {1};

static void mlp_init(mlp* m) {
    memset(m, 0, sizeof *m);
    seeded_floats(m->w1, IN * HID, 11);
    seeded_floats(m->b1, HID, 12);
    seeded_floats(m->w2, HID * OUT, 13);
    seeded_floats(m->b2, OUT, 14);
    m->x = new_buffer(prov, 4 * IN);
    m->w1b = upload_floats(prov, m->w1, IN * HID);
    m->b1b = upload_floats(prov, m->b1, HID);
    m->w2b = upload_floats(prov, m->w2, HID * OUT);
    m->b2b = upload_floats(prov, m->b2, OUT);
    m->h0 = new_buffer(prov, 4 * HID);
    m->h1 = new_buffer(prov, 4 * HID);
    m->h2 = new_buffer(prov, 4 * HID);
    m->y0 = new_buffer(prov, 4 * OUT);
    m->y = new_buffer(prov, 4 * OUT);
    m->nz_idx = new_buffer(prov, 8 * 2 * HID);
    m->nz_count = new_buffer(prov, 8);
    CudaEpTensorInfo mm1in[2] = {f32_info(2, s_x), f32_info(2, s_w1)};
    CudaEpTensorInfo add1in[2] = {f32_info(2, s_h), f32_info(1, s_b1)};
    CudaEpTensorInfo hin = f32_info(2, s_h);
    CudaEpTensorInfo mm2in[2] = {f32_info(2, s_h), f32_info(2, s_w2)};
    CudaEpTensorInfo add2in[2] = {f32_info(2, s_y), f32_info(1, s_b2)};
    m->mm1 = get_kernel(prov, "MatMul", 13, 2, mm1in);
    m->add1 = get_kernel(prov, "Add", 14, 2, add1in);
    m->relu = get_kernel(prov, "Relu", 14, 1, &hin);
    m->mm2 = get_kernel(prov, "MatMul", 13, 2, mm2in);
    m->add2 = get_kernel(prov, "Add", 14, 2, add2in);
    m->nonzero = get_kernel(prov, "NonZero", 13, 1, &hin);
}

static void mlp_free(mlp* m) {
    CudaEpBuffer* bs[] = {&m->x, &m->w1b, &m->b1b, &m->w2b, &m->b2b, &m->h0, &m->h1,
                          &m->h2, &m->y0, &m->y, &m->nz_idx, &m->nz_count};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) RELEASE(CudaEpReleaseBuffer, *bs[i]);
    CudaEpKernel* ks[] = {&m->mm1, &m->add1, &m->relu, &m->mm2, &m->add2, &m->nonzero};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) RELEASE(CudaEpReleaseKernel, *ks[i]);
}

static void mlp_layer1(mlp* m) {
    exec2(m->mm1, f32_tensor(m->x, 2, s_x), f32_tensor(m->w1b, 2, s_w1), f32_tensor(m->h0, 2, s_h));
    exec2(m->add1, f32_tensor(m->h0, 2, s_h), f32_tensor(m->b1b, 1, s_b1), f32_tensor(m->h1, 2, s_h));
    exec1(m->relu, f32_tensor(m->h1, 2, s_h), f32_tensor(m->h2, 2, s_h));
}

static void mlp_layer2(mlp* m) {
    exec2(m->mm2, f32_tensor(m->h2, 2, s_h), f32_tensor(m->w2b, 2, s_w2), f32_tensor(m->y0, 2, s_y));
    exec2(m->add2, f32_tensor(m->y0, 2, s_y), f32_tensor(m->b2b, 1, s_b2), f32_tensor(m->y, 2, s_y));
}

/* mlp_seam runs NonZero over the hidden activations eagerly and reads its count on the host. */
static int64_t mlp_seam(mlp* m) {
    CudaEpTensor in = f32_tensor(m->h2, 2, s_h);
    CudaEpTensor outs[2] = {tensor_at(m->nz_idx, 0, CUDAEP_DTYPE_INT64, 2, s_idx),
                            tensor_at(m->nz_count, 0, CUDAEP_DTYPE_INT64, 1, s_cnt)};
    CHECK_OK(CudaEpKernelExecute(m->nonzero, &in, 1, outs, 2));
    int64_t n = -1;
    CHECK_OK(CudaEpKernelNonZeroCount(m->nonzero, &outs[1], &n));
    return n;
}

/* mlp_ref computes y for x on the CPU and the number of positive hidden activations. */
static int64_t mlp_ref(const mlp* m, const float* x, float* y) {
    float h[HID];
    int64_t nz = 0;
    for (int j = 0; j < HID; j++) {
        double acc = m->b1[j];
        for (int k = 0; k < IN; k++) acc += (double)x[k] * m->w1[k * HID + j];
        h[j] = acc > 0 ? (float)acc : 0.0f;
        nz += h[j] != 0.0f;
    }
    for (int j = 0; j < OUT; j++) {
        double acc = m->b2[j];
        for (int k = 0; k < HID; k++) acc += (double)h[k] * m->w2[k * OUT + j];
        y[j] = (float)acc;
    }
    return nz;
}

static void mlp_set_input(mlp* m, unsigned seed, float* x) {
    seeded_floats(x, IN, seed);
    CHECK_OK(CudaEpCopyToDevice(m->x, 0, x, 4 * IN));
    CHECK_OK(CudaEpMemset(m->y, 0, 4 * OUT, 0xFF)); /* NaNs: an unwritten output shows */
    CHECK_OK(CudaEpMemset(m->h2, 0, 4 * HID, 0xFF));
}

static CudaEpProviderStats stats_now(void) {
    CudaEpProviderStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(CudaEpProviderGetStats(prov, &s));
    return s;
}

static int32_t capture_status(void) {
    int32_t s = -1;
    CHECK_OK(CudaEpGetCaptureStatus(prov, &s));
    return s;
}

static int has_executable(int32_t kind, int64_t key) {
    int32_t has = -1;
    CHECK_OK(CudaEpHasExecutable(prov, kind, key, &has));
    return has;
}

/* Whole-step capture; replays read the buffers as they are at replay time, allocate nothing,
 * and keep working after the buffer handles are released (the graph retains the memory). */
static void test_capture_replay_uses_live_buffers(void) {
    mlp m;
    mlp_init(&m);
    CudaEpKernel ks[5] = {m.mm1, m.add1, m.relu, m.mm2, m.add2};
    CudaEpBuffer keep[10] = {m.x, m.w1b, m.b1b, m.w2b, m.b2b, m.h0, m.h1, m.h2, m.y0, m.y};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, ks, 5, keep, 10));
    CHECK(capture_status() == CUDAEP_CAPTURE_ACTIVE);
    mlp_layer1(&m);
    mlp_layer2(&m);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK(capture_status() == CUDAEP_CAPTURE_NONE);
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 1);
    size_t segs = 0;
    CHECK_OK(CudaEpGetSegmentCount(prov, CUDAEP_SLOT_PRIMARY, 0, &segs));
    CHECK(segs == 1);

    /* Release the weights' handles: the graph still embeds (and retains) their memory. */
    RELEASE(CudaEpReleaseBuffer, m.w1b);
    RELEASE(CudaEpReleaseBuffer, m.w2b);
    CudaEpProviderStats before = stats_now();
    float x[IN], y[OUT], want[OUT];
    for (unsigned step = 0; step < 4; step++) {
        mlp_set_input(&m, 100 + step, x);
        mlp_ref(&m, x, want);
        CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
        CHECK(download(m.y, y, sizeof y));
        CHECK_FLOATS_NEAR(y, want, OUT);
    }
    CudaEpProviderStats after = stats_now();
    CHECK(after.device_allocs == before.device_allocs); /* no allocation per replay */
    CHECK(after.device_live_bytes == before.device_live_bytes);

    CudaEpGraphStats gs;
    memset(&gs, 0, sizeof gs);
    gs.struct_size = sizeof gs;
    CHECK_OK(CudaEpGetGraphStats(prov, CUDAEP_SLOT_PRIMARY, 0, &gs));
    CHECK(gs.captures == 1 && gs.replay_launches == 4 && gs.instantiations == 1);

    /* Reset destroys the graph and only then frees the retained weights. */
    int32_t had = -1;
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    CHECK(had == 1);
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 0);
    CudaEpProviderStats reset = stats_now();
    CHECK(reset.device_frees == after.device_frees + 2);
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "no executable is installed");
    mlp_free(&m);
}

/* Segmented capture: layer 1, the NonZero seam run eagerly with its host read, layer 2. */
static void test_segmented_capture_with_a_host_seam(void) {
    mlp m;
    mlp_init(&m);
    float x[IN], y[OUT], want[OUT];

    /* The audit rejects the seam inside a capture before the stream enters capture. */
    CudaEpKernel with_seam[2] = {m.relu, m.nonzero};
    CHECK_ERR(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, with_seam, 2, NULL, 0), CUDAEP_UNSUPPORTED,
              "rejected before begin_capture");
    CHECK(capture_status() == CUDAEP_CAPTURE_NONE);
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 0);

    CudaEpBuffer keep[10] = {m.x, m.w1b, m.b1b, m.w2b, m.b2b, m.h0, m.h1, m.h2, m.y0, m.y};
    CudaEpKernel l1[3] = {m.mm1, m.add1, m.relu}, l2[2] = {m.mm2, m.add2};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, l1, 3, keep, 10));
    mlp_layer1(&m);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, l2, 2, keep, 10));
    mlp_layer2(&m);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    size_t segs = 0;
    CHECK_OK(CudaEpGetSegmentCount(prov, CUDAEP_SLOT_PRIMARY, 0, &segs));
    CHECK(segs == 2);

    for (unsigned step = 0; step < 3; step++) {
        mlp_set_input(&m, 200 + step, x);
        int64_t want_nz = mlp_ref(&m, x, want);
        CHECK_OK(CudaEpReplaySegment(prov, CUDAEP_SLOT_PRIMARY, 0, 0));
        CHECK(mlp_seam(&m) == want_nz);
        CHECK_OK(CudaEpReplaySegment(prov, CUDAEP_SLOT_PRIMARY, 0, 1));
        CHECK(download(m.y, y, sizeof y));
        CHECK_FLOATS_NEAR(y, want, OUT);
    }
    CHECK_ERR(CudaEpReplaySegment(prov, CUDAEP_SLOT_PRIMARY, 0, 2), CUDAEP_INVALID_ARGUMENT, "segment index");
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    mlp_free(&m);
}

/* A forced drain inside a capture invalidates it; reset is refused while the stream is still
 * capturing; abort recovers the stream, and a fresh capture works. */
static void test_abort_after_a_mid_capture_failure(void) {
    mlp m;
    mlp_init(&m);
    float x[IN], y[OUT], want[OUT];
    CudaEpBuffer keep[10] = {m.x, m.w1b, m.b1b, m.w2b, m.b2b, m.h0, m.h1, m.h2, m.y0, m.y};
    CudaEpKernel ks[5] = {m.mm1, m.add1, m.relu, m.mm2, m.add2};

    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, ks, 5, keep, 10));
    mlp_layer1(&m);
    CHECK(capture_status() != CUDAEP_CAPTURE_NONE);
    CHECK_ERR(CudaEpDrainForUnmap(prov), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_ERR(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpAbortCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK(capture_status() == CUDAEP_CAPTURE_NONE);
    int32_t had = -1;
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    CHECK(had == 0);
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 0);

    /* The same stream runs eager work again... */
    mlp_set_input(&m, 300, x);
    mlp_ref(&m, x, want);
    mlp_layer1(&m);
    mlp_layer2(&m);
    CHECK(download(m.y, y, sizeof y));
    CHECK_FLOATS_NEAR(y, want, OUT);

    /* ...and a fresh capture/replay cycle succeeds. */
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, ks, 5, keep, 10));
    mlp_layer1(&m);
    mlp_layer2(&m);
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    mlp_set_input(&m, 301, x);
    mlp_ref(&m, x, want);
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK(download(m.y, y, sizeof y));
    CHECK_FLOATS_NEAR(y, want, OUT);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, &had));
    CHECK(had == 1);

    /* A drain refused inside a capture touches nothing: the capture still ends and installs. */
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_VERIFY, 0, ks, 5, keep, 10));
    mlp_layer1(&m);
    CHECK_ERR(CudaEpForceSynchronize(prov), CUDAEP_WRONG_STATE, "inside a capture");
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK(capture_status() == CUDAEP_CAPTURE_NONE);
    CHECK(has_executable(CUDAEP_SLOT_VERIFY, 0) == 1);
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_VERIFY, 0, NULL));
    CHECK_OK(CudaEpForceSynchronize(prov));
    mlp_free(&m);
}

/* Primary (+1) and Verify (+2) capture, replay and reset independently on one stream. */
static void test_primary_and_verify_slots_are_independent(void) {
    enum { N = 32 };
    const int64_t s[1] = {N};
    float base[N], ones[N], got[N], want1[N], want2[N];
    for (int i = 0; i < N; i++) base[i] = (float)i + 0.5f, ones[i] = 1.0f;
    for (int i = 0; i < N; i++) want1[i] = base[i] + 1, want2[i] = base[i] + 2;
    CudaEpTensorInfo in2[2] = {f32_info(1, s), f32_info(1, s)};
    CudaEpKernel add = get_kernel(prov, "Add", 14, 2, in2);
    CudaEpBuffer one = upload_floats(prov, ones, N);
    CudaEpBuffer p_in = upload_floats(prov, base, N), p_out = new_buffer(prov, 4 * N);
    CudaEpBuffer v_in = upload_floats(prov, base, N), v_mid = new_buffer(prov, 4 * N), v_out = new_buffer(prov, 4 * N);

    CudaEpBuffer pk[3] = {one, p_in, p_out}, vk[4] = {one, v_in, v_mid, v_out};
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_PRIMARY, 0, &add, 1, pk, 3));
    exec2(add, f32_tensor(p_in, 1, s), f32_tensor(one, 1, s), f32_tensor(p_out, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_PRIMARY, 0));
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_VERIFY, 0, &add, 1, vk, 4));
    exec2(add, f32_tensor(v_in, 1, s), f32_tensor(one, 1, s), f32_tensor(v_mid, 1, s));
    exec2(add, f32_tensor(v_mid, 1, s), f32_tensor(one, 1, s), f32_tensor(v_out, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 1 && has_executable(CUDAEP_SLOT_VERIFY, 0) == 1);

    for (int i = 0; i < 3; i++) {
        CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0));
        CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_VERIFY, 0));
    }
    CHECK(download(p_out, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want1, N);
    CHECK(download(v_out, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want2, N);

    /* Resetting Primary leaves Verify installed and replayable. */
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_PRIMARY, 0, NULL));
    CHECK(has_executable(CUDAEP_SLOT_PRIMARY, 0) == 0 && has_executable(CUDAEP_SLOT_VERIFY, 0) == 1);
    CHECK_OK(CudaEpMemset(v_out, 0, 4 * N, 0xFF));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_VERIFY, 0));
    CHECK(download(v_out, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want2, N);
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 0), CUDAEP_WRONG_STATE, "");

    /* Keyed slots are independent of each other and of the fixed ones. */
    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_KEYED, 8, &add, 1, pk, 3));
    exec2(add, f32_tensor(p_in, 1, s), f32_tensor(one, 1, s), f32_tensor(p_out, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_KEYED, 8));
    CHECK(has_executable(CUDAEP_SLOT_KEYED, 8) == 1 && has_executable(CUDAEP_SLOT_KEYED, 1) == 0);
    CHECK_OK(CudaEpMemset(p_out, 0, 4 * N, 0xFF));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 8));
    CHECK(download(p_out, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want1, N);
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 1), CUDAEP_WRONG_STATE, "");
    CHECK_ERR(CudaEpReplay(prov, CUDAEP_SLOT_PRIMARY, 3), CUDAEP_INVALID_ARGUMENT, "slot_key");
    CHECK_ERR(CudaEpReplay(prov, 77, 0), CUDAEP_INVALID_ARGUMENT, "slot_kind");

    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_VERIFY, 0, NULL));
    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_KEYED, 8, NULL));
    CudaEpBuffer* bs[] = {&one, &p_in, &p_out, &v_in, &v_mid, &v_out};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) RELEASE(CudaEpReleaseBuffer, *bs[i]);
    RELEASE(CudaEpReleaseKernel, add);
}

/* Recapture with the same topology over new buffers updates the executable in place. */
static void test_recapture_updates_in_place(void) {
    enum { N = 16 };
    const int64_t s[1] = {N};
    float a[N], b[N], got[N], want[N];
    seeded_floats(a, N, 41);
    seeded_floats(b, N, 42);
    CudaEpTensorInfo in2[2] = {f32_info(1, s), f32_info(1, s)};
    CudaEpKernel mul = get_kernel(prov, "Mul", 14, 2, in2);
    CudaEpBuffer ab = upload_floats(prov, a, N), bb = upload_floats(prov, b, N);
    CudaEpBuffer o1 = new_buffer(prov, 4 * N), o2 = new_buffer(prov, 4 * N);
    CudaEpBuffer k1[3] = {ab, bb, o1}, k2[3] = {ab, bb, o2};

    CHECK_OK(CudaEpBeginCapture(prov, CUDAEP_SLOT_KEYED, 4, &mul, 1, k1, 3));
    exec2(mul, f32_tensor(ab, 1, s), f32_tensor(bb, 1, s), f32_tensor(o1, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_KEYED, 4));
    CHECK_OK(CudaEpRecapture(prov, CUDAEP_SLOT_KEYED, 4, &mul, 1, k2, 3));
    exec2(mul, f32_tensor(ab, 1, s), f32_tensor(bb, 1, s), f32_tensor(o2, 1, s));
    CHECK_OK(CudaEpEndCapture(prov, CUDAEP_SLOT_KEYED, 4));

    CudaEpGraphStats gs;
    memset(&gs, 0, sizeof gs);
    gs.struct_size = sizeof gs;
    CHECK_OK(CudaEpGetGraphStats(prov, CUDAEP_SLOT_KEYED, 4, &gs));
    CHECK(gs.captures == 2 && gs.instantiations == 1 && gs.updates == 1);

    CHECK_OK(CudaEpMemset(o1, 0, 4 * N, 0x11));
    CHECK_OK(CudaEpMemset(o2, 0, 4 * N, 0x22));
    CHECK_OK(CudaEpReplay(prov, CUDAEP_SLOT_KEYED, 4));
    for (int i = 0; i < N; i++) want[i] = a[i] * b[i];
    CHECK(download(o2, got, sizeof got));
    CHECK_FLOATS_NEAR(got, want, N);
    unsigned char raw[4 * N], untouched[4 * N];
    memset(untouched, 0x11, sizeof untouched);
    CHECK(download(o1, raw, sizeof raw) && memcmp(raw, untouched, sizeof raw) == 0); /* the retired graph is gone */

    CHECK_OK(CudaEpResetGraph(prov, CUDAEP_SLOT_KEYED, 4, NULL));
    CudaEpBuffer* bs[] = {&ab, &bb, &o1, &o2};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) RELEASE(CudaEpReleaseBuffer, *bs[i]);
    RELEASE(CudaEpReleaseKernel, mul);
}

int main(void) {
    prov = new_provider(NULL);
    test_capture_replay_uses_live_buffers();
    test_segmented_capture_with_a_host_seam();
    test_abort_after_a_mid_capture_failure();
    test_primary_and_verify_slots_are_independent();
    test_recapture_updates_in_place();
    CHECK_OK(CudaEpReleaseProvider(prov));
    check_no_live_handles();
    return check_result("test_graphs");
}
