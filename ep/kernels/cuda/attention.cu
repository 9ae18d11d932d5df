// Attention kernels of package kernels (rotary.go, group_query_attention.go and
// onnx_attention.go launch them, sim_attention.go mirrors them): ONNX's Attention (opset 23, at the end of the file),
// com.microsoft's RotaryEmbedding, and GroupQueryAttention as
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
// Nothing is read or written outside the tensors, whatever seqlens_k holds; the append pass
// records the lengths ONNX Runtime refuses in the fault word (gqa_check), and RotaryEmbedding
// positions outside its caches (common.cuh's DataFault: both take it and their id last).

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
// (per_token) or pos[0] + s (wrapping, never overflowing). A position outside [0, max_pos) is
// recorded in the fault word as input 1 (position_ids) with the value position_ids holds.
template <typename T>
__device__ __forceinline__ void rotary(T* out, const T* x, const i64* pos, const T* cosc, const T* sinc, u64 batch,
	u64 seq, u64 heads, u64 head_size, u64 rot, u64 max_pos, unsigned transposed, unsigned interleaved,
	unsigned per_token, DataFault* fault, unsigned kernel) {
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
		const i64 held = per_token ? pos[b * seq + s] : pos[0];
		const i64 p = per_token ? held : (i64)((u64)held + s);
		if (d == 0 && (p < 0 || (u64)p >= max_pos)) record_fault(fault, kernel, 1, held);
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

// gqa_check records in the fault word the first length of a launch that the kernels cannot
// honour, as ONNX Runtime's CPU execution provider refuses it (see the top of the file):
// total_sequence_length outside [1, cap] (input 6); seqlens_k[b] outside [0, cap), or, after
// the first prompt, fewer tokens in all than new ones (past_b < 0) (input 5); with rotary, a
// new token's position at or past the cos/sin caches' max_pos rows (input 7, the position).
// Thread t of the grid checks batch t (and t + the grid's threads, …).
__device__ __forceinline__ void gqa_check(DataFault* fault, unsigned kernel, const int* seqlens, const int* total,
	u64 batch, u64 seq, u64 cap, u64 rot, u64 max_pos) {
	const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
	if (t == 0) {
		const i64 tot = (i64)*total;
		if (tot < 1 || tot > (i64)cap) record_fault(fault, kernel, 6, tot);
	}
	for (u64 b = t; b < batch; b += (u64)gridDim.x * blockDim.x) {
		i64 past, tot_b;
		gqa_lengths(seqlens, total, b, seq, past, tot_b);
		const i64 sk = (i64)seqlens[b];
		if (sk < 0 || sk >= (i64)cap || past < 0) {
			record_fault(fault, kernel, 5, sk);
		} else if (rot > 0) {
			// The last new token's position; the others are below it (padding sits at 1).
			const i64 last = past + (i64)seq - 1 < tot_b - 1 ? past + (i64)seq - 1 : tot_b - 1;
			if (last >= (i64)max_pos) record_fault(fault, kernel, 7, last);
		}
	}
}

// gqa_append writes the new keys (rotated) and values into the present caches [batch,
// kv_heads, cap, head_size]. k and v are [batch, seq, kv_heads, head_size]. Aliased (present
// is the past buffer): only the new tokens are written, at past_b + s (those outside [0, cap)
// are dropped). Otherwise every present element is written: past_b tokens of the past (whose
// capacity is past_cap; beyond it zeros), the new tokens, then zeros.
template <typename T>
__device__ __forceinline__ void gqa_append(T* pk, T* pv, const T* past_k, const T* past_v, const T* k, const T* v,
	const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 batch, u64 kv_heads, u64 seq,
	u64 head_size, u64 past_cap, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, unsigned aliased,
	DataFault* fault, unsigned kernel) {
	gqa_check(fault, kernel, seqlens, total, batch, seq, cap, rot, max_pos);
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

// attn_weight is exp(m - M) for m <= M: the factor that rescales a running softmax state of
// maximum m to the maximum M, or the weight of a score m under the maximum M. It is 0 when m is
// -inf (an empty state, a masked key), where expf(-inf - M) would be NaN for M = -inf.
__device__ __forceinline__ float attn_weight(float m, float M) { return m == NEG_INF ? 0.0f : expf(m - M); }

// AttnWarpStates is the shared memory through which attn_write_partial merges the block's
// warps: each warp's maximum, sum of exponentials and weighted sums. attn_warp_states returns
// the kernel's one copy of it (one for every instantiation of attn_write_partial).
struct AttnWarpStates {
	float m[ATTN_WARPS], l[ATTN_WARPS];
	float acc[ATTN_WARPS][ATTN_MAX_HEAD];
};
__device__ __forceinline__ AttnWarpStates& attn_warp_states() {
	__shared__ AttnWarpStates states;
	return states;
}

// attn_write_partial is the end of a split-K decode block, and the one merge of the warps'
// running softmax states in the attention kernels: GroupQueryAttention's decode
// (gqa_decode_split) and Attention's (attn_decode_split, attn_decode_packed) call it. Every
// thread of the block calls it with its warp's state: the maximum m and sum of exponentials l
// (the same in every lane) and N weighted sums, acc[i] being dimension first + stride * i of
// the n <= ATTN_MAX_HEAD dimensions (those below n; a lane with holds false stores none, as
// another lane holds the same sums). The states meet in shared memory, and the block writes
// its partial result at out: the maximum M, the sum of exp(score - M) and n sums of
// exp(score - M) * value, warp 0's term first in each sum (an empty state: -inf, 0, zeros).
template <int N>
__device__ __forceinline__ void attn_write_partial(float* out, float m, float l, const float (&acc)[N], u64 n,
	unsigned first, unsigned stride, bool holds) {
	AttnWarpStates& ws = attn_warp_states();
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0) {
		ws.m[warp] = m;
		ws.l[warp] = l;
	}
	if (holds) {
#pragma unroll
		for (int i = 0; i < N; ++i) {
			const u64 d = first + stride * i;
			if (d < n) ws.acc[warp][d] = acc[i];
		}
	}
	__syncthreads();
	float M = NEG_INF, wt[ATTN_WARPS];
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; ++w) M = fmaxf(M, ws.m[w]);
	float L = 0.0f;
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; ++w) {
		wt[w] = attn_weight(ws.m[w], M);
		L += ws.l[w] * wt[w];
	}
	if (threadIdx.x == 0) {
		out[0] = M;
		out[1] = L;
	}
	for (u64 d = threadIdx.x; d < n; d += blockDim.x) {
		float a = 0.0f;
#pragma unroll
		for (int w = 0; w < ATTN_WARPS; ++w) a += ws.acc[w][d] * wt[w];
		out[2 + d] = a;
	}
}

