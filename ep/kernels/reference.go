package kernels

import "math"

// Reference implementations of every op, on the host, in float64. The simulated device's
// kernels (sim_kernels.go) compute their elements with the scalar functions here, and the
// tests compare device results with the whole-op functions, which work from shapes alone
// (index arithmetic independent of the stride plans that Library.Get makes).

// refBinaryOps are the scalar functions of the binary ops. For float32 operands, rounding
// the float64 result to float32 gives the correctly rounded float32 result, as the device's
// IEEE float32 add, sub, mul and div do.
var refBinaryOps = map[string]func(a, b float64) float64{
	"Add": func(a, b float64) float64 { return a + b },
	"Sub": func(a, b float64) float64 { return a - b },
	"Mul": func(a, b float64) float64 { return a * b },
	"Div": func(a, b float64) float64 { return a / b },
	"Pow": math.Pow,
}

// refIntOps are Add, Sub, Mul and Div on integers, as the int32 and int64 kernels compute
// them: two's-complement wrapping (an int32 result keeps the low 32 bits of the int64 one,
// which is the wrapped int32 result), division truncated toward zero, x / 0 = 0 and x / -1 =
// -x wrapped.
var refIntOps = map[string]func(a, b int64) int64{
	"Add": func(a, b int64) int64 { return int64(uint64(a) + uint64(b)) },
	"Sub": func(a, b int64) int64 { return int64(uint64(a) - uint64(b)) },
	"Mul": func(a, b int64) int64 { return int64(uint64(a) * uint64(b)) },
	"Div": func(a, b int64) int64 {
		switch b {
		case 0:
			return 0
		case -1:
			return int64(-uint64(a))
		}
		return a / b
	},
}

// refCompareOps are the comparisons on float64 values; integer inputs are compared as int64
// by refCompareInts (float64 is not exact beyond 2^53).
var refCompareOps = map[string]func(a, b float64) bool{
	"Equal":   func(a, b float64) bool { return a == b },
	"Less":    func(a, b float64) bool { return a < b },
	"Greater": func(a, b float64) bool { return a > b },
}

// refCompareInts are the comparisons on integer values.
var refCompareInts = map[string]func(a, b int64) bool{
	"Equal":   func(a, b int64) bool { return a == b },
	"Less":    func(a, b int64) bool { return a < b },
	"Greater": func(a, b int64) bool { return a > b },
}

// refUnaryOps are the activations, keyed by op name ("Gelu" with approximate "none",
// "GeluTanh" with "tanh").
var refUnaryOps = map[string]func(x float64) float64{
	"Relu":       func(x float64) float64 { return max(x, 0) },
	"Neg":        func(x float64) float64 { return -x },
	"Abs":        math.Abs,
	"Sqrt":       math.Sqrt,
	"Reciprocal": func(x float64) float64 { return 1 / x },
	"Exp":        math.Exp,
	"Log":        math.Log,
	"Erf":        math.Erf,
	"Sin":        math.Sin,
	"Cos":        math.Cos,
	"Sigmoid":    func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"Tanh":       math.Tanh,
	"Gelu":       func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
	"GeluTanh":   func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) },
}

// refSoftmaxLine writes the softmax of xs into ys (which may be xs), accumulating in float64.
func refSoftmaxLine(ys, xs []float64) {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	var sum float64
	for i, x := range xs {
		ys[i] = math.Exp(x - m)
		sum += ys[i]
	}
	for i := range ys {
		ys[i] /= sum
	}
}

// refShape is numpy broadcasting of two shapes, or false.
func refShape(a, b []int64) ([]int64, bool) {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := append([]int64{}, a...)
	off := len(a) - len(b)
	for i, d := range b {
		switch o := out[off+i]; {
		case o == d || d == 1:
		case o == 1:
			out[off+i] = d
		default:
			return nil, false
		}
	}
	return out, true
}

