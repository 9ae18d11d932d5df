package kernels

import (
	"slices"

	"github.com/cudaep/cudaep/cudadrv"
)

// The ops of the "cudaep" domain: fusions of op chains that exporters emit, which a graph
// rewrite (package ep) replaces with one node. Their kernels are in cuda/elementwise.cu.

func init() {
	builders["cudaep.RotateHalf"] = builder{inputNames: []string{"X", "cos", "sin"}, build: buildRotateHalf}
	builders["cudaep.SiluMul"] = builder{inputNames: []string{"A", "B"}, build: buildSiluMul}
}

// fusedEntries lists the entry points of the cudaep ops in ptx/elementwise.ptx.
func fusedEntries() []string {
	return typedEntries([]string{"cudaep_rotate_half", "cudaep_silu_mul"}, floatTypes)
}

// rotateHalfKernel is cudaep.RotateHalf, one launch of cudaep_rotate_half_<t>(y, x, cos, sin,
// rows, half, dims[6], cosStrides[6], sinStrides[6]) on linearGrid over the work items (16-byte
// packs of a row's first half when half is a whole number of them).
type rotateHalfKernel struct {
	kernelBase
	fn         *cudadrv.Function
	rows, half uint64
	dims       [maxBroadcastDims]int64
	cosStrides [maxBroadcastDims]int64
	sinStrides [maxBroadcastDims]int64
	grid       cudadrv.Dim3
	args       cudadrv.KernelArgs
}

// buildRotateHalf builds cudaep.RotateHalf (any opset of the cudaep domain), the Hugging Face
// rotary embedding that torch.onnx exports as Mul(x, cos), Slice, Slice, Neg, Concat, Mul(·,
// sin), Add:
//
//	Y[…, i] = X[…, i] · cos[…, i] + R[…, i] · sin[…, i],
//	R[…, i] = −X[…, i + D/2] for i < D/2, X[…, i − D/2] from D/2 on.
//
// X is float32, float16 or bfloat16 of rank >= 1 with an even last dimension D; cos and sin
// have X's dtype and last dimension and shapes that broadcast to X's (numpy rules, the result
// exactly X's shape: e.g. X [B, H, S, D] with cos and sin [1, 1, S, D] or [S, D]). Y has X's
// shape and dtype; each element is computed in float32 and rounded once. At most six
// dimensions of cos and sin's broadcast may remain after merging neighbours (more is refused).
// Execute may run in place (Y the X buffer).
func buildRotateHalf(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(3, 3); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, floatTypes, 1, anyRank); err != nil {
		return nil, err
	}
	x := s.Inputs[0]
	rank := len(x.Shape)
	d := x.Shape[rank-1]
	if d%2 != 0 {
		return nil, s.errorf("%s has shape %s; its last dimension %d must be even (its halves are rotated into each other)", s.input(0), shapeString(x.Shape), d)
	}
	strides := make([][]int64, 2)
	for i := 1; i <= 2; i++ {
		if err := s.checkInput(i, floatTypes, 1, anyRank); err != nil {
			return nil, err
		}
		if err := s.checkSameDType(0, i); err != nil {
			return nil, err
		}
		sh := s.Inputs[i].Shape
		if last := sh[len(sh)-1]; last != d {
			return nil, s.errorf("%s has shape %s; its last dimension must be %s's, %d", s.input(i), shapeString(sh), s.input(0), d)
		}
		if out, ok := broadcastShapes(x.Shape, sh); !ok || !slices.Equal(out, x.Shape) {
			return nil, s.errorf("%s has shape %s, which does not broadcast to %s's shape %s (numpy rules, the result being %s's shape)",
				s.input(i), shapeString(sh), s.input(0), shapeString(x.Shape), s.input(0))
		}
		strides[i-1] = broadcastStrides(sh, x.Shape)[:rank-1]
	}
	layout := mergeDims(x.Shape[:rank-1], strides...)
	if len(layout.dims) > maxBroadcastDims {
		return nil, s.errorf("broadcasting %s and %s over %s's shape %s needs %d dimensions after merging neighbours; at most %d are supported",
			s.input(1), s.input(2), s.input(0), shapeString(x.Shape), len(layout.dims), maxBroadcastDims)
	}
	k := &rotateHalfKernel{kernelBase: newBase(l, s, cloneInfo(x)), fn: l.function("cudaep_rotate_half_" + x.DType.suffix())}
	k.rows, k.half = uint64(product(x.Shape[:rank-1])), uint64(d/2)
	k.dims, k.cosStrides = layout.padded(0)
	_, k.sinStrides = layout.padded(1)
	items := k.rows * k.half
	if v := uint64(16 / x.DType.Size()); k.half%v == 0 {
		items /= v
	}
	k.grid = linearGrid(items)
	return k, nil
}

// Execute queues Y = X · cos + rotate_half(X) · sin. Y may be X itself; it must not overlap
// X otherwise, nor cos or sin.
func (k *rotateHalfKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).Ptr(inputs[2].Ptr).U64(k.rows).U64(k.half)
	for _, d := range k.dims {
		a.I64(d)
	}
	for _, st := range k.cosStrides {
		a.I64(st)
	}
	for _, st := range k.sinStrides {
		a.I64(st)
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// buildSiluMul builds cudaep.SiluMul (any opset of the cudaep domain), a gated MLP's
// Sigmoid(A), Mul(A, ·), Mul(·, B): Y = A · sigmoid(A) · B, elementwise, in float32 with one
// rounding on store. A and B are float32, float16 or bfloat16 of one dtype and the same shape
// (no broadcasting); Y has their shape and dtype. It is a same-shape float binary: one launch
// of cudaep_silu_mul_<t>(y, a, b, n) on sameShapeGrid's grid, and Execute may run in place.
func buildSiluMul(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(2, 2); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	for i := range 2 {
		if err := s.checkInput(i, floatTypes, 0, anyRank); err != nil {
			return nil, err
		}
	}
	if err := s.checkSameDType(0, 1); err != nil {
		return nil, err
	}
	a, b := s.Inputs[0], s.Inputs[1]
	if !slices.Equal(a.Shape, b.Shape) {
		return nil, s.errorf("%s has shape %s and %s has shape %s; they must be the same (SiluMul does not broadcast)",
			s.input(0), shapeString(a.Shape), s.input(1), shapeString(b.Shape))
	}
	k := &binaryKernel{kernelBase: newBase(l, s, cloneInfo(a)), fn: l.function("cudaep_silu_mul_" + a.DType.suffix()), same: true}
	k.n = uint64(a.NumElements())
	k.grid, k.variant = sameShapeGrid(a.DType, k.n)
	return k, nil
}
