package kernels

import "math"

// Reference implementations of the cudaep domain's ops (fused.go), on the host, in float64.
// The simulated device's kernels (sim_fused.go) use the scalar functions; the tests compare
// device results with the whole-op functions, which work from shapes alone.

// refSiluMul is cudaep.SiluMul's element: a · sigmoid(a) · b.
func refSiluMul(a, b float64) float64 { return a / (1 + math.Exp(-a)) * b }

// refRotateHalfPair is one element of cudaep.RotateHalf: x · c + sign · partner · s, where
// partner is the element half a row away and sign is −1 in the first half, +1 in the second.
func refRotateHalfPair(x, partner, c, s, sign float64) float64 { return x*c + sign*partner*s }

// refRotateHalf returns cudaep.RotateHalf of x (shape xShape, last dimension D) with cos and
// sin of shapes that broadcast to xShape: y[…, i] = x[…, i]·cos[…, i] + r[…, i]·sin[…, i],
// r[…, i] = −x[…, i + D/2] below D/2 and x[…, i − D/2] from there.
func refRotateHalf(x []float64, xShape []int64, cos []float64, cosShape []int64, sin []float64, sinShape []int64) []float64 {
	d := xShape[len(xShape)-1]
	out := make([]float64, len(x))
	idx := make([]int64, len(xShape))
	for flat := range out {
		i := idx[len(idx)-1]
		partner, sign := int64(flat)+d/2, -1.0
		if i >= d/2 {
			partner, sign = int64(flat)-d/2, 1
		}
		c, s := cos[refIndex(cosShape, idx)], sin[refIndex(sinShape, idx)]
		out[flat] = refRotateHalfPair(x[flat], x[partner], c, s, sign)
		refNext(idx, xShape)
	}
	return out
}
