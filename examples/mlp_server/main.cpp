// mlp_server — what an inference server does with cudaep, in one small C++17 program:
//
//   1. writes a 2-layer MLP's weights as an ONNX-style external-data file (or reuses --weights);
//   2. prefill: streams the layers' weights to the device through the residency, prefetching
//      layer N+1 before consuming layer N (prefill_double_buffer=true), and runs the MLP over a
//      prompt with the paged weights, keeping a resident copy for decode. The residency's slots
//      are reserved when the provider is created (residency_slot_bytes) and the weight file is
//      registered with the driver when it is opened, so the prefill sets nothing up; the
//      kernels are warmed up once before it, as a server does when it loads a model. The
//      prefill runs twice (the first right after the open) and both are timed;
//   3. decode: captures the M=1 step (MLP + feeding the output back as the next input) into a
//      CUDA graph once and replays it for --tokens tokens;
//   4. checks every output against a CPU reference and prints timings.
//
//   mlp_server [--backend sim|cuda|auto] [--tokens N] [--prompt P] [--weights PATH]
//
// The backend defaults to $CUDAEP_TEST_BACKEND, else auto. Exit status 0 when every output
// matches the reference, 1 otherwise.
#include <cudaep.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

// ---- the C ABI, the C++ way ------------------------------------------------------------------

// Error is a failed call: the status's code name and message.
struct Error : std::runtime_error {
    CudaEpErrorCode code;
    Error(const char* what, CudaEpStatus* st)
        : std::runtime_error(std::string(what) + ": " + CudaEpGetErrorCodeName(CudaEpGetErrorCode(st)) + ": " +
                             CudaEpGetErrorMessage(st)),
          code(CudaEpGetErrorCode(st)) {
        CudaEpReleaseStatus(st);
    }
};

// check throws an Error for a non-NULL status (which it frees).
void check(CudaEpStatus* st, const char* what) {
    if (st != nullptr) throw Error(what, st);
}
#define CK(call) check((call), #call)

// Handle owns one library handle and releases it with Release.
template <CudaEpStatus* (*Release)(uint64_t)>
class Handle {
public:
    Handle() = default;
    explicit Handle(uint64_t h) : h_(h) {}
    Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, CUDAEP_NULL_HANDLE)) {}
    Handle& operator=(Handle&& o) noexcept {
        reset();
        h_ = std::exchange(o.h_, CUDAEP_NULL_HANDLE);
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }
    uint64_t get() const { return h_; }
    uint64_t* out() {
        reset();
        return &h_;
    }
    void reset() {
        if (h_ != CUDAEP_NULL_HANDLE) {
            CudaEpStatus* st = Release(std::exchange(h_, CUDAEP_NULL_HANDLE));
            if (st != nullptr) {
                std::fprintf(stderr, "mlp_server: release: %s\n", CudaEpGetErrorMessage(st));
                CudaEpReleaseStatus(st);
            }
        }
    }

private:
    uint64_t h_ = CUDAEP_NULL_HANDLE;
};

using Options = Handle<CudaEpReleaseOptions>;
using Provider = Handle<CudaEpReleaseProvider>;
using Buffer = Handle<CudaEpReleaseBuffer>;
using Kernel = Handle<CudaEpReleaseKernel>;
using LazyWeight = Handle<CudaEpReleaseLazyWeight>;
using PagedWeight = Handle<CudaEpReleasePagedWeight>;

// Shape keeps a tensor's dimensions alive while a CudaEpTensor points at them.
struct Shape {
    std::vector<int64_t> dims;
    CudaEpTensorInfo info() const {
        CudaEpTensorInfo i{};
        i.dtype = CUDAEP_DTYPE_FLOAT32;
        i.rank = static_cast<uint32_t>(dims.size());
        i.shape = dims.data();
        return i;
    }
    CudaEpTensor on(uint64_t memory, uint64_t offset = 0) const {
        CudaEpTensor t{};
        t.info = info();
        t.memory = memory;
        t.offset = offset;
        return t;
    }
    size_t count() const {
        size_t n = 1;
        for (int64_t d : dims) n *= static_cast<size_t>(d);
        return n;
    }
};

