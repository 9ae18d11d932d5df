package kernels_test

import (
	"cmp"
	"fmt"
	"math"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
)

const opNBits = "com.microsoft.MatMulNBits"

// nbitsCase is one com.microsoft.MatMulNBits to build and run.
type nbitsCase struct {
	dt               kernels.DType
	bits, bs, k, n   int64
	lead             []int64 // A's dimensions before K
	zp               string  // "" (absent), "packed" (uint8) or "typed" (A's dtype)
	bias             bool
	flatScales       bool // scales (and zero points) [N·k_blocks] instead of [N, k_blocks]
	absentBeforeEnd  bool // zero_points and g_idx absent (the zero TensorInfo) before the bias
	offsetA, offsetB int  // bytes the tensors start past a 16-byte boundary
}

func (c nbitsCase) String() string {
	return fmt.Sprintf("%s/q%d/bs%d/%v×%d×%d/zp=%s/bias=%v/flat=%v", c.dt, c.bits, c.bs, c.lead, c.k, c.n, c.zp, c.bias, c.flatScales)
}

func (c nbitsCase) rows() int64 { return numel(c.lead) }

func (c nbitsCase) kBlocks() int64 { return (c.k + c.bs - 1) / c.bs }

// decodeVariant is the decode kernel the case should get, the planner's rule restated: "mma"
// (the tensor cores) for float16 A, 4 bits, zero points absent or packed, block_size >= 32, K
// a multiple of 32 and 1 to 8 rows; "gemv" otherwise.
func (c nbitsCase) decodeVariant() string {
	if c.dt == kernels.Float16 && c.bits == 4 && c.zp != "typed" && c.bs >= 32 && c.k%32 == 0 && c.rows() >= 1 && c.rows() <= 8 {
		return "mma"
	}
	return "gemv"
}

// spec returns the case's Spec: attributes K, N, bits and block_size (and accuracy_level, a
// hint), inputs A, B, scales and the optional ones the case gives.
func (c nbitsCase) spec() kernels.Spec {
	kb := c.kBlocks()
	perBlock := func(dt kernels.DType, cols int64) kernels.TensorInfo {
		if c.flatScales {
			return info(dt, c.n*cols)
		}
		return info(dt, c.n, cols)
	}
	ins := []kernels.TensorInfo{info(c.dt, append(append([]int64{}, c.lead...), c.k)...),
		info(kernels.Uint8, c.n, kb, c.bs*c.bits/8), perBlock(c.dt, kb)}
	switch c.zp {
	case "packed":
		ins = append(ins, perBlock(kernels.Uint8, (kb*c.bits+7)/8))
	case "typed":
		ins = append(ins, perBlock(c.dt, kb))
	}
	if c.bias || c.absentBeforeEnd {
		for len(ins) < 5 {
			ins = append(ins, kernels.TensorInfo{})
		}
	}
	if c.bias {
		ins = append(ins, info(c.dt, c.n))
	}
	return kernels.Spec{Name: "mmnb", Op: opNBits, Opset: 1, Inputs: ins, Attrs: map[string]kernels.Attribute{
		"K": kernels.IntAttr(c.k), "N": kernels.IntAttr(c.n), "bits": kernels.IntAttr(c.bits),
		"block_size": kernels.IntAttr(c.bs), "accuracy_level": kernels.IntAttr(4)}}
}

// nbitsData is a case's random inputs, as values and as the bytes uploaded, and the reference
// output.
type nbitsData struct {
	vals [][]float64 // by input; nil for absent ones
	b    []byte
	ref  []float64
}

// data returns random inputs for c: A and the bias in ±[0.1, 2), B's bytes (every value is
// a valid weight), scales in ±[0.005, 0.1), packed zero points of any value, unpacked ones in
// [0, 2^bits) with fractions, all rounded to their dtypes; and the float64 reference.
func (f *fixture) nbitsData(c nbitsCase) nbitsData {
	kb := c.kBlocks()
	var d nbitsData
	d.vals = make([][]float64, 6)
	d.vals[0] = f.randomTyped(c.dt, c.rows()*c.k)
	d.b = make([]byte, c.n*kb*c.bs*c.bits/8)
	for i := range d.b {
		d.b[i] = byte(f.rng.IntN(256))
	}
	d.vals[1] = make([]float64, len(d.b))
	for i, v := range d.b {
		d.vals[1][i] = float64(v)
	}
	scales := f.randomTyped(kernels.Float32, c.n*kb)
	for i := range scales {
		scales[i] = roundTo(c.dt, scales[i]/20)
	}
	d.vals[2] = scales
	var zpPacked []byte
	var zpTyped []float64
	switch c.zp {
	case "packed":
		zpPacked = make([]byte, c.n*((kb*c.bits+7)/8))
		d.vals[3] = make([]float64, len(zpPacked))
		for i := range zpPacked {
			zpPacked[i] = byte(f.rng.IntN(256))
			d.vals[3][i] = float64(zpPacked[i])
		}
	case "typed":
		zpTyped = make([]float64, c.n*kb)
		for i := range zpTyped {
			zpTyped[i] = roundTo(c.dt, float64(f.rng.IntN(1<<c.bits))+0.25*float64(f.rng.IntN(4)))
		}
		d.vals[3] = zpTyped
	}
	var bias []float64
	if c.bias {
		bias = f.randomTyped(c.dt, c.n)
		d.vals[5] = bias
	}
	w := kernels.RefNBitsWeights(c.k, c.n, c.bits, c.bs, d.b, scales, zpPacked, zpTyped)
	d.ref = kernels.RefMatMulNBits(d.vals[0], c.rows(), c.k, c.n, w, bias)
	return d
}

// uploadAt returns a device tensor of info holding vals (in info's dtype), offset bytes past
// a 16-byte boundary.
func (f *fixture) uploadAt(ti kernels.TensorInfo, vals []float64, offset int) kernels.Tensor {
	f.t.Helper()
	buf := f.alloc(kernels.TensorInfo{DType: kernels.Uint8, Shape: []int64{ti.Bytes() + 16}})
	t := kernels.Tensor{TensorInfo: ti, Ptr: buf.Ptr + cudadrv.DevicePtr(offset)}
	require.NoError(f.t, f.env.Context.CopyHtoD(t.Ptr, encode(ti.DType, vals)))
	return t
}

// nbitsInputs uploads d's inputs for spec (absent ones are the zero Tensor).
func (f *fixture) nbitsInputs(c nbitsCase, spec kernels.Spec, d nbitsData) []kernels.Tensor {
	ins := make([]kernels.Tensor, len(spec.Inputs))
	for i, ti := range spec.Inputs {
		if ti.DType == 0 {
			continue
		}
		off := 0
		switch i {
		case 0:
			off = c.offsetA
		case 1:
			off = c.offsetB
		}
		ins[i] = f.uploadAt(ti, d.vals[i], off)
	}
	return ins
}

