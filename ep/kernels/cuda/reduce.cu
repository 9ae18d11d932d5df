// Reduction kernels of package kernels (reduce.go launches them, sim_reduce.go mirrors them):
// ReduceSum, ReduceMean (a sum times 1/count) and ReduceMax over float32, float16 and bfloat16
// data (suffixes f32, f16, bf16), accumulated in float32. Max propagates NaN, as numpy does.

#include "rowreduce.cuh"

// reduce_rows writes out[r] = scale · op(x[r·length], …, x[r·length + length − 1]) for rows
// contiguous rows: one block per row (grid-stride over rows), 16-byte loads where the row
// length and the address allow.
template <typename Op, typename T>
__device__ __forceinline__ void reduce_rows(T* out, const T* x, u64 rows, u64 length, float scale) {
	__shared__ float scratch[32];
	const int V = 16 / sizeof(T);
	const bool vec = length % V == 0 && aligned16(x, x, x);
	for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
		const T* xr = x + row * length;
		float acc = Op::identity();
		if (vec) {
			const Pack<T>* px = (const Pack<T>*)xr;
			const u64 packs = length / V;
			u64 p = threadIdx.x;
			// Two packs in flight per iteration, so that each thread keeps more bytes loading.
			for (; p + blockDim.x < packs; p += 2 * blockDim.x) {
				const Pack<T> a = px[p], b = px[p + blockDim.x];
#pragma unroll
				for (int k = 0; k < V; ++k) acc = Op::combine(acc, to_float(a.v[k]));
#pragma unroll
				for (int k = 0; k < V; ++k) acc = Op::combine(acc, to_float(b.v[k]));
			}
			if (p < packs) {
				const Pack<T> a = px[p];
#pragma unroll
				for (int k = 0; k < V; ++k) acc = Op::combine(acc, to_float(a.v[k]));
			}
		} else {
			for (u64 j = threadIdx.x; j < length; j += blockDim.x) acc = Op::combine(acc, to_float(xr[j]));
		}
		acc = block_reduce<Op>(acc, scratch);
		if (threadIdx.x == 0) out[row] = from_float<T>(acc * scale);
	}
}

// reduce_strided writes out[i] = scale · op over the reduced space, one thread per output: the
// output's flat index i walks the kept dimensions kd (outermost first, padded with extent 1)
// with input element strides ks, and each output combines the elements at its base offset
// plus every combination of the reduced dimensions rd with strides rs.
template <typename Op, typename T>
__device__ __forceinline__ void reduce_strided(T* out, const T* x, u64 n, const i64* kd, const i64* ks, const i64* rd,
	const i64* rs, float scale) {
	GRID_STRIDE_LOOP(i, n) {
		u64 q = i;
		i64 base = 0;
#pragma unroll
		for (int j = 2; j >= 0; --j) {
			const u64 c = q % (u64)kd[j];
			q /= (u64)kd[j];
			base += (i64)c * ks[j];
		}
		float acc = Op::identity();
		for (i64 a = 0; a < rd[0]; ++a) {
			for (i64 b = 0; b < rd[1]; ++b) {
				const T* p = x + base + a * rs[0] + b * rs[1];
				for (i64 c = 0; c < rd[2]; ++c) acc = Op::combine(acc, to_float(p[c * rs[2]]));
			}
		}
		out[i] = from_float<T>(acc * scale);
	}
}

#define REDUCE(name, Op, sfx, T) \
	extern "C" __global__ void cudaep_reduce_rows_##name##_##sfx(T* out, const T* x, u64 rows, u64 length, float scale) { \
		reduce_rows<Op, T>(out, x, rows, length, scale); \
	} \
	extern "C" __global__ void cudaep_reduce_strided_##name##_##sfx(T* out, const T* x, u64 n, i64 kd0, i64 kd1, i64 kd2, \
		i64 ks0, i64 ks1, i64 ks2, i64 rd0, i64 rd1, i64 rd2, i64 rs0, i64 rs1, i64 rs2, float scale) { \
		const i64 kd[3] = {kd0, kd1, kd2}, ks[3] = {ks0, ks1, ks2}, rd[3] = {rd0, rd1, rd2}, rs[3] = {rs0, rs1, rs2}; \
		reduce_strided<Op, T>(out, x, n, kd, ks, rd, rs, scale); \
	}
#define REDUCE_ALL(name, Op) \
	REDUCE(name, Op, f32, float) \
	REDUCE(name, Op, f16, half_t) \
	REDUCE(name, Op, bf16, bf16_t)

REDUCE_ALL(sum, SumOp)
REDUCE_ALL(max, MaxOp)