Kernel kernel(const Provider& p, const char* op, std::initializer_list<const Shape*> inputs) {
    std::vector<CudaEpTensorInfo> infos;
    for (const Shape* s : inputs) infos.push_back(s->info());
    Kernel k;
    CK(CudaEpGetKernel(p.get(), op, 21, infos.data(), infos.size(), nullptr, 0, k.out()));
    return k;
}

void run(const Kernel& k, std::initializer_list<CudaEpTensor> in, CudaEpTensor out) {
    std::vector<CudaEpTensor> ins(in);
    CK(CudaEpKernelExecute(k.get(), ins.data(), ins.size(), &out, 1));
}

Buffer alloc(const Provider& p, size_t bytes) {
    Buffer b;
    CK(CudaEpAllocBuffer(p.get(), bytes, 0, b.out()));
    return b;
}

std::vector<float> download(const Buffer& b, size_t count, uint64_t offset = 0) {
    std::vector<float> v(count);
    CK(CudaEpCopyToHost(v.data(), b.get(), offset, count * sizeof(float)));
    return v;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the model -------------------------------------------------------------------------------

constexpr int64_t D = 64;   // model width: input = output, so decode feeds y back as x
constexpr int64_t H = 128;  // hidden width
constexpr uint64_t kHeader = 128;

// Layer l's image in the file is its weight matrix [in, out] followed by its bias [out]: one
// lazy weight of (in + 1) × out floats, made of two regions.
struct LayerDims {
    int64_t in, out;
};
constexpr LayerDims kLayers[2] = {{D, H}, {H, D}};

struct Weights {
    std::vector<float> w[2], b[2];
};

Weights make_weights(uint32_t seed) {
    std::mt19937 rng(seed);
    Weights m;
    for (int l = 0; l < 2; l++) {
        float scale = 1.0f / std::sqrt(static_cast<float>(kLayers[l].in));
        std::uniform_real_distribution<float> u(-scale, scale);
        m.w[l].resize(static_cast<size_t>(kLayers[l].in * kLayers[l].out));
        m.b[l].resize(static_cast<size_t>(kLayers[l].out));
        for (float& v : m.w[l]) v = u(rng);
        for (float& v : m.b[l]) v = u(rng) * 0.5f;
    }
    return m;
}

uint64_t layer_offset(int l) {
    uint64_t off = kHeader;
    for (int i = 0; i < l; i++) off += static_cast<uint64_t>((kLayers[i].in + 1) * kLayers[i].out) * sizeof(float);
    return off;
}

void write_weights(const std::string& path, const Weights& m) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    std::vector<char> header(kHeader, '\0');
    std::snprintf(header.data(), header.size(), "mlp_server external data: 2 layers, D=%lld H=%lld",
                  static_cast<long long>(D), static_cast<long long>(H));
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (int l = 0; l < 2; l++) {
        f.write(reinterpret_cast<const char*>(m.w[l].data()), static_cast<std::streamsize>(m.w[l].size() * 4));
        f.write(reinterpret_cast<const char*>(m.b[l].data()), static_cast<std::streamsize>(m.b[l].size() * 4));
    }
    if (!f) throw std::runtime_error("cannot write " + path);
}

// reference: y = tanh(relu(x·W1 + b1)·W2 + b2) for each of rows rows of x, in double.
std::vector<float> reference(const Weights& m, const std::vector<float>& x, int64_t rows) {
    std::vector<float> y(static_cast<size_t>(rows * D));
    std::vector<double> h(H);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < H; j++) {
            double acc = m.b[0][j];
            for (int64_t k = 0; k < D; k++) acc += static_cast<double>(x[r * D + k]) * m.w[0][k * H + j];
            h[j] = acc > 0 ? acc : 0;
        }
        for (int64_t j = 0; j < D; j++) {
            double acc = m.b[1][j];
            for (int64_t k = 0; k < H; k++) acc += h[k] * m.w[1][k * D + j];
            y[r * D + j] = static_cast<float>(std::tanh(acc));
        }
    }
    return y;
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0;
    for (size_t i = 0; i < want.size(); i++) {
        double e = std::fabs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
        if (!(e <= worst)) worst = e;  // a NaN makes it NaN
    }
    return worst;
}

