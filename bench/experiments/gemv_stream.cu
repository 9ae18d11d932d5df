// gemv_stream.cu: how fast can a one-row GEMV (y = a · B, B [K, N] row-major bfloat16, what
// cudaep's cuda/gemv.cu computes) stream B from the H200's memory, by how a block lays its loads
// over B's rows?
//
// cudaep's op bench launches one GEMV over the same matrix again and again: a matrix under the
// 50 MB L2 is then partly read from L2 (a 2048 x 8192 projection measured 0.82 of 4.8 TB/s
// alone, while gate and up together, 67 MB, measured 0.67). Here every launch reads another
// copy of the matrix (copies round-robin over at least 1 GiB), as a decode step reads each
// weight once. The split-K main loop of cuda/gemv.cu (8 warps, a lane 16 bytes of a row, 8 rows'
// loads in flight a warp, float32 sums, each block's partial sums stored) runs with W warps side
// by side on one row (a block's tile W x 256 columns, W x 512 contiguous bytes a row):
//
//   W=1  cudaep today: the 8 warps on 8 different rows, 512 bytes of each
//   W=2  4 rows of 1 KiB;  W=4  2 rows of 2 KiB;  W=8  1 row of 4 KiB per unrolled row
//
// and "read" is the ceiling: the same bytes read contiguously (16 bytes a lane, 8 loads in
// flight), summed. Grids: W=1 as gemv.go plans cudaep's (gemv_plans.h); the wider tiles with
// its targets, about GEMV_PLAN_BLOCKS_PER_SM blocks an SM and chunks of whole steps of
// GEMV_PLAN_ROW_STEP / W rows, but not its cap of GEMV_PLAN_MAX_CHUNKS chunks.
//
// Then a decode layer's four GEMVs in order (q+k+v, o, gate+up, down), W=1, each launch
// prefetching into L2 (prefetch.global.L2, after its main loop) the first 0–32 MB of the next
// launch's matrix: does the next launch's ramp shrink? And the same layer with a 10 us stand-in
// for the small kernels between q+k+v and o (small_ops) that prefetches o's weights and the first
// part of gate+up's while the memory is nearly idle. Last, the layer from a stream against the
// same launches captured into one CUDA graph, with and without 4 tiny kernels between the GEMVs.
//
//   nvcc -O3 -arch=sm_90 -o gemv_stream gemv_stream.cu && ./gemv_stream
#include "../../ep/kernels/cuda/common.cuh"

#include "experiment.cuh"

typedef Pack<bf16_t> Pack8;  // 16 bytes: 8 bfloat16s

