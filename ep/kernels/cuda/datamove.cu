// Data-movement and generator kernels of package kernels (concat.go, gather.go, datamove.go and
// shape_range_fill.go launch them, sim_datamove.go mirrors them), by element size where they
// only move elements (suffixes b8, b16, b32, b64, and b128 for 16-byte units of wider rows): the
// pitched 2-D copy of Concat and Split, Gather, Trilu's mask, the fill of ConstantOfShape, the
// short list writes of Shape, Range, and Transpose's tiles.

#include "common.cuh"

// u128 is a 16-byte unit, for copies of rows whose byte lengths and addresses allow it.
struct __attribute__((aligned(16))) u128 {
	unsigned a, b, c, d;
};

// copy2d copies rows × cols elements: dst[r·dst_pitch + c] = src[r·src_pitch + c] (pitches in
// elements). Index is 32-bit below 2^31 elements (64-bit division is several times slower, and
// i plus the grid stride cannot wrap there).
template <typename E, typename Index>
__device__ __forceinline__ void copy2d_loop(E* dst, const E* src, Index n, Index cols, u64 dst_pitch, u64 src_pitch) {
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		const Index r = i / cols, c = i % cols;
		dst[(u64)r * dst_pitch + c] = src[(u64)r * src_pitch + c];
	}
}

#define COPY2D(sfx, E) \
	extern "C" __global__ void cudaep_copy2d_##sfx(E* dst, const E* src, u64 rows, u64 cols, u64 dst_pitch, u64 src_pitch) { \
		const u64 n = rows * cols; \
		if (n < 0x80000000ull) { \
			copy2d_loop<E, unsigned>(dst, src, (unsigned)n, (unsigned)cols, dst_pitch, src_pitch); \
		} else { \
			copy2d_loop<E, u64>(dst, src, n, cols, dst_pitch, src_pitch); \
		} \
	}

COPY2D(b8, u8)
COPY2D(b16, u16)
COPY2D(b32, unsigned)
COPY2D(b64, u64)
COPY2D(b128, u128)

// gather writes out[(o·nidx + i)·inner + j] = data[(o·axis_dim + k)·inner + j] with k =
// idx[i], plus axis_dim when negative (ONNX Runtime's negative indices); an index outside
// [-axis_dim, axis_dim) gives zero bytes instead of reading outside data, and is recorded in
// the fault word as input 1 (indices) with its value.
template <typename E, typename I, typename Index>
__device__ __forceinline__ void gather_loop(E* out, const E* data, const I* idx, Index n, Index nidx, i64 axis_dim, Index inner,
	DataFault* fault, unsigned kernel) {
	for (Index t = (Index)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (Index)gridDim.x * blockDim.x) {
		const Index j = t % inner, q = t / inner;
		const Index i = q % nidx, o = q / nidx;
		const i64 v = (i64)idx[i];
		const i64 k = v < 0 ? v + axis_dim : v;  // v >= INT64_MIN and axis_dim > 0: no overflow
		if (k >= 0 && k < axis_dim) {
			out[t] = data[((u64)o * (u64)axis_dim + (u64)k) * (u64)inner + j];
		} else {
			out[t] = E();
			if (j == 0) record_fault(fault, kernel, 1, v);
		}
	}
}

#define GATHER(sfx, E, isfx, I) \
	extern "C" __global__ void cudaep_gather_##sfx##_##isfx(E* out, const E* data, const I* idx, u64 outer, u64 nidx, \
		i64 axis_dim, u64 inner, DataFault* fault, unsigned kernel) { \
		const u64 n = outer * nidx * inner; \
		if (n < 0x80000000ull) { \
			gather_loop<E, I, unsigned>(out, data, idx, (unsigned)n, (unsigned)nidx, axis_dim, (unsigned)inner, fault, kernel); \
		} else { \
			gather_loop<E, I, u64>(out, data, idx, n, nidx, axis_dim, inner, fault, kernel); \
		} \
	}
#define GATHER_ALL(sfx, E) \
	GATHER(sfx, E, i32, int) \
	GATHER(sfx, E, i64, i64)

GATHER_ALL(b8, u8)
GATHER_ALL(b16, u16)
GATHER_ALL(b32, unsigned)
GATHER_ALL(b64, u64)
GATHER_ALL(b128, u128)

// trilu keeps the upper (upper != 0: column − row >= k) or lower (column − row <= k) triangle
// of each rows × cols matrix of in and writes zeros elsewhere.
template <typename E>
__device__ __forceinline__ void trilu(E* out, const E* in, u64 n, u64 rows, u64 cols, i64 k, unsigned upper) {
	GRID_STRIDE_LOOP(t, n) {
		const i64 c = (i64)(t % cols), r = (i64)((t / cols) % rows);
		const bool keep = upper ? c - r >= k : c - r <= k;
		out[t] = keep ? in[t] : E();
	}
}