// gqa_decode_split is the split pass of one query token per (batch, head): grid (splits, seq *
// heads, batch), ATTN_WARPS warps. Block (sp, y, b) takes chunk sp of the keys query (s, h) =
// (y / heads, y % heads) sees, split evenly among the splits at run time, and writes its
// partial result at part[((b * gridDim.y + y) * splits + sp) * (head_size + 2)]: the running
// maximum score, the sum of exp(score - max), and head_size sums of exp(score - max) * value
// (an empty chunk: -inf, 0, zeros). The warps walk alternate keys with their own running
// softmax and merge at the end.
template <typename T>
__device__ __forceinline__ void gqa_decode_split(float* part, const T* q, const T* kc, const T* vc, const int* seqlens,
	const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, u64 head_size, u64 cap, u64 rot,
	u64 max_pos, unsigned interleaved, float scale, unsigned splits) {
	__shared__ float qs[ATTN_MAX_HEAD];
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
	attn_write_partial(part + (((u64)b * gridDim.y + blockIdx.y) * splits + sp) * (D + 2), m, l, acc, D, lane, 32, true);
}

// split_reduce_row combines the splits' partial results of one query row (GroupQueryAttention:
// rows batch * seq * heads of [batch, seq, heads * head_size]; Attention: batch * heads * seq of
// [batch, heads, seq, v_head_size]) into out[0, head_size), by the whole block (ATTN_WARPS
// warps), at most GQA_MAX_SPLITS splits. A row whose splits hold no weight (every key masked)
// is empty.
//
// Warp 0 reads the splits' maxima (lane j: splits j, j + 32, …), reduces them to the row's
// maximum M, and stores each split's weight exp(m - M) in shared memory with the weighted sum
// of exponentials L (shuffle reductions: a fixed order). Then the block's threads take the
// dimensions in blockDim.x / head_size groups (one when the head is wider than the block) and
// group g adds splits g, g + G, … of each of its dimensions, several loads in flight; group
// 0 adds the groups' sums in order. Every partial is read by one thread, once.
#define GQA_MAX_SPLITS 128