// Block: 8 warps; warp w is column segment w % W of the tile and row group w / W (8 / W groups).
// A warp's unrolled step loads rows r + g + G*u (u < 8, G = 8 / W groups), its 512 bytes of each.
template <int W>
__global__ void __launch_bounds__(256, 4) gemv_w(const bf16_t* __restrict__ a, const bf16_t* __restrict__ b, float* __restrict__ part,
	u64 k, u64 n, u64 rows, const char* pf = nullptr, u64 pf_bytes = 0) {
	const int G = 8 / W;
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, seg = warp % W, g = warp / W;
	const u64 col = (u64)blockIdx.x * W * 256 + seg * 256 + lane * 8;
	const u64 r0 = (u64)blockIdx.y * rows, r1 = min(r0 + rows, k);
	const Pack8* p = (const Pack8*)(b + col);
	const u64 stride = n / 8;
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	u64 r = r0 + g;
	for (; r + (u64)G * 7 < r1; r += (u64)G * 8) {
		Pack8 x[8];
#pragma unroll
		for (int u = 0; u < 8; ++u) x[u] = p[(r + (u64)G * u) * stride];
#pragma unroll
		for (int u = 0; u < 8; ++u) {
			const float av = to_float(a[r + G * u]);
#pragma unroll
			for (int j = 0; j < 8; ++j) acc[j] += av * to_float(x[u].v[j]);
		}
	}
	for (; r < r1; r += G) {
		const Pack8 x = p[r * stride];
		const float av = to_float(a[r]);
#pragma unroll
		for (int j = 0; j < 8; ++j) acc[j] += av * to_float(x.v[j]);
	}
	// Prefetch: the block's share of the next launch's first pf_bytes into L2, its main loop
	// done (one prefetch.global.L2 a 128-byte line).
	if (pf_bytes) {
		const u64 lines = pf_bytes / 128, threads = (u64)gridDim.x * gridDim.y * 256;
		for (u64 l = ((u64)blockIdx.y * gridDim.x + blockIdx.x) * 256 + threadIdx.x; l < lines; l += threads)
			asm volatile("prefetch.global.L2 [%0];" ::"l"(pf + l * 128));
	}
	// Each row group's sums: W = 8 stores per column directly; else add the groups in shared
	// memory first, as gemv.cu adds its warps.
	__shared__ float red[8 / W][W * 256];
#pragma unroll
	for (int j = 0; j < 8; ++j) red[g][seg * 256 + lane * 8 + j] = acc[j];
	__syncthreads();
	for (unsigned c = threadIdx.x; c < W * 256; c += 256) {
		float s = 0;
		for (int i = 0; i < G; ++i) s += red[i][c];
		part[(u64)blockIdx.y * n + (u64)blockIdx.x * W * 256 + c] = s;
	}
}

// read: the matrix's bytes contiguously, 8 packs in flight a lane, summed (one float a block).
__global__ void __launch_bounds__(256, 4) read_all(const Pack8* __restrict__ b, float* __restrict__ out, u64 packs) {
	float s = 0;
	const u64 per = (packs + gridDim.x - 1) / gridDim.x, p0 = (u64)blockIdx.x * per, p1 = min(p0 + per, packs);
	u64 p = p0 + threadIdx.x;
	for (; p + 7 * 256 < p1; p += 8 * 256) {
		Pack8 x[8];
#pragma unroll
		for (int u = 0; u < 8; ++u) x[u] = b[p + u * 256];
#pragma unroll
		for (int u = 0; u < 8; ++u) s += to_float(x[u].v[0]) + to_float(x[u].v[7]);
	}
	for (; p < p1; p += 256) s += to_float(b[p].v[3]);
	if (s == 12345.0f) out[blockIdx.x] = s;
}

// small_ops stands in for a decode layer's small kernels between its q+k+v and o projections
// (rotary, cache update, attention: latency-bound, the memory nearly idle): 48 blocks spinning
// for `cycles` clocks. Its threads first prefetch pf_bytes at pf into L2 (one
// prefetch.global.L2 a 128-byte line), the weights the next GEMVs read.
__global__ void small_ops(long long cycles, const char* pf, u64 pf_bytes) {
	const u64 lines = pf_bytes / 128, threads = (u64)gridDim.x * blockDim.x;
	for (u64 l = (u64)blockIdx.x * blockDim.x + threadIdx.x; l < lines; l += threads)
		asm volatile("prefetch.global.L2 [%0];" ::"l"(pf + l * 128));
	const long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
}

// tiny stands in for a decode layer's small kernels (rotary, cache update, attention: a few
// blocks, a few KB of activations): each thread reads and writes one float.
__global__ void tiny(float* x) {
	const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	x[i] = x[i] * 0.5f + 1.0f;
}

struct Shape { const char* name; u64 k, n; };