// fill writes the low bytes of bits into each of n elements.
template <typename E>
__device__ __forceinline__ void fill(E* out, u64 n, u64 bits) {
	const E v = (E)bits;
	GRID_STRIDE_LOOP(i, n) { out[i] = v; }
}

#define BY_SIZE(sfx, E) \
	extern "C" __global__ void cudaep_trilu_##sfx(E* out, const E* in, u64 n, u64 rows, u64 cols, i64 k, unsigned upper) { \
		trilu<E>(out, in, n, rows, cols, k, upper); \
	} \
	extern "C" __global__ void cudaep_fill_##sfx(E* out, u64 n, u64 bits) { fill<E>(out, n, bits); }

BY_SIZE(b8, u8)
BY_SIZE(b16, u16)
BY_SIZE(b32, unsigned)
BY_SIZE(b64, u64)

// cudaep_write8_b64 writes the first n (at most 8) of v0..v7 to out: Shape's values, known
// when the kernel is built.
extern "C" __global__ void cudaep_write8_b64(u64* out, u64 n, u64 v0, u64 v1, u64 v2, u64 v3, u64 v4, u64 v5, u64 v6, u64 v7) {
	const u64 v[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
	const unsigned i = threadIdx.x;
	if (i < n && i < 8) out[i] = v[i];
}

// Range: out[i] = start + i·delta, computed in float64 for the float types (rounded once on
// store) and in 64-bit integers for the integer types.
extern "C" __global__ void cudaep_range_f32(float* out, u64 n, double start, double delta) {
	GRID_STRIDE_LOOP(i, n) { out[i] = (float)(start + (double)i * delta); }
}
extern "C" __global__ void cudaep_range_f64(double* out, u64 n, double start, double delta) {
	GRID_STRIDE_LOOP(i, n) { out[i] = start + (double)i * delta; }
}
extern "C" __global__ void cudaep_range_i32(int* out, u64 n, i64 start, i64 delta) {
	GRID_STRIDE_LOOP(i, n) { out[i] = (int)(start + (i64)i * delta); }
}
extern "C" __global__ void cudaep_range_i64(i64* out, u64 n, i64 start, i64 delta) {
	GRID_STRIDE_LOOP(i, n) { out[i] = start + (i64)i * delta; }
}

// transpose writes the contiguous out (the six dimensions d, outermost first, padded in front
// with extent 1) from in read through the element strides s, where dimension a (not the last)
// has input stride 1: a permutation whose output's last dimension is not the input's innermost
// one. Each block moves TILE×TILE tiles of (dimension a, last dimension) through shared memory,
// reading along a and writing along the last dimension, so that both sides are coalesced in
// runs of TILE elements (TILE is 64 for 4- and 8-byte elements, 128 for 1- and 2-byte ones:
// runs of 128 to 512 bytes). The block is 32×8 threads; the grid strides over tiles. Index is
// 32-bit when the tile count allows (the per-tile index arithmetic is otherwise 64-bit
// division, which costs more than the tile's memory traffic).
template <typename E, int TILE, typename Index>
__device__ __forceinline__ void transpose_loop(E (*tile)[TILE + 1], E* out, const E* in, const i64* d, const i64* s, unsigned a,
	Index tiles) {
	i64 os[6];
	os[5] = 1;
#pragma unroll
	for (int j = 4; j >= 0; --j) os[j] = os[j + 1] * d[j + 1];
	const i64 da = d[a], oa = os[a], dl = d[5], sl = s[5];
	const Index ta = (Index)((da + TILE - 1) / TILE), tl = (Index)((dl + TILE - 1) / TILE);
	const unsigned tx = threadIdx.x, ty = threadIdx.y;
	for (Index id = blockIdx.x; id < tiles; id += gridDim.x) {
		Index q = id;
		const i64 l0 = (i64)(q % tl) * TILE;
		q /= tl;
		const i64 a0 = (i64)(q % ta) * TILE;
		q /= ta;
		i64 in_base = 0, out_base = 0;
#pragma unroll
		for (int j = 4; j >= 0; --j) {
			if (j == (int)a || d[j] == 1) continue;
			const i64 c = (i64)(q % (Index)d[j]);
			q /= (Index)d[j];
			in_base += c * s[j];
			out_base += c * os[j];
		}
		// Read: x walks dimension a (input-contiguous), y the last dimension.
#pragma unroll
		for (int r = 0; r < TILE; r += 8) {
#pragma unroll
			for (int cx = 0; cx < TILE; cx += 32) {
				const i64 ia = a0 + cx + tx, il = l0 + r + ty;
				if (ia < da && il < dl) tile[r + ty][cx + tx] = in[in_base + ia + il * sl];
			}
		}
		__syncthreads();
		// Write: x walks the last dimension (output-contiguous), y dimension a.
#pragma unroll
		for (int r = 0; r < TILE; r += 8) {
#pragma unroll
			for (int cx = 0; cx < TILE; cx += 32) {
				const i64 ia = a0 + r + ty, il = l0 + cx + tx;
				if (ia < da && il < dl) out[out_base + ia * oa + il] = tile[cx + tx][r + ty];
			}
		}
		__syncthreads();
	}
}

// transpose declares the one shared tile (here, so that the two index widths' loops share it)
// and picks the index width.
template <typename E, int TILE>
__device__ __forceinline__ void transpose(E* out, const E* in, const i64* d, const i64* s, unsigned a) {
	__shared__ E tile[TILE][TILE + 1];
	u64 tiles = (u64)((d[a] + TILE - 1) / TILE) * (u64)((d[5] + TILE - 1) / TILE);
	for (int j = 0; j < 5; ++j) {
		if (j != (int)a) tiles *= (u64)d[j];
	}
	if (tiles < 0x80000000ull) {
		transpose_loop<E, TILE, unsigned>(tile, out, in, d, s, a, (unsigned)tiles);
	} else {
		transpose_loop<E, TILE, u64>(tile, out, in, d, s, a, tiles);
	}
}

#define TRANSPOSE(sfx, E, TILE) \
	extern "C" __global__ void cudaep_transpose_##sfx(E* out, const E* in, i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, \
		i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5, unsigned a) { \
		const i64 d[6] = {d0, d1, d2, d3, d4, d5}; \
		const i64 s[6] = {s0, s1, s2, s3, s4, s5}; \
		transpose<E, TILE>(out, in, d, s, a); \
	}

