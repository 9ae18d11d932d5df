// mkptx: compute_80
//
// flash_attention.cu: ONNX's Attention for many query rows on tensor cores (onnx_attention.go
// launches it, sim_attention.go mirrors it): cudaep_attn_flash<D>_<t>, D = 64 or 128 the head
// size of Q, K and V alike, t = f16 or bf16. The PTX targets compute_80 (the bfloat16 mma,
// cp.async and ldmatrix need sm_80); NewLibrary skips the module on older devices, and the
// builder keeps attention.cu's float32 prefill kernel there.
//
// The arguments are cudaep_attn_prefill's but the key tile: (out, q, k, v, mask, heads,
// kv_heads, seq, kv_seq, dk, dv, msb, msh, mss, msj, mask_kind, causal, scale), with the same
// semantics (attention.cu, above attn_bias): Q [B, H, S, D], K and V [B, Hkv, T, D], query head
// h reading kv head h / (H / Hkv); the mask's term of (b, h, s, j) at element b·msb + h·msh +
// s·mss + j·msj (mask_kind 1: T values added, 2: bool bytes, 0: none); with causal, row s sees
// keys j <= s. A row that sees no key of finite score is NaN.
//
// Grid (ceil(S / FA_ROWS), H, B), FA_WARPS warps, FA_SMEM(D) bytes of dynamic shared memory.
// Block (t, h, b) takes query rows [r0, r0 + 64), r0 = (gridDim.x − 1 − t)·64 (the longest
// blocks of a causal prompt first), 16 rows a warp, and walks the keys in tiles of FA_KEYS:
//
//   - Q's rows, then each tile's K and V rows, are copied to shared memory with cp.async (16
//     bytes a copy, rows past the end zero-filled; element by element when a base address is
//     not 16-byte aligned), each row's 16-byte chunks XOR-swizzled by the row's low 3 bits so
//     that ldmatrix reads 8 rows without a bank conflict. V's copy overlaps the scores, the
//     next tile's K copy the value products.
//   - Scores: mma.sync.m16n8k16 of the warp's Q fragments (held in registers for the whole
//     walk) with K (ldmatrix, not transposed: K's rows are the B operand's columns), float32
//     accumulators, then · scale + the mask's term; keys outside the row's range are −∞.
//   - Softmax: a running maximum and sum per row (the 4 lanes of a quad share a row: two
//     shuffles); a tile's weights p = exp(score − max) in float32.
//   - Values: the weights become the A operand straight from the score accumulators' layout,
//     split into p_hi = round_T(p) and p_lo = round_T(p − p_hi), and both multiply V
//     (ldmatrix.trans), so that the weights keep about 16 significant bits (bfloat16) rather
//     than 8: the sum is float32 accumulation of products of exact T values.
//   - Tiles no row needs are skipped: past every row's causal end, and, with a mask, a tile
//     whose mask gives no row of the block a key above −1e30 while every row that sees it has
//     a maximum above −1e29 already (a finite "minus infinity" such as an exported causal
//     mask's lowest value: those keys weigh exp(score − max) = 0 exactly). The block reads the
//     tile's mask terms first (independent loads, one trip to L2) and votes.

#include "common.cuh"
#include "rowreduce.cuh"

#define NEG_INF __int_as_float((int)0xff800000)
#define QNAN __int_as_float(0x7fc00000)

#define FA_WARPS 4
#define FA_ROWS (16 * FA_WARPS) // query rows a block
#define FA_KEYS 64              // keys a tile
// FA_SMEM is the dynamic shared memory of a block for head size D: Q's rows and one tile of K
// and of V, 2-byte elements.
#define FA_SMEM(D) ((FA_ROWS + 2 * FA_KEYS) * (D) * 2)

