// Elementwise kernels of package kernels: binary arithmetic (float, and int32/int64 for Add,
// Sub, Mul and Div) and comparisons with numpy broadcasting, the unary ops, Where, the
// broadcast copy (Expand, Transpose, Slice, Gemm's C), and the fused ops of the cudaep domain
// (SiluMul, RotateHalf: fused.go). Floating-point data is float32, float16
// or bfloat16 (suffixes f32, f16, bf16), computed in float32; copies go by element size (b8,
// b16, b32, b64). 64-bit sizes, grid-stride loops, 128-bit loads and stores where the
// same-shape kernels' pointers allow. The Go side (elementwise.go, matmul.go, datamove.go)
// launches them and sim_kernels.go mirrors them for the simulated device, with the same
// argument lists.

#include "common.cuh"

// Binary ops on float32 values.
struct AddOp { static __device__ __forceinline__ float apply(float a, float b) { return a + b; } };
struct SubOp { static __device__ __forceinline__ float apply(float a, float b) { return a - b; } };
struct MulOp { static __device__ __forceinline__ float apply(float a, float b) { return a * b; } };
struct DivOp { static __device__ __forceinline__ float apply(float a, float b) { return a / b; } };
struct PowOp { static __device__ __forceinline__ float apply(float a, float b) { return powf(a, b); } };

// Comparisons, on the values' own type (float32 for the float types).
struct EqualOp { template <typename V> static __device__ __forceinline__ u8 apply(V a, V b) { return a == b; } };
struct LessOp { template <typename V> static __device__ __forceinline__ u8 apply(V a, V b) { return a < b; } };
struct GreaterOp { template <typename V> static __device__ __forceinline__ u8 apply(V a, V b) { return a > b; } };

__device__ __forceinline__ float cmp_value(float x) { return x; }
__device__ __forceinline__ float cmp_value(half_t x) { return to_float(x); }
__device__ __forceinline__ float cmp_value(bf16_t x) { return to_float(x); }
__device__ __forceinline__ int cmp_value(int x) { return x; }
__device__ __forceinline__ i64 cmp_value(i64 x) { return x; }
__device__ __forceinline__ unsigned cmp_value(u8 x) { return x != 0; }

// Element functions: FloatFn applies a float32 op to T elements, CmpFn a comparison giving a
// bool byte.
template <typename Op, typename T>
struct FloatFn {
	typedef T Out;
	static __device__ __forceinline__ T apply(T a, T b) { return from_float<T>(Op::apply(to_float(a), to_float(b))); }
};
template <typename Op, typename T>
struct CmpFn {
	typedef u8 Out;
	static __device__ __forceinline__ u8 apply(T a, T b) { return Op::apply(cmp_value(a), cmp_value(b)); }
};

// bcast_offsets splits the flat output index i into coordinates over D dimensions (outermost
// first, extent-1 padding skipped) and returns the element offset of each of K operands, whose
// strides are s[k*D + j]. Index is 32-bit when the output has fewer than 2^31 elements (64-bit
// division is several times slower; below 2^31, i plus the grid stride, at most 2^21 as
// launched, cannot wrap).
template <int D, int K, typename Index>
__device__ __forceinline__ void bcast_offsets(Index i, const i64* d, const i64* s, i64* off) {
#pragma unroll
	for (int k = 0; k < K; ++k) off[k] = 0;
#pragma unroll
	for (int j = D - 1; j > 0; --j) {
		if (d[j] != 1) {
			const Index c = i % (Index)d[j];
			i /= (Index)d[j];
#pragma unroll
			for (int k = 0; k < K; ++k) off[k] += (i64)c * s[k * D + j];
		}
	}
#pragma unroll
	for (int k = 0; k < K; ++k) off[k] += (i64)i * s[k * D];
}

// Broadcast arguments: six dimensions outermost first (leading ones padded with extent 1 and
// stride 0) and, per input, its element stride along each (0 where it repeats). The output is
// contiguous over the dimensions.
#define BCAST_PARAMS \
	i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, \
	i64 as0, i64 as1, i64 as2, i64 as3, i64 as4, i64 as5, \
	i64 bs0, i64 bs1, i64 bs2, i64 bs3, i64 bs4, i64 bs5