// The partials at pr are read from L2 (ld.global.cg), so a block may add partials other
// blocks of the same launch wrote (split_finish). It ends with a barrier: its shared memory
// may be used again right away.
template <typename T>
__device__ __forceinline__ void split_reduce_row(T* out, const float* pr, u64 head_size, unsigned splits, float empty) {
	__shared__ float w[GQA_MAX_SPLITS];
	__shared__ float red[ATTN_WARPS * 32];
	__shared__ float total;
	const u64 stride = head_size + 2;
	const unsigned t = threadIdx.x, lane = t % 32;
	// G groups of width threads: thread t takes dimensions t % width (+ width, …) of group t / width.
	const unsigned groups = head_size < blockDim.x ? blockDim.x / (unsigned)head_size : 1;
	const unsigned width = blockDim.x / groups, g = t / width;
	if (t < 32) {
		float M = NEG_INF;
		for (unsigned sp = lane; sp < splits; sp += 32) M = fmaxf(M, __ldcg(pr + sp * stride));
		for (unsigned o = 16; o > 0; o /= 2) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
		float L = 0.0f;
		for (unsigned sp = lane; sp < splits; sp += 32) {
			const float m = __ldcg(pr + sp * stride);
			const float wt = attn_weight(m, M);
			w[sp] = wt;
			L += __ldcg(pr + sp * stride + 1) * wt;
		}
		for (unsigned o = 16; o > 0; o /= 2) L += __shfl_xor_sync(0xffffffffu, L, o);
		if (t == 0) total = L;
	}
	__syncthreads();
	const float L = total;
	for (u64 d0 = 0; d0 < head_size; d0 += width) {
		const u64 d = d0 + t % width;
		float a = 0.0f;
		if (g < groups && d < head_size) {
#pragma unroll 4
			for (unsigned sp = g; sp < splits; sp += groups) a += __ldcg(pr + sp * stride + 2 + d) * w[sp];
		}
		if (groups > 1) {
			red[t] = a;
			__syncthreads();
			if (g == 0 && d < head_size) {
				for (unsigned i = 1; i < groups; ++i) a += red[i * width + t];
			}
			__syncthreads();
		}
		if (g == 0 && d < head_size) out[d] = from_float<T>(L > 0.0f ? a / L : empty);
	}
	__syncthreads();  // w and total are the next row's
}

