// Softmax kernels of package kernels (softmax.go launches them, sim_kernels.go mirrors them).
// The input is viewed as [outer, length, inner] and normalized along length: exp(x - max) /
// sum(exp(x - max)), accumulated in float32 for float32, float16 and bfloat16 data (suffixes
// f32, f16, bf16).

#include "common.cuh"

// block_reduce combines v over the block (blockDim.x a multiple of 32, at most 1024) with op,
// using scratch[32]; every thread gets the result. It starts and ends with a barrier, so
// scratch may be reused right away.
template <bool IsMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
	for (int off = 16; off > 0; off >>= 1) {
		float o = __shfl_xor_sync(0xffffffffu, v, off);
		v = IsMax ? fmaxf(v, o) : v + o;
	}
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
	__syncthreads();
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : (IsMax ? __int_as_float((int)0xff800000) : 0.0f);
	for (int off = 16; off > 0; off >>= 1) {
		float o = __shfl_xor_sync(0xffffffffu, v, off);
		v = IsMax ? fmaxf(v, o) : v + o;
	}
	return v;
}

// softmax_rows normalizes rows contiguous rows of length elements, one block per row
// (grid-stride over rows).
template <typename T>
__device__ __forceinline__ void softmax_rows(T* out, const T* x, u64 rows, u64 length) {
	__shared__ float scratch[32];
	for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
		const T* xr = x + row * length;
		T* yr = out + row * length;
		float m = __int_as_float((int)0xff800000);
		for (u64 j = threadIdx.x; j < length; j += blockDim.x) m = fmaxf(m, to_float(xr[j]));
		m = block_reduce<true>(m, scratch);
		float s = 0.0f;
		for (u64 j = threadIdx.x; j < length; j += blockDim.x) s += expf(to_float(xr[j]) - m);
		s = block_reduce<false>(s, scratch);
		const float inv = 1.0f / s;
		for (u64 j = threadIdx.x; j < length; j += blockDim.x) yr[j] = from_float<T>(expf(to_float(xr[j]) - m) * inv);
	}
}

// softmax_cols normalizes along the middle axis of [outer, length, inner] with inner > 1: one
// thread per (outer, inner) column, so that neighbouring threads touch neighbouring addresses.
template <typename T>
__device__ __forceinline__ void softmax_cols(T* out, const T* x, u64 outer, u64 length, u64 inner) {
	const u64 cols = outer * inner;
	for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (u64)gridDim.x * blockDim.x) {
		const u64 base = (c / inner) * length * inner + c % inner;
		float m = __int_as_float((int)0xff800000);
		for (u64 j = 0; j < length; ++j) m = fmaxf(m, to_float(x[base + j * inner]));
		float s = 0.0f;
		for (u64 j = 0; j < length; ++j) s += expf(to_float(x[base + j * inner]) - m);
		const float inv = 1.0f / s;
		for (u64 j = 0; j < length; ++j) out[base + j * inner] = from_float<T>(expf(to_float(x[base + j * inner]) - m) * inv);
	}
}

#define SOFTMAX(sfx, T) \
	extern "C" __global__ void cudaep_softmax_rows_##sfx(T* out, const T* x, u64 rows, u64 length) { \
		softmax_rows<T>(out, x, rows, length); \
	} \
	extern "C" __global__ void cudaep_softmax_cols_##sfx(T* out, const T* x, u64 outer, u64 length, u64 inner) { \
		softmax_cols<T>(out, x, outer, length, inner); \
	}

SOFTMAX(f32, float)
SOFTMAX(f16, half_t)
SOFTMAX(bf16, bf16_t)
