/*
 * test_paging.c — weight paging through the C ABI, from a real external-data file: the
 * residency pages every layer one ahead of compute byte-identically across wraparound; typed
 * declines (disabled by default, ineligible boundary, oversize, busy) build or change nothing;
 * cancellation frees a slot; the double buffer driven directly is byte-identical across
 * wraparound in both transfer modes, frees a cancelled slot for reuse, refuses a stale ticket
 * with CUDAEP_STALE_GENERATION, keeps two pipelines apart, declines a layer too large for the
 * staging pool before reserving anything, and tears down cleanly with layers in flight.
 */
#include "support.h"

enum { HEADER = 100, LAYERS = 5, LAYER_BYTES = 12288 + 60 };

static char data_path[512];
static unsigned char layer_bytes[LAYERS][LAYER_BYTES];

/* write_layers writes the file: a 100-byte header (so layers are not page-aligned), then the
 * layers, each a distinct non-zero pattern; salt varies the patterns between files. */
static void write_layers(const char* name, unsigned salt) {
    static unsigned char file[HEADER + LAYERS * LAYER_BYTES];
    memset(file, 0xEE, HEADER);
    for (int i = 0; i < LAYERS; i++) {
        pattern_bytes(layer_bytes[i], LAYER_BYTES, (unsigned)i + salt);
        memcpy(file + HEADER + (size_t)i * LAYER_BYTES, layer_bytes[i], LAYER_BYTES);
    }
    temp_path(data_path, sizeof data_path, name);
    write_file(data_path, file, sizeof file);
}

/* lazy_layers opens the file in p and describes each layer as a uint8 weight of two regions. */
static void lazy_layers(CudaEpProvider p, int32_t boundary, CudaEpLazyWeight* out) {
    uint64_t mapping = 0;
    CHECK_OK(CudaEpOpenExternalData(p, data_path, &mapping));
    for (int i = 0; i < LAYERS; i++) {
        uint64_t off = HEADER + (uint64_t)i * LAYER_BYTES, half = LAYER_BYTES / 2;
        CudaEpRegion regions[2] = {{mapping, off, half}, {mapping, off + half, LAYER_BYTES - half}};
        const int64_t shape[1] = {LAYER_BYTES};
        CudaEpWeightSpec spec;
        memset(&spec, 0, sizeof spec);
        spec.boundary = boundary;
        spec.dtype = CUDAEP_DTYPE_UINT8;
        spec.rank = 1;
        spec.shape = shape;
        spec.regions = regions;
        spec.num_regions = 2;
        out[i] = CUDAEP_NULL_HANDLE;
        CHECK_OK(CudaEpCreateLazyWeight(p, &spec, &out[i]));
        uint64_t size = 0;
        CHECK_OK(CudaEpLazyWeightGetSize(out[i], &size));
        CHECK(size == LAYER_BYTES);
    }
}

/* read_back copies n bytes of memory (a paged weight or a waited-for ticket) into a buffer with
 * Identity over bool (a raw byte copy) and compares them with want. */
static int read_back_equals(CudaEpProvider p, uint64_t memory, const unsigned char* want, uint64_t n) {
    const int64_t s[1] = {(int64_t)n};
    CudaEpTensorInfo info = {CUDAEP_DTYPE_BOOL, 1, s, NULL};
    CudaEpKernel id = get_kernel(p, "Identity", 13, 1, &info);
    CudaEpBuffer out = new_buffer(p, n);
    CHECK_OK(CudaEpMemset(out, 0, n, 0x01));
    exec1(id, tensor_at(memory, 0, CUDAEP_DTYPE_BOOL, 1, s), tensor_at(out, 0, CUDAEP_DTYPE_BOOL, 1, s));
    unsigned char* got = malloc(n);
    int same = download(out, got, n) && memcmp(got, want, n) == 0;
    free(got);
    RELEASE(CudaEpReleaseKernel, id);
    RELEASE(CudaEpReleaseBuffer, out);
    return same;
}

static CudaEpDecline new_decline(void) {
    CudaEpDecline d;
    memset(&d, 0x5A, sizeof d);
    d.struct_size = sizeof d;
    return d;
}

static CudaEpResidencyStats residency_stats(CudaEpProvider p) {
    CudaEpResidencyStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(CudaEpGetResidencyStats(p, &s));
    return s;
}

