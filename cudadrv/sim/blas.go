package sim

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

// blasHandle is a cublasHandle_t: its context, stream and math mode. Guarded by d.mu.
type blasHandle struct {
	handle cudadrv.RawBLAS
	ctx    *context
	stream cudadrv.RawStream
	math   cudadrv.MathMode
}

// cuBLAS math mode bits.
const (
	mathBaseMask         = 0x0f
	mathTensorOp         = 1 // CUBLAS_TENSOR_OP_MATH (deprecated)
	mathPedantic         = 2 // CUBLAS_PEDANTIC_MATH
	mathDisallowReducing = cudadrv.MathDisallowReduction
)

func blasFail(op string, s cudadrv.BLASStatus, format string, args ...any) error {
	return &cudadrv.BLASError{Op: op, Status: s, Detail: fmt.Sprintf(format, args...)}
}

// blasBegin is the prologue of the cuBLAS entry points: closed or uninitialized drivers are
// CUBLAS_STATUS_NOT_INITIALIZED; injected faults apply. d.mu is held.
func (d *Device) blasBegin(op string) error {
	if d.closed {
		return blasFail(op, cudadrv.BLASNotInitialized, "the simulated device is closed")
	}
	if err := d.fault.take(op, d); err != nil {
		return err
	}
	if !d.initialized {
		return blasFail(op, cudadrv.BLASNotInitialized, "cuInit has not been called")
	}
	return nil
}

// blasHandleOf resolves h: an unknown or destroyed handle is CUBLAS_STATUS_NOT_INITIALIZED,
// as is a handle whose context was destroyed. d.mu is held.
func (d *Device) blasHandleOf(op string, h cudadrv.RawBLAS) (*blasHandle, error) {
	b := d.blas[h]
	if b == nil {
		return nil, blasFail(op, cudadrv.BLASNotInitialized, "cuBLAS handle %#x does not exist (destroyed or never created)", uintptr(h))
	}
	return b, nil
}

// BLASCreate creates a cuBLAS handle in the calling thread's current context, on the legacy
// stream with the default math mode.
//
// # Errors
//
// CUBLAS_STATUS_NOT_INITIALIZED without a current context, or where a live capture prohibits
// it (it allocates the handle's workspace; the capture is invalidated, see capture.go).
func (d *Device) BLASCreate() (cudadrv.RawBLAS, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.blasBegin(OpBLASCreate); err != nil {
		return 0, err
	}
	c := d.currentContext()
	if c == nil {
		return 0, blasFail(OpBLASCreate, cudadrv.BLASNotInitialized, "no context is current on this OS thread")
	}
	if c.sticky != nil {
		return 0, blasFail(OpBLASCreate, cudadrv.BLASNotInitialized, "the context has a sticky error: %v", c.stickyError(OpBLASCreate))
	}
	if err := d.checkUnsafe(OpBLASCreate); err != nil {
		return 0, blasFail(OpBLASCreate, cudadrv.BLASNotInitialized, "%v", err)
	}
	b := &blasHandle{handle: cudadrv.RawBLAS(d.handle()), ctx: c}
	d.blas[b.handle] = b
	return b.handle, nil
}

// BLASDestroy destroys a cuBLAS handle. Like BLASCreate it is prohibited during a capture
// that prohibits unsafe calls on this thread.
func (d *Device) BLASDestroy(h cudadrv.RawBLAS) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.blasBegin(OpBLASDestroy); err != nil {
		return err
	}
	if _, err := d.blasHandleOf(OpBLASDestroy, h); err != nil {
		return err
	}
	if err := d.checkUnsafe(OpBLASDestroy); err != nil {
		return blasFail(OpBLASDestroy, cudadrv.BLASInternalError, "%v", err)
	}
	delete(d.blas, h)
	return nil
}

