package paging

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"golang.org/x/sys/unix"
)

// DefaultRegisterChunkBytes is the default size of one registration: file extents are
// registered with the driver in chunks of this many bytes, aligned to it in the file.
const DefaultRegisterChunkBytes = 32 << 20

// DefaultRegisterCap returns the default cap on the bytes of external-data files a staging pool
// keeps registered with the driver: a quarter of the machine's physical memory (8 GiB when it
// cannot be read). Registered pages are pinned: the kernel can neither reclaim nor move them
// until they are unregistered, so the cap keeps most of the memory pageable.
func DefaultRegisterCap() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 8 << 30
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	return alignDown(uint64(si.Totalram)*unit/4, pageSize)
}

// RegisterCapError refuses a registration that would take the bytes registered past the cap
// while every registration already made is in use by a copy in flight (idle ones are evicted
// first). The zero-copy path falls back to staging on it.
type RegisterCapError struct {
	Need       uint64 // bytes the registration needed
	Registered uint64 // bytes registered, all in use
	Cap        uint64 // the cap
}

// Error names the three sizes.
func (e *RegisterCapError) Error() string {
	return fmt.Sprintf("paging: registering %d more bytes would pass the cap of %d registered bytes (%d registered and in use by copies in flight)",
		e.Need, e.Cap, e.Registered)
}

// registrationHolder is implemented by sources whose files may stay registered with the driver
// after the fills that read them completed: the source tells each registry holding pages of a
// file to unregister them before it unmaps the file.
type registrationHolder interface {
	// holdRegistrations records that r may keep pages of mapping id registered. The caller
	// has the file pinned (a fill reads it), so it cannot be unmapped meanwhile.
	holdRegistrations(id MappingID, r *registry) error
}

// registry tracks the host ranges registered with the driver for zero-copy transfers, by
// address, so that fills whose page-aligned extents touch (adjacent layers sharing a page,
// two pipelines over one file) share registrations instead of failing with
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED.
//
// A registration outlives the copies that read it: when the last one completes it stays,
// idle, for the next fill of the same bytes (the next prefill), until its file is closed, the
// pool is closed, or a new registration needs its bytes under the cap (the idle registration
// used longest ago goes first). Registrations of a source that cannot tell the registry when a
// file is unmapped (not a registrationHolder) are transient: undone when their last copy
// completes.
type registry struct {
	ctx     *cudadrv.Context // the pool's
	mu      sync.Mutex
	entries []*regEntry // sorted by lo, non-overlapping
	cap     uint64      // most bytes registered at once
	live    uint64      // bytes registered now
	peak    uint64      // most bytes registered at once so far
	clock   uint64      // use stamps, for LRU eviction
	closed  bool

	made, undone, reused, evicted, capRefused uint64
	regTime, unregTime                        time.Duration
}

// regEntry is one registered range [lo, hi) of host addresses.
type regEntry struct {
	lo, hi    uintptr
	reg       *cudadrv.Registration
	refs      int
	used      uint64 // the registry clock at its latest use
	transient bool   // undo when the last reference goes
	gone      bool   // unregistered (its file closed under it, or the pool closed)
}

func (e *regEntry) size() uint64 { return uint64(e.hi - e.lo) }

// RegistrationStats describe the registrations a StagingPool keeps.
type RegistrationStats struct {
	Cap            uint64        // the cap on registered bytes
	Bytes          uint64        // bytes registered now
	InUse          uint64        // of those, bytes of ranges that copies in flight may read
	Peak           uint64        // the most bytes registered at once so far
	Ranges         int           // ranges registered now
	Made           uint64        // cuMemHostRegister calls that succeeded
	Undone         uint64        // cuMemHostUnregister calls that succeeded
	Reused         uint64        // ranges a fill found already registered
	Evicted        uint64        // idle ranges unregistered to make room under the cap
	CapRefused     uint64        // fills' registrations refused by the cap (staged instead, or failed)
	RegisterTime   time.Duration // host time in cuMemHostRegister
	UnregisterTime time.Duration // host time in cuMemHostUnregister
}

func (r *registry) stats() RegistrationStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var inUse uint64
	for _, e := range r.entries {
		if e.refs > 0 {
			inUse += e.size()
		}
	}
	return RegistrationStats{
		Cap: r.cap, Bytes: r.live, InUse: inUse, Peak: r.peak, Ranges: len(r.entries),
		Made: r.made, Undone: r.undone, Reused: r.reused, Evicted: r.evicted, CapRefused: r.capRefused,
		RegisterTime: r.regTime, UnregisterTime: r.unregTime,
	}
}

// ranges reports the number of ranges registered now.
func (r *registry) ranges() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// find returns the index of the first entry that ends after pos.
func (r *registry) find(pos uintptr) int {
	return sort.Search(len(r.entries), func(i int) bool { return r.entries[i].hi > pos })
}

