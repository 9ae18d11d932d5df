// pdl_layer.cu: does programmatic dependent launch (PDL) pay on a Llama-style decode step?
//
// One CUDA graph holds a 1B decoder's decode step built from cudaep's GEMV (cuda/gemv.cu's
// structure: 256-column tiles, 8 warps, 8 rows of loads in flight, split K with partials and
// counters) and stand-ins for the small kernels around it (RMSNorm of one row, an attention-like
// kernel over a 128-position cache, SiLU-mul): per layer norm, qkv (3072 columns), attention,
// o (2048), norm, gate+up (16384), silu-mul, down (8192 x 2048); 16 layers, a final norm and the
// LM head (2048 x 32000), bfloat16. Three arms replay the same step:
//
//   plain    every kernel launched as usual (what cudaep does today);
//   pdl      every kernel launched with the programmatic-serialization attribute; each waits
//            (griddepcontrol.wait) before it reads anything an earlier kernel wrote and lets its
//            dependents launch (griddepcontrol.launch_dependents) at its start;
//   pdl+pre  as pdl, and each GEMV block loads its first 8 rows of weights before it waits.
//
// Each GEMV runs the grid gemv.go plans for cudaep's GEMV of its shape (gemv_plans.h); the
// storage types and conversions are the library's (common.cuh: bfloat16 rounded to nearest
// even on store).
// Prints ms per step and the share of 4.8 TB/s the step's weight bytes are. Build and run:
//   nvcc -O3 -arch=sm_90 -o pdl_layer pdl_layer.cu -lcuda && ./pdl_layer
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cstring>

#include "../../ep/kernels/cuda/common.cuh"

#include "gemv_plans.h"

typedef Pack<bf16_t> Pack8;  // 16 bytes: 8 bfloat16s

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_go() { asm volatile("griddepcontrol.launch_dependents;"); }

#define CK(x) do { cudaError_t ck_ = (x); if (ck_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(ck_)); exit(1); } } while (0)

#define THREADS 256
#define WARPS 8
#define UNROLL 8
#define TC 256

// mode: 0 plain; 1 pdl, trigger at the start; 2 as 1 with the weight prefetch before the wait;
// 3 prefetch, trigger after the main loop; 4 no prefetch, trigger after the main loop.
template <int MODE>
__global__ void __launch_bounds__(THREADS, 4) gemv(const bf16_t* a, float* partials, unsigned* counters, u64 k, u64 rows,
	bf16_t* y, const bf16_t* b, u64 n) {
	__shared__ float red[WARPS * TC];
	__shared__ unsigned last;
	if (MODE == 1 || MODE == 2) pdl_go();
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const u64 chunk = blockIdx.y, tile = blockIdx.x;
	const u64 col0 = tile * TC + (u64)lane * 8;
	const u64 r0 = chunk * rows, r1 = r0 + rows < k ? r0 + rows : k;
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	const u64 stride = n / 8;
	const Pack8* p = (const Pack8*)(b + col0);
	u64 r = r0 + warp;
	Pack8 x[UNROLL];
	bool pre = false;
	if ((MODE == 2 || MODE == 3) && col0 < n && r + (UNROLL - 1) * WARPS < r1) {
#pragma unroll
		for (int u = 0; u < UNROLL; ++u) x[u] = p[(r + u * WARPS) * stride];
		pre = true;
	}
	if (MODE) pdl_wait();
	if (col0 < n) {
		for (; r + (UNROLL - 1) * WARPS < r1; r += UNROLL * WARPS) {
			float av[UNROLL];
			if (!pre) {
#pragma unroll
				for (int u = 0; u < UNROLL; ++u) x[u] = p[(r + u * WARPS) * stride];
			}
			pre = false;
#pragma unroll
			for (int u = 0; u < UNROLL; ++u) av[u] = to_float(a[r + u * WARPS]);
#pragma unroll
			for (int u = 0; u < UNROLL; ++u)
#pragma unroll
				for (int j = 0; j < 8; ++j) acc[j] += av[u] * to_float(x[u].v[j]);
		}
		for (; r < r1; r += WARPS) {
			const Pack8 xx = p[r * stride];
			const float av = to_float(a[r]);
#pragma unroll
			for (int j = 0; j < 8; ++j) acc[j] += av * to_float(xx.v[j]);
		}
	}
	if (MODE >= 3) pdl_go();
#pragma unroll
	for (int j = 0; j < 8; ++j) red[warp * TC + lane * 8 + j] = acc[j];
	__syncthreads();
	const unsigned t = threadIdx.x;
	const u64 col = tile * TC + t;
	float sum = 0;
	for (int w = 0; w < WARPS; ++w) sum += red[w * TC + t];
	if (gridDim.y == 1) {
		if (col < n) y[col] = from_float<bf16_t>(sum);
		return;
	}
	const u64 ld = (u64)gridDim.x * TC;
	partials[chunk * ld + tile * TC + t] = sum;
	__threadfence();
	__syncthreads();
	if (t == 0) last = atomicAdd(&counters[tile], 1u) == gridDim.y - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	float total = 0;
	for (unsigned c = 0; c < gridDim.y; ++c) total += __ldcg(partials + c * ld + tile * TC + t);
	if (col < n) y[col] = from_float<bf16_t>(total);
	if (t == 0) counters[tile] = 0;
}