// BLASSetStream makes the handle's later calls run on stream s (0: legacy) of its context.
// A stream that does not exist in that context is CUBLAS_STATUS_INVALID_VALUE.
func (d *Device) BLASSetStream(h cudadrv.RawBLAS, s cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.blasBegin(OpBLASSetStream); err != nil {
		return err
	}
	b, err := d.blasHandleOf(OpBLASSetStream, h)
	if err != nil {
		return err
	}
	if _, err := d.stream(OpBLASSetStream, b.ctx, s); err != nil {
		return blasFail(OpBLASSetStream, cudadrv.BLASInvalidValue, "%v", err)
	}
	b.stream = s
	return nil
}

// BLASSetMathMode sets the handle's math mode: MathDefault, MathTF32TensorOp (operands are
// rounded to TF32 as the tensor cores do), CUBLAS_TENSOR_OP_MATH or CUBLAS_PEDANTIC_MATH,
// optionally with MathDisallowReduction. Anything else is CUBLAS_STATUS_INVALID_VALUE.
func (d *Device) BLASSetMathMode(h cudadrv.RawBLAS, mode cudadrv.MathMode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.blasBegin(OpBLASSetMathMode); err != nil {
		return err
	}
	b, err := d.blasHandleOf(OpBLASSetMathMode, h)
	if err != nil {
		return err
	}
	base := mode &^ mathDisallowReducing
	if base&^mathBaseMask != 0 || base > cudadrv.MathTF32TensorOp {
		return blasFail(OpBLASSetMathMode, cudadrv.BLASInvalidValue, "unknown math mode %#x", int32(mode))
	}
	b.math = mode
	return nil
}

// Sgemm queues C = alpha·op(A)·op(B) + beta·C (column-major, cuBLAS semantics) on the
// handle's stream, or records it as one node when that stream captures. Alpha and Beta are
// read at the call. With beta 0, C is not read (a NaN in C does not propagate); with alpha 0
// or K 0, A and B are not read. Operand ranges are bounds-checked when the GEMM runs: an
// access outside an allocation faults the context with CUDA_ERROR_ILLEGAL_ADDRESS.
//
// # Errors
//
// CUBLAS_STATUS_INVALID_VALUE for a nil p, an unknown transpose, negative M, N or K, or a
// leading dimension below max(1, rows of the stored matrix); CUBLAS_STATUS_NOT_INITIALIZED for
// an unknown handle; CUBLAS_STATUS_EXECUTION_FAILED when the launch cannot be queued (the
// detail carries the driver error, e.g. an invalidated capture).
func (d *Device) Sgemm(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	return d.gemm(OpSgemm, h, p, false)
}

// SgemmStridedBatched is Sgemm over p.BatchCount matrices whose operands are StrideA,
// StrideB and StrideC elements apart. BatchCount 0 does nothing; a negative one is
// CUBLAS_STATUS_INVALID_VALUE.
func (d *Device) SgemmStridedBatched(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	return d.gemm(OpSgemmStridedBatched, h, p, true)
}

// GemmEx is Sgemm over matrices of p.Type (float32, float16 or bfloat16), accumulating in
// float32 as CUBLAS_COMPUTE_32F does and rounding C to its type (to nearest, ties to even).
// Another type is CUBLAS_STATUS_INVALID_VALUE.
func (d *Device) GemmEx(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	return d.gemm(OpGemmEx, h, p, false)
}

// GemmStridedBatchedEx is GemmEx over p.BatchCount strided matrices, as SgemmStridedBatched.
func (d *Device) GemmStridedBatchedEx(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	return d.gemm(OpGemmStridedBatchedEx, h, p, true)
}