#define BCAST_ARGS d0, d1, d2, d3, d4, d5, as0, as1, as2, as3, as4, as5, bs0, bs1, bs2, bs3, bs4, bs5

// bcast_packed reports whether a broadcast loop over D dimensions with K operands of E may run
// in 16-byte packs of the output: the innermost extent is a whole number of packs, and every
// operand either walks the innermost dimension contiguously (stride 1, outer strides whole packs,
// its base 16-byte aligned) or repeats along it (stride 0: one element per pack).
template <typename E, int D, int K>
__device__ __forceinline__ bool bcast_packed(const void* out, const void* const* in, const i64* d, const i64* s) {
	const int V = 16 / sizeof(E);
	if (d[D - 1] % V != 0 || ((u64)out & 15) != 0) return false;
#pragma unroll
	for (int k = 0; k < K; ++k) {
		const i64 inner = s[k * D + D - 1];
		if (inner == 0) continue;
		if (inner != 1 || ((u64)in[k] & 15) != 0) return false;
#pragma unroll
		for (int j = 0; j < D - 1; ++j)
			if (s[k * D + j] % V != 0) return false;
	}
	return true;
}

// load_pack reads the pack of an operand at element offset off: 16 bytes when it walks the
// innermost dimension (inner != 0), else its one element repeated.
template <typename E>
__device__ __forceinline__ Pack<E> load_pack(const E* p, i64 off, i64 inner) {
	if (inner) return *(const Pack<E>*)(p + off);
	Pack<E> r;
	const E v = p[off];
#pragma unroll
	for (int e = 0; e < 16 / (int)sizeof(E); ++e) r.v[e] = v;
	return r;
}

// Fn's apply is called on fn, so that an Fn may carry state (IntDivFn: the fault word); the
// stateless ones are default-constructed.
template <typename Fn, typename T, typename Index>
__device__ __forceinline__ void binary_bcast_loop(typename Fn::Out* out, const T* a, const T* b, Index n, const i64* d, const i64* s,
	const Fn& fn) {
	const void* in[2] = {a, b};
	if (sizeof(typename Fn::Out) == sizeof(T) && bcast_packed<T, 6, 2>(out, in, d, s)) {
		// Whole packs: the offsets once per 16 bytes, 16-byte loads and stores.
		const int V = 16 / sizeof(T);
		for (Index p = (Index)blockIdx.x * blockDim.x + threadIdx.x; p < n / V; p += (Index)gridDim.x * blockDim.x) {
			i64 off[2];
			bcast_offsets<6, 2, Index>(p * V, d, s, off);
			const Pack<T> x = load_pack<T>(a, off[0], s[5]), y = load_pack<T>(b, off[1], s[11]);
			Pack<typename Fn::Out> r;
#pragma unroll
			for (int e = 0; e < V; ++e) r.v[e] = fn.apply(x.v[e], y.v[e]);
			*(Pack<typename Fn::Out>*)(out + p * V) = r;
		}
		return;
	}
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 off[2];
		bcast_offsets<6, 2, Index>(i, d, s, off);
		out[i] = fn.apply(a[off[0]], b[off[1]]);
	}
}

template <typename Fn, typename T>
__device__ __forceinline__ void binary_bcast(typename Fn::Out* out, const T* a, const T* b, u64 n, BCAST_PARAMS, const Fn& fn = Fn()) {
	const i64 d[6] = {d0, d1, d2, d3, d4, d5};
	const i64 s[12] = {as0, as1, as2, as3, as4, as5, bs0, bs1, bs2, bs3, bs4, bs5};
	if (n < 0x80000000ull) {
		binary_bcast_loop<Fn, T, unsigned>(out, a, b, (unsigned)n, d, s, fn);
	} else {
		binary_bcast_loop<Fn, T, u64>(out, a, b, n, d, s, fn);
	}
}