// acquire returns the registrations covering the page-aligned host range mem (whose address
// range is [lo, lo+len(mem))), in address order, each with one more reference; the parts no
// registration covers yet are registered read-only, after evicting idle registrations outside
// the range used longest ago when the cap requires it. transient marks the new registrations
// to be undone when their last reference is released; without evict, nothing is evicted and
// the cap refuses what does not fit. On an error nothing stays referenced
// (ranges registered by this call are unregistered again) and the error is returned: a
// *RegisterCapError when the cap leaves no room, else the driver's. The caller has the
// context bound.
func (r *registry) acquire(mem []byte, lo uintptr, transient, evict bool) ([]*regEntry, error) {
	hi := lo + uintptr(len(mem))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	var got []*regEntry
	undo := func() {
		for _, e := range got {
			e.refs--
			if e.refs == 0 && e.transient {
				r.unregisterLocked(e)
			}
		}
	}
	r.clock++
	for pos := lo; pos < hi; {
		i := r.find(pos)
		var next *regEntry
		if i < len(r.entries) && r.entries[i].lo < hi {
			next = r.entries[i]
		}
		if next != nil && next.lo <= pos {
			next.refs++
			next.used = r.clock
			r.reused++
			got = append(got, next)
			pos = next.hi
			continue
		}
		gapEnd := hi
		if next != nil {
			gapEnd = next.lo
		}
		need := uint64(gapEnd - pos)
		if err := r.makeRoomLocked(need, lo, hi, evict); err != nil {
			undo()
			return nil, err
		}
		part := mem[pos-lo : gapEnd-lo : gapEnd-lo]
		start := time.Now()
		reg, err := r.ctx.RegisterHost(part, cudadrv.HostRegisterReadOnly)
		r.regTime += time.Since(start)
		if err != nil {
			undo()
			return nil, err
		}
		r.made++
		e := &regEntry{lo: pos, hi: gapEnd, reg: reg, refs: 1, used: r.clock, transient: transient}
		r.insertLocked(e)
		got = append(got, e)
		pos = gapEnd
	}
	return got, nil
}

// makeRoomLocked evicts idle registrations outside [lo, hi), the one used longest ago first,
// until need more bytes fit under the cap (when evict allows).
func (r *registry) makeRoomLocked(need uint64, lo, hi uintptr, evict bool) error {
	for r.live+need > r.cap {
		var victim *regEntry
		for _, e := range r.entries {
			if !evict {
				break
			}
			if e.refs == 0 && (e.hi <= lo || e.lo >= hi) && (victim == nil || e.used < victim.used) {
				victim = e
			}
		}
		if victim == nil {
			if evict {
				r.capRefused++ // a fill refused; RegisterFile just stops
			}
			return &RegisterCapError{Need: need, Registered: r.live, Cap: r.cap}
		}
		if err := r.unregisterLocked(victim); err != nil {
			return err
		}
		r.evicted++
	}
	return nil
}

func (r *registry) insertLocked(e *regEntry) {
	i := r.find(e.lo)
	r.entries = append(r.entries, nil)
	copy(r.entries[i+1:], r.entries[i:])
	r.entries[i] = e
	r.live += e.size()
	r.peak = max(r.peak, r.live)
}

// unregisterLocked removes e and unregisters it. The caller has the context bound (every
// caller is an entry point of the pool, a transfer or a source that binds it first).
func (r *registry) unregisterLocked(e *regEntry) error {
	if e.gone {
		return nil
	}
	e.gone = true
	for i, x := range r.entries {
		if x == e {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			break
		}
	}
	r.live -= e.size()
	start := time.Now()
	err := e.reg.Unregister()
	r.unregTime += time.Since(start)
	if err != nil {
		return err
	}
	r.undone++
	return nil
}

// release drops one reference of each entry. An entry no longer referenced stays registered
// (idle) unless it is transient or the pool is closed. The caller knows every copy reading
// the entries has completed, and has the context bound.
func (r *registry) release(entries []*regEntry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, e := range entries {
		e.refs--
		if e.refs > 0 || e.gone || !(e.transient || r.closed) {
			continue
		}
		if err := r.unregisterLocked(e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropRange unregisters every registration inside [lo, hi): the file they belong to is about
// to be unmapped. One still referenced by a copy is unregistered all the same (the caller
// unmaps the file regardless) and reported as an error; the pipelines pin a file while their
// copies may read it, so only a teardown out of order (MmapSource.CloseAll before the
// pipelines' Close) meets one.
func (r *registry) dropRange(lo, hi uintptr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var victims []*regEntry
	for _, e := range r.entries {
		if e.lo >= lo && e.hi <= hi {
			victims = append(victims, e)
		}
	}
	if len(victims) == 0 {
		return nil
	}
	b, err := bind(r.ctx)
	if err != nil {
		return err
	}
	defer b.done()
	var errs []error
	busy := 0
	for _, e := range victims {
		if e.refs > 0 {
			busy++
		}
		if err := r.unregisterLocked(e); err != nil {
			errs = append(errs, err)
		}
	}
	if busy > 0 {
		errs = append(errs, fmt.Errorf("paging: %d registered range(s) unmapped while a copy may still read them (close the pipelines before the source)", busy))
	}
	return errors.Join(errs...)
}

// close unregisters every idle registration and makes later releases unregister at once. It
// returns the number of registrations still referenced by copies. The caller has the context
// bound.
func (r *registry) close() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	busy := 0
	for _, e := range append([]*regEntry(nil), r.entries...) {
		if e.refs > 0 {
			busy++
			continue
		}
		if err := r.unregisterLocked(e); err != nil {
			errs = append(errs, err)
		}
	}
	return busy, errors.Join(errs...)
}

// RegisterReport is what StagingPool.RegisterFile did.
type RegisterReport struct {
	Mapping MappingID     // the file
	Bytes   uint64        // bytes of the file now registered (registered by this call or before)
	Made    uint64        // ranges this call registered
	Took    time.Duration // host time of the call
	// Stopped says why the registration stopped before the end of the file ("" when the
	// whole file is registered): the cap was reached, or the driver refused (the error's
	// text). Fills register what is missing when they need it, evicting idle ranges.
	Stopped string
}
