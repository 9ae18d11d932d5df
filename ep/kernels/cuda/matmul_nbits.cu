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
// Decode (M rows of A, few; the tensor-core kernel below where it applies):
// cudaep_mmnb_gemv_q<bits>_<t>(const T* a, u64 rows, u64 k, u64
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
// Tensor-core decode (float16 A, 4 bits, zero points absent or packed, block_size 32 to 256,
// K a multiple of 32, 1 to NB_ROWS rows: the case ONNX Runtime's quantizer writes for float16
// Llamas; matmul_nbits.go takes it wherever it applies, the gemv kernel everywhere else):
// cudaep_mmnb_mma_q4_f16, with the gemv kernels' arguments but kw (warps a block, 1 to
// NBM_MAX_WARPS) in wpc's place. It multiplies with mma.sync.aligned.m16n8k8.row.col.f32.f16.
// f16.f32 (sm_75 and later): the mma's A operand (16 × 8, row-major) is 16 columns n of W, its
// B operand (8 × 8) the rows of A (column m = row m of A; rows m >= M zero), its f32
// accumulator D[n][m]. PTX ISA fragments (lane = 4·g + t): A a0,a1 = row g, k 2t, 2t + 1;
// a2,a3 = row g + 8, same k; B b0,b1 = k 2t, 2t + 1, column g; D c0,c1 = row g, columns 2t,
// 2t + 1; c2,c3 = row g + 8, same columns. The sum is over k, so the order of k inside an mma
// is free as long as A and B take the same one, and each mma stays inside one block of B
// (every product of its row has that block's scale):
//
//   - Geometry: one block of threads for each 16-column tile (blockIdx.x numbers the group's
//     tiles one matrix after the other), 32·kw threads; warp w takes the tile's steps of
//     NBM_STEP = 256 weights w, w + kw, … (kw = the steps, in powers of two up to 16: 8 at K =
//     2048, 16 from 4096 on; one or two steps a warp at Llama shapes).
//   - A step: a lane piece is W = min(block_size / 32, 4) words of a row (4·W contiguous bytes,
//     one 32-, 64- or 128-bit load); lane (g, t) loads, for each chunk of 32·W weights of the
//     step, bytes [4·W·t, 4·W·(t + 1)) of rows n = 16·tile + g and + 8 (a quad covers 16·W
//     contiguous bytes of a row, inside one block), and the same k of row m = g of A, 8 halves
//     a 16-byte load. All of a step's loads (16 words of B, 8 of A, the scales: 2·8 / W loads
//     of B, 8 of A, 2 vector loads of scales) are issued before its arithmetic.
//   - Dequantization without int-to-float conversion (nbm_dequant): word u holds 8 weights k =
//     8·(W·t + u) + 0..7 of its chunk, q_0 in the low nibble; (w & 0x000F000F) | 0x64006400 is
//     f16x2(1024 + q_0, 1024 + q_4), and one sub.f16x2 of f16x2(1024 + z) leaves the exact
//     integers (q − z) (z = 8 without zero points, else the row's packed nibble); q_1, q_5
//     come masked by 0x00F000F0 as 1024 + 16·q and an fma.f16x2 by 1/16 (exact) with −(64 + z);
//     w >> 8 gives q_2, q_6 and q_3, q_7. mma i (i = 0..3) of word u takes (q_i − z, q_{i+4} −
//     z) of row n as a0a1, of row n + 8 as a2a3, and b0b1 = (a[m, k_i], a[m, k_{i+4}]) (one prmt).
//     The dequantized weights are never rounded: they are exact small integers.
//   - Sums: a block's 4·block_size / 32 mmas accumulate into a fresh zero accumulator (the f16
//     products are exact in float32, summed in float32 by the tensor cores), then total = fma(acc,
//     scale, total) in float32, scale row n's (c0,c1 row g's, c2,c3 row g + 8's), block after
//     block, step after step. The warps' totals go to shared memory and thread (n, m) adds them
//     in warp order, adds the bias in float32 and rounds once to float16. Every sum has a fixed
//     order and the tensor cores' is a fixed function of their inputs: results are bit-identical
//     from run to run and in CUDA graph replays (no atomics, no scratch).
//   - Alignment: one instance of nbm_tile with vector loads when b is aligned to a piece, a to
//     16 bytes and the scales to a step's (kb_count a multiple of 256 / block_size); another
//     with byte and element loads of the same values otherwise.
//
// Issue count, per lane per 32 weights of 16 rows (256 bytes of B, so per 16 bytes divide by
// 16), block_size 32: 2 loads of B, 1 of A and 4 prmt, 2 × (1 shift, 4 lop3, 4 f16x2) = 18 to
// dequantize, 4 mma, 4 ffma and 2 cvt for the scale (+ 1/4 of a vector load), about 2 of
// predicates and addresses: ~37 warp instructions (~44 with packed zero points: 2 loads of a
// byte a pair of blocks, an extract and 2 imad a row), 2.3 (2.75) per 16 bytes; block_size 128:
// half a load of B and the scale work a quarter as often, ~31, 1.9 per 16 bytes. An H200
// issues 132 SMs × 4 × 1.98 GHz ≈ 1.05·10^12 warp instructions/s, 3.5 per 16 bytes at 4.8 TB/s:
// the kernel needs ~66% of the issue rate at the full bandwidth (48% at 3.5 TB/s), the integer
// pipe (lop3, shifts, prmt: ~1 per 16 bytes) ~58% of its half rate, the tensor pipe 0.25 mma per
// 16 bytes. The gemv kernel spends 32 I2F (quarter rate), 32 FADD and M·32 FFMA on each 16
// bytes, and reloads A for every column. Memory-level parallelism: a warp has 16 words of B,
// 8 16-byte pieces of A and its scales in flight; at 16 warps an SM that is ~32 KiB of B per
// SM, 4 MiB over 132 SMs, above the ~3.8 MB that 4.8 TB/s × ~0.8 µs of latency needs. At
// block_size 32 each 32-bit load of B takes half of each 32-byte sector it touches and the
// next sub-block's load (the next instruction) the other half.
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

