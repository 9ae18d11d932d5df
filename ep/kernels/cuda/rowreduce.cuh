// rowreduce.cuh: block-wide reductions for the kernels that give a row to a block (norm.cu,
// reduce.cu). Included by the .cu files; mkptx.sh compiles only the .cu files.
#pragma once

#include "common.cuh"

// SumOp and MaxOp combine float32 partial results. MaxOp propagates NaN, as numpy's max does.
struct SumOp {
	static __device__ __forceinline__ float identity() { return 0.0f; }
	static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
};
struct MaxOp {
	static __device__ __forceinline__ float identity() { return __int_as_float((int)0xff800000); }
	static __device__ __forceinline__ float combine(float a, float b) { return (a > b || a != a) ? a : b; }
};

// warp_reduce combines v over the 32 lanes of a warp; every lane gets the result.
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v) {
	for (int off = 16; off > 0; off >>= 1) v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, off));
	return v;
}

// block_reduce combines v over the block (blockDim.x a multiple of 32, at most 1024) using
// scratch[32]; every thread gets the result. It starts and ends with a barrier, so scratch may
// be reused right away.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
	v = warp_reduce<Op>(v);
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
	__syncthreads();
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : Op::identity();
	v = warp_reduce<Op>(v);
	__syncthreads();
	return v;
}

// block_sum2 sums a and b over the block at once, with scratch[64].
__device__ __forceinline__ void block_sum2(float& a, float& b, float* scratch) {
	a = warp_reduce<SumOp>(a);
	b = warp_reduce<SumOp>(b);
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
	__syncthreads();
	if (lane == 0) {
		scratch[warp] = a;
		scratch[32 + warp] = b;
	}
	__syncthreads();
	a = lane < warps ? scratch[lane] : 0.0f;
	b = lane < warps ? scratch[32 + lane] : 0.0f;
	a = warp_reduce<SumOp>(a);
	b = warp_reduce<SumOp>(b);
	__syncthreads();
}

// aligned16_all reports whether every non-null address is a multiple of 16 bytes.
__device__ __forceinline__ bool aligned16_all(const void* a, const void* b, const void* c, const void* d,
	const void* e, const void* f, const void* g) {
	return (((u64)a | (u64)b | (u64)c | (u64)d | (u64)e | (u64)f | (u64)g) & 15u) == 0;
}
