// GEMV kernels of package kernels: MatMuls with one row that share it, y_i[1,N_i] = a[1,K] ·
// B_i[K,N_i] for a group of up to four matrices B_i (one MatMul is a group of one; q, k and v
// projections of one hidden state are a group of three), each B_i row-major (ONNX's layout),
// float32, float16 and bfloat16 (suffixes f32, f16, bf16), accumulated in float32 and rounded
// once on store. gemv.go (gemvPlan) launches them when A has one row, sim_gemv.go mirrors them
// for the simulated device, with the same argument list:
//
//	cudaep_gemv[_<prologue>]_<t>(const T* a, float* partials, unsigned* counters, u64 k, u64 rows,
//	                T* y0, T* y1, T* y2, T* y3, const T* b0, …, const T* b3, u64 n0, …, u64 n3,
//	                const T* a2, const T* gamma, T* sum, float eps)
//
// A group of g < 4 matrices passes n_i = 0 (and null pointers) for i >= g.
//
// Prologues. The row a the matrices multiply may be computed by the kernel from what the
// graph's previous op would have read, so that op needs no launch of its own (a decode step's
// normalizations and gated SiLU are 2–4 µs launches over a few KB):
//
//   - none (cudaep_gemv_<t>): a as given; a2, gamma, sum and eps are unused.
//   - rmsnorm (cudaep_gemv_rmsnorm_<t>): the RMS normalization of h = a + a2 (a2 may be null:
//     h = a), a_r = round(h_r · inv · gamma_r) with inv = 1 / sqrt(mean(h²) + eps), rounded to
//     T as SimplifiedLayerNormalization's output would be; sum (may be null) receives round(h),
//     SkipSimplifiedLayerNormalization's fourth output. Every block sums the squares of the
//     whole row (K elements from L2) while its first rows of B are in flight; block (0, 0)
//     writes sum. sum must not overlap a, a2 or gamma.
//   - silu (cudaep_gemv_silu_<t>): a_r = round(a_r · sigmoid(a_r) · a2_r), cudaep.SiluMul's
//     element (with the fast exponential and division: gemv_silu).
//
// The product is memory-bound: every element of B is read once and used once, so the kernel
// is built to stream B at the memory's rate.
//
// Geometry. A lane loads 16 bytes of a row of B (V = 8 halves or 4 floats), a warp 32 such
// packs: TC = 32·V consecutive columns (256 halves, 128 floats) of one row, one 512-byte
// coalesced load. The group's column tiles are numbered one after the other (the tiles of
// B_0, then B_1's, …): gridDim.x is their sum, and blockIdx.x picks a matrix and a tile of it.
// A block of 256 threads (8 warps) owns one column tile and a chunk of `rows` rows of K
// (blockIdx.y); warp w takes rows w, w+8, w+16, … of the chunk and keeps GEMV_UNROLL (8) rows'
// loads in flight before it uses them (8 × 16 bytes a lane, 32 KiB a block), so that a few
// blocks per SM cover the memory latency. Each lane accumulates V float32 sums; the 8 warps'
// sums are added in shared memory, in warp order. Grouping matrices gives a launch the tiles
// of all of them: a 2048×512 projection alone has 2 tiles, too few to keep the GPU's memory
// busy however K is split.
//
// Split K. With few tiles (N small) a grid of tiles alone would leave most SMs idle, so K is
// split into gridDim.y chunks (gemv.go's gemvGeometry picks them: at most 4 blocks per SM,
// the residency __launch_bounds__ below guarantees, so the grid runs in one wave; at most 32
// chunks, of at least 64 rows each). Each block stores its tile's float32 partial sums
// in partials[chunk][gridDim.x·TC] (a Library scratch buffer: every launch overwrites the
// slots it reads, so nothing needs zeroing) and counts itself in counters[tile] (tile:
// blockIdx.x, numbered over the group) with arrive_last. The block that arrives last adds the
// chunks' partials in chunk order, converts and stores y, and puts the counter back to 0, so
// the next launch (or a CUDA graph's replay) finds it zeroed. The sum order is fixed, so
// results are bit-reproducible across runs and replays, which float atomics into a zeroed
// workspace would not be. With one chunk (gridDim.y == 1) the block stores y directly and
// never touches partials or counters (they may be 0 then).
//
// Requirements the Go side guarantees: every n_i a multiple of V (whole packs per row, so a
// lane's pack is either wholly inside a row or wholly past its end); gridDim.x the group's
// tiles; counters zero at launch for the first gridDim.x tiles when gridDim.y > 1; a block of
// 256 threads. A b_i that is not 16-byte aligned (a view, or a weight at an odd offset of a
// paged layer) is read with element loads, the same bytes in the same order.

