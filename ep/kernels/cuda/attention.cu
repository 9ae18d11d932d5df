// Attention kernels of package kernels (rotary.go and attention.go launch them,
// sim_attention.go mirrors them): com.microsoft's RotaryEmbedding, and GroupQueryAttention as
// an append pass (rotary on the new keys, the new keys and values written into the present
// cache), then either the decode pass (one query token; the cache is split across thread
// blocks, each writes a partial softmax result, and a reduce pass combines them) or the
// prefill pass (several query tokens; a block takes a tile of 16 query rows of one head and
// walks the keys in shared-memory tiles). float32, float16 and bfloat16 data (suffixes f32,
// f16, bf16), computed in float32.
//
// Lengths, as ONNX Runtime defines them: for batch b, total_b = seqlens_k[b] + 1 tokens are in
// the cache once the S new ones are in; the new ones start at past_b = total_b - S, or at 0 in
// the first prompt (S == total_sequence_length). Query s sits at position past_b + s and sees
// the keys before min(past_b + s + 1, total_b). Rotary positions are past_b + s, or 1 for a
// padding token (past_b + s >= total_b). A position outside the cos/sin caches yields NaN.
// Nothing is read or written outside the tensors, whatever seqlens_k holds.

#include "rowreduce.cuh"

#define NEG_INF __int_as_float((int)0xff800000)
#define QNAN __int_as_float(0x7fc00000)

// Head sizes up to ATTN_MAX_HEAD: a lane of a warp holds ATTN_MAX_HEAD / 32 accumulators.
#define ATTN_MAX_HEAD 256
#define ATTN_PER_LANE (ATTN_MAX_HEAD / 32)
// The decode and prefill blocks: ATTN_WARPS warps; a prefill block takes PF_ROWS query rows
// per warp.
#define ATTN_WARPS 4
#define PF_ROWS 4
#define PF_TILE (ATTN_WARPS * PF_ROWS)

// rotate returns element i (< rot) of the head vector x rotated by the cache rows cr and sr
// (rot / 2 values each): the halves [0, rot/2) and [rot/2, rot) pair up, or with interleaved
// the neighbours 2k and 2k+1.
template <typename T>
__device__ __forceinline__ float rotate(const T* x, u64 i, u64 rot, unsigned interleaved, const T* cr, const T* sr) {
	const u64 half = rot / 2;
	u64 c, j;
	float sign;
	if (interleaved) {
		c = i / 2;
		j = (i % 2 == 0) ? i + 1 : i - 1;
		sign = (i % 2 == 0) ? -1.0f : 1.0f;
	} else {
		c = i < half ? i : i - half;
		j = i < half ? i + half : i - half;
		sign = i < half ? -1.0f : 1.0f;
	}
	return to_float(x[i]) * to_float(cr[c]) + sign * to_float(x[j]) * to_float(sr[c]);
}

// rotated returns element i of the head vector x at position pos: rotated when i < rot (NaN
// when pos is outside the caches' max_pos rows), else unchanged.
template <typename T>
__device__ __forceinline__ float rotated(const T* x, u64 i, u64 rot, unsigned interleaved, const T* cosc, const T* sinc,
	i64 pos, u64 max_pos) {
	if (i >= rot) return to_float(x[i]);
	if (pos < 0 || (u64)pos >= max_pos) return QNAN;
	const u64 row = (u64)pos * (rot / 2);
	return rotate(x, i, rot, interleaved, cosc + row, sinc + row);
}

// rotary is RotaryEmbedding: out = x rotated, x [batch, seq, heads, head_size] (or [batch,
// heads, seq, head_size] when transposed), the position of token s of batch b pos[b*seq + s]
// (per_token) or pos[0] + s.
template <typename T>
__device__ __forceinline__ void rotary(T* out, const T* x, const i64* pos, const T* cosc, const T* sinc, u64 batch,
	u64 seq, u64 heads, u64 head_size, u64 rot, u64 max_pos, unsigned transposed, unsigned interleaved,
	unsigned per_token) {
	const u64 n = batch * seq * heads * head_size;
	GRID_STRIDE_LOOP(idx, n) {
		const u64 d = idx % head_size;
		u64 r = idx / head_size, s, b;
		if (transposed) {
			s = r % seq;
			b = r / seq / heads;
		} else {
			r /= heads;
			s = r % seq;
			b = r / seq;
		}
		const i64 p = per_token ? pos[b * seq + s] : pos[0] + (i64)s;
		out[idx] = from_float<T>(rotated(x + (idx - d), d, rot, interleaved, cosc, sinc, p, max_pos));
	}
}

