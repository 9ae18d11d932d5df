package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

// The edge rows of TestEdgeRowClasses: patterns of float32 values a row repeats. Where a float32
// sum cancels, overflows or turns NaN depends on the order of the sums, so the kernels' (each
// block thread its elements, then warp and block trees) decides the class of the results.
var edgePatterns = []struct {
	name string
	v    []float32
}{
	{"zeros", []float32{0}},
	{"1,-1,max,-max", []float32{1, -1, math.MaxFloat32, -math.MaxFloat32}},
	{"max", []float32{math.MaxFloat32}},
	{"-max", []float32{-math.MaxFloat32}},
	{"max,-max", []float32{math.MaxFloat32, -math.MaxFloat32}},
	{"max,max,-max,-max", []float32{math.MaxFloat32, math.MaxFloat32, -math.MaxFloat32, -math.MaxFloat32}},
	{"squares overflow", []float32{3e19, -3e19, 1, 2}},
	{"nan", []float32{1, float32(math.NaN()), 2, 3}},
	{"inf", []float32{float32(math.Inf(1)), 1, 2, 3}},
	{"-inf", []float32{float32(math.Inf(-1)), 1, 2, 3}},
	{"inf,-inf", []float32{float32(math.Inf(1)), float32(math.Inf(-1))}},
	{"denormals", []float32{1e-45, -3e-44, 1e-40, 0}},
	{"denormal,max", []float32{1e-45, math.MaxFloat32, 1, -1}},
}

// edgeLengths are the row lengths: one pack (4 float32s), not whole packs (6), a few packs
// (40) and enough for a block of 128 or 256 threads (1000).
var edgeLengths = []int{4, 6, 40, 1000}

// edgeRows returns the edge patterns as rows × length values, row p repeating pattern p
// shifted by shift (row p takes pattern (p + shift) mod the patterns).
func edgeRows(length, shift int) []float32 {
	out := make([]float32, 0, len(edgePatterns)*length)
	for p := range edgePatterns {
		v := edgePatterns[(p+shift)%len(edgePatterns)].v
		for j := range length {
			out = append(out, v[j%len(v)])
		}
	}
	return out
}

// fclass is the class of a float32: NaN, +Inf, -Inf or finite.
func fclass(f float32) string {
	switch {
	case f != f:
		return "NaN"
	case math.IsInf(float64(f), 1):
		return "+Inf"
	case math.IsInf(float64(f), -1):
		return "-Inf"
	}
	return "finite"
}

