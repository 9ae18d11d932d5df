/* host.c — a minimal host of an installed cudaep: check the version, make a sim provider. */
#include <stdio.h>
#include <string.h>

#include <cudaep.h>

static int failed(CudaEpStatus* st, const char* what) {
    if (st == NULL) return 0;
    fprintf(stderr, "host: %s: %s: %s\n", what, CudaEpGetErrorCodeName(CudaEpGetErrorCode(st)),
            CudaEpGetErrorMessage(st));
    CudaEpReleaseStatus(st);
    return 1;
}

int main(int argc, char** argv) {
    uint32_t abi = 0;
    const char* version = NULL;
    if (failed(CudaEpGetVersion(&abi, &version), "CudaEpGetVersion")) return 1;
    if (abi != CUDAEP_ABI_VERSION) {
        fprintf(stderr, "host: library ABI %u, header ABI %d\n", abi, CUDAEP_ABI_VERSION);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], version) != 0) {
        fprintf(stderr, "host: library version %s, want %s\n", version, argv[1]);
        return 1;
    }

    CudaEpOptions opts = CUDAEP_NULL_HANDLE;
    CudaEpProvider prov = CUDAEP_NULL_HANDLE;
    if (failed(CudaEpCreateOptions(&opts), "CudaEpCreateOptions")) return 1;
    if (failed(CudaEpSetOption(opts, "backend", "sim"), "CudaEpSetOption")) return 1;
    if (failed(CudaEpCreateProvider(opts, &prov), "CudaEpCreateProvider")) return 1;
    char backend[16];
    size_t needed = 0;
    if (failed(CudaEpProviderGetBackendName(prov, backend, sizeof backend, &needed), "backend")) return 1;
    if (failed(CudaEpReleaseProvider(prov), "CudaEpReleaseProvider")) return 1;
    if (failed(CudaEpReleaseOptions(opts), "CudaEpReleaseOptions")) return 1;
    printf("host: cudaep %s, ABI %u, backend %s\n", version, abi, backend);
    return strcmp(backend, "sim") == 0 ? 0 : 1;
}
