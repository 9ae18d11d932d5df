// Package kernels runs ONNX operators (MatMul, Gemm, elementwise arithmetic, comparisons and
// activations, normalizations, reductions, data movement, Softmax, NonZero, Attention, ONNX
// Runtime's com.microsoft transformer ops and fusions of its own) on a cudadrv stream, from
// embedded PTX and cuBLAS.
//
// # Overview
//
// A [Library] is created once per provider from a [Runtime] (context, stream, cuBLAS handle,
// TF32 choice); it loads the built-in PTX modules once. [Library.Get] turns a [Spec] (op,
// opset, input dtypes and shapes, attributes, and the values of constant inputs in
// [Spec.Consts]) into a [Kernel]; every combination the package
// cannot run is refused there, with an error wrapping [ErrUnsupported] that names the node
// ([Spec.Name], when given), the op, the offending input or attribute and what is supported. A
// Kernel's Execute only queues work on the runtime's stream and allocates nothing.
//
// Values in device data that a kernel cannot use (a Gather index outside its axis, an
// integer divisor of 0, GroupQueryAttention lengths outside its cache, rotary positions outside
// the cos/sin caches), where ONNX Runtime's CPU execution provider stops with an error, are
// data faults: the kernel records the first one in the Library's fault word (16 bytes of
// device memory, at a fixed address, so CUDA graph replays record too) and still produces a
// memory-safe result. After the stream has done the work, [Library.TakeFault] reads and clears
// the word and returns a [*DataFault] naming the node, the op, the input and the value;
// [FaultID] maps a Kernel to the id its faults carry. See # Data faults.
//
// # Support matrix
//
// "float" is float32, float16 and bfloat16 (bfloat16 from opset 13): 16-bit data is computed
// in float32 and rounded to nearest, ties to even, on store. "any" is every dtype the package
// knows but uint8: float32, float16, bfloat16, float64, int32, int64 and bool (uint8 is
// MatMulNBits' packed weights and zero points only).
//
//	op                        dtypes                       opsets  notes
//	MatMul                    float                        >= 1    numpy matmul: 1-D operands, batch broadcasting (at most 4096 GEMM calls); float16 and bfloat16 through cublasGemmEx, float32 accumulation, tensor cores; one row of A against a 2-D B (decode's M = 1) through a GEMV kernel of its own; see # MatMul
//	Gemm                      float                        >= 7    alpha, beta, transA, transB, optional C (unidirectional broadcast)
//	Add, Sub, Mul, Div        float, int32, int64          >= 7    numpy broadcasting, at most 6 dimensions after merging; both inputs alike; integers wrap, Div truncates toward zero; integer x/0 gives 0 and is a data fault
//	Pow                       float (both inputs alike)    >= 7    numpy broadcasting, at most 6 dimensions after merging
//	Equal, Less, Greater      float, int32, int64; Equal   >= 7    bool output, numpy broadcasting; Equal takes floats from opset 11, Less and Greater integers from 9
//	                          also bool
//	Relu, Sigmoid, Tanh, Neg, float                        >= 6    Erf from 9, Sin and Cos from 7
//	Abs, Sqrt, Reciprocal,
//	Exp, Log, Erf, Sin, Cos
//	Gelu                      float                        >= 20   approximate "none" or "tanh"
//	Attention                 float; mask float or bool    >= 23   4-D Q [B,Hq,S,D], K [B,Hkv,T,D], V [B,Hkv,T,Dv] (Hkv divides Hq; D, Dv <= 256); attn_mask of rank <= 4 broadcasting to [B,Hq,S,T]; scale, is_causal (upper-left), q_num_heads and kv_num_heads checked, softcap 0, qk_matmul_output_mode 0; Y only (no past or present caches, no nonpad_kv_seqlen); see # Attention
//	Softmax                   float                        >= 1    axis (negative allowed); opset < 13 flattens from axis
//	LayerNormalization        float                        >= 17   axis (negative allowed), epsilon, stash_type 1; Scale and B of the normalized shape; outputs Y and float32 Mean and InvStdDev (always written)
//	SimplifiedLayerNormalization float (X and scale alike) >= 1    ONNX Runtime's RMSNorm in the default domain: axis, epsilon, stash_type 1; outputs Y and float32 inv_std_var
//	ReduceSum, ReduceMean,    float                        >= 1    axes as attribute (ReduceSum < 13, the others < 18) or constant input (an empty one needs no value); keepdims; noop_with_empty_axes; at most 3 runs each of kept and reduced dimensions; float32 accumulation; ReduceMax propagates NaN
//	ReduceMax
//	Concat                    any                          >= 1    any axis (negative allowed), any number of inputs; axis 1 by default before opset 4
//	Split                     any                          >= 1    axis; split sizes as attribute (< 13) or constant input, num_outputs (>= 18), or equal parts over Spec.NumOutputs
//	Gather                    any; int32 or int64 indices  >= 1    any axis, negative indices (in [-n, n), as ONNX Runtime); indices are a runtime tensor; an index outside [-n, n) gives zeros and is a data fault
//	Trilu                     any                          >= 14   upper (default 1); k a constant scalar input
//	Shape                     any                          >= 1    start and end (>= 15); the int64 output is known at Get and written by Execute
//	Range                     float32, float64, int32,     >= 11   start, limit and delta constant scalars; start + i·delta computed in float64 or int64
//	                          int64
//	ConstantOfShape           any                          >= 9    constant shape input; value a one-element tensor attribute (TensorAttr), default float32 0
//	com.microsoft.SkipLayerNormalization float             >= 1    input (rank 2 or 3) + skip (the input's trailing dimensions, repeated) + bias, normalized over the last dimension with gamma and beta; outputs output, float32 mean and inv_std_var, input_skip_bias_sum (all written)
//	com.microsoft.SkipSimplifiedLayerNormalization float   >= 1    the same as RMSNorm with inputs input, skip, gamma, bias; the mean output is 0
//	com.microsoft.FastGelu    float                        >= 1    Gelu's tanh approximation of X + bias (bias optional, over the last dimension)
//	com.microsoft.RotaryEmbedding float                    >= 1    input [B,S,H·D] or [B,H,S,D]; int64 position_ids, a start position ([] or [1]) or [B,S]; cos_cache and sin_cache [max_pos, R/2]; interleaved, num_heads, rotary_embedding_dim (R < D rotates part of each head), scale (no effect); is_packed_batching 0 only; see # Attention
//	com.microsoft.MatMulNBits float; uint8 B              >= 1    Y = A·Wᵀ (+ bias), W [N,K] quantized to 4 or 8 bits in blocks of 16 to 256 (a power of two) along K, ONNX Runtime's layout; A [...,K]; scales [N,k_blocks] or flattened; zero_points absent, packed uint8 or unpacked in A's dtype; bias [N]; accuracy_level 0–4 (a hint); g_idx and weight_prepacked refused; see # MatMul
//	com.microsoft.GroupQueryAttention float                >= 1    query [B,S,H·D], key and value [B,S,KVH·D], past_key and past_value [B,KVH,P,D], int32 seqlens_k and total_sequence_length, cos_cache and sin_cache with do_rotary; num_heads, kv_num_heads, scale, do_rotary, rotary_interleaved; local_window_size -1, softcap 0 only; D <= 256; see # Attention
//	cudaep.RotateHalf         float (all inputs alike)     >= 1    Y = X·cos + rotate_half(X)·sin (Hugging Face's rotary embedding, rotate_half(X) = [−X₂, X₁] over the halves of the last dimension); X of rank >= 1 with an even last dimension, cos and sin of X's last dimension broadcasting to X's shape
//	cudaep.RotateHalfPair     float (all inputs alike)     >= 1    Y0, Y1 = RotateHalf of X0 and of X1 (one last dimension) with cos and sin of one row (a decode step's query and key), one launch
//	cudaep.SiluMul            float (both inputs alike)    >= 1    Y = A·sigmoid(A)·B, same shapes
//	cudaep.MatMulGroup        float (all inputs alike)     >= 1    Y_i = MatMul(A, B_i) for 1 to 4 matrices in one GEMV launch; A with one row, each B_i [K, N_i] with whole 16-byte rows
//	cudaep.MatMulNBitsGroup   float; uint8 B_i             >= 1    Y_i = MatMulNBits(A, B_i, scales_i, zero_points_i, bias_i) for 1 to 3 matrices (inputs A, then four a matrix, absent ones the zero TensorInfo; attributes K, bits, block_size, accuracy_level, and N as ints, one a matrix); one kind of zero points; fewer than 16 rows in one decode launch
//	cudaep.NormMatMulGroup    float (all inputs alike)     >= 1    the same over A = SimplifiedLayerNormalization(X, scale) (attribute epsilon), computed in the launch; inputs X, scale, B0…
//	cudaep.SkipNormMatMulGroup float (all inputs alike)    >= 1    the same over A = SimplifiedLayerNormalization(X + skip, scale); inputs X, skip, scale, B0…; an optional last output X + skip
//	cudaep.SiluMulMatMulGroup float (all inputs alike)     >= 1    the same over A = SiluMul(A, B); inputs A, B, W0…
//	Where                     bool condition; float,       >= 9    three-way numpy broadcasting, at most 4 dimensions after merging
//	                          int32, int64, bool
//	cudaep.WherePair          as Where                     >= 1    Z0, Z1 = Where(C, X0, Y0), Where(C, X1, Y1), X1 and Y1 of X0's and Y0's dtypes and shapes (a decode step's key and value cache updates); one launch when each output is its own Y (or each its X)
//	Cast                      float32, float16, int32,     >= 6    to nearest (ties to even) between floats, truncation toward zero to integers, "not zero" to bool; bfloat16 is refused (see buildCast)
//	                          int64, bool
//	Identity                  float, float64, int32,       >= 1    a device-to-device copy
//	                          int64, bool
//	NonZero                   float32, int32, int64, bool  >= 9    not capturable; see [NonZeroKernel]
//	Transpose                 any                          >= 1    any permutation, at most 6 dimensions after merging; 64×64 (128×128 for 16- and 8-bit types) tiles through shared memory when the output's last dimension is not the input's innermost
//	Reshape                   any                          >= 5    constant shape: 0 (or allowzero) and -1; a copy
//	Squeeze, Unsqueeze        any                          >= 1    axes attribute (< 13) or constant input (>= 13); a copy
//	Expand                    any                          >= 8    constant shape, numpy broadcasting
//	Slice                     any                          >= 1    attributes (< 10) or constant starts, ends, axes, steps; negative steps walk an axis backwards; non-empty results
//
// # Attention
//
// GroupQueryAttention and RotaryEmbedding follow ONNX Runtime's com.microsoft definitions.
// GroupQueryAttention's present caches [B,KVH,P',D] have the past's capacity (P' = P: the
// fixed-capacity buffer ONNX Runtime GenAI shares between past and present; Execute may be
// given the past buffers as the present outputs, and then writes only the new tokens) or P +
// S (a growing cache). ONNX Runtime chooses by total_sequence_length's value, P' =
// max(total_sequence_length, P); Get does the same with the value in Spec.Consts, and assumes
// P + S (the growing cache) without it: a shared buffer needs a value <= P there, which only
// selects the layout (the kernels read the tensor's value at every execution). Batch b's total_b = seqlens_k[b] + 1 tokens include the S new ones, which go
// to positions total_b − S … total_b − 1 (0 … S−1 in the first prompt, S equal to
// total_sequence_length); query s sees the keys before min(past_b + s + 1, total_b) (causal);
// in-op rotary rotates the new keys and the queries at their positions (1 for padding). One
// query token takes the decode path: the cache is split over several thread blocks per head,
// which write partial softmax results to scratch memory the Library allocates at Get and frees
// at Close, and a second kernel combines them; several take the prefill path, tiles of 16
// query rows against shared-memory tiles of keys. Both compute in float32 and capture into
// CUDA graphs (lengths are read on the device). A rotary position outside the cos/sin caches
// yields NaN, and new tokens beyond the present capacity are dropped: seqlens_k is device data,
// which Execute cannot check, but the kernels record it as a data fault (# Data faults), as
// they do RotaryEmbedding's positions outside its caches.
//
// ONNX's Attention (opset 23) computes softmax(Q·Kᵀ·scale + mask)·V in float32, query head h
// reading key and value head h/(Hq/Hkv). A bool mask's false and, with is_causal, a key after
// the query's row are −∞; a row with every key at −∞ is NaN, as in ONNX's reference
// implementation. Fewer than 16 query rows (decode) take a split path like
// GroupQueryAttention's decode, its partial results in the same Library-owned scratch; more
// take a prefill path of 16-row tiles, which skips the key tiles that a causal end or an
// exported mask's lowest-float entries (below −1e30) leave without weight. Both capture into
// CUDA graphs.
//
// # Data faults
//
// The kernels that read indices or lengths from device data record the first value they cannot
// use (cuda/common.cuh's DataFault: the kernel's id, the input's index and the value, set by
// an atomic compare-and-swap of the id from 0, so the first fault since the word was cleared
// wins and later ones change nothing):
//
//	Gather                          input 1 (indices): an index outside [-n, n), n the axis's extent
//	Div (int32, int64)              input 1 (B): a divisor of 0
//	com.microsoft.GroupQueryAttention input 5 (seqlens_k): outside [0, P'), or after the first prompt below S − 1;
//	                                input 6 (total_sequence_length): outside [1, P'];
//	                                input 7 (cos_cache): a new token's rotary position at or past its rows (the position)
//	com.microsoft.RotaryEmbedding   input 1 (position_ids): a position outside [0, max_pos) (the value position_ids holds)
//
// A host reads the word with [Library.TakeFault] once the stream has finished the work (one
// 16-byte synchronous device-to-host copy), typically after each run of a graph of kernels,
// and fails that run with the returned error; the outputs of a faulting kernel are memory-safe
// (zeros, NaN, dropped tokens) but not meaningful. Valid data records nothing.
//
// # MatMul
//
// MatMul runs cuBLAS (cublasSgemm for float32, honouring the TF32 choice; cublasGemmEx with
// float32 accumulation for float16 and bfloat16), except when A has exactly one row once its
// leading dimensions are flattened (the product of all its dimensions but the last is 1: [K],
// [1,K], [1,1,K], …), B is 2-D [K,N] (no batch) and N is a multiple of 8 for float16 and
// bfloat16, 4 for float32 (B's rows whole 16-byte packs). That is every projection of a
// decoder's decode step, where cuBLAS reads B at about half the memory's rate; a GEMV kernel
// of this package computes it instead, in float32 with one rounding on store: 256-thread
// blocks, each over a tile of 256 columns (128 of float32) and a chunk of K, 16-byte loads of
// B, and K split across blocks when the column tiles alone would not fill the GPU. The chunks'
// partial sums go to Library-owned scratch and are added in a fixed order by the last block
// of each tile, found with per-tile counters that each launch leaves zero: one launch, no
// host synchronization, results bit-identical from run to run and in CUDA graph replays.
// Execute falls back to cuBLAS for a B that is not 16-byte aligned. Get takes the scratch and
// counters of a split (see [Library.Get]).
//
// com.microsoft.MatMulNBits multiplies A by block-quantized weights (ONNX Runtime's
// MatMulNBits layout: cuda/matmul_nbits.cu). Fewer than 16 rows of A (A's dimensions but the
// last flattened: a decode step, a short verify) run a decode kernel that streams B once for
// every 8 rows, 16-byte loads, dequantizing in registers and summing in float32 in a fixed
// order (each column's chunks shared by up to 8 warps of a block, no scratch), with the bias
// added before the one rounding on store; for float16 A, 4 bits, zero points absent or packed,
// block_size >= 32, K a multiple of 32 and at most 8 rows (the float16 int4 Llama case) the
// decode kernel is a tensor-core one instead (mma.sync m16n8k8: 16 columns of B by the rows of
// A, the exact integers q − zp in float16 times A's values summed in float32 per block, then
// scaled in float32, K split over up to 16 warps reduced in a fixed order). More rows dequantize B, in tiles of columns of at
// most 64 MiB of Library scratch (taken at Get), into A's dtype and multiply each tile with
// cuBLAS (float32 accumulation), as ONNX Runtime's CUDA kernel does; the bias is broadcast
// into Y first and the GEMMs add onto it. Both capture into CUDA graphs. No value of B, a
// packed zero point or a scale is invalid, so MatMulNBits records no data faults. Its PTX
// (ptx/matmul_nbits.ptx) is generated with nvcc like the others; a Library whose PTX lacks an
// entry of it refuses the MatMulNBits nodes that need that entry, naming it, and loads every
// other op as before.
//
// Ops whose output shape depends on an input's values read that input from [Spec.Consts]. Ops
// of another domain than ONNX's are named "<domain>.<op>" in [Spec.Op], and their opset is
// that domain's. The "cudaep" domain is this package's own: fusions of op chains that
// exporters emit, which package ep substitutes for the chains. "float" ops accumulate in float32 (the normalizations and reductions too).
//
// Tensors are dense, contiguous and row-major; a tensor with a zero or negative dimension, or
// more than 2^40 elements, is refused, and so are MatMul and Gemm extents beyond cuBLAS's
// 32-bit sizes. Every shape, length and step Get computes from constant values and attributes
// (Slice's steps of ±2^63, Reshape's dimensions, split sizes, Concat extents, Range's count,
// …) is bounded before it is multiplied, added or divided: a value that would overflow int64
// is refused, naming it, and never wraps around into a small size. Get recovers a panic as a
// last line of defence (an error wrapping ErrUnsupported that names the op).
//
// On the simulated device (cudadrv/sim) the PTX entry points run as Go functions registered
// by this package, and cuBLAS is the simulator's own. The simulated normalizations,
// reductions, Softmax, the GEMV (with its RMSNorm prologue) and the attention kernels compute
// in the kernels' float32 operations and order (each block thread its elements, then the
// warp's and the block's trees; the attention kernels' per-warp running softmax, key tiles and
// split merges; fused multiply-adds where the PTX has them), so that an edge row (±FLT_MAX,
// infinities, NaN, denormals) gives the same class of result, NaN, infinite or finite, on both
// backends.
package kernels
