/*
 * fixture.c — builds the misuse test's fixture (see fixture.h) on the test backend.
 */
#include "fixture.h"

#include <pthread.h>
#include <string.h>

#include "../support.h"

static const char fixture_ptx[] =
    ".version 7.5\n.target sm_75\n.address_size 64\n"
    "// cudaep_mul_f32(float* out, const float* a, const float* b, unsigned long long n): a no-op\n"
    "// here (the misuse test never launches it); on the simulator the built-in body is bound.\n"
    ".visible .entry cudaep_mul_f32(.param .u64 o, .param .u64 a, .param .u64 b, .param .u64 n) { ret; }\n";

static const char fixture_source[] = "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n";

/* released_copy makes a second object like the live one, and releases it. */
static int make_released(fixture* fx) {
    handle_set* r = &fx->released;
    CHECK_OK(CudaEpCreateOptions(&r->options));
    CHECK_OK(CudaEpReleaseOptions(r->options));
    r->provider = new_provider(NULL);
    CHECK_OK(CudaEpReleaseProvider(r->provider));
    r->buffer = new_buffer(fx->live.provider, 64);
    CHECK_OK(CudaEpReleaseBuffer(r->buffer));
    r->kernel = get_kernel(fx->live.provider, "Relu", 14, 1, &fx->gelu_info[0]);
    CHECK_OK(CudaEpReleaseKernel(r->kernel));
    CHECK_OK(CudaEpLoadModule(fx->live.provider, fx->ptx, fx->ptx_size, &r->module));
    CHECK_OK(CudaEpReleaseModule(r->module));
    CHECK_OK(CudaEpModuleGetFunction(fx->live.module, fx->entry, &r->function));
    CHECK_OK(CudaEpReleaseFunction(r->function));
    CHECK_OK(CudaEpCreateLazyWeight(fx->live.provider, &fx->weight_spec, &r->lazy_weight));
    CHECK_OK(CudaEpReleaseLazyWeight(r->lazy_weight));
    CHECK_OK(CudaEpPageWeight(fx->live.provider, 1, &r->paged_weight));
    CHECK_OK(CudaEpReleasePagedWeight(r->paged_weight));
    CHECK_OK(CudaEpCreateDoubleBuffer(fx->live.provider, 4096, CUDAEP_TRANSFER_STAGING, &r->double_buffer));
    CHECK_OK(CudaEpReleaseDoubleBuffer(r->double_buffer));
    CHECK_OK(CudaEpDoubleBufferPrefetch(fx->live.double_buffer, 1, fx->live.lazy_weight, &r->ticket));
    CHECK_OK(CudaEpReleaseTicket(r->ticket));
    return check_failures == 0;
}

