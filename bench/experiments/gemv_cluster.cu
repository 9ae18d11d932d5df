// gemv_cluster.cu: can a thread-block cluster take the split-K reduction out of global memory?
//
// cudaep's GEMV (ep/kernels/cuda/gemv.cu, included as is: the baseline) splits K into up to 32
// chunks, each block stores its tile's partial sums in global memory, counts itself with one
// atomic, and the last block of the tile loads every chunk's partials back: after the last
// partial is stored, two round trips to L2 (the count, then the load). gemv_layer.cu measured
// them at 5.2-5.4 us of a layer's four launches (43.8-44.0 us against 38.6 with no reduction).
//
// Here the chunks of one tile are the blocks of one cluster (sm_90: at most 8 blocks, 16 with the
// non-portable size allowed): each block adds its warps' sums into shared memory, the cluster
// synchronizes (barrier.cluster, release/acquire), block rank 0 adds the chunks' sums from the
// other blocks' shared memory (mapa, ld.shared::cluster) in rank order and stores y, and a second
// cluster barrier keeps the other blocks' shared memory alive until it has. Fewer chunks per tile
// need more tiles to fill the GPU, so a tile here is L packs of 16 bytes wide (L = 8: 64 columns,
// one 128-byte line of a row; cudaep's is L = 32, 256 columns), 256/L rows a step of the block,
// 8 rows' loads in flight a thread, predicated so that a chunk of fewer rows still issues its
// loads together.
//
// Plain GEMVs only (no prologue), bfloat16, the 1B Llama layer's four launches (llama_layer) (q+k+v, o,
// gate+up, down), every launch reading its own copy of the weights, replayed from a graph, as
// gemv_layer.cu does; first each variant's y against the baseline's on random data.
//
//   nvcc -O3 -arch=sm_90 -o gemv_cluster gemv_cluster.cu && ./gemv_cluster
//
// Predicted before the run: the best variant streams the layer in 37-38 us (the 36.1 us bound
// of no reduction plus a few tenths of a microsecond a launch for the cluster's barriers and
// remote loads) against the baseline's 41.4.
// Measured on the H200 (bench/results/h200-2026-12-02-gemv-cluster.txt, two rounds alike): the
// baseline 42.83 / 42.90 us a layer; the best cluster variant (L = 8, at most 8 chunks) 44.37,
// the others 49.0-59.9. Every variant's y matched the baseline's (max |diff| 1.9e-6 of 0.31).
// Refuted: only gate+up (2 chunks of a 64-column tile) was faster, 18.86 against 19.42 us. With
// at most 8 or 16 chunks a tile, the projections with few columns get fewer or longer-running
// blocks: down (K = 8192) ran 256 blocks of 1024 rows in 12.92 us against the baseline's 10.99.
// The DSMEM reduction does not repay the memory parallelism it costs.
#include "../../ep/kernels/cuda/gemv.cu"

#include "experiment.cuh"

#include <cmath>
#include <cstring>

#define CL_UNROLL 8