// TestEdgeRowClasses runs every normalization and reduction op (LayerNormalization,
// SimplifiedLayerNormalization, SkipLayerNormalization, SkipSimplifiedLayerNormalization,
// ReduceSum, ReduceMean, ReduceMax, Softmax over rows and over columns, and the GEMV groups
// with an RMSNorm prologue) on edge rows (0, ±FLT_MAX, NaN, ±Inf, denormals and mixtures such
// as [1, -1, FLT_MAX, -FLT_MAX]), float32, and checks that every output has the class (NaN,
// +Inf, -Inf, finite) that a float32 reference gives which computes as the CUDA kernels do:
// the same operations (fused multiply-adds where the PTX has them) in the same order (each
// block thread its elements, the warp's xor-shuffle tree, the block's tree over the warps;
// edgeBlockSum). On the simulator this holds its kernels to the GPU's arithmetic; with
// CUDAEP_TEST_BACKEND=cuda it compares the reference's classes with the GPU's.
func TestEdgeRowClasses(t *testing.T) {
	f := newFixture(t)
	f32 := kernels.Float32
	rows := int64(len(edgePatterns))
	const eps = float32(1e-5)
	for _, length := range edgeLengths {
		L := int64(length)
		x, skip := edgeRows(length, 0), edgeRows(length, 1)
		gamma, beta, bias := edgeFill(length, 1.5), edgeFill(length, -0.25), edgeFill(length, 0.5)
		check := func(t *testing.T, what string, got, want []float32, width int) {
			t.Helper()
			require.Len(t, got, len(want), what)
			for i := range want {
				assert.Equal(t, fclass(want[i]), fclass(got[i]), "%s: row %q, element %d: got %g, the reference %g",
					what, edgePatterns[(i/width)%len(edgePatterns)].name, i%width, got[i], want[i])
			}
		}
		t.Run(fmt.Sprintf("norms/%d", length), func(t *testing.T) {
			f := f.sub(t)
			for _, c := range []struct {
				op         string
				opset      int
				simplified bool
				skip       bool
			}{
				{"LayerNormalization", 17, false, false},
				{"SimplifiedLayerNormalization", 1, true, false},
				{"com.microsoft.SkipLayerNormalization", 1, false, true},
				{"com.microsoft.SkipSimplifiedLayerNormalization", 1, true, true},
			} {
				var ins [][]float32
				var infos []kernels.TensorInfo
				add := func(v []float32, shape ...int64) {
					ins, infos = append(ins, v), append(infos, info(f32, shape...))
				}
				add(x, rows, L)
				if c.skip {
					add(skip, rows, L)
				}
				add(gamma, L)
				if !c.simplified {
					add(beta, L)
				}
				if c.skip {
					add(bias, L)
				}
				spec := kernels.Spec{Op: c.op, Opset: c.opset, Inputs: infos,
					Attrs: map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(eps)}}
				if c.op == "LayerNormalization" || c.op == "SimplifiedLayerNormalization" {
					spec.Attrs["axis"] = kernels.IntAttr(-1)
				}
				k := f.get(spec)
				inputs := make([]kernels.Tensor, len(ins))
				for i, v := range ins {
					inputs[i] = f.uploadF32(infos[i].Shape, v)
				}
				outputs := f.outputs(k)
				require.NoError(t, k.Execute(inputs, outputs))
				threads := int(kernels.LaunchBlock(k, inputs, outputs))
				pack := edgePack(length, append(inputs, outputs...)...)
				var wantY, wantMean, wantInv, wantSum []float32
				for r := range int(rows) {
					row := x[r*length : (r+1)*length]
					v := append([]float32{}, row...)
					if c.skip {
						for j := range v {
							v[j] = (v[j] + skip[r*length+j]) + bias[j]
						}
					}
					var b []float32
					if !c.simplified {
						b = beta
					}
					y, mean, inv := edgeNorm(v, gamma, b, threads, pack, c.simplified, eps)
					wantY, wantMean, wantInv, wantSum = append(wantY, y...), append(wantMean, mean), append(wantInv, inv), append(wantSum, v...)
				}
				check(t, c.op+" Y", f.downloadF32(outputs[0]), wantY, length)
				switch c.op {
				case "LayerNormalization":
					check(t, c.op+" Mean", f.downloadF32(outputs[1]), wantMean, 1)
					check(t, c.op+" InvStdDev", f.downloadF32(outputs[2]), wantInv, 1)
				case "SimplifiedLayerNormalization":
					check(t, c.op+" inv_std_var", f.downloadF32(outputs[1]), wantInv, 1)
				default:
					check(t, c.op+" mean", f.downloadF32(outputs[1]), wantMean, 1)
					check(t, c.op+" inv_std_var", f.downloadF32(outputs[2]), wantInv, 1)
					check(t, c.op+" input_skip_bias_sum", f.downloadF32(outputs[3]), wantSum, length)
				}
			}
		})
		t.Run(fmt.Sprintf("reductions/%d", length), func(t *testing.T) {
			f := f.sub(t)
			xt := transposeRows(x, int(rows), length)
			for _, c := range []struct {
				op   string
				max  bool
				mean bool
			}{{"ReduceSum", false, false}, {"ReduceMean", false, true}, {"ReduceMax", true, false}} {
				for _, axis := range []int64{1, 0} {
					shape, data := []int64{rows, L}, x
					if axis == 0 {
						shape, data = []int64{L, rows}, xt // each pattern a column: the strided kernel
					}
					k := f.get(kernels.Spec{Op: c.op, Opset: 18, Inputs: []kernels.TensorInfo{info(f32, shape...), info(kernels.Int64, 1)},
						Consts: map[int]kernels.Const{1: kernels.IntsConst(axis)}, Attrs: map[string]kernels.Attribute{"keepdims": kernels.IntAttr(0)}})
					inputs := []kernels.Tensor{f.uploadF32(shape, data), f.upload(info(kernels.Int64, 1), i64Bytes([]int64{axis}))}
					outputs := f.outputs(k)
					require.NoError(t, k.Execute(inputs, outputs))
					scale := float32(1)
					if c.mean {
						scale = float32(1 / float64(length))
					}
					want := make([]float32, rows)
					for r := range want {
						row := x[r*length : (r+1)*length]
						if axis == 1 {
							want[r] = edgeReduceRow(row, int(kernels.LaunchBlock(k, inputs, outputs)), edgePack(length, inputs[0]), c.max) * scale
						} else {
							want[r] = edgeReduceRow(row, 1, 1, c.max) * scale // one thread walks the column
						}
					}
					check(t, fmt.Sprintf("%s axis %d", c.op, axis), f.downloadF32(outputs[0]), want, 1)
				}
			}
		})
		t.Run(fmt.Sprintf("softmax/%d", length), func(t *testing.T) {
			f := f.sub(t)
			for _, axis := range []int64{-1, 0} {
				shape, data := []int64{rows, L}, x
				if axis == 0 {
					shape, data = []int64{L, rows}, transposeRows(x, int(rows), length)
				}
				k := f.get(kernels.Spec{Op: "Softmax", Opset: 13, Inputs: []kernels.TensorInfo{info(f32, shape...)},
					Attrs: map[string]kernels.Attribute{"axis": kernels.IntAttr(axis)}})
				inputs := []kernels.Tensor{f.uploadF32(shape, data)}
				outputs := f.outputs(k)
				require.NoError(t, k.Execute(inputs, outputs))
				threads := 1 // the cols kernel: one thread per line
				if axis == -1 {
					threads = int(kernels.LaunchBlock(k, inputs, outputs))
				}
				var want []float32
				for r := range int(rows) {
					want = append(want, edgeSoftmax(x[r*length:(r+1)*length], threads)...)
				}
				got := f.downloadF32(outputs[0])
				if axis == 0 {
					got = transposeRows(got, length, int(rows))
				}
				check(t, fmt.Sprintf("Softmax axis %d", axis), got, want, length)
			}
		})
		t.Run(fmt.Sprintf("norm-matmul-groups/%d", length), func(t *testing.T) {
			f := f.sub(t)
			const n = 4
			ones := edgeFill(length*n, 1)
			for _, op := range []string{"cudaep.NormMatMulGroup", "cudaep.SkipNormMatMulGroup"} {
				withSkip := op == "cudaep.SkipNormMatMulGroup"
				infos := []kernels.TensorInfo{info(f32, 1, L)}
				if withSkip {
					infos = append(infos, info(f32, 1, L))
				}
				infos = append(infos, info(f32, L), info(f32, L, n))
				spec := kernels.Spec{Op: op, Opset: 1, Inputs: infos, Attrs: map[string]kernels.Attribute{"epsilon": kernels.FloatAttr(eps)}}
				if withSkip {
					spec.NumOutputs = 2
				}
				k := f.get(spec)
				_, chunks, chunkRows := kernels.GemvGrid(k)
				for r := range int(rows) {
					xr, sr := x[r*length:(r+1)*length], skip[r*length:(r+1)*length]
					inputs := []kernels.Tensor{f.uploadF32([]int64{1, L}, xr)}
					if withSkip {
						inputs = append(inputs, f.uploadF32([]int64{1, L}, sr))
					}
					inputs = append(inputs, f.uploadF32([]int64{L}, gamma), f.uploadF32([]int64{L, n}, ones))
					outputs := f.outputs(k)
					require.NoError(t, k.Execute(inputs, outputs))
					h := append([]float32{}, xr...)
					if withSkip {
						for j := range h {
							h[j] += sr[j]
						}
					}
					pack := edgePack(length, inputs[0])
					if withSkip {
						pack = edgePack(length, inputs[0], inputs[1], outputs[1])
					}
					y := edgeNormGemv(h, gamma, pack, eps, int(chunks), int(chunkRows))
					want := []float32{y, y, y, y}
					check(t, fmt.Sprintf("%s Y0 (row %q)", op, edgePatterns[r].name), f.downloadF32(outputs[0]), want, n)
					if withSkip {
						check(t, fmt.Sprintf("%s sum (row %q)", op, edgePatterns[r].name), f.downloadF32(outputs[1]), h, length)
					}
				}
			}
		})
	}
}

