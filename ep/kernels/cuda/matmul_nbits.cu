// MatMulNBits kernels of package kernels: ONNX Runtime's com.microsoft.MatMulNBits, Y[M,N] =
// A[M,K] · Wᵀ (+ bias[N]), where W[N,K] is stored block-quantized to 4 or 8 bits along K and
// dequantized as W[n,k] = (q[n,k] − zp[n,kb]) · scale[n,kb], kb = k / block_size. A, scales,
// an unpacked zero point, bias and Y are float32, float16 or bfloat16 (suffixes f32, f16,
// bf16), one type T; sums are float32, Y rounded once on store. matmul_nbits.go plans the
// launches, sim_matmul_nbits.go mirrors them for the simulated device with the same argument
// lists.
//
// Layout (ONNX Runtime's): B is uint8 [N, k_blocks, block_size·bits/8], k_blocks =
// ceil(K / block_size): row n of B holds output column n's K weights, k_blocks blocks of
// block_size weights each, packed along K (4 bits: weight k in byte k/2, the low nibble
// first; 8 bits: a byte each). When K is not a multiple of block_size the last block's weights
// from K on are padding: they are never read into a sum nor dequantized. scales are T
// [N·k_blocks] (ONNX's [N, k_blocks] or flattened). The zero points (zp_mode) are
//
//   - NB_ZP_NONE: 2^(bits−1) (8, or 128 for 8 bits), the symmetric default;
//   - NB_ZP_PACKED: uint8 [N, ceil(k_blocks·bits/8)], packed as B is along the blocks (4 bits:
//     block kb in byte kb/2 of its row, the low nibble for even kb), each row padded to whole
//     bytes;
//   - NB_ZP_TYPED: T [N·k_blocks], any value (not only integers).
//
// The weights are unsigned; no value of B, a packed zero point or a scale is invalid, so the
// kernels record no data faults.
//
// A 16-byte chunk of a row of B holds WPC = 128 / bits weights (32 or 16); its weights are
// taken in groups of 16, each group inside one block (block_size >= 16), so a group has one
// scale and one zero point.
//
// Decode (M rows of A, few): cudaep_mmnb_gemv_q<bits>_<t>(const T* a, u64 rows, u64 k, u64
// block_size, u64 zp_mode, u64 wpc, then for each matrix i of a group of up to NB_GROUP that
// share the row a: T* y_i, const u8* b_i, const T* scales_i, const void* zp_i, const T*
// bias_i, u64 n_i). A group of g < NB_GROUP matrices passes n_i = 0 and null pointers for i >=
// g; bias_i may be null. The product is memory-bound: B is streamed once (for up to NB_ROWS
// rows of A) and dequantized in registers. Geometry: blocks of NB_THREADS threads (8 warps);
// each block owns cols = 8 / wpc consecutive columns of one matrix (the group's column tiles
// numbered one matrix after the other in blockIdx.x) and NB_ROWS rows of A (blockIdx.y: row
// group; gridDim.y = ceil(rows / NB_ROWS)). A column's chunks are shared by wpc warps (split K
// inside the block, no scratch memory): warp part p of a column takes chunks p·32 + lane,
// (p + wpc)·32 + lane, …: each warp step reads 512 consecutive bytes of the row, one 16-byte
// load a lane. For each group of 16 weights a lane forms d_j = float(q_j) − zp once, then for
// each row m of A p = Σ_j fma(a[m, k_j], d_j, p) in j order and acc[m] = fma(p, scale,
// acc[m]). Then each warp sums its lanes (warp_reduce), and the column's wpc warps' sums are
// added in warp order, the bias added, and Y stored: a fixed order, so results are
// bit-identical from run to run and in CUDA graph replays. A's loads are 16-byte packs when K
// is whole packs and a is 16-byte aligned, element loads otherwise (the same values in the
// same order); B's are 16-byte loads when its rows are whole 16-byte chunks and b is aligned,
// two 8-byte loads for 4-bit blocks of 16 with an odd k_blocks, and byte loads for an
// unaligned b.
//
// Prefill (many rows): cudaep_mmnb_dequant_q<bits>_<t>(T* w, const u8* b, const T* scales,
// const void* zp, u64 k, u64 block_size, u64 zp_mode, u64 n0, u64 nt) writes W[n0 + j, ·]
// rounded to T into w[j, 0..K) for j < nt (a Library scratch tile of nt columns), one thread a
// chunk, on a grid-stride loop; cuBLAS then multiplies A by the tile (matmul_nbits.go). That
// is how ONNX Runtime's CUDA kernel runs MatMulNBits with more than one row, and it uses the
// tensor cores through cuBLAS; the next step is a kernel that dequantizes tiles of B into
// shared memory and feeds them to tensor-core MMA tiles directly (no scratch round trip).