// runNBits builds c (forcing variant when not ""), runs it on fresh random data and checks it
// against the reference; it returns the kernel.
func (f *fixture) runNBits(c nbitsCase, variant string) kernels.Kernel {
	f.t.Helper()
	spec := c.spec()
	prev := kernels.ForceVariant("matmulnbits", variant)
	k, err := f.lib.Get(spec)
	kernels.ForceVariant("matmulnbits", prev)
	require.NoError(f.t, err)
	out := append(append([]int64{}, c.lead...), c.n)
	require.Equal(f.t, []kernels.TensorInfo{info(c.dt, out...)}, k.Outputs())
	d := f.nbitsData(c)
	outs := f.outputs(k)
	require.NoError(f.t, k.Execute(f.nbitsInputs(c, spec, d), outs))
	got := f.downloadTyped(outs[0])
	bound := boundFor(c.dt)
	if kernels.KernelVariant(k) == "dequant" {
		bound = gemmBoundFor(c.dt) // the weights are rounded to the dtype for cuBLAS
		if c.dt == kernels.Float32 {
			bound = boundGemm
		}
	}
	requireClose64(f.t, got, d.ref, bound, c.String()+"/"+kernels.KernelVariant(k))
	return k
}

// TestMatMulNBitsAgainstReference runs MatMulNBits over its attribute and input space against
// the float64 reference: every dtype, 4 and 8 bits, every block size, K a multiple of the
// block size and not (the last block padded), zero points absent, packed and unpacked, with
// and without a bias, scales 2-D and flattened, and 1, 3 and 8 rows through the decode kernels
// (the tensor-core one where it applies) and 17 through the prefill's dequantization and
// cuBLAS.
func TestMatMulNBitsAgainstReference(t *testing.T) {
	f := newFixture(t)
	i := 0
	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16, kernels.BFloat16} {
		for _, bits := range []int64{4, 8} {
			for _, bs := range []int64{16, 32, 64, 128, 256} {
				for _, zp := range []string{"", "packed", "typed"} {
					i++
					k := 2*bs + 5 // padded
					if i%2 == 0 {
						k = 3 * bs
					}
					lead := [][]int64{{1}, {3}, {1, 8}}[i%3]
					c := nbitsCase{dt: dt, bits: bits, bs: bs, k: k, n: 19, lead: lead, zp: zp, bias: i%4 < 2, flatScales: i%5 == 0}
					t.Run(c.String(), func(t *testing.T) {
						f := f.sub(t)
						assert.Equal(t, c.decodeVariant(), kernels.KernelVariant(f.runNBits(c, "")))
						c.lead = []int64{17}
						assert.Equal(t, "dequant", kernels.KernelVariant(f.runNBits(c, "")))
					})
				}
			}
		}
	}
}

// TestMatMulNBitsPaths runs the shapes that pick the kernels' other paths: rows of A in
// several row groups of the decode kernel and few rows through the prefill, the decode's
// warps a column from 1 to 8, B's chunks loaded as 8-byte halves (4-bit blocks of 16, an odd
// count a column) and as bytes (B unaligned), A loaded element by element (K not whole packs,
// or A not 16-byte aligned), A of rank 1 and 3, and a prefill of several tiles; and the
// tensor-core decode kernel's: K split over 1 to 16 warps, a last step past K, A, B and the
// scales unaligned for its vector loads.
func TestMatMulNBitsPaths(t *testing.T) {
	f := newFixture(t)
	bf, h, fl := kernels.BFloat16, kernels.Float16, kernels.Float32
	cases := []struct {
		name    string
		c       nbitsCase
		variant string
		wpc     uint64
	}{
		{"17 rows, 3 row groups", nbitsCase{dt: bf, bits: 4, bs: 32, k: 96, n: 21, lead: []int64{17}, zp: "packed", bias: true}, "gemv", 1},
		{"15 rows decode", nbitsCase{dt: h, bits: 4, bs: 64, k: 128, n: 9, lead: []int64{3, 5}}, "", 1},
		{"3 rows prefill", nbitsCase{dt: bf, bits: 8, bs: 16, k: 40, n: 10, lead: []int64{3}, zp: "typed", bias: true}, "dequant", 0},
		{"wpc 2", nbitsCase{dt: bf, bits: 4, bs: 128, k: 2048, n: 20, lead: []int64{1}, zp: "packed"}, "", 2},
		{"wpc 4", nbitsCase{dt: fl, bits: 4, bs: 64, k: 4096, n: 9, lead: []int64{1}, bias: true}, "", 4},
		{"wpc 8", nbitsCase{dt: h, bits: 8, bs: 256, k: 4096, n: 5, lead: []int64{2}, zp: "typed"}, "", 8},
		{"wpc 8, K past 8 warp steps", nbitsCase{dt: bf, bits: 4, bs: 32, k: 8192 + 48, n: 3, lead: []int64{1}, zp: "packed", bias: true}, "", 8},
		{"8-byte chunk halves", nbitsCase{dt: bf, bits: 4, bs: 16, k: 48, n: 13, lead: []int64{2}, zp: "packed"}, "", 1},
		{"8-byte halves, K padded", nbitsCase{dt: fl, bits: 4, bs: 16, k: 37, n: 13, lead: []int64{1}}, "", 1},
		{"8-byte halves prefill", nbitsCase{dt: h, bits: 4, bs: 16, k: 80, n: 6, lead: []int64{16}, zp: "packed", bias: true}, "", 0},
		{"B unaligned", nbitsCase{dt: bf, bits: 4, bs: 32, k: 200, n: 11, lead: []int64{4}, zp: "packed", offsetB: 3}, "", 1},
		{"B unaligned prefill", nbitsCase{dt: fl, bits: 8, bs: 64, k: 200, n: 11, lead: []int64{16}, offsetB: 5}, "", 0},
		{"A unaligned", nbitsCase{dt: h, bits: 4, bs: 32, k: 128, n: 7, lead: []int64{3}, offsetA: 6}, "gemv", 1},
		{"K not whole packs", nbitsCase{dt: bf, bits: 8, bs: 16, k: 43, n: 7, lead: []int64{5}, zp: "typed", bias: true}, "", 1},
		{"A of rank 1", nbitsCase{dt: fl, bits: 4, bs: 32, k: 64, n: 30, lead: nil, bias: true}, "", 1},
		{"A of rank 3", nbitsCase{dt: bf, bits: 4, bs: 64, k: 64, n: 30, lead: []int64{2, 3}, zp: "typed"}, "", 1},
		{"A of rank 3 prefill", nbitsCase{dt: bf, bits: 4, bs: 64, k: 64, n: 30, lead: []int64{2, 9}, zp: "packed", bias: true}, "", 0},
		// The tensor-core decode kernel (wpc: its warps a block).
		{"mma 1 warp", nbitsCase{dt: h, bits: 4, bs: 32, k: 256, n: 17, lead: []int64{2}, zp: "packed"}, "", 1},
		{"mma 2 warps, K past a step", nbitsCase{dt: h, bits: 4, bs: 64, k: 544, n: 9, lead: []int64{1}, bias: true}, "", 2},
		{"mma 4 warps", nbitsCase{dt: h, bits: 4, bs: 128, k: 1024, n: 33, lead: []int64{5}, zp: "packed", bias: true}, "", 4},
		{"mma 16 warps, 2 steps each", nbitsCase{dt: h, bits: 4, bs: 256, k: 8192, n: 16, lead: []int64{1}, zp: "packed"}, "", 16},
		{"mma 16 warps, a warp's last step partial", nbitsCase{dt: h, bits: 4, bs: 32, k: 4096 + 32, n: 20, lead: []int64{8}, bias: true}, "", 16},
		{"mma A unaligned", nbitsCase{dt: h, bits: 4, bs: 32, k: 128, n: 7, lead: []int64{3}, offsetA: 6}, "", 1},
		{"mma B unaligned", nbitsCase{dt: h, bits: 4, bs: 128, k: 256, n: 18, lead: []int64{4}, zp: "packed", offsetB: 3}, "", 1},
		{"mma B 4-byte aligned, pieces of 16", nbitsCase{dt: h, bits: 4, bs: 256, k: 512, n: 18, lead: []int64{1}, offsetB: 4, bias: true}, "", 2},
		{"mma scales not whole steps", nbitsCase{dt: h, bits: 4, bs: 32, k: 96, n: 18, lead: []int64{1, 1}, zp: "packed", flatScales: true}, "", 1},
		{"mma forced on bfloat16: the rule's gemv", nbitsCase{dt: bf, bits: 4, bs: 32, k: 96, n: 18, lead: []int64{1}}, "mma", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := f.sub(t)
			k := f.runNBits(tc.c, tc.variant)
			grid, wpc, _, _ := kernels.NBitsPlan(k)
			switch v := kernels.KernelVariant(k); v {
			case "gemv":
				assert.Equal(t, tc.wpc, wpc)
				cols := int64(8 / wpc)
				assert.Equal(t, cudadrv.Dim3{X: uint32((tc.c.n + cols - 1) / cols), Y: uint32((max(tc.c.rows(), 1) + 7) / 8), Z: 1}, grid)
				assert.Equal(t, cudadrv.Dim3{X: 256, Y: 1, Z: 1}, kernels.NBitsBlock(k))
			case "mma":
				assert.Equal(t, tc.wpc, wpc, "warps a block")
				assert.Equal(t, cudadrv.Dim3{X: uint32((tc.c.n + 15) / 16), Y: 1, Z: 1}, grid, "one block a 16-column tile")
				assert.Equal(t, cudadrv.Dim3{X: uint32(32 * wpc), Y: 1, Z: 1}, kernels.NBitsBlock(k))
			}
			if (tc.variant == "" || tc.variant == "mma") && tc.wpc != 0 {
				assert.Equal(t, tc.c.decodeVariant(), kernels.KernelVariant(k))
			}
		})
	}
	t.Run("prefill in tiles", func(t *testing.T) {
		f := f.sub(t)
		c := nbitsCase{dt: fl, bits: 4, bs: 32, k: 64, n: 40, lead: []int64{20}, zp: "packed", bias: true}
		kernels.WithNBitsTileBytes(16*64*4, func() {
			k := f.runNBits(c, "")
			_, _, tile, gemms := kernels.NBitsPlan(k)
			assert.Equal(t, uint64(16), tile)
			assert.Equal(t, 3, gemms, "tiles of 16, 16 and 8 columns")
		})
	})
}

