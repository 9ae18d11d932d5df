package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	builders["com.microsoft.MatMulNBits"] = builder{inputNames: nbitsInputs, optional: []int{3, 4}, build: buildMatMulNBits}
	modules = append(modules, ptxModule{"ptx/matmul_nbits.ptx", nbitsEntries()})
}

// nbitsInputs are MatMulNBits' inputs in ONNX Runtime's order.
var nbitsInputs = []string{"A", "B", "scales", "zero_points", "g_idx", "bias"}

// nbitsAttrs are the attributes MatMulNBits reads.
var nbitsAttrs = map[string]AttrKind{"K": AttrInt, "N": AttrInt, "bits": AttrInt, "block_size": AttrInt,
	"accuracy_level": AttrInt, "weight_prepacked": AttrInt}

// Geometry and limits of the MatMulNBits kernels (cuda/matmul_nbits.cu).
const (
	nbitsThreads = 256 // NB_THREADS: a decode block
	nbitsWarps   = nbitsThreads / 32
	nbitsRows    = 8 // NB_ROWS: rows of A a decode block multiplies
	nbitsGroup   = 3 // NB_GROUP: matrices one decode launch takes
	// nbitsPrefillRows is the row count of A from which MatMulNBits dequantizes B into tiles
	// for cuBLAS instead of streaming it through the decode kernel, which reads B once for every
	// nbitsRows rows.
	nbitsPrefillRows = 16
	nbitsMinBlock    = 16
	nbitsMaxBlock    = 256
	nbitsMaxGridX    = math.MaxInt32
	nbitsMaxGridY    = 65535
	// The tensor-core decode kernel (cudaep_mmnb_mma_q4_f16): NBM_COLS columns a block, a warp
	// step of NBM_STEP weights of a row, at most NBM_MAX_WARPS warps a block.
	nbitsMMACols     = 16
	nbitsMMAStep     = 256
	nbitsMMAMaxWarps = 16
)

// nbitsTileBytes bounds the Library scratch a prefill's dequantized tile of B takes (a
// variable so that tests can make tiles small).
var nbitsTileBytes int64 = 64 << 20

// nbitsZP is where the zero points come from (cuda/matmul_nbits.cu's NB_ZP_*).
type nbitsZP uint64

const (
	nbitsZPNone   nbitsZP = iota // 2^(bits−1)
	nbitsZPPacked                // uint8, packed along the blocks as B is
	nbitsZPTyped                 // A's dtype, one a block
)

// nbitsEntry is the kernel of stage ("gemv", "mma" or "dequant") for weights of bits over data
// of dt.
func nbitsEntry(stage string, bits int64, dt DType) string {
	return fmt.Sprintf("cudaep_mmnb_%s_q%d_%s", stage, bits, dt.suffix())
}

// nbitsEntries lists the entry points of ptx/matmul_nbits.ptx.
func nbitsEntries() []string {
	var e []string
	for _, bits := range []int64{4, 8} {
		for _, dt := range floatTypes {
			e = append(e, nbitsEntry("gemv", bits, dt), nbitsEntry("dequant", bits, dt))
		}
	}
	return append(e, nbitsEntry("mma", 4, Float16))
}

// nbitsQuant is the quantization a MatMulNBits node declares: K, N, bits and block_size, and
// what follows from them (ONNX Runtime's layout: k_blocks = ceil(K / block_size) blocks a
// column of blob = block_size·bits/8 bytes each, and zpRow = ceil(k_blocks·bits/8) bytes of
// packed zero points a column).
type nbitsQuant struct {
	k, n, bits, bs       int64
	kBlocks, blob, zpRow int64
}