// smem_addr is the shared-window address of p (a __shared__ variable of this block).
__device__ __forceinline__ unsigned smem_addr(const void* p) {
	unsigned a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

__device__ __forceinline__ unsigned cluster_rank() {
	unsigned r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}

__device__ __forceinline__ unsigned cluster_blocks() {
	unsigned n;
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
	return n;
}

// cluster_sync: every thread of every block of the cluster arrives (releasing its shared-memory
// stores) and waits for all (acquiring theirs).
__device__ __forceinline__ void cluster_sync() {
	asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// load_remote reads the float at shared address a of block rank r of the cluster.
__device__ __forceinline__ float load_remote(unsigned a, unsigned r) {
	unsigned ra;
	float v;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(r));
	asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
	return v;
}

template <int L>
__global__ void __launch_bounds__(256, 4) gemv_cluster(const bf16_t* __restrict__ a, u64 k, u64 rows, bf16_t* y0,
	bf16_t* y1, bf16_t* y2, bf16_t* y3, const bf16_t* b0, const bf16_t* b1, const bf16_t* b2, const bf16_t* b3, u64 n0,
	u64 n1, u64 n2, u64 n3) {
	constexpr int TCOL = L * 8;   // columns of a tile
	constexpr int RS = 256 / L;   // rows of a step of the block
	const u64 t0 = (n0 + TCOL - 1) / TCOL, t1 = t0 + (n1 + TCOL - 1) / TCOL, t2 = t1 + (n2 + TCOL - 1) / TCOL;
	u64 tile = blockIdx.x, n = n3;
	bf16_t* y = y3;
	const bf16_t* b = b3;
	if (tile < t0) {
		y = y0, b = b0, n = n0;
	} else if (tile < t1) {
		y = y1, b = b1, n = n1, tile -= t0;
	} else if (tile < t2) {
		y = y2, b = b2, n = n2, tile -= t1;
	} else {
		tile -= t2;
	}
	const unsigned t = threadIdx.x, cp = t % L, slot = t / L, warp = t / 32, lane = t % 32;
	const u64 col0 = tile * TCOL + cp * 8;
	const Pack<bf16_t>* p = (const Pack<bf16_t>*)(b + (col0 < n ? col0 : 0));
	const u64 stride = n / 8;
	const u64 r0 = (u64)blockIdx.y * rows, r1 = r0 + rows < k ? r0 + rows : k;
	float acc[8];
#pragma unroll
	for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
	for (u64 r = r0 + slot; r < r1; r += CL_UNROLL * RS) {
		Pack<bf16_t> x[CL_UNROLL];
		float av[CL_UNROLL];
#pragma unroll
		for (int u = 0; u < CL_UNROLL; ++u) {
			const u64 rr = r + (u64)u * RS;
			if (rr < r1) {
				x[u] = p[rr * stride];
				av[u] = to_float(a[rr]);
			} else {
#pragma unroll
				for (int j = 0; j < 8; ++j) x[u].v[j].bits = 0;
				av[u] = 0.0f;
			}
		}
#pragma unroll
		for (int u = 0; u < CL_UNROLL; ++u) {
#pragma unroll
			for (int j = 0; j < 8; ++j) acc[j] += av[u] * to_float(x[u].v[j]);
		}
	}
	// The warp's row slots (lane bits above log2 L), then the 8 warps in shared memory.
#pragma unroll
	for (int off = L; off < 32; off <<= 1) {
#pragma unroll
		for (int j = 0; j < 8; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
	}
	__shared__ float red[8][TCOL];
	__shared__ float part[TCOL];
	if (lane < L) {
#pragma unroll
		for (int j = 0; j < 8; ++j) red[warp][lane * 8 + j] = acc[j];
	}
	__syncthreads();
	const u64 col = tile * TCOL + t;
	if (t < TCOL) {
		float s = 0.0f;
#pragma unroll
		for (int w = 0; w < 8; ++w) s += red[w][t];
		part[t] = s;
		if (gridDim.y == 1 && col < n) y[col] = from_float<bf16_t>(s);
	}
	if (gridDim.y == 1) return;
	cluster_sync();
	if (cluster_rank() == 0 && t < TCOL) {
		const unsigned at = smem_addr(&part[t]), blocks = cluster_blocks();
		float s = 0.0f;
		for (unsigned c = 0; c < blocks; ++c) s += load_remote(at, c);
		if (col < n) y[col] = from_float<bf16_t>(s);
	}
	cluster_sync();
}

// A way of launching one projection: the baseline (cudaep's plain GEMV as gemv.go launches it:
// launch_gemv) or a cluster variant of tile width L and at most cmax chunks (a power of two,
// with gemv.go's targets: about GEMV_PLAN_BLOCKS_PER_SM blocks an SM, chunks of at least
// GEMV_PLAN_ROW_STEP rows).
struct Variant {
	const char* name;
	int l;     // 0: the baseline
	int cmax;
};

__global__ void fill_random(bf16_t* p, u64 n, unsigned seed) {
	GRID_STRIDE_LOOP(i, n) {
		unsigned h = (unsigned)i * 2654435761u ^ seed;
		h ^= h >> 15;
		h *= 2246822519u;
		h ^= h >> 13;
		p[i] = from_float<bf16_t>(((h & 0xffff) / 32768.0f - 1.0f) * 0.05f);
	}
}

static void init_random(bf16_t* p, u64 n, unsigned seed) {
	fill_random<<<1024, 256>>>(p, n, seed);
	CHECK(cudaGetLastError());
}

// bf16_host is a bfloat16's value on the host.
static float bf16_host(unsigned short b) {
	const unsigned u = (unsigned)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// launch_cluster queues the cluster variant of tile width L on p's weights at w; a cluster size
// the device cannot schedule comes back as the launch's error.
template <int L>
static cudaError_t launch_cluster(cudaStream_t st, const Proj& p, const bf16_t* a, const char* w, bf16_t* y, int cmax, int sms) {
	constexpr u64 TCOL = L * 8;
	u64 tiles = 0;
	for (u64 n : p.n) tiles += (n + TCOL - 1) / TCOL;
	u64 c = 1;
	while (c * 2 <= (u64)cmax && tiles * c * 2 <= (u64)GEMV_PLAN_BLOCKS_PER_SM * sms && p.k / (c * 2) >= GEMV_PLAN_ROW_STEP)
		c *= 2;
	const u64 rows = (p.k + c - 1) / c;
	const bf16_t* b[4];
	bf16_t* ys[4];
	group_pointers(p, w, y, b, ys);
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = dim3(tiles, c);
	cfg.blockDim = dim3(256);
	cfg.stream = st;
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = 1;
	at[0].val.clusterDim.y = c;
	at[0].val.clusterDim.z = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	return cudaLaunchKernelEx(&cfg, gemv_cluster<L>, a, p.k, rows, ys[0], ys[1], ys[2], ys[3], b[0], b[1], b[2], b[3], p.n[0],
		p.n[1], p.n[2], p.n[3]);
}

int main() {
	int sms = 0;
	CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CHECK(cudaFuncSetAttribute(gemv_cluster<8>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CHECK(cudaFuncSetAttribute(gemv_cluster<16>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CHECK(cudaFuncSetAttribute(gemv_cluster<32>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	const Variant variants[] = {
		{"baseline: cudaep's gemv.cu (L=32, split-K in global memory)", 0, 0},
		{"cluster L=8 (64 columns), chunks <= 8", 8, 8},
		{"cluster L=8 (64 columns), chunks <= 16", 8, 16},
		{"cluster L=16 (128 columns), chunks <= 16", 16, 16},
		{"cluster L=32 (256 columns), chunks <= 16", 32, 16},
	};
	const u64 pool = 3ull << 30;
	char* big;
	CHECK(cudaMalloc(&big, pool));
	init_random((bf16_t*)big, pool / 2, 1);
	bf16_t *a, *y, *yref;
	CHECK(cudaMalloc(&a, 8192 * 2));
	CHECK(cudaMalloc(&y, 4 * 8192 * 2));
	CHECK(cudaMalloc(&yref, 4 * 8192 * 2));
	init_random(a, 8192, 2);
	CHECK(cudaDeviceSynchronize());
	const GemvScratch scratch;
	cudaStream_t st;
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	auto launch = [&](const Variant& v, const Proj& p, const char* w, bf16_t* out) -> cudaError_t {
		if (v.l == 8) return launch_cluster<8>(st, p, a, w, out, v.cmax, sms);
		if (v.l == 16) return launch_cluster<16>(st, p, a, w, out, v.cmax, sms);
		if (v.l == 32) return launch_cluster<32>(st, p, a, w, out, v.cmax, sms);
		return launch_gemv(st, sms, scratch, p, GEMV_PLAIN, w, out, GemvRow{a, nullptr, nullptr, nullptr});
	};

	// Each variant's y against the baseline's, on the first copy of the weights.
	printf("# gemv_cluster on %d SMs; y of each variant against the baseline's (random weights in [-0.05, 0.05))\n", sms);
	std::vector<unsigned short> got(4 * 8192), want(4 * 8192);
	const int nv = sizeof(variants) / sizeof(variants[0]);
	std::vector<bool> runs(nv, true);
	for (int vi = 1; vi < nv; ++vi) {
		const Variant& v = variants[vi];
		float worst = 0.0f, top = 0.0f;
		for (const Proj& p : llama_layer) {
			CHECK(cudaMemset(y, 0xff, 4 * 8192 * 2));
			CHECK(cudaDeviceSynchronize());
			CHECK(launch(variants[0], p, big, yref));
			const cudaError_t e = launch(v, p, big, y);
			if (e != cudaSuccess) {
				printf("%-45s %s: launch failed: %s\n", v.name, p.name, cudaGetErrorString(e));
				runs[vi] = false;
				break;
			}
			CHECK(cudaStreamSynchronize(st));
			CHECK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
			CHECK(cudaMemcpy(want.data(), yref, want.size() * 2, cudaMemcpyDeviceToHost));
			for (int i = 0; i < 4 && p.n[i]; ++i) {
				for (u64 c = 0; c < p.n[i]; ++c) {
					const float g = bf16_host(got[i * 8192 + c]), w = bf16_host(want[i * 8192 + c]);
					worst = std::max(worst, std::fabs(g - w));
					top = std::max(top, std::fabs(w));
				}
			}
		}
		if (runs[vi]) printf("%-45s max |y - baseline| %.3g (largest |y| %.3g)\n", v.name, worst, top);
	}

	printf("# us a launch / a layer (median of 7 graph replays), share of 4.8 TB/s; every launch another copy of its weights\n");
	u64 layer_bytes = 0;
	for (const Proj& p : llama_layer) layer_bytes += p.bytes();
	const u64 layers = pool / layer_bytes;
	for (int round = 0; round < 2; ++round) {
		for (int vi = 0; vi < nv; ++vi) {
			const Variant& v = variants[vi];
			if (!runs[vi]) continue;
			printf("%-45s", v.name);
			for (const Proj& p : llama_layer) {
				const u64 copies = pool / p.bytes();
				const float t = median_us(st, copies, true, [&] {
					for (u64 c = 0; c < copies; ++c) CHECK(launch(v, p, big + c * p.bytes(), y));
				});
				printf("  %s %.2f", p.name, t);
			}
			const float t = median_us(st, layers, true, [&] {
				char* at = big;
				for (u64 l = 0; l < layers; ++l) {
					for (const Proj& p : llama_layer) {
						CHECK(launch(v, p, at, y));
						at += p.bytes();
					}
				}
			});
			printf("  | layer %.2f us, %.3f of peak\n", t, layer_bytes / (t * 1e-6) / 4.8e12);
		}
	}
	return 0;
}