// TestMatMulNBitsWarpsPerColumn: the decode kernel gives a column as many warps (1, 2, 4 or 8)
// as its row has warp steps (32 chunks of 16 bytes: 1024 4-bit or 512 8-bit weights, the last
// step maybe partial), and no more: every warp reads part of the row.
func TestMatMulNBitsWarpsPerColumn(t *testing.T) {
	for _, c := range []struct{ k, bits, wpc int64 }{
		{16, 4, 1}, {1024, 4, 1}, {1025, 4, 2}, {2048, 4, 2}, {3072, 4, 2}, {3073, 4, 4}, {4096, 4, 4}, {8192, 4, 8}, {1 << 20, 4, 8},
		{512, 8, 1}, {1024, 8, 2}, {2048, 8, 4}, {4096, 8, 8},
	} {
		assert.Equal(t, c.wpc, kernels.NBitsWarpsPerColumn(c.k, c.bits), "K %d, %d bits", c.k, c.bits)
	}
	for _, bits := range []int64{4, 8} {
		for k := int64(1); k < 1<<16; k += 97 {
			w := kernels.NBitsWarpsPerColumn(k, bits)
			steps := ((k+128/bits-1)/(128/bits) + 31) / 32
			assert.True(t, w == 1 || w <= steps, "K %d: %d warps, %d steps", k, w, steps)
			assert.True(t, w == 8 || 2*w > steps, "K %d: %d warps, %d steps", k, w, steps)
		}
	}
}

// TestMatMulNBitsAbsentOptionalInputs gives zero_points and g_idx as absent inputs (the zero
// TensorInfo at Get, the zero Tensor at Execute) before a bias, as a node that leaves them
// out but gives a bias is read; and zero points given with g_idx absent before the bias.
func TestMatMulNBitsAbsentOptionalInputs(t *testing.T) {
	f := newFixture(t)
	for _, c := range []nbitsCase{
		{dt: kernels.BFloat16, bits: 4, bs: 32, k: 64, n: 12, lead: []int64{1}, bias: true, absentBeforeEnd: true},
		{dt: kernels.Float16, bits: 4, bs: 32, k: 64, n: 12, lead: []int64{16}, bias: true, absentBeforeEnd: true},
		{dt: kernels.Float32, bits: 8, bs: 16, k: 40, n: 12, lead: []int64{2}, zp: "typed", bias: true},
	} {
		t.Run(c.String(), func(t *testing.T) {
			f := f.sub(t)
			spec := c.spec()
			require.Len(t, spec.Inputs, 6)
			assert.Equal(t, kernels.TensorInfo{}, spec.Inputs[4], "g_idx absent")
			k := f.runNBits(c, "")
			assert.Contains(t, k.Name(), "absent")
		})
	}
	t.Run("refused elsewhere", func(t *testing.T) {
		spec := nbitsCase{dt: kernels.Float32, bits: 4, bs: 32, k: 64, n: 12, lead: []int64{1}, bias: true, absentBeforeEnd: true}.spec()
		spec.Inputs[2] = kernels.TensorInfo{}
		_, err := f.lib.Get(spec)
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), "input 2 (scales) is absent (the node leaves it out with an empty name), and the op requires it")
	})
}

