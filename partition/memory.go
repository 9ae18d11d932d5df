package partition

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/ep"
)

// Memory is the index of the device memory a host hands to partition runs: the allocations
// its allocators made (tensors that stay on the device between partitions, outputs, bound
// inputs), sorted by address, so that a run finds the buffer holding any device address it is
// given (a host may place several tensors in one allocation and hand out addresses inside it).
// Freed allocations are kept for reuse by device and size (FreeList): a host such as ONNX
// Runtime allocates a run's tensors anew every run. The zero value is empty and ready; it is
// safe for concurrent use.
type Memory struct {
	mu sync.Mutex
	// allocs are the allocations the host holds, sorted by Base; changed only by Add, Free and
	// Reset, which keep each one's registration in step.
	allocs []Allocation
	// added counts the allocations added (read without mu): a run decision that found no
	// allocation for a tensor holds while none has been added since (see recentRun).
	added atomic.Uint64
	// cached holds freed allocations for reuse.
	cached FreeList[Allocation]
}

// Allocation is one device allocation of a host: [Base, Base+Size) of device Ordinal, in Buf.
type Allocation struct {
	Base, Size uint64
	Ordinal    int
	Buf        *ep.Buffer
	reg        *registration // made with the allocation, kept while it is cached for reuse
}

// NewAllocation describes buf, of size bytes on device ordinal, for Memory.Add.
func NewAllocation(buf *ep.Buffer, size uint64, ordinal int) Allocation {
	return Allocation{Base: uint64(buf.Ptr()), Size: size, Ordinal: ordinal, Buf: buf, reg: new(registration)}
}

// registration says whether an allocation is in a Memory's index now. An allocation keeps its
// registration, base, size and ordinal for life (freed ones kept for reuse come back with
// them), so a lookup of an address that found the allocation finds it again while its
// registration is live: the run decisions partitions remember (recentRun) hold the
// registrations their lookups found, and hold while all of them are live.
type registration struct {
	live atomic.Bool // set while the allocation is in the index; written under Memory.mu
}

// set marks the allocation in the index or out of it (nil: an allocation without a
// registration, which no decision is kept for).
func (r *registration) set(live bool) {
	if r != nil {
		r.live.Store(live)
	}
}

// Add puts an allocation the host now holds into the index.
func (m *Memory) Add(a Allocation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.allocs), func(i int) bool { return m.allocs[i].Base > a.Base })
	m.allocs = append(m.allocs, Allocation{})
	copy(m.allocs[i+1:], m.allocs[i:])
	m.allocs[i] = a
	a.reg.set(true)
	m.added.Add(1)
}

// remove takes the allocation based at base out of the index; false when there is none.
// Called with m.mu held.
func (m *Memory) remove(base uint64) (Allocation, bool) {
	i := sort.Search(len(m.allocs), func(i int) bool { return m.allocs[i].Base >= base })
	if i == len(m.allocs) || m.allocs[i].Base != base {
		return Allocation{}, false
	}
	a := m.allocs[i]
	m.allocs = append(m.allocs[:i], m.allocs[i+1:]...)
	a.reg.set(false)
	return a, true
}

// Free takes the allocation based at base out of the index and keeps it for Reuse, or releases
// its buffer when the free list is full; false when base is no allocation's.
func (m *Memory) Free(base uint64) bool {
	m.mu.Lock()
	a, ok := m.remove(base)
	keep := ok && m.cached.Keep(SizeKey{Ordinal: a.Ordinal, Size: a.Size}, a)
	m.mu.Unlock()
	if ok && !keep && a.Buf != nil {
		_ = a.Buf.Release()
	}
	return ok
}

// Reuse takes a freed allocation of exactly n bytes on ordinal, if one is kept; the caller Adds
// it again.
func (m *Memory) Reuse(ordinal int, n uint64) (Allocation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cached.Take(SizeKey{Ordinal: ordinal, Size: n})
}

// Find returns the allocation holding [addr, addr+n) and the offset of addr in it.
func (m *Memory) Find(addr, n uint64) (Allocation, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.allocs), func(i int) bool { return m.allocs[i].Base > addr }) - 1
	if i < 0 || addr-m.allocs[i].Base > m.allocs[i].Size || addr-m.allocs[i].Base+n > m.allocs[i].Size {
		return Allocation{}, 0, fmt.Errorf("%w: device address %#x (+%d bytes) is not in device memory the host allocated through cudaep",
			ep.ErrInvalidArgument, addr, n)
	}
	return m.allocs[i], addr - m.allocs[i].Base, nil
}

// CachedBytes is the size of the freed allocations kept for reuse.
func (m *Memory) CachedBytes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cached.Bytes()
}

// Reset empties the index (the providers that own the memory are closing): the allocations
// still held leave it (their buffers go with their providers), and the kept ones are released.
func (m *Memory) Reset() {
	m.mu.Lock()
	for _, a := range m.allocs {
		a.reg.set(false)
	}
	m.allocs = nil
	cached := m.cached.Drain()
	m.mu.Unlock()
	for _, a := range cached {
		if a.Buf != nil {
			_ = a.Buf.Release()
		}
	}
}
