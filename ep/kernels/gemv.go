package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	modules = append(modules, ptxModule{"ptx/gemv.ptx", typedEntries(gemvEntries[:], floatTypes)})
}

// gemvPrologue is what a GEMV launch computes the row it multiplies from (cuda/gemv.cu's
// prologues): the row itself, the RMS normalization of a row (plus a skip row), or a gated
// SiLU of two rows.
type gemvPrologue int

const (
	gemvPlain gemvPrologue = iota
	gemvRMSNorm
	gemvSilu
)

// gemvEntries are the kernels' names by prologue, before the dtype suffix.
var gemvEntries = [...]string{gemvPlain: "cudaep_gemv", gemvRMSNorm: "cudaep_gemv_rmsnorm", gemvSilu: "cudaep_gemv_silu"}

// gemvEntry is the kernel a GEMV launch of prologue pro over matrices of dt runs.
func gemvEntry(pro gemvPrologue, dt DType) string { return gemvEntries[pro] + "_" + dt.suffix() }

// gemvRow is what a GEMV launch's prologue reads and writes: the row a (and a2: the skip row
// of gemvRMSNorm, which may be 0, or the up row of gemvSilu), gemvRMSNorm's scale gamma,
// epsilon and sum (0, or where a + a2 is stored).
type gemvRow struct {
	a, a2, gamma, sum cudadrv.DevicePtr
	eps               float32
}

// The GEMV path of MatMul (cuda/gemv.cu): y[1,N] = a[1,K] · B[K,N] when A has one row, as in
// every projection of a decoder's decode step. cublasGemmEx streams B at about half the
// memory's rate there (0.47 of the H200's 4.8 TB/s for float16, 0.53 for bfloat16, M = 1),
// while the product is purely memory-bound: each element of B is read once for one
// multiply-add.
//
// Geometry (see cuda/gemv.cu): blocks of gemvThreads threads; a lane loads 16 bytes of a row,
// so a block's tile is 32·V columns (V = 16 / element size: 256 columns of float16 or
// bfloat16, 128 of float32) and its 8 warps take interleaved rows of a chunk of K, gemvUnroll
// rows' loads in flight per warp. The grid is tiles × chunks; gemvGeometry picks the chunks.
const (
	gemvThreads = 256
	gemvWarps   = gemvThreads / 32
	gemvUnroll  = 8
	// gemvRowStep is the granularity of a chunk's rows: one unrolled step of every warp.
	gemvRowStep = gemvWarps * gemvUnroll
	// gemvBlocksPerSM is how many blocks gemvGeometry plans per SM: what __launch_bounds__
	// (256 threads, 4 blocks) keeps resident (at most 64 registers a thread, 8 KiB of shared
	// memory a block), so that the split grid runs in one wave; 4 blocks with 32 KiB of loads
	// in flight each are well past the bytes that cover the memory's latency at its full rate.
	gemvBlocksPerSM = 4
	// gemvDefaultSMs is the SM count assumed when the device reports none (an H200's).
	gemvDefaultSMs = 132
	// gemvMaxChunks caps the split of K: the last block of a tile reads the chunks' partial
	// sums (4 bytes a column and chunk) alone, a tail that grows with the split.
	gemvMaxChunks = 32
)

// gemvGroup is the most matrices one GEMV launch takes (cuda/gemv.cu's y0…y3, b0…b3).
const gemvGroup = 4

// gemvGeometry returns the GEMV grid for a group of K × N_i matrices of dt (ns: the N_i) on
// a device of sms SMs: tiles of 32·V columns (ceil(N_i / tile), summed over the group), and K
// split into chunks of rows rows (a multiple of gemvRowStep, so every warp runs whole unrolled
// steps but in the last chunk). With target = gemvBlocksPerSM · sms, K is split into
// floor(target / tiles) chunks, at most gemvMaxChunks and none under gemvRowStep rows, so that
// tiles × chunks fills the GPU without a second wave; from target / 2 tiles on (N > 67584
// halves on 132 SMs) the tiles alone do, with one chunk and no partial sums. On an H200 (132
// SMs) that gives, for float16 and bfloat16 at Llama-3.2-1B's decode shapes (K×N): 2048×2048
// 8 tiles × 32 chunks of 64 rows; 2048×512 2 × 32 of 64; 2048×8192 32 × 16 of 128; 8192×2048
// 8 × 32 of 256; 2048×32000 125 × 4 of 512; the group of q, k and v (2048×2048, 2048×512
// twice) 12 × 32 of 64; gate and up (2048×8192 twice) 64 × 8 of 256.
func gemvGeometry(k int64, ns []int64, dt DType, sms int) (tiles, chunks, rows int64) {
	if sms < 1 {
		sms = gemvDefaultSMs
	}
	tc := int64(32 * 16 / dt.Size())
	for _, n := range ns {
		tiles += (n + tc - 1) / tc
	}
	chunks = int64(gemvBlocksPerSM*sms) / tiles
	chunks = max(1, min(chunks, gemvMaxChunks, (k+gemvRowStep-1)/gemvRowStep))
	rows = (k + chunks - 1) / chunks
	rows = (rows + gemvRowStep - 1) / gemvRowStep * gemvRowStep
	chunks = (k + rows - 1) / rows
	return tiles, chunks, rows
}

