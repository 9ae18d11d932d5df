/* test_status.c — the status object round trip, NULL semantics, code names and the version. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_codes_are_pinned(void) {
    /* The numbers are ABI: a host may have compiled them in. */
    CHECK(CUDAEP_OK == 0);
    CHECK(CUDAEP_FAIL == 1);
    CHECK(CUDAEP_INVALID_ARGUMENT == 2);
    CHECK(CUDAEP_INVALID_HANDLE == 3);
    CHECK(CUDAEP_STALE_HANDLE == 4);
    CHECK(CUDAEP_NOT_FOUND == 5);
    CHECK(CUDAEP_OUT_OF_MEMORY == 6);
    CHECK(CUDAEP_CUDA_ERROR == 7);
    CHECK(CUDAEP_UNSUPPORTED == 8);
    CHECK(CUDAEP_WRONG_STATE == 9);
}

static void test_round_trip_every_code(void) {
    static const struct {
        CudaEpErrorCode code;
        const char* name;
    } codes[] = {
        {CUDAEP_FAIL, "CUDAEP_FAIL"},
        {CUDAEP_INVALID_ARGUMENT, "CUDAEP_INVALID_ARGUMENT"},
        {CUDAEP_INVALID_HANDLE, "CUDAEP_INVALID_HANDLE"},
        {CUDAEP_STALE_HANDLE, "CUDAEP_STALE_HANDLE"},
        {CUDAEP_NOT_FOUND, "CUDAEP_NOT_FOUND"},
        {CUDAEP_OUT_OF_MEMORY, "CUDAEP_OUT_OF_MEMORY"},
        {CUDAEP_CUDA_ERROR, "CUDAEP_CUDA_ERROR"},
        {CUDAEP_UNSUPPORTED, "CUDAEP_UNSUPPORTED"},
        {CUDAEP_WRONG_STATE, "CUDAEP_WRONG_STATE"},
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "message number %zu", i + 1);
        CudaEpStatus* st = CudaEpCreateStatus(codes[i].code, msg);
        memset(msg, 'Z', sizeof msg - 1); /* the status must own a copy */
        CHECK(st != NULL);
        CHECK(CudaEpGetErrorCode(st) == codes[i].code);
        char want[64];
        snprintf(want, sizeof want, "message number %zu", i + 1);
        CHECK_STR(CudaEpGetErrorMessage(st), want);
        CHECK_STR(CudaEpGetErrorCodeName(CudaEpGetErrorCode(st)), codes[i].name);
        CudaEpReleaseStatus(st);
    }
    CHECK_STR(CudaEpGetErrorCodeName(CUDAEP_OK), "CUDAEP_OK");
    CHECK_STR(CudaEpGetErrorCodeName((CudaEpErrorCode)77), "CUDAEP_UNKNOWN_ERROR_CODE");
}

static void test_null_semantics(void) {
    CHECK(CudaEpCreateStatus(CUDAEP_OK, "ignored") == NULL); /* OK is success: no status */
    CHECK(CudaEpGetErrorCode(NULL) == CUDAEP_OK);
    CHECK_STR(CudaEpGetErrorMessage(NULL), "");
    CudaEpReleaseStatus(NULL); /* a no-op, must not crash */

    CudaEpStatus* st = CudaEpCreateStatus(CUDAEP_NOT_FOUND, NULL);
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_NOT_FOUND);
    CHECK_STR(CudaEpGetErrorMessage(st), "");
    CudaEpReleaseStatus(st);

    /* Numbers outside the enum become FAIL rather than leaking an unknown code. */
    st = CudaEpCreateStatus((CudaEpErrorCode)1234, "odd code");
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_FAIL);
    CHECK_STR(CudaEpGetErrorMessage(st), "odd code");
    CudaEpReleaseStatus(st);
    st = CudaEpCreateStatus((CudaEpErrorCode)-1, "negative code");
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_FAIL);
    CudaEpReleaseStatus(st);
}

static void test_long_message(void) {
    size_t n = 100000;
    char* big = malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
    big[n] = '\0';
    CudaEpStatus* st = CudaEpCreateStatus(CUDAEP_CUDA_ERROR, big);
    CHECK(strlen(CudaEpGetErrorMessage(st)) == n);
    CHECK(strcmp(CudaEpGetErrorMessage(st), big) == 0);
    CudaEpReleaseStatus(st);
    free(big);
}

static void test_library_status(void) {
    /* A status made by the library (in Go) reads and frees the same way. */
    CudaEpStatus* st = CudaEpSetOption(CUDAEP_NULL_HANDLE, "backend", "sim");
    CHECK(st != NULL);
    CHECK(CudaEpGetErrorCode(st) == CUDAEP_INVALID_HANDLE);
    CHECK_CONTAINS(CudaEpGetErrorMessage(st), "null handle");
    CudaEpReleaseStatus(st);
}

static void test_version(void) {
    uint32_t abi = 0;
    const char* version = NULL;
    CHECK_OK(CudaEpGetVersion(&abi, &version));
    CHECK(abi == CUDAEP_ABI_VERSION);
    CHECK_STR(version, CUDAEP_EXPECTED_VERSION);
    const char* again = NULL;
    CHECK_OK(CudaEpGetVersion(NULL, &again)); /* either out-parameter may be skipped */
    CHECK(again == version);                  /* static storage: the same pointer each time */
    abi = 0;
    CHECK_OK(CudaEpGetVersion(&abi, NULL));
    CHECK(abi == CUDAEP_ABI_VERSION);
}

int main(void) {
    test_codes_are_pinned();
    test_round_trip_every_code();
    test_null_semantics();
    test_long_message();
    test_library_status();
    test_version();
    check_no_live_handles();
    return check_result("test_status");
}