// binary_same is a float op over same-shape operands: 16-byte packs when every pointer is
// 16-byte aligned, then the tail (or everything) one element at a time.
template <typename Op, typename T>
__device__ __forceinline__ void binary_same(T* out, const T* a, const T* b, u64 n) {
	const u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
	u64 done = 0;
	if (aligned16(out, a, b)) {
		const int V = 16 / sizeof(T);
		const u64 nv = n / V;
		const Pack<T>* pa = (const Pack<T>*)a;
		const Pack<T>* pb = (const Pack<T>*)b;
		Pack<T>* po = (Pack<T>*)out;
		for (u64 i = start; i < nv; i += stride) {
			const Pack<T> x = pa[i], y = pb[i];
			Pack<T> z;
#pragma unroll
			for (int j = 0; j < V; ++j) z.v[j] = from_float<T>(Op::apply(to_float(x.v[j]), to_float(y.v[j])));
			po[i] = z;
		}
		done = nv * V;
	}
	for (u64 i = done + start; i < n; i += stride) out[i] = from_float<T>(Op::apply(to_float(a[i]), to_float(b[i])));
}

template <typename Op, typename T>
__device__ __forceinline__ void compare_same(u8* out, const T* a, const T* b, u64 n) {
	GRID_STRIDE_LOOP(i, n) { out[i] = Op::apply(cmp_value(a[i]), cmp_value(b[i])); }
}

#define FLOAT_BINARY(name, Op, sfx, T) \
	extern "C" __global__ void cudaep_##name##_##sfx(T* out, const T* a, const T* b, u64 n) { binary_same<Op, T>(out, a, b, n); } \
	extern "C" __global__ void cudaep_##name##_bcast_##sfx(T* out, const T* a, const T* b, u64 n, BCAST_PARAMS) { \
		binary_bcast<FloatFn<Op, T>, T>(out, a, b, n, BCAST_ARGS); \
	}
#define FLOAT_BINARY_ALL(name, Op) \
	FLOAT_BINARY(name, Op, f32, float) \
	FLOAT_BINARY(name, Op, f16, half_t) \
	FLOAT_BINARY(name, Op, bf16, bf16_t)

FLOAT_BINARY_ALL(add, AddOp)
FLOAT_BINARY_ALL(sub, SubOp)
FLOAT_BINARY_ALL(mul, MulOp)
FLOAT_BINARY_ALL(div, DivOp)
FLOAT_BINARY_ALL(pow, PowOp)

// cudaep.SiluMul: a · sigmoid(a) · b, the gated MLP's silu(gate) · up, in float32 with one
// rounding on store; same-shape operands only (binary_same's packs and flat grid).
struct SiluMulOp {
	static __device__ __forceinline__ float apply(float a, float b) { return a / (1.0f + expf(-a)) * b; }
};
#define SILU_MUL(sfx, T) \
	extern "C" __global__ void cudaep_silu_mul_##sfx(T* out, const T* a, const T* b, u64 n) { binary_same<SiluMulOp, T>(out, a, b, n); }
SILU_MUL(f32, float)
SILU_MUL(f16, half_t)
SILU_MUL(bf16, bf16_t)

// Integer arithmetic (int32 and int64, suffixes i32 and i64): two's-complement wrapping on
// overflow, division truncated toward zero; x / 0 is 0 and x / -1 is the wrapped negation,
// defined here because the hardware's results there are not. A division by zero is an error
// in ONNX Runtime's CPU execution provider: the Div kernels record it in the fault word (input
// 1, B, value 0), their last two arguments.
struct IntAddOp { template <typename V, typename U> static __device__ __forceinline__ V apply(V a, V b) { return (V)((U)a + (U)b); } };
struct IntSubOp { template <typename V, typename U> static __device__ __forceinline__ V apply(V a, V b) { return (V)((U)a - (U)b); } };
struct IntMulOp { template <typename V, typename U> static __device__ __forceinline__ V apply(V a, V b) { return (V)((U)a * (U)b); } };
struct IntDivOp {
	template <typename V, typename U>
	static __device__ __forceinline__ V apply(V a, V b) {
		if (b == 0) return 0;
		if (b == -1) return (V)((U)0 - (U)a);
		return a / b;
	}
};

