// Elementwise kernels of package kernels: binary arithmetic with numpy broadcasting, the
// activations, and the expand (broadcast copy) used by Gemm's C. float32 data, 64-bit sizes,
// grid-stride loops. The Go side (elementwise.go, matmul.go) launches them and sim_kernels.go
// mirrors them for the simulated device, with the same argument lists.

typedef unsigned long long u64;
typedef long long i64;

#define GRID_STRIDE_LOOP(i, n) \
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

struct AddOp { static __device__ __forceinline__ float apply(float a, float b) { return a + b; } };
struct SubOp { static __device__ __forceinline__ float apply(float a, float b) { return a - b; } };
struct MulOp { static __device__ __forceinline__ float apply(float a, float b) { return a * b; } };
struct DivOp { static __device__ __forceinline__ float apply(float a, float b) { return a / b; } };

// Broadcast arguments: six dimensions outermost first (leading ones padded with extent 1 and
// stride 0) and, per input, its element stride along each (0 where it repeats). The output is
// contiguous over the dimensions.
#define BCAST_PARAMS \
	i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, \
	i64 as0, i64 as1, i64 as2, i64 as3, i64 as4, i64 as5, \
	i64 bs0, i64 bs1, i64 bs2, i64 bs3, i64 bs4, i64 bs5

// bcast_offsets splits the flat output index i into coordinates, innermost first, and returns
// both inputs' element offsets. Dimensions of extent 1 (the padding) are skipped. Index is
// 32-bit when the output has fewer than 2^31 elements (64-bit division is several times
// slower; below 2^31, i plus the grid stride, at most 2^21 as launched, cannot wrap).
template <typename Index>
__device__ __forceinline__ void bcast_offsets(Index i, const i64* d, const i64* as, const i64* bs, i64& ai, i64& bi) {
	ai = 0;
	bi = 0;
#pragma unroll
	for (int k = 5; k > 0; --k) {
		if (d[k] != 1) {
			const Index c = i % (Index)d[k];
			i /= (Index)d[k];
			ai += (i64)c * as[k];
			bi += (i64)c * bs[k];
		}
	}
	ai += (i64)i * as[0];
	bi += (i64)i * bs[0];
}

template <typename Op, typename Index>
__device__ __forceinline__ void binary_bcast_loop(float* out, const float* a, const float* b, Index n,
	const i64* d, const i64* as, const i64* bs) {
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 ai, bi;
		bcast_offsets<Index>(i, d, as, bs, ai, bi);
		out[i] = Op::apply(a[ai], b[bi]);
	}
}

template <typename Op>
__device__ __forceinline__ void binary_same(float* out, const float* a, const float* b, u64 n) {
	GRID_STRIDE_LOOP(i, n) { out[i] = Op::apply(a[i], b[i]); }
}

template <typename Op>
__device__ __forceinline__ void binary_bcast(float* out, const float* a, const float* b, u64 n, BCAST_PARAMS) {
	const i64 d[6] = {d0, d1, d2, d3, d4, d5};
	const i64 as[6] = {as0, as1, as2, as3, as4, as5};
	const i64 bs[6] = {bs0, bs1, bs2, bs3, bs4, bs5};
	if (n < 0x80000000ull) {
		binary_bcast_loop<Op, unsigned>(out, a, b, (unsigned)n, d, as, bs);
	} else {
		binary_bcast_loop<Op, u64>(out, a, b, n, d, as, bs);
	}
}

#define BINARY_KERNELS(name, Op) \
	extern "C" __global__ void cudaep_##name##_f32(float* out, const float* a, const float* b, u64 n) { \
		binary_same<Op>(out, a, b, n); \
	} \
	extern "C" __global__ void cudaep_##name##_bcast_f32(float* out, const float* a, const float* b, u64 n, BCAST_PARAMS) { \
		binary_bcast<Op>(out, a, b, n, d0, d1, d2, d3, d4, d5, as0, as1, as2, as3, as4, as5, bs0, bs1, bs2, bs3, bs4, bs5); \
	}

BINARY_KERNELS(add, AddOp)
BINARY_KERNELS(sub, SubOp)
BINARY_KERNELS(mul, MulOp)
BINARY_KERNELS(div, DivOp)

struct ReluOp { static __device__ __forceinline__ float apply(float x) { return x > 0.0f ? x : 0.0f; } };
struct SigmoidOp { static __device__ __forceinline__ float apply(float x) { return 1.0f / (1.0f + expf(-x)); } };
struct TanhOp { static __device__ __forceinline__ float apply(float x) { return tanhf(x); } };
// Gelu with the error function: x/2 · (1 + erf(x/√2)).
struct GeluOp { static __device__ __forceinline__ float apply(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); } };
// Gelu's tanh approximation: x/2 · (1 + tanh(√(2/π) · (x + 0.044715·x³))).
struct GeluTanhOp {
	static __device__ __forceinline__ float apply(float x) {
		return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
	}
};

template <typename Op>
__device__ __forceinline__ void unary(float* out, const float* x, u64 n) {
	GRID_STRIDE_LOOP(i, n) { out[i] = Op::apply(x[i]); }
}

#define UNARY_KERNEL(name, Op) \
	extern "C" __global__ void cudaep_##name##_f32(float* out, const float* x, u64 n) { unary<Op>(out, x, n); }

UNARY_KERNEL(relu, ReluOp)
UNARY_KERNEL(sigmoid, SigmoidOp)
UNARY_KERNEL(tanh, TanhOp)
UNARY_KERNEL(gelu, GeluOp)
UNARY_KERNEL(gelu_tanh, GeluTanhOp)

template <typename Index>
__device__ __forceinline__ void expand_loop(float* out, const float* in, Index n, const i64* d, const i64* s) {
	const i64 zero[6] = {0, 0, 0, 0, 0, 0};
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 ai, unused;
		bcast_offsets<Index>(i, d, s, zero, ai, unused);
		out[i] = in[ai];
	}
}

// cudaep_expand_f32 writes the contiguous out[n] from in, read through the strides s0..s5
// over the dimensions d0..d5 (0 where in repeats).
extern "C" __global__ void cudaep_expand_f32(float* out, const float* in, u64 n,
	i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5,
	i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5) {
	const i64 d[6] = {d0, d1, d2, d3, d4, d5};
	const i64 s[6] = {s0, s1, s2, s3, s4, s5};
	if (n < 0x80000000ull) {
		expand_loop<unsigned>(out, in, (unsigned)n, d, s);
	} else {
		expand_loop<u64>(out, in, n, d, s);
	}
}