#include "rowreduce.cuh"

#define NB_THREADS 256
#define NB_WARPS (NB_THREADS / 32)
#define NB_ROWS 8  // rows of A one decode block multiplies
#define NB_GROUP 3 // matrices one decode launch takes (q, k and v)

// Where the zero points come from (see above).
#define NB_ZP_NONE 0
#define NB_ZP_PACKED 1
#define NB_ZP_TYPED 2

// NbChunk is 16 bytes of a row of B, NbHalf 8.
struct __attribute__((aligned(16))) NbChunk {
	unsigned w[4];
};
struct __attribute__((aligned(8))) NbHalf {
	unsigned w[2];
};

// nb_load_mode is how a kernel loads the chunks of b, whose rows are row_bytes long: 16 (one
// 16-byte load), 8 (two 8-byte loads) or 1 (byte loads).
__device__ __forceinline__ int nb_load_mode(const u8* b, u64 row_bytes) {
	if ((((u64)b | row_bytes) & 15u) == 0) return 16;
	if ((((u64)b | row_bytes) & 7u) == 0) return 8;
	return 1;
}

// nb_chunk returns bytes [16c, 16c + 16) of a row of B (row: its first byte), zeros past the
// row's end, loaded as mode says. Chunk c holds a weight below K, so its first byte is inside
// the row; with mode 16 the row is whole chunks, with mode 8 whole halves.
__device__ __forceinline__ NbChunk nb_chunk(const u8* row, u64 c, u64 row_bytes, int mode) {
	const u8* p = row + 16 * c;
	if (mode == 16) return *(const NbChunk*)p;
	NbChunk x;
	if (mode == 8) {
		const NbHalf lo = *(const NbHalf*)p;
		NbHalf hi;
		hi.w[0] = hi.w[1] = 0u;
		if (16 * c + 8 < row_bytes) hi = *(const NbHalf*)(p + 8);
		x.w[0] = lo.w[0];
		x.w[1] = lo.w[1];
		x.w[2] = hi.w[0];
		x.w[3] = hi.w[1];
		return x;
	}
#pragma unroll
	for (int i = 0; i < 4; ++i) {
		unsigned v = 0u;
#pragma unroll
		for (int j = 0; j < 4; ++j) {
			if (16 * c + 4 * i + j < row_bytes) v |= (unsigned)p[4 * i + j] << (8 * j);
		}
		x.w[i] = v;
	}
	return x;
}

// nb_q returns weight j of a chunk: 4 bits, the low nibble of each byte first, or a byte.
template <int BITS>
__device__ __forceinline__ unsigned nb_q(const NbChunk& x, int j) {
	if (BITS == 4) return (x.w[j >> 3] >> (4 * (j & 7))) & 15u;
	return (x.w[j >> 2] >> (8 * (j & 3))) & 255u;
}

// nb_zero returns the zero point of block kb of column col (kb_count blocks a column).
template <int BITS, typename T>
__device__ __forceinline__ float nb_zero(const void* zp, u64 mode, u64 col, u64 kb, u64 kb_count) {
	if (mode == NB_ZP_PACKED) {
		const u8* z = (const u8*)zp;
		if (BITS == 4) {
			const unsigned v = z[col * ((kb_count + 1) / 2) + kb / 2];
			return (float)((kb & 1) ? v >> 4 : v & 15u);
		}
		return (float)z[col * kb_count + kb];
	}
	if (mode == NB_ZP_TYPED) return to_float(((const T*)zp)[col * kb_count + kb]);
	return (float)(1 << (BITS - 1));
}

// nb_log2 returns log2 of a power of two.
__device__ __forceinline__ unsigned nb_log2(u64 v) {
	unsigned l = 0;
	while ((1ull << l) < v) ++l;
	return l;
}