// IntFn applies an integer op to T (int or i64) elements, with U its unsigned type.
template <typename Op, typename T, typename U>
struct IntFn {
	typedef T Out;
	static __device__ __forceinline__ T apply(T a, T b) { return Op::template apply<T, U>(a, b); }
};

template <typename Op, typename T, typename U>
__device__ __forceinline__ void int_same(T* out, const T* a, const T* b, u64 n) {
	GRID_STRIDE_LOOP(i, n) { out[i] = IntFn<Op, T, U>::apply(a[i], b[i]); }
}

#define INT_BINARY(name, Op, sfx, T, U) \
	extern "C" __global__ void cudaep_##name##_##sfx(T* out, const T* a, const T* b, u64 n) { int_same<Op, T, U>(out, a, b, n); } \
	extern "C" __global__ void cudaep_##name##_bcast_##sfx(T* out, const T* a, const T* b, u64 n, BCAST_PARAMS) { \
		binary_bcast<IntFn<Op, T, U>, T>(out, a, b, n, BCAST_ARGS); \
	}
#define INT_BINARY_ALL(name, Op) \
	INT_BINARY(name, Op, i32, int, unsigned) \
	INT_BINARY(name, Op, i64, i64, u64)

INT_BINARY_ALL(add, IntAddOp)
INT_BINARY_ALL(sub, IntSubOp)
INT_BINARY_ALL(mul, IntMulOp)

// IntDivFn is IntFn<IntDivOp> that records a zero divisor in the fault word.
template <typename T, typename U>
struct IntDivFn {
	typedef T Out;
	DataFault* fault;
	unsigned kernel;
	__device__ __forceinline__ T apply(T a, T b) const {
		if (b == 0) record_fault(fault, kernel, 1, 0);
		return IntDivOp::template apply<T, U>(a, b);
	}
};

#define INT_DIV(sfx, T, U) \
	extern "C" __global__ void cudaep_div_##sfx(T* out, const T* a, const T* b, u64 n, DataFault* fault, unsigned kernel) { \
		const IntDivFn<T, U> fn = {fault, kernel}; \
		GRID_STRIDE_LOOP(i, n) { out[i] = fn.apply(a[i], b[i]); } \
	} \
	extern "C" __global__ void cudaep_div_bcast_##sfx(T* out, const T* a, const T* b, u64 n, BCAST_PARAMS, DataFault* fault, \
		unsigned kernel) { \
		const IntDivFn<T, U> fn = {fault, kernel}; \
		binary_bcast<IntDivFn<T, U>, T>(out, a, b, n, BCAST_ARGS, fn); \
	}

INT_DIV(i32, int, unsigned)
INT_DIV(i64, i64, u64)

#define COMPARE(name, Op, sfx, T) \
	extern "C" __global__ void cudaep_##name##_##sfx(u8* out, const T* a, const T* b, u64 n) { compare_same<Op, T>(out, a, b, n); } \
	extern "C" __global__ void cudaep_##name##_bcast_##sfx(u8* out, const T* a, const T* b, u64 n, BCAST_PARAMS) { \
		binary_bcast<CmpFn<Op, T>, T>(out, a, b, n, BCAST_ARGS); \
	}
#define COMPARE_ALL(name, Op) \
	COMPARE(name, Op, f32, float) \
	COMPARE(name, Op, f16, half_t) \
	COMPARE(name, Op, bf16, bf16_t) \
	COMPARE(name, Op, i32, int) \
	COMPARE(name, Op, i64, i64)

COMPARE_ALL(equal, EqualOp)
COMPARE(equal, EqualOp, b8, u8)
COMPARE_ALL(less, LessOp)
COMPARE_ALL(greater, GreaterOp)