// fa_smem is the shared-memory address of p, for cp.async and ldmatrix.
__device__ __forceinline__ unsigned fa_smem(const void* p) {
	unsigned a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

// fa_at is the offset of element (r, c) of a swizzled tile of D-element rows: chunk c / 8 of
// row r at chunk (c / 8) ^ (r & 7).
template <int D>
__device__ __forceinline__ unsigned fa_at(unsigned r, unsigned c) {
	return r * D + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

// fa_load copies rows row0 … row0 + n − 1 of src (rows of D elements; those at rows or past
// are zeros) into the swizzled tile dst: with cp.async when vec (the caller commits and waits),
// else element by element (the caller's barrier publishes them).
template <int D>
__device__ __forceinline__ void fa_load(u16* dst, const u16* src, i64 row0, i64 rows, unsigned n, bool vec) {
	const unsigned chunks = D / 8;
	for (unsigned e = threadIdx.x; e < n * chunks; e += FA_WARPS * 32) {
		const unsigned r = e / chunks, c = (e % chunks) * 8;
		u16* d = dst + fa_at<D>(r, c);
		const bool in = row0 + (i64)r < rows;
		const u16* s = src + (in ? (u64)(row0 + r) * D + c : 0);
		if (vec) {
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(fa_smem(d)), "l"(s), "r"(in ? 16u : 0u)
						 : "memory");
		} else {
#pragma unroll
			for (int t = 0; t < 8; ++t) d[t] = in ? s[t] : (u16)0;
		}
	}
}

__device__ __forceinline__ void fa_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void fa_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// fa_ldm loads four 8×8 matrices of 16-bit elements (ldmatrix .x4; trans: transposed).
template <bool trans>
__device__ __forceinline__ void fa_ldm(unsigned (&r)[4], unsigned addr) {
	if (trans) {
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
					 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
					 : "r"(addr));
	} else {
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
					 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
					 : "r"(addr));
	}
}

// fa_mma is d += A·B for one mma.sync.m16n8k16 with T operands and float32 accumulators.
template <typename T>
__device__ __forceinline__ void fa_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
template <>
__device__ __forceinline__ void fa_mma<bf16_t>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
				 "{%0, %1, %2, %3};"
				 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
				 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void fa_mma<half_t>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
				 "{%0, %1, %2, %3};"
				 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
				 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// fa_split packs x0 (low half) and x1 rounded to T into hi, and what rounding left of each,
// rounded to T, into lo.
template <typename T>
__device__ __forceinline__ void fa_split(float x0, float x1, unsigned& hi, unsigned& lo);
template <>
__device__ __forceinline__ void fa_split<bf16_t>(float x0, float x1, unsigned& hi, unsigned& lo) {
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(x1), "f"(x0));
	const float h0 = __uint_as_float(hi << 16), h1 = __uint_as_float(hi & 0xffff0000u);
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x1 - h1), "f"(x0 - h0));
}
template <>
__device__ __forceinline__ void fa_split<half_t>(float x0, float x1, unsigned& hi, unsigned& lo) {
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(x1), "f"(x0));
	float h0, h1;
	asm("{ .reg .f16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }" : "=f"(h0), "=f"(h1) : "r"(hi));
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x1 - h1), "f"(x0 - h0));
}

// fa_weight is exp(x − M), 0 for x = −∞ (also when M is −∞, where expf would give NaN).
__device__ __forceinline__ float fa_weight(float x, float M) { return x == NEG_INF ? 0.0f : expf(x - M); }

// fa_bias is the mask's term of the element at offset i.
template <typename T>
__device__ __forceinline__ float fa_bias(const void* mask, unsigned kind, i64 i) {
	if (kind == 1) return to_float(((const T*)mask)[i]);
	if (kind == 2) return ((const u8*)mask)[i] ? 0.0f : NEG_INF;
	return 0.0f;
}

// fa_keys is how many keys row s sees: kv_seq, or with causal min(kv_seq, s + 1).
__device__ __forceinline__ i64 fa_keys(i64 s, i64 kv_seq, unsigned causal) {
	return causal && s + 1 < kv_seq ? s + 1 : kv_seq;
}

