package cuda

import (
	"math"
	"runtime"

	"github.com/cudaep/cudaep/cudadrv"
)

// cublasLib returns the cuBLAS symbol table, loading the library on first use.
func (b *Backend) cublasLib() (*cublasTable, error) {
	if t := b.blas.Load(); t != nil {
		return t, nil
	}
	b.libMu.Lock()
	defer b.libMu.Unlock()
	if t := b.blas.Load(); t != nil {
		return t, nil
	}
	h, _, err := openLibrary(cublasSpec)
	if err != nil {
		return nil, err
	}
	t := new(cublasTable)
	if err := resolveLocked(func() error { return t.resolve(h) }); err != nil {
		return nil, err
	}
	b.blas.Store(t)
	return t, nil
}

// resolveLocked runs a symbol-table resolve on one locked OS thread (dlsym reports through the
// per-thread dlerror).
func resolveLocked(resolve func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return resolve()
}

// BLASCreate creates a cuBLAS handle in the current context, loading cuBLAS on first use.
//
// # Errors
//
// A *cudadrv.LibraryError when cuBLAS cannot be found (naming every place searched), a
// *cudadrv.BLASError when the handle cannot be created.
func (b *Backend) BLASCreate() (cudadrv.RawBLAS, error) {
	t, err := b.cublasLib()
	if err != nil {
		return 0, err
	}
	var h cudadrv.RawBLAS
	if err := cudadrv.NewBLASError("cublasCreate_v2", t.cublasCreate_v2(&h)); err != nil {
		return 0, err
	}
	return h, nil
}

// errBLASNotLoaded is returned by calls that need a handle before any BLASCreate succeeded.
var errBLASNotLoaded = &cudadrv.BLASError{
	Op:     "cublas",
	Status: cudadrv.BLASNotInitialized,
	Detail: "cuBLAS is not loaded: create a handle with BLASCreate first",
}

// loadedBLAS returns the table for calls that take a handle: a handle exists only if the
// library was loaded, so these never load it themselves (and stay allocation-free).
func (b *Backend) loadedBLAS() (*cublasTable, error) {
	if t := b.blas.Load(); t != nil {
		return t, nil
	}
	return nil, errBLASNotLoaded
}

// BLASDestroy destroys a cuBLAS handle.
func (b *Backend) BLASDestroy(h cudadrv.RawBLAS) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	return cudadrv.NewBLASError("cublasDestroy_v2", t.cublasDestroy_v2(h))
}

// BLASSetStream makes h queue its work on s.
func (b *Backend) BLASSetStream(h cudadrv.RawBLAS, s cudadrv.RawStream) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	return cudadrv.NewBLASError("cublasSetStream_v2", t.cublasSetStream_v2(h, s))
}

// BLASSetMathMode sets h's math mode (MathTF32TensorOp allows TF32 tensor cores for SGEMM).
func (b *Backend) BLASSetMathMode(h cudadrv.RawBLAS, mode cudadrv.MathMode) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	return cudadrv.NewBLASError("cublasSetMathMode", t.cublasSetMathMode(h, mode))
}

// errGemmRange is returned when a GemmParams dimension does not fit cuBLAS's 32-bit int.
var errGemmRange = &cudadrv.BLASError{
	Op:     "cublasSgemm",
	Status: cudadrv.BLASInvalidValue,
	Detail: "a dimension, leading dimension or batch count does not fit a 32-bit int",
}

// fitsInt32 reports whether every v fits a C int.
func fitsInt32(vs ...int) bool {
	for _, v := range vs {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return false
		}
	}
	return true
}

// Sgemm queues C = Alpha·op(A)·op(B) + Beta·C (column-major) on h's stream. It is a hot call:
// it allocates nothing when p is on the heap, as GemmParams asks.
//
// cuBLAS reads Alpha and Beta through pointers into *p (host pointer mode) before the call
// returns, so p may be changed once Sgemm has returned.
func (b *Backend) Sgemm(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	if !fitsInt32(p.M, p.N, p.K, p.LDA, p.LDB, p.LDC) {
		return errGemmRange
	}
	// &p.Alpha and &p.Beta point into *p, a heap object (GemmParams's contract): passing them
	// through the wrapper allocates nothing, and it keeps *p alive and in place for the call.
	st := t.cublasSgemm_v2(h, p.TransA, p.TransB, int32(p.M), int32(p.N), int32(p.K),
		&p.Alpha, p.A, int32(p.LDA), p.B, int32(p.LDB),
		&p.Beta, p.C, int32(p.LDC))
	runtime.KeepAlive(p)
	return cudadrv.NewBLASError("cublasSgemm_v2", st)
}