// ---- The tensor-core decode path: cudaep_mmnb_mma_q4_f16 (see the header) ----

#define NBM_COLS 16      // columns of B a tile: the 16 rows of the mma's A operand
#define NBM_STEP 256     // weights of a row one warp step takes: 8 sub-blocks of 32
#define NBM_MAX_WARPS 16 // warps of a block at most (its K split)

// nbm_mma is d += A·B for one mma.sync.m16n8k8 (f16 operands, f32 accumulators; legal from
// sm_75): a_lo and a_hi are the lane's A fragment (rows g and g + 8), b its B fragment.
__device__ __forceinline__ void nbm_mma(float (&d)[4], unsigned a_lo, unsigned a_hi, unsigned b) {
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		: "r"(a_lo), "r"(a_hi), "r"(b));
}

__device__ __forceinline__ unsigned nbm_hsub2(unsigned a, unsigned b) {
	unsigned d;
	asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
	return d;
}

__device__ __forceinline__ unsigned nbm_hfma2(unsigned a, unsigned b, unsigned c) {
	unsigned d;
	asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

__device__ __forceinline__ unsigned nbm_prmt(unsigned a, unsigned b, unsigned sel) {
	unsigned d;
	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
	return d;
}

// nbm_dequant turns a word of B (8 weights, q_0 in its low nibble) into the A-fragment
// registers of 4 mmas: h[i] = f16x2(q_i − z, q_{i+4} − z), exact. c0 is f16x2(1024 + z) and
// nc1 f16x2(−(64 + z)). (w & 0x000F000F) | 0x64006400 is f16x2(1024 + q_0, 1024 + q_4), from
// which c0 leaves q − z; (w & 0x00F000F0) | 0x64006400 is f16x2(1024 + 16·q_1, 1024 + 16·q_5),
// and its fma by 1/16 (exact) with nc1 leaves q − z; w >> 8 does the same for q_2, q_6 and
// q_3, q_7. No int-to-float conversion: 1 shift, 4 LOP3 and 4 f16x2 operations a word.
__device__ __forceinline__ void nbm_dequant(unsigned (&h)[4], unsigned w, unsigned c0, unsigned nc1) {
	const unsigned w8 = w >> 8;
	h[0] = nbm_hsub2((w & 0x000F000Fu) | 0x64006400u, c0);
	h[1] = nbm_hfma2((w & 0x00F000F0u) | 0x64006400u, 0x2C002C00u, nc1);
	h[2] = nbm_hsub2((w8 & 0x000F000Fu) | 0x64006400u, c0);
	h[3] = nbm_hfma2((w8 & 0x00F000F0u) | 0x64006400u, 0x2C002C00u, nc1);
}

// nbm_bfrag turns 8 halves of a row of A (x_0 in x.w[0]'s low half) into the B-fragment
// registers of the same 4 mmas: b[i] = f16x2(x_i, x_{i+4}).
__device__ __forceinline__ void nbm_bfrag(unsigned (&b)[4], const NbChunk& x) {
	b[0] = nbm_prmt(x.w[0], x.w[2], 0x5410u);
	b[1] = nbm_prmt(x.w[0], x.w[2], 0x7632u);
	b[2] = nbm_prmt(x.w[1], x.w[3], 0x5410u);
	b[3] = nbm_prmt(x.w[1], x.w[3], 0x7632u);
}

// NbmPiece is what one lane loads of a row of B at once: W words (4, 8 or 16 bytes).
template <int W>
struct __attribute__((aligned(4 * W))) NbmPiece {
	unsigned w[W];
};

// NbmHalves is NB consecutive scales (2·NB bytes).
template <int NB>
struct __attribute__((aligned(2 * NB))) NbmHalves {
	u16 h[NB];
};

// nbm_piece loads W words at p: one load when VEC (p aligned to 4·W), byte loads otherwise.
template <int W, bool VEC>
__device__ __forceinline__ NbmPiece<W> nbm_piece(const u8* p) {
	if (VEC) return *(const NbmPiece<W>*)p;
	NbmPiece<W> x;
#pragma unroll
	for (int i = 0; i < W; ++i) {
		x.w[i] = (unsigned)p[4 * i] | (unsigned)p[4 * i + 1] << 8 | (unsigned)p[4 * i + 2] << 16 |
			(unsigned)p[4 * i + 3] << 24;
	}
	return x;
}

// nbm_act loads 8 halves of A at p: one 16-byte load when VEC (p aligned), element loads
// otherwise.
template <bool VEC>
__device__ __forceinline__ NbChunk nbm_act(const u16* p) {
	if (VEC) return *(const NbChunk*)p;
	NbChunk x;
#pragma unroll
	for (int i = 0; i < 4; ++i) x.w[i] = (unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 16;
	return x;
}

// nbm_half_float is the float32 value of the float16 bits h.
__device__ __forceinline__ float nbm_half_float(u16 h) {
	half_t x;
	x.bits = h;
	return to_float(x);
}

// nbm_scales reads the scales of blocks kb0 … kb0 + NB − 1 of a row (s: the row's first
// scale) as float32, 0 for blocks from kb_count on or for a row past N (!ok); one load of
// 2·NB bytes when VEC (the row's blocks are whole steps and the scales aligned to 2·NB bytes).
template <int NB, bool VEC>
__device__ __forceinline__ void nbm_scales(float (&out)[NB], const u16* s, u64 kb0, u64 kb_count, bool ok) {
	if (VEC && ok) {
		const NbmHalves<NB> v = *(const NbmHalves<NB>*)(s + kb0);
#pragma unroll
		for (int j = 0; j < NB; ++j) out[j] = nbm_half_float(v.h[j]);
		return;
	}
#pragma unroll
	for (int j = 0; j < NB; ++j) out[j] = ok && kb0 + j < kb_count ? nbm_half_float(s[kb0 + j]) : 0.0f;
}

// nbm_zero_consts writes the dequantization constants (c0, nc1; see nbm_dequant) of blocks
// kb0 … kb0 + NB − 1 of a row: z = 8 without zero points, else the row's packed nibble (z:
// the row's first zero-point byte; 0 for blocks from kb_count on or a row past N).
template <int NB, bool PACKED>
__device__ __forceinline__ void nbm_zero_consts(unsigned (&c0)[NB], unsigned (&nc1)[NB], const u8* z, u64 kb0,
	u64 kb_count, bool ok) {
#pragma unroll
	for (int j = 0; j < NB; ++j) {
		unsigned q = 8u;
		if (PACKED) {
			const u64 kb = kb0 + j;
			q = 0u;
			// NB is 1 or even and kb0 a multiple of NB: the parity of kb is known but for NB 1.
			if (ok && kb < kb_count) q = ((unsigned)z[kb >> 1] >> (NB == 1 ? 4u * (unsigned)(kb & 1) : 4u * (j & 1))) & 15u;
		}
		c0[j] = q * 0x00010001u + 0x64006400u;  // f16x2(1024 + z)
		nc1[j] = q * 0x00100010u + 0xD400D400u; // f16x2(−(64 + z))
	}
}

// nbm_tile is one block of the tensor-core decode kernel: columns tile·16 … tile·16 + 15 of
// one matrix (y, b, scales, zp, bias, n) for all rows (at most NB_ROWS) of a, K split over the
// block's kw warps (red: the block's shared reduction buffer). Block size 2^LBS (32 … 256),
// zero points packed (PACKED) or absent; VEC: b aligned to a lane's piece (4·W bytes), a to 16
// bytes, and the scales to a step's (2·NB bytes) with kb_count a multiple of NB, so that every
// load is one vector load (otherwise the same values come by bytes and elements).
template <int LBS, bool PACKED, bool VEC>
__device__ __forceinline__ void nbm_tile(const half_t* __restrict__ a, u64 rows, u64 k, u64 kw,
	half_t* __restrict__ y, const u8* __restrict__ b, const half_t* __restrict__ scales, const u8* __restrict__ zp,
	const half_t* __restrict__ bias, u64 n, u64 tile, float (*red)[NBM_COLS][NB_ROWS]) {
	const int SPB = 1 << (LBS - 5);     // sub-blocks of 32 weights a block
	const int W = SPB < 4 ? SPB : 4;    // words of a row a lane loads at once (its piece)
	const int CPB = SPB / W;            // chunks (4 pieces, 32·W weights) a block
	const int NB = NBM_STEP >> LBS;     // blocks a step
	const int C = NBM_STEP / (32 * W);  // chunks a step
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const unsigned g = lane / 4, t = lane % 4;
	const int mrows = rows < NB_ROWS ? (int)rows : NB_ROWS;
	const u64 kb_count = (k + (1u << LBS) - 1) >> LBS;
	const u64 row_bytes = kb_count << (LBS - 1);
	const u64 zp_row = (kb_count + 1) / 2;
	const u64 steps = (k + NBM_STEP - 1) / NBM_STEP;
	const u64 cola = tile * NBM_COLS + g, colb = cola + 8;
	const bool oka = cola < n, okb = colb < n, act_ok = (int)g < mrows;
	// Lane (g, t) holds bytes [4·W·t, 4·W·(t + 1)) of each chunk of rows cola and colb, and the
	// halves of row g of A at the same k: k = chunk·32·W + 8·(W·t + u) + 0..7 for word u.
	const u8* pa = b + (oka ? cola : 0) * row_bytes + 4 * W * t;
	const u8* pb = b + (okb ? colb : 0) * row_bytes + 4 * W * t;
	const u16* sa = (const u16*)scales + (oka ? cola : 0) * kb_count;
	const u16* sb = (const u16*)scales + (okb ? colb : 0) * kb_count;
	const u8* za = zp + (oka ? cola : 0) * zp_row;
	const u8* zb = zp + (okb ? colb : 0) * zp_row;
	const u16* arow = (const u16*)a + (act_ok ? g : 0) * k + 8 * W * t;

	float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (u64 st = warp; st < steps; st += kw) {
		const u64 k0 = st * NBM_STEP;
		// Every load of the step first: 2·8 words of B, 8 pieces of A, the scales.
		unsigned wa[8], wb[8];
		NbChunk x[8];
#pragma unroll
		for (int c = 0; c < C; ++c) {
			const u64 kc = k0 + c * 32 * W; // the chunk's first weight
			NbmPiece<W> qa, qb;
#pragma unroll
			for (int u = 0; u < W; ++u) qa.w[u] = qb.w[u] = 0u;
			if (kc < k) {
				if (oka) qa = nbm_piece<W, VEC>(pa + kc / 2);
				if (okb) qb = nbm_piece<W, VEC>(pb + kc / 2);
			}
#pragma unroll
			for (int u = 0; u < W; ++u) {
				wa[c * W + u] = qa.w[u];
				wb[c * W + u] = qb.w[u];
				const u64 kx = kc + 8 * (W * t + u); // this piece of A's first k
				NbChunk v;
				v.w[0] = v.w[1] = v.w[2] = v.w[3] = 0u;
				if (act_ok && kx < k) v = nbm_act<VEC>(arow + kc + 8 * u);
				x[c * W + u] = v;
			}
		}
		float s_a[NB], s_b[NB];
		unsigned c0a[NB], n1a[NB], c0b[NB], n1b[NB];
		nbm_scales<NB, VEC>(s_a, sa, st * NB, kb_count, oka);
		nbm_scales<NB, VEC>(s_b, sb, st * NB, kb_count, okb);
		nbm_zero_consts<NB, PACKED>(c0a, n1a, za, st * NB, kb_count, oka);
		nbm_zero_consts<NB, PACKED>(c0b, n1b, zb, st * NB, kb_count, okb);
		// Each block: its 4·SPB mmas into a fresh accumulator, then scaled into the total.
#pragma unroll
		for (int j = 0; j < NB; ++j) {
			float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
			for (int p = j * CPB * W; p < (j + 1) * CPB * W; ++p) {
				unsigned ha[4], hb[4], bf[4];
				nbm_dequant(ha, wa[p], c0a[j], n1a[j]);
				nbm_dequant(hb, wb[p], c0b[j], n1b[j]);
				nbm_bfrag(bf, x[p]);
#pragma unroll
				for (int i = 0; i < 4; ++i) nbm_mma(acc, ha[i], hb[i], bf[i]);
			}
			tot[0] = fmaf(acc[0], s_a[j], tot[0]);
			tot[1] = fmaf(acc[1], s_a[j], tot[1]);
			tot[2] = fmaf(acc[2], s_b[j], tot[2]);
			tot[3] = fmaf(acc[3], s_b[j], tot[3]);
		}
	}
	// c0, c1: row g, columns (rows of A) 2t, 2t + 1; c2, c3: row g + 8.
	red[warp][g][2 * t] = tot[0];
	red[warp][g][2 * t + 1] = tot[1];
	red[warp][g + 8][2 * t] = tot[2];
	red[warp][g + 8][2 * t + 1] = tot[3];
	__syncthreads();
	for (unsigned o = threadIdx.x; o < NBM_COLS * NB_ROWS; o += blockDim.x) {
		const unsigned r = o / NB_ROWS, m = o % NB_ROWS;
		const u64 col = tile * NBM_COLS + r;
		if (col < n && (int)m < mrows) {
			float total = 0.0f;
			for (u64 w = 0; w < kw; ++w) total += red[w][r][m];
			if (bias) total += to_float(bias[col]);
			y[(u64)m * n + col] = from_float<half_t>(total);
		}
	}
}

// nbm_tiles runs nbm_tile's instance for block size bs.
template <bool PACKED, bool VEC>
__device__ __forceinline__ void nbm_tiles(const half_t* a, u64 rows, u64 k, u64 bs, u64 kw, half_t* y, const u8* b,
	const half_t* s, const u8* z, const half_t* c, u64 n, u64 tile, float (*red)[NBM_COLS][NB_ROWS]) {
	switch (bs) {
	case 32:
		nbm_tile<5, PACKED, VEC>(a, rows, k, kw, y, b, s, z, c, n, tile, red);
		break;
	case 64:
		nbm_tile<6, PACKED, VEC>(a, rows, k, kw, y, b, s, z, c, n, tile, red);
		break;
	case 128:
		nbm_tile<7, PACKED, VEC>(a, rows, k, kw, y, b, s, z, c, n, tile, red);
		break;
	case 256:
		nbm_tile<8, PACKED, VEC>(a, rows, k, kw, y, b, s, z, c, n, tile, red);
		break;
	}
}

// nbm_group finds the matrix of the group whose column tiles blockIdx.x falls in (as
// nb_gemv_group does, with tiles of NBM_COLS columns) and runs that tile with the instance of
// nbm_tile for its block size, zero points and alignment (one per matrix: every block of a
// matrix takes the same one). The reduction buffer is declared once, here: one per instance
// would add up in the kernel's static shared memory.
__device__ __forceinline__ void nbm_group(const half_t* a, u64 rows, u64 k, u64 bs, u64 zp_mode, u64 kw,
	half_t* y0, const u8* b0, const half_t* s0, const void* z0, const half_t* c0, u64 n0,
	half_t* y1, const u8* b1, const half_t* s1, const void* z1, const half_t* c1, u64 n1,
	half_t* y2, const u8* b2, const half_t* s2, const void* z2, const half_t* c2, u64 n2) {
	__shared__ float red[NBM_MAX_WARPS][NBM_COLS][NB_ROWS];
	const u64 t0 = (n0 + NBM_COLS - 1) / NBM_COLS, t1 = t0 + (n1 + NBM_COLS - 1) / NBM_COLS;
	u64 tile = blockIdx.x, n = n2;
	half_t* y = y2;
	const u8* b = b2;
	const half_t* s = s2;
	const void* z = z2;
	const half_t* c = c2;
	if (tile < t0) {
		y = y0, b = b0, s = s0, z = z0, c = c0, n = n0;
	} else if (tile < t1) {
		y = y1, b = b1, s = s1, z = z1, c = c1, n = n1, tile -= t0;
	} else {
		tile -= t1;
	}
	// The alignment nbm_tile's VEC needs (B's rows are whole 16-byte blocks, K whole 32s).
	const u64 nb = NBM_STEP / bs, kb_count = (k + bs - 1) / bs, wbytes = bs < 128 ? bs / 8 : 16;
	const bool vec = ((u64)b & (wbytes - 1)) == 0 && ((u64)a & 15) == 0 && kb_count % nb == 0 &&
		((u64)s & (2 * nb - 1)) == 0;
	const u8* zb = (const u8*)z;
	if (zp_mode == NB_ZP_PACKED) {
		if (vec) nbm_tiles<true, true>(a, rows, k, bs, kw, y, b, s, zb, c, n, tile, red);
		else nbm_tiles<true, false>(a, rows, k, bs, kw, y, b, s, zb, c, n, tile, red);
	} else {
		if (vec) nbm_tiles<false, true>(a, rows, k, bs, kw, y, b, s, zb, c, n, tile, red);
		else nbm_tiles<false, false>(a, rows, k, bs, kw, y, b, s, zb, c, n, tile, red);
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

// The tensor-core decode kernel: float16 A, 4 bits, zero points absent or packed, block sizes
// 32 to 256, K a multiple of 32, at most NB_ROWS rows; the arguments are the gemv kernels',
// with kw (warps a block: blockDim.x = 32·kw, at most NBM_MAX_WARPS) in wpc's place.
extern "C" __global__ void __launch_bounds__(NBM_MAX_WARPS * 32) cudaep_mmnb_mma_q4_f16(const half_t* a, u64 rows, u64 k,
	u64 block_size, u64 zp_mode, u64 kw, half_t* y0, const u8* b0, const half_t* s0, const void* z0, const half_t* c0, u64 n0,
	half_t* y1, const u8* b1, const half_t* s1, const void* z1, const half_t* c1, u64 n1,
	half_t* y2, const u8* b2, const half_t* s2, const void* z2, const half_t* c2, u64 n2) {
	nbm_group(a, rows, k, block_size, zp_mode, kw, y0, b0, s0, z0, c0, n0, y1, b1, s1, z1, c1, n1, y2, b2, s2, z2, c2, n2);
}