// gemvPlan is one GEMV launch for a group of matrices sharing the row a,
// cudaep_gemv[_<prologue>]_<t>(a, partials, counters, k, rows, y0…y3, b0…b3, n0…n3, a2,
// gamma, sum, eps), with its grid and,
// when K is split, the Library's scratch for the partial sums (chunks × tiles × tile
// float32s) and its counters (one per tile, left zero by every launch).
type gemvPlan struct {
	fn                 *cudadrv.Function
	pro                gemvPrologue
	k, rows            uint64
	ns                 []uint64 // the group's N_i, at most gemvGroup
	grid               cudadrv.Dim3
	partials, counters cudadrv.DevicePtr
	args               cudadrv.KernelArgs
}

// newGemvPlan plans the GEMV of a [1,K] row, computed by prologue pro, and the [K,N_i]
// matrices of dt (ns: 1 to gemvGroup N_i, each a multiple of 16 / dt.Size()) for l's device,
// getting scratch and counters from l when K is split.
func newGemvPlan(l *Library, pro gemvPrologue, dt DType, k int64, ns ...int64) (*gemvPlan, error) {
	if len(ns) == 0 || len(ns) > gemvGroup {
		return nil, fmt.Errorf("kernels: a GEMV launch takes 1 to %d matrices, not %d", gemvGroup, len(ns))
	}
	tiles, chunks, rows := gemvGeometry(k, ns, dt, l.rt.Context.Device().Multiprocessors())
	g := &gemvPlan{fn: l.function(gemvEntry(pro, dt)), pro: pro, k: uint64(k), rows: uint64(rows),
		grid: cudadrv.Dim3{X: uint32(tiles), Y: uint32(chunks), Z: 1}}
	for _, n := range ns {
		g.ns = append(g.ns, uint64(n))
	}
	if chunks == 1 {
		return g, nil
	}
	tc := uint64(32 * 16 / dt.Size())
	var err error
	if g.partials, err = l.scratchBuffer(uint64(chunks) * uint64(tiles) * tc * 4); err != nil {
		return nil, err
	}
	if g.counters, err = l.counterBuffer(uint64(tiles)); err != nil {
		return nil, err
	}
	return g, nil
}

// gemvApplies reports whether MatMul of A and B (ONNX shapes) of dt takes the GEMV path: A
// has one row once its leading dimensions are flattened (a 1-D A too), B is a matrix (2-D, no
// batch) and its rows are whole 16-byte packs (N a multiple of 8 for float16 and bfloat16, 4
// for float32). The cuBLAS baseline can be forced ("matmul" family, variants.go).
func gemvApplies(a, b []int64, dt DType) bool {
	rows := int64(1)
	for _, d := range a[:len(a)-1] {
		rows *= d
	}
	return rows == 1 && len(b) == 2 && b[1]%int64(16/dt.Size()) == 0 && forcedVariant("matmul") != "cublas"
}

// usable reports whether the GEMV reads a matrix at address b at its full rate: its 16-byte
// loads need b 16-byte aligned (always so for a tensor of its own; a view into another buffer
// may not be), and it reads any other b element by element.
func usable(b cudadrv.DevicePtr) bool { return b%16 == 0 }

// launch queues y_i = row · b_i for the group (ys and bs: one address per matrix, in the plan's
// order).
func (g *gemvPlan) launch(st *cudadrv.Stream, row gemvRow, ys, bs []cudadrv.DevicePtr) error {
	args := &g.args
	args.Reset()
	args.Ptr(row.a).Ptr(g.partials).Ptr(g.counters).U64(g.k).U64(g.rows)
	for _, addrs := range [][]cudadrv.DevicePtr{ys, bs} {
		for i := range gemvGroup {
			var p cudadrv.DevicePtr
			if i < len(g.ns) {
				p = addrs[i]
			}
			args.Ptr(p)
		}
	}
	for i := range gemvGroup {
		var n uint64
		if i < len(g.ns) {
			n = g.ns[i]
		}
		args.U64(n)
	}
	args.Ptr(row.a2).Ptr(row.gamma).Ptr(row.sum).F32(row.eps)
	return st.Launch(g.fn, g.grid, cudadrv.Dim3{X: gemvThreads, Y: 1, Z: 1}, 0, args)
}