// nbitsQuantOf reads and checks s's attributes.
func nbitsQuantOf(s opSpec) (nbitsQuant, error) {
	var q nbitsQuant
	if err := s.checkAttrs(nbitsAttrs); err != nil {
		return q, err
	}
	for _, name := range []string{"K", "N", "block_size"} {
		if _, ok := s.Attrs[name]; !ok {
			return q, s.errorf("attribute %q is required", name)
		}
	}
	q.k, q.n, q.bits, q.bs = s.intAttr("K", 0), s.intAttr("N", 0), s.intAttr("bits", 4), s.intAttr("block_size", 0)
	switch {
	case q.k < 1:
		return q, s.errorf(`attribute "K" is %d; it must be positive`, q.k)
	case q.n < 1:
		return q, s.errorf(`attribute "N" is %d; it must be positive`, q.n)
	case q.bits == 2:
		return q, s.errorf(`attribute "bits" is 2: 2-bit weights are not supported (4 and 8 are)`)
	case q.bits != 4 && q.bits != 8:
		return q, s.errorf(`attribute "bits" is %d; ONNX Runtime defines 2, 4 and 8, and 4 and 8 are supported`, q.bits)
	case q.bs < nbitsMinBlock || q.bs > nbitsMaxBlock || q.bs&(q.bs-1) != 0:
		return q, s.errorf(`attribute "block_size" is %d; it must be a power of two from %d to %d`, q.bs, nbitsMinBlock, nbitsMaxBlock)
	}
	if v := s.intAttr("accuracy_level", 0); v < 0 || v > 4 {
		return q, s.errorf(`attribute "accuracy_level" is %d; it must be 0 to 4`, v)
	}
	if v := s.intAttr("weight_prepacked", 0); v != 0 {
		return q, s.errorf(`attribute "weight_prepacked" is %d; only 0 (B in ONNX Runtime's MatMulNBits layout, not a prepacked one) is supported`, v)
	}
	q.kBlocks = (q.k-1)/q.bs + 1
	q.blob = q.bs * q.bits / 8
	q.zpRow = (q.kBlocks*q.bits + 7) / 8 // kBlocks <= 2^59: no overflow
	return q, nil
}

// nbitsMatrix is one validated quantized weight of a MatMulNBits: its quantization, where its
// zero points come from and whether it has a bias.
type nbitsMatrix struct {
	nbitsQuant
	zp   nbitsZP
	bias bool
}

// checkNBitsMatrix validates the inputs b, scales, zp and bias (indices into s.Inputs; zp and
// bias -1 or an absent input when not given) of a weight quantized as q, for A of dtype dt.
func checkNBitsMatrix(s opSpec, q nbitsQuant, dt DType, b, scales, zp, bias int) (nbitsMatrix, error) {
	m := nbitsMatrix{nbitsQuant: q}
	if err := s.checkInput(b, []DType{Uint8}, 3, 3); err != nil {
		return m, err
	}
	if sh := s.Inputs[b].Shape; sh[0] != q.n || sh[1] != q.kBlocks || sh[2] != q.blob {
		return m, s.errorf("%s has shape %s; for K %d, N %d, %d bits and block_size %d it must be [N %d, k_blocks %d, block_size·bits/8 %d]",
			s.input(b), shapeString(sh), q.k, q.n, q.bits, q.bs, q.n, q.kBlocks, q.blob)
	}
	// B's shape is bounded (checkInput), so N·k_blocks and N·zpRow cannot overflow.
	perBlock := func(i int, what string, cols int64) error {
		sh := s.Inputs[i].Shape
		if (len(sh) == 2 && sh[0] == q.n && sh[1] == cols) || (len(sh) == 1 && sh[0] == q.n*cols) {
			return nil
		}
		return s.errorf("%s has shape %s; %s it must be [N %d, %d] or [%d]", s.input(i), shapeString(sh), what, q.n, cols, q.n*cols)
	}
	if s.Inputs[scales].DType != dt {
		return m, s.errorf("%s is %s; it must have %s's dtype, %s", s.input(scales), s.Inputs[scales].DType, s.input(0), dt)
	}
	if err := s.checkInput(scales, floatTypes, 1, 2); err != nil {
		return m, err
	}
	if err := perBlock(scales, "with one scale a block", q.kBlocks); err != nil {
		return m, err
	}
	if zp >= 0 && zp < len(s.Inputs) && !absent(s.Inputs[zp]) {
		switch s.Inputs[zp].DType {
		case Uint8:
			m.zp = nbitsZPPacked
			if err := s.checkInput(zp, []DType{Uint8}, 1, 2); err != nil {
				return m, err
			}
			if err := perBlock(zp, fmt.Sprintf("packed (uint8, %d-bit zero points, ceil(k_blocks·bits/8) bytes a column)", q.bits), q.zpRow); err != nil {
				return m, err
			}
		case dt:
			m.zp = nbitsZPTyped
			if err := s.checkInput(zp, floatTypes, 1, 2); err != nil {
				return m, err
			}
			if err := perBlock(zp, fmt.Sprintf("unpacked (%s, one zero point a block)", dt), q.kBlocks); err != nil {
				return m, err
			}
		default:
			return m, s.errorf("%s is %s; it must be uint8 (packed) or %s's dtype %s (unpacked)", s.input(zp), s.Inputs[zp].DType, s.input(0), dt)
		}
	}
	if bias >= 0 && bias < len(s.Inputs) && !absent(s.Inputs[bias]) {
		if s.Inputs[bias].DType != dt {
			return m, s.errorf("%s is %s; it must have %s's dtype, %s", s.input(bias), s.Inputs[bias].DType, s.input(0), dt)
		}
		if err := s.checkInput(bias, floatTypes, 1, 1); err != nil {
			return m, err
		}
		if sh := s.Inputs[bias].Shape; sh[0] != q.n {
			return m, s.errorf("%s has shape %s; it must be [N %d]", s.input(bias), shapeString(sh), q.n)
		}
		m.bias = true
	}
	return m, nil
}