static void release_weights(CudaEpLazyWeight* w) {
    for (int i = 0; i < LAYERS; i++) RELEASE(CudaEpReleaseLazyWeight, w[i]);
}

static void test_residency_pages_one_layer_ahead_across_wraparound(void) {
    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_MATMUL, w);
    CudaEpDecline d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 0, w[0], &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE && d.layer == 0 && d.boundary == CUDAEP_BOUNDARY_MATMUL);
    uint64_t slots[2] = {0, 0};
    for (int n = 0; n < LAYERS; n++) {
        if (n + 1 < LAYERS) {
            d = new_decline();
            CHECK_OK(CudaEpPrefetchWeight(p, (uint64_t)n + 1, w[n + 1], &d));
            CHECK(d.reason == CUDAEP_DECLINE_NONE);
        }
        CudaEpPagedWeight pw = CUDAEP_NULL_HANDLE;
        if (!CHECK_OK(CudaEpPageWeight(p, (uint64_t)n, &pw))) continue;
        uint64_t ptr = 0, len = 0;
        CHECK_OK(CudaEpPagedWeightGetPointer(pw, &ptr));
        CHECK_OK(CudaEpPagedWeightGetSize(pw, &len));
        CHECK(len == LAYER_BYTES && ptr != 0);
        if (n < 2) slots[n] = ptr;
        else CHECK(ptr == slots[n % 2]); /* wraparound reuses the two stable slots */
        if (!read_back_equals(p, pw, layer_bytes[n], LAYER_BYTES)) {
            check_fail(__FILE__, __LINE__, "layer %d: paged bytes differ from the file", n);
        }
        CHECK_OK(CudaEpReleasePagedWeight(pw));
        CHECK_ERR(CudaEpReleasePagedWeight(pw), CUDAEP_STALE_HANDLE, "released");
    }
    CHECK(slots[0] != slots[1]);
    CudaEpResidencyStats s = residency_stats(p);
    CHECK(s.active == 1 && s.routed == LAYERS && s.consumed == LAYERS && s.released == LAYERS);
    CHECK(s.quarantined == 0 && s.fill_errors == 0);
    CHECK(s.zero_copy_layers + s.staging_layers + s.fallback_layers == LAYERS);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