// refIndex returns the flat index in a tensor of shape of the element that broadcasting
// places at coordinates idx of a larger (right-aligned) output.
func refIndex(shape, idx []int64) int64 {
	off := len(idx) - len(shape)
	flat := int64(0)
	for i, d := range shape {
		c := idx[off+i]
		if d == 1 {
			c = 0
		}
		flat = flat*d + c
	}
	return flat
}

// refNext advances idx to the next coordinates of shape in row-major order.
func refNext(idx, shape []int64) {
	for i := len(shape) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < shape[i] {
			return
		}
		idx[i] = 0
	}
}

func refNumel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// refBinary computes op over the numpy broadcast of a and b and returns the output and its
// shape; ok is false when the shapes do not broadcast.
func refBinary(op string, a []float64, aShape []int64, b []float64, bShape []int64) (out []float64, shape []int64, ok bool) {
	shape, ok = refShape(aShape, bShape)
	if !ok {
		return nil, nil, false
	}
	f := refBinaryOps[op]
	out = make([]float64, refNumel(shape))
	idx := make([]int64, len(shape))
	for i := range out {
		out[i] = f(a[refIndex(aShape, idx)], b[refIndex(bShape, idx)])
		refNext(idx, shape)
	}
	return out, shape, true
}

// refUnary applies the activation op ("Relu", "Sigmoid", "Tanh", "Gelu", "GeluTanh").
func refUnary(op string, x []float64) []float64 {
	f := refUnaryOps[op]
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = f(v)
	}
	return out
}

// refSoftmax is Softmax of x (shape) along axis with the semantics of opset.
func refSoftmax(x []float64, shape []int64, axis int, opset int) []float64 {
	if axis < 0 {
		axis += len(shape)
	}
	outer, length, inner := refNumel(shape[:axis]), refNumel(shape[axis:axis+1]), refNumel(shape[axis+1:])
	if opset < 13 {
		length, inner = refNumel(shape[axis:]), 1
	}
	out := make([]float64, len(x))
	line := make([]float64, length)
	for o := int64(0); o < outer; o++ {
		for in := int64(0); in < inner; in++ {
			for j := range line {
				line[j] = x[(o*length+int64(j))*inner+in]
			}
			refSoftmaxLine(line, line)
			for j, v := range line {
				out[(o*length+int64(j))*inner+in] = v
			}
		}
	}
	return out
}