// nbitsWarpsPerColumn is the decode kernel's wpc for K weights of bits: the most warps, a
// power of two up to 8, that each get a warp step (32 chunks of 16 bytes, the last one maybe
// partial) of a column's row, so that a column's row is read by as many warps in parallel as
// it has steps. The block's 8 warps then take 8 / wpc columns.
func nbitsWarpsPerColumn(k, bits int64) int64 {
	chunks := (k + 128/bits - 1) / (128 / bits)
	steps := (chunks + 31) / 32
	w := int64(1)
	for w < nbitsWarps && 2*w <= steps {
		w *= 2
	}
	return w
}

// nbitsMMAApplies reports whether the tensor-core decode kernel, cudaep_mmnb_mma_q4_f16, takes
// rows of A of dtype dt times m: float16, 4 bits, zero points absent or packed (not unpacked),
// a block size of 32 or more (a block is whole 32-weight sub-blocks, each mma inside one
// block), K a multiple of 32 (a lane's loads never straddle K) and 1 to nbitsRows rows (the
// mma's 8 columns). Every other MatMulNBits decode runs cudaep_mmnb_gemv_q<bits>_<t>.
func nbitsMMAApplies(dt DType, m nbitsMatrix, rows int64) bool {
	return dt == Float16 && m.bits == 4 && m.zp != nbitsZPTyped && m.bs >= 32 && m.k%32 == 0 && rows >= 1 && rows <= nbitsRows
}

// nbitsMMAWarps is the tensor-core decode kernel's kw for K weights: the most warps, a power of
// two up to nbitsMMAMaxWarps, that each get a step (nbitsMMAStep weights of each of the
// block's 16 rows, the last one maybe partial), so that a tile's K is split over as many
// warps as it has steps: 8 at K = 2048 (one step each), 16 at K >= 4096.
func nbitsMMAWarps(k int64) int64 {
	steps := (k + nbitsMMAStep - 1) / nbitsMMAStep
	w := int64(1)
	for w < nbitsMMAMaxWarps && 2*w <= steps {
		w *= 2
	}
	return w
}

// nbitsMMATiles is the tensor-core decode grid's blocks for n columns.
func nbitsMMATiles(n int64) int64 { return (n + nbitsMMACols - 1) / nbitsMMACols }

// nbitsKernel is com.microsoft.MatMulNBits: Y = A · dequant(B)ᵀ (+ bias), with A's leading
// dimensions flattened into rows. Fewer than nbitsPrefillRows rows run a decode kernel once (a
// group of one matrix): the tensor-core cudaep_mmnb_mma_q4_f16 where nbitsMMAApplies, else
// cudaep_mmnb_gemv_q<bits>_<t>; more run, per tile of columns,
// cudaep_mmnb_dequant_q<bits>_<t> into Library scratch and a cuBLAS GEMM of A by the tile,
// after the bias, if any, is broadcast into Y (the GEMMs then add onto it, beta 1).
type nbitsKernel struct {
	kernelBase
	m       nbitsMatrix
	dt      DType
	rows    uint64
	variant string // "gemv", "mma" or "dequant" (variants.go, family "matmulnbits")

	fn    *cudadrv.Function // the decode kernel, or the dequantization
	grid  cudadrv.Dim3
	block cudadrv.Dim3 // decode
	wpc   uint64       // decode: "gemv"'s warps a column, or "mma"'s warps a block (kw)

	scratch cudadrv.DevicePtr // prefill: the dequantized tile
	tile    uint64            // prefill: columns a tile
	calls   []gemmCall        // prefill: one GEMM a tile
	expand  *cudadrv.Function // prefill with bias: the broadcast of the bias into Y
	dims    [maxBroadcastDims]int64
	strides [maxBroadcastDims]int64
	args    cudadrv.KernelArgs
}