// gqa_lengths sets past_b and total_b for batch b (see the top of the file).
__device__ __forceinline__ void gqa_lengths(const int* seqlens, const int* total, u64 b, u64 seq, i64& past, i64& tot_b) {
	tot_b = (i64)seqlens[b] + 1;
	past = (i64)*total == (i64)seq ? 0 : tot_b - (i64)seq;
}

// gqa_position is the rotary position of new token s.
__device__ __forceinline__ i64 gqa_position(i64 past, i64 tot_b, u64 s) {
	return past + (i64)s < tot_b ? past + (i64)s : 1;
}

// gqa_key_end is how many cached keys query s sees, within [0, cap].
__device__ __forceinline__ i64 gqa_key_end(i64 past, i64 tot_b, u64 s, u64 cap) {
	i64 e = past + (i64)s + 1;
	if (e > tot_b) e = tot_b;
	if (e > (i64)cap) e = (i64)cap;
	return e < 0 ? 0 : e;
}

// gqa_append writes the new keys (rotated) and values into the present caches [batch,
// kv_heads, cap, head_size]. k and v are [batch, seq, kv_heads, head_size]. Aliased (present
// is the past buffer): only the new tokens are written, at past_b + s (those outside [0, cap)
// are dropped). Otherwise every present element is written: past_b tokens of the past (whose
// capacity is past_cap; beyond it zeros), the new tokens, then zeros.
template <typename T>
__device__ __forceinline__ void gqa_append(T* pk, T* pv, const T* past_k, const T* past_v, const T* k, const T* v,
	const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 batch, u64 kv_heads, u64 seq,
	u64 head_size, u64 past_cap, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, unsigned aliased) {
	const u64 D = head_size;
	if (aliased) {
		const u64 n = batch * seq * kv_heads * D;
		GRID_STRIDE_LOOP(idx, n) {
			const u64 d = idx % D, r = idx / D, kvh = r % kv_heads, s = (r / kv_heads) % seq, b = r / kv_heads / seq;
			i64 past, tot_b;
			gqa_lengths(seqlens, total, b, seq, past, tot_b);
			const i64 p = past + (i64)s;
			if (p < 0 || p >= (i64)cap) continue;
			const u64 dst = ((b * kv_heads + kvh) * cap + (u64)p) * D + d;
			pk[dst] = from_float<T>(rotated(k + (idx - d), d, rot, interleaved, cosc, sinc, gqa_position(past, tot_b, s), max_pos));
			pv[dst] = v[idx];
		}
		return;
	}
	const u64 n = batch * kv_heads * cap * D;
	GRID_STRIDE_LOOP(idx, n) {
		const u64 d = idx % D, r = idx / D, p = r % cap, kvh = (r / cap) % kv_heads, b = r / cap / kv_heads;
		i64 past, tot_b;
		gqa_lengths(seqlens, total, b, seq, past, tot_b);
		const i64 s = (i64)p - past;
		if (s < 0) {
			if (p < past_cap) {
				const u64 src = ((b * kv_heads + kvh) * past_cap + p) * D + d;
				pk[idx] = past_k[src];
				pv[idx] = past_v[src];
			} else {
				pk[idx] = from_float<T>(0.0f);
				pv[idx] = from_float<T>(0.0f);
			}
		} else if (s < (i64)seq) {
			const u64 src = ((b * seq + (u64)s) * kv_heads + kvh) * D + d;
			pk[idx] = from_float<T>(rotated(k + (src - d), d, rot, interleaved, cosc, sinc, gqa_position(past, tot_b, (u64)s), max_pos));
			pv[idx] = v[src];
		} else {
			pk[idx] = from_float<T>(0.0f);
			pv[idx] = from_float<T>(0.0f);
		}
	}
}