static void test_residency_declines_typed(void) {
    /* Off by default: declined, no pipeline built. */
    CudaEpProvider off = new_provider(NULL);
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(off, CUDAEP_BOUNDARY_MATMUL, w);
    CudaEpDecline d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(off, 0, w[0], &d));
    CHECK(d.reason == CUDAEP_DECLINE_DISABLED && d.layer == 0 && d.layer_bytes == 0);
    CudaEpPagedWeight pw = 0x1234;
    CHECK_ERR(CudaEpPageWeight(off, 0, &pw), CUDAEP_WRONG_STATE, "not prefetched");
    CHECK(pw == 0x1234);
    CHECK(residency_stats(off).active == 0);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(off));

    CudaEpProvider p = new_provider("prefill_double_buffer", "true", NULL);
    /* An embedding table (Gather) is not pageable. */
    CudaEpLazyWeight g[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_GATHER, g);
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 0, g[0], &d));
    CHECK(d.reason == CUDAEP_DECLINE_BOUNDARY && d.boundary == CUDAEP_BOUNDARY_GATHER);
    CHECK(residency_stats(p).active == 0);

    /* The first routed layer sizes the slots: a larger later layer is declined oversize. */
    uint64_t mapping = 0;
    CHECK_OK(CudaEpOpenExternalData(p, data_path, &mapping));
    CudaEpRegion small_r = {mapping, HEADER, 4096}, big_r = {mapping, HEADER, 8192};
    const int64_t small_s[1] = {4096}, big_s[1] = {8192};
    CudaEpWeightSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.boundary = CUDAEP_BOUNDARY_MATMUL, spec.dtype = CUDAEP_DTYPE_UINT8, spec.rank = 1;
    spec.shape = small_s, spec.regions = &small_r, spec.num_regions = 1;
    CudaEpLazyWeight small = 0, big = 0;
    CHECK_OK(CudaEpCreateLazyWeight(p, &spec, &small));
    spec.shape = big_s, spec.regions = &big_r;
    CHECK_OK(CudaEpCreateLazyWeight(p, &spec, &big));
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 10, small, &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE);
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 11, big, &d));
    CHECK(d.reason == CUDAEP_DECLINE_OVERSIZE && d.layer == 11 && d.layer_bytes == 8192 && d.capacity == 4096);

    /* Both slots taken and unreleased: busy. Then cancel one and the slot is reusable. */
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 12, small, &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE);
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 13, small, &d));
    CHECK(d.reason == CUDAEP_DECLINE_BUSY);
    CHECK_OK(CudaEpCancelWeight(p, 12));
    CHECK_ERR(CudaEpCancelWeight(p, 12), CUDAEP_WRONG_STATE, "not prefetched");
    d = new_decline();
    CHECK_OK(CudaEpPrefetchWeight(p, 13, small, &d));
    CHECK(d.reason == CUDAEP_DECLINE_NONE);
    const unsigned char* first = layer_bytes[0]; /* the small weight is the first 4096 bytes of layer 0 */
    CudaEpPagedWeight a = 0, b = 0;
    CHECK_OK(CudaEpPageWeight(p, 10, &a));
    CHECK_OK(CudaEpPageWeight(p, 13, &b));
    CHECK(read_back_equals(p, a, first, 4096) && read_back_equals(p, b, first, 4096));
    RELEASE(CudaEpReleasePagedWeight, a);
    RELEASE(CudaEpReleasePagedWeight, b);

    CudaEpResidencyStats s = residency_stats(p);
    CHECK(s.routed == 3 && s.consumed == 2 && s.released == 2 && s.cancelled == 1);
    CHECK(s.declined_oversize == 1 && s.declined_busy == 1 && s.quarantined == 0);

    /* A short decline struct is refused before anything is done. */
    CudaEpDecline shortd = new_decline();
    shortd.struct_size = 8;
    CHECK_ERR(CudaEpPrefetchWeight(p, 20, small, &shortd), CUDAEP_INVALID_ARGUMENT, "struct_size");
    CHECK(residency_stats(p).routed == 3);

    RELEASE(CudaEpReleaseLazyWeight, small);
    RELEASE(CudaEpReleaseLazyWeight, big);
    release_weights(g);
    CHECK_OK(CudaEpReleaseProvider(p));
}