// buildMatMulNBits builds com.microsoft.MatMulNBits (opset 1 of that domain) as ONNX Runtime
// defines it:
//
//   - Attributes: K, N and block_size (required; block_size a power of two from 16 to 256),
//     bits (4, the default, or 8), accuracy_level (0 to 4, a hint: the kernels always compute
//     in float32 from A as given), weight_prepacked (0 only).
//   - Inputs: A (float32, float16 or bfloat16, [..., K]), B (uint8 [N, ceil(K/block_size),
//     block_size·bits/8], each column's weights packed along K, the low nibble first for 4
//     bits; the last block's weights past K are padding and ignored), scales (A's dtype, [N,
//     k_blocks] or flattened), zero_points (optional: packed uint8 [N, ceil(k_blocks·bits/8)]
//     or flattened, or unpacked in A's dtype [N, k_blocks] or flattened; absent, 2^(bits−1)),
//     g_idx (refused when given), bias (optional, A's dtype, [N]). zero_points and g_idx may
//     be absent before a given bias (the zero TensorInfo, see Spec.Inputs).
//   - Output: Y, A's dtype, [..., N].
//
// W[n, k] = (q[n, k] − zp[n, k / block_size]) · scale[n, k / block_size] and Y = A · Wᵀ +
// bias, computed in float32 and rounded once on store by the decode kernels (the tensor-core
// one for float16 A, 4 bits, zero points absent or packed, block_size >= 32, K a multiple of
// 32 and at most 8 rows: exact (q − zp) times A's float16 values, summed in float32 per block
// and scaled in float32; see cuda/matmul_nbits.cu); the prefill path
// rounds the dequantized weights to A's dtype for cuBLAS (float32 accumulation, TF32 when the
// Library's Runtime asks for it), as ONNX Runtime's CUDA kernel does. Neither records a data
// fault: no value of B, a packed zero point or a scale is invalid. Both capture into CUDA
// graphs. More than nbitsPrefillRows - 1 rows need the Runtime's cuBLAS handle.
func buildMatMulNBits(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(3, 6); err != nil {
		return nil, err
	}
	q, err := nbitsQuantOf(s)
	if err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	a := s.Inputs[0]
	dt := a.DType
	if last := a.Shape[len(a.Shape)-1]; last != q.k {
		return nil, s.errorf("%s has shape %s; its last dimension %d must be attribute \"K\" = %d", s.input(0), shapeString(a.Shape), last, q.k)
	}
	if len(s.Inputs) > 4 && !absent(s.Inputs[4]) {
		return nil, s.errorf("%s is given (%s): act-order group indices, deprecated in ONNX Runtime, are not supported; quantize the weights without g_idx", s.input(4), s.Inputs[4])
	}
	m, err := checkNBitsMatrix(s, q, dt, 1, 2, 3, 5)
	if err != nil {
		return nil, err
	}
	out := append(append([]int64{}, a.Shape[:len(a.Shape)-1]...), q.n)
	if err := s.checkOutput(out); err != nil {
		return nil, err
	}
	rows := product(a.Shape[:len(a.Shape)-1])
	k := &nbitsKernel{kernelBase: newBase(l, s, TensorInfo{DType: dt, Shape: out}), m: m, dt: dt, rows: uint64(rows), variant: "gemv"}
	mma := nbitsMMAApplies(dt, m, rows)
	switch {
	case rows >= nbitsPrefillRows:
		k.variant = "dequant"
	case mma:
		k.variant = "mma"
	}
	if v := forcedVariant("matmulnbits"); v == "gemv" || v == "dequant" || (v == "mma" && mma) {
		k.variant = v
	}
	switch k.variant {
	case "mma":
		if k.fn, err = l.entry(s, nbitsEntry("mma", 4, dt)); err != nil {
			return nil, err
		}
		k.wpc = uint64(nbitsMMAWarps(q.k))
		tiles := nbitsMMATiles(q.n)
		if tiles > nbitsMaxGridX {
			return nil, s.errorf("N %d needs a grid of %d blocks; at most %d fit one launch", q.n, tiles, nbitsMaxGridX)
		}
		k.grid = cudadrv.Dim3{X: uint32(tiles), Y: 1, Z: 1}
		k.block = cudadrv.Dim3{X: uint32(32 * k.wpc), Y: 1, Z: 1}
		return k, nil
	case "gemv":
		if k.fn, err = l.entry(s, nbitsEntry("gemv", q.bits, dt)); err != nil {
			return nil, err
		}
		k.wpc = uint64(nbitsWarpsPerColumn(q.k, q.bits))
		tiles, groups := nbitsTiles(q.n, int64(k.wpc)), (rows+nbitsRows-1)/nbitsRows
		if tiles > nbitsMaxGridX || groups > nbitsMaxGridY {
			return nil, s.errorf("N %d and %d rows of %s need a grid of %d × %d blocks; at most %d × %d fit one launch",
				q.n, rows, s.input(0), tiles, groups, nbitsMaxGridX, nbitsMaxGridY)
		}
		k.grid = cudadrv.Dim3{X: uint32(tiles), Y: uint32(groups), Z: 1}
		k.block = cudadrv.Dim3{X: nbitsThreads, Y: 1, Z: 1}
		return k, nil
	}
	return k, k.planPrefill(l, s)
}

