package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep/kernels"
)

func TestMatMulAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		a, b, out []int64
		plan      []int // batch count of each cuBLAS call
	}{
		{[]int64{5, 7}, []int64{7, 3}, []int64{5, 3}, []int{1}},
		{[]int64{33, 65}, []int64{65, 17}, []int64{33, 17}, []int{1}},
		{[]int64{2, 3, 4, 5}, []int64{2, 3, 5, 6}, []int64{2, 3, 4, 6}, []int{6}},
		{[]int64{2, 1, 4, 5}, []int64{3, 5, 6}, []int64{2, 3, 4, 6}, []int{3, 3}},
		{[]int64{3, 1, 4, 5}, []int64{1, 2, 5, 6}, []int64{3, 2, 4, 6}, []int{2, 2, 2}},
		{[]int64{4, 6, 5}, []int64{5, 3}, []int64{4, 6, 3}, []int{1}}, // folded into one GEMM
		{[]int64{5, 3}, []int64{4, 3, 2}, []int64{4, 5, 2}, []int{4}}, // A repeated: stride 0
		{[]int64{1, 4, 5}, []int64{5, 6}, []int64{1, 4, 6}, []int{1}},
		{[]int64{5}, []int64{5, 3}, []int64{3}, []int{1}},
		{[]int64{4, 5}, []int64{5}, []int64{4}, []int{1}},
		{[]int64{5}, []int64{5}, []int64{}, []int{1}},
		{[]int64{3, 5}, []int64{2, 5, 4}, []int64{2, 3, 4}, []int{2}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%vx%v", c.a, c.b), func(t *testing.T) {
			f := f.sub(t)
			spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(c.a...), f32Info(c.b...)}}
			a, b := f.random(spec.Inputs[0].NumElements()), f.random(spec.Inputs[1].NumElements())
			k, got := f.runF32(spec, a, b)
			ref, shape, ok := kernels.RefMatMul(to64(a), c.a, to64(b), c.b)
			require.True(t, ok)
			assert.Equal(t, c.out, shape, "reference shape")
			assert.Equal(t, []kernels.TensorInfo{f32Info(c.out...)}, k.Outputs())
			assert.Equal(t, c.plan, kernels.GemmPlan(k), "cuBLAS calls")
			requireClose(t, got, ref, boundGemm, k.Name())
		})
	}
}

func TestMatMulTF32(t *testing.T) {
	// With Runtime.TF32 the library switches the cuBLAS handle to TF32 tensor-op math: the
	// result stays within the TF32 bound and differs from full float32 math.
	spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(128, 512), f32Info(512, 96)}}
	full := newFixture(t)
	a, b := full.random(128*512), full.random(512*96)
	ref, _, _ := kernels.RefMatMul(to64(a), []int64{128, 512}, to64(b), []int64{512, 96})
	_, exact := full.runF32(spec, a, b)
	requireClose(t, exact, ref, boundGemm, "default math")

	tf := full.variant(fixtureOpts{tf32: true})
	_, got := tf.runF32(spec, a, b)
	requireClose(t, got, ref, boundTF32, "TF32 math")
	assert.Greater(t, relDiff(got, exact), 1e-6, "TF32 math gave the full-float32 result: the math mode was not set")
}

func TestGemmAgainstReference(t *testing.T) {
	f := newFixture(t)
	const m, k, n = 7, 13, 5
	cShapes := [][]int64{nil, {}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}}
	for _, trans := range [][2]int64{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
		for _, cShape := range cShapes {
			for _, ab := range [][2]float32{{1, 1}, {0.5, -1.5}, {-2, 0}} {
				hasC := cShape != nil
				if !hasC && ab != [2]float32{1, 1} && ab != [2]float32{-2, 0} {
					continue
				}
				name := fmt.Sprintf("transA=%d/transB=%d/C=%v/alpha=%g/beta=%g", trans[0], trans[1], cShape, ab[0], ab[1])
				if !hasC {
					name = fmt.Sprintf("transA=%d/transB=%d/noC/alpha=%g", trans[0], trans[1], ab[0])
				}
				t.Run(name, func(t *testing.T) {
					f := f.sub(t)
					aShape, bShape := []int64{m, k}, []int64{k, n}
					if trans[0] == 1 {
						aShape = []int64{k, m}
					}
					if trans[1] == 1 {
						bShape = []int64{n, k}
					}
					spec := kernels.Spec{Op: "Gemm", Opset: 13,
						Inputs: []kernels.TensorInfo{f32Info(aShape...), f32Info(bShape...)},
						Attrs: map[string]kernels.Attribute{
							"alpha": kernels.FloatAttr(ab[0]), "beta": kernels.FloatAttr(ab[1]),
							"transA": kernels.IntAttr(trans[0]), "transB": kernels.IntAttr(trans[1]),
						}}
					a, b := f.random(m*k), f.random(k*n)
					inputs := [][]float32{a, b}
					var c []float64
					if hasC {
						spec.Inputs = append(spec.Inputs, f32Info(cShape...))
						cv := f.random(spec.Inputs[2].NumElements())
						inputs = append(inputs, cv)
						c = to64(cv)
					}
					kern, got := f.runF32(spec, inputs...)
					ref, shape := kernels.RefGemm(to64(a), aShape, to64(b), bShape, c, cShape, float64(ab[0]), float64(ab[1]), trans[0] == 1, trans[1] == 1)
					assert.Equal(t, []kernels.TensorInfo{f32Info(shape...)}, kern.Outputs())
					requireClose(t, got, ref, boundGemm, kern.Name())
				})
			}
		}
	}
}

func TestGemmDefaultsAlphaBetaOne(t *testing.T) {
	f := newFixture(t)
	spec := kernels.Spec{Op: "Gemm", Opset: 13, Inputs: []kernels.TensorInfo{f32Info(3, 4), f32Info(4, 2), f32Info(2)}}
	a, b, c := f.random(12), f.random(8), f.random(2)
	k, got := f.runF32(spec, a, b, c)
	ref, _ := kernels.RefGemm(to64(a), []int64{3, 4}, to64(b), []int64{4, 2}, to64(c), []int64{2}, 1, 1, false, false)
	requireClose(t, got, ref, boundGemm, k.Name())
}
