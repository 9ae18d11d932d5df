package paging

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
)

// DefaultRetentionCap is the staging pool's default retention cap: 512 MiB.
const DefaultRetentionCap uint64 = 512 << 20

// stagingGranule rounds staging sizes so that buffers are reusable across slightly different
// layer sizes.
const stagingGranule = 64 << 10

// StagingStats describe a StagingPool.
type StagingStats struct {
	RetentionCap  uint64 // the cap on retained bytes
	RetainedBytes uint64 // bytes of pinned buffers the pool keeps (in use or free)
	InUseBytes    uint64 // bytes handed out and not yet released, retained or transient
	Allocations   uint64 // cuMemHostAlloc calls
	Reuses        uint64 // acquisitions served from a retained buffer
	Frees         uint64 // buffers returned to the driver
	Registrations uint64 // host ranges registered for zero-copy transfers
	Unregistered  uint64 // of those, unregistered again
}

// StagingPool is a provider's pinned host memory for H2D transfers: page-locked staging
// buffers, kept and reused across pipelines because allocating them is slow (about 0.45 s per
// 512 MiB), and the registry of file extents registered for zero-copy transfers.
//
// Build one per provider (per context) and keep it. It retains at most its retention cap of
// pinned bytes; a buffer acquired beyond the cap is transient and returned to the driver when
// released. A StagingPool is safe for concurrent use.
type StagingPool struct {
	ctx *cudadrv.Context
	cap uint64

	mu       sync.Mutex
	free     []*cudadrv.HostBuffer // retained, not in use
	retained uint64
	inUse    uint64
	out      int // buffers handed out
	closed   bool
	stats    StagingStats

	regs registry
}

// NewStagingPool returns an empty pool for ctx that retains at most retentionCap bytes of
// pinned memory (0 means DefaultRetentionCap). Nothing is allocated until a pipeline needs it.
func NewStagingPool(ctx *cudadrv.Context, retentionCap uint64) (*StagingPool, error) {
	if ctx == nil {
		return nil, errors.New("paging: staging pool needs a context")
	}
	if retentionCap == 0 {
		retentionCap = DefaultRetentionCap
	}
	p := &StagingPool{ctx: ctx, cap: retentionCap}
	p.regs.pool = p
	return p, nil
}

// Context returns the pool's context.
func (p *StagingPool) Context() *cudadrv.Context { return p.ctx }

// RetentionCap is the most pinned bytes the pool keeps.
func (p *StagingPool) RetentionCap() uint64 { return p.cap }

func roundStaging(size uint64) (uint64, bool) {
	r := alignUp(size, stagingGranule)
	return r, r >= size
}

// CanRetainConcurrent reports whether n staging buffers of size bytes each can be retained at
// once under the cap: the capacity gate a pipeline passes before reserving anything.
func (p *StagingPool) CanRetainConcurrent(size uint64, n int) bool {
	r, ok := roundStaging(size)
	if !ok || n <= 0 {
		return n <= 0
	}
	return r <= p.cap/uint64(n)
}

// StagingBuffer is pinned host memory acquired from a StagingPool. Release it exactly once,
// after every copy that reads it has completed.
type StagingBuffer struct {
	pool     *StagingPool
	host     *cudadrv.HostBuffer
	size     uint64
	retained bool
	released bool
}

// Bytes returns the buffer's memory, exactly the size acquired.
func (b *StagingBuffer) Bytes() []byte { return b.host.Bytes()[:b.size:b.size] }