// split_finish ends a split decode block (gqa_decode, attn_decode) after its partial result
// is written: in the block that writes a row's last partial, that row's reduce
// (split_reduce_row) into out[row * d, (row + 1) * d), row = blockIdx.z * gridDim.y +
// blockIdx.y, the partials' row (a row without weight is empty). Each block counts itself in
// counters[row] (zero at launch) with arrive_last; the block that arrives last adds the
// row's partials and puts the counter back to 0 for the next launch or replay. One launch
// instead of a split pass and a reduce kernel.
template <typename T>
__device__ __forceinline__ void split_finish(T* out, unsigned* counters, const float* part, u64 d, unsigned splits, float empty) {
	const u64 row = (u64)blockIdx.z * gridDim.y + blockIdx.y;
	if (!arrive_last(&counters[row], splits)) return;
	split_reduce_row<T>(out + row * d, part + row * splits * (d + 2), d, splits, empty);
	if (threadIdx.x == 0) counters[row] = 0;
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
			const float p = attn_weight(sc, mn);
			const float corr = attn_weight(m[r], mn);
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

// ONNX Attention (opset 23), 4-D: Q [batch, heads, seq, dk], K [batch, kv_heads, kv_seq, dk],
// V [batch, kv_heads, kv_seq, dv], Y [batch, heads, seq, dv]; query head h reads kv head h /
// (heads / kv_heads). Row s of head h scores key j as dot(q, k_j) * scale + bias, the bias
// being the mask's element (b, h, s, j) through the element strides msb, msh, mss, msj (0
// where the mask repeats): its value (mask_kind 1, a float mask of T), 0 or -inf for a true
// or false byte (kind 2), or 0 (kind 0, no mask); with causal, keys j > s are left out (the
// upper-left alignment). The softmax over the keys runs in float32 with a running maximum; a
// row that sees no key of finite score (every key masked) is NaN, as in ONNX's reference.

// attn_bias is the mask's term for key j of the row whose mask elements start at mrow.
template <typename T>
__device__ __forceinline__ float attn_bias(const void* mask, unsigned kind, i64 mrow, i64 msj, i64 j) {
	if (kind == 1) return to_float(((const T*)mask)[mrow + j * msj]);
	if (kind == 2) return ((const u8*)mask)[mrow + j * msj] ? 0.0f : NEG_INF;
	return 0.0f;
}

// attn_keys is how many keys row s sees: kv_seq, or with causal min(kv_seq, s + 1).
__device__ __forceinline__ i64 attn_keys(u64 s, u64 kv_seq, unsigned causal) {
	return (i64)(causal && s + 1 < kv_seq ? s + 1 : kv_seq);
}

// attn_dot is the dot product of the float32 query qs (shared memory: every lane reads the
// same element, a broadcast) with the key row kr of dk elements, in 16-byte packs when vec.
template <typename T>
__device__ __forceinline__ float attn_dot(const float* qs, const T* kr, u64 dk, bool vec) {
	float dot = 0.0f;
	if (vec) {
		const int V = 16 / sizeof(T);
		const Pack<T>* kp = (const Pack<T>*)kr;
		const u64 packs = dk / V;
#pragma unroll 4
		for (u64 p = 0; p < packs; ++p) {
			const Pack<T> x = kp[p];
#pragma unroll
			for (int e = 0; e < V; ++e) dot += qs[p * V + e] * to_float(x.v[e]);
		}
	} else {
		for (u64 d = 0; d < dk; ++d) dot += qs[d] * to_float(kr[d]);
	}
	return dot;
}

// attn_decode_packed is attn_decode for key and value rows of the same length n that are whole
// 16-byte packs, with G = n / (16 / sizeof(T)) a power of two up to 32 (a 64-element bf16 row:
// G = 8): a group of G lanes holds one key row (lane p of the group its pack p), so a warp reads
// 32 / G whole key rows and value rows per step, each a coalesced 16-byte load per lane, and
// keeps one running softmax per group (identical in its G lanes). Two steps' rows are loaded
// before either is used, so the loads of the next keys overlap the arithmetic of these. At the
// end the groups merge through warp shuffles, and attn_write_partial merges the warps and
// writes the block's partial result. Same keys and scores as attn_decode; only the order of
// the float32 sums differs.
template <typename T>
__device__ __forceinline__ void attn_decode_packed(float* out, const float* qs, const T* kb, const T* vb,
	const void* mask, unsigned mask_kind, i64 mrow, i64 msj, i64 start, i64 end, unsigned n, float scale) {
	const int V = 16 / sizeof(T);
	const unsigned G = n / V, per = 32 / G, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const unsigned slot = lane / G, pk = lane % G;
	float qv[V];
#pragma unroll
	for (int e = 0; e < V; ++e) qv[e] = qs[pk * V + e];
	float m = NEG_INF, l = 0.0f, acc[V];
#pragma unroll
	for (int e = 0; e < V; ++e) acc[e] = 0.0f;
	const i64 step = (i64)per * ATTN_WARPS;
	for (i64 j0 = start + (i64)warp * per; j0 < end; j0 += 2 * step) {
		Pack<T> kx[2], vx[2];
		bool ok[2];
#pragma unroll
		for (int u = 0; u < 2; ++u) {
			const i64 j = j0 + u * step + slot;
			ok[u] = j < end;
			if (ok[u]) {
				kx[u] = *(const Pack<T>*)(kb + (u64)j * n + pk * V);
				vx[u] = *(const Pack<T>*)(vb + (u64)j * n + pk * V);
			}
		}
#pragma unroll
		for (int u = 0; u < 2; ++u) {
			float dot = 0.0f;
			if (ok[u]) {
#pragma unroll
				for (int e = 0; e < V; ++e) dot += qv[e] * to_float(kx[u].v[e]);
			}
			for (unsigned o = G / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
			const i64 j = j0 + u * step + slot;
			const float sc = ok[u] ? dot * scale + attn_bias<T>(mask, mask_kind, mrow, msj, j) : NEG_INF;
			const float mn = fmaxf(m, sc);
			if (mn == NEG_INF) continue; // this group's keys so far are all masked
			const float corr = attn_weight(m, mn), p = attn_weight(sc, mn);
			l = l * corr + p;
#pragma unroll
			for (int e = 0; e < V; ++e) acc[e] = acc[e] * corr + (p == 0.0f ? 0.0f : p * to_float(vx[u].v[e]));
			m = mn;
		}
	}
	// Merge the groups of the warp (lanes pk, pk + G, ... hold the same dimensions).
	for (unsigned o = G; o < 32; o *= 2) {
		const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
		const float M = fmaxf(m, m2);
		const float c1 = attn_weight(m, M), c2 = attn_weight(m2, M);
		l = l * c1 + l2 * c2;
#pragma unroll
		for (int e = 0; e < V; ++e) {
			const float a2 = __shfl_xor_sync(0xffffffffu, acc[e], o);
			acc[e] = acc[e] * c1 + a2 * c2;
		}
		m = M;
	}
	attn_write_partial(out, m, l, acc, n, pk * V, 1, lane < G);
}

// attn_decode is the split pass for few query rows: grid (splits, heads * seq, batch),
// ATTN_WARPS warps. Block (sp, y, b) takes row s = y % seq of head h = y / seq and chunk sp of
// the keys it sees, split evenly among the splits at run time in whole warp tiles of 32 keys,
// and writes its partial result (attn_write_partial) at part[((b * gridDim.y + y) * splits +
// sp) * (dv + 2)]: partial row b * heads * seq + h * seq + s, Y's row order. A warp takes
// tiles of 32 keys in turn, lane j scoring key j of the tile against the query (the whole key
// row in 16-byte packs), then updates its running softmax once per tile and accumulates the
// tile's values, each lane dv / 32 dimensions.
template <typename T>
__device__ __forceinline__ void attn_decode_split(float* part, const T* q, const T* k, const T* v, const void* mask, u64 heads,
	u64 kv_heads, u64 seq, u64 kv_seq, u64 dk, u64 dv, i64 msb, i64 msh, i64 mss, i64 msj, unsigned mask_kind,
	unsigned causal, float scale, unsigned splits) {
	__shared__ float qs[ATTN_MAX_HEAD];
	const u64 b = blockIdx.z, h = blockIdx.y / seq, s = blockIdx.y % seq, kvh = h / (heads / kv_heads);
	const unsigned sp = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const T* qrow = q + ((b * heads + h) * seq + s) * dk;
	for (u64 d = threadIdx.x; d < dk; d += blockDim.x) qs[d] = to_float(qrow[d]);
	__syncthreads();
	const i64 kend = attn_keys(s, kv_seq, causal);
	i64 chunk = (kend + splits - 1) / splits;
	chunk = (chunk + 31) / 32 * 32;
	const i64 start = chunk * sp, end = start + chunk < kend ? start + chunk : kend;
	const T* kb = k + (b * kv_heads + kvh) * kv_seq * dk;
	const T* vb = v + (b * kv_heads + kvh) * kv_seq * dv;
	const i64 mrow = (i64)b * msb + (i64)h * msh + (i64)s * mss;
	const bool vec = dk % (16 / sizeof(T)) == 0 && ((u64)k & 15) == 0;
	const unsigned groups = (unsigned)dk / (16 / sizeof(T));
	if (vec && dv == dk && ((u64)v & 15) == 0 && groups <= 32 && (groups & (groups - 1)) == 0) {
		attn_decode_packed<T>(part + (((u64)b * gridDim.y + blockIdx.y) * splits + sp) * (dv + 2), qs, kb, vb, mask,
			mask_kind, mrow, msj, start, end, (unsigned)dk, scale);
		return;
	}
	float m = NEG_INF, l = 0.0f, acc[ATTN_PER_LANE];
#pragma unroll
	for (int i = 0; i < ATTN_PER_LANE; ++i) acc[i] = 0.0f;
	for (i64 j0 = start + 32 * (i64)warp; j0 < end; j0 += 32 * ATTN_WARPS) {
		const i64 j = j0 + lane;
		float sc = NEG_INF;
		if (j < end) sc = attn_dot(qs, kb + (u64)j * dk, dk, vec) * scale + attn_bias<T>(mask, mask_kind, mrow, msj, j);
		const float mn = MaxOp::combine(m, warp_reduce<MaxOp>(sc));
		if (mn == NEG_INF) continue; // every key so far is masked (the same in every lane)
		const float p = expf(sc - mn), corr = expf(m - mn);
		l = l * corr + warp_reduce<SumOp>(p);
		m = mn;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) acc[i] *= corr;
		const int nk = end - j0 < 32 ? (int)(end - j0) : 32;
#pragma unroll 4
		for (int jj = 0; jj < nk; ++jj) {
			const float pj = __shfl_sync(0xffffffffu, p, jj);
			const T* vr = vb + (u64)(j0 + jj) * dv;
#pragma unroll
			for (int i = 0; i < ATTN_PER_LANE; ++i) {
				const u64 d = lane + 32 * i;
				if (d < dv) acc[i] += pj * to_float(vr[d]);
			}
		}
	}
	attn_write_partial(part + (((u64)b * gridDim.y + blockIdx.y) * splits + sp) * (dv + 2), m, l, acc, dv, lane, 32, true);
}

// attn_decode is attn_decode_split, then split_finish: Y's rows (b * heads + h) * seq + s,
// NaN for a row whose keys are all masked.
template <typename T>
__device__ __forceinline__ void attn_decode(T* out, unsigned* counters, float* part, const T* q, const T* k, const T* v,
	const void* mask, u64 heads, u64 kv_heads, u64 seq, u64 kv_seq, u64 dk, u64 dv, i64 msb, i64 msh, i64 mss, i64 msj,
	unsigned mask_kind, unsigned causal, float scale, unsigned splits) {
	attn_decode_split<T>(part, q, k, v, mask, heads, kv_heads, seq, kv_seq, dk, dv, msb, msh, mss, msj, mask_kind, causal,
		scale, splits);
	split_finish<T>(out, counters, part, dv, splits, QNAN);
}

// Float4 is four floats read or written at once in shared memory.
struct __attribute__((aligned(16))) Float4 {
	float x, y, z, w;
};

// attn_kstride is the row stride of the prefill kernel's staged keys: dk + 4 when dk is a
// multiple of 4 (rows stay 16-byte aligned for Float4 reads, and 8 lanes of a Float4 read hit
// 32 distinct banks), else dk + 1 (lane j reads row j: distinct banks).
__device__ __forceinline__ unsigned attn_kstride(unsigned dk) { return dk % 4 == 0 ? dk + 4 : dk + 1; }

// attn_stage copies rows key0 … key0 + bk - 1 of src (rows of n elements; rows from kmax on
// are zeros) into dst (row stride ds) as float32, in 16-byte packs when vec.
template <typename T>
__device__ __forceinline__ void attn_stage(float* dst, unsigned ds, const T* src, unsigned n, i64 key0, i64 kmax,
	unsigned bk, bool vec) {
	if (vec) {
		const unsigned V = 16 / sizeof(T), units = n / V;
		for (unsigned e = threadIdx.x; e < bk * units; e += blockDim.x) {
			const unsigned j = e / units, c = (e - j * units) * V;
			float* o = dst + j * ds + c;
			if (key0 + (i64)j < kmax) {
				const Pack<T> p = *(const Pack<T>*)(src + (u64)(key0 + j) * n + c);
#pragma unroll
				for (unsigned t = 0; t < V; ++t) o[t] = to_float(p.v[t]);
			} else {
#pragma unroll
				for (unsigned t = 0; t < V; ++t) o[t] = 0.0f;
			}
		}
		return;
	}
	for (unsigned e = threadIdx.x; e < bk * n; e += blockDim.x) {
		const unsigned j = e / n, d = e - j * n;
		dst[j * ds + d] = key0 + (i64)j < kmax ? to_float(src[(u64)(key0 + j) * n + d]) : 0.0f;
	}
}

// attn_prefill is the attention of many query rows: grid (ceil(seq / PF_TILE), heads, batch),
// ATTN_WARPS warps, dynamic shared memory for PF_TILE * dk + bk * attn_kstride(dk) + bk * dv +
// PF_TILE * 32 floats. Block (t, h, b) takes query rows [t * PF_TILE, t * PF_TILE + PF_TILE)
// of head h (with causal, t counts from the last tile, so that the longest blocks start
// first), PF_ROWS per warp, and walks the keys in tiles of bk (at most 32) staged in shared
// memory: lane j scores key j of the tile against its warp's rows, reading each key element
// once for all of them, the running softmax is updated per row, and each lane accumulates the
// values of its dv / 32 dimensions for all rows (skipped by a warp whose weights in the tile
// are all 0). A tile that no row of the block needs is skipped: past every row's causal end,
// or, with a mask, when every row that sees it already has a maximum above -1e29 and the mask
// gives it no key above -1e30 (a finite "minus infinity" such as an exported causal mask's
// lowest float: those keys weigh exp(score - max) = 0 exactly, for scores below 1e29).
template <typename T>
__device__ __forceinline__ void attn_prefill(T* out, const T* q, const T* k, const T* v, const void* mask, u64 heads,
	u64 kv_heads, u64 seq, u64 kv_seq, u64 dk64, u64 dv64, i64 msb, i64 msh, i64 mss, i64 msj, unsigned mask_kind,
	unsigned causal, float scale, unsigned bk) {
	extern __shared__ float smem[];
	const unsigned dk = (unsigned)dk64, dv = (unsigned)dv64, ksd = attn_kstride(dk);
	const unsigned tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
	const u64 b = blockIdx.z, h = blockIdx.y, kvh = h / (heads / kv_heads), s0 = (u64)tile * PF_TILE;
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float* qs = smem;
	float* ks = qs + PF_TILE * dk;
	float* vs = ks + bk * ksd;
	float* ps = vs + bk * dv;
	for (unsigned e = threadIdx.x; e < PF_TILE * dk; e += blockDim.x) {
		const unsigned r = e / dk, d = e - r * dk;
		const u64 s = s0 + r;
		qs[e] = s < seq ? to_float(q[((b * heads + h) * seq + s) * dk + d]) : 0.0f;
	}
	const u64 last = (s0 + PF_TILE < seq ? s0 + PF_TILE : seq) - 1;
	const i64 kmax = attn_keys(last, kv_seq, causal);
	float m[PF_ROWS], l[PF_ROWS], acc[PF_ROWS][ATTN_PER_LANE];
	i64 kend[PF_ROWS], mrow[PF_ROWS];
#pragma unroll
	for (int r = 0; r < PF_ROWS; ++r) {
		const u64 s = s0 + warp * PF_ROWS + r;
		kend[r] = s < seq ? attn_keys(s, kv_seq, causal) : 0;
		mrow[r] = (i64)b * msb + (i64)h * msh + (i64)s * mss;
		m[r] = NEG_INF;
		l[r] = 0.0f;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) acc[r][i] = 0.0f;
	}
	const T* kb = k + (b * kv_heads + kvh) * kv_seq * dk;
	const T* vb = v + (b * kv_heads + kvh) * kv_seq * dv;
	const unsigned V = 16 / sizeof(T);
	const bool kvec = dk % V == 0 && ((u64)k & 15) == 0, vvec = dv % V == 0 && ((u64)v & 15) == 0;
	for (i64 kt = 0; kt < kmax; kt += bk) {
		// Does a row of the block need this tile? (The vote is also the barrier after the previous
		// tile's readers and, the first time, after qs is written.)
		int need = 0;
#pragma unroll
		for (int r = 0; r < PF_ROWS; ++r) {
			if (kt >= kend[r]) continue;
			if (mask_kind == 0 || !(m[r] > -1e29f)) {
				need = 1;
			} else if (lane < bk && kt + (i64)lane < kend[r] &&
				attn_bias<T>(mask, mask_kind, mrow[r], msj, kt + (i64)lane) > -1e30f) {
				need = 1;
			}
		}
		if (!__syncthreads_or(need)) continue;
		attn_stage(ks, ksd, kb, dk, kt, kmax, bk, kvec);
		attn_stage(vs, dv, vb, dv, kt, kmax, bk, vvec);
		__syncthreads();
		float dots[PF_ROWS];
#pragma unroll
		for (int r = 0; r < PF_ROWS; ++r) dots[r] = 0.0f;
		if (lane < bk) {
			const float* kr = ks + lane * ksd;
			const float* qw = qs + warp * PF_ROWS * dk;
			if (dk % 4 == 0) {
				for (unsigned d = 0; d < dk; d += 4) {
					const Float4 kd = *(const Float4*)(kr + d);
#pragma unroll
					for (int r = 0; r < PF_ROWS; ++r) {
						const Float4 qd = *(const Float4*)(qw + r * dk + d);
						dots[r] += qd.x * kd.x + qd.y * kd.y + qd.z * kd.z + qd.w * kd.w;
					}
				}
			} else {
				for (unsigned d = 0; d < dk; ++d) {
					const float kd = kr[d];
#pragma unroll
					for (int r = 0; r < PF_ROWS; ++r) dots[r] += qw[r * dk + d] * kd;
				}
			}
		}
		int any = 0;
#pragma unroll
		for (int r = 0; r < PF_ROWS; ++r) {
			const i64 key = kt + (i64)lane;
			float sc = NEG_INF;
			if (lane < bk && key < kend[r]) sc = dots[r] * scale + attn_bias<T>(mask, mask_kind, mrow[r], msj, key);
			const float mn = MaxOp::combine(m[r], warp_reduce<MaxOp>(sc));
			float p = 0.0f;
			if (mn != NEG_INF) {
				p = expf(sc - mn);
				const float corr = expf(m[r] - mn);
				l[r] = l[r] * corr + warp_reduce<SumOp>(p);
#pragma unroll
				for (int i = 0; i < ATTN_PER_LANE; ++i) acc[r][i] *= corr;
				m[r] = mn;
			}
			any |= p != 0.0f;
			ps[(warp * PF_ROWS + r) * 32 + lane] = p;
		}
		__syncwarp();
		if (__any_sync(0xffffffffu, any)) {
			const float* pw = ps + warp * PF_ROWS * 32;
			for (unsigned j = 0; j < bk; ++j) {
				float pj[PF_ROWS];
#pragma unroll
				for (int r = 0; r < PF_ROWS; ++r) pj[r] = pw[r * 32 + j];
#pragma unroll
				for (int i = 0; i < ATTN_PER_LANE; ++i) {
					const unsigned d = lane + 32 * i;
					if (d < dv) {
						const float vd = vs[j * dv + d];
#pragma unroll
						for (int r = 0; r < PF_ROWS; ++r) acc[r][i] += pj[r] * vd;
					}
				}
			}
		}
	}
#pragma unroll
	for (int r = 0; r < PF_ROWS; ++r) {
		const u64 s = s0 + warp * PF_ROWS + r;
		if (s >= seq) continue;
		T* orow = out + ((b * heads + h) * seq + s) * dv;
#pragma unroll
		for (int i = 0; i < ATTN_PER_LANE; ++i) {
			const unsigned d = lane + 32 * i;
			if (d < dv) orow[d] = from_float<T>(l[r] > 0.0f ? acc[r][i] / l[r] : QNAN);
		}
	}
}