// One row of n: y = x * rsqrt(mean(x^2) + eps) * g (one block).
template <int MODE>
__global__ void rmsnorm(const bf16_t* x, const bf16_t* g, bf16_t* y, int n) {
	if (MODE) { pdl_go(); pdl_wait(); }
	__shared__ float s[THREADS / 32];
	float ss = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) { float v = to_float(x[i]); ss += v * v; }
	for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
	if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = ss;
	__syncthreads();
	float tot = 0;
	for (int w = 0; w < THREADS / 32; ++w) tot += s[w];
	const float inv = rsqrtf(tot / n + 1e-5f);
	for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = from_float<bf16_t>(to_float(x[i]) * inv * to_float(g[i]));
}

// Attention stand-in: 32 heads, each a block reading its kv head's 128 x 64 keys and values.
template <int MODE>
__global__ void attn(const bf16_t* q, const bf16_t* kv, bf16_t* o, int ctx) {
	if (MODE) { pdl_go(); pdl_wait(); }
	const int h = blockIdx.x, kvh = h / 4, d = threadIdx.x % 64, part = threadIdx.x / 64;
	__shared__ float acc[4][64];
	float s = 0;
	const float qd = to_float(q[h * 64 + d]);
	for (int t = part; t < ctx; t += 4) s += qd * to_float(kv[((size_t)kvh * ctx + t) * 64 + d]);
	acc[part][d] = s;
	__syncthreads();
	if (part == 0) o[h * 64 + d] = from_float<bf16_t>(acc[0][d] + acc[1][d] + acc[2][d] + acc[3][d]);
}

template <int MODE>
__global__ void silumul(const bf16_t* gu, bf16_t* y, int n) {
	if (MODE) { pdl_go(); pdl_wait(); }
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float g = to_float(gu[i]), u = to_float(gu[n + i]);
		y[i] = from_float<bf16_t>(g / (1 + __expf(-g)) * u);
	}
}

static void launch(cudaStream_t s, bool pdl, const void* fn, dim3 grid, dim3 block, void** args) {
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.stream = s;
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = pdl ? 1 : 0;
	CK(cudaLaunchKernelExC(&cfg, fn, args));
}

struct Gemv { u64 k, n; bf16_t* b; float* partials; unsigned* counters; dim3 grid; u64 rows; };

// plan is one GEMV of K x N bfloat16 weights (all bytes 0x3c) on sms SMs, its grid as gemv.go
// plans it (gemv_plan), with partials and zeroed counters of its own.
static Gemv plan(u64 k, u64 n, int sms) {
	Gemv g{k, n};
	const u64 ns[4] = {n, 0, 0, 0};
	const GemvPlan& p = gemv_plan(k, ns, sizeof(bf16_t), sms);
	const u64 tiles = p.tiles, chunks = p.chunks;
	g.rows = p.rows;
	g.grid = dim3(tiles, chunks);
	CK(cudaMalloc(&g.b, k * n * 2));
	CK(cudaMemset(g.b, 0x3c, k * n * 2));
	CK(cudaMalloc(&g.partials, chunks * tiles * TC * 4));
	CK(cudaMalloc(&g.counters, tiles * 4));
	CK(cudaMemset(g.counters, 0, tiles * 4));
	return g;
}