// TestMatMulNBitsRefusals: every attribute and input the kernels cannot take is refused at Get
// with an error wrapping ErrUnsupported that names the node, the op, the attribute or input
// and the bad value.
func TestMatMulNBitsRefusals(t *testing.T) {
	f := newFixture(t)
	base := nbitsCase{dt: kernels.Float32, bits: 4, bs: 32, k: 64, n: 8, lead: []int64{1}}
	with := func(mod func(s *kernels.Spec)) kernels.Spec {
		s := base.spec()
		mod(&s)
		return s
	}
	attr := func(name string, v int64) kernels.Spec {
		return with(func(s *kernels.Spec) { s.Attrs[name] = kernels.IntAttr(v) })
	}
	input := func(i int, ti kernels.TensorInfo) kernels.Spec {
		return with(func(s *kernels.Spec) {
			for len(s.Inputs) <= i {
				s.Inputs = append(s.Inputs, kernels.TensorInfo{})
			}
			s.Inputs[i] = ti
		})
	}
	f32, u8 := kernels.Float32, kernels.Uint8
	cases := []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"bits 3", attr("bits", 3), []string{`"bits" is 3`, "4 and 8 are supported"}},
		{"bits 2", attr("bits", 2), []string{`"bits" is 2`, "2-bit weights are not supported"}},
		{"bits 16", attr("bits", 16), []string{`"bits" is 16`}},
		{"block 8", attr("block_size", 8), []string{`"block_size" is 8`, "power of two from 16 to 256"}},
		{"block 48", attr("block_size", 48), []string{`"block_size" is 48`}},
		{"block 512", attr("block_size", 512), []string{`"block_size" is 512`}},
		{"weight_prepacked 1", attr("weight_prepacked", 1), []string{`"weight_prepacked" is 1`, "only 0"}},
		{"accuracy_level 5", attr("accuracy_level", 5), []string{`"accuracy_level" is 5`}},
		{"accuracy_level -1", attr("accuracy_level", -1), []string{`"accuracy_level" is -1`}},
		{"K 0", attr("K", 0), []string{`"K" is 0`}},
		{"N -3", attr("N", -3), []string{`"N" is -3`}},
		{"K missing", with(func(s *kernels.Spec) { delete(s.Attrs, "K") }), []string{`attribute "K" is required`}},
		{"block_size missing", with(func(s *kernels.Spec) { delete(s.Attrs, "block_size") }), []string{`attribute "block_size" is required`}},
		{"unknown attribute", attr("column_wise_blocking", 1), []string{`"column_wise_blocking" is not supported`}},
		{"bits as a float", with(func(s *kernels.Spec) { s.Attrs["bits"] = kernels.FloatAttr(4) }), []string{`"bits" is float(4)`}},
		{"K not A's", attr("K", 96), []string{"input 0 (A) has shape [1,64]", `"K" = 96`}},
		{"A int32", input(0, info(kernels.Int32, 1, 64)), []string{"input 0 (A) has dtype int32"}},
		{"B float32", input(1, info(f32, 8, 2, 16)), []string{"input 1 (B) has dtype float32"}},
		{"B of N 9", input(1, info(u8, 9, 2, 16)), []string{"input 1 (B) has shape [9,2,16]", "[N 8, k_blocks 2, block_size·bits/8 16]"}},
		{"B blob of 8 bits", input(1, info(u8, 8, 2, 32)), []string{"input 1 (B) has shape [8,2,32]"}},
		{"B 2-D", input(1, info(u8, 8, 32)), []string{"input 1 (B) has rank 2"}},
		{"scales float16", input(2, info(kernels.Float16, 8, 2)), []string{"input 2 (scales) is float16", "float32"}},
		{"scales uint8", input(2, info(u8, 8, 2)), []string{"input 2 (scales) is uint8"}},
		{"scales [8,3]", input(2, info(f32, 8, 3)), []string{"input 2 (scales) has shape [8,3]", "[N 8, 2] or [16]"}},
		{"scales [15]", input(2, info(f32, 15)), []string{"input 2 (scales) has shape [15]"}},
		{"zero points int32", input(3, info(kernels.Int32, 8, 1)), []string{"input 3 (zero_points) is int32", "uint8 (packed) or"}},
		{"zero points float16", input(3, info(kernels.Float16, 8, 2)), []string{"input 3 (zero_points) is float16"}},
		{"packed zero points [8,2]", input(3, info(u8, 8, 2)), []string{"input 3 (zero_points) has shape [8,2]", "[N 8, 1] or [8]"}},
		{"typed zero points [8,1]", input(3, info(f32, 8, 1)), []string{"input 3 (zero_points) has shape [8,1]", "[N 8, 2] or [16]"}},
		{"g_idx", input(4, info(kernels.Int32, 64)), []string{"input 4 (g_idx) is given", "not supported"}},
		{"bias [9]", input(5, info(f32, 9)), []string{"input 5 (bias) has shape [9]", "[N 8]"}},
		{"bias float16", input(5, info(kernels.Float16, 8)), []string{"input 5 (bias) is float16"}},
		{"2 inputs", with(func(s *kernels.Spec) { s.Inputs = s.Inputs[:2] }), []string{"got 2 inputs"}},
		{"7 inputs", with(func(s *kernels.Spec) {
			s.Inputs = append(s.Inputs, info(u8, 8, 1), info(kernels.Int32, 64), info(f32, 8), info(f32, 8))
		}), []string{"got 7 inputs", "A, B, scales, zero_points, g_idx, bias"}},
		{"a constant absent input", with(func(s *kernels.Spec) {
			s.Inputs = append(s.Inputs, kernels.TensorInfo{}, kernels.TensorInfo{}, info(f32, 8))
			s.Consts = map[int]kernels.Const{3: kernels.IntsConst(1)}
		}), []string{"Consts has an entry for input 3 (zero_points), which is absent"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var k kernels.Kernel
			var err error
			require.NotPanics(t, func() { k, err = f.lib.Get(c.spec) })
			require.Error(t, err)
			assert.Nil(t, k)
			assert.ErrorIs(t, err, kernels.ErrUnsupported)
			assert.Contains(t, err.Error(), "node 'mmnb': com.microsoft.MatMulNBits (opset 1)")
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("prefill without cuBLAS", func(t *testing.T) {
		nb := f.sub(t).variant(fixtureOpts{noBLAS: true})
		c := base
		c.lead = []int64{16}
		_, err := nb.lib.Get(c.spec())
		require.ErrorIs(t, err, kernels.ErrUnsupported)
		assert.Contains(t, err.Error(), "no cuBLAS handle")
		_, err = nb.lib.Get(base.spec())
		assert.NoError(t, err, "the decode kernel needs no cuBLAS")
	})
}

// TestMatMulNBitsRefusesOverflowingValues gives MatMulNBits attributes and shapes at the int64
// extremes: each is refused with a message naming the value, never a panic, never a kernel
// built from a wrapped-around size.
func TestMatMulNBitsRefusesOverflowingValues(t *testing.T) {
	f := newFixture(t)
	base := nbitsCase{dt: kernels.Float32, bits: 4, bs: 32, k: 64, n: 8, lead: []int64{1}}
	attr := func(name string, v int64) kernels.Spec {
		s := base.spec()
		s.Attrs[name] = kernels.IntAttr(v)
		return s
	}
	huge := func(k, n int64, lead ...int64) kernels.Spec {
		c := base
		c.k, c.n, c.lead = k, n, lead
		return c.spec()
	}
	for _, c := range []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"K MaxInt64", attr("K", math.MaxInt64), []string{`"K" = 9223372036854775807`}},
		{"K MinInt64", attr("K", math.MinInt64), []string{`"K" is -9223372036854775808`}},
		{"N MaxInt64", attr("N", math.MaxInt64), []string{"input 1 (B) has shape [8,2,16]", "N 9223372036854775807"}},
		{"bits MaxInt64", attr("bits", math.MaxInt64), []string{`"bits" is 9223372036854775807`}},
		{"bits MinInt64", attr("bits", math.MinInt64), []string{`"bits" is -9223372036854775808`}},
		{"block_size 2^62", attr("block_size", 1<<62), []string{`"block_size" is 4611686018427387904`}},
		{"block_size MinInt64", attr("block_size", math.MinInt64), []string{`"block_size" is -9223372036854775808`}},
		{"accuracy_level MaxInt64", attr("accuracy_level", math.MaxInt64), []string{`"accuracy_level" is 9223372036854775807`}},
		{"weight_prepacked MinInt64", attr("weight_prepacked", math.MinInt64), []string{`"weight_prepacked" is -9223372036854775808`}},
		{"B of 2^62 columns", huge(64, 1<<62, 1), []string{"input 1 (B) has shape [4611686018427387904,2,16]", "more than 2^40 elements"}},
		{"A of 2^62 rows", huge(64, 8, 1<<62), []string{"input 0 (A) has shape [4611686018427387904,64]", "more than 2^40 elements"}},
		{"Y past 2^40", huge(64, 1<<33, 1<<10), []string{"the output has shape [1024,8589934592]", "more than 2^40"}},
		{"K 2^40 prefill", huge(1<<40, 1, 16), []string{"input 0 (A) has shape [16,1099511627776]", "more than 2^40 elements"}},
		{"K 2^25 prefill", huge(1<<25, 1, 16), []string{`"K" is 33554432`, "exceeds the 67108864 bytes"}},
		{"decode grid past 2^31 blocks", huge(16, 1<<34, 1), []string{"N 17179869184", "at most 2147483647"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = f.lib.Get(c.spec) })
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestMatMulNBitsCaptures: every path (decode by cudaep_mmnb_gemv_* and by the tensor cores,
// prefill) is capturable (the audit admits them, the graph records instead of running), and a
// graph's replays give the eager run's bytes: the decode kernels' sums have a fixed order (the
// tensor-core kernel's warps reduced through shared memory in warp order, no atomics), and
// the prefill's dequantized tile is rewritten before each GEMM.
func TestMatMulNBitsCaptures(t *testing.T) {
	f := newFixture(t)
	for _, c := range []nbitsCase{
		{dt: kernels.BFloat16, bits: 4, bs: 32, k: 2048, n: 24, lead: []int64{1}, zp: "packed", bias: true},
		{dt: kernels.Float16, bits: 4, bs: 64, k: 256, n: 24, lead: []int64{32}, zp: "typed", bias: true},
		{dt: kernels.Float16, bits: 4, bs: 32, k: 4096, n: 40, lead: []int64{1, 3}, zp: "packed", bias: true}, // mma, 16 warps
	} {
		t.Run(c.String(), func(t *testing.T) {
			f := f.sub(t)
			spec := c.spec()
			k := f.get(spec)
			assert.Contains(t, []string{"gemv", "mma", "dequant"}, kernels.KernelVariant(k))
			if c.rows() < 16 {
				assert.Equal(t, c.decodeVariant(), kernels.KernelVariant(k))
			}
			require.True(t, k.CaptureSupport().IsSupported())
			require.NoError(t, graphs.Audit([]graphs.Node{k}))
			d := f.nbitsData(c)
			ins := f.nbitsInputs(c, spec, d)
			outs := f.outputs(k)
			require.NoError(t, k.Execute(ins, outs))
			eager := f.download(outs[0])
			f.poison(outs[0])
			exec := f.capture(func() { require.NoError(t, k.Execute(ins, outs)) })
			assert.Equal(t, []byte{0xff, 0xff}, f.download(outs[0])[:2], "the capture recorded instead of running")
			for range 2 {
				f.poison(outs[0])
				require.NoError(t, exec.Launch(f.stream))
				assert.Equal(t, eager, f.download(outs[0]), "a replay gives the eager run's bytes")
			}
		})
	}
}

// TestMatMulNBitsWithoutItsPTX: with the MatMulNBits module pending (its CUDA source changed,
// its PTX not yet regenerated on a GPU) and a Library whose PTX lacks its kernels (the module's
// file is missing, or it lacks an entry: the decode kernels, or only the tensor-core one, as
// the PTX from before it does), NewLibrary still succeeds, Get refuses MatMulNBits naming the
// missing entry and the PTX file and saying how to regenerate it, and every other op (and
// kernel: "gemv" forced where "mma" is missing) builds as before.
func TestMatMulNBitsWithoutItsPTX(t *testing.T) {
	const file = "ptx/matmul_nbits.ptx"
	defer kernels.MarkPending(file)()
	require.Contains(t, kernels.PendingModules(), file)
	full, _, err := simPendingPTX(kernels.EmbeddedPTXFS(), "cuda")
	require.NoError(t, err)
	withoutFile, withoutGemv, withoutMMA := fstest.MapFS{}, fstest.MapFS{}, fstest.MapFS{}
	for name, f := range full {
		if name != file {
			withoutFile[name] = f
			withoutGemv[name] = f
			withoutMMA[name] = f
		}
	}
	// Entries declared as the simulator needs them (run nowhere): only the dequantization ones,
	// or those and the gemv ones (the PTX from before the tensor-core kernel).
	declare := func(stage string, params int) string {
		var d string
		for _, bits := range []int{4, 8} {
			for _, sfx := range []string{"f32", "f16", "bf16"} {
				d += fmt.Sprintf(".visible .entry cudaep_mmnb_%s_q%d_%s(", stage, bits, sfx)
				for i := range params {
					if i > 0 {
						d += ", "
					}
					d += fmt.Sprintf(".param .u64 p%d", i)
				}
				d += ")\n{\n\tret;\n}\n"
			}
		}
		return d
	}
	const header = ".version 7.0\n.target sm_75\n.address_size 64\n"
	withoutGemv[file] = &fstest.MapFile{Data: []byte(header + declare("dequant", 9))}
	withoutMMA[file] = &fstest.MapFile{Data: []byte(header + declare("dequant", 9) + declare("gemv", 24))}

	decode := nbitsCase{dt: kernels.BFloat16, bits: 4, bs: 32, k: 64, n: 8, lead: []int64{1}}.spec()
	prefill := nbitsCase{dt: kernels.BFloat16, bits: 4, bs: 32, k: 64, n: 8, lead: []int64{16}}.spec()
	mma := nbitsCase{dt: kernels.Float16, bits: 4, bs: 32, k: 64, n: 8, lead: []int64{1}}.spec()
	for _, c := range []struct {
		name      string
		src       fstest.MapFS
		refused   map[*kernels.Spec][]string
		built     []*kernels.Spec
		gemvBuilt []*kernels.Spec // built with "gemv" forced
	}{
		{"no module", withoutFile, map[*kernels.Spec][]string{
			&decode:  {"entry point cudaep_mmnb_gemv_q4_bf16 is not available", "the library's PTX has no ptx/matmul_nbits.ptx", "cuda/matmul_nbits.cu is newer", "mkptx.sh"},
			&prefill: {"entry point cudaep_mmnb_dequant_q4_bf16 is not available"},
			&mma:     {"entry point cudaep_mmnb_mma_q4_f16 is not available", "the library's PTX has no ptx/matmul_nbits.ptx"},
		}, nil, nil},
		{"no decode entry", withoutGemv, map[*kernels.Spec][]string{
			&decode: {"entry point cudaep_mmnb_gemv_q4_bf16 is not available", "ptx/matmul_nbits.ptx has no entry point cudaep_mmnb_gemv_q4_bf16", "mkptx.sh", "CUDA_ERROR_NOT_FOUND"},
		}, []*kernels.Spec{&prefill}, nil},
		{"no tensor-core entry", withoutMMA, map[*kernels.Spec][]string{
			&mma: {"entry point cudaep_mmnb_mma_q4_f16 is not available", "ptx/matmul_nbits.ptx has no entry point cudaep_mmnb_mma_q4_f16", "mkptx.sh"},
		}, []*kernels.Spec{&decode, &prefill}, []*kernels.Spec{&mma}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := kernels.UsePTXSource(c.src)
			defer kernels.UsePTXSource(prev)
			f := newFixture(t)
			for spec, want := range c.refused {
				_, err := f.lib.Get(*spec)
				require.ErrorIs(t, err, kernels.ErrUnsupported)
				assert.Contains(t, err.Error(), "node 'mmnb': com.microsoft.MatMulNBits (opset 1)")
				for _, w := range want {
					assert.Contains(t, err.Error(), w)
				}
			}
			for _, spec := range c.built {
				_, err := f.lib.Get(*spec)
				assert.NoError(t, err)
			}
			for _, spec := range c.gemvBuilt {
				prev := kernels.ForceVariant("matmulnbits", "gemv")
				k, err := f.lib.Get(*spec)
				kernels.ForceVariant("matmulnbits", prev)
				require.NoError(t, err)
				assert.Equal(t, "gemv", kernels.KernelVariant(k))
			}
			_, got := f.runF32(kernels.Spec{Op: "Relu", Opset: 14, Inputs: []kernels.TensorInfo{f32Info(3)}}, []float32{-1, 2, -3})
			assert.Equal(t, []float32{0, 2, 0}, got, "the other modules load and run")
		})
	}
}

// nbitsGroupSpec is the cudaep.MatMulNBitsGroup of cases (one A, K, bits and block size; each
// case's N, zero points and bias), named "qkv".
func nbitsGroupSpec(cs []nbitsCase) kernels.Spec {
	spec := kernels.Spec{Name: "qkv", Op: "cudaep.MatMulNBitsGroup", Opset: 1, Attrs: map[string]kernels.Attribute{}}
	var ns []int64
	for i, c := range cs {
		one := c.spec()
		if i == 0 {
			spec.Inputs = append(spec.Inputs, one.Inputs[0])
			for _, name := range []string{"K", "bits", "block_size"} {
				spec.Attrs[name] = one.Attrs[name]
			}
		}
		for len(one.Inputs) < 6 {
			one.Inputs = append(one.Inputs, kernels.TensorInfo{})
		}
		spec.Inputs = append(spec.Inputs, one.Inputs[1], one.Inputs[2], one.Inputs[3], one.Inputs[5])
		ns = append(ns, c.n)
	}
	spec.Attrs["N"] = kernels.IntsAttr(ns...)
	return spec
}

// TestMatMulNBitsGroupMatchesItsMatMulNBits runs groups of 1 to 3 matrices sharing A (a
// decoder's q, k and v projections: N 64, 16 and 16; with and without biases) and checks each
// output against the reference, and bit for bit against the MatMulNBits kernel of its matrix
// alone: one decode launch over the group's column tiles for few rows (through
// cudaep_mmnb_gemv_* or, for float16 4-bit groups it applies to, the tensor-core
// cudaep_mmnb_mma_q4_f16: block sizes 32 to 256, 1 to 8 rows), each matrix's prefill for many.
func TestMatMulNBitsGroupMatchesItsMatMulNBits(t *testing.T) {
	f := newFixture(t)
	for _, g := range []struct {
		name string
		dt   kernels.DType
		bits int64
		zp   string
		ns   []int64
		bias []bool
		lead []int64
		k    int64 // 1100 when 0
		bs   int64 // 32 when 0
	}{
		{"q k v bfloat16 packed", kernels.BFloat16, 4, "packed", []int64{64, 16, 16}, []bool{true, false, true}, []int64{1, 1}, 0, 0},
		{"q k v float16 no zero points", kernels.Float16, 4, "", []int64{64, 16, 16}, []bool{false, false, false}, []int64{3}, 0, 0},
		{"two float32 8-bit typed", kernels.Float32, 8, "typed", []int64{20, 12}, []bool{true, true}, []int64{8}, 0, 0},
		{"one", kernels.BFloat16, 4, "packed", []int64{24}, []bool{false}, []int64{1}, 0, 0},
		{"q k v prefill", kernels.BFloat16, 4, "packed", []int64{64, 16, 16}, []bool{true, false, true}, []int64{16}, 0, 0},
		// The tensor-core decode kernel: float16, 4 bits, K a multiple of 32.
		{"mma q k v packed", kernels.Float16, 4, "packed", []int64{64, 16, 16}, []bool{true, false, true}, []int64{1, 1}, 2048, 32},
		{"mma q k v no zero points, 3 rows", kernels.Float16, 4, "", []int64{40, 24, 8}, []bool{false, true, false}, []int64{3}, 1056, 64},
		{"mma two 8 rows", kernels.Float16, 4, "packed", []int64{48, 20}, []bool{true, true}, []int64{8}, 4096, 128},
		{"mma one", kernels.Float16, 4, "", []int64{24}, []bool{true}, []int64{1}, 512, 256},
	} {
		t.Run(g.name, func(t *testing.T) {
			f := f.sub(t)
			var cs []nbitsCase
			kk, bs := cmp.Or(g.k, 1100), cmp.Or(g.bs, 32)
			for i, n := range g.ns {
				cs = append(cs, nbitsCase{dt: g.dt, bits: g.bits, bs: bs, k: kk, n: n, lead: g.lead, zp: g.zp, bias: g.bias[i]})
			}
			spec := nbitsGroupSpec(cs)
			k := f.get(spec)
			require.Len(t, k.Outputs(), len(cs))
			var ins []kernels.Tensor
			var singles [][]byte
			var refs [][]float64
			a := f.randomTyped(g.dt, cs[0].rows()*cs[0].k)
			for i, c := range cs {
				d := f.nbitsData(c)
				// The reference again for the group's one A.
				var packed []byte
				var typed []float64
				switch c.zp {
				case "packed":
					packed = make([]byte, len(d.vals[3]))
					for j, v := range d.vals[3] {
						packed[j] = byte(v)
					}
				case "typed":
					typed = d.vals[3]
				}
				w := kernels.RefNBitsWeights(c.k, c.n, c.bits, c.bs, d.b, d.vals[2], packed, typed)
				d.vals[0] = a
				refs = append(refs, kernels.RefMatMulNBits(a, c.rows(), c.k, c.n, w, d.vals[5]))
				one := c.spec()
				oneIns := f.nbitsInputs(c, one, d)
				if i == 0 {
					ins = append(ins, oneIns[0])
				}
				for len(oneIns) < 6 {
					oneIns = append(oneIns, kernels.Tensor{})
				}
				ins = append(ins, oneIns[1], oneIns[2], oneIns[3], oneIns[5])
				single := f.get(one)
				out := f.outputs(single)
				require.NoError(t, single.Execute(f.nbitsInputs(c, one, d)[:len(one.Inputs)], out))
				singles = append(singles, f.download(out[0]))
			}
			outs := f.outputs(k)
			require.NoError(t, k.Execute(ins, outs))
			bound := boundFor(g.dt)
			if kernels.KernelVariant(k) == "dequant" {
				bound = gemmBoundFor(g.dt)
			}
			for i := range cs {
				assert.Equal(t, singles[i], f.download(outs[i]), "matrix %d: the group's output is its MatMulNBits'", i)
				requireClose64(t, f.downloadTyped(outs[i]), refs[i], bound, fmt.Sprintf("matrix %d", i))
			}
			grid, wpc, _, _ := kernels.NBitsPlan(k)
			switch v := kernels.KernelVariant(k); {
			case cs[0].rows() >= 16:
				assert.Equal(t, "dequant", v)
			case v == "gemv":
				assert.Equal(t, "gemv", cs[0].decodeVariant())
				tiles := uint32(0)
				for _, n := range g.ns {
					tiles += uint32((n + int64(8/wpc) - 1) / int64(8/wpc))
				}
				assert.Equal(t, tiles, grid.X, "one launch over every matrix's column tiles")
			default:
				assert.Equal(t, "mma", v)
				assert.Equal(t, "mma", cs[0].decodeVariant())
				tiles := uint32(0)
				for _, n := range g.ns {
					tiles += uint32((n + 15) / 16)
				}
				assert.Equal(t, cudadrv.Dim3{X: tiles, Y: 1, Z: 1}, grid, "one launch over every matrix's 16-column tiles")
				assert.Equal(t, uint64(kernels.NBitsMMAWarps(kk)), wpc)
				assert.Equal(t, cudadrv.Dim3{X: uint32(32 * wpc), Y: 1, Z: 1}, kernels.NBitsBlock(k))
			}
		})
	}
}

// TestMatMulNBitsGroupRefusals: a group the decode launch cannot take is refused at Get,
// naming the matrix and the value.
func TestMatMulNBitsGroupRefusals(t *testing.T) {
	f := newFixture(t)
	c := nbitsCase{dt: kernels.BFloat16, bits: 4, bs: 32, k: 64, n: 16, lead: []int64{1}, zp: "packed"}
	other := c
	other.zp = ""
	for _, tc := range []struct {
		name string
		spec kernels.Spec
		want []string
	}{
		{"mixed zero points", nbitsGroupSpec([]nbitsCase{c, other}), []string{"matrix 1's zero points are absent and matrix 0's packed (uint8)"}},
		{"four matrices", func() kernels.Spec {
			b := c
			b.bias = true
			return nbitsGroupSpec([]nbitsCase{b, b, b, b})
		}(), []string{"got 17 inputs", "1 to 3 matrices"}},
		{"N of the wrong count", func() kernels.Spec {
			s := nbitsGroupSpec([]nbitsCase{c, c})
			s.Attrs["N"] = kernels.IntsAttr(16)
			return s
		}(), []string{`attribute "N" has 1 values`}},
		{"a matrix of another N", func() kernels.Spec {
			s := nbitsGroupSpec([]nbitsCase{c, c})
			s.Attrs["N"] = kernels.IntsAttr(16, 24)
			return s
		}(), []string{"matrix 1 of the group", "input 1 (B) has shape [16,2,16]", "N 24"}},
		{"a matrix's g_idx-like extra input", func() kernels.Spec {
			s := nbitsGroupSpec([]nbitsCase{c})
			s.Inputs = append(s.Inputs, info(kernels.Int32, 64))
			return s
		}(), []string{"got 6 inputs"}},
		{"weight_prepacked", func() kernels.Spec {
			s := nbitsGroupSpec([]nbitsCase{c})
			s.Attrs["weight_prepacked"] = kernels.IntAttr(0)
			return s
		}(), []string{`attribute "weight_prepacked" is not supported`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.lib.Get(tc.spec)
			require.ErrorIs(t, err, kernels.ErrUnsupported)
			assert.Contains(t, err.Error(), "node 'qkv': cudaep.MatMulNBitsGroup (opset 1)")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestMatMulNBitsMMAAgainstReference runs the tensor-core decode kernel over its space against
// the float64 reference with the decode bound: float16, zero points absent and packed, block
// sizes 32 to 256, 1, 3 and 8 rows, with and without a bias, scales 2-D and flattened, K of a
// Llama projection (2048: whole steps of 256 weights), small (96: one partial step, the last
// block padded for block sizes above 32) and 2048 + 96 (a partial last step), N of whole and
// partial 16-column tiles.
func TestMatMulNBitsMMAAgainstReference(t *testing.T) {
	f := newFixture(t)
	i := 0
	for _, zp := range []string{"", "packed"} {
		for _, bs := range []int64{32, 64, 128, 256} {
			for _, k := range []int64{2048, 96, 2048 + 96} {
				for _, lead := range [][]int64{{1}, {3}, {1, 8}} {
					i++
					c := nbitsCase{dt: kernels.Float16, bits: 4, bs: bs, k: k, n: []int64{40, 32}[i%2], lead: lead, zp: zp, bias: i%2 == 0, flatScales: i%3 == 0}
					t.Run(c.String(), func(t *testing.T) {
						k := f.sub(t).runNBits(c, "")
						require.Equal(t, "mma", kernels.KernelVariant(k))
						grid, kw, _, _ := kernels.NBitsPlan(k)
						assert.Equal(t, uint64(kernels.NBitsMMAWarps(c.k)), kw)
						assert.Equal(t, uint32((c.n+15)/16), grid.X)
					})
				}
			}
		}
	}
}

// TestMatMulNBitsPicksMMA: Get picks the tensor-core decode kernel ("mma") exactly for float16
// A, 4 bits, zero points absent or packed, block_size >= 32, K a multiple of 32 and 1 to 8
// rows, and cudaep_mmnb_gemv_* ("gemv") or the prefill ("dequant") for everything else; its
// plan at a Llama decoder's shapes is one block of 32·kw threads per 16-column tile, K split
// over kw = 8 warps at K = 2048 (a step of 256 weights each) and 16 above; forcing "mma" where
// it does not apply leaves the rule's kernel, and forcing "gemv" on an mma case gives "gemv".
func TestMatMulNBitsPicksMMA(t *testing.T) {
	f := newFixture(t)
	h := kernels.Float16
	mma := nbitsCase{dt: h, bits: 4, bs: 32, k: 2048, n: 64, lead: []int64{1}}
	with := func(mod func(c *nbitsCase)) nbitsCase {
		c := mma
		mod(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    nbitsCase
		want string
	}{
		{"float16 q4 bs32", mma, "mma"},
		{"packed zero points", with(func(c *nbitsCase) { c.zp = "packed" }), "mma"},
		{"block 64", with(func(c *nbitsCase) { c.bs = 64 }), "mma"},
		{"block 128", with(func(c *nbitsCase) { c.bs = 128 }), "mma"},
		{"block 256, bias", with(func(c *nbitsCase) { c.bs, c.bias = 256, true }), "mma"},
		{"3 rows", with(func(c *nbitsCase) { c.lead = []int64{3} }), "mma"},
		{"8 rows", with(func(c *nbitsCase) { c.lead = []int64{2, 4} }), "mma"},
		{"K 32", with(func(c *nbitsCase) { c.k = 32 }), "mma"},
		{"K 2048 + 32, block 256", with(func(c *nbitsCase) { c.k, c.bs = 2048+32, 256 }), "mma"},
		{"bfloat16", with(func(c *nbitsCase) { c.dt = kernels.BFloat16 }), "gemv"},
		{"float32", with(func(c *nbitsCase) { c.dt = kernels.Float32 }), "gemv"},
		{"8 bits", with(func(c *nbitsCase) { c.bits = 8 }), "gemv"},
		{"unpacked zero points", with(func(c *nbitsCase) { c.zp = "typed" }), "gemv"},
		{"block 16", with(func(c *nbitsCase) { c.bs = 16 }), "gemv"},
		{"K 2048 + 16", with(func(c *nbitsCase) { c.k = 2048 + 16 }), "gemv"},
		{"K 100, block 128", with(func(c *nbitsCase) { c.k, c.bs = 100, 128 }), "gemv"},
		{"9 rows", with(func(c *nbitsCase) { c.lead = []int64{9} }), "gemv"},
		{"15 rows", with(func(c *nbitsCase) { c.lead = []int64{3, 5} }), "gemv"},
		{"16 rows", with(func(c *nbitsCase) { c.lead = []int64{16} }), "dequant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.sub(t)
			require.Equal(t, tc.want == "mma", tc.c.decodeVariant() == "mma", "the test's restated rule")
			k := f.get(tc.c.spec())
			assert.Equal(t, tc.want, kernels.KernelVariant(k))
			prev := kernels.ForceVariant("matmulnbits", "mma")
			forced, err := f.lib.Get(tc.c.spec())
			kernels.ForceVariant("matmulnbits", prev)
			require.NoError(t, err)
			assert.Equal(t, tc.want, kernels.KernelVariant(forced), "forcing mma changes nothing")
			if tc.want == "mma" {
				prev := kernels.ForceVariant("matmulnbits", "gemv")
				gemv, err := f.lib.Get(tc.c.spec())
				kernels.ForceVariant("matmulnbits", prev)
				require.NoError(t, err)
				assert.Equal(t, "gemv", kernels.KernelVariant(gemv))
				g := nbitsGroupSpec([]nbitsCase{tc.c, tc.c})
				assert.Equal(t, "mma", kernels.KernelVariant(f.get(g)), "a group of mma matrices launches the mma kernel")
			}
		})
	}
	t.Run("Llama shapes", func(t *testing.T) {
		f := f.sub(t)
		for _, s := range []struct{ k, n, kw int64 }{{2048, 2048, 8}, {2048, 8192, 8}, {8192, 2048, 16}, {2048, 32000, 8}, {4096, 14336, 16}, {256, 64, 1}, {512, 64, 2}, {1024, 64, 4}} {
			c := with(func(c *nbitsCase) { c.k, c.n = s.k, s.n })
			k := f.get(c.spec())
			require.Equal(t, "mma", kernels.KernelVariant(k))
			grid, kw, _, _ := kernels.NBitsPlan(k)
			assert.Equal(t, uint64(s.kw), kw, "K %d", s.k)
			assert.Equal(t, cudadrv.Dim3{X: uint32((s.n + 15) / 16), Y: 1, Z: 1}, grid, "N %d", s.n)
			assert.Equal(t, cudadrv.Dim3{X: uint32(32 * s.kw), Y: 1, Z: 1}, kernels.NBitsBlock(k))
		}
	})
}

// TestMatMulNBitsMMAMatchesGemv: on cases the tensor-core decode kernel takes, the kernel it
// replaced ("gemv", forced) gives results within the decode bound of the mma kernel's on the
// same tensors (and each within it of the reference): the two sum the same exact products in
// float32, in different orders.
func TestMatMulNBitsMMAMatchesGemv(t *testing.T) {
	f := newFixture(t)
	for _, c := range []nbitsCase{
		{dt: kernels.Float16, bits: 4, bs: 32, k: 2048, n: 48, lead: []int64{1}, zp: "packed", bias: true},
		{dt: kernels.Float16, bits: 4, bs: 128, k: 4096, n: 24, lead: []int64{8}},
		{dt: kernels.Float16, bits: 4, bs: 64, k: 1056, n: 21, lead: []int64{3}, zp: "packed"},
		{dt: kernels.Float16, bits: 4, bs: 256, k: 512, n: 17, lead: []int64{2}, bias: true},
	} {
		t.Run(c.String(), func(t *testing.T) {
			f := f.sub(t)
			spec := c.spec()
			d := f.nbitsData(c)
			ins := f.nbitsInputs(c, spec, d)
			outs := map[string][]float64{}
			for _, v := range []string{"", "gemv"} {
				prev := kernels.ForceVariant("matmulnbits", v)
				k, err := f.lib.Get(spec)
				kernels.ForceVariant("matmulnbits", prev)
				require.NoError(t, err)
				out := f.outputs(k)
				require.NoError(t, k.Execute(ins, out))
				outs[kernels.KernelVariant(k)] = f.downloadTyped(out[0])
			}
			require.Contains(t, outs, "mma")
			require.Contains(t, outs, "gemv")
			requireClose64(t, outs["mma"], d.ref, boundFor(c.dt), "mma")
			requireClose64(t, outs["gemv"], d.ref, boundFor(c.dt), "gemv")
			requireClose64(t, outs["gemv"], outs["mma"], boundFor(c.dt), "gemv against mma")
		})
	}
}