#include "rowreduce.cuh"

#define GEMV_THREADS 256
#define GEMV_WARPS (GEMV_THREADS / 32)
#define GEMV_UNROLL 8
// GEMV_MIN_BLOCKS blocks stay resident per SM (at most 64 registers a thread).
#define GEMV_MIN_BLOCKS 4

// The prologues (see above).
#define GEMV_PLAIN 0
#define GEMV_RMSNORM 1
#define GEMV_SILU 2

// load_cg4 reads four floats at p from L2 (ld.global.cg: not from L1, which other blocks'
// partial stores do not keep coherent).
__device__ __forceinline__ void load_cg4(const float* p, float* v) {
	asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
		: "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
		: "l"(p)
		: "memory");
}

// gemv_row_inv is the rmsnorm prologue's reduction: 1 / sqrt(mean(h²) + eps) over the K
// elements of h = a + a2, summed by the block (every thread gets it), in 16-byte packs when K
// and the addresses allow; block (0, 0) also stores round(h) into sum when it is not null.
template <typename T>
__device__ __forceinline__ float gemv_row_inv(const T* a, const T* a2, T* sum, u64 k, float eps) {
	const int V = 16 / sizeof(T);
	__shared__ float scratch[GEMV_WARPS];
	const bool store = sum && blockIdx.x == 0 && blockIdx.y == 0;
	float s2 = 0.0f;
	if (k % V == 0 && aligned16(a, a2, sum)) {
		for (u64 p = threadIdx.x; p < k / V; p += GEMV_THREADS) {
			const Pack<T> x = ((const Pack<T>*)a)[p];
			Pack<T> y;
			if (a2) y = ((const Pack<T>*)a2)[p];
			Pack<T> o;
#pragma unroll
			for (int j = 0; j < V; ++j) {
				float h = to_float(x.v[j]);
				if (a2) h += to_float(y.v[j]);
				o.v[j] = from_float<T>(h);
				s2 += h * h;
			}
			if (store) ((Pack<T>*)sum)[p] = o;
		}
	} else {
		for (u64 j = threadIdx.x; j < k; j += GEMV_THREADS) {
			float h = to_float(a[j]);
			if (a2) h += to_float(a2[j]);
			if (store) sum[j] = from_float<T>(h);
			s2 += h * h;
		}
	}
	// The warps' sums, added in warp order by every thread after one barrier.
	s2 = warp_reduce<SumOp>(s2);
	if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = s2;
	__syncthreads();
	float total = 0.0f;
#pragma unroll
	for (int w = 0; w < GEMV_WARPS; ++w) total += scratch[w];
	return 1.0f / sqrtf(total * (1.0f / (float)k) + eps);
}

// gemv_silu is cudaep.SiluMul's element, g · sigmoid(g) · u, with the fast exponential and
// division (a few float32 ulps from SiluMulOp's expf and IEEE division, before the rounding to
// T): with those, the bfloat16 kernel needs more than its 64 registers and spills, and the
// H200 ran the down projection of a 1B Llama 2.9 times slower (25 against 8.5 µs).
__device__ __forceinline__ float gemv_silu(float g, float u) { return __fdividef(g, 1.0f + __expf(-g)) * u; }

// gemv_a returns element r of the row the matrices multiply, after the prologue MODE.
template <int MODE, typename T>
__device__ __forceinline__ float gemv_a(const T* a, const T* a2, const T* gamma, float inv, u64 r) {
	if (MODE == GEMV_RMSNORM) {
		float h = to_float(a[r]);
		if (a2) h += to_float(a2[r]);
		return to_float(from_float<T>(h * inv * to_float(gamma[r])));
	}
	if (MODE == GEMV_SILU) {
		return to_float(from_float<T>(gemv_silu(to_float(a[r]), to_float(a2[r]))));
	}
	return to_float(a[r]);
}