template <int MODE>
static void step(cudaStream_t s, std::vector<Gemv>& gs, bf16_t* h, bf16_t* t1, bf16_t* t2, bf16_t* big, bf16_t* kv, bf16_t* gam, bf16_t* logits, int layers) {
	const bool pdl = MODE != 0;
	auto gemv_l = [&](Gemv& g, bf16_t* a, bf16_t* y) {
		void* args[] = {&a, &g.partials, &g.counters, &g.k, &g.rows, &y, &g.b, &g.n};
		launch(s, pdl, (const void*)gemv<MODE>, g.grid, dim3(THREADS), args);
	};
	auto norm_l = [&](bf16_t* x, bf16_t* y) {
		int n = 2048;
		void* args[] = {&x, &gam, &y, &n};
		launch(s, pdl, (const void*)rmsnorm<MODE>, dim3(1), dim3(THREADS), args);
	};
	for (int l = 0; l < layers; ++l) {
		Gemv* L = &gs[l * 4];
		norm_l(h, t1);
		gemv_l(L[0], t1, big);  // qkv
		{
			int ctx = 128;
			bf16_t* kvl = kv + (size_t)l * 8 * 128 * 64;
			void* args[] = {&big, &kvl, &t2, &ctx};
			launch(s, pdl, (const void*)attn<MODE>, dim3(32), dim3(THREADS), args);
		}
		gemv_l(L[1], t2, t1);  // o
		norm_l(t1, t2);
		gemv_l(L[2], t2, big);  // gate+up
		{
			int n = 8192;
			void* args[] = {&big, &t1, &n};
			launch(s, pdl, (const void*)silumul<MODE>, dim3(32), dim3(THREADS), args);
		}
		gemv_l(L[3], t1, h);  // down
	}
	norm_l(h, t1);
	gemv_l(gs[layers * 4], t1, logits);
}