TRANSPOSE(b8, u8, 128)
TRANSPOSE(b16, u16, 128)
TRANSPOSE(b32, unsigned, 64)
TRANSPOSE(b64, u64, 64)

// The batched 2-D transposes: out[b][c][r] = in[b][r][c] for an input of B matrices of R rows
// and C columns (the transformer's swap of the last two axes, and plain 2-D with B = 1), with
// no per-element index division: the grid is (column tiles, row tiles, batch), each block
// loops over the row tiles and batches the grid's y and z leave over (they are capped at
// 65535), and each thread walks its rows by pointer increments. The block is 32×8 threads.
// Two families (datamove.go picks the kernel; on the H200, 256 MiB, the pairs ran at 0.80-0.86
// of peak, the tiles of 64 rows at 0.67-0.85, the general transpose at 0.32-0.45):
//
//   - tiles<TR>: any element size and shape, the fallback (1- and 8-byte elements, odd sides,
//     addresses the pairs cannot use). A tile is TR input rows × 32 columns of E; a warp
//     reads 32 elements of a row and writes 32 elements of an output row (32×E bytes per
//     instruction); each thread moves TR/8 elements each way. Built with TR = 64 (tile64).
//   - pairs<K>: 2- and 4-byte elements, even R and C, addresses aligned to two elements. A
//     thread loads the two-element units W of two neighbouring input rows, (a0 a1) and
//     (b0 b1), and swaps halves into the units (a0 b0) and (a1 b1) of two output rows, so that
//     global loads, global stores and shared-memory accesses are all W wide (4 bytes for
//     16-bit elements, 8 for 32-bit ones). A tile is 16·K input rows × 64 columns; each thread
//     moves 2·K units each way. Built with K = 8 for 2-byte elements (pair8) and K = 4 for
//     4-byte ones (pair4).

// transpose_tiles is the tiles<TR> family; see above.
template <typename E, int TR>
__device__ __forceinline__ void transpose_tiles(E* out, const E* in, unsigned batch, unsigned R, unsigned C) {
	__shared__ E tile[TR][33];
	const unsigned tx = threadIdx.x, ty = threadIdx.y;
	const unsigned c0 = blockIdx.x * 32;
	const unsigned row_tiles = (R + TR - 1) / TR;
	const u64 plane = (u64)R * C;
	for (unsigned b = blockIdx.z; b < batch; b += gridDim.z) {
		for (unsigned rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
			const unsigned r0 = rt * TR;
			const bool full = r0 + TR <= R && c0 + 32 <= C;
			// Read: x walks the input's columns, y its rows.
			const E* src = in + b * plane + (u64)(r0 + ty) * C + c0 + tx;
			const u64 src_step = (u64)8 * C;
			if (full) {
#pragma unroll
				for (int j = 0; j < TR; j += 8, src += src_step) tile[j + ty][tx] = *src;
			} else {
#pragma unroll
				for (int j = 0; j < TR; j += 8, src += src_step) {
					if (r0 + j + ty < R && c0 + tx < C) tile[j + ty][tx] = *src;
				}
			}
			__syncthreads();
			// Write: x walks the output's columns (input rows), y its rows (input columns).
			E* dst = out + b * plane + (u64)(c0 + ty) * R + r0 + tx;
			const u64 dst_step = (u64)8 * R;
			if (full) {
#pragma unroll
				for (int j = 0; j < 32; j += 8, dst += dst_step) {
#pragma unroll
					for (int k = 0; k < TR; k += 32) dst[k] = tile[k + tx][j + ty];
				}
			} else {
#pragma unroll
				for (int j = 0; j < 32; j += 8, dst += dst_step) {
#pragma unroll
					for (int k = 0; k < TR; k += 32) {
						if (c0 + j + ty < C && r0 + k + tx < R) dst[k] = tile[k + tx][j + ty];
					}
				}
			}
			__syncthreads();
		}
	}
}

