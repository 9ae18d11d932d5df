/*
 * test_buffers.c — device buffers through the C ABI: alignment, host↔device copies at offsets,
 * device-to-device copies and memsets with distinct byte patterns, range checks that refuse
 * before any device work, counters, and a provider released before its buffers.
 */
#include "support.h"

static void test_alloc_alignment_and_size(CudaEpProvider p) {
    const uint64_t aligns[] = {0, 256, 4096, 1 << 16};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        CudaEpBuffer b = CUDAEP_NULL_HANDLE;
        if (!CHECK_OK(CudaEpAllocBuffer(p, 1000, aligns[i], &b))) continue;
        uint64_t ptr = 0, size = 0;
        CHECK_OK(CudaEpBufferGetDevicePointer(b, &ptr));
        CHECK_OK(CudaEpBufferGetSize(b, &size));
        uint64_t want = aligns[i] ? aligns[i] : 256;
        CHECK(ptr != 0 && ptr % want == 0);
        CHECK(size == 1000);
        /* The whole requested size is usable. */
        unsigned char bytes[1000];
        pattern_bytes(bytes, sizeof bytes, (unsigned)i + 1);
        CHECK_OK(CudaEpCopyToDevice(b, 0, bytes, sizeof bytes));
        RELEASE(CudaEpReleaseBuffer, b);
    }
    CudaEpBuffer b = 0xA5A5;
    CHECK_ERR(CudaEpAllocBuffer(p, 0, 0, &b), CUDAEP_INVALID_ARGUMENT, "size is 0");
    CHECK_ERR(CudaEpAllocBuffer(p, 64, 48, &b), CUDAEP_INVALID_ARGUMENT, "not a power of two");
    CHECK_ERR(CudaEpAllocBuffer(p, UINT64_MAX - 8, 1 << 20, &b), CUDAEP_INVALID_ARGUMENT, "overflows");
    CHECK_ERR(CudaEpAllocBuffer(p, UINT64_MAX / 2, 0, &b), CUDAEP_INVALID_ARGUMENT, "larger than the device");
    CHECK(b == 0xA5A5);
}

static void test_copies_and_memset(CudaEpProvider p) {
    enum { N = 4096 };
    static unsigned char src[N], back[N], want[N];
    pattern_bytes(src, N, 3);
    CudaEpBuffer a = new_buffer(p, N), b = new_buffer(p, N);

    /* H2D at an offset, D2H at another: exactly the bytes written. */
    CHECK_OK(CudaEpMemset(a, 0, N, 0x5A));
    CHECK_OK(CudaEpCopyToDevice(a, 100, src, 1000));
    memset(want, 0x5A, N);
    memcpy(want + 100, src, 1000);
    CHECK(download(a, back, N) && memcmp(back, want, N) == 0);
    memset(back, 0, N);
    CHECK_OK(CudaEpCopyToHost(back, a, 150, 200));
    CHECK(memcmp(back, src + 50, 200) == 0);

    /* D2D between buffers and inside one (disjoint ranges), memset in the middle. */
    CHECK_OK(CudaEpMemset(b, 0, N, 0xC3));
    CHECK_OK(CudaEpCopyBuffer(b, 8, a, 100, 1000));
    CHECK_OK(CudaEpCopyBuffer(b, 2048, b, 8, 512));
    CHECK_OK(CudaEpMemset(b, 1500, 16, 0x7E));
    memset(want, 0xC3, N);
    memcpy(want + 8, src, 1000);
    memcpy(want + 2048, src, 512);
    memset(want + 1500, 0x7E, 16);
    CHECK(download(b, back, N) && memcmp(back, want, N) == 0);

    /* Ranges outside the buffer (and offsets that overflow) are refused before any work. */
    CHECK_ERR(CudaEpCopyToDevice(a, N - 10, src, 11), CUDAEP_INVALID_ARGUMENT, "outside the 4096-byte buffer");
    CHECK_ERR(CudaEpCopyToDevice(a, UINT64_MAX, src, 2), CUDAEP_INVALID_ARGUMENT, "outside");
    CHECK_ERR(CudaEpCopyToHost(back, a, 1, N), CUDAEP_INVALID_ARGUMENT, "outside");
    CHECK_ERR(CudaEpCopyBuffer(b, 0, a, N, 1), CUDAEP_INVALID_ARGUMENT, "src buffer");
    CHECK_ERR(CudaEpCopyBuffer(b, 0, b, 10, 100), CUDAEP_INVALID_ARGUMENT, "overlap");
    CHECK_ERR(CudaEpMemset(a, 4000, 97, 1), CUDAEP_INVALID_ARGUMENT, "outside");
    CHECK(download(b, back, N) && memcmp(back, want, N) == 0);

    RELEASE(CudaEpReleaseBuffer, a);
    RELEASE(CudaEpReleaseBuffer, b);
}

