package kernels

import (
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

// The float32 arithmetic of the CUDA kernels' reductions, for the simulated kernels: the
// operations PTX has (fma.rn.f32, max.f32, sqrt.rn.f32, rcp.rn.f32) and the order in which a
// block combines a row (each thread its elements, then rowreduce.cuh's warp and block
// reductions), so that an edge row (±FLT_MAX, infinities, NaN, denormals) gives the simulator
// the same class of result, NaN, infinite or finite, as the GPU: the order of float32 sums
// decides whether [1, -1, FLT_MAX, -FLT_MAX] cancels or overflows.

// simFMA32 is fma.rn.f32, a·b + c rounded once to float32, computed through float64 (the
// product is exact there; the sum is rounded twice, which differs from the device only in rare
// last-bit cases and never in overflow).
func simFMA32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// simFmaxf is fmaxf and PTX's max.f32: the larger operand, or the other one when one is NaN.
func simFmaxf(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case a > b:
		return a
	}
	return b
}

// simMaxOp is rowreduce.cuh's MaxOp.combine: a NaN on either side propagates.
func simMaxOp(a, b float32) float32 {
	if a > b || a != a {
		return a
	}
	return b
}

// simSumOp is rowreduce.cuh's SumOp.combine.
func simSumOp(a, b float32) float32 { return a + b }

// simRsqrt is 1 / sqrtf(v) as the kernels compute it: rcp.rn.f32(sqrt.rn.f32(v)) (a float32
// square root through float64 is correctly rounded).
func simRsqrt(v float32) float32 {
	return 1 / float32(math.Sqrt(float64(v)))
}

// simWarpReduce is warp_reduce: every lane combines its value with lane (i xor off)'s for off
// = 16, 8, 4, 2, 1; it returns lane 0's result (every lane's, for the commutative ops here).
func simWarpReduce(lanes []float32, op func(a, b float32) float32) float32 {
	var v, next [32]float32
	copy(v[:], lanes)
	for off := 16; off > 0; off >>= 1 {
		for i := range v {
			next[i] = op(v[i], v[i^off])
		}
		v = next
	}
	return v[0]
}

// simBlockReduce is rowreduce.cuh's block_reduce (and softmax.cu's, with fmaxf for its max)
// over one partial per thread of a block of whole warps: each warp's warp_reduce, then one
// warp_reduce over the warps' results, padded with identity.
func simBlockReduce(partials []float32, identity float32, op func(a, b float32) float32) float32 {
	warps := len(partials) / 32
	var lanes [32]float32
	for i := range lanes {
		lanes[i] = identity
	}
	for w := range warps {
		lanes[w] = simWarpReduce(partials[32*w:32*w+32], op)
	}
	return simWarpReduce(lanes[:], op)
}

// simThreadWalk calls f(t, j) for each element j < n of a row in the order the kernels' row
// loops give them to block thread t of threads: the packs of pack elements t, t + threads,
// t + 2·threads, … (pack 1: single elements), each pack's elements in order.
func simThreadWalk(n, threads, pack int, f func(t, j int)) {
	for t := range threads {
		for p := t; p*pack < n; p += threads {
			for k := range pack {
				if j := p*pack + k; j < n {
					f(t, j)
				}
			}
		}
	}
}

// simAligned16 reports whether the non-zero pointer arguments args of l are all multiples of
// 16 bytes (the kernels' aligned16 and aligned16_all; a null pointer is aligned).
func simAligned16(l *cudadrv.KernelLaunch, args ...int) bool {
	or := uint64(0)
	for _, a := range args {
		or |= uint64(l.PtrArg(a))
	}
	return or%16 == 0
}
