/*
 * status.c — the status object of the C ABI. Statuses live in the C heap and are read and
 * freed without entering Go: these functions are plain C, cannot fail halfway and need no
 * panic guard.
 */
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"

struct CudaEpStatus {
    CudaEpErrorCode code;
    const char* message; /* points at text[] or, for the static status, a literal */
    char text[];
};

/* Returned when a status cannot be allocated; never freed. */
static struct CudaEpStatus out_of_memory_status = {
    CUDAEP_OUT_OF_MEMORY, "cudaep: out of memory while reporting an error"};

CudaEpStatus* cudaep_status_new(CudaEpErrorCode code, const char* msg, size_t len) {
    if (msg == NULL) {
        len = 0;
    }
    struct CudaEpStatus* st = malloc(sizeof(*st) + len + 1);
    if (st == NULL) {
        return &out_of_memory_status;
    }
    st->code = code;
    if (len > 0) {
        memcpy(st->text, msg, len);
    }
    st->text[len] = '\0';
    st->message = st->text;
    return st;
}

/* The enum's underlying type may be signed or unsigned; a negative number cast to an
 * unsigned 64-bit value is huge, so one comparison covers both ends. */
static int known_code(CudaEpErrorCode code) {
    return (unsigned long long)code <= (unsigned long long)CUDAEP_DECLINED;
}

CudaEpStatus* CudaEpCreateStatus(CudaEpErrorCode code, const char* message) {
    if (code == CUDAEP_OK) {
        return NULL;
    }
    if (!known_code(code)) {
        code = CUDAEP_FAIL;
    }
    return cudaep_status_new(code, message, message == NULL ? 0 : strlen(message));
}

CudaEpErrorCode CudaEpGetErrorCode(const CudaEpStatus* status) {
    return status == NULL ? CUDAEP_OK : status->code;
}

const char* CudaEpGetErrorMessage(const CudaEpStatus* status) {
    return status == NULL ? "" : status->message;
}

void CudaEpReleaseStatus(CudaEpStatus* status) {
    if (status != NULL && status != &out_of_memory_status) {
        free(status);
    }
}

const char* CudaEpGetErrorCodeName(CudaEpErrorCode code) {
    switch (code) {
    case CUDAEP_OK:
        return "CUDAEP_OK";
    case CUDAEP_FAIL:
        return "CUDAEP_FAIL";
    case CUDAEP_INVALID_ARGUMENT:
        return "CUDAEP_INVALID_ARGUMENT";
    case CUDAEP_INVALID_HANDLE:
        return "CUDAEP_INVALID_HANDLE";
    case CUDAEP_STALE_HANDLE:
        return "CUDAEP_STALE_HANDLE";
    case CUDAEP_NOT_FOUND:
        return "CUDAEP_NOT_FOUND";
    case CUDAEP_OUT_OF_MEMORY:
        return "CUDAEP_OUT_OF_MEMORY";
    case CUDAEP_CUDA_ERROR:
        return "CUDAEP_CUDA_ERROR";
    case CUDAEP_UNSUPPORTED:
        return "CUDAEP_UNSUPPORTED";
    case CUDAEP_WRONG_STATE:
        return "CUDAEP_WRONG_STATE";
    case CUDAEP_STALE_GENERATION:
        return "CUDAEP_STALE_GENERATION";
    case CUDAEP_DECLINED:
        return "CUDAEP_DECLINED";
    }
    return "CUDAEP_UNKNOWN_ERROR_CODE";
}