int main(int argc, char** argv) {
	const int layers = 16;
	int sms;
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	std::vector<Gemv> gs;
	double bytes = 0;
	for (int l = 0; l < layers; ++l) {
		u64 shapes[4][2] = {{2048, 3072}, {2048, 2048}, {2048, 16384}, {8192, 2048}};
		for (auto& sh : shapes) { gs.push_back(plan(sh[0], sh[1], sms)); bytes += 2.0 * sh[0] * sh[1]; }
	}
	gs.push_back(plan(2048, 32000, sms));
	bytes += 2.0 * 2048 * 32000;
	bf16_t *h, *t1, *t2, *big, *kv, *gam, *logits;
	CK(cudaMalloc(&h, 2048 * 2)); CK(cudaMalloc(&t1, 8192 * 2)); CK(cudaMalloc(&t2, 8192 * 2));
	CK(cudaMalloc(&big, 16384 * 2)); CK(cudaMalloc(&kv, (size_t)layers * 8 * 128 * 64 * 2));
	CK(cudaMalloc(&gam, 2048 * 2)); CK(cudaMalloc(&logits, 32000 * 2));
	CK(cudaMemset(h, 0x3c, 2048 * 2)); CK(cudaMemset(gam, 0x3f, 2048 * 2)); CK(cudaMemset(kv, 0x3c, (size_t)layers * 8 * 128 * 64 * 2));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	const int M = 5;
	const char* names[M] = {"plain", "pdl", "pdl+pre", "pre+late", "late"};
	cudaGraphExec_t ex[M];
	for (int m = 0; m < M; ++m) {
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		if (m == 0) step<0>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		if (m == 1) step<1>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		if (m == 2) step<2>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		if (m == 3) step<3>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		if (m == 4) step<4>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		CK(cudaStreamEndCapture(s, &g));
		CK(cudaGraphInstantiate(&ex[m], g, 0));
		CK(cudaGraphUpload(ex[m], s));
	}
	// The arms must compute the same logits.
	std::vector<unsigned short> ref(32000), got(32000);
	for (int m = 0; m < M; ++m) {
		CK(cudaMemset(h, 0x3c, 2048 * 2));
		CK(cudaGraphLaunch(ex[m], s));
		CK(cudaStreamSynchronize(s));
		CK(cudaMemcpy(m ? got.data() : ref.data(), logits, 64000, cudaMemcpyDeviceToHost));
		if (m && got != ref) printf("arm %s: logits differ from plain\n", names[m]);
	}
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
	const int reps = 50, rounds = 9;
	std::vector<float> t[M];
	for (int r = 0; r < rounds; ++r)
		for (int m = 0; m < M; ++m) {
			for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ex[m], s));
			CK(cudaEventRecord(e0, s));
			for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(ex[m], s));
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			float ms;
			CK(cudaEventElapsedTime(&ms, e0, e1));
			t[m].push_back(ms / reps);
		}
	printf("decode step, 16 layers + LM head, bf16, %.3f GB of weights, %d SMs; median of %d rounds of %d back-to-back replays\n",
		bytes / 1e9, sms, rounds, reps);
	float base = 0;
	for (int m = 0; m < M; ++m) {
		std::sort(t[m].begin(), t[m].end());
		float med = t[m][rounds / 2];
		if (!m) base = med;
		printf("%-8s %.4f ms/step (min %.4f max %.4f)  %.3f of 4.8 TB/s  ratio %.3f\n", names[m], med, t[m][0], t[m][rounds - 1],
			bytes / (med * 1e-3) / 4.8e12, med / base);
	}
	// Host time of one cuGraphLaunch in a decode loop (launch, then wait): the same executable
	// every step, or two executables of the same step alternated (a loop that swaps two sets of
	// cache buffers replays one graph per set).
	cudaGraphExec_t other;
	{
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		step<0>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		CK(cudaStreamEndCapture(s, &g));
		CK(cudaGraphInstantiate(&other, g, 0));
		CK(cudaGraphUpload(other, s));
	}
	for (int alt = 0; alt < 3; ++alt) {
		std::vector<double> lt;
		for (int i = 0; i < 200; ++i) {
			cudaGraphExec_t e = alt == 1 && (i & 1) ? other : ex[0];
			auto t0 = std::chrono::steady_clock::now();
			CK(cudaGraphLaunch(e, s));
			auto t1c = std::chrono::steady_clock::now();
			if (alt < 2) CK(cudaStreamSynchronize(s));
			if (i >= 20) lt.push_back(std::chrono::duration<double, std::micro>(t1c - t0).count());
		}
		CK(cudaStreamSynchronize(s));
		std::sort(lt.begin(), lt.end());
		const char* what[3] = {"same executable, wait after each", "two executables alternated, wait after each", "same executable, back to back"};
		printf("cuGraphLaunch host time, %zu kernels, %s: median %.1f us, p90 %.1f, min %.1f\n", (size_t)(16 * 8 + 2), what[alt], lt[lt.size() / 2], lt[lt.size() * 9 / 10], lt[0]);
	}
	// What makes a graph's launch cost grow with its nodes: the same step instantiated with node
	// priority, and with a 4 KiB device-to-device copy after every GEMV but the LM head (64 copy nodes), each
	// launched then waited for.
	for (int arm = 0; arm < 3; ++arm) {
		cudaGraph_t g;
		cudaGraphExec_t e;
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		if (arm < 2) {
			step<0>(s, gs, h, t1, t2, big, kv, gam, logits, layers);
		} else {
			for (int l = 0; l < layers * 4; ++l) {
				void* args[] = {&t1, &gs[l].partials, &gs[l].counters, &gs[l].k, &gs[l].rows, &big, &gs[l].b, &gs[l].n};
				launch(s, false, (const void*)gemv<0>, gs[l].grid, dim3(THREADS), args);
				CK(cudaMemcpyAsync(t2, big, 4096, cudaMemcpyDeviceToDevice, s));
			}
		}
		CK(cudaStreamEndCapture(s, &g));
		size_t nodes = 0;
		CK(cudaGraphGetNodes(g, nullptr, &nodes));
		CK(cudaGraphInstantiateWithFlags(&e, g, arm == 1 ? cudaGraphInstantiateFlagUseNodePriority : 0));
		CK(cudaGraphUpload(e, s));
		std::vector<double> lt;
		for (int i = 0; i < 120; ++i) {
			auto t0 = std::chrono::steady_clock::now();
			CK(cudaGraphLaunch(e, s));
			auto t1c = std::chrono::steady_clock::now();
			CK(cudaStreamSynchronize(s));
			if (i >= 20) lt.push_back(std::chrono::duration<double, std::micro>(t1c - t0).count());
		}
		std::sort(lt.begin(), lt.end());
		const char* what[3] = {"flags 0", "node priority", "GEMVs each followed by a D2D copy, flags 0"};
		printf("cuGraphLaunch host time, %zu nodes, %s: median %.1f us, p90 %.1f\n", nodes, what[arm], lt[lt.size() / 2], lt[lt.size() * 9 / 10]);
	}
	// Priorities: the step captured on a stream of the greatest priority (what cudaep's compute
	// stream has), instantiated with or without node priority, launched on that stream.
	{
		int least, greatest;
		CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
		cudaStream_t hi;
		CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
		for (int arm = 0; arm < 3; ++arm) {
			cudaGraph_t g;
			cudaGraphExec_t e;
			CK(cudaStreamBeginCapture(hi, cudaStreamCaptureModeThreadLocal));
			step<0>(hi, gs, h, t1, t2, big, kv, gam, logits, layers);
			CK(cudaStreamEndCapture(hi, &g));
			CK(cudaGraphInstantiateWithFlags(&e, g, arm == 1 ? cudaGraphInstantiateFlagUseNodePriority : 0));
			cudaStream_t on = arm == 2 ? s : hi;
			CK(cudaGraphUpload(e, on));
			std::vector<double> lt;
			for (int i = 0; i < 120; ++i) {
				auto t0 = std::chrono::steady_clock::now();
				CK(cudaGraphLaunch(e, on));
				auto t1c = std::chrono::steady_clock::now();
				CK(cudaStreamSynchronize(on));
				if (i >= 20) lt.push_back(std::chrono::duration<double, std::micro>(t1c - t0).count());
			}
			std::sort(lt.begin(), lt.end());
			const char* what[3] = {"captured on a priority-%d stream, flags 0, launched there", "captured on a priority-%d stream, node priority, launched there",
				"captured on a priority-%d stream, flags 0, launched on a default-priority stream"};
			char buf[200];
			snprintf(buf, sizeof buf, what[arm], greatest);
			printf("cuGraphLaunch host time, %s: median %.1f us, p90 %.1f\n", buf, lt[lt.size() / 2], lt[lt.size() * 9 / 10]);
		}
	}
	// A decode step's host input (8 bytes): from pageable memory then a stream synchronization,
	// against a copy into pinned staging, an async copy from it and an event (no wait).
	{
		long long* pageable = (long long*)malloc(8);
		long long* pinned;
		CK(cudaHostAlloc((void**)&pinned, 4096, 0));
		cudaEvent_t ev;
		CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
		for (int arm = 0; arm < 2; ++arm) {
			std::vector<double> lt;
			for (int i = 0; i < 200; ++i) {
				*pageable = i;
				auto t0 = std::chrono::steady_clock::now();
				if (arm == 0) {
					CK(cudaMemcpyAsync(h, pageable, 8, cudaMemcpyHostToDevice, s));
					CK(cudaStreamSynchronize(s));
				} else {
					CK(cudaEventSynchronize(ev));
					memcpy(pinned, pageable, 8);
					CK(cudaMemcpyAsync(h, pinned, 8, cudaMemcpyHostToDevice, s));
					CK(cudaEventRecord(ev, s));
				}
				auto t1c = std::chrono::steady_clock::now();
				CK(cudaStreamSynchronize(s));
				if (i >= 20) lt.push_back(std::chrono::duration<double, std::micro>(t1c - t0).count());
			}
			std::sort(lt.begin(), lt.end());
			printf("8-byte host input, %s: median %.1f us, p90 %.1f\n", arm ? "pinned staging + async copy + event" : "pageable async copy + stream sync",
				lt[lt.size() / 2], lt[lt.size() * 9 / 10]);
		}
	}
	return 0;
}