// Acquire returns a pinned buffer of at least size bytes: a retained free one when one fits,
// else a new allocation (retained when the cap allows, transient otherwise; free retained
// buffers that are too small are returned to the driver first to make room). It calls the
// driver on the calling thread, bound to the pool's context.
func (p *StagingPool) Acquire(size uint64) (*StagingBuffer, error) {
	if size == 0 {
		return nil, errors.New("paging: staging buffer of zero bytes")
	}
	rounded, ok := roundStaging(size)
	if !ok {
		return nil, fmt.Errorf("paging: staging buffer of %d bytes is too large", size)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	best := -1
	for i, h := range p.free {
		if n := uint64(len(h.Bytes())); n >= rounded && (best < 0 || n < uint64(len(p.free[best].Bytes()))) {
			best = i
		}
	}
	if best >= 0 {
		h := p.free[best]
		p.free = append(p.free[:best], p.free[best+1:]...)
		p.stats.Reuses++
		return p.handOutLocked(h, size, true), nil
	}
	b, err := bind(p.ctx)
	if err != nil {
		return nil, err
	}
	defer b.done()
	// Make room: the free buffers are all too small for this request.
	for len(p.free) > 0 && p.retained+rounded > p.cap {
		h := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.retained -= uint64(len(h.Bytes()))
		if err := h.Free(); err != nil {
			return nil, err
		}
		p.stats.Frees++
	}
	h, err := p.ctx.AllocHost(rounded)
	if err != nil {
		return nil, fmt.Errorf("paging: allocate %d bytes of pinned staging: %w", rounded, err)
	}
	p.stats.Allocations++
	retain := p.retained+rounded <= p.cap
	if retain {
		p.retained += rounded
	}
	return p.handOutLocked(h, size, retain), nil
}

func (p *StagingPool) handOutLocked(h *cudadrv.HostBuffer, size uint64, retained bool) *StagingBuffer {
	p.out++
	p.inUse += uint64(len(h.Bytes()))
	return &StagingBuffer{pool: p, host: h, size: size, retained: retained}
}

// Release gives the buffer back: a retained one returns to the pool's free list, a transient
// one (or any, once the pool is closed) to the driver. The caller guarantees that no queued
// copy still reads it. A second Release returns ErrReleased.
func (b *StagingBuffer) Release() error {
	p := b.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.released {
		return ErrReleased
	}
	b.released = true
	p.out--
	n := uint64(len(b.host.Bytes()))
	p.inUse -= n
	if b.retained && !p.closed {
		p.free = append(p.free, b.host)
		return nil
	}
	if b.retained {
		p.retained -= n
	}
	bd, err := bind(p.ctx)
	if err != nil {
		return err
	}
	defer bd.done()
	if err := b.host.Free(); err != nil {
		return err
	}
	p.stats.Frees++
	return nil
}

// Stats returns a snapshot of the pool's counters.
func (p *StagingPool) Stats() StagingStats {
	p.mu.Lock()
	s := p.stats
	s.RetentionCap, s.RetainedBytes, s.InUseBytes = p.cap, p.retained, p.inUse
	p.mu.Unlock()
	s.Registrations, s.Unregistered = p.regs.counts()
	return s
}

// Close returns every free buffer to the driver. Buffers still acquired are freed when
// released; Close reports them, and any live zero-copy registration, as an error (their
// pipelines were not closed first). A second Close returns ErrClosed.
func (p *StagingPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.closed = true
	var errs []error
	if len(p.free) > 0 {
		b, err := bind(p.ctx)
		if err != nil {
			return err
		}
		for _, h := range p.free {
			p.retained -= uint64(len(h.Bytes()))
			if err := h.Free(); err != nil {
				errs = append(errs, err)
				continue
			}
			p.stats.Frees++
		}
		b.done()
		p.free = nil
	}
	if p.out > 0 {
		errs = append(errs, fmt.Errorf("paging: staging pool closed with %d buffer(s) still acquired", p.out))
	}
	if n := p.regs.live(); n > 0 {
		errs = append(errs, fmt.Errorf("paging: staging pool closed with %d zero-copy registration(s) live", n))
	}
	return errors.Join(errs...)
}

// registry tracks the host ranges registered with the driver for zero-copy transfers, by
// address, so that fills whose page-aligned extents touch (adjacent layers sharing a page,
// two pipelines over one file) share registrations instead of failing with
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED. Entries are reference-counted and unregistered
// when the last copy that reads them has completed.
type registry struct {
	pool    *StagingPool
	mu      sync.Mutex
	entries []*regEntry // sorted by lo, non-overlapping
	made    uint64
	undone  uint64
}

// regEntry is one registered range [lo, hi) of host addresses.
type regEntry struct {
	lo, hi uintptr
	reg    *cudadrv.Registration
	refs   int
}

func (r *registry) counts() (made, undone uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.made, r.undone
}

func (r *registry) live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// acquire returns the registrations covering the page-aligned host range mem (whose address
// range is [lo, lo+len(mem))), in address order, each with one more reference; the parts no
// registration covers yet are registered read-only. On a registration error nothing stays
// referenced (ranges registered by this call are unregistered again) and the error is
// returned. The caller has the context bound.
func (r *registry) acquire(ctx *cudadrv.Context, mem []byte, lo uintptr) ([]*regEntry, error) {
	hi := lo + uintptr(len(mem))
	r.mu.Lock()
	defer r.mu.Unlock()
	var got, fresh []*regEntry
	undo := func() {
		for _, e := range got {
			e.refs--
		}
		for _, e := range fresh {
			if e.refs == 0 {
				r.removeLocked(e)
				if e.reg.Unregister() == nil {
					r.undone++
				}
			}
		}
	}
	pos := lo
	i := sort.Search(len(r.entries), func(i int) bool { return r.entries[i].hi > lo })
	for pos < hi {
		var next *regEntry
		if i < len(r.entries) && r.entries[i].lo < hi {
			next = r.entries[i]
		}
		if next != nil && next.lo <= pos {
			next.refs++
			got = append(got, next)
			pos = next.hi
			i++
			continue
		}
		gapEnd := hi
		if next != nil {
			gapEnd = next.lo
		}
		part := mem[pos-lo : gapEnd-lo : gapEnd-lo]
		reg, err := ctx.RegisterHost(part, cudadrv.HostRegisterReadOnly)
		if err != nil {
			undo()
			return nil, err
		}
		r.made++
		e := &regEntry{lo: pos, hi: gapEnd, reg: reg, refs: 1}
		r.entries = append(r.entries, nil)
		copy(r.entries[i+1:], r.entries[i:])
		r.entries[i] = e
		i++
		got = append(got, e)
		fresh = append(fresh, e)
		pos = gapEnd
	}
	return got, nil
}

func (r *registry) removeLocked(e *regEntry) {
	for i, x := range r.entries {
		if x == e {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return
		}
	}
}

// release drops one reference of each entry and unregisters those no longer referenced. The
// caller has the context bound and knows every copy reading them has completed.
func (r *registry) release(entries []*regEntry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, e := range entries {
		e.refs--
		if e.refs > 0 {
			continue
		}
		r.removeLocked(e)
		if err := e.reg.Unregister(); err != nil {
			errs = append(errs, err)
			continue
		}
		r.undone++
	}
	return errors.Join(errs...)
}
