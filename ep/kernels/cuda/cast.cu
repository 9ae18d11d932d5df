// Cast kernels of package kernels (cast.go launches them, sim_kernels.go mirrors them):
// cudaep_cast_<from>_<to>(out, x, n) among float32, float16, bfloat16, int32, int64 and bool
// (suffixes f32, f16, bf16, i32, i64, b8). Floating-point values convert through float32
// (to nearest, ties to even, as cvt.rn does); floating-point to integer truncates toward zero
// (cvt.rzi, which saturates and gives 0 for NaN); int64 to int32 keeps the low 32 bits;
// anything to bool is "not zero" (NaN is true); bool is 0 or 1.

#include "common.cuh"

// as_float, as_i64 and nonzero read an element of any of the six types.
__device__ __forceinline__ float as_float(float x) { return x; }
__device__ __forceinline__ float as_float(half_t x) { return to_float(x); }
__device__ __forceinline__ float as_float(bf16_t x) { return to_float(x); }
__device__ __forceinline__ float as_float(int x) { return (float)x; }
__device__ __forceinline__ float as_float(i64 x) { return (float)x; }
__device__ __forceinline__ float as_float(u8 x) { return x ? 1.0f : 0.0f; }

__device__ __forceinline__ i64 as_i64(float x) { return (i64)x; }
__device__ __forceinline__ i64 as_i64(half_t x) { return (i64)to_float(x); }
__device__ __forceinline__ i64 as_i64(bf16_t x) { return (i64)to_float(x); }
__device__ __forceinline__ i64 as_i64(int x) { return x; }
__device__ __forceinline__ i64 as_i64(i64 x) { return x; }
__device__ __forceinline__ i64 as_i64(u8 x) { return x ? 1 : 0; }

__device__ __forceinline__ bool nonzero(float x) { return x != 0.0f; }
__device__ __forceinline__ bool nonzero(half_t x) { return (x.bits & 0x7fffu) != 0; }
__device__ __forceinline__ bool nonzero(bf16_t x) { return (x.bits & 0x7fffu) != 0; }
__device__ __forceinline__ bool nonzero(int x) { return x != 0; }
__device__ __forceinline__ bool nonzero(i64 x) { return x != 0; }
__device__ __forceinline__ bool nonzero(u8 x) { return x != 0; }

// convert<To>(x) is the cast of one element.
template <typename To>
struct Convert;
template <>
struct Convert<float> {
	template <typename From>
	static __device__ __forceinline__ float apply(From x) { return as_float(x); }
};
template <>
struct Convert<half_t> {
	template <typename From>
	static __device__ __forceinline__ half_t apply(From x) { return from_float<half_t>(as_float(x)); }
};
template <>
struct Convert<bf16_t> {
	template <typename From>
	static __device__ __forceinline__ bf16_t apply(From x) { return from_float<bf16_t>(as_float(x)); }
};
template <>
struct Convert<int> {
	// float32 to int32 directly (cvt.rzi.s32.f32 saturates at the int32 limits).
	static __device__ __forceinline__ int apply(float x) { return (int)x; }
	static __device__ __forceinline__ int apply(half_t x) { return (int)to_float(x); }
	static __device__ __forceinline__ int apply(bf16_t x) { return (int)to_float(x); }
	template <typename From>
	static __device__ __forceinline__ int apply(From x) { return (int)as_i64(x); }
};
template <>
struct Convert<i64> {
	template <typename From>
	static __device__ __forceinline__ i64 apply(From x) { return as_i64(x); }
};
template <>
struct Convert<u8> {
	template <typename From>
	static __device__ __forceinline__ u8 apply(From x) { return nonzero(x) ? 1 : 0; }
};

template <typename From, typename To>
__device__ __forceinline__ void cast(To* out, const From* x, u64 n) {
	GRID_STRIDE_LOOP(i, n) { out[i] = Convert<To>::apply(x[i]); }
}

#define CAST(fs, From, ts, To) \
	extern "C" __global__ void cudaep_cast_##fs##_##ts(To* out, const From* x, u64 n) { cast<From, To>(out, x, n); }
#define CAST_FROM(fs, From) \
	CAST(fs, From, f32, float) \
	CAST(fs, From, f16, half_t) \
	CAST(fs, From, bf16, bf16_t) \
	CAST(fs, From, i32, int) \
	CAST(fs, From, i64, i64) \
	CAST(fs, From, b8, u8)

CAST_FROM(f32, float)
CAST_FROM(f16, half_t)
CAST_FROM(bf16, bf16_t)
CAST_FROM(i32, int)
CAST_FROM(i64, i64)
CAST_FROM(b8, u8)
