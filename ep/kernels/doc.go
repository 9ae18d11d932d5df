// Package kernels runs ONNX operators (MatMul, Gemm, elementwise arithmetic and activations,
// Softmax, Identity, NonZero) on a cudadrv stream, from embedded PTX and cuBLAS.
//
// # Overview
//
// A [Library] is created once per provider from a [Runtime] (context, stream, cuBLAS handle,
// TF32 choice); it loads the built-in PTX modules once. [Library.Get] turns a [Spec] (op,
// opset, input dtypes and shapes, attributes, and the values of constant inputs in
// [Spec.Consts]) into a [Kernel]; every combination the package
// cannot run is refused there, with an error wrapping [ErrUnsupported] that names the op, the
// offending input or attribute and what is supported. A Kernel's Execute only queues work on
// the runtime's stream and allocates nothing.
//
// # Support matrix
//
//	op                     dtypes                          opsets  notes
//	MatMul                 float32                         >= 1    numpy matmul: 1-D operands, batch broadcasting (at most 4096 GEMM calls)
//	Gemm                   float32                         >= 7    alpha, beta, transA, transB, optional C (unidirectional broadcast)
//	Add, Sub, Mul, Div     float32                         >= 7    numpy broadcasting, at most 6 dimensions after merging
//	Relu, Sigmoid, Tanh    float32                         >= 6
//	Gelu                   float32                         >= 20   approximate "none" or "tanh"
//	Softmax                float32                         >= 1    axis (negative allowed); opset < 13 flattens from axis
//	Identity               float32, float16, bfloat16,     >= 1    a device-to-device copy
//	                       float64, int32, int64, bool
//	NonZero                float32, int32, int64, bool     >= 9    not capturable; see [NonZeroKernel]
//
// Tensors are dense, contiguous and row-major; a tensor with a zero or negative dimension, or
// more than 2^40 elements, is refused, and so are MatMul and Gemm extents beyond cuBLAS's
// 32-bit sizes. float16 and bfloat16 arithmetic is not implemented. On the simulated device (cudadrv/sim) the PTX entry points run as Go functions
// registered by this package, and cuBLAS is the simulator's own.
package kernels
