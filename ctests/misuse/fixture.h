/*
 * fixture.h — the objects the generated misuse test (gen_misuse.py) calls every function with:
 * one live handle of every type, one released handle of every type, and valid arguments for
 * every parameter. A misuse case replaces exactly one argument with a bad one, so the call's
 * status is that argument's.
 */
#ifndef CUDAEP_CTESTS_MISUSE_FIXTURE_H
#define CUDAEP_CTESTS_MISUSE_FIXTURE_H

#include <stdint.h>

#include "cudaep.h"

/* handle_set holds one handle of every type. */
typedef struct handle_set {
    CudaEpOptions options;
    CudaEpProvider provider;
    CudaEpBuffer buffer;
    CudaEpKernel kernel;
    CudaEpModule module;
    CudaEpFunction function;
    CudaEpLazyWeight lazy_weight;
    CudaEpPagedWeight paged_weight;
    CudaEpDoubleBuffer double_buffer;
    CudaEpTicket ticket;
} handle_set;

typedef struct fixture {
    handle_set live;     /* valid handles; the provider pages weights (prefill_double_buffer) */
    handle_set released; /* handles of objects released during setup */
    CudaEpBuffer buffer2;  /* a second buffer, for copies between two */
    CudaEpKernel nonzero;  /* a NonZero kernel over float32[4] */
    uint64_t live_handles; /* CudaEpGetLiveHandleCount after setup */

    /* Valid arguments. */
    char data_path[512];
    const char* cuda_source;
    const char* entry;
    const char* ptx;
    size_t ptx_size;
    int64_t shape4[1];
    CudaEpTensorInfo gelu_info[1];
    CudaEpAttribute gelu_attr[1];
    CudaEpTensor relu_in[1], relu_out[1];
    CudaEpTensor nz_count;
    const char* nvrtc_options[1];
    CudaEpLaunchConfig launch_config;
    CudaEpKernelArg launch_args[4];
    CudaEpKernel capture_kernels[1];
    CudaEpBuffer capture_retain[1];
    CudaEpRegion region;
    int64_t weight_shape[1];
    CudaEpWeightSpec weight_spec;
    unsigned char host_bytes[64];

    /* The capture windows (fixture_window_open). */
    CudaEpProvider capturer;       /* another provider, which captures in WINDOW_OTHER_PROVIDER */
    CudaEpBuffer capturer_buffer;  /* its buffer, which that capture records a memset into */
    struct window_thread* holder;  /* the thread holding WINDOW_OTHER_THREAD's capture */
} fixture;

/*
 * The states the misuse cases run in. Argument errors come before state errors, so a case that
 * expects an error gets it in each of them:
 *   WINDOW_NONE            no capture is live;
 *   WINDOW_THIS_THREAD     a capture is live on the fixture's provider, begun on this thread;
 *   WINDOW_OTHER_THREAD    a capture is live on the fixture's provider, begun on another thread;
 *   WINDOW_OTHER_PROVIDER  a capture is live on fx->capturer, begun on this thread.
 * Each capture records one memset into a keyed slot and must end cleanly after the cases.
 */
enum { WINDOW_NONE, WINDOW_THIS_THREAD, WINDOW_OTHER_THREAD, WINDOW_OTHER_PROVIDER, WINDOWS };
static const char* const window_names[WINDOWS] = {
    "no capture", "a capture on this thread", "a capture on another thread",
    "another provider's capture on this thread",
};

/* fixture_window_open begins window's capture; it returns 0 (after reporting why) when it cannot. */
int fixture_window_open(fixture* fx, int window);

/* fixture_window_close ends window's capture and forgets its graph; 0 when the end failed. */
int fixture_window_close(fixture* fx, int window);

/* fixture_setup makes every object; it returns 0 (after printing why) when it cannot. */
int fixture_setup(fixture* fx);

/* fixture_teardown releases every live object of fx. */
void fixture_teardown(fixture* fx);

#endif /* CUDAEP_CTESTS_MISUSE_FIXTURE_H */