// The kernels of one MLP step over rows rows.
struct Step {
    Shape x, w1, b1, h, w2, b2, y;
    Kernel mm1, add1, relu, mm2, add2, tanh_;
    Step(const Provider& p, int64_t rows)
        : x{{rows, D}}, w1{{D, H}}, b1{{H}}, h{{rows, H}}, w2{{H, D}}, b2{{D}}, y{{rows, D}} {
        mm1 = kernel(p, "MatMul", {&x, &w1});
        add1 = kernel(p, "Add", {&h, &b1});
        relu = kernel(p, "Relu", {&h});
        mm2 = kernel(p, "MatMul", {&h, &w2});
        add2 = kernel(p, "Add", {&y, &b2});
        tanh_ = kernel(p, "Tanh", {&y});
    }
    std::vector<CudaEpKernel> all() const {
        return {mm1.get(), add1.get(), relu.get(), mm2.get(), add2.get(), tanh_.get()};
    }
};

// Scratch activations of one step.
struct Activations {
    Buffer h0, h1, h2, y0, y1;
    Activations(const Provider& p, int64_t rows) {
        h0 = alloc(p, static_cast<size_t>(rows * H * 4));
        h1 = alloc(p, static_cast<size_t>(rows * H * 4));
        h2 = alloc(p, static_cast<size_t>(rows * H * 4));
        y0 = alloc(p, static_cast<size_t>(rows * D * 4));
        y1 = alloc(p, static_cast<size_t>(rows * D * 4));
    }
};

// layer_1 and layer_2 queue one layer of a step; the weights live in memory `w` (a buffer or a
// paged weight) as [W; b].
void layer_1(const Step& s, const Activations& a, uint64_t x, uint64_t w) {
    run(s.mm1, {s.x.on(x), s.w1.on(w)}, s.h.on(a.h0.get()));
    run(s.add1, {s.h.on(a.h0.get()), s.b1.on(w, static_cast<uint64_t>(D * H * 4))}, s.h.on(a.h1.get()));
    run(s.relu, {s.h.on(a.h1.get())}, s.h.on(a.h2.get()));
}

void layer_2(const Step& s, const Activations& a, uint64_t w, uint64_t y) {
    run(s.mm2, {s.h.on(a.h2.get()), s.w2.on(w)}, s.y.on(a.y0.get()));
    run(s.add2, {s.y.on(a.y0.get()), s.b2.on(w, static_cast<uint64_t>(H * D * 4))}, s.y.on(a.y1.get()));
    run(s.tanh_, {s.y.on(a.y1.get())}, s.y.on(y));
}

struct Args {
    std::string backend, weights;
    int tokens = 32;
    int prompt = 16;
};

Args parse(int argc, char** argv) {
    Args a;
    const char* env = std::getenv("CUDAEP_TEST_BACKEND");
    a.backend = (env != nullptr && *env != '\0') ? env : "auto";
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error(k + " needs a value");
            return argv[++i];
        };
        if (k == "--backend") a.backend = value();
        else if (k == "--weights") a.weights = value();
        else if (k == "--tokens") a.tokens = std::stoi(value());
        else if (k == "--prompt") a.prompt = std::stoi(value());
        else throw std::runtime_error("unknown argument " + k + " (see the comment at the top of main.cpp)");
    }
    if (a.tokens < 1 || a.prompt < 1) throw std::runtime_error("--tokens and --prompt must be positive");
    return a;
}