int main() {
	int sms = 0;
	CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	const Shape shapes[] = {
		{"qkv 2048x3072", 2048, 3072}, {"o 2048x2048", 2048, 2048}, {"gate+up 2048x16384", 2048, 16384},
		{"down 8192x2048", 8192, 2048}, {"lm head 2048x32000", 2048, 32000}};
	const u64 pool = 3ull << 30;  // copies round-robin over 3 GiB: nothing is read from L2 twice
	char* big;
	CHECK(cudaMalloc(&big, pool));
	CHECK(cudaMemset(big, 0x3c, pool));
	bf16_t* a;
	float* part;
	CHECK(cudaMalloc(&a, 16384 * 2));
	CHECK(cudaMemset(a, 0x3c, 16384 * 2));
	CHECK(cudaMalloc(&part, 256ull << 20));
	printf("# gemv_stream on %d SMs; us per launch (median of 7 rounds of all copies), share of 4.8 TB/s\n", sms);
	for (const Shape& s : shapes) {
		const u64 bytes = s.k * s.n * 2, copies = pool / bytes;
		printf("%-20s %7.1f MB x %3llu copies:", s.name, bytes / 1e6, copies);
		for (int v = 0; v < 5; ++v) {
			const int W = v == 4 ? 0 : 1 << v;
			if (W && s.n % (W * 256) != 0) {
				printf("   W=%d      -      ", W);
				continue;
			}
			const float t = median_us(0, copies, false, [&] {
				for (u64 c = 0; c < copies; ++c) {
					const bf16_t* b = (const bf16_t*)(big + c * bytes);
					if (!W) {
						read_all<<<4 * sms, 256>>>((const Pack8*)b, part, bytes / 16);
						continue;
					}
					const u64 tiles = s.n / (W * 256), step = GEMV_PLAN_ROW_STEP / W;
					u64 chunks, rows;
					if (W == 1) {
						const u64 ns[4] = {s.n, 0, 0, 0};
						const GemvPlan& plan = gemv_plan(s.k, ns, sizeof(bf16_t), sms);
						chunks = plan.chunks;
						rows = plan.rows;
					} else {
						chunks = std::max<u64>(1, std::min<u64>((u64)GEMV_PLAN_BLOCKS_PER_SM * sms / tiles, s.k / step));
						rows = (s.k + chunks - 1) / chunks;
						rows = (rows + step - 1) / step * step;
						chunks = (s.k + rows - 1) / rows;
					}
					const dim3 grid(tiles, chunks);
					switch (W) {
					case 1: gemv_w<1><<<grid, 256>>>(a, b, part, s.k, s.n, rows); break;
					case 2: gemv_w<2><<<grid, 256>>>(a, b, part, s.k, s.n, rows); break;
					case 4: gemv_w<4><<<grid, 256>>>(a, b, part, s.k, s.n, rows); break;
					case 8: gemv_w<8><<<grid, 256>>>(a, b, part, s.k, s.n, rows); break;
					}
				}
			});
			printf("   %s%d %6.2f %.3f", W ? "W=" : "read", W, t, bytes / (t * 1e-6) / 4.8e12);
		}
		printf("\n");
	}

	// A decode layer's GEMVs in order (q+k+v, o, gate+up, down; every matrix its own copy,
	// layers round-robin over the pool), W=1, each launch prefetching the first pf bytes of the
	// next launch's matrix into L2 after its main loop (pf 0: none, as cudaep today).
	const Shape seq[4] = {shapes[0], shapes[1], shapes[2], shapes[3]};
	u64 layer_bytes = 0;
	for (const Shape& s : seq) layer_bytes += s.k * s.n * 2;
	const u64 layers = pool / layer_bytes;
	// layer_pass queues every layer's four GEMVs in order on st, each launch reading its own copy
	// of its matrix (layers round-robin over the pool) and prefetching the first pf bytes of the
	// next launch's matrix (0: none); after(i, next) queues what follows GEMV i of a layer (next:
	// the next matrix).
	auto layer_pass = [&](cudaStream_t st, u64 pf, auto after) {
		const char* at = big;
		for (u64 l = 0; l < layers; ++l) {
			for (int i = 0; i < 4; ++i) {
				const Shape& s = seq[i];
				const u64 bytes = s.k * s.n * 2;
				const u64 next_bytes = i < 3 ? seq[i + 1].k * seq[i + 1].n * 2 : (l + 1 < layers ? seq[0].k * seq[0].n * 2 : 0);
				const u64 ns[4] = {s.n, 0, 0, 0};
				const GemvPlan& plan = gemv_plan(s.k, ns, sizeof(bf16_t), sms);
				gemv_w<1><<<dim3(plan.tiles, plan.chunks), 256, 0, st>>>(a, (const bf16_t*)at, part, s.k, s.n, plan.rows, at + bytes,
					std::min(pf, next_bytes));
				at += bytes;
				after(i, at);
			}
		}
	};
	printf("# layers: q+k+v, o, gate+up, down = %.1f MB, %llu layers round-robin; us per layer, share of 4.8 TB/s\n",
		layer_bytes / 1e6, layers);
	for (u64 pf : {0ull, 2ull << 20, 4ull << 20, 8ull << 20, 16ull << 20, 32ull << 20}) {
		const float t = median_us(0, layers, false, [&] { layer_pass(0, pf, [](int, const char*) {}); });
		printf("prefetch %5.1f MB: %7.2f us a layer, %.3f of 4.8 TB/s\n", pf / 1048576.0, t, layer_bytes / (t * 1e-6) / 4.8e12);
	}

	// The layer again with the small kernels between q+k+v and o (small_ops, 10 us), which
	// prefetch the o projection's weights and the first part of gate+up's (pf past o's 8.4 MB).
	int clock_khz = 0;
	CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	const long long cycles = (long long)clock_khz * 10 / 1000;  // 10 us
	printf("# layers with 10 us of small kernels after q+k+v that prefetch o's weights and the first part of gate+up's\n");
	for (long long extra : {-1ll, 0ll, 8ll << 20, 16ll << 20, 24ll << 20, 32ll << 20}) {
		const u64 o_bytes = seq[1].k * seq[1].n * 2;
		const float t = median_us(0, layers, false, [&] {
			layer_pass(0, 0, [&](int i, const char* next) {
				if (i == 0) small_ops<<<48, 128>>>(cycles, next, extra < 0 ? 0 : o_bytes + extra);
			});
		});
		if (extra < 0) printf("no prefetch:                 %7.2f us a layer (10 us of it the small kernels)\n", t);
		else printf("prefetch o + %4.1f MB of gate+up: %7.2f us a layer\n", extra / 1048576.0, t);
	}

	// The layer's four GEMVs again (and, with tiny, 3 tiny kernels after q+k+v and 1 after
	// gate+up, as a decode layer's rotary, cache update, attention and SiLU), launched on a stream
	// of their own, and captured into one CUDA graph and replayed, as cudaep runs a decode step.
	cudaStream_t st;
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	float* act;
	CHECK(cudaMalloc(&act, 64 * 128 * sizeof(float)));
	CHECK(cudaMemset(act, 0, 64 * 128 * sizeof(float)));
	printf("# the layer from a stream and from a CUDA graph: us per layer, share of 4.8 TB/s (GEMV bytes only)\n");
	for (int graph = 0; graph < 2; ++graph) {
		for (int with_tiny = 0; with_tiny < 2; ++with_tiny) {
			const float t = median_us(st, layers, graph, [&] {
				layer_pass(st, 0, [&](int i, const char*) {
					const int tinies = !with_tiny ? 0 : i == 0 ? 3 : i == 2 ? 1 : 0;
					for (int t = 0; t < tinies; ++t) tiny<<<64, 128, 0, st>>>(act);
				});
			});
			printf("%-6s %-26s %7.2f us a layer, %.3f of 4.8 TB/s\n", graph ? "graph" : "stream",
				with_tiny ? "4 GEMVs + 4 tiny kernels" : "4 GEMVs", t, layer_bytes / (t * 1e-6) / 4.8e12);
		}
	}
	return 0;
}