static void test_external_data_errors(void) {
    CudaEpProvider p = new_provider(NULL);
    uint64_t mapping = 77;
    char missing[512];
    temp_path(missing, sizeof missing, "missing.onnx.data");
    CHECK_ERR(CudaEpOpenExternalData(p, missing, &mapping), CUDAEP_NOT_FOUND, "missing.onnx.data");
    CHECK(mapping == 77);
    CHECK_OK(CudaEpOpenExternalData(p, data_path, &mapping));

    CudaEpRegion past = {mapping, HEADER + LAYERS * LAYER_BYTES - 10, 20};
    const int64_t s[1] = {20};
    CudaEpWeightSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.boundary = CUDAEP_BOUNDARY_MATMUL, spec.dtype = CUDAEP_DTYPE_UINT8, spec.rank = 1;
    spec.shape = s, spec.regions = &past, spec.num_regions = 1;
    CudaEpLazyWeight w = 0x55;
    CHECK_ERR(CudaEpCreateLazyWeight(p, &spec, &w), CUDAEP_INVALID_ARGUMENT, "past the end of the file");
    CudaEpRegion unknown = {mapping + 100, 0, 20};
    spec.regions = &unknown;
    CHECK_ERR(CudaEpCreateLazyWeight(p, &spec, &w), CUDAEP_INVALID_ARGUMENT, "unknown mapping");
    CudaEpRegion fine = {mapping, HEADER, 20};
    spec.regions = &fine;
    spec.dtype = CUDAEP_DTYPE_FLOAT32; /* 20 float32 are 80 bytes, not 20 */
    CHECK_ERR(CudaEpCreateLazyWeight(p, &spec, &w), CUDAEP_INVALID_ARGUMENT, "");
    spec.dtype = CUDAEP_DTYPE_UINT8;
    spec.num_regions = 0;
    CHECK_ERR(CudaEpCreateLazyWeight(p, &spec, &w), CUDAEP_INVALID_ARGUMENT, "at least one region");
    spec.num_regions = 1, spec.reserved = 1;
    CHECK_ERR(CudaEpCreateLazyWeight(p, &spec, &w), CUDAEP_INVALID_ARGUMENT, "reserved");
    CHECK(w == 0x55);

    /* A lazy weight of one provider cannot be prefetched by another. */
    spec.reserved = 0;
    CHECK_OK(CudaEpCreateLazyWeight(p, &spec, &w));
    CudaEpProvider other = new_provider("prefill_double_buffer", "true", NULL);
    CudaEpDecline d = new_decline();
    CHECK_ERR(CudaEpPrefetchWeight(other, 0, w, &d), CUDAEP_INVALID_ARGUMENT, "another provider");
    RELEASE(CudaEpReleaseProvider, other);
    RELEASE(CudaEpReleaseLazyWeight, w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

static CudaEpDoubleBufferMetrics db_metrics(CudaEpDoubleBuffer db) {
    CudaEpDoubleBufferMetrics m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    CHECK_OK(CudaEpDoubleBufferGetMetrics(db, &m));
    return m;
}

static void test_double_buffer_wraparound(int32_t mode) {
    CudaEpProvider p = new_provider(NULL); /* the direct API ignores the residency's gate */
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_MATMUL, w);
    CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(p, LAYER_BYTES, mode, &db));
    uint64_t cap = 0;
    CHECK_OK(CudaEpDoubleBufferGetCapacity(db, &cap));
    CHECK(cap == LAYER_BYTES);

    CudaEpTicket t[LAYERS] = {0};
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t[0]));
    for (int n = 0; n < LAYERS; n++) {
        if (n + 1 < LAYERS) CHECK_OK(CudaEpDoubleBufferPrefetch(db, (uint64_t)n + 1, w[n + 1], &t[n + 1]));
        uint64_t ptr = 0, len = 0;
        CHECK_OK(CudaEpDoubleBufferWaitLayer(t[n], &ptr, &len));
        CHECK(len == LAYER_BYTES);
        CudaEpTicketInfo info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        CHECK_OK(CudaEpTicketGetInfo(t[n], &info));
        CHECK(info.layer == (uint64_t)n && info.slot < 2 && info.generation >= 1);
        if (!read_back_equals(p, t[n], layer_bytes[n], LAYER_BYTES)) {
            check_fail(__FILE__, __LINE__, "mode %d layer %d: slot bytes differ from the file", mode, n);
        }
        CHECK_OK(CudaEpDoubleBufferReleaseLayer(t[n]));
        RELEASE(CudaEpReleaseTicket, t[n]);
    }
    CudaEpDoubleBufferMetrics m = db_metrics(db);
    CHECK(m.layers_prefetched == LAYERS && m.layers_consumed == LAYERS && m.layers_released == LAYERS);
    CHECK(m.slot_reuses == LAYERS - 2 && m.poisoned == 0 && m.stale_rejected == 0 && m.cancelled == 0);
    CHECK(m.bytes_prefetched == (uint64_t)LAYERS * LAYER_BYTES);
    if (mode == CUDAEP_TRANSFER_STAGING) CHECK(m.staging_layers == LAYERS);
    else CHECK(m.zero_copy_layers + m.fallback_layers == LAYERS);
    RELEASE(CudaEpReleaseDoubleBuffer, db);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

static int32_t slot_state(CudaEpDoubleBuffer db, uint32_t slot) {
    int32_t s = -1;
    CHECK_OK(CudaEpDoubleBufferGetSlotState(db, slot, &s));
    return s;
}