#define ONNX_ATTENTION(sfx, T) \
	extern "C" __global__ void cudaep_attn_decode_##sfx(float* part, const T* q, const T* k, const T* v, \
		const void* mask, u64 heads, u64 kv_heads, u64 seq, u64 kv_seq, u64 dk, u64 dv, i64 msb, i64 msh, i64 mss, \
		i64 msj, unsigned mask_kind, unsigned causal, float scale, unsigned splits, T* out, unsigned* counters) { \
		attn_decode<T>(out, counters, part, q, k, v, mask, heads, kv_heads, seq, kv_seq, dk, dv, msb, msh, mss, msj, \
			mask_kind, causal, scale, splits); \
	} \
	extern "C" __global__ void cudaep_attn_prefill_##sfx(T* out, const T* q, const T* k, const T* v, \
		const void* mask, u64 heads, u64 kv_heads, u64 seq, u64 kv_seq, u64 dk, u64 dv, i64 msb, i64 msh, i64 mss, \
		i64 msj, unsigned mask_kind, unsigned causal, float scale, unsigned bk) { \
		attn_prefill<T>(out, q, k, v, mask, heads, kv_heads, seq, kv_seq, dk, dv, msb, msh, mss, msj, mask_kind, causal, \
			scale, bk); \
	}