// Unary ops on float32 values.
struct ReluOp { static __device__ __forceinline__ float apply(float x) { return x > 0.0f ? x : (x == x ? 0.0f : x); } };
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
struct NegOp { static __device__ __forceinline__ float apply(float x) { return -x; } };
struct AbsOp { static __device__ __forceinline__ float apply(float x) { return fabsf(x); } };
struct SqrtOp { static __device__ __forceinline__ float apply(float x) { return sqrtf(x); } };
struct ReciprocalOp { static __device__ __forceinline__ float apply(float x) { return 1.0f / x; } };
struct ExpOp { static __device__ __forceinline__ float apply(float x) { return expf(x); } };
struct LogOp { static __device__ __forceinline__ float apply(float x) { return logf(x); } };
struct ErfOp { static __device__ __forceinline__ float apply(float x) { return erff(x); } };
struct SinOp { static __device__ __forceinline__ float apply(float x) { return sinf(x); } };
struct CosOp { static __device__ __forceinline__ float apply(float x) { return cosf(x); } };

template <typename Op, typename T>
__device__ __forceinline__ void unary(T* out, const T* x, u64 n) {
	const u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
	u64 done = 0;
	if (aligned16(out, x, x)) {
		const int V = 16 / sizeof(T);
		const u64 nv = n / V;
		const Pack<T>* px = (const Pack<T>*)x;
		Pack<T>* po = (Pack<T>*)out;
		for (u64 i = start; i < nv; i += stride) {
			const Pack<T> a = px[i];
			Pack<T> z;
#pragma unroll
			for (int j = 0; j < V; ++j) z.v[j] = from_float<T>(Op::apply(to_float(a.v[j])));
			po[i] = z;
		}
		done = nv * V;
	}
	for (u64 i = done + start; i < n; i += stride) out[i] = from_float<T>(Op::apply(to_float(x[i])));
}

#define UNARY(name, Op, sfx, T) \
	extern "C" __global__ void cudaep_##name##_##sfx(T* out, const T* x, u64 n) { unary<Op, T>(out, x, n); }
#define UNARY_ALL(name, Op) \
	UNARY(name, Op, f32, float) \
	UNARY(name, Op, f16, half_t) \
	UNARY(name, Op, bf16, bf16_t)

UNARY_ALL(relu, ReluOp)
UNARY_ALL(sigmoid, SigmoidOp)
UNARY_ALL(tanh, TanhOp)
UNARY_ALL(gelu, GeluOp)
UNARY_ALL(gelu_tanh, GeluTanhOp)
UNARY_ALL(neg, NegOp)
UNARY_ALL(abs, AbsOp)
UNARY_ALL(sqrt, SqrtOp)
UNARY_ALL(reciprocal, ReciprocalOp)
UNARY_ALL(exp, ExpOp)
UNARY_ALL(log, LogOp)
UNARY_ALL(erf, ErfOp)
UNARY_ALL(sin, SinOp)
UNARY_ALL(cos, CosOp)

// Where(condition, X, Y) over four broadcast dimensions (three operand stride sets), by element
// size: out[i] = c ? x : y.
template <typename E, typename Index>
__device__ __forceinline__ void where_loop(E* out, const u8* c, const E* x, const E* y, Index n, const i64* d, const i64* s) {
	// Whole packs of X and Y (the condition read a byte at a time): the offsets once per 16 bytes.
	const void* xy[2] = {x, y};
	if (bcast_packed<E, 4, 2>(out, xy, d, s + 4)) {
		const int V = 16 / sizeof(E);
		for (Index p = (Index)blockIdx.x * blockDim.x + threadIdx.x; p < n / V; p += (Index)gridDim.x * blockDim.x) {
			i64 off[3];
			bcast_offsets<4, 3, Index>(p * V, d, s, off);
			const Pack<E> xv = load_pack<E>(x, off[1], s[7]), yv = load_pack<E>(y, off[2], s[11]);
			Pack<E> r;
#pragma unroll
			for (int e = 0; e < V; ++e) r.v[e] = c[off[0] + e * s[3]] ? xv.v[e] : yv.v[e];
			*(Pack<E>*)(out + p * V) = r;
		}
		return;
	}
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 off[3];
		bcast_offsets<4, 3, Index>(i, d, s, off);
		out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
	}
}