// refMatMul is numpy matmul: 1-D operands are promoted (and their unit dimension dropped from
// the result), batch dimensions broadcast. Sums are float64.
func refMatMul(a []float64, aShape []int64, b []float64, bShape []int64) (out []float64, shape []int64, ok bool) {
	as, bs := aShape, bShape
	if len(as) == 1 {
		as = []int64{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int64{bs[0], 1}
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != k {
		return nil, nil, false
	}
	aBatch, bBatch := as[:len(as)-2], bs[:len(bs)-2]
	batch, ok := refShape(aBatch, bBatch)
	if !ok {
		return nil, nil, false
	}
	out = make([]float64, refNumel(batch)*m*n)
	idx := make([]int64, len(batch))
	for t := int64(0); t < refNumel(batch); t++ {
		ao, bo := refIndex(aBatch, idx)*m*k, refIndex(bBatch, idx)*k*n
		for i := int64(0); i < m; i++ {
			for j := int64(0); j < n; j++ {
				var s float64
				for l := int64(0); l < k; l++ {
					s += a[ao+i*k+l] * b[bo+l*n+j]
				}
				out[t*m*n+i*n+j] = s
			}
		}
		refNext(idx, batch)
	}
	shape = append([]int64{}, batch...)
	if len(aShape) > 1 {
		shape = append(shape, m)
	}
	if len(bShape) > 1 {
		shape = append(shape, n)
	}
	return out, shape, true
}

// refGemm is alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A, B' likewise, and C (nil for
// none) broadcast to M×N. Sums are float64.
func refGemm(a []float64, aShape []int64, b []float64, bShape []int64, c []float64, cShape []int64, alpha, beta float64, transA, transB bool) (out []float64, shape []int64) {
	m, k := aShape[0], aShape[1]
	if transA {
		m, k = k, m
	}
	n := bShape[1]
	if transB {
		n = bShape[0]
	}
	at := func(i, l int64) float64 {
		if transA {
			return a[l*m+i]
		}
		return a[i*k+l]
	}
	bt := func(l, j int64) float64 {
		if transB {
			return b[j*k+l]
		}
		return b[l*n+j]
	}
	shape = []int64{m, n}
	out = make([]float64, m*n)
	for i := int64(0); i < m; i++ {
		for j := int64(0); j < n; j++ {
			var s float64
			for l := int64(0); l < k; l++ {
				s += at(i, l) * bt(l, j)
			}
			out[i*n+j] = alpha * s
			if c != nil {
				out[i*n+j] += beta * c[refIndex(cShape, []int64{i, j})]
			}
		}
	}
	return out, shape
}

// refNonZero returns the coordinates of the set flags of a tensor of shape, as the ONNX
// NonZero output [rank, nnz] flattened row-major.
func refNonZero(flags []bool, shape []int64) []int64 {
	var nnz int64
	for _, f := range flags {
		if f {
			nnz++
		}
	}
	out := make([]int64, int64(len(shape))*nnz)
	idx := make([]int64, len(shape))
	pos := int64(0)
	for _, f := range flags {
		if f {
			for d, c := range idx {
				out[int64(d)*nnz+pos] = c
			}
			pos++
		}
		refNext(idx, shape)
	}
	return out
}

// refLayerNorm normalizes x (shape) over its dimensions from axis on: y = (x − mean) /
// sqrt(var + eps) · gamma + beta (beta nil for none); simplified (RMSNorm) takes mean 0 and
// the mean of squares as var. It returns y and each row's mean and 1 / sqrt(var + eps).
// gamma and beta hold the normalized shape's elements.
func refLayerNorm(x []float64, shape []int64, axis int, gamma, beta []float64, eps float64, simplified bool) (y, mean, invStd []float64) {
	if axis < 0 {
		axis += len(shape)
	}
	rows, length := refNumel(shape[:axis]), refNumel(shape[axis:])
	y = make([]float64, len(x))
	mean, invStd = make([]float64, rows), make([]float64, rows)
	for r := range rows {
		row := x[r*length : (r+1)*length]
		mean[r], invStd[r] = refNormStats(row, eps, simplified)
		for j, v := range row {
			y[r*length+int64(j)] = (v - mean[r]) * invStd[r] * gamma[j]
			if beta != nil {
				y[r*length+int64(j)] += beta[j]
			}
		}
	}
	return y, mean, invStd
}

// refReduce reduces x (shape) over axes (normalized, distinct; none reduces everything) with
// op ("sum", "mean" or "max") and returns the output and its shape (reduced dimensions kept as
// 1 when keepdims).
func refReduce(op string, x []float64, shape []int64, axes []int, keepdims bool) ([]float64, []int64) {
	reduced := make([]bool, len(shape))
	for _, a := range axes {
		reduced[a] = true
	}
	if len(axes) == 0 {
		for i := range reduced {
			reduced[i] = true
		}
	}
	kept := make([]int64, len(shape)) // the output shape with reduced dimensions as 1
	var out []int64
	count := int64(1)
	for i, d := range shape {
		kept[i] = d
		if reduced[i] {
			kept[i] = 1
			count *= d
			if keepdims {
				out = append(out, 1)
			}
		} else {
			out = append(out, d)
		}
	}
	step := op
	if op == "mean" {
		step = "sum"
	}
	acc := make([]float64, refNumel(kept))
	for i := range acc {
		acc[i] = refReduceStart(step)
	}
	idx := make([]int64, len(shape))
	for _, v := range x {
		o := int64(0)
		for i, c := range idx {
			if reduced[i] {
				c = 0
			}
			o = o*kept[i] + c
		}
		acc[o] = refReduceStep(step, acc[o], v)
		refNext(idx, shape)
	}
	if op == "mean" {
		for i := range acc {
			acc[i] /= float64(count)
		}
	}
	return acc, out
}

// refNormStats returns the mean (0 when simplified) and 1 / sqrt(variance + eps) of v, in
// float64; simplified (RMSNorm) uses the mean of squares as the variance.
func refNormStats(v []float64, eps float64, simplified bool) (mean, invStd float64) {
	n := float64(len(v))
	var s1, s2 float64
	for _, x := range v {
		s1 += x
	}
	if !simplified {
		mean = s1 / n
	}
	for _, x := range v {
		s2 += (x - mean) * (x - mean)
	}
	return mean, 1 / math.Sqrt(s2/n+eps)
}

// refReduceStep is one step of a reduction ("sum" or "max"): max propagates NaN, as the
// kernels' MaxOp and numpy do. refReduceStart is where each reduction starts.
func refReduceStep(op string, acc, v float64) float64 {
	if op == "sum" {
		return acc + v
	}
	if acc > v || math.IsNaN(acc) {
		return acc
	}
	return v
}

func refReduceStart(op string) float64 {
	if op == "sum" {
		return 0
	}
	return math.Inf(-1)
}

// refNBitsWeights dequantizes com.microsoft.MatMulNBits' B into W [N, K] in float64, from the
// bytes as ONNX Runtime lays them out: B [N, k_blocks, block_size·bits/8] with weight k of
// column n in block k / block_size at position k % block_size of its blob (4 bits: byte
// position/2, the low nibble for an even position; 8 bits: a byte each); scales [N·k_blocks];
// the zero point of a block packed in zpPacked ([N, ceil(k_blocks·bits/8)] bytes, packed as B
// is along the blocks), else in zpTyped ([N·k_blocks] values), else 2^(bits−1). W[n, k] = (q −
// zp) · scale; the blocks' padding past K is never read.
func refNBitsWeights(k, n, bits, blockSize int64, b []byte, scales []float64, zpPacked []byte, zpTyped []float64) []float64 {
	kBlocks := (k + blockSize - 1) / blockSize
	blob := blockSize * bits / 8
	zpRow := (kBlocks*bits + 7) / 8
	unpack := func(bytes []byte, index int64) float64 { // element index of a packed run
		if bits == 8 {
			return float64(bytes[index])
		}
		v := bytes[index/2]
		if index%2 == 1 {
			v >>= 4
		}
		return float64(v & 15)
	}
	w := make([]float64, n*k)
	for col := int64(0); col < n; col++ {
		for kk := int64(0); kk < k; kk++ {
			kb, pos := kk/blockSize, kk%blockSize
			q := unpack(b[(col*kBlocks+kb)*blob:(col*kBlocks+kb+1)*blob], pos)
			zp := float64(int64(1) << (bits - 1))
			switch {
			case zpPacked != nil:
				zp = unpack(zpPacked[col*zpRow:(col+1)*zpRow], kb)
			case zpTyped != nil:
				zp = zpTyped[col*kBlocks+kb]
			}
			w[col*k+kk] = (q - zp) * scales[col*kBlocks+kb]
		}
	}
	return w
}

// refMatMulNBits is Y = A · Wᵀ (+ bias) for rows of A [rows, K] and W [N, K] (refNBitsWeights),
// bias [N] or nil, summed in float64.
func refMatMulNBits(a []float64, rows, k, n int64, w, bias []float64) []float64 {
	y := make([]float64, rows*n)
	for m := int64(0); m < rows; m++ {
		for col := int64(0); col < n; col++ {
			var s float64
			for kk := int64(0); kk < k; kk++ {
				s += a[m*k+kk] * w[col*k+kk]
			}
			if bias != nil {
				s += bias[col]
			}
			y[m*n+col] = s
		}
	}
	return y
}
