package ep

import (
	"fmt"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// PinnedBuffer is page-locked host memory of a provider's context: the host reads and writes
// it like any memory, and copies between it and device buffers run at the link's full rate
// (and may overlap other work). Hosts use it for tensors that cross the link every step.
// Allocation is slow (cuMemHostAlloc: milliseconds per MiB range): keep and reuse buffers.
type PinnedBuffer struct {
	p        *Provider
	hb       *cudadrv.HostBuffer
	released atomic.Bool
}

// AllocPinned allocates size bytes of pinned host memory.
//
// # Errors
//
// A zero size is an argument error; during a capture on the provider it is refused with
// ErrCaptureLive (the allocation synchronizes); a closed provider; the driver's errors
// (CUDA_ERROR_OUT_OF_MEMORY when the host cannot pin that much).
func (p *Provider) AllocPinned(size uint64) (*PinnedBuffer, error) {
	if size == 0 {
		return nil, fmt.Errorf("%w: alloc pinned: size is 0", ErrInvalidArgument)
	}
	e, err := p.enter("allocate pinned host memory", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	hb, err := p.ctx.AllocHost(size)
	if err != nil {
		return nil, fmt.Errorf("ep: alloc pinned %d bytes: %w", size, err)
	}
	return &PinnedBuffer{p: p, hb: hb}, nil
}

// Bytes returns the buffer's memory (nil once released).
func (b *PinnedBuffer) Bytes() []byte {
	if b.released.Load() {
		return nil
	}
	return b.hb.Bytes()
}

// Release frees the memory (deferred until a live capture on the provider ends). Once the
// provider is closed the memory went with its context and Release does nothing. A second
// Release returns ErrReleased.
func (b *PinnedBuffer) Release() error {
	if !b.released.CompareAndSwap(false, true) {
		return ErrReleased
	}
	if b.p.closed.Load() {
		return nil
	}
	return b.p.releaseLater("free pinned host memory", b.hb.Free)
}