#define WHERE(sfx, E) \
	extern "C" __global__ void cudaep_where_##sfx(E* out, const u8* c, const E* x, const E* y, u64 n, \
		i64 d0, i64 d1, i64 d2, i64 d3, i64 cs0, i64 cs1, i64 cs2, i64 cs3, \
		i64 xs0, i64 xs1, i64 xs2, i64 xs3, i64 ys0, i64 ys1, i64 ys2, i64 ys3) { \
		const i64 d[4] = {d0, d1, d2, d3}; \
		const i64 s[12] = {cs0, cs1, cs2, cs3, xs0, xs1, xs2, xs3, ys0, ys1, ys2, ys3}; \
		if (n < 0x80000000ull) { \
			where_loop<E, unsigned>(out, c, x, y, (unsigned)n, d, s); \
		} else { \
			where_loop<E, u64>(out, c, x, y, n, d, s); \
		} \
	}

WHERE(b8, u8)
WHERE(b16, u16)
WHERE(b32, unsigned)
WHERE(b64, u64)

// where_update_loop is Where with its output in the memory of its X or Y operand (a key/value
// cache updated in place): out[i] = src[i] where c[i] == when, and out[i] is left as it is
// elsewhere (it already holds the other operand). Only the selected elements are read from src
// and stored: a decode step's cache update of one position out of thousands stores one row,
// not the whole cache. s holds the condition's strides, then src's.
template <typename E, typename Index>
__device__ __forceinline__ void where_update_loop(E* out, const u8* c, const E* src, Index n, const i64* d, const i64* s,
	u8 when) {
	const void* in[1] = {src};
	if (bcast_packed<E, 4, 1>(out, in, d, s + 4)) {
		const int V = 16 / sizeof(E);
		for (Index p = (Index)blockIdx.x * blockDim.x + threadIdx.x; p < n / V; p += (Index)gridDim.x * blockDim.x) {
			i64 off[2];
			bcast_offsets<4, 2, Index>(p * V, d, s, off);
			unsigned sel = 0;
#pragma unroll
			for (int e = 0; e < V; ++e) sel |= (unsigned)((c[off[0] + e * s[3]] != 0) == (when != 0)) << e;
			if (sel == 0) continue;
			const Pack<E> v = load_pack<E>(src, off[1], s[7]);
			if (sel == (1u << V) - 1) {
				*(Pack<E>*)(out + p * V) = v;
				continue;
			}
#pragma unroll
			for (int e = 0; e < V; ++e)
				if (sel >> e & 1) out[p * V + e] = v.v[e];
		}
		return;
	}
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 off[2];
		bcast_offsets<4, 2, Index>(i, d, s, off);
		if ((c[off[0]] != 0) == (when != 0)) out[i] = src[off[1]];
	}
}

// WHERE_UPDATE_PARAMS and WHERE_UPDATE_BODY are the update kernels' arguments after the
// pointers and their body, which updates out from src (where_update_loop); pick declares out
// and src when the kernel's arguments do not.
#define WHERE_UPDATE_PARAMS \
	u64 n, i64 d0, i64 d1, i64 d2, i64 d3, i64 cs0, i64 cs1, i64 cs2, i64 cs3, i64 ss0, i64 ss1, i64 ss2, i64 ss3, \
		unsigned when
#define WHERE_UPDATE_BODY(E, pick) \
	const i64 d[4] = {d0, d1, d2, d3}; \
	const i64 s[8] = {cs0, cs1, cs2, cs3, ss0, ss1, ss2, ss3}; \
	pick \
	if (n < 0x80000000ull) { \
		where_update_loop<E, unsigned>(out, c, src, (unsigned)n, d, s, (u8)when); \
	} else { \
		where_update_loop<E, u64>(out, c, src, n, d, s, (u8)when); \
	}

// cudaep_where_update_<size>(out, c, src, n, dims[4], cStrides[4], srcStrides[4], when) is
// Where(c, src, out) when `when` is 1 (the output is Y's memory) and Where(c, out, src) when it
// is 0 (the output is X's): see where_update_loop.
#define WHERE_UPDATE(sfx, E) \
	extern "C" __global__ void cudaep_where_update_##sfx(E* out, const u8* c, const E* src, WHERE_UPDATE_PARAMS) { \
		WHERE_UPDATE_BODY(E, ) \
	}