static void test_double_buffer_cancel_and_stale_ticket(void) {
    CudaEpProvider p = new_provider(NULL);
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_MATMUL, w);
    CudaEpDoubleBuffer db = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateDoubleBuffer(p, LAYER_BYTES, CUDAEP_TRANSFER_STAGING, &db));
    CHECK(slot_state(db, 0) == CUDAEP_SLOT_STATE_FREE && slot_state(db, 1) == CUDAEP_SLOT_STATE_FREE);

    CudaEpTicket keep = 0, doomed = 0, reuse = 0, none = 0x42;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &keep));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 1, w[1], &doomed));
    CHECK_ERR(CudaEpDoubleBufferPrefetch(db, 2, w[2], &none), CUDAEP_WRONG_STATE, "no free slot");
    CHECK(none == 0x42);

    /* A ticket is tensor memory only once waited for. */
    const int64_t s[1] = {16};
    CudaEpTensorInfo info = {CUDAEP_DTYPE_BOOL, 1, s, NULL};
    CudaEpKernel id = get_kernel(p, "Identity", 13, 1, &info);
    CudaEpBuffer out = new_buffer(p, 16);
    CudaEpTensor in = tensor_at(doomed, 0, CUDAEP_DTYPE_BOOL, 1, s), o = tensor_at(out, 0, CUDAEP_DTYPE_BOOL, 1, s);
    CHECK_ERR(CudaEpKernelExecute(id, &in, 1, &o, 1), CUDAEP_INVALID_ARGUMENT, "not waited for");

    uint64_t dptr = 0, rptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferWaitLayer(doomed, &dptr, &len));
    CHECK_OK(CudaEpDoubleBufferCancelLayer(doomed)); /* cancel mid-use */
    CHECK_ERR(CudaEpKernelExecute(id, &in, 1, &o, 1), CUDAEP_INVALID_ARGUMENT, "not waited for");
    CudaEpDoubleBufferMetrics m = db_metrics(db);
    CHECK(m.cancelled == 1 && m.poisoned == 0);

    /* The cancelled slot takes a new layer, in the same stable buffer, byte-identically. */
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 2, w[2], &reuse));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(reuse, &rptr, &len));
    CHECK(rptr == dptr);
    CHECK(read_back_equals(p, reuse, layer_bytes[2], LAYER_BYTES));

    /* The cancelled ticket's slot was reused: it is stale, never served layer 2's bytes. */
    uint64_t untouched = 0x77;
    CHECK_ERR(CudaEpDoubleBufferWaitLayer(doomed, &untouched, &len), CUDAEP_STALE_GENERATION, "stale");
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(doomed), CUDAEP_STALE_GENERATION, "");
    CHECK_ERR(CudaEpDoubleBufferCancelLayer(doomed), CUDAEP_STALE_GENERATION, "");
    CHECK(untouched == 0x77);
    CHECK(db_metrics(db).stale_rejected >= 3);

    /* Release discipline: release needs a wait; a second release is refused. */
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(keep), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(reuse));
    CHECK_ERR(CudaEpDoubleBufferReleaseLayer(reuse), CUDAEP_WRONG_STATE, "");
    CHECK_OK(CudaEpDoubleBufferWaitLayer(keep, &dptr, &len));
    CHECK(slot_state(db, 0) == CUDAEP_SLOT_STATE_IN_USE || slot_state(db, 1) == CUDAEP_SLOT_STATE_IN_USE);
    CHECK(read_back_equals(p, keep, layer_bytes[0], LAYER_BYTES));
    CHECK_OK(CudaEpDoubleBufferReleaseLayer(keep));
    CHECK(slot_state(db, 0) == CUDAEP_SLOT_STATE_DRAINING && slot_state(db, 1) == CUDAEP_SLOT_STATE_DRAINING);
    int32_t st = 9;
    CHECK_ERR(CudaEpDoubleBufferGetSlotState(db, 2, &st), CUDAEP_INVALID_ARGUMENT, "slots 0 and 1");

    RELEASE(CudaEpReleaseTicket, keep);
    RELEASE(CudaEpReleaseTicket, doomed);
    RELEASE(CudaEpReleaseTicket, reuse);
    RELEASE(CudaEpReleaseKernel, id);
    RELEASE(CudaEpReleaseBuffer, out);
    RELEASE(CudaEpReleaseDoubleBuffer, db);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

