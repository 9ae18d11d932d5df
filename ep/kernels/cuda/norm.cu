// Normalization kernels of package kernels (norm.go launches them, sim_norm.go mirrors them):
// LayerNormalization, SimplifiedLayerNormalization (RMSNorm) and com.microsoft's
// SkipLayerNormalization and SkipSimplifiedLayerNormalization in one kernel, and FastGelu's
// bias + tanh-approximated Gelu. float32, float16 and bfloat16 data (suffixes f32, f16, bf16),
// accumulated in float32; 128-bit loads and stores where the row length and every address
// allow.

#include "rowreduce.cuh"

// ln_load returns element j of a row: x + skip + bias (skip and bias may be absent).
template <typename T>
__device__ __forceinline__ float ln_load(const T* x, const T* s, const T* b, u64 j) {
	float v = to_float(x[j]);
	if (s) v += to_float(s[j]);
	if (b) v += to_float(b[j]);
	return v;
}

// ln_load_pack loads the 16 bytes of elements j, j+1, … (j a multiple of the pack width) of
// x + skip + bias into v.
template <typename T>
__device__ __forceinline__ void ln_load_pack(float* v, const T* x, const T* s, const T* b, u64 j) {
	const int V = 16 / sizeof(T);
	const Pack<T> px = *(const Pack<T>*)(x + j);
#pragma unroll
	for (int k = 0; k < V; ++k) v[k] = to_float(px.v[k]);
	if (s) {
		const Pack<T> ps = *(const Pack<T>*)(s + j);
#pragma unroll
		for (int k = 0; k < V; ++k) v[k] += to_float(ps.v[k]);
	}
	if (b) {
		const Pack<T> pb = *(const Pack<T>*)(b + j);
#pragma unroll
		for (int k = 0; k < V; ++k) v[k] += to_float(pb.v[k]);
	}
}

// layernorm normalizes rows rows of length elements, one block per row (grid-stride over
// rows). The row's values are x + skip + bias, where skip (absent, or skip_rows rows that
// repeat) and bias (absent, or length elements) are optional; sum (optional) receives them.
// Plain: y = (v - mean) / sqrt(var + eps) * gamma + beta (beta optional). Simplified (RMSNorm):
// y = v / sqrt(mean(v²) + eps) * gamma, and the mean written is 0. mean_out (optional) and
// inv_out get each row's mean and 1 / sqrt(var + eps) in float32.
//
// The sums run over v − v[0] (the "shifted data" variance), so that rows with a large mean do
// not lose the variance to cancellation; the second pass re-reads the row, from cache.
template <typename T>
__device__ __forceinline__ void layernorm(T* y, float* mean_out, float* inv_out, T* sum, const T* x, const T* skip,
	const T* gamma, const T* beta, const T* bias, u64 rows, u64 length, u64 skip_rows, float eps, unsigned simplified) {
	__shared__ float scratch[64];
	const int V = 16 / sizeof(T);
	const bool vec = length % V == 0 && aligned16_all(y, sum, x, skip, gamma, beta, bias);
	const float inv_len = 1.0f / (float)length;
	for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
		const T* xr = x + row * length;
		const T* sr = skip ? skip + (row % skip_rows) * length : (const T*)0;
		T* yr = y + row * length;
		T* wr = sum ? sum + row * length : (T*)0;
		const float shift = simplified ? 0.0f : ln_load(xr, sr, bias, 0);
		float s1 = 0.0f, s2 = 0.0f;
		if (vec) {
			for (u64 p = threadIdx.x; p < length / V; p += blockDim.x) {
				float v[V];
				ln_load_pack(v, xr, sr, bias, p * V);
				if (wr) {
					Pack<T> o;
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>(v[k]);
					*(Pack<T>*)(wr + p * V) = o;
				}
#pragma unroll
				for (int k = 0; k < V; ++k) {
					const float d = v[k] - shift;
					s1 += d;
					s2 += d * d;
				}
			}
		} else {
			for (u64 j = threadIdx.x; j < length; j += blockDim.x) {
				const float v = ln_load(xr, sr, bias, j);
				if (wr) wr[j] = from_float<T>(v);
				const float d = v - shift;
				s1 += d;
				s2 += d * d;
			}
		}
		block_sum2(s1, s2, scratch);
		const float m1 = s1 * inv_len;
		float mean, var;
		if (simplified) {
			mean = 0.0f;
			var = s2 * inv_len;
		} else {
			mean = shift + m1;
			var = fmaxf(s2 * inv_len - m1 * m1, 0.0f);
		}
		const float inv = 1.0f / sqrtf(var + eps);
		if (threadIdx.x == 0) {
			if (mean_out) mean_out[row] = mean;
			inv_out[row] = inv;
		}
		if (vec) {
			for (u64 p = threadIdx.x; p < length / V; p += blockDim.x) {
				float v[V];
				ln_load_pack(v, xr, sr, bias, p * V);
				const Pack<T> g = *(const Pack<T>*)(gamma + p * V);
				Pack<T> o;
				if (beta) {
					const Pack<T> b = *(const Pack<T>*)(beta + p * V);
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>((v[k] - mean) * inv * to_float(g.v[k]) + to_float(b.v[k]));
				} else {
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>((v[k] - mean) * inv * to_float(g.v[k]));
				}
				*(Pack<T>*)(yr + p * V) = o;
			}
		} else {
			for (u64 j = threadIdx.x; j < length; j += blockDim.x) {
				float o = (ln_load(xr, sr, bias, j) - mean) * inv * to_float(gamma[j]);
				if (beta) o += to_float(beta[j]);
				yr[j] = from_float<T>(o);
			}
		}
	}
}