func (d *Device) gemm(opName string, h cudadrv.RawBLAS, p *cudadrv.GemmParams, batched bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.blasBegin(opName); err != nil {
		return err
	}
	b, err := d.blasHandleOf(opName, h)
	if err != nil {
		return err
	}
	if p == nil {
		return blasFail(opName, cudadrv.BLASInvalidValue, "nil parameters")
	}
	if why := checkGemm(p, batched); why != "" {
		return blasFail(opName, cudadrv.BLASInvalidValue, "%s", why)
	}
	ex := opName == OpGemmEx || opName == OpGemmStridedBatchedEx
	if t := p.Type; ex && t != cudadrv.BLASFloat32 && t != cudadrv.BLASFloat16 && t != cudadrv.BLASBFloat16 {
		return blasFail(opName, cudadrv.BLASInvalidValue, "matrix type %d is not CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF", int32(t))
	}
	if p.M == 0 || p.N == 0 || (batched && p.BatchCount == 0) {
		return nil
	}
	if b.ctx.destroyed {
		return blasFail(opName, cudadrv.BLASNotInitialized, "the handle's context was destroyed")
	}
	if b.ctx.sticky != nil {
		return blasFail(opName, cudadrv.BLASExecutionFailed, "%v", b.ctx.stickyError(OpLaunchKernel))
	}
	o := op{kind: opGemm, gemm: *p, batched: batched, math: b.math}
	if !ex {
		o.gemm.Type = cudadrv.BLASFloat32 // the Sgemm calls ignore Type
	}
	if !batched {
		o.gemm.BatchCount = 1
	}
	if err := d.asyncOp(OpLaunchKernel, b.ctx, b.stream, &o); err != nil {
		return blasFail(opName, cudadrv.BLASExecutionFailed, "%v", err)
	}
	return nil
}

// checkGemm validates p as cuBLAS does, returning why it is invalid or "".
func checkGemm(p *cudadrv.GemmParams, batched bool) string {
	validOp := func(o cudadrv.BLASOp) bool { return o == cudadrv.OpN || o == cudadrv.OpT || o == 2 }
	rowsA, rowsB := p.M, p.K
	if p.TransA != cudadrv.OpN {
		rowsA = p.K
	}
	if p.TransB != cudadrv.OpN {
		rowsB = p.N
	}
	switch {
	case !validOp(p.TransA) || !validOp(p.TransB):
		return fmt.Sprintf("unknown transpose (%d, %d)", p.TransA, p.TransB)
	case p.M < 0 || p.N < 0 || p.K < 0:
		return fmt.Sprintf("negative dimension (m %d, n %d, k %d)", p.M, p.N, p.K)
	case p.LDA < max(1, rowsA):
		return fmt.Sprintf("lda %d < max(1, %d)", p.LDA, rowsA)
	case p.LDB < max(1, rowsB):
		return fmt.Sprintf("ldb %d < max(1, %d)", p.LDB, rowsB)
	case p.LDC < max(1, p.M):
		return fmt.Sprintf("ldc %d < max(1, %d)", p.LDC, p.M)
	case batched && p.BatchCount < 0:
		return fmt.Sprintf("negative batch count %d", p.BatchCount)
	}
	return ""
}

// tf32 rounds x to TF32 (10 mantissa bits), to nearest even, as the tensor cores consume it.
func tf32(x float32) float32 {
	bits := math.Float32bits(x)
	if bits&0x7f800000 == 0x7f800000 {
		return x
	}
	bits += 0xfff + (bits>>13)&1
	return math.Float32frombits(bits &^ 0x1fff)
}

// gemmMatrix is a GEMM operand in device memory: float32 elements, or the bits of float16 or
// bfloat16 ones.
type gemmMatrix struct {
	f32  []float32
	bits []uint16
	bf16 bool
}

// at returns element i as a float32.
func (m gemmMatrix) at(i int) float32 {
	switch {
	case m.f32 != nil:
		return m.f32[i]
	case m.bf16:
		return cudadrv.BFloat16Value(m.bits[i])
	}
	return cudadrv.Float16Value(m.bits[i])
}

// set stores v rounded to the matrix's type.
func (m gemmMatrix) set(i int, v float32) {
	switch {
	case m.f32 != nil:
		m.f32[i] = v
	case m.bf16:
		m.bits[i] = cudadrv.BFloat16Bits(v)
	default:
		m.bits[i] = cudadrv.Float16Bits(v)
	}
}