int fixture_setup(fixture* fx) {
    memset(fx, 0, sizeof *fx);
    unsetenv("CUDAEP_PREFILL_DOUBLE_BUFFER");
    handle_set* l = &fx->live;
    CHECK_OK(CudaEpCreateOptions(&l->options));
    l->provider = new_provider("prefill_double_buffer", "true", NULL);

    fx->shape4[0] = 4;
    fx->gelu_info[0] = f32_info(1, fx->shape4);
    fx->gelu_attr[0].name = "approximate";
    fx->gelu_attr[0].type = CUDAEP_ATTR_STRING;
    fx->gelu_attr[0].s = "tanh";
    fx->cuda_source = fixture_source;
    fx->entry = "cudaep_mul_f32";
    fx->ptx = fixture_ptx;
    fx->ptx_size = sizeof fixture_ptx - 1;
    fx->nvrtc_options[0] = "--std=c++17";
    pattern_bytes(fx->host_bytes, sizeof fx->host_bytes, 1);

    l->buffer = new_buffer(l->provider, 4096);
    fx->buffer2 = new_buffer(l->provider, 4096);
    CHECK_OK(CudaEpCopyToDevice(l->buffer, 0, fx->host_bytes, sizeof fx->host_bytes));
    l->kernel = get_kernel(l->provider, "Relu", 14, 1, &fx->gelu_info[0]);
    fx->nonzero = get_kernel(l->provider, "NonZero", 13, 1, &fx->gelu_info[0]);
    fx->relu_in[0] = f32_tensor(l->buffer, 1, fx->shape4);
    fx->relu_out[0] = tensor_at(l->buffer, 64, CUDAEP_DTYPE_FLOAT32, 1, fx->shape4);
    static const int64_t one[1] = {1};
    fx->nz_count = tensor_at(l->buffer, 128, CUDAEP_DTYPE_INT64, 1, one);

    CHECK_OK(CudaEpLoadModule(l->provider, fx->ptx, fx->ptx_size, &l->module));
    CHECK_OK(CudaEpModuleGetFunction(l->module, fx->entry, &l->function));
    fx->launch_config = (CudaEpLaunchConfig){1, 1, 1, 16, 1, 1, 0, 0};
    for (int i = 0; i < 3; i++) {
        fx->launch_args[i].type = CUDAEP_ARG_MEMORY;
        fx->launch_args[i].memory = l->buffer;
        fx->launch_args[i].value.offset = 256;
    }
    fx->launch_args[3].type = CUDAEP_ARG_U64;
    fx->launch_args[3].value.u64 = 16;
    fx->capture_kernels[0] = l->kernel;
    fx->capture_retain[0] = l->buffer;

    static unsigned char file[3 * 4096];
    pattern_bytes(file, sizeof file, 2);
    temp_path(fx->data_path, sizeof fx->data_path, "misuse.onnx.data");
    write_file(fx->data_path, file, sizeof file);
    uint64_t mapping = 0;
    CHECK_OK(CudaEpOpenExternalData(l->provider, fx->data_path, &mapping));
    fx->region = (CudaEpRegion){mapping, 0, 4096};
    fx->weight_shape[0] = 4096;
    fx->weight_spec.boundary = CUDAEP_BOUNDARY_MATMUL;
    fx->weight_spec.dtype = CUDAEP_DTYPE_UINT8;
    fx->weight_spec.rank = 1;
    fx->weight_spec.shape = fx->weight_shape;
    fx->weight_spec.regions = &fx->region;
    fx->weight_spec.num_regions = 1;
    CHECK_OK(CudaEpCreateLazyWeight(l->provider, &fx->weight_spec, &l->lazy_weight));

    /* Residency: layers 0 and 1 prefetched; 0 paged (live), 1 paged by make_released. */
    for (uint64_t layer = 0; layer < 2; layer++) {
        CudaEpDecline d;
        memset(&d, 0, sizeof d);
        d.struct_size = sizeof d;
        CHECK_OK(CudaEpPrefetchWeight(l->provider, layer, l->lazy_weight, &d));
        CHECK(d.reason == CUDAEP_DECLINE_NONE);
    }
    CHECK_OK(CudaEpPageWeight(l->provider, 0, &l->paged_weight));

    CHECK_OK(CudaEpCreateDoubleBuffer(l->provider, 4096, CUDAEP_TRANSFER_STAGING, &l->double_buffer));
    CHECK_OK(CudaEpDoubleBufferPrefetch(l->double_buffer, 0, l->lazy_weight, &l->ticket));
    uint64_t ptr = 0, len = 0;
    CHECK_OK(CudaEpDoubleBufferWaitLayer(l->ticket, &ptr, &len));

    fx->capturer = new_provider(NULL);
    fx->capturer_buffer = new_buffer(fx->capturer, 64);

    if (!make_released(fx)) return 0;
    CHECK_OK(CudaEpGetLiveHandleCount(&fx->live_handles));
    if (check_failures != 0) {
        fprintf(stderr, "misuse: the fixture could not be built\n");
        return 0;
    }
    return 1;
}

/* The slot the windows capture into. */
#define WINDOW_SLOT_KEY 77

/* window_begin begins a capture on p's keyed slot and records a memset of b into it. */
static int window_begin(CudaEpProvider p, CudaEpBuffer b) {
    if (!CHECK_OK(CudaEpBeginCapture(p, CUDAEP_SLOT_KEYED, WINDOW_SLOT_KEY, NULL, 0, &b, 1))) return 0;
    return CHECK_OK(CudaEpMemset(b, 0, 16, 0x5A));
}