WHERE_UPDATE(b8, u8)
WHERE_UPDATE(b16, u16)
WHERE_UPDATE(b32, unsigned)
WHERE_UPDATE(b64, u64)

// cudaep_where_update2_<size>(out0, out1, c, src0, src1, n, dims[4], cStrides[4],
// srcStrides[4], when) is cudaep_where_update_<size> for two problems of one layout and one
// condition in one launch (cudaep.WherePair: a decode step's key and value cache updates):
// blockIdx.y 0 updates out0 from src0, 1 out1 from src1.
#define WHERE_UPDATE2(sfx, E) \
	extern "C" __global__ void cudaep_where_update2_##sfx(E* out0, E* out1, const u8* c, const E* src0, const E* src1, \
		WHERE_UPDATE_PARAMS) { \
		WHERE_UPDATE_BODY(E, E* out = blockIdx.y ? out1 : out0; const E* src = blockIdx.y ? src1 : src0;) \
	}

WHERE_UPDATE2(b8, u8)
WHERE_UPDATE2(b16, u16)
WHERE_UPDATE2(b32, unsigned)
WHERE_UPDATE2(b64, u64)

template <typename E, typename Index>
__device__ __forceinline__ void expand_loop(E* out, const E* in, Index n, const i64* d, const i64* s) {
	for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (Index)gridDim.x * blockDim.x) {
		i64 off[1];
		bcast_offsets<6, 1, Index>(i, d, s, off);
		out[i] = in[off[0]];
	}
}

// cudaep_expand_<size> writes the contiguous out[n] from in, read through the strides s0..s5
// over the dimensions d0..d5 (0 where in repeats).
#define EXPAND(sfx, E) \
	extern "C" __global__ void cudaep_expand_##sfx(E* out, const E* in, u64 n, \
		i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5) { \
		const i64 d[6] = {d0, d1, d2, d3, d4, d5}; \
		const i64 s[6] = {s0, s1, s2, s3, s4, s5}; \
		if (n < 0x80000000ull) { \
			expand_loop<E, unsigned>(out, in, (unsigned)n, d, s); \
		} else { \
			expand_loop<E, u64>(out, in, n, d, s); \
		} \
	}

EXPAND(b8, u8)
EXPAND(b16, u16)
EXPAND(b32, unsigned)
EXPAND(b64, u64)

// Elems<T, V>::type is V consecutive elements of T (member v) moved by one load or store: a
// 16-byte Pack for V = 16 / sizeof(T), one element for V = 1.
template <typename T, int V>
struct Elems {
	typedef Pack<T> type;
};
template <typename T>
struct Elems<T, 1> {
	struct type {
		T v[1];
	};
};

// rotate_half_loop is cudaep.RotateHalf over rows rows of 2 * half elements: y = x · cos +
// rotate_half(x) · sin, rotate_half(x)[i] = -x[i + half] for i < half and x[i - half] from half
// on (Hugging Face's rotary embedding). A work item takes elements [i, i + V) of a row's first
// half and the same of its second half, which pair up, reading each x once. The cos and sin rows
// of row r are at element offsets bcast_offsets(r) over the six dimensions d (outermost first)
// with the strides s (cos's six, then sin's; 0 where they repeat); the rows of x and y are
// contiguous. Every item reads and writes only its own elements, so y may be x.
template <typename T, int V, typename Index>
__device__ __forceinline__ void rotate_half_loop(T* y, const T* x, const T* cs, const T* sn, Index rows, Index half,
	const i64* d, const i64* s) {
	typedef typename Elems<T, V>::type E;
	const Index units = half / V, n = rows * units;
	for (Index it = (Index)blockIdx.x * blockDim.x + threadIdx.x; it < n; it += (Index)gridDim.x * blockDim.x) {
		const Index row = it / units, i = (it - row * units) * V;
		i64 off[2];
		bcast_offsets<6, 2, Index>(row, d, s, off);
		const u64 xo = (u64)row * 2 * half + i;
		const E x1 = *(const E*)(x + xo), x2 = *(const E*)(x + xo + half);
		const E c1 = *(const E*)(cs + off[0] + i), c2 = *(const E*)(cs + off[0] + i + half);
		const E s1 = *(const E*)(sn + off[1] + i), s2 = *(const E*)(sn + off[1] + i + half);
		E y1, y2;
#pragma unroll
		for (int j = 0; j < V; ++j) {
			const float a = to_float(x1.v[j]), b = to_float(x2.v[j]);
			y1.v[j] = from_float<T>(a * to_float(c1.v[j]) - b * to_float(s1.v[j]));
			y2.v[j] = from_float<T>(b * to_float(c2.v[j]) + a * to_float(s2.v[j]));
		}
		*(E*)(y + xo) = y1;
		*(E*)(y + xo + half) = y2;
	}
}