template <int MODE, typename T>
__device__ __forceinline__ void gemv(T* __restrict__ y, const T* __restrict__ a, const T* __restrict__ b, float* __restrict__ partials,
	unsigned* __restrict__ counters, u64 k, u64 n, u64 rows, u64 tile, const T* a2, const T* gamma, T* hsum, float eps) {
	const int V = 16 / sizeof(T);  // elements of a pack
	const int TC = 32 * V;         // columns of a tile
	__shared__ float red[GEMV_WARPS * TC];
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const u64 chunk = blockIdx.y, gtile = blockIdx.x;  // gtile: the tile's number over the group
	const u64 col0 = tile * TC + (u64)lane * V;  // the lane's first column
	const u64 r0 = chunk * rows, r1 = r0 + rows < k ? r0 + rows : k;
	const bool live = col0 < n, aligned = ((u64)b & 15u) == 0;

	float acc[V];
#pragma unroll
	for (int j = 0; j < V; ++j) acc[j] = 0.0f;
	// The first unrolled step's loads go out before the prologue, whose reduction then overlaps
	// them. Every lane runs every step (its warp shares the prologue's row by shuffles): a lane
	// past the last column reads column 0's packs, and its sums are never stored.
	const u64 stride = n / V;  // packs per row of B
	const T* pb = b + (live ? col0 : 0);
	const Pack<T>* p = (const Pack<T>*)pb;
	u64 r = r0 + warp;
	bool full = aligned && r + (GEMV_UNROLL - 1) * GEMV_WARPS < r1;
	Pack<T> x[GEMV_UNROLL];
	if (full) {
#pragma unroll
		for (int u = 0; u < GEMV_UNROLL; ++u) x[u] = p[(r + u * GEMV_WARPS) * stride];
	}
	float inv = 0.0f;
	if (MODE == GEMV_RMSNORM) inv = gemv_row_inv(a, a2, hsum, k, eps);
	while (full) {
		float av[GEMV_UNROLL];
		if (MODE == GEMV_PLAIN) {
#pragma unroll
			for (int u = 0; u < GEMV_UNROLL; ++u) av[u] = gemv_a<MODE>(a, a2, gamma, inv, r + u * GEMV_WARPS);
		} else {
			// Lane l computes the element of row r + (l % U)·W, and the warp shares them: one
			// prologue computation a lane instead of U (unrolled, they would not fit in registers).
			const float mine = gemv_a<MODE>(a, a2, gamma, inv, r + (lane % GEMV_UNROLL) * GEMV_WARPS);
#pragma unroll
			for (int u = 0; u < GEMV_UNROLL; ++u) av[u] = __shfl_sync(0xffffffffu, mine, u);
		}
#pragma unroll
		for (int u = 0; u < GEMV_UNROLL; ++u) {
#pragma unroll
			for (int j = 0; j < V; ++j) acc[j] += av[u] * to_float(x[u].v[j]);
		}
		r += GEMV_UNROLL * GEMV_WARPS;
		full = r + (GEMV_UNROLL - 1) * GEMV_WARPS < r1;
		if (full) {
#pragma unroll
			for (int u = 0; u < GEMV_UNROLL; ++u) x[u] = p[(r + u * GEMV_WARPS) * stride];
		}
	}
	if (aligned) {
		for (; r < r1; r += GEMV_WARPS) {
			const Pack<T> xr = p[r * stride];
			const float av = gemv_a<MODE>(a, a2, gamma, inv, r);
#pragma unroll
			for (int j = 0; j < V; ++j) acc[j] += av * to_float(xr.v[j]);
		}
	} else {
		// An unaligned B: the same rows in the same order, element loads, one row at a time.
		for (; r < r1; r += GEMV_WARPS) {
			const T* e = pb + r * n;
			const float av = gemv_a<MODE>(a, a2, gamma, inv, r);
#pragma unroll
			for (int j = 0; j < V; ++j) acc[j] += av * to_float(e[j]);
		}
	}

	// The 8 warps' sums of each column, added in warp order.
#pragma unroll
	for (int j = 0; j < V; ++j) red[warp * TC + lane * V + j] = acc[j];
	__syncthreads();
	const unsigned t = threadIdx.x;
	const u64 col = tile * TC + t;
	float sum = 0.0f;
	if (t < TC) {
#pragma unroll
		for (int w = 0; w < GEMV_WARPS; ++w) sum += red[w * TC + t];
	}
	if (gridDim.y == 1) {
		if (t < TC && col < n) y[col] = from_float<T>(sum);
		return;
	}

	// Split K: publish the partial, then the last block of the tile finishes it.
	const u64 ld = (u64)gridDim.x * TC;  // partials' row length: every tile of the group whole
	if (t < TC) partials[chunk * ld + gtile * TC + t] = sum;
	if (!arrive_last(&counters[gtile], gridDim.y)) return;

	// Thread t adds the 4 columns of group g = t % G over chunks s, s+S, s+2S, … (s = t / G),
	// 16-byte loads; then the S slices are added in order for each column.
	const unsigned G = TC / 4, S = GEMV_THREADS / G;
	const unsigned g = t % G, s = t / G;
	float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	const float* src = partials + gtile * TC + g * 4;
#pragma unroll 8
	for (u64 c = s; c < gridDim.y; c += S) {
		float v[4];
		load_cg4(src + c * ld, v);
#pragma unroll
		for (int j = 0; j < 4; ++j) part[j] += v[j];
	}
#pragma unroll
	for (int j = 0; j < 4; ++j) red[s * TC + g * 4 + j] = part[j];
	__syncthreads();
	if (t < TC) {
		float total = 0.0f;
		for (unsigned i = 0; i < S; ++i) total += red[i * TC + t];
		if (col < n) y[col] = from_float<T>(total);
	}
	if (t == 0) counters[gtile] = 0;
}

