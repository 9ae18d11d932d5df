// syntax_shim.h lets clang check the syntax of the CUDA sources here without the CUDA toolkit
// (mkptx.sh's "check" mode: clang -fsyntax-only --cuda-device-only -nocudainc -include
// syntax_shim.h). nvcc never sees it: it provides these declarations itself.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))

#include <__clang_cuda_builtin_vars.h>

__device__ float expf(float);
__device__ float __expf(float);
__device__ float __fdividef(float, float);
__device__ float erff(float);
__device__ float tanhf(float);
__device__ float fmaxf(float, float);
__device__ float __int_as_float(int);
__device__ void __syncthreads(void);
__device__ float __shfl_xor_sync(unsigned, float, int);
__device__ unsigned long long __shfl_xor_sync(unsigned, unsigned long long, int);
__device__ unsigned __ballot_sync(unsigned, int);
__device__ int __popc(unsigned);
__device__ float powf(float, float);
__device__ float fmaf(float, float, float);
__device__ float fabsf(float);
__device__ float sqrtf(float);
__device__ float logf(float);
__device__ float sinf(float);
__device__ float cosf(float);
__device__ float rsqrtf(float);
__device__ float __uint_as_float(unsigned);
__device__ unsigned __float_as_uint(float);
__device__ void __syncwarp(unsigned mask = 0xffffffffu);
__device__ int __any_sync(unsigned, int);
__device__ float __shfl_sync(unsigned, float, int);
__device__ float __ldcg(const float*);
__device__ int __syncthreads_or(int);
__device__ void __threadfence(void);
__device__ void __threadfence_system(void);
__device__ unsigned atomicAdd(unsigned*, unsigned);
__device__ unsigned atomicCAS(unsigned*, unsigned, unsigned);
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