// layernorm_regs is layernorm with the row held in registers: thread t keeps the 16-byte packs
// t, t + blockDim.x, … (at most NP of them) of its block's row, issues all their loads before
// using any, sums, and writes the output from the registers, so the row is read once and each
// row costs one barrier (the two partial-sum buffers alternate between rows, so the next
// row's partial sums never overwrite ones still being read). norm.go launches it with at most
// 128 threads, the fewest packs per thread that hold the row (NP = 2, 4 or 8), and only for rows
// of whole packs in 16-byte aligned tensors; anything else takes layernorm here too.
template <typename T, int NP>
__device__ __forceinline__ void layernorm_regs(T* y, float* mean_out, float* inv_out, T* sum, const T* x, const T* skip,
	const T* gamma, const T* beta, const T* bias, u64 rows, u64 length, u64 skip_rows, float eps, unsigned simplified) {
	const int V = 16 / sizeof(T);
	if (length % V != 0 || length / V > (u64)NP * blockDim.x || !aligned16_all(y, sum, x, skip, gamma, beta, bias)) {
		layernorm<T>(y, mean_out, inv_out, sum, x, skip, gamma, beta, bias, rows, length, skip_rows, eps, simplified);
		return;
	}
	__shared__ float partial[2][64];
	const unsigned packs = (unsigned)(length / V), tid = threadIdx.x, warp = tid / 32, lane = tid % 32, warps = blockDim.x / 32;
	const float inv_len = 1.0f / (float)length;
	unsigned parity = 0;
	for (u64 row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
		const T* xr = x + row * length;
		const T* sr = skip ? skip + (row % skip_rows) * length : (const T*)0;
		float v[NP][V];
		// Loads first: every pack of x (then skip and bias) is in flight before any is used.
		Pack<T> px[NP];
#pragma unroll
		for (int i = 0; i < NP; ++i) {
			const unsigned p = tid + i * blockDim.x;
			if (p < packs) px[i] = *(const Pack<T>*)(xr + (u64)p * V);
		}
		const float shift = simplified ? 0.0f : ln_load(xr, sr, bias, 0);
#pragma unroll
		for (int i = 0; i < NP; ++i) {
#pragma unroll
			for (int k = 0; k < V; ++k) v[i][k] = to_float(px[i].v[k]);
		}
		if (sr) {
#pragma unroll
			for (int i = 0; i < NP; ++i) {
				const unsigned p = tid + i * blockDim.x;
				if (p < packs) px[i] = *(const Pack<T>*)(sr + (u64)p * V);
			}
#pragma unroll
			for (int i = 0; i < NP; ++i) {
#pragma unroll
				for (int k = 0; k < V; ++k) v[i][k] += to_float(px[i].v[k]);
			}
		}
		if (bias) {
#pragma unroll
			for (int i = 0; i < NP; ++i) {
				const unsigned p = tid + i * blockDim.x;
				if (p < packs) px[i] = *(const Pack<T>*)(bias + (u64)p * V);
			}
#pragma unroll
			for (int i = 0; i < NP; ++i) {
#pragma unroll
				for (int k = 0; k < V; ++k) v[i][k] += to_float(px[i].v[k]);
			}
		}
		float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
		for (int i = 0; i < NP; ++i) {
			const unsigned p = tid + i * blockDim.x;
			if (p < packs) {
				if (sum) {
					Pack<T> o;
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>(v[i][k]);
					*(Pack<T>*)(sum + row * length + (u64)p * V) = o;
				}
#pragma unroll
				for (int k = 0; k < V; ++k) {
					const float d = v[i][k] - shift;
					s1 += d;
					s2 += d * d;
				}
			}
		}
		// One barrier: each warp's partial sums go to this row's buffer, every warp then adds
		// them all up.
		s1 = warp_reduce<SumOp>(s1);
		s2 = warp_reduce<SumOp>(s2);
		if (lane == 0) {
			partial[parity][warp] = s1;
			partial[parity][32 + warp] = s2;
		}
		__syncthreads();
		s1 = lane < warps ? partial[parity][lane] : 0.0f;
		s2 = lane < warps ? partial[parity][32 + lane] : 0.0f;
		s1 = warp_reduce<SumOp>(s1);
		s2 = warp_reduce<SumOp>(s2);
		const float m1 = s1 * inv_len;
		float mean, var;
		if (simplified) {
			mean = 0.0f;
			var = s2 * inv_len;
		} else {
			mean = shift + m1;
			var = fmaxf(s2 * inv_len - m1 * m1, 0.0f);
		}
		const float inv = 1.0f / sqrtf(var + eps);
		if (tid == 0) {
			if (mean_out) mean_out[row] = mean;
			inv_out[row] = inv;
		}
		T* yr = y + row * length;
#pragma unroll
		for (int i = 0; i < NP; ++i) {
			const unsigned p = tid + i * blockDim.x;
			if (p < packs) {
				const Pack<T> g = *(const Pack<T>*)(gamma + (u64)p * V);
				Pack<T> o;
				if (beta) {
					const Pack<T> b = *(const Pack<T>*)(beta + (u64)p * V);
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>((v[i][k] - mean) * inv * to_float(g.v[k]) + to_float(b.v[k]));
				} else {
#pragma unroll
					for (int k = 0; k < V; ++k) o.v[k] = from_float<T>((v[i][k] - mean) * inv * to_float(g.v[k]));
				}
				*(Pack<T>*)(yr + (u64)p * V) = o;
			}
		}
	}
}