// edgeFill returns n copies of v.
func edgeFill(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// transposeRows returns the rows × cols values v transposed to cols × rows.
func transposeRows(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for r := range rows {
		for c := range cols {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
}

// edgePack is the number of float32s a kernel thread loads at once from rows of length
// elements in these tensors: 4 (one 16-byte pack) when the length is whole packs and every
// address 16-byte aligned, else 1.
func edgePack(length int, ts ...kernels.Tensor) int {
	for _, t := range ts {
		if t.Ptr%16 != 0 {
			return 1
		}
	}
	if length%4 != 0 {
		return 1
	}
	return 4
}

// The reference's float32 arithmetic, as PTX computes it.

// edgeFMA is fma.rn.f32 (through float64: exact product, the sum rounded twice).
func edgeFMA(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// edgeMax is max.f32 (fmaxf): a NaN operand loses to the other.
func edgeMax(a, b float32) float32 {
	if a != a || (b == b && b > a) {
		return b
	}
	return a
}

// edgeMaxNaN is rowreduce.cuh's MaxOp: a NaN operand wins.
func edgeMaxNaN(a, b float32) float32 {
	if a > b || a != a {
		return a
	}
	return b
}

func edgeAdd(a, b float32) float32 { return a + b }

// edgeWarp is a warp's xor-shuffle tree over 32 values as lane 0 sees it: at offsets 16, 8,
// 4, 2, 1, value i combines with value i + offset.
func edgeWarp(v []float32, op func(a, b float32) float32) float32 {
	w := append([]float32{}, v...)
	for off := 16; off > 0; off /= 2 {
		for i := range off {
			w[i] = op(w[i], w[i+off])
		}
	}
	return w[0]
}

// edgeBlock is a block's reduction of one value per thread (a whole number of warps): each
// warp's tree, then a tree over the warps' results padded with identity.
func edgeBlock(perThread []float32, identity float32, op func(a, b float32) float32) float32 {
	lanes := edgeFill(32, identity)
	for w := 0; w < len(perThread)/32; w++ {
		lanes[w] = edgeWarp(perThread[32*w:32*w+32], op)
	}
	return edgeWarp(lanes, op)
}

// edgeThreads returns each of threads threads' combination, from identity, of the elements of
// v it loads (element j belongs to thread (j / pack) mod threads), in increasing j.
func edgeThreads(v []float32, threads, pack int, identity float32, step func(acc float32, x float32) float32) []float32 {
	acc := edgeFill(threads, identity)
	for j, x := range v {
		t := (j / pack) % threads
		acc[t] = step(acc[t], x)
	}
	return acc
}

// edgeNorm is cuda/norm.cu's layernorm of one row v (x + skip + bias already added): the
// shifted sums Σd and Σd² (d = v − v[0], or v when simplified; d² fused) per thread and
// over the block, mean = v[0] + Σd/n, variance max(Σd²/n − (Σd/n)², 0) (Σd²/n and mean 0
// when simplified), inv = 1/sqrt(variance + eps), y = g·(inv·(v − mean)) + b, fused when
// the kernel moves packs.
func edgeNorm(v, gamma, beta []float32, threads, pack int, simplified bool, eps float32) (y []float32, mean, inv float32) {
	shift := float32(0)
	if !simplified {
		shift = v[0]
	}
	d := make([]float32, len(v))
	for j := range v {
		d[j] = v[j] - shift
	}
	s1 := edgeBlock(edgeThreads(d, threads, pack, 0, edgeAdd), 0, edgeAdd)
	s2 := edgeBlock(edgeThreads(d, threads, pack, 0, func(acc, x float32) float32 { return edgeFMA(x, x, acc) }), 0, edgeAdd)
	invLen := 1 / float32(len(v))
	m1 := s1 * invLen
	var variance float32
	if simplified {
		variance = s2 * invLen
	} else {
		mean = shift + m1
		variance = edgeMax(float32(s2*invLen)-float32(m1*m1), 0)
	}
	inv = 1 / float32(math.Sqrt(float64(variance+eps)))
	y = make([]float32, len(v))
	for j := range v {
		a := inv * (v[j] - mean)
		switch {
		case beta != nil && pack > 1:
			y[j] = edgeFMA(gamma[j], a, beta[j])
		case beta != nil:
			y[j] = float32(gamma[j]*a) + beta[j]
		default:
			y[j] = gamma[j] * a
		}
	}
	return y, mean, inv
}

// edgeReduceRow is cuda/reduce.cu's reduction of a row by threads threads (1: one thread
// walks it, the strided kernel): the sum, or the max with NaN winning.
func edgeReduceRow(v []float32, threads, pack int, isMax bool) float32 {
	op, identity := edgeAdd, float32(0)
	if isMax {
		op, identity = edgeMaxNaN, float32(math.Inf(-1))
	}
	acc := edgeThreads(v, threads, pack, identity, op)
	if threads == 1 {
		return acc[0]
	}
	return edgeBlock(acc, identity, op)
}

// edgeSoftmax is cuda/softmax.cu's softmax of a row by threads threads (1: the cols kernel's
// one thread): m = max(x) (max.f32: NaN loses), s = Σ exp(x − m), y = exp(x − m) · (1/s).
func edgeSoftmax(v []float32, threads int) []float32 {
	exp := func(x float32) float32 { return float32(math.Exp(float64(x))) }
	ninf := float32(math.Inf(-1))
	m := edgeThreads(v, threads, 1, ninf, edgeMax)
	mx := m[0]
	if threads > 1 {
		mx = edgeBlock(m, ninf, edgeMax)
	}
	e := make([]float32, len(v))
	for j, x := range v {
		e[j] = exp(x - mx)
	}
	s := edgeThreads(e, threads, 1, 0, edgeAdd)
	sum := s[0]
	if threads > 1 {
		sum = edgeBlock(s, 0, edgeAdd)
	}
	inv := 1 / sum
	y := make([]float32, len(v))
	for j := range e {
		y[j] = e[j] * inv
	}
	return y
}

// edgeNormGemv is cuda/gemv.cu's RMSNorm prologue and product for a group of matrices of
// ones: each of 256 threads sums h² (fused) over its elements, the warps' trees are added in
// warp order, inv = 1/sqrt(fma(Σ, 1/k, eps)), a = (h·inv)·gamma; then every column is Σ a over
// K as the kernel adds it: warp w of a chunk of chunkRows rows adds rows w, w + 8, …, the
// chunk's warps are added in order, and with K split the chunks are added in 8 slices
// (slice s: chunks s, s + 8, …), the slices in order.
func edgeNormGemv(h, gamma []float32, pack int, eps float32, chunks, chunkRows int) float32 {
	const threads, warps = 256, 8
	part := edgeThreads(h, threads, pack, 0, func(acc, x float32) float32 { return edgeFMA(x, x, acc) })
	total := float32(0)
	for w := range warps {
		total += edgeWarp(part[32*w:32*w+32], edgeAdd)
	}
	k := len(h)
	inv := 1 / float32(math.Sqrt(float64(edgeFMA(total, 1/float32(k), eps))))
	a := make([]float32, k)
	for r := range a {
		a[r] = float32(h[r]*inv) * gamma[r]
	}
	chunkSums := make([]float32, chunks)
	for c := range chunks {
		r0, r1 := c*chunkRows, min(k, (c+1)*chunkRows)
		sum := float32(0)
		for w := range warps {
			acc := float32(0)
			for r := r0 + w; r < r1; r += warps {
				acc = edgeFMA(a[r], 1, acc)
			}
			sum += acc
		}
		chunkSums[c] = sum
	}
	if chunks == 1 {
		return chunkSums[0]
	}
	const slices = 8 // gemvThreads / (128 float32 columns / 4)
	total = 0
	for s := range slices {
		p := float32(0)
		for c := s; c < chunks; c += slices {
			p += chunkSums[c]
		}
		total += p
	}
	return total
}

// TestEdgeRowReferenceDiffersFromFloat64 checks that TestEdgeRowClasses can tell float32
// arithmetic in the kernels' order from float64 arithmetic: on some of its rows the float32
// reference's classes differ from a float64 computation (the simulator's kernels before they
// mirrored the GPU's), e.g. the sum of [FLT_MAX, FLT_MAX, -FLT_MAX, -FLT_MAX] overflows in
// float32 and is 0 in float64.
func TestEdgeRowReferenceDiffersFromFloat64(t *testing.T) {
	row := []float32{math.MaxFloat32, math.MaxFloat32, -math.MaxFloat32, -math.MaxFloat32}
	assert.Equal(t, "+Inf", fclass(edgeReduceRow(row, 32, 4, false)))
	s := 0.0
	for _, v := range row {
		s += float64(v)
	}
	assert.Equal(t, "finite", fclass(float32(s)))
	alt := []float32{math.MaxFloat32, -math.MaxFloat32, math.MaxFloat32, -math.MaxFloat32}
	y, mean, _ := edgeNorm(alt, edgeFill(4, 1.5), edgeFill(4, -0.25), 32, 4, false, 1e-5)
	assert.Equal(t, "-Inf", fclass(mean))
	assert.Equal(t, "+Inf", fclass(y[0]))
}

// TestAttentionScoresOverflowInFloat32 runs ONNX Attention on both of its paths (one query
// row: the split decode kernel; 20: the prefill tiles) with a key whose score overflows
// float32 (1e20 · 1e20 per dimension): the kernels compute scores and the softmax in float32,
// where the score is +Inf and exp(+Inf − +Inf) makes the row NaN; in float64 the score is
// finite and the row would be that key's value. The simulator must give the GPU's class.
func TestAttentionScoresOverflowInFloat32(t *testing.T) {
	f := newFixture(t)
	const d, keys = 8, 40
	for _, seq := range []int64{1, 20} {
		t.Run(fmt.Sprintf("seq%d", seq), func(t *testing.T) {
			f := f.sub(t)
			q := edgeFill(int(seq)*d, 1e20)
			k := edgeFill(keys*d, 1)
			for i := range d {
				k[5*d+i] = 1e20 // key 5 of every row's keys
			}
			v := edgeFill(keys*d, 2)
			spec := kernels.Spec{Op: "Attention", Opset: 23, Inputs: []kernels.TensorInfo{f32Info(1, 1, seq, d), f32Info(1, 1, keys, d), f32Info(1, 1, keys, d)}}
			_, y := f.runF32(spec, q, k, v)
			for i, x := range y {
				assert.Equal(t, "NaN", fclass(x), "element %d: %g", i, x)
			}
		})
	}
}
