/*
 * test_provider.c — creating providers on the sim backend and querying them; the errors of
 * backend=cuda without a driver and of a device id out of range.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* provider_string: a two-call query into a malloc'd string the caller frees. */
typedef CudaEpStatus* (*string_query)(CudaEpProvider, char*, size_t, size_t*);

static char* provider_string(string_query q, CudaEpProvider p) {
    size_t needed = 0;
    if (!CHECK_OK(q(p, NULL, 0, &needed))) return NULL;
    char* s = malloc(needed);
    size_t again = 0;
    if (!CHECK_OK(q(p, s, needed, &again))) {
        free(s);
        return NULL;
    }
    CHECK(again == needed && strlen(s) + 1 == needed);
    return s;
}

static void test_sim_provider(void) {
    CudaEpOptions o = new_sim_options();
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateProvider(o, &p));
    CHECK(p != CUDAEP_NULL_HANDLE);

    /* The provider keeps its own copy of the options: changing or releasing them is harmless. */
    CHECK_OK(CudaEpSetOption(o, "backend", "cuda"));
    CHECK_OK(CudaEpReleaseOptions(o));

    char* backend = provider_string(CudaEpProviderGetBackendName, p);
    CHECK_STR(backend, "sim");
    free(backend);
    char* reason = provider_string(CudaEpProviderGetAutoReason, p);
    CHECK_STR(reason, ""); /* explicit backend: no auto reason */
    free(reason);
    char* name = provider_string(CudaEpProviderGetDeviceName, p);
    CHECK_STR(name, "cudaep simulated device");
    free(name);

    CudaEpDeviceInfo info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(CudaEpProviderGetDeviceInfo(p, &info));
    CHECK(info.struct_size == sizeof info);
    CHECK(info.ordinal == 0);
    CHECK(info.compute_major == 9 && info.compute_minor == 0);
    CHECK(info.multiprocessors == 132);
    CHECK(info.reserved == 0);
    CHECK(info.total_memory_bytes == (uint64_t)16 << 30);
    CHECK(info.free_memory_bytes > 0 && info.free_memory_bytes <= info.total_memory_bytes);

    CHECK_OK(CudaEpReleaseProvider(p));
}

static void test_device_info_struct_size(void) {
    CudaEpOptions o = new_sim_options();
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateProvider(o, &p));
    CHECK_OK(CudaEpReleaseOptions(o));

    /* Too small (an unset struct_size, say): refused, nothing written. */
    CudaEpDeviceInfo info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = 8;
    CHECK_ERR(CudaEpProviderGetDeviceInfo(p, &info), CUDAEP_INVALID_ARGUMENT, "struct_size");
    CHECK(info.ordinal == 0x5A5A5A5A);
    CHECK_ERR(CudaEpProviderGetDeviceInfo(p, NULL), CUDAEP_INVALID_ARGUMENT, "info is NULL");

    /* Larger (a host built against a future, longer layout): the known prefix is filled, the
     * rest is left alone. */
    union {
        CudaEpDeviceInfo info;
        unsigned char bytes[sizeof(CudaEpDeviceInfo) + 16];
    } big;
    memset(&big, 0x5A, sizeof big);
    big.info.struct_size = sizeof big;
    CHECK_OK(CudaEpProviderGetDeviceInfo(p, &big.info));
    CHECK(big.info.struct_size == sizeof big);
    CHECK(big.info.multiprocessors == 132);
    for (size_t i = sizeof(CudaEpDeviceInfo); i < sizeof big; i++) CHECK(big.bytes[i] == 0x5A);

    CHECK_OK(CudaEpReleaseProvider(p));
}

static void test_device_id_out_of_range_names_count(void) {
    CudaEpOptions o = new_sim_options();
    CHECK_OK(CudaEpSetOption(o, "device_id", "7"));
    CudaEpProvider p = 42;
    CudaEpStatus* st = CudaEpCreateProvider(o, &p);
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_NOT_FOUND);
    CHECK_CONTAINS(CudaEpGetErrorMessage(st), "device_id 7");
    CHECK_CONTAINS(CudaEpGetErrorMessage(st), "1 device"); /* the sim has one device */
    CudaEpReleaseStatus(st);
    CHECK(p == 42);
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_cuda_backend_fails_clearly_or_is_cuda(void) {
    CudaEpOptions o = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateOptions(&o)); /* the default backend: cuda */
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CudaEpStatus* st = CudaEpCreateProvider(o, &p);
    if (st == NULL) {
        /* A machine with a usable GPU: it must really be the driver, never the simulator. */
        char* backend = provider_string(CudaEpProviderGetBackendName, p);
        CHECK_STR(backend, "cuda");
        free(backend);
        CHECK_OK(CudaEpReleaseProvider(p));
    } else {
        CHECK(CudaEpGetErrorCode(st) == CUDAEP_NOT_FOUND);
        CHECK_CONTAINS(CudaEpGetErrorMessage(st), "backend=sim");
        printf("backend=cuda here: %s\n", CudaEpGetErrorMessage(st));
        CudaEpReleaseStatus(st);
        CHECK(p == CUDAEP_NULL_HANDLE);
    }
    CHECK_OK(CudaEpReleaseOptions(o));
}

static void test_auto_backend_says_why(void) {
    CudaEpOptions o = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateOptions(&o));
    CHECK_OK(CudaEpSetOption(o, "backend", "auto"));
    CudaEpProvider p = CUDAEP_NULL_HANDLE;
    CHECK_OK(CudaEpCreateProvider(o, &p));
    char* backend = provider_string(CudaEpProviderGetBackendName, p);
    char* reason = provider_string(CudaEpProviderGetAutoReason, p);
    CHECK(backend != NULL && (strcmp(backend, "cuda") == 0 || strcmp(backend, "sim") == 0));
    if (backend != NULL && reason != NULL) {
        char want[32];
        snprintf(want, sizeof want, "auto chose %s", backend);
        CHECK_CONTAINS(reason, want);
        printf("backend=auto here: %s\n", reason);
    }
    free(backend);
    free(reason);
    CHECK_OK(CudaEpReleaseProvider(p));
    CHECK_OK(CudaEpReleaseOptions(o));
}

int main(void) {
    test_sim_provider();
    test_device_info_struct_size();
    test_device_id_out_of_range_names_count();
    test_cuda_backend_fails_clearly_or_is_cuda();
    test_auto_backend_says_why();
    check_no_live_handles();
    return check_result("test_provider");
}