// transpose_pairs is the pairs<K> family; see above. W holds two E.
template <typename E, typename W, int K>
__device__ __forceinline__ void transpose_pairs(E* out, const E* in, unsigned batch, unsigned R, unsigned C) {
	const int U = 8 * K; // output units (input row pairs) per tile row
	// tile[c][u]: output row c of the tile (input column c0 + c), unit u (input rows 2u, 2u+1).
	__shared__ W tile[64][U + 1];
	const unsigned tx = threadIdx.x, ty = threadIdx.y;
	const unsigned Cu = C / 2, Ru = R / 2; // row lengths in units
	const unsigned cu0 = blockIdx.x * 32;  // first input unit column of the tile
	const unsigned row_tiles = (R + 16 * K - 1) / (16 * K);
	const u64 plane = (u64)R * Cu; // units per matrix
	const W* in_u = (const W*)in;
	W* out_u = (W*)out;
	const int shift = 8 * sizeof(E);
	const W low = ((W)1 << shift) - 1;
	// Lanes of the second half (of each group of 16 lanes for 8-byte units) store the odd
	// output row first, which spreads the two stores over all banks.
	const unsigned odd_first = (tx / (sizeof(W) == 8 ? 8 : 16)) & 1;
	for (unsigned b = blockIdx.z; b < batch; b += gridDim.z) {
		for (unsigned rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
			const unsigned r0 = rt * 16 * K;
			const bool full = r0 + 16 * K <= R && cu0 + 32 <= Cu;
			const W* src = in_u + b * plane + (u64)(r0 + 2 * ty) * Cu + cu0 + tx;
			const u64 src_step = (u64)16 * Cu;
			W lo[K], hi[K];
#pragma unroll
			for (int i = 0; i < K; ++i, src += src_step) {
				W a = 0, c = 0;
				if (full || (r0 + 16 * i + 2 * ty < R && cu0 + tx < Cu)) {
					a = src[0];
					c = src[Cu];
				}
				lo[i] = (a & low) | (c << shift);
				hi[i] = (a >> shift) | (c & (low << shift));
			}
#pragma unroll
			for (int i = 0; i < K; ++i) {
				const unsigned u = ty + 8 * i;
				tile[2 * tx + odd_first][u] = odd_first ? hi[i] : lo[i];
				tile[2 * tx + 1 - odd_first][u] = odd_first ? lo[i] : hi[i];
			}
			__syncthreads();
			const unsigned ru0 = r0 / 2;
			W* dst = out_u + b * plane + (u64)(2 * cu0 + ty) * Ru + ru0 + tx;
			const u64 dst_step = (u64)8 * Ru;
#pragma unroll
			for (int j = 0; j < 64; j += 8, dst += dst_step) {
#pragma unroll
				for (int k = 0; k < U; k += 32) {
					if (full || (2 * cu0 + j + ty < C && ru0 + k + tx < Ru)) dst[k] = tile[j + ty][k + tx];
				}
			}
			__syncthreads();
		}
	}
}

#define TRANSPOSE2D_TILES(sfx, E) \
	extern "C" __global__ void cudaep_transpose2d_tile64_##sfx(E* out, const E* in, unsigned batch, unsigned rows, unsigned cols) { \
		transpose_tiles<E, 64>(out, in, batch, rows, cols); \
	}
#define TRANSPOSE2D_PAIRS(name, sfx, E, W, K) \
	extern "C" __global__ void cudaep_transpose2d_##name##_##sfx(E* out, const E* in, unsigned batch, unsigned rows, unsigned cols) { \
		transpose_pairs<E, W, K>(out, in, batch, rows, cols); \
	}

TRANSPOSE2D_TILES(b8, u8)
TRANSPOSE2D_TILES(b16, u16)
TRANSPOSE2D_TILES(b32, unsigned)
TRANSPOSE2D_TILES(b64, u64)
TRANSPOSE2D_PAIRS(pair8, b16, u16, unsigned, 8)
TRANSPOSE2D_PAIRS(pair4, b32, unsigned, u64, 4)
