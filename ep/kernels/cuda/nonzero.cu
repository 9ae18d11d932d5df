// NonZero kernels of package kernels (nonzero.go launches them, sim_kernels.go mirrors them).
// One block of 1024 threads: it counts the non-zero elements, stores the count, then walks the
// input in tiles of blockDim.x elements, ranks each tile's non-zeros with a block-wide scan
// and writes their coordinates to indices[d * nnz + position], so that the first rank * nnz
// elements of indices are ONNX's [rank, nnz] output in row-major element order.

typedef unsigned long long u64;
typedef long long i64;

template <typename T>
__device__ __forceinline__ void nonzero(const T* x, i64* indices, i64* count, u64 n, unsigned rank,
	i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 d6, i64 d7) {
	__shared__ u64 warp_total[32];
	__shared__ u64 warp_base[32];
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;

	// Pass 1: the count.
	u64 mine = 0;
	for (u64 i = threadIdx.x; i < n; i += blockDim.x) mine += x[i] != T(0);
	for (int off = 16; off > 0; off >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, off);
	if (lane == 0) warp_total[warp] = mine;
	__syncthreads();
	u64 nnz = 0;
	for (unsigned w = 0; w < warps; ++w) nnz += warp_total[w];
	if (threadIdx.x == 0) *count = (i64)nnz;
	__syncthreads();

	// Pass 2: positions and coordinates, tile by tile.
	const i64 dims[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
	const unsigned first = 8 - rank;
	u64 done = 0;
	for (u64 tile = 0; tile < n; tile += blockDim.x) {
		const u64 i = tile + threadIdx.x;
		const bool flag = i < n && x[i] != T(0);
		const unsigned ballot = __ballot_sync(0xffffffffu, flag);
		if (lane == 0) warp_total[warp] = __popc(ballot);
		__syncthreads();
		if (threadIdx.x == 0) {
			u64 sum = 0;
			for (unsigned w = 0; w < warps; ++w) {
				warp_base[w] = sum;
				sum += warp_total[w];
			}
			warp_total[0] = sum;  // the tile's total, read below after the barrier
		}
		__syncthreads();
		if (flag) {
			const u64 pos = done + warp_base[warp] + __popc(ballot & ((1u << lane) - 1u));
			u64 r = i;
#pragma unroll
			for (int d = 7; d >= 0; --d) {
				const u64 c = r % (u64)dims[d];
				r /= (u64)dims[d];
				if ((unsigned)d >= first) indices[(u64)(d - first) * nnz + pos] = (i64)c;
			}
		}
		done += warp_total[0];
		__syncthreads();
	}
}

#define NONZERO_KERNEL(name, T) \
	extern "C" __global__ void cudaep_nonzero_##name(const T* x, i64* indices, i64* count, u64 n, unsigned rank, \
		i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 d6, i64 d7) { \
		nonzero<T>(x, indices, count, n, rank, d0, d1, d2, d3, d4, d5, d6, d7); \
	}

NONZERO_KERNEL(f32, float)
NONZERO_KERNEL(i32, int)
NONZERO_KERNEL(i64, long long)
NONZERO_KERNEL(b8, unsigned char)