// gqa_query returns element d of query row qrow (token s) rotated and rounded to T, as ONNX
// Runtime stores the rotated query before the attention.
template <typename T>
__device__ __forceinline__ float gqa_query(const T* qrow, u64 d, u64 rot, unsigned interleaved, const T* cosc,
	const T* sinc, i64 pos, u64 max_pos) {
	return to_float(from_float<T>(rotated(qrow, d, rot, interleaved, cosc, sinc, pos, max_pos)));
}

// gqa_decode is the split pass of one query token per (batch, head): grid (splits, seq *
// heads, batch), ATTN_WARPS warps. Block (sp, y, b) takes chunk sp of the keys query (s, h) =
// (y / heads, y % heads) sees, split evenly among the splits at run time, and writes its
// partial result at part[((b * gridDim.y + y) * splits + sp) * (head_size + 2)]: the running
// maximum score, the sum of exp(score - max), and head_size sums of exp(score - max) * value
// (an empty chunk: -inf, 0, zeros). The warps walk alternate keys with their own running
// softmax and merge at the end.
template <typename T>
__device__ __forceinline__ void gqa_decode(float* part, const T* q, const T* kc, const T* vc, const int* seqlens,
	const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, u64 head_size, u64 cap, u64 rot,
	u64 max_pos, unsigned interleaved, float scale, unsigned splits) {
	__shared__ float qs[ATTN_MAX_HEAD];
	__shared__ float wm[ATTN_WARPS], wl[ATTN_WARPS];
	__shared__ float wacc[ATTN_WARPS][ATTN_MAX_HEAD];
	const u64 D = head_size, b = blockIdx.z, h = blockIdx.y % heads, s = blockIdx.y / heads, kvh = h / (heads / kv_heads);
	const unsigned sp = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	i64 past, tot_b;
	gqa_lengths(seqlens, total, b, seq, past, tot_b);
	const i64 kend = gqa_key_end(past, tot_b, s, cap), pos = gqa_position(past, tot_b, s);
	const T* qrow = q + ((b * seq + s) * heads + h) * D;
	for (u64 d = threadIdx.x; d < D; d += blockDim.x) qs[d] = gqa_query(qrow, d, rot, interleaved, cosc, sinc, pos, max_pos);
	__syncthreads();
	const i64 chunk = (kend + splits - 1) / splits, start = chunk * sp;
	const i64 end = start + chunk < kend ? start + chunk : kend;
	const T* kb = kc + (b * kv_heads + kvh) * cap * D;
	const T* vb = vc + (b * kv_heads + kvh) * cap * D;
	float m = NEG_INF, l = 0.0f, acc[ATTN_PER_LANE];
#pragma unroll
	for (int i = 0; i < ATTN_PER_LANE; ++i) acc[i] = 0.0f;
	for (i64 j = start + warp; j < end; j += ATTN_WARPS) {
		const T* kr = kb + (u64)j * D;
		float dot = 0.0f;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) {
			const u64 d = lane + 32 * i;
			if (d < D) dot += qs[d] * to_float(kr[d]);
		}
		const float sc = warp_reduce<SumOp>(dot) * scale;
		const float mn = fmaxf(m, sc), corr = expf(m - mn), p = expf(sc - mn);
		l = l * corr + p;
		const T* vr = vb + (u64)j * D;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) {
			const u64 d = lane + 32 * i;
			if (d < D) acc[i] = acc[i] * corr + p * to_float(vr[d]);
		}
		m = mn;
	}
	if (lane == 0) {
		wm[warp] = m;
		wl[warp] = l;
	}
#pragma unroll
	for (int i = 0; i < ATTN_PER_LANE; ++i) {
		const u64 d = lane + 32 * i;
		if (d < D) wacc[warp][d] = acc[i];
	}
	__syncthreads();
	float M = NEG_INF, wt[ATTN_WARPS];
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; ++w) M = fmaxf(M, wm[w]);
	float L = 0.0f;
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; ++w) {
		wt[w] = wm[w] == NEG_INF ? 0.0f : expf(wm[w] - M);
		L += wl[w] * wt[w];
	}
	float* out = part + (((u64)b * gridDim.y + blockIdx.y) * splits + sp) * (D + 2);
	if (threadIdx.x == 0) {
		out[0] = M;
		out[1] = L;
	}
	for (u64 d = threadIdx.x; d < D; d += blockDim.x) {
		float a = 0.0f;
#pragma unroll
		for (int w = 0; w < ATTN_WARPS; ++w) a += wacc[w][d] * wt[w];
		out[2 + d] = a;
	}
}

