// experiment.cuh: what the experiments beside it share: CHECK, the timing of a step
// (median_us), the 1B Llama layer's projections and, after gemv.cu, the launch of its kernels
// as gemv.go plans them (gemv_plans.h, generated from the library's planning). Each .cu here
// includes it.
#pragma once

#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemv_plans.h"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

// Proj is one projection of a decode layer: K, its group's N_i (0 past the group: q, k and v
// are one group, gate and up another) and the prologue the decode step computes its row with
// (gemv.cu's GEMV_PLAIN, GEMV_RMSNORM or GEMV_SILU).
struct Proj {
	const char* name;
	unsigned long long k;
	unsigned long long n[4];
	int mode;
	unsigned long long bytes() const { return k * (n[0] + n[1] + n[2] + n[3]) * 2; }
};

// group_pointers lays p's matrices (bfloat16, T's size) out one after the other from w into b
// and their outputs 8192 elements apart from y into ys; null past the group.
template <typename T>
static void group_pointers(const Proj& p, const char* w, T* y, const T* b[4], T* ys[4]) {
	for (int i = 0; i < 4; ++i) {
		b[i] = nullptr;
		ys[i] = nullptr;
		if (!p.n[i]) continue;
		b[i] = (const T*)w;
		ys[i] = y + i * 8192;
		w += p.k * p.n[i] * sizeof(T);
	}
}

#ifdef GEMV_RMSNORM
// llama_layer is a decode layer of the 1B Llama (hidden 2048, MLP 8192, 8 key/value heads of
// 64) as four GEMV launches, in the step's order.
static const Proj llama_layer[4] = {
	{"q+k+v", 2048, {2048, 512, 512, 0}, GEMV_RMSNORM},
	{"o", 2048, {2048, 0, 0, 0}, GEMV_PLAIN},
	{"gate+up", 2048, {8192, 8192, 0, 0}, GEMV_RMSNORM},
	{"down", 8192, {2048, 0, 0, 0}, GEMV_SILU},
};

// GemvScratch is the split-K workspace gemv.cu's kernels take: room for the partial sums and a
// counter per tile, zeroed once (every launch leaves its counters zero).
struct GemvScratch {
	float* partials;
	unsigned* counters;
	GemvScratch() {
		CHECK(cudaMalloc(&partials, 32ull << 20));
		CHECK(cudaMalloc(&counters, 4096 * 4));
		CHECK(cudaMemset(counters, 0, 4096 * 4));
	}
};

// The row a GEMV launch multiplies: a, and what its prologue reads (gemv.cu: a2, gamma, and sum
// where the rmsnorm prologue stores a + a2).
struct GemvRow {
	const bf16_t *a, *a2, *gamma;
	bf16_t* sum;
};

// launch_gemv queues gemv.cu's bfloat16 kernel for prologue mode (GEMV_PLAIN, GEMV_RMSNORM or
// GEMV_SILU) over p's matrices at w, outputs from y, as gemv.go launches it on a device of sms
// SMs (gemv_plan and gemv_kernel_bf16), and returns the launch's error.
static cudaError_t launch_gemv(cudaStream_t st, int sms, const GemvScratch& s, const Proj& p, int mode, const char* w,
	bf16_t* y, const GemvRow& row) {
	const GemvPlan& plan = gemv_plan(p.k, p.n, sizeof(bf16_t), sms);
	const bf16_t* b[4];
	bf16_t* ys[4];
	group_pointers(p, w, y, b, ys);
	const auto fn = gemv_kernel_bf16(mode);
	fn<<<dim3(plan.tiles, plan.chunks), GEMV_THREADS, 0, st>>>(row.a, s.partials, s.counters, p.k, plan.rows, ys[0], ys[1],
		ys[2], ys[3], b[0], b[1], b[2], b[3], p.n[0], p.n[1], p.n[2], p.n[3], mode == GEMV_PLAIN ? nullptr : row.a2,
		mode == GEMV_RMSNORM ? row.gamma : nullptr, mode == GEMV_RMSNORM ? row.sum : nullptr, 1e-5f);
	return cudaGetLastError();
}
#endif


// median_us times work, which queues on st (0: the legacy stream), in 8 rounds and returns the
// median of the last 7 (the first warms up) in us, divided by per. With graph, work is captured
// once into a CUDA graph (st must be a stream of its own) and each round replays it.
template <typename F>
static float median_us(cudaStream_t st, double per, bool graph, F work) {
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	cudaGraphExec_t exec = nullptr;
	if (graph) {
		cudaGraph_t g;
		CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
		work();
		CHECK(cudaStreamEndCapture(st, &g));
		CHECK(cudaGraphInstantiate(&exec, g, 0));
		CHECK(cudaGraphDestroy(g));
	}
	std::vector<float> us;
	for (int round = 0; round < 8; ++round) {
		CHECK(cudaEventRecord(e0, st));
		if (exec) CHECK(cudaGraphLaunch(exec, st));
		else work();
		CHECK(cudaEventRecord(e1, st));
		CHECK(cudaEventSynchronize(e1));
		float ms;
		CHECK(cudaEventElapsedTime(&ms, e0, e1));
		if (round) us.push_back(ms * 1000 / per);
	}
	CHECK(cudaGetLastError());
	if (exec) CHECK(cudaGraphExecDestroy(exec));
	CHECK(cudaEventDestroy(e0));
	CHECK(cudaEventDestroy(e1));
	std::sort(us.begin(), us.end());
	return us[us.size() / 2];
}