// rotate_half picks 16-byte packs when half is a whole number of them and every pointer is
// 16-byte aligned (then every row and half starts on a pack: row strides are multiples of 2 *
// half), else one element an item; 32-bit index arithmetic below 2^31 items.
template <typename T>
__device__ __forceinline__ void rotate_half(T* y, const T* x, const T* cs, const T* sn, u64 rows, u64 half, const i64* d,
	const i64* s) {
	const int V = 16 / sizeof(T);
	if (half % V == 0 && aligned16(y, x, cs) && aligned16(sn, sn, sn)) {
		if (rows * half < 0x80000000ull) {
			rotate_half_loop<T, V, unsigned>(y, x, cs, sn, (unsigned)rows, (unsigned)half, d, s);
		} else {
			rotate_half_loop<T, V, u64>(y, x, cs, sn, rows, half, d, s);
		}
	} else if (rows * half < 0x80000000ull) {
		rotate_half_loop<T, 1, unsigned>(y, x, cs, sn, (unsigned)rows, (unsigned)half, d, s);
	} else {
		rotate_half_loop<T, 1, u64>(y, x, cs, sn, rows, half, d, s);
	}
}

// cudaep_rotate_half_<t>(y, x, cos, sin, rows, half, dims[6], cosStrides[6], sinStrides[6]).
#define ROTATE_HALF(sfx, T) \
	extern "C" __global__ void cudaep_rotate_half_##sfx(T* y, const T* x, const T* cs, const T* sn, u64 rows, u64 half, \
		BCAST_PARAMS) { \
		const i64 d[6] = {d0, d1, d2, d3, d4, d5}; \
		const i64 s[12] = {as0, as1, as2, as3, as4, as5, bs0, bs1, bs2, bs3, bs4, bs5}; \
		rotate_half<T>(y, x, cs, sn, rows, half, d, s); \
	}

ROTATE_HALF(f32, float)
ROTATE_HALF(f16, half_t)
ROTATE_HALF(bf16, bf16_t)

// cudaep_rotate_half2_<t>(y0, y1, x0, x1, cos, sin, rows0, rows1, half) is cudaep.RotateHalfPair:
// rotate_half of x0 (rows0 rows) into y0 and of x1 (rows1 rows) into y1, one launch, grid
// (blocks, 2) (blockIdx.y picks the tensor), with one row of cos and of sin for every row (a
// decode step's query and key at one position).
#define ROTATE_HALF2(sfx, T) \
	extern "C" __global__ void cudaep_rotate_half2_##sfx(T* y0, T* y1, const T* x0, const T* x1, const T* cs, const T* sn, \
		u64 rows0, u64 rows1, u64 half) { \
		const i64 d[6] = {1, 1, 1, 1, 1, 1}; \
		const i64 s[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; \
		if (blockIdx.y) { \
			rotate_half<T>(y1, x1, cs, sn, rows1, half, d, s); \
		} else { \
			rotate_half<T>(y0, x0, cs, sn, rows0, half, d, s); \
		} \
	}

ROTATE_HALF2(f32, float)
ROTATE_HALF2(f16, half_t)
ROTATE_HALF2(bf16, bf16_t)
