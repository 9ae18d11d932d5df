// common.cuh: what the CUDA sources of package kernels share: integer types, the 16-bit float
// storage types and their conversions (float32 arithmetic, round to nearest even on store),
// 16-byte packs for vectorized loads, and the grid-stride loop. Included by the .cu files;
// mkptx.sh compiles only the .cu files.
#pragma once

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned short u16;
typedef unsigned char u8;

// half_t and bf16_t hold the bits of IEEE binary16 and bfloat16 values; kernels compute in
// float32 and convert on load and store.
struct half_t {
	u16 bits;
};
struct bf16_t {
	u16 bits;
};

#define GRID_STRIDE_LOOP(i, n) \
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half_t x) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
	return f;
}
__device__ __forceinline__ float to_float(bf16_t x) { return __uint_as_float(((unsigned)x.bits) << 16); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ half_t from_float<half_t>(float x) {
	half_t h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
	return h;
}
// bfloat16 rounding by hand: cvt.rn.bf16.f32 needs sm_80 and the PTX targets sm_75.
template <>
__device__ __forceinline__ bf16_t from_float<bf16_t>(float x) {
	unsigned u = __float_as_uint(x);
	bf16_t b;
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		b.bits = (u16)((u >> 16) | 0x40u); // NaN stays a quiet NaN
	} else {
		u += 0x7fffu + ((u >> 16) & 1u);
		b.bits = (u16)(u >> 16);
	}
	return b;
}

// Pack is 16 bytes of T, the unit of the vectorized loops: one 128-bit load or store.
template <typename T>
struct __attribute__((aligned(16))) Pack {
	T v[16 / sizeof(T)];
};

// aligned16 reports whether every address is a multiple of 16 bytes.
__device__ __forceinline__ bool aligned16(const void* a, const void* b, const void* c) {
	return (((u64)a | (u64)b | (u64)c) & 15u) == 0;
}

// arrive_last counts the calling block in *counter, one of `blocks` blocks that each call it
// once their results are stored, and tells every thread of the block whether it arrived last.
// Every thread of the block must call it. The count is one atomic add with acquire-release
// semantics at GPU scope, by thread 0 between two barriers: the barrier before it puts every
// thread's stores in what the add releases, and the last block's add acquires what every other
// block released, so after the barrier after it the block may read all their stores (from L2:
// ld.global.cg, as the split reductions do). A __threadfence() in every thread before a relaxed
// atomicAdd and another in the last block after it cost 0.35 us more per split GEMV launch on
// the H200 (bench/experiments/gemv_layer.cu).
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned blocks) {
	__shared__ unsigned last;
	__syncthreads();
	if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
		unsigned old;
		asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
		last = old == blocks - 1;
	}
	__syncthreads();
	return last;
}

// DataFault is the Library's data fault word (faults.go), in device memory: the id of the
// first kernel that met a value in device data it could not use (0: none yet), the index of
// the input that held it, the value, and the address of the word's mirror, a DataFault record
// in host-mapped pinned memory that the host reads without a copy (its mirror field unused).
// Kernels that read indices or lengths from device data take the word's address and their id
// as their last two arguments (DataFault* fault, unsigned kernel) and record with
// record_fault; the host reads the mirror and clears both with Library.TakeFault once the work
// is done.
struct DataFault {
	unsigned kernel;
	unsigned input;
	i64 value;
	DataFault* mirror;
};

// record_fault records (kernel, input, value) in *fault unless a fault is already there: the
// first fault since the host cleared the word wins (one compare-and-swap of the kernel id from
// 0, on device memory; the winning thread then stores the rest, and the record into the
// mirror with plain stores, its id last behind a system-wide fence). The plain read first
// keeps threads of a faulting launch from contending on the atomic.
__device__ __forceinline__ void record_fault(DataFault* fault, unsigned kernel, unsigned input, i64 value) {
	if (*(volatile unsigned*)&fault->kernel != 0) return;
	if (atomicCAS(&fault->kernel, 0u, kernel) == 0u) {
		fault->input = input;
		fault->value = value;
		DataFault* m = fault->mirror;
		m->input = input;
		m->value = value;
		__threadfence_system();
		*(volatile unsigned*)&m->kernel = kernel;
	}
}