// gqa_reduce combines the splits' partial results of each of rows (batch * seq * heads) query
// rows into out [batch, seq, heads * head_size]: one block per row (grid-stride).
template <typename T>
__device__ __forceinline__ void gqa_reduce(T* out, const float* part, u64 rows, u64 head_size, unsigned splits) {
	const u64 stride = head_size + 2;
	for (u64 row = blockIdx.x; row < rows; row += gridDim.x) {
		const float* pr = part + row * splits * stride;
		float M = NEG_INF;
		for (unsigned sp = 0; sp < splits; ++sp) M = fmaxf(M, pr[sp * stride]);
		for (u64 d = threadIdx.x; d < head_size; d += blockDim.x) {
			float L = 0.0f, a = 0.0f;
			for (unsigned sp = 0; sp < splits; ++sp) {
				const float m = pr[sp * stride];
				if (m == NEG_INF) continue;
				const float w = expf(m - M);
				L += pr[sp * stride + 1] * w;
				a += pr[sp * stride + 2 + d] * w;
			}
			out[row * head_size + d] = from_float<T>(L > 0.0f ? a / L : 0.0f);
		}
	}
}

// gqa_prefill is the attention of several query tokens: grid (ceil(seq / PF_TILE), heads,
// batch), ATTN_WARPS warps, dynamic shared memory for PF_TILE * head_size + bk * (head_size +
// 1) + bk * head_size + PF_TILE * 32 floats. Block (t, h, b) takes query rows [t * PF_TILE,
// t * PF_TILE + PF_TILE) of head h, PF_ROWS per warp, and walks the keys they see in tiles of
// bk (at most 32) keys staged in shared memory: lane j scores key j of the tile for each of its
// warp's rows, the running softmax is updated per row, and each lane accumulates the values of
// its head_size / 32 dimensions.
template <typename T>
__device__ __forceinline__ void gqa_prefill(T* out, const T* q, const T* kc, const T* vc, const int* seqlens,
	const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, u64 head_size, u64 cap, u64 rot,
	u64 max_pos, unsigned interleaved, float scale, unsigned bk) {
	extern __shared__ float smem[];
	const u64 D = head_size, b = blockIdx.z, h = blockIdx.y, kvh = h / (heads / kv_heads), s0 = (u64)blockIdx.x * PF_TILE;
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float* qs = smem;
	float* ks = qs + PF_TILE * D;
	float* vs = ks + bk * (D + 1);
	float* ps = vs + bk * D;
	i64 past, tot_b;
	gqa_lengths(seqlens, total, b, seq, past, tot_b);
	for (u64 e = threadIdx.x; e < PF_TILE * D; e += blockDim.x) {
		const u64 r = e / D, d = e % D, s = s0 + r;
		qs[e] = s < seq ? gqa_query(q + ((b * seq + s) * heads + h) * D, d, rot, interleaved, cosc, sinc,
				gqa_position(past, tot_b, s), max_pos)
				: 0.0f;
	}
	const u64 last = (s0 + PF_TILE < seq ? s0 + PF_TILE : seq) - 1;
	const i64 kmax = gqa_key_end(past, tot_b, last, cap);
	float m[PF_ROWS], l[PF_ROWS], acc[PF_ROWS][ATTN_PER_LANE];
	i64 kend[PF_ROWS];
#pragma unroll
	for (int r = 0; r < PF_ROWS; ++r) {
		const u64 s = s0 + warp * PF_ROWS + r;
		kend[r] = s < seq ? gqa_key_end(past, tot_b, s, cap) : 0;
		m[r] = NEG_INF;
		l[r] = 0.0f;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) acc[r][i] = 0.0f;
	}
	const T* kb = kc + (b * kv_heads + kvh) * cap * D;
	const T* vb = vc + (b * kv_heads + kvh) * cap * D;
	for (i64 kt = 0; kt < kmax; kt += bk) {
		__syncthreads(); // the previous tile's readers are done (and, the first time, qs is written)
		for (u64 e = threadIdx.x; e < bk * D; e += blockDim.x) {
			const u64 j = e / D, d = e % D;
			const i64 key = kt + (i64)j;
			const bool in = key < kmax;
			ks[j * (D + 1) + d] = in ? to_float(kb[(u64)key * D + d]) : 0.0f;
			vs[j * D + d] = in ? to_float(vb[(u64)key * D + d]) : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int r = 0; r < PF_ROWS; ++r) {
			const unsigned row = warp * PF_ROWS + r;
			float sc = NEG_INF;
			if (lane < bk && kt + (i64)lane < kend[r]) {
				const float* qr = qs + row * D;
				const float* kr = ks + lane * (D + 1);
				float dot = 0.0f;
				for (u64 d = 0; d < D; ++d) dot += qr[d] * kr[d];
				sc = dot * scale;
			}
			const float mn = fmaxf(m[r], warp_reduce<MaxOp>(sc));
			const float p = sc == NEG_INF ? 0.0f : expf(sc - mn);
			const float corr = m[r] == NEG_INF ? 0.0f : expf(m[r] - mn);
			l[r] = l[r] * corr + warp_reduce<SumOp>(p);
#pragma unroll
			for (int i = 0; i < ATTN_PER_LANE; ++i) acc[r][i] *= corr;
			m[r] = mn;
			ps[row * 32 + lane] = p;
		}
		__syncthreads();
#pragma unroll
		for (int r = 0; r < PF_ROWS; ++r) {
			const float* pr = ps + (warp * PF_ROWS + r) * 32;
			for (unsigned j = 0; j < bk; ++j) {
				const float pj = pr[j];
#pragma unroll
				for (int i = 0; i < ATTN_PER_LANE; ++i) {
					const u64 d = lane + 32 * i;
					if (d < D) acc[r][i] += pj * vs[j * D + d];
				}
			}
		}
	}