// gelu_tanh is Gelu's tanh approximation, as elementwise.cu's GeluTanhOp (and FastGelu).
__device__ __forceinline__ float gelu_tanh(float x) {
	return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// bias_gelu writes out[i] = gelu_tanh(x[i] + bias[i % bias_len]) for n elements (n a multiple
// of bias_len): 16-byte packs when bias_len is a whole number of packs and every address is
// 16-byte aligned. Index is 32-bit below 2^31 elements (64-bit remainders are slow, and i plus
// the grid stride cannot wrap there).
template <typename T, typename Index>
__device__ __forceinline__ void bias_gelu_loop(T* out, const T* x, const T* bias, Index n, Index bias_len) {
	const Index start = (Index)blockIdx.x * blockDim.x + threadIdx.x, stride = (Index)gridDim.x * blockDim.x;
	const int V = 16 / sizeof(T);
	Index done = 0;
	if (bias_len % V == 0 && aligned16(out, x, bias)) {
		const Index nv = n / V;
		for (Index i = start; i < nv; i += stride) {
			const Pack<T> a = ((const Pack<T>*)x)[i];
			const Pack<T> b = *(const Pack<T>*)(bias + (i * V) % bias_len);
			Pack<T> z;
#pragma unroll
			for (int k = 0; k < V; ++k) z.v[k] = from_float<T>(gelu_tanh(to_float(a.v[k]) + to_float(b.v[k])));
			((Pack<T>*)out)[i] = z;
		}
		done = nv * V;
	}
	for (Index i = done + start; i < n; i += stride) out[i] = from_float<T>(gelu_tanh(to_float(x[i]) + to_float(bias[i % bias_len])));
}

#define LAYERNORM_REGS(name, sfx, T, NP) \
	extern "C" __global__ void cudaep_layernorm_##name##_##sfx(T* y, float* mean, float* inv, T* sum, const T* x, const T* skip, \
		const T* gamma, const T* beta, const T* bias, u64 rows, u64 length, u64 skip_rows, float eps, unsigned simplified) { \
		layernorm_regs<T, NP>(y, mean, inv, sum, x, skip, gamma, beta, bias, rows, length, skip_rows, eps, simplified); \
	}

#define NORM(sfx, T) \
	LAYERNORM_REGS(r2, sfx, T, 2) \
	LAYERNORM_REGS(r4, sfx, T, 4) \
	LAYERNORM_REGS(r8, sfx, T, 8) \
	extern "C" __global__ void cudaep_layernorm_##sfx(T* y, float* mean, float* inv, T* sum, const T* x, const T* skip, \
		const T* gamma, const T* beta, const T* bias, u64 rows, u64 length, u64 skip_rows, float eps, unsigned simplified) { \
		layernorm<T>(y, mean, inv, sum, x, skip, gamma, beta, bias, rows, length, skip_rows, eps, simplified); \
	} \
	extern "C" __global__ void cudaep_bias_gelu_tanh_##sfx(T* out, const T* x, const T* bias, u64 n, u64 bias_len) { \
		if (n < 0x80000000ull) { \
			bias_gelu_loop<T, unsigned>(out, x, bias, (unsigned)n, (unsigned)bias_len); \
		} else { \
			bias_gelu_loop<T, u64>(out, x, bias, n, bias_len); \
		} \
	}

NORM(f32, float)
NORM(f16, half_t)
NORM(bf16, bf16_t)