// nbitsTiles is the decode grid's blocks for n columns at wpc warps a column.
func nbitsTiles(n, wpc int64) int64 {
	cols := nbitsWarps / wpc
	return (n + cols - 1) / cols
}

// planPrefill plans the prefill path: tiles of columns small enough for nbitsTileBytes of
// scratch, each dequantized and multiplied by one GEMM.
func (k *nbitsKernel) planPrefill(l *Library, s opSpec) error {
	if err := checkBLAS(l, s); err != nil {
		return err
	}
	q, rows, size := k.m.nbitsQuant, int64(k.rows), int64(k.dt.Size())
	if err := checkBLASSizes(s, rows, q.k, q.n); err != nil {
		return err
	}
	var err error
	if k.fn, err = l.entry(s, nbitsEntry("dequant", q.bits, k.dt)); err != nil {
		return err
	}
	colBytes := q.k * size
	if colBytes > nbitsTileBytes {
		return s.errorf("attribute \"K\" is %d: a dequantized column (%d bytes) exceeds the %d bytes of scratch a tile of the prefill path may take", q.k, colBytes, nbitsTileBytes)
	}
	tile := min(q.n, nbitsTileBytes/colBytes)
	tiles := (q.n + tile - 1) / tile
	if tiles > maxGemmCalls {
		return s.errorf("N %d in tiles of %d columns needs %d GEMM calls; at most %d are supported", q.n, tile, tiles, maxGemmCalls)
	}
	if k.scratch, err = l.scratchBuffer(uint64(tile * colBytes)); err != nil {
		return err
	}
	k.tile = uint64(tile)
	beta := float32(0)
	if k.m.bias {
		beta = 1
		k.expand = l.function("cudaep_expand_" + k.dt.sizeSuffix())
		y := []int64{rows, q.n}
		k.dims, k.strides = mergeDims(y, broadcastStrides([]int64{q.n}, y)).padded(0)
	}
	for n0 := int64(0); n0 < q.n; n0 += tile {
		nt := min(tile, q.n-n0)
		k.calls = append(k.calls, gemmCall{
			p: cudadrv.GemmParams{TransA: cudadrv.OpT, TransB: cudadrv.OpN, M: int(nt), N: int(rows), K: int(q.k),
				Alpha: 1, Beta: beta, LDA: int(q.k), LDB: int(q.k), LDC: int(q.n), Type: blasType(k.dt)},
			yOff: cudadrv.DevicePtr(n0 * size),
		})
	}
	return nil
}

// decode reports whether k runs a decode kernel ("gemv" or "mma"): one launch of k.fn on
// k.grid and k.block, whose arguments are the same for both (k.wpc in the sixth).
func (k *nbitsKernel) decode() bool { return k.variant == "gemv" || k.variant == "mma" }