// nb_gemv is one decode block: columns tile·cols … of one matrix (y, b, scales, zp, bias, n)
// for rows blockIdx.y·NB_ROWS … of a.
template <int BITS, typename T>
__device__ __forceinline__ void nb_gemv(const T* __restrict__ a, u64 rows, u64 k, u64 bs, u64 zp_mode, u64 wpc,
	T* __restrict__ y, const u8* __restrict__ b, const T* __restrict__ scales, const void* __restrict__ zp,
	const T* __restrict__ bias, u64 n, u64 tile) {
	const int WPC = 128 / BITS;   // weights of a 16-byte chunk
	const int V = 16 / sizeof(T); // elements of an A pack
	__shared__ float red[NB_WARPS][NB_ROWS];
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const u64 cols = NB_WARPS / wpc;
	const u64 col = tile * cols + warp / wpc, part = warp % wpc;
	const u64 row0 = (u64)blockIdx.y * NB_ROWS;
	const int mrows = rows - row0 < NB_ROWS ? (int)(rows - row0) : NB_ROWS;
	const u64 kb_count = (k - 1) / bs + 1;
	const u64 row_bytes = kb_count * bs * BITS / 8;
	const u64 nc = (k + WPC - 1) / WPC; // chunks holding a weight below K
	const unsigned lbs = nb_log2(bs);
	const int mode = nb_load_mode(b, row_bytes);
	const bool avec = k % V == 0 && ((u64)a & 15u) == 0;

	float acc[NB_ROWS];
#pragma unroll
	for (int m = 0; m < NB_ROWS; ++m) acc[m] = 0.0f;
	if (col < n) {
		const u8* brow = b + col * row_bytes;
		for (u64 c = part * 32 + lane; c < nc; c += wpc * 32) {
			const NbChunk x = nb_chunk(brow, c, row_bytes, mode);
#pragma unroll
			for (int g = 0; g < WPC / 16; ++g) {
				const u64 ks = c * WPC + 16 * g;
				if (ks >= k) break;
				const u64 kb = ks >> lbs;
				const float s = to_float(scales[col * kb_count + kb]);
				const float z = nb_zero<BITS, T>(zp, zp_mode, col, kb, kb_count);
				float d[16];
#pragma unroll
				for (int j = 0; j < 16; ++j) d[j] = (float)nb_q<BITS>(x, 16 * g + j) - z;
				const bool full = avec && ks + 16 <= k;
#pragma unroll
				for (int m = 0; m < NB_ROWS; ++m) {
					if (m < mrows) {
						const T* ar = a + (row0 + m) * k + ks;
						float p = 0.0f;
						if (full) {
#pragma unroll
							for (int v = 0; v < 16 / V; ++v) {
								const Pack<T> xa = ((const Pack<T>*)ar)[v];
#pragma unroll
								for (int e = 0; e < V; ++e) p = fmaf(to_float(xa.v[e]), d[v * V + e], p);
							}
						} else {
#pragma unroll
							for (int j = 0; j < 16; ++j) {
								if (ks + j < k) p = fmaf(to_float(ar[j]), d[j], p);
							}
						}
						acc[m] = fmaf(p, s, acc[m]);
					}
				}
			}
		}
	}
#pragma unroll
	for (int m = 0; m < NB_ROWS; ++m) {
		if (m < mrows) {
			const float v = warp_reduce<SumOp>(acc[m]);
			if (lane == 0) red[warp][m] = v;
		}
	}
	__syncthreads();
	const unsigned t = threadIdx.x;
	if (t < cols * NB_ROWS) {
		const u64 ci = t / NB_ROWS;
		const int m = t % NB_ROWS;
		const u64 cc = tile * cols + ci;
		if (cc < n && m < mrows) {
			float total = 0.0f;
			for (u64 w = 0; w < wpc; ++w) total += red[ci * wpc + w][m];
			if (bias) total += to_float(bias[cc]);
			y[(row0 + m) * n + cc] = from_float<T>(total);
		}
	}
}

// nb_gemv_group finds the matrix of the group whose column tiles blockIdx.x falls in and runs
// that tile (the matrix selected with conditionals, not an indexed array, which would live in
// local memory).
template <int BITS, typename T>
__device__ __forceinline__ void nb_gemv_group(const T* a, u64 rows, u64 k, u64 bs, u64 zp_mode, u64 wpc,
	T* y0, const u8* b0, const T* s0, const void* z0, const T* c0, u64 n0,
	T* y1, const u8* b1, const T* s1, const void* z1, const T* c1, u64 n1,
	T* y2, const u8* b2, const T* s2, const void* z2, const T* c2, u64 n2) {
	const u64 cols = NB_WARPS / wpc;
	const u64 t0 = (n0 + cols - 1) / cols, t1 = t0 + (n1 + cols - 1) / cols;
	u64 tile = blockIdx.x, n = n2;
	T* y = y2;
	const u8* b = b2;
	const T* s = s2;
	const void* z = z2;
	const T* c = c2;
	if (tile < t0) {
		y = y0, b = b0, s = s0, z = z0, c = c0, n = n0;
	} else if (tile < t1) {
		y = y1, b = b1, s = s1, z = z1, c = c1, n = n1, tile -= t0;
	} else {
		tile -= t1;
	}
	nb_gemv<BITS, T>(a, rows, k, bs, zp_mode, wpc, y, b, s, z, c, n, tile);
}

