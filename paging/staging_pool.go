package paging

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// DefaultRetentionCap is the staging pool's default retention cap: 512 MiB.
const DefaultRetentionCap uint64 = 512 << 20

// stagingGranule rounds staging sizes so that buffers are reusable across slightly different
// layer sizes, where the pool's cap leaves room for it (see StagingPool.stagingSize).
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
	// Registered describes the file extents kept registered with the driver.
	Registered RegistrationStats
}

// StagingPool is a provider's pinned host memory for H2D transfers: page-locked staging
// buffers, kept and reused across pipelines because allocating them is slow (about 0.45 s per
// 512 MiB), and the registry of file extents registered for zero-copy transfers.
//
// Build one per provider (per context) and keep it. It retains at most its retention cap of
// pinned bytes; a buffer acquired beyond the cap is transient and returned to the driver when
// released. A StagingPool is safe for concurrent use.
//
// # Registrations
//
// File extents registered for zero-copy transfers stay registered after their copies complete,
// so that the next fill of the same bytes (the next prefill) copies at once: registering ran at
// 20–34 GB/s on the H200, slower than its 55 GB/s link. They stay until their file is closed
// (MmapSource.Close and CloseAll unregister them before unmapping), the pool is closed, or a
// new registration needs their bytes under the register cap (StagingPoolConfig.RegisterCap):
// then the idle registration used longest ago is unregistered first, so a file larger than
// the cap pages through a sliding window. RegisterFile registers a file ahead of its first
// fill.
type StagingPool struct {
	ctx   *cudadrv.Context
	cap   uint64
	chunk uint64 // RegisterFile's range size

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
// pinned memory (0 means DefaultRetentionCap), with the default register cap. Nothing is
// allocated until a pipeline needs it.
func NewStagingPool(ctx *cudadrv.Context, retentionCap uint64) (*StagingPool, error) {
	return NewStagingPoolWith(ctx, StagingPoolConfig{RetentionCap: retentionCap})
}

// StagingPoolConfig configures a StagingPool; the zero value of each field means its default.
type StagingPoolConfig struct {
	// RetentionCap is the most bytes of pinned staging memory the pool keeps (0:
	// DefaultRetentionCap). It is also the capacity gate of the pipelines drawing on the pool.
	RetentionCap uint64
	// RegisterCap is the most bytes of external-data files the pool keeps registered with the
	// driver at once (0: DefaultRegisterCap(), a quarter of physical memory).
	RegisterCap uint64
	// RegisterChunkBytes is the size of the ranges RegisterFile registers, aligned to it in the
	// file (0: DefaultRegisterChunkBytes); it is rounded up to the page size.
	RegisterChunkBytes uint64
}

// NewStagingPoolWith returns an empty pool for ctx configured by cfg. Nothing is allocated or
// registered until a pipeline or RegisterFile needs it.
func NewStagingPoolWith(ctx *cudadrv.Context, cfg StagingPoolConfig) (*StagingPool, error) {
	if ctx == nil {
		return nil, errors.New("paging: staging pool needs a context")
	}
	if cfg.RetentionCap == 0 {
		cfg.RetentionCap = DefaultRetentionCap
	}
	if cfg.RegisterCap == 0 {
		cfg.RegisterCap = DefaultRegisterCap()
	}
	if cfg.RegisterChunkBytes == 0 {
		cfg.RegisterChunkBytes = DefaultRegisterChunkBytes
	}
	if cfg.RegisterChunkBytes > 1<<40 {
		return nil, fmt.Errorf("paging: register chunk of %d bytes is too large (at most 1 TiB)", cfg.RegisterChunkBytes)
	}
	p := &StagingPool{ctx: ctx, cap: cfg.RetentionCap, chunk: alignUp(cfg.RegisterChunkBytes, pageSize)}
	p.regs.ctx, p.regs.cap = ctx, cfg.RegisterCap
	return p, nil
}

// RegisterCap is the most bytes of external-data files the pool keeps registered at once.
func (p *StagingPool) RegisterCap() uint64 { return p.regs.cap }

// RegistrationStats returns a snapshot of the registrations' counters.
func (p *StagingPool) RegistrationStats() RegistrationStats { return p.regs.stats() }

// Context returns the pool's context.
func (p *StagingPool) Context() *cudadrv.Context { return p.ctx }

// RetentionCap is the most pinned bytes the pool keeps.
func (p *StagingPool) RetentionCap() uint64 { return p.cap }

// stagingSize returns the pinned bytes a staging buffer of size bytes takes, and false when
// size is too large to round. Pinned memory comes in whole host pages, so size is rounded up
// to pages; it is rounded further to stagingGranule (for reuse across slightly different layer
// sizes) only when SlotCount buffers of that size still fit the cap, so the granule never
// makes the pool refuse a pipeline whose page-rounded buffers fit.
func (p *StagingPool) stagingSize(size uint64) (uint64, bool) {
	paged := alignUp(size, pageSize)
	if paged < size {
		return 0, false
	}
	if g := alignUp(paged, stagingGranule); g >= paged && g <= p.cap/SlotCount {
		return g, true
	}
	return paged, true
}

// CanRetainConcurrent reports whether n staging buffers of size bytes each can be retained at
// once under the cap: the capacity gate a pipeline passes before reserving anything. Each
// buffer counts its pinned size, size rounded up to whole host pages, so for a pipeline's two
// buffers the gate is 2 × (size in whole pages) ≤ the cap.
func (p *StagingPool) CanRetainConcurrent(size uint64, n int) bool {
	if n <= 0 {
		return true
	}
	r, ok := p.stagingSize(size)
	return ok && r <= p.cap/uint64(n)
}

// capacityError is the capacity gate's decline of slots of size bytes. (A declined size is
// never granule-rounded: its page-rounded buffers already exceed the cap.)
func (p *StagingPool) capacityError(size uint64) *PoolCapacityError {
	r, ok := p.stagingSize(size)
	if !ok {
		r = 0
	}
	return &PoolCapacityError{LayerBytes: size, RetentionCap: p.cap, StagingBytes: r, PageBytes: pageSize}
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
	rounded, ok := p.stagingSize(size)
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
	s.Registered = p.regs.stats()
	s.Registrations, s.Unregistered = s.Registered.Made, s.Registered.Undone
	return s
}

// Close returns every free buffer to the driver and unregisters every registration no copy
// reads. Buffers still acquired are freed when released, registrations still read when their
// copies complete; Close reports them as an error (their pipelines were not closed first). A
// second Close returns ErrClosed.
func (p *StagingPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.closed = true
	var errs []error
	b, err := bind(p.ctx)
	if err != nil {
		return err
	}
	defer b.done()
	busy, err := p.regs.close()
	if err != nil {
		errs = append(errs, err)
	}
	if len(p.free) > 0 {
		for _, h := range p.free {
			p.retained -= uint64(len(h.Bytes()))
			if err := h.Free(); err != nil {
				errs = append(errs, err)
				continue
			}
			p.stats.Frees++
		}
		p.free = nil
	}
	if p.out > 0 {
		errs = append(errs, fmt.Errorf("paging: staging pool closed with %d buffer(s) still acquired", p.out))
	}
	if busy > 0 {
		errs = append(errs, fmt.Errorf("paging: staging pool closed with %d zero-copy registration(s) still read by copies", busy))
	}
	return errors.Join(errs...)
}

// RegisterFile registers the mapping of the file opened as id in src with the driver, in
// ranges of the pool's register chunk aligned in the file, front to back, so that the fills
// that read it copy zero-copy without registering anything: the set-up happens when the file
// is opened, not inside the first layer. It stops at the register cap without evicting
// anything (the report says so); fills register the rest as they need it. Ranges already
// registered are kept. The registrations last until the file is closed in src (which
// unregisters them before unmapping), the pool is closed, or the cap evicts them.
//
// It calls the driver on the calling goroutine's OS thread, bound to the pool's context, and
// holds the file open meanwhile (src.Close refuses it with ErrFileBusy).
//
// # Errors
//
// ErrClosed; a *RegionError for an id that is not open; the driver's error when a
// registration fails (the report counts what was registered before it). Reaching the cap is
// not an error.
func (p *StagingPool) RegisterFile(src *MmapSource, id MappingID) (rep RegisterReport, err error) {
	start := time.Now()
	rep.Mapping = id
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return rep, ErrClosed
	}
	pin, mem, err := src.pinWhole(id)
	if err != nil {
		return rep, err
	}
	defer pin.release()
	if len(mem) == 0 {
		return rep, nil
	}
	if err := src.holdRegistrations(id, &p.regs); err != nil {
		return rep, err
	}
	b, err := bind(p.ctx)
	if err != nil {
		return rep, err
	}
	defer b.done()
	before := p.regs.stats().Made
	defer func() {
		rep.Made = p.regs.stats().Made - before
		rep.Took = time.Since(start)
	}()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	for lo := uint64(0); lo < uint64(len(mem)); lo += p.chunk {
		hi := min(lo+p.chunk, uint64(len(mem)))
		entries, err := p.regs.acquire(mem[lo:hi:hi], base+uintptr(lo), false, false)
		var capErr *RegisterCapError
		switch {
		case errors.As(err, &capErr):
			rep.Stopped = capErr.Error()
			return rep, nil
		case err != nil:
			rep.Stopped = err.Error()
			return rep, err
		}
		rep.Bytes += hi - lo
		if err := p.regs.release(entries); err != nil {
			return rep, err
		}
	}
	return rep, nil
}
