package ep

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/graphs"
)

// ErrReleased is returned when a buffer is used after its owner released it.
var ErrReleased = errors.New("ep: buffer already released")

// DefaultAlignment is the alignment Alloc gives when asked for 0: the driver's own 256 bytes.
const DefaultAlignment = 256

// Buffer is device memory owned by a provider. Its owner releases it once with Release. A
// captured graph that embeds its address holds a reference of its own (Retain), so the memory
// is freed only when the owner and every such graph are done with it: no queued replay can
// read memory that was reused. Safe for concurrent use.
type Buffer struct {
	p        *Provider
	shared   *graphs.SharedBuffer
	ptr      cudadrv.DevicePtr
	size     uint64
	released atomic.Bool
}

// Alloc allocates size bytes of device memory aligned to alignment bytes (a power of two; 0
// means DefaultAlignment).
//
// # Errors
//
// A zero size, an alignment that is not a power of two, a size that overflows once padded
// for alignment or exceeds the device's memory is an error naming the value (checked before
// anything else, so it is the answer during a capture too); device exhaustion wraps the driver's
// CUDA_ERROR_OUT_OF_MEMORY.
func (p *Provider) Alloc(size, alignment uint64) (*Buffer, error) {
	if size == 0 {
		return nil, fmt.Errorf("%w: alloc: size is 0", ErrInvalidArgument)
	}
	if alignment == 0 {
		alignment = DefaultAlignment
	}
	if alignment&(alignment-1) != 0 {
		return nil, fmt.Errorf("%w: alloc: alignment %d is not a power of two", ErrInvalidArgument, alignment)
	}
	padded := size
	if alignment > DefaultAlignment {
		var carry uint64
		padded, carry = bits.Add64(size, alignment-DefaultAlignment, 0)
		if carry != 0 {
			return nil, fmt.Errorf("%w: alloc: size %d with alignment %d overflows", ErrInvalidArgument, size, alignment)
		}
	}
	if total := p.dev.TotalMemory(); total > 0 && padded > total {
		return nil, fmt.Errorf("%w: alloc: size %d is larger than the device's %d bytes of memory", ErrInvalidArgument, size, total)
	}
	e, err := p.enter("allocate device memory", accessDriver)
	if err != nil {
		return nil, err
	}
	defer e.leave()
	mem, err := p.ctx.Alloc(padded)
	if err != nil {
		return nil, fmt.Errorf("ep: alloc %d bytes: %w", size, err)
	}
	ptr := (mem.Ptr() + cudadrv.DevicePtr(alignment-1)) &^ cudadrv.DevicePtr(alignment-1)
	return &Buffer{p: p, shared: graphs.NewSharedBuffer(mem), ptr: ptr, size: size}, nil
}

// Ptr is the buffer's (aligned) device address.
func (b *Buffer) Ptr() DevicePtr { return b.ptr }

// Size is the size the buffer was allocated with.
func (b *Buffer) Size() uint64 { return b.size }

// Release gives up the owner's reference. The memory is freed now or, when captured graphs
// still embed it, when the last of them is destroyed; during a capture on the provider, or on
// an OS thread that captures for another provider, the free waits until that capture ends
// (freeing would invalidate it). The buffer is unusable from
// the moment Release is called. After the provider's Close, Release only marks the buffer
// released (Close freed the memory with the context). A second Release returns ErrReleased.
func (b *Buffer) Release() error {
	if !b.released.CompareAndSwap(false, true) {
		return ErrReleased
	}
	return b.p.releaseLater("release a buffer", func() error {
		b.shared.Release()
		return b.shared.Err()
	})
}

// retain returns a reference for a capture that embeds the buffer's address.
func (b *Buffer) retain() (graphs.Resource, error) {
	if b.released.Load() {
		return nil, fmt.Errorf("%w: a released buffer cannot be retained by a capture", ErrReleased)
	}
	return b.shared.Retain(), nil
}

// check refuses a released buffer (ErrReleased), and a nil buffer or a range [off, off+n)
// outside it (ErrInvalidArgument).
func (b *Buffer) check(off, n uint64) error {
	if b == nil {
		return fmt.Errorf("%w: nil buffer", ErrInvalidArgument)
	}
	if b.released.Load() {
		return ErrReleased
	}
	end, carry := bits.Add64(off, n, 0)
	if carry != 0 || end > b.size {
		return fmt.Errorf("%w: range [%d, %d+%d) is outside the %d-byte buffer", ErrInvalidArgument, off, off, n, b.size)
	}
	return nil
}

// Stats are the provider's device-memory counters, from its context: every allocation the
// provider made (buffers, paging slots, kernel workspaces) and every free.
type Stats struct {
	Allocs, Frees uint64
	LiveBytes     uint64
}

// Stats returns the provider's device-memory counters. A buffer that a captured graph still
// retains counts as live until the graph is destroyed.
func (p *Provider) Stats() Stats {
	c := p.ctx.Counters()
	return Stats{Allocs: c.DeviceAllocs, Frees: c.DeviceFrees, LiveBytes: c.DeviceLiveBytes}
}