int serve(const Args& args) {
    uint32_t abi = 0;
    const char* version = nullptr;
    CK(CudaEpGetVersion(&abi, &version));
    if (abi < CUDAEP_ABI_VERSION) throw std::runtime_error("libcudaep is older than its header");

    Provider prov;
    {
        Options o;
        CK(CudaEpCreateOptions(o.out()));
        CK(CudaEpSetOption(o.get(), "backend", args.backend.c_str()));
        CK(CudaEpSetOption(o.get(), "prefill_double_buffer", "true"));
        // The largest layer image, (in + 1) × out floats: the slots are reserved at this size.
        uint64_t slot = 0;
        for (const LayerDims& d : kLayers) slot = std::max(slot, static_cast<uint64_t>((d.in + 1) * d.out) * 4);
        CK(CudaEpSetOption(o.get(), "residency_slot_bytes", std::to_string(slot).c_str()));
        CK(CudaEpCreateProvider(o.get(), prov.out()));
    }
    char backend[16], device[256];
    size_t needed = 0;
    CK(CudaEpProviderGetBackendName(prov.get(), backend, sizeof backend, &needed));
    CK(CudaEpProviderGetDeviceName(prov.get(), device, sizeof device, &needed));
    std::printf("mlp_server: cudaep %s (ABI %u), backend %s, device %s\n", version, abi, backend, device);
    if (std::strcmp(backend, "sim") == 0) {
        std::printf("  (simulated device: outputs are checked, timings are not GPU performance)\n");
    }

    // 1. The weights, as an external-data file.
    Weights model = make_weights(2024);
    std::string path = args.weights;
    bool temporary = path.empty();
    if (temporary) {
        const char* tmp = std::getenv("TMPDIR");
        path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/mlp_server-" + std::to_string(::getpid()) +
               ".onnx.data";
    }
    write_weights(path, model);
    uint64_t mapping = 0;
    auto t0 = std::chrono::steady_clock::now();
    CK(CudaEpOpenExternalData(prov.get(), path.c_str(), &mapping));  // registers the file too
    double open_ms = ms_since(t0);
    LazyWeight lazy[2];
    for (int l = 0; l < 2; l++) {
        const LayerDims d = kLayers[l];
        uint64_t off = layer_offset(l), wbytes = static_cast<uint64_t>(d.in * d.out) * 4;
        CudaEpRegion regions[2] = {{mapping, off, wbytes}, {mapping, off + wbytes, static_cast<uint64_t>(d.out) * 4}};
        int64_t shape[2] = {d.in + 1, d.out};
        CudaEpWeightSpec spec{};
        spec.boundary = CUDAEP_BOUNDARY_MATMUL;
        spec.dtype = CUDAEP_DTYPE_FLOAT32;
        spec.rank = 2;
        spec.shape = shape;
        spec.regions = regions;
        spec.num_regions = 2;
        CK(CudaEpCreateLazyWeight(prov.get(), &spec, lazy[l].out()));
    }

    // 2. Prefill over the prompt, the weights streamed one layer ahead of compute.
    const int64_t P = args.prompt;
    std::vector<float> prompt(static_cast<size_t>(P * D));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : prompt) v = u(rng);
    Step pre(prov, P);
    Activations pact(prov, P);
    Buffer px = alloc(prov, prompt.size() * 4), py = alloc(prov, prompt.size() * 4);
    Buffer resident[2];  // the weights kept for decode, copied out of the slots
    Shape flat[2];
    Kernel identity[2];
    for (int l = 0; l < 2; l++) {
        size_t count = static_cast<size_t>((kLayers[l].in + 1) * kLayers[l].out);
        resident[l] = alloc(prov, count * 4);
        flat[l] = Shape{{static_cast<int64_t>(count)}};
        identity[l] = kernel(prov, "Identity", {&flat[l]});
    }
    CK(CudaEpCopyToDevice(px.get(), 0, prompt.data(), prompt.size() * 4));
    // Warm-up, as a server does when it loads a model: the first GEMM loads its kernels. It
    // reads the resident buffers before they hold weights; its outputs are overwritten below.
    t0 = std::chrono::steady_clock::now();
    layer_1(pre, pact, px.get(), resident[0].get());
    layer_2(pre, pact, resident[1].get(), py.get());
    run(identity[0], {flat[0].on(resident[0].get())}, flat[0].on(resident[0].get()));
    run(identity[1], {flat[1].on(resident[1].get())}, flat[1].on(resident[1].get()));
    CK(CudaEpForceSynchronize(prov.get()));
    double warmup_ms = ms_since(t0);

    int routed = 0;
    auto prefetch = [&](int l) {
        CudaEpDecline d{};
        d.struct_size = sizeof d;
        CK(CudaEpPrefetchWeight(prov.get(), static_cast<uint64_t>(l), lazy[l].get(), &d));
        routed += d.reason == CUDAEP_DECLINE_NONE;
        return d.reason == CUDAEP_DECLINE_NONE;
    };
    // One prefill; keep copies each paged layer into its resident buffer for decode.
    auto prefill = [&](bool keep) {
        routed = 0;
        bool paged[2] = {prefetch(0), false};
        for (int l = 0; l < 2; l++) {
            if (l + 1 < 2) paged[l + 1] = prefetch(l + 1);  // N+1 before consuming N
            const LayerDims d = kLayers[l];
            size_t count = static_cast<size_t>((d.in + 1) * d.out);
            PagedWeight pw;
            uint64_t weights = resident[l].get();
            if (paged[l]) {
                CK(CudaEpPageWeight(prov.get(), static_cast<uint64_t>(l), pw.out()));
                weights = pw.get();
            } else {  // declined: load the layer the ordinary way
                std::vector<float> img(model.w[l]);
                img.insert(img.end(), model.b[l].begin(), model.b[l].end());
                CK(CudaEpCopyToDevice(resident[l].get(), 0, img.data(), count * 4));
            }
            if (l == 0) layer_1(pre, pact, px.get(), weights);
            else layer_2(pre, pact, weights, py.get());
            if (paged[l]) {  // keep a resident copy for decode, then give the slot back
                if (keep) run(identity[l], {flat[l].on(pw.get())}, flat[l].on(resident[l].get()));
                pw.reset();
            }
        }
        return download(py, prompt.size());
    };
    t0 = std::chrono::steady_clock::now();
    std::vector<float> prefill_out = prefill(true);
    double prefill_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    std::vector<float> second_out = prefill(false);
    double second_ms = ms_since(t0);
    std::vector<float> want = reference(model, prompt, P);
    double prefill_err = std::max(max_rel_err(prefill_out, want), max_rel_err(second_out, want));

    // 3. Decode: capture the M=1 step once, replay it per token. The step ends by copying y into
    // x, so each replay computes the next token from the last.
    Step dec(prov, 1);
    Activations dact(prov, 1);
    Buffer x = alloc(prov, D * 4), y = alloc(prov, D * 4);
    std::vector<float> state(prefill_out.end() - D, prefill_out.end());  // the prompt's last row
    CK(CudaEpCopyToDevice(x.get(), 0, state.data(), D * 4));
    CudaEpProviderStats before{};
    before.struct_size = sizeof before;
    CudaEpProviderStats after = before;

    t0 = std::chrono::steady_clock::now();
    std::vector<CudaEpKernel> ks = dec.all();
    std::vector<CudaEpBuffer> keep = {x.get(),       y.get(),        resident[0].get(), resident[1].get(),
                                      dact.h0.get(), dact.h1.get(),  dact.h2.get(),     dact.y0.get(),
                                      dact.y1.get()};
    CK(CudaEpBeginCapture(prov.get(), CUDAEP_SLOT_PRIMARY, 0, ks.data(), ks.size(), keep.data(), keep.size()));
    try {
        layer_1(dec, dact, x.get(), resident[0].get());
        layer_2(dec, dact, resident[1].get(), y.get());
        CK(CudaEpCopyBuffer(x.get(), 0, y.get(), 0, D * 4));
    } catch (...) {
        CudaEpReleaseStatus(CudaEpAbortCapture(prov.get(), CUDAEP_SLOT_PRIMARY, 0));
        throw;
    }
    CK(CudaEpEndCapture(prov.get(), CUDAEP_SLOT_PRIMARY, 0));
    double capture_ms = ms_since(t0);

    CK(CudaEpProviderGetStats(prov.get(), &before));
    double worst = 0;
    t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < args.tokens; t++) {
        CK(CudaEpReplay(prov.get(), CUDAEP_SLOT_PRIMARY, 0));
        std::vector<float> got = download(y, D);
        state = reference(model, state, 1);  // the CPU follows the same recurrence
        double e = max_rel_err(got, state);
        if (!(e <= worst)) worst = e;
        state = got;  // continue from the device's token, as the graph does
    }
    double token_us = ms_since(t0) * 1000.0 / args.tokens;
    const int back_to_back = 4 * args.tokens;
    t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < back_to_back; t++) CK(CudaEpReplay(prov.get(), CUDAEP_SLOT_PRIMARY, 0));
    CK(CudaEpForceSynchronize(prov.get()));
    double replay_us = ms_since(t0) * 1000.0 / back_to_back;
    CK(CudaEpProviderGetStats(prov.get(), &after));

    CudaEpResidencyStats rs{};
    rs.struct_size = sizeof rs;
    CK(CudaEpGetResidencyStats(prov.get(), &rs));
    CudaEpGraphStats gs{};
    gs.struct_size = sizeof gs;
    CK(CudaEpGetGraphStats(prov.get(), CUDAEP_SLOT_PRIMARY, 0, &gs));

    const double tol = 1e-3;
    bool ok = prefill_err <= tol && worst <= tol && after.device_allocs == before.device_allocs;
    std::printf("  model                      2-layer MLP, D=%lld H=%lld, weights %s%s\n", static_cast<long long>(D),
                static_cast<long long>(H), path.c_str(), temporary ? " (written now)" : "");
    std::printf("  weights open + register    %.2f ms; kernel warm-up %.2f ms\n", open_ms, warmup_ms);
    std::printf("  prefill                    %d rows, %.3f ms (first), %.3f ms (second), %d/2 layers paged one ahead "
                "(%llu zero-copy, %llu staged), max rel err %.1e\n",
                args.prompt, prefill_ms, second_ms, routed, static_cast<unsigned long long>(rs.zero_copy_layers),
                static_cast<unsigned long long>(rs.staging_layers + rs.fallback_layers), prefill_err);
    std::printf("  decode capture             %.2f ms (%llu instantiation)\n", capture_ms,
                static_cast<unsigned long long>(gs.instantiations));
    std::printf("  decode, replay + read      %.1f us/token over %d tokens, max rel err %.1e\n", token_us, args.tokens,
                worst);
    std::printf("  replay only                %.1f us/replay (%d back-to-back)\n", replay_us, back_to_back);
    std::printf("  device allocations         %llu during decode\n",
                static_cast<unsigned long long>(after.device_allocs - before.device_allocs));
    std::printf("mlp_server: %s\n", ok ? "all outputs match the CPU reference" : "OUTPUTS DIFFER FROM THE REFERENCE");

    CK(CudaEpResetGraph(prov.get(), CUDAEP_SLOT_PRIMARY, 0, nullptr));
    if (temporary) std::remove(path.c_str());
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    int rc = 1;
    try {
        rc = serve(parse(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mlp_server: %s\n", e.what());
        return 1;
    }
    uint64_t live = 0;
    CudaEpStatus* st = CudaEpGetLiveHandleCount(&live);
    CudaEpReleaseStatus(st);
    if (live != 0) {
        std::fprintf(stderr, "mlp_server: %llu handles still live at exit\n", static_cast<unsigned long long>(live));
        return 1;
    }
    return rc;
}
