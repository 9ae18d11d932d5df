/*
 * test_bad_handles.c — every kind of bad handle (zero, forged, wrong type, stale, released
 * twice) passed to every function that takes a handle returns its documented code, never
 * crashes, and leaves out-parameters untouched.
 */
#include <string.h>

#include "check.h"

#define SENTINEL ((uint64_t)0xA5A5A5A5A5A5A5A5ull)

/* expect_options_rejected: every function taking an options handle refuses h with want. */
static void expect_options_rejected(CudaEpOptions h, CudaEpErrorCode want, const char* part) {
    CHECK_ERR(CudaEpSetOption(h, "backend", "sim"), want, part);

    char buf[32];
    memset(buf, 0x5A, sizeof buf);
    size_t needed = 12345;
    CHECK_ERR(CudaEpGetOption(h, "backend", buf, sizeof buf, &needed), want, part);
    CHECK(needed == 12345);
    CHECK((unsigned char)buf[0] == 0x5A);

    CudaEpProvider p = SENTINEL;
    CHECK_ERR(CudaEpCreateProvider(h, &p), want, part);
    CHECK(p == SENTINEL);

    CHECK_ERR(CudaEpReleaseOptions(h), want, part);
}

/* expect_provider_rejected: every function taking a provider handle refuses h with want. */
static void expect_provider_rejected(CudaEpProvider h, CudaEpErrorCode want, const char* part) {
    char buf[32];
    memset(buf, 0x5A, sizeof buf);
    size_t needed = 12345;
    CHECK_ERR(CudaEpProviderGetBackendName(h, buf, sizeof buf, &needed), want, part);
    CHECK_ERR(CudaEpProviderGetAutoReason(h, buf, sizeof buf, &needed), want, part);
    CHECK_ERR(CudaEpProviderGetDeviceName(h, buf, sizeof buf, &needed), want, part);
    CHECK(needed == 12345);
    CHECK((unsigned char)buf[0] == 0x5A);

    CudaEpDeviceInfo info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = sizeof info;
    CHECK_ERR(CudaEpProviderGetDeviceInfo(h, &info), want, part);
    CHECK(info.ordinal == 0x5A5A5A5A);

    CHECK_ERR(CudaEpReleaseProvider(h), want, part);
}

int main(void) {
    CudaEpOptions opts = new_sim_options();
    CudaEpProvider prov = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateProvider(opts, &prov));

    /* Zero. */
    expect_options_rejected(CUDAEP_NULL_HANDLE, CUDAEP_INVALID_HANDLE, "null handle");
    expect_provider_rejected(CUDAEP_NULL_HANDLE, CUDAEP_INVALID_HANDLE, "null handle");

    /* Wrong type: a live handle of the other kind. */
    expect_options_rejected((CudaEpOptions)prov, CUDAEP_INVALID_HANDLE, "wrong type");
    expect_provider_rejected((CudaEpProvider)opts, CUDAEP_INVALID_HANDLE, "wrong type");

    /* Forged: numbers the library never issued, including a live handle's next generation. */
    const uint64_t forged[] = {
        0xDEADBEEFDEADBEEFull,
        0xFFFFFFFFFFFFFFFFull,
        1,
        opts + ((uint64_t)1 << 32),
        prov + ((uint64_t)1 << 32),
        opts + 1000,
        prov + 1000,
    };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        expect_options_rejected(forged[i], CUDAEP_INVALID_HANDLE, "");
        expect_provider_rejected(forged[i], CUDAEP_INVALID_HANDLE, "");
    }

    /* The real handles survived all of that. */
    char name[16];
    size_t needed = 0;
    CHECK_OK(CudaEpProviderGetBackendName(prov, name, sizeof name, &needed));
    CHECK_STR(name, "sim");
    CHECK_OK(CudaEpSetOption(opts, "device_id", "0"));

    /* Stale: released handles, and a second release. */
    CHECK_OK(CudaEpReleaseProvider(prov));
    CHECK_OK(CudaEpReleaseOptions(opts));
    expect_options_rejected(opts, CUDAEP_STALE_HANDLE, "released");
    expect_provider_rejected(prov, CUDAEP_STALE_HANDLE, "released");
    CHECK_ERR(CudaEpReleaseOptions(opts), CUDAEP_STALE_HANDLE, "released");
    CHECK_ERR(CudaEpReleaseProvider(prov), CUDAEP_STALE_HANDLE, "released");

    /* A new object may reuse the slot; the old handle must still be stale, not alias it. */
    CudaEpOptions reused = new_sim_options();
    CHECK(reused != opts);
    CHECK_ERR(CudaEpSetOption(opts, "tf32", "1"), CUDAEP_STALE_HANDLE, "released");
    char value[8];
    CHECK_OK(CudaEpGetOption(reused, "tf32", value, sizeof value, &needed));
    CHECK_STR(value, "false");
    CHECK_OK(CudaEpReleaseOptions(reused));

    /* NULL out-parameters are INVALID_ARGUMENT, not a crash. */
    CHECK_ERR(CudaEpCreateOptions(NULL), CUDAEP_INVALID_ARGUMENT, "out_options is NULL");
    CHECK_ERR(CudaEpGetLiveHandleCount(NULL), CUDAEP_INVALID_ARGUMENT, "out_count is NULL");
    CudaEpOptions o2 = new_sim_options();
    CHECK_ERR(CudaEpCreateProvider(o2, NULL), CUDAEP_INVALID_ARGUMENT, "out_provider is NULL");
    CHECK_OK(CudaEpReleaseOptions(o2));

    check_no_live_handles();
    return check_result("test_bad_handles");
}