/* window_end ends the capture window_begin began (the capture must not have been invalidated)
 * and forgets its graph. */
static int window_end(CudaEpProvider p) {
    int ok = CHECK_OK(CudaEpEndCapture(p, CUDAEP_SLOT_KEYED, WINDOW_SLOT_KEY));
    if (!ok) CHECK_OK(CudaEpAbortCapture(p, CUDAEP_SLOT_KEYED, WINDOW_SLOT_KEY));
    CHECK_OK(CudaEpRemoveGraph(p, CUDAEP_SLOT_KEYED, WINDOW_SLOT_KEY));
    return ok;
}

/* window_thread holds a capture of the fixture's provider on a thread of its own, from
 * fixture_window_open to fixture_window_close. */
struct window_thread {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fixture* fx;
    int stage; /* 0 beginning, 1 capturing (or failed to), 2 asked to end, 3 ended */
    int began, ended;
};

static void* hold_capture(void* arg) {
    struct window_thread* w = arg;
    int began = window_begin(w->fx->live.provider, w->fx->buffer2);
    pthread_mutex_lock(&w->mu);
    w->began = began, w->stage = 1;
    pthread_cond_broadcast(&w->cv);
    while (began && w->stage != 2) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    int ended = began && window_end(w->fx->live.provider);
    pthread_mutex_lock(&w->mu);
    w->ended = ended, w->stage = 3;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int fixture_window_open(fixture* fx, int window) {
    switch (window) {
    case WINDOW_NONE:
        return 1;
    case WINDOW_THIS_THREAD:
        return window_begin(fx->live.provider, fx->buffer2);
    case WINDOW_OTHER_PROVIDER:
        return window_begin(fx->capturer, fx->capturer_buffer);
    case WINDOW_OTHER_THREAD: {
        static struct window_thread w;
        memset(&w, 0, sizeof w);
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        w.fx = fx;
        if (pthread_create(&w.thread, NULL, hold_capture, &w) != 0) return 0;
        pthread_mutex_lock(&w.mu);
        while (w.stage < 1) pthread_cond_wait(&w.cv, &w.mu);
        int began = w.began;
        pthread_mutex_unlock(&w.mu);
        fx->holder = &w;
        if (!began) {
            pthread_join(w.thread, NULL);
            fx->holder = NULL;
        }
        return began;
    }
    }
    return 0;
}

int fixture_window_close(fixture* fx, int window) {
    switch (window) {
    case WINDOW_NONE:
        return 1;
    case WINDOW_THIS_THREAD:
        return window_end(fx->live.provider);
    case WINDOW_OTHER_PROVIDER:
        return window_end(fx->capturer);
    case WINDOW_OTHER_THREAD: {
        struct window_thread* w = fx->holder;
        if (w == NULL) return 0;
        pthread_mutex_lock(&w->mu);
        w->stage = 2;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        fx->holder = NULL;
        return w->ended;
    }
    }
    return 0;
}

void fixture_teardown(fixture* fx) {
    handle_set* l = &fx->live;
    RELEASE(CudaEpReleaseTicket, l->ticket);
    RELEASE(CudaEpReleaseDoubleBuffer, l->double_buffer);
    RELEASE(CudaEpReleasePagedWeight, l->paged_weight);
    RELEASE(CudaEpReleaseLazyWeight, l->lazy_weight);
    RELEASE(CudaEpReleaseFunction, l->function);
    RELEASE(CudaEpReleaseModule, l->module);
    RELEASE(CudaEpReleaseKernel, l->kernel);
    RELEASE(CudaEpReleaseKernel, fx->nonzero);
    RELEASE(CudaEpReleaseBuffer, l->buffer);
    RELEASE(CudaEpReleaseBuffer, fx->buffer2);
    RELEASE(CudaEpReleaseProvider, l->provider);
    RELEASE(CudaEpReleaseBuffer, fx->capturer_buffer);
    RELEASE(CudaEpReleaseProvider, fx->capturer);
    RELEASE(CudaEpReleaseOptions, l->options);
    unlink(fx->data_path);
}