template <typename T, int D>
__device__ __forceinline__ void attn_flash(T* out, const T* q, const T* k, const T* v, const void* mask, u64 heads,
	u64 kv_heads, u64 seq64, u64 kv_seq64, i64 msb, i64 msh, i64 mss, i64 msj, unsigned mask_kind, unsigned causal,
	float scale) {
	extern __shared__ __attribute__((aligned(16))) u16 fa_sm[];
	u16* qs = fa_sm;
	u16* ks = qs + FA_ROWS * D;
	u16* vs = ks + FA_KEYS * D;
	const i64 seq = (i64)seq64, kv_seq = (i64)kv_seq64;
	const u64 b = blockIdx.z, h = blockIdx.y, kvh = h / (heads / kv_heads);
	const i64 r0 = (i64)(gridDim.x - 1 - blockIdx.x) * FA_ROWS;
	const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	const u16* qb = (const u16*)q + ((b * heads + h) * seq64) * D;
	const u16* kb = (const u16*)k + (b * kv_heads + kvh) * kv_seq64 * D;
	const u16* vb = (const u16*)v + (b * kv_heads + kvh) * kv_seq64 * D;
	const bool vec = (((u64)q | (u64)k | (u64)v) & 15) == 0;

	fa_load<D>(qs, qb, r0, seq, FA_ROWS, vec);
	fa_commit();
	// The keys of the block: up to its last row's end.
	const i64 last = (r0 + FA_ROWS < seq ? r0 + FA_ROWS : seq) - 1;
	const i64 kmax = fa_keys(last, kv_seq, causal);

	// This thread's two rows (g and g + 8 of the warp's 16) and their state.
	i64 row[2], kend[2], mrow[2];
	float m[2], l[2];
#pragma unroll
	for (int i = 0; i < 2; ++i) {
		row[i] = r0 + warp * 16 + g + 8 * i;
		kend[i] = row[i] < seq ? fa_keys(row[i], kv_seq, causal) : 0;
		mrow[i] = (i64)b * msb + (i64)h * msh + row[i] * mss;
		m[i] = NEG_INF;
		l[i] = 0.0f;
	}
	float o[D / 8][4];
#pragma unroll
	for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

	fa_wait();
	__syncthreads();
	unsigned qf[D / 16][4];
#pragma unroll
	for (int c = 0; c < D / 16; ++c) {
		fa_ldm<false>(qf[c], fa_smem(qs + fa_at<D>(warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, c * 16 + (lane / 16) * 8)));
	}

	if (kmax > 0) {
		fa_load<D>(ks, kb, 0, kv_seq, FA_KEYS, vec);
		fa_commit();
	}
	for (i64 kt = 0; kt < kmax; kt += FA_KEYS) {
		fa_wait();
		__syncthreads(); // K(kt) is in; every warp is done with the previous tile's V
		fa_load<D>(vs, vb, kt, kv_seq, FA_KEYS, vec);
		fa_commit();
		// With a mask: does a row of the block need this tile (see the top of the file)? The
		// loads are independent, so they cost about one trip to L2 together.
		if (mask_kind != 0) {
			int need = 0;
#pragma unroll
			for (int i = 0; i < 2; ++i) need |= kt < kend[i] && !(m[i] > -1e29f);
#pragma unroll
			for (int n = 0; n < FA_KEYS / 8; ++n) {
#pragma unroll
				for (int e = 0; e < 4; ++e) {
					const int i = e / 2;
					const i64 j = kt + n * 8 + 2 * t + (e % 2);
					need |= j < kend[i] && !(fa_bias<T>(mask, mask_kind, mrow[i] + j * msj) <= -1e30f);
				}
			}
			if (!__syncthreads_or(need)) {
				fa_wait();
				__syncthreads(); // every warp is done with K(kt)
				if (kt + FA_KEYS < kmax) {
					fa_load<D>(ks, kb, kt + FA_KEYS, kv_seq, FA_KEYS, vec);
					fa_commit();
				}
				continue;
			}
		}
		float s[FA_KEYS / 8][4];
#pragma unroll
		for (int n = 0; n < FA_KEYS / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
		for (int n2 = 0; n2 < FA_KEYS / 16; ++n2) {
#pragma unroll
			for (int c = 0; c < D / 16; ++c) {
				unsigned kf[4];
				fa_ldm<false>(kf, fa_smem(ks + fa_at<D>(n2 * 16 + (lane % 8) + (lane / 16) * 8, c * 16 + ((lane / 8) % 2) * 8)));
				fa_mma<T>(s[2 * n2], qf[c], kf[0], kf[1]);
				fa_mma<T>(s[2 * n2 + 1], qf[c], kf[2], kf[3]);
			}
		}
		// Scores, the tile's maximum per row, the running state, the weights.
		float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
		for (int n = 0; n < FA_KEYS / 8; ++n) {
#pragma unroll
			for (int e = 0; e < 4; ++e) {
				const int i = e / 2;
				const i64 j = kt + n * 8 + 2 * t + (e % 2);
				float sc = NEG_INF;
				if (j < kend[i]) sc = s[n][e] * scale + fa_bias<T>(mask, mask_kind, mrow[i] + j * msj);
				s[n][e] = sc;
				mx[i] = MaxOp::combine(mx[i], sc);
			}
		}
#pragma unroll
		for (int i = 0; i < 2; ++i) {
			mx[i] = MaxOp::combine(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
			mx[i] = MaxOp::combine(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
			const float mn = MaxOp::combine(m[i], mx[i]);
			const float corr = fa_weight(m[i], mn);
			m[i] = mn;
			l[i] *= corr;
#pragma unroll
			for (int n = 0; n < D / 8; ++n) {
				o[n][2 * i] *= corr;
				o[n][2 * i + 1] *= corr;
			}
		}
#pragma unroll
		for (int n = 0; n < FA_KEYS / 8; ++n) {
#pragma unroll
			for (int e = 0; e < 4; ++e) {
				const float p = fa_weight(s[n][e], m[e / 2]);
				s[n][e] = p;
				l[e / 2] += p;
			}
		}
		fa_wait();
		__syncthreads(); // V(kt) is in; every warp is done with K(kt)
		if (kt + FA_KEYS < kmax) {
			fa_load<D>(ks, kb, kt + FA_KEYS, kv_seq, FA_KEYS, vec);
			fa_commit();
		}
#pragma unroll
		for (int c = 0; c < FA_KEYS / 16; ++c) {
			unsigned hi[4], lo[4];
			fa_split<T>(s[2 * c][0], s[2 * c][1], hi[0], lo[0]);
			fa_split<T>(s[2 * c][2], s[2 * c][3], hi[1], lo[1]);
			fa_split<T>(s[2 * c + 1][0], s[2 * c + 1][1], hi[2], lo[2]);
			fa_split<T>(s[2 * c + 1][2], s[2 * c + 1][3], hi[3], lo[3]);
#pragma unroll
			for (int n2 = 0; n2 < D / 16; ++n2) {
				unsigned vf[4];
				fa_ldm<true>(vf, fa_smem(vs + fa_at<D>(c * 16 + (lane % 8) + ((lane / 8) % 2) * 8, n2 * 16 + (lane / 16) * 8)));
				fa_mma<T>(o[2 * n2], hi, vf[0], vf[1]);
				fa_mma<T>(o[2 * n2], lo, vf[0], vf[1]);
				fa_mma<T>(o[2 * n2 + 1], hi, vf[2], vf[3]);
				fa_mma<T>(o[2 * n2 + 1], lo, vf[2], vf[3]);
			}
		}
	}
#pragma unroll
	for (int i = 0; i < 2; ++i) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		if (row[i] >= seq) continue;
		const float inv = l[i] > 0.0f ? 1.0f / l[i] : QNAN;
		T* orow = out + ((b * heads + h) * seq64 + (u64)row[i]) * D;
#pragma unroll
		for (int n = 0; n < D / 8; ++n) {
			orow[n * 8 + 2 * t] = from_float<T>(o[n][2 * i] * inv);
			orow[n * 8 + 2 * t + 1] = from_float<T>(o[n][2 * i + 1] * inv);
		}
	}
}

#define FLASH_ATTENTION(D, sfx, T) \
	extern "C" __global__ void __launch_bounds__(FA_WARPS * 32) cudaep_attn_flash##D##_##sfx(T* out, const T* q, \
		const T* k, const T* v, const void* mask, u64 heads, u64 kv_heads, u64 seq, u64 kv_seq, u64 dk, u64 dv, i64 msb, \
		i64 msh, i64 mss, i64 msj, unsigned mask_kind, unsigned causal, float scale) { \
		(void)dk; \
		(void)dv; \
		attn_flash<T, D>(out, q, k, v, mask, heads, kv_heads, seq, kv_seq, msb, msh, mss, msj, mask_kind, causal, scale); \
	}

FLASH_ATTENTION(64, f16, half_t)
FLASH_ATTENTION(64, bf16, bf16_t)
FLASH_ATTENTION(128, f16, half_t)
FLASH_ATTENTION(128, bf16, bf16_t)