ONNX_ATTENTION(f32, float)
ONNX_ATTENTION(f16, half_t)
ONNX_ATTENTION(bf16, bf16_t)

#define ATTENTION(sfx, T) \
	extern "C" __global__ void cudaep_rotary_##sfx(T* out, const T* x, const i64* pos, const T* cosc, const T* sinc, \
		u64 batch, u64 seq, u64 heads, u64 head_size, u64 rot, u64 max_pos, unsigned transposed, unsigned interleaved, \
		unsigned per_token, DataFault* fault, unsigned kernel) { \
		rotary<T>(out, x, pos, cosc, sinc, batch, seq, heads, head_size, rot, max_pos, transposed, interleaved, per_token, \
			fault, kernel); \
	} \
	extern "C" __global__ void cudaep_gqa_append_##sfx(T* pk, T* pv, const T* past_k, const T* past_v, const T* k, \
		const T* v, const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 batch, u64 kv_heads, u64 seq, \
		u64 head_size, u64 past_cap, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, unsigned aliased, \
		DataFault* fault, unsigned kernel) { \
		gqa_append<T>(pk, pv, past_k, past_v, k, v, seqlens, total, cosc, sinc, batch, kv_heads, seq, head_size, past_cap, \
			cap, rot, max_pos, interleaved, aliased, fault, kernel); \
	} \
	extern "C" __global__ void cudaep_gqa_decode_##sfx(float* part, const T* q, const T* kc, const T* vc, \
		const int* seqlens, const int* total, const T* cosc, const T* sinc, u64 heads, u64 kv_heads, u64 seq, \
		u64 head_size, u64 cap, u64 rot, u64 max_pos, unsigned interleaved, float scale, unsigned splits, T* out, \
		unsigned* counters) { \
		gqa_decode_split<T>(part, q, kc, vc, seqlens, total, cosc, sinc, heads, kv_heads, seq, head_size, cap, rot, \
			max_pos, interleaved, scale, splits); \
		split_finish<T>(out, counters, part, head_size, splits, 0.0f); \
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