// matrix returns the column-major matrix of elements of type t, rows×cols with leading
// dimension ld at base plus batch·stride elements, or an empty one.
func (d *Device) matrix(t cudadrv.BLASDataType, base cudadrv.DevicePtr, batch int, stride int64, rows, cols, ld int) (gemmMatrix, error) {
	if rows == 0 || cols == 0 {
		return gemmMatrix{}, nil
	}
	size := int64(4)
	if t != cudadrv.BLASFloat32 {
		size = 2
	}
	if ld > 0 && cols-1 > (math.MaxInt64/4-rows)/ld {
		return gemmMatrix{}, &AccessError{Addr: base, Len: math.MaxUint64}
	}
	n := ld*(cols-1) + rows
	off := int64(batch) * stride
	if stride != 0 && off/stride != int64(batch) || off > math.MaxInt64/4 || off < math.MinInt64/4 {
		return gemmMatrix{}, &AccessError{Addr: base, Len: uint64(n) * uint64(size)}
	}
	addr := int64(base) + off*size
	if addr < 0 {
		return gemmMatrix{}, &AccessError{Addr: cudadrv.DevicePtr(addr), Len: uint64(n) * uint64(size)}
	}
	if t == cudadrv.BLASFloat32 {
		v, err := cudadrv.ViewOf[float32](d.kernelMemory(), cudadrv.DevicePtr(addr), n)
		return gemmMatrix{f32: v}, err
	}
	v, err := cudadrv.ViewOf[uint16](d.kernelMemory(), cudadrv.DevicePtr(addr), n)
	return gemmMatrix{bits: v, bf16: t == cudadrv.BLASBFloat16}, err
}

// runGemm executes a GEMM op without d.mu held.
func (d *Device) runGemm(o *op) (r cudadrv.Result, detail string) {
	d.sleep(d.opts.KernelDuration)
	p := &o.gemm
	name := OpSgemm
	switch {
	case o.batched && p.Type != cudadrv.BLASFloat32:
		name = OpGemmStridedBatchedEx
	case p.Type != cudadrv.BLASFloat32:
		name = OpGemmEx
	case o.batched:
		name = OpSgemmStridedBatched
	}
	defer func() {
		if v := recover(); v != nil {
			r, detail = cudadrv.ErrorLaunchFailed, fmt.Sprintf("%s: %v", name, v)
		}
	}()
	rowsA, colsA := p.M, p.K
	if p.TransA != cudadrv.OpN {
		rowsA, colsA = p.K, p.M
	}
	rowsB, colsB := p.K, p.N
	if p.TransB != cudadrv.OpN {
		rowsB, colsB = p.N, p.K
	}
	readAB := p.K > 0 && p.Alpha != 0
	round := o.math&^mathDisallowReducing == cudadrv.MathTF32TensorOp && p.Type == cudadrv.BLASFloat32
	for bi := 0; bi < p.BatchCount; bi++ {
		var a, b gemmMatrix
		var err error
		if readAB {
			if a, err = d.matrix(p.Type, p.A, bi, p.StrideA, rowsA, colsA, p.LDA); err != nil {
				return accessFault(name+" A", err)
			}
			if b, err = d.matrix(p.Type, p.B, bi, p.StrideB, rowsB, colsB, p.LDB); err != nil {
				return accessFault(name+" B", err)
			}
		}
		c, err := d.matrix(p.Type, p.C, bi, p.StrideC, p.M, p.N, p.LDC)
		if err != nil {
			return accessFault(name+" C", err)
		}
		for j := 0; j < p.N; j++ {
			for i := 0; i < p.M; i++ {
				var sum float32
				if readAB {
					for l := 0; l < p.K; l++ {
						x, y := gemmAt(a, p.TransA, i, l, p.LDA), gemmAt(b, p.TransB, l, j, p.LDB)
						if round {
							x, y = tf32(x), tf32(y)
						}
						sum += x * y
					}
				}
				ci := i + j*p.LDC
				if p.Beta == 0 {
					c.set(ci, p.Alpha*sum)
				} else {
					c.set(ci, p.Alpha*sum+p.Beta*c.at(ci))
				}
			}
		}
	}
	return cudadrv.Success, ""
}

// gemmAt returns element (r, col) of op(M) for column-major M with leading dimension ld.
func gemmAt(m gemmMatrix, t cudadrv.BLASOp, r, col, ld int) float32 {
	if t == cudadrv.OpN {
		return m.at(r + col*ld)
	}
	return m.at(col + r*ld)
}