#pragma unroll
	for (int r = 0; r < PF_ROWS; ++r) {
		const u64 s = s0 + warp * PF_ROWS + r;
		if (s >= seq) continue;
		T* orow = out + ((b * seq + s) * heads + h) * D;
		const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) {
			const u64 d = lane + 32 * i;
			if (d < D) orow[d] = from_float<T>(acc[r][i] * inv);
		}
	}
}

#define ATTENTION(sfx, T) \
	extern "C" __global__ void cudaep_rotary_##sfx(T* out, const T* x, const i64* pos, const T* cosc, const T* sinc, \
		u64 batch, u64 seq, u64 heads, u64 head_size, u64 rot, u64 max_pos, unsigned transposed, unsigned interleaved, \
		unsigned per_token) { \
		rotary<T>(out, x, pos, cosc, sinc, batch, seq, heads, head_size, rot, max_pos, transposed, interleaved, per_token); \
	} \
	extern "C" __global__ void cudaep_gqa_append_##sfx(T* pk, T* pv, const T* past_k, const T* past_v, const T* k, \
		const T* v, const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 batch, u64 kv_heads, u64 seq, \
		u64 head_size, u64 past_cap, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, unsigned aliased) { \
		gqa_append<T>(pk, pv, past_k, past_v, k, v, seqlens, total, cosc, sinc, batch, kv_heads, seq, head_size, past_cap, \
			cap, rot, max_pos, interleaved, aliased); \
	} \
	extern "C" __global__ void cudaep_gqa_decode_##sfx(float* part, const T* q, const T* kc, const T* vc, \
		const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, \
		u64 head_size, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, float scale, unsigned splits) { \
		gqa_decode<T>(part, q, kc, vc, seqlens, total, cosc, sinc, heads, kv_heads, seq, head_size, cap, rot, max_pos, \
			interleaved, scale, splits); \
	} \
	extern "C" __global__ void cudaep_gqa_reduce_##sfx(T* out, const float* part, u64 rows, u64 head_size, \
		unsigned splits) { \
		gqa_reduce<T>(out, part, rows, head_size, splits); \
	} \
	extern "C" __global__ void cudaep_gqa_prefill_##sfx(T* out, const T* q, const T* kc, const T* vc, \
		const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, \
		u64 head_size, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, float scale, unsigned bk) { \
		gqa_prefill<T>(out, q, kc, vc, seqlens, total, cosc, sinc, heads, kv_heads, seq, head_size, cap, rot, max_pos, \
			interleaved, scale, bk); \
	}

ATTENTION(f32, float)
ATTENTION(f16, half_t)
ATTENTION(bf16, bf16_t)