// gemv_group finds the matrix of the group whose tiles blockIdx.x falls in and runs that tile
// (the matrix selected with conditionals, not an indexed array, which would live in local
// memory).
template <int MODE, typename T>
__device__ __forceinline__ void gemv_group(const T* a, float* partials, unsigned* counters, u64 k, u64 rows,
	T* y0, T* y1, T* y2, T* y3, const T* b0, const T* b1, const T* b2, const T* b3, u64 n0, u64 n1, u64 n2, u64 n3,
	const T* a2, const T* gamma, T* sum, float eps) {
	const u64 TC = 32 * (16 / sizeof(T));
	const u64 t0 = (n0 + TC - 1) / TC, t1 = t0 + (n1 + TC - 1) / TC, t2 = t1 + (n2 + TC - 1) / TC;
	u64 tile = blockIdx.x, n = n3;
	T* y = y3;
	const T* b = b3;
	if (tile < t0) {
		y = y0, b = b0, n = n0;
	} else if (tile < t1) {
		y = y1, b = b1, n = n1, tile -= t0;
	} else if (tile < t2) {
		y = y2, b = b2, n = n2, tile -= t1;
	} else {
		tile -= t2;
	}
	gemv<MODE, T>(y, a, b, partials, counters, k, n, rows, tile, a2, gamma, sum, eps);
}

#define GEMV(name, mode, sfx, T) \
	extern "C" __global__ void __launch_bounds__(GEMV_THREADS, GEMV_MIN_BLOCKS) cudaep_##name##_##sfx(const T* a, float* partials, \
		unsigned* counters, u64 k, u64 rows, T* y0, T* y1, T* y2, T* y3, const T* b0, const T* b1, const T* b2, const T* b3, \
		u64 n0, u64 n1, u64 n2, u64 n3, const T* a2, const T* gamma, T* sum, float eps) { \
		gemv_group<mode, T>(a, partials, counters, k, rows, y0, y1, y2, y3, b0, b1, b2, b3, n0, n1, n2, n3, a2, gamma, sum, eps); \
	}
#define GEMV_ALL(name, mode) \
	GEMV(name, mode, f32, float) \
	GEMV(name, mode, f16, half_t) \
	GEMV(name, mode, bf16, bf16_t)
GEMV_ALL(gemv, GEMV_PLAIN)
GEMV_ALL(gemv_rmsnorm, GEMV_RMSNORM)
GEMV_ALL(gemv_silu, GEMV_SILU)