// Execute queues the decode kernel, or the prefill's bias broadcast, dequantizations and
// GEMMs.
func (k *nbitsKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	zp, bias := nbitsOptional(inputs, 3), nbitsOptional(inputs, 5)
	y := outputs[0].Ptr
	st := k.lib.rt.Stream
	a := &k.args
	q := k.m.nbitsQuant
	if k.decode() {
		a.Reset()
		a.Ptr(inputs[0].Ptr).U64(k.rows).U64(uint64(q.k)).U64(uint64(q.bs)).U64(uint64(k.m.zp)).U64(k.wpc)
		a.Ptr(y).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).Ptr(zp).Ptr(bias).U64(uint64(q.n))
		for range nbitsGroup - 1 {
			a.Ptr(0).Ptr(0).Ptr(0).Ptr(0).Ptr(0).U64(0)
		}
		return st.Launch(k.fn, k.grid, k.block, 0, a)
	}
	if k.m.bias {
		n := k.rows * uint64(q.n)
		a.Reset()
		a.Ptr(y).Ptr(bias).U64(n)
		for _, d := range k.dims {
			a.I64(d)
		}
		for _, s := range k.strides {
			a.I64(s)
		}
		if err := st.Launch(k.expand, linearGrid(n), linearBlock, 0, a); err != nil {
			return err
		}
	}
	nc := uint64((q.k + 128/q.bits - 1) / (128 / q.bits))
	for i := range k.calls {
		n0 := uint64(i) * k.tile
		nt := uint64(k.calls[i].p.M)
		a.Reset()
		a.Ptr(k.scratch).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).Ptr(zp).U64(uint64(q.k)).U64(uint64(q.bs)).U64(uint64(k.m.zp)).U64(n0).U64(nt)
		if err := st.Launch(k.fn, linearGrid(nt*nc), linearBlock, 0, a); err != nil {
			return err
		}
		if err := k.calls[i].run(k.lib.rt.BLAS, inputs[0].Ptr, k.scratch, y); err != nil {
			return err
		}
	}
	return nil
}

// nbitsOptional is the address of optional input i, 0 when it is absent or not given.
func nbitsOptional(inputs []Tensor, i int) cudadrv.DevicePtr {
	if i < len(inputs) {
		return inputs[i].Ptr
	}
	return 0
}

func init() {
	builders["cudaep.MatMulNBitsGroup"] = builder{inputNames: nbitsGroupInputs, optional: nbitsGroupOptional(), build: buildMatMulNBitsGroup}
}

// nbitsGroupInputs are cudaep.MatMulNBitsGroup's inputs: A, then four a matrix.
var nbitsGroupInputs = func() []string {
	names := []string{"A"}
	for i := range nbitsGroup {
		for _, in := range []string{"B", "scales", "zero_points", "bias"} {
			names = append(names, fmt.Sprintf("%s%d", in, i))
		}
	}
	return names
}()

// nbitsGroupOptional are the indices of the group's zero points and biases.
func nbitsGroupOptional() []int {
	var o []int
	for i := range nbitsGroup {
		o = append(o, 3+4*i, 4+4*i)
	}
	return o
}

// nbitsGroupKernel is cudaep.MatMulNBitsGroup: the MatMulNBits of one A with each of up to
// nbitsGroup quantized matrices (a decoder's q, k and v projections), one MatMulNBits kernel
// each (subs), and for fewer than nbitsPrefillRows rows one launch of their decode kernel
// (the matrices share A, K, bits, block_size and the kind of zero points, so they all take
// the same one, "gemv" or "mma") for all of them instead, whose grid is the matrices' column
// tiles one after the other.
type nbitsGroupKernel struct {
	kernelBase
	subs []*nbitsKernel
	grid cudadrv.Dim3          // decode: the group's launch
	ins  [nbitsGroup][6]Tensor // each MatMulNBits' inputs (scratch)
	outs [nbitsGroup][1]Tensor // and output
	args cudadrv.KernelArgs
}

