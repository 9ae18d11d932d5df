package cudadrv

import (
	"errors"
	"sync/atomic"
)

// BLAS is a cuBLAS handle bound to one stream. It is not safe for concurrent use: keep one per
// stream (and per goroutine that uses it), as cuBLAS requires.
type BLAS struct {
	ctx       *Context
	raw       RawBLAS
	destroyed atomic.Bool
}

var errBLASDestroyed = errors.New("cudadrv: cuBLAS handle already destroyed")

// NewBLAS creates a cuBLAS handle whose work runs on s. The first call loads the cuBLAS
// library; a missing library is a *LibraryError naming every place searched.
func (s *Stream) NewBLAS() (*BLAS, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	raw, err := s.ctx.b.BLASCreate()
	if err != nil {
		return nil, s.ctx.note(err)
	}
	if err := s.ctx.b.BLASSetStream(raw, s.raw); err != nil {
		_ = s.ctx.b.BLASDestroy(raw)
		return nil, err
	}
	s.ctx.count.blasCreated.Add(1)
	return &BLAS{ctx: s.ctx, raw: raw}, nil
}

func (h *BLAS) live() error {
	if h.destroyed.Load() {
		return errBLASDestroyed
	}
	return nil
}

// SetMathMode selects the math mode, e.g. MathTF32TensorOp to let float32 GEMMs use TF32
// tensor cores (faster, about 1e-3 relative error) or MathDefault for full float32.
func (h *BLAS) SetMathMode(m MathMode) error {
	if err := h.live(); err != nil {
		return err
	}
	return h.ctx.b.BLASSetMathMode(h.raw, m)
}

// Sgemm queues one float32 GEMM described by p (see GemmParams). It allocates nothing when p
// lives on the heap.
func (h *BLAS) Sgemm(p *GemmParams) error {
	if err := h.live(); err != nil {
		return err
	}
	return h.ctx.note(h.ctx.b.Sgemm(h.raw, p))
}

// SgemmStridedBatched queues p.BatchCount float32 GEMMs over strided operands.
func (h *BLAS) SgemmStridedBatched(p *GemmParams) error {
	if err := h.live(); err != nil {
		return err
	}
	return h.ctx.note(h.ctx.b.SgemmStridedBatched(h.raw, p))
}

// GemmEx queues one GEMM over matrices of p.Type (float32, float16 or bfloat16), accumulating
// in float32; float16 and bfloat16 products run on tensor cores. It allocates nothing when p
// lives on the heap.
func (h *BLAS) GemmEx(p *GemmParams) error {
	if err := h.live(); err != nil {
		return err
	}
	return h.ctx.note(h.ctx.b.GemmEx(h.raw, p))
}

// GemmStridedBatchedEx queues p.BatchCount GEMMs over strided matrices of p.Type, as GemmEx.
func (h *BLAS) GemmStridedBatchedEx(p *GemmParams) error {
	if err := h.live(); err != nil {
		return err
	}
	return h.ctx.note(h.ctx.b.GemmStridedBatchedEx(h.raw, p))
}

// Destroy destroys the handle; a second call returns an error.
func (h *BLAS) Destroy() error {
	if !h.destroyed.CompareAndSwap(false, true) {
		return errBLASDestroyed
	}
	if err := h.ctx.b.BLASDestroy(h.raw); err != nil {
		return err
	}
	h.ctx.count.blasDestroyed.Add(1)
	return nil
}
