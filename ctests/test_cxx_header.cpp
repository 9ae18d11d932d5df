// test_cxx_header.cpp — the public header in a C++17 translation unit: extern "C" linkage,
// static_assert layout pins, and a few calls made the way a C++ host would make them.
#include "cudaep.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

static_assert(std::is_same<CudaEpOptions, uint64_t>::value, "handles are 64-bit integers");
static_assert(std::is_same<CudaEpProvider, uint64_t>::value, "handles are 64-bit integers");
static_assert(std::is_standard_layout<CudaEpDeviceInfo>::value, "plain C struct");
static_assert(sizeof(CudaEpDeviceInfo) == 40, "ABI 1 layout");

namespace {

// StatusPtr owns a status the RAII way a C++ host would.
struct StatusDeleter {
    void operator()(CudaEpStatus* s) const { CudaEpReleaseStatus(s); }
};
using StatusPtr = std::unique_ptr<CudaEpStatus, StatusDeleter>;

int failures = 0;

void expect(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "check failed: %s\n", what);
        ++failures;
    }
}

std::string backend_name(CudaEpProvider p) {
    size_t needed = 0;
    StatusPtr st(CudaEpProviderGetBackendName(p, nullptr, 0, &needed));
    if (st) return "(error)";
    std::string s(needed, '\0');
    st.reset(CudaEpProviderGetBackendName(p, &s[0], s.size(), &needed));
    if (st) return "(error)";
    s.resize(needed - 1);
    return s;
}

}  // namespace

int main() {
    uint32_t abi = 0;
    const char* version = nullptr;
    StatusPtr st(CudaEpGetVersion(&abi, &version));
    expect(!st && abi == CUDAEP_ABI_VERSION, "CudaEpGetVersion");
    expect(version != nullptr && std::strcmp(version, CUDAEP_EXPECTED_VERSION) == 0, "library version");

    StatusPtr made(CudaEpCreateStatus(CUDAEP_WRONG_STATE, "from C++"));
    expect(CudaEpGetErrorCode(made.get()) == CUDAEP_WRONG_STATE, "status code");
    expect(std::string(CudaEpGetErrorMessage(made.get())) == "from C++", "status message");

    CudaEpOptions opts = CUDAEP_NULL_HANDLE;
    st.reset(CudaEpCreateOptions(&opts));
    expect(!st, "CudaEpCreateOptions");
    st.reset(CudaEpSetOption(opts, "backend", "sim"));
    expect(!st, "CudaEpSetOption");
    CudaEpProvider prov = CUDAEP_NULL_HANDLE;
    st.reset(CudaEpCreateProvider(opts, &prov));
    expect(!st, "CudaEpCreateProvider");
    expect(backend_name(prov) == "sim", "backend name");
    st.reset(CudaEpReleaseProvider(prov));
    expect(!st, "CudaEpReleaseProvider");
    st.reset(CudaEpReleaseOptions(opts));
    expect(!st, "CudaEpReleaseOptions");

    st.reset(CudaEpReleaseOptions(opts));
    expect(CudaEpGetErrorCode(st.get()) == CUDAEP_STALE_HANDLE, "double release is stale");

    if (failures) return 1;
    std::printf("test_cxx_header: all checks passed\n");
    return 0;
}