// buildMatMulNBitsGroup builds cudaep.MatMulNBitsGroup (any opset of the cudaep domain): A,
// then for each of 1 to 3 matrices B_i, scales_i, zero_points_i and bias_i as MatMulNBits takes
// them (zero_points_i and bias_i may be absent: the zero TensorInfo); attributes K, bits,
// block_size and accuracy_level as MatMulNBits', and N, one value a matrix (ints). Outputs Y_i
// as MatMulNBits' Y. Every matrix is validated as the MatMulNBits node it replaces, and the
// matrices must agree in where their zero points come from (absent, packed or unpacked: the
// decode kernels take one kind). Fewer than 16 rows of A run one decode launch for the group
// (the tensor-core kernel where MatMulNBits would run it), each output bit-identical to its
// MatMulNBits'; more run each MatMulNBits' prefill.
func buildMatMulNBitsGroup(l *Library, s opSpec) (Kernel, error) {
	g := (len(s.Inputs) - 1) / 4
	if g < 1 || g > nbitsGroup || len(s.Inputs) != 1+4*g {
		return nil, s.errorf("got %d inputs; a group takes A and four inputs (B, scales, zero_points, bias; absent ones the zero TensorInfo) for each of 1 to %d matrices", len(s.Inputs), nbitsGroup)
	}
	attrs := map[string]AttrKind{"K": AttrInt, "N": AttrInts, "bits": AttrInt, "block_size": AttrInt, "accuracy_level": AttrInt}
	if err := s.checkAttrs(attrs); err != nil {
		return nil, err
	}
	ns := s.Attrs["N"].Ints()
	if len(ns) != g {
		return nil, s.errorf(`attribute "N" has %d values (%v); the group has %d matrices`, len(ns), ns, g)
	}
	k := &nbitsGroupKernel{}
	var outs []TensorInfo
	for i := range g {
		sub := Spec{Op: "com.microsoft.MatMulNBits", Opset: 1, Attrs: map[string]Attribute{"N": IntAttr(ns[i])},
			Inputs: []TensorInfo{s.Inputs[0], s.Inputs[1+4*i], s.Inputs[2+4*i], s.Inputs[3+4*i], {}, s.Inputs[4+4*i]}}
		for name, a := range s.Attrs {
			if name != "N" {
				sub.Attrs[name] = a
			}
		}
		kern, err := buildMatMulNBits(l, opSpec{Spec: &sub, inputNames: nbitsInputs, id: s.id})
		if err != nil {
			return nil, s.errorf("matrix %d of the group: %v", i, err)
		}
		nk := kern.(*nbitsKernel)
		if i > 0 && nk.m.zp != k.subs[0].m.zp {
			return nil, s.errorf("matrix %d's zero points are %s and matrix 0's %s; a group takes one kind", i, nk.m.zp, k.subs[0].m.zp)
		}
		k.subs = append(k.subs, nk)
		outs = append(outs, nk.Outputs()[0])
	}
	k.kernelBase = newBase(l, s, outs...)
	if k.subs[0].decode() {
		tiles := int64(0)
		for _, sub := range k.subs {
			tiles += int64(sub.grid.X)
		}
		if tiles > nbitsMaxGridX {
			return nil, s.errorf("the group's %d column tiles exceed a launch's %d blocks", tiles, nbitsMaxGridX)
		}
		k.grid = k.subs[0].grid
		k.grid.X = uint32(tiles)
	}
	return k, nil
}

// String names where the zero points come from.
func (z nbitsZP) String() string {
	switch z {
	case nbitsZPPacked:
		return "packed (uint8)"
	case nbitsZPTyped:
		return "unpacked"
	}
	return "absent"
}

// Execute queues the group's decode launch, or each MatMulNBits' prefill.
func (k *nbitsGroupKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	for i := range k.subs {
		k.ins[i] = [6]Tensor{inputs[0], inputs[1+4*i], inputs[2+4*i], inputs[3+4*i], {}, inputs[4+4*i]}
		k.outs[i] = [1]Tensor{outputs[i]}
	}
	s0 := k.subs[0]
	if !s0.decode() {
		for i, sub := range k.subs {
			if err := sub.Execute(k.ins[i][:], k.outs[i][:]); err != nil {
				return err
			}
		}
		return nil
	}
	q := s0.m.nbitsQuant
	a := &k.args
	a.Reset()
	a.Ptr(inputs[0].Ptr).U64(s0.rows).U64(uint64(q.k)).U64(uint64(q.bs)).U64(uint64(s0.m.zp)).U64(s0.wpc)
	for i := range nbitsGroup {
		if i >= len(k.subs) {
			a.Ptr(0).Ptr(0).Ptr(0).Ptr(0).Ptr(0).U64(0)
			continue
		}
		in := &k.ins[i]
		a.Ptr(outputs[i].Ptr).Ptr(in[1].Ptr).Ptr(in[2].Ptr).Ptr(in[3].Ptr).Ptr(in[5].Ptr).U64(uint64(k.subs[i].m.n))
	}
	return k.lib.rt.Stream.Launch(s0.fn, k.grid, s0.block, 0, a)
}