// SgemmStridedBatched queues BatchCount GEMMs whose operands are StrideA, StrideB and StrideC
// elements apart. It is a hot call: it allocates nothing when p is on the heap.
func (b *Backend) SgemmStridedBatched(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	if !fitsInt32(p.M, p.N, p.K, p.LDA, p.LDB, p.LDC, p.BatchCount) {
		return errGemmRange
	}
	// As in Sgemm: the scalars are read through pointers into the heap object *p.
	st := t.cublasSgemmStridedBatched(h, p.TransA, p.TransB, int32(p.M), int32(p.N), int32(p.K),
		&p.Alpha, p.A, int32(p.LDA), p.StrideA, p.B, int32(p.LDB), p.StrideB,
		&p.Beta, p.C, int32(p.LDC), p.StrideC, int32(p.BatchCount))
	runtime.KeepAlive(p)
	return cudadrv.NewBLASError("cublasSgemmStridedBatched", st)
}

// cuBLAS constants of the GemmEx calls.
const (
	cublasCompute32F  = 68 // CUBLAS_COMPUTE_32F: float32 accumulation, float alpha and beta
	cublasGemmDefault = -1 // CUBLAS_GEMM_DEFAULT: the library's heuristic (tensor cores for 16-bit types)
)

// gemmExType refuses a matrix type other than the three GemmEx is used with here.
func gemmExType(t cudadrv.BLASDataType) error {
	switch t {
	case cudadrv.BLASFloat32, cudadrv.BLASFloat16, cudadrv.BLASBFloat16:
		return nil
	}
	return &cudadrv.BLASError{Op: "cublasGemmEx", Status: cudadrv.BLASInvalidValue,
		Detail: "matrix type must be CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF"}
}

// GemmEx queues C = Alpha·op(A)·op(B) + Beta·C (column-major) over matrices of p.Type with
// float32 accumulation. It is a hot call: it allocates nothing when p is on the heap.
func (b *Backend) GemmEx(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	if !fitsInt32(p.M, p.N, p.K, p.LDA, p.LDB, p.LDC) {
		return errGemmRange
	}
	if err := gemmExType(p.Type); err != nil {
		return err
	}
	// As in Sgemm: the float32 scalars are read through pointers into the heap object *p.
	ty := int32(p.Type)
	st := t.cublasGemmEx(h, p.TransA, p.TransB, int32(p.M), int32(p.N), int32(p.K),
		&p.Alpha, p.A, ty, int32(p.LDA), p.B, ty, int32(p.LDB),
		&p.Beta, p.C, ty, int32(p.LDC), cublasCompute32F, cublasGemmDefault)
	runtime.KeepAlive(p)
	return cudadrv.NewBLASError("cublasGemmEx", st)
}

// GemmStridedBatchedEx is GemmEx over BatchCount matrices StrideA, StrideB and StrideC
// elements apart. It is a hot call: it allocates nothing when p is on the heap.
func (b *Backend) GemmStridedBatchedEx(h cudadrv.RawBLAS, p *cudadrv.GemmParams) error {
	t, err := b.loadedBLAS()
	if err != nil {
		return err
	}
	if !fitsInt32(p.M, p.N, p.K, p.LDA, p.LDB, p.LDC, p.BatchCount) {
		return errGemmRange
	}
	if err := gemmExType(p.Type); err != nil {
		return err
	}
	ty := int32(p.Type)
	st := t.cublasGemmStridedBatchedEx(h, p.TransA, p.TransB, int32(p.M), int32(p.N), int32(p.K),
		&p.Alpha, p.A, ty, int32(p.LDA), p.StrideA, p.B, ty, int32(p.LDB), p.StrideB,
		&p.Beta, p.C, ty, int32(p.LDC), p.StrideC, int32(p.BatchCount), cublasCompute32F, cublasGemmDefault)
	runtime.KeepAlive(p)
	return cudadrv.NewBLASError("cublasGemmStridedBatchedEx", st)
}