/* Two pipelines on one provider, interleaved, each read back only their own layers. */
static void test_two_pipelines_are_isolated(void) {
    CudaEpProvider p = new_provider(NULL);
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_MATMUL, w);
    CudaEpDoubleBuffer a = 0, b = 0;
    CHECK_OK(CudaEpCreateDoubleBuffer(p, LAYER_BYTES, CUDAEP_TRANSFER_ZERO_COPY, &a));
    CHECK_OK(CudaEpCreateDoubleBuffer(p, LAYER_BYTES, CUDAEP_TRANSFER_STAGING, &b));
    for (int n = 0; n < 3; n++) {
        CudaEpTicket ta = 0, tb = 0;
        uint64_t pa = 0, pb = 0, len = 0;
        CHECK_OK(CudaEpDoubleBufferPrefetch(a, (uint64_t)n, w[n], &ta));
        CHECK_OK(CudaEpDoubleBufferPrefetch(b, (uint64_t)n, w[LAYERS - 1 - n], &tb));
        CHECK_OK(CudaEpDoubleBufferWaitLayer(tb, &pb, &len));
        CHECK_OK(CudaEpDoubleBufferWaitLayer(ta, &pa, &len));
        CHECK(pa != pb);
        CHECK(read_back_equals(p, ta, layer_bytes[n], LAYER_BYTES));
        CHECK(read_back_equals(p, tb, layer_bytes[LAYERS - 1 - n], LAYER_BYTES));
        CHECK_OK(CudaEpDoubleBufferReleaseLayer(ta));
        CHECK_OK(CudaEpDoubleBufferReleaseLayer(tb));
        RELEASE(CudaEpReleaseTicket, ta);
        RELEASE(CudaEpReleaseTicket, tb);
    }
    RELEASE(CudaEpReleaseDoubleBuffer, a);
    RELEASE(CudaEpReleaseDoubleBuffer, b);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

static void test_capacity_decline_and_teardown_in_flight(void) {
    CudaEpProvider p = new_provider("staging_pool_cap_bytes", "1MiB", NULL);
    CudaEpProviderStats before, after;
    memset(&before, 0, sizeof before);
    before.struct_size = sizeof before;
    after = before;
    CHECK_OK(CudaEpProviderGetStats(p, &before));
    CudaEpDoubleBuffer db = 0x33;
    CHECK_ERR(CudaEpCreateDoubleBuffer(p, 1 << 20, CUDAEP_TRANSFER_STAGING, &db), CUDAEP_DECLINED, "");
    CHECK(db == 0x33);
    CHECK_OK(CudaEpProviderGetStats(p, &after));
    CHECK(after.device_allocs == before.device_allocs); /* declined before reserving anything */

    /* Release the double buffer's handle with one layer in use and one never consumed, then
     * the tickets: teardown drains both and frees the slots. */
    CudaEpLazyWeight w[LAYERS];
    lazy_layers(p, CUDAEP_BOUNDARY_MATMUL, w);
    CHECK_OK(CudaEpCreateDoubleBuffer(p, LAYER_BYTES, CUDAEP_TRANSFER_STAGING, &db));
    CudaEpTicket t0 = 0, t1 = 0;
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 0, w[0], &t0));
    CHECK_OK(CudaEpDoubleBufferPrefetch(db, 1, w[1], &t1));
    CHECK_OK(CudaEpDoubleBufferWaitLayer(t0, &ptr, &len));
    CHECK_OK(CudaEpReleaseDoubleBuffer(db));
    CHECK_ERR(CudaEpDoubleBufferGetCapacity(db, &len), CUDAEP_STALE_HANDLE, "released");
    CHECK(read_back_equals(p, t0, layer_bytes[0], LAYER_BYTES)); /* the ticket kept the pipeline */
    RELEASE(CudaEpReleaseTicket, t0);
    RELEASE(CudaEpReleaseTicket, t1); /* the pipeline is drained and freed here */
    CHECK_OK(CudaEpProviderGetStats(p, &after));
    CHECK(after.device_live_bytes == before.device_live_bytes);
    release_weights(w);
    CHECK_OK(CudaEpReleaseProvider(p));
}

int main(void) {
    /* The residency's gate also reads the environment: make "off by default" hold here. */
    unsetenv("CUDAEP_PREFILL_DOUBLE_BUFFER");
    write_layers("layers.onnx.data", 1);
    test_residency_pages_one_layer_ahead_across_wraparound();
    test_residency_declines_typed();
    test_external_data_errors();
    test_double_buffer_wraparound(CUDAEP_TRANSFER_ZERO_COPY);
    test_double_buffer_wraparound(CUDAEP_TRANSFER_STAGING);
    test_double_buffer_cancel_and_stale_ticket();
    test_two_pipelines_are_isolated();
    test_capacity_decline_and_teardown_in_flight();
    unlink(data_path);
    check_no_live_handles();
    return check_result("test_paging");
}