// nb_dequant writes W[n0 + j, 0..K) rounded to T into w[j, ·] for j < nt: one thread a chunk
// of a column (its groups of 16 weights below K), (float(q) − zp) · scale each, 16-byte stores
// when K is whole packs and w is aligned.
template <int BITS, typename T>
__device__ __forceinline__ void nb_dequant(T* __restrict__ w, const u8* __restrict__ b, const T* __restrict__ scales,
	const void* __restrict__ zp, u64 k, u64 bs, u64 zp_mode, u64 n0, u64 nt) {
	const int WPC = 128 / BITS;
	const int V = 16 / sizeof(T);
	const u64 kb_count = (k - 1) / bs + 1;
	const u64 row_bytes = kb_count * bs * BITS / 8;
	const u64 nc = (k + WPC - 1) / WPC;
	const unsigned lbs = nb_log2(bs);
	const int mode = nb_load_mode(b, row_bytes);
	const bool wvec = k % V == 0 && ((u64)w & 15u) == 0;
	GRID_STRIDE_LOOP(i, nt * nc) {
		const u64 j = i / nc, c = i % nc, col = n0 + j;
		const NbChunk x = nb_chunk(b + col * row_bytes, c, row_bytes, mode);
#pragma unroll
		for (int g = 0; g < WPC / 16; ++g) {
			const u64 ks = c * WPC + 16 * g;
			if (ks >= k) break;
			const u64 kb = ks >> lbs;
			const float s = to_float(scales[col * kb_count + kb]);
			const float z = nb_zero<BITS, T>(zp, zp_mode, col, kb, kb_count);
			T* wr = w + j * k + ks;
			if (wvec && ks + 16 <= k) {
#pragma unroll
				for (int v = 0; v < 16 / V; ++v) {
					Pack<T> o;
#pragma unroll
					for (int e = 0; e < V; ++e) o.v[e] = from_float<T>(((float)nb_q<BITS>(x, 16 * g + v * V + e) - z) * s);
					((Pack<T>*)wr)[v] = o;
				}
			} else {
#pragma unroll
				for (int e = 0; e < 16; ++e) {
					if (ks + e < k) wr[e] = from_float<T>(((float)nb_q<BITS>(x, 16 * g + e) - z) * s);
				}
			}
		}
	}
}

#define NB_KERNELS(bits, sfx, T) \
	extern "C" __global__ void __launch_bounds__(NB_THREADS) cudaep_mmnb_gemv_q##bits##_##sfx(const T* a, u64 rows, u64 k, \
		u64 block_size, u64 zp_mode, u64 wpc, T* y0, const u8* b0, const T* s0, const void* z0, const T* c0, u64 n0, \
		T* y1, const u8* b1, const T* s1, const void* z1, const T* c1, u64 n1, \
		T* y2, const u8* b2, const T* s2, const void* z2, const T* c2, u64 n2) { \
		nb_gemv_group<bits, T>(a, rows, k, block_size, zp_mode, wpc, y0, b0, s0, z0, c0, n0, y1, b1, s1, z1, c1, n1, \
			y2, b2, s2, z2, c2, n2); \
	} \
	extern "C" __global__ void cudaep_mmnb_dequant_q##bits##_##sfx(T* w, const u8* b, const T* scales, const void* zp, \
		u64 k, u64 block_size, u64 zp_mode, u64 n0, u64 nt) { \
		nb_dequant<bits, T>(w, b, scales, zp, k, block_size, zp_mode, n0, nt); \
	}
#define NB_ALL(bits) \
	NB_KERNELS(bits, f32, float) \
	NB_KERNELS(bits, f16, half_t) \
	NB_KERNELS(bits, bf16, bf16_t)
NB_ALL(4)
NB_ALL(8)