static void test_counters(CudaEpProvider p) {
    CudaEpProviderStats before, after;
    memset(&before, 0, sizeof before);
    before.struct_size = sizeof before;
    after = before;
    CHECK_OK(CudaEpProviderGetStats(p, &before));
    CudaEpBuffer b = new_buffer(p, 12345);
    CHECK_OK(CudaEpProviderGetStats(p, &after));
    CHECK(after.device_allocs == before.device_allocs + 1);
    CHECK(after.device_live_bytes >= before.device_live_bytes + 12345);
    RELEASE(CudaEpReleaseBuffer, b);
    CHECK_OK(CudaEpProviderGetStats(p, &after));
    CHECK(after.device_frees == before.device_frees + 1);
    CHECK(after.device_live_bytes == before.device_live_bytes);

    CudaEpProviderStats small;
    memset(&small, 0x5A, sizeof small);
    small.struct_size = 16;
    CHECK_ERR(CudaEpProviderGetStats(p, &small), CUDAEP_INVALID_ARGUMENT, "struct_size");
    CHECK(small.device_allocs == 0x5A5A5A5A5A5A5A5Aull);
}

/* A buffer keeps its provider alive: releasing the provider handle first is safe. */
static void test_provider_released_before_buffer(void) {
    CudaEpProvider p = new_provider(NULL);
    unsigned char src[256], back[256];
    pattern_bytes(src, sizeof src, 9);
    CudaEpBuffer b = new_buffer(p, sizeof src);
    CHECK_OK(CudaEpReleaseProvider(p));
    CHECK_ERR(CudaEpSynchronize(p), CUDAEP_STALE_HANDLE, "released");
    CudaEpBuffer other = 0;
    CHECK_ERR(CudaEpAllocBuffer(p, 16, 0, &other), CUDAEP_STALE_HANDLE, "released");
    CHECK_OK(CudaEpCopyToDevice(b, 0, src, sizeof src));
    CHECK(download(b, back, sizeof back) && memcmp(src, back, sizeof src) == 0);
    CHECK_OK(CudaEpReleaseBuffer(b)); /* the provider is destroyed here */
    CHECK_ERR(CudaEpReleaseBuffer(b), CUDAEP_STALE_HANDLE, "released");
}

static void test_synchronize(CudaEpProvider p) {
    CHECK_OK(CudaEpSynchronize(p));
    CHECK_OK(CudaEpForceSynchronize(p));
    CHECK_OK(CudaEpSynchronizeCompute(p));
    CHECK_OK(CudaEpDrainForUnmap(p));
}

int main(void) {
    CudaEpProvider p = new_provider(NULL);
    test_alloc_alignment_and_size(p);
    test_copies_and_memset(p);
    test_counters(p);
    test_synchronize(p);
    CHECK_OK(CudaEpReleaseProvider(p));
    test_provider_released_before_buffer();
    check_no_live_handles();
    return check_result("test_buffers");
}
