// Package handles maps the 64-bit handles of the C ABI to Go objects through typed,
// generation-checked, reference-counted tables, so that no Go pointer crosses to C and a bad
// handle is an error, never a crash.
//
// # Handles
//
// A [Handle] packs three fields: the table's [Kind] (bits 56–63), the slot's generation
// (bits 32–55) and the slot index (bits 0–31). Kind 0 is never used, so the zero handle is
// never valid. Releasing a handle retires its generation: the slot is reused under the next
// generation, and the old handle stays recognisably stale instead of aliasing the new object.
// A slot whose generation is exhausted (2^24 − 1 reuses) is never reused again.
//
// Lookups classify every bad handle:
//
//   - [ErrInvalid]: zero, another table's kind (wrong type), an index or generation this table
//     never issued (forged).
//   - [ErrStale]: issued by this table once, since released (including a second release).
//
// # References
//
// Each object carries a reference count. Its handle holds one reference; [Table.Acquire]
// takes another for the duration of a call (or for the life of a child object that needs its
// parent). [Table.Remove] invalidates the handle at once and drops the handle's reference; the
// table's finalizer runs exactly once, on whichever goroutine drops the last reference. So a
// parent released while children or in-flight calls still use it stays alive until they let
// go, and no call ever runs on a finalized object.
package handles

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Handle is an object's name across the C ABI: kind, generation and slot index in 64 bits.
// Zero is the null handle.
type Handle uint64

// Kind tags the table a handle belongs to. Kind 0 is reserved for the null handle.
type Kind uint8

const (
	indexBits = 32
	genBits   = 24
	kindShift = indexBits + genBits
	maxGen    = 1<<genBits - 1

	pageBits = 8
	pageSize = 1 << pageBits
	pageMask = pageSize - 1

	// DefaultMaxLive is the number of live handles a table holds when Config.MaxLive is 0.
	DefaultMaxLive = 1 << 24
)

// Kind returns the kind field of h.
func (h Handle) Kind() Kind { return Kind(h >> kindShift) }

// Generation returns the generation field of h.
func (h Handle) Generation() uint32 { return uint32(h>>indexBits) & maxGen }

// Index returns the slot index field of h.
func (h Handle) Index() uint32 { return uint32(h) }

// String formats h as fixed-width hexadecimal, as error messages show it.
func (h Handle) String() string { return fmt.Sprintf("0x%016x", uint64(h)) }

func makeHandle(k Kind, gen uint64, index uint32) Handle {
	return Handle(uint64(k)<<kindShift | gen<<indexBits | uint64(index))
}

// Errors returned by table operations; the returned errors wrap one of them with the handle
// and the reason.
var (
	// ErrInvalid: the handle is zero, belongs to another table, or was never issued.
	ErrInvalid = errors.New("handles: invalid handle")
	// ErrStale: the handle was issued by this table and has since been released.
	ErrStale = errors.New("handles: stale handle")
	// ErrFull: the table already holds its maximum number of live handles.
	ErrFull = errors.New("handles: table full")
)

// kindNames records each registered kind's name, for "it is a … handle" messages.
var kindNames [256]atomic.Pointer[string]

// Config describes a table.
type Config[T any] struct {
	// Kind tags this table's handles; it must not be 0 and should be unique in the process.
	Kind Kind
	// Name is the object type in messages, such as "provider".
	Name string
	// Finalize, if not nil, runs exactly once per object when its last reference is dropped,
	// on the goroutine that dropped it. Its error is returned by the Remove or
	// Lease.Release call that triggered it.
	Finalize func(T) error
	// MaxLive bounds the live handles; 0 means DefaultMaxLive.
	MaxLive int
}

// Table maps handles of one kind to values of type T. All methods are safe for concurrent
// use. Get and Acquire take no lock and allocate nothing; Insert and Remove serialize on a
// mutex.
type Table[T any] struct {
	kind     Kind
	name     string
	finalize func(T) error
	maxLive  int64

	// dir is the page directory, replaced (never modified) when it grows, so lock-free
	// readers see a consistent slice. Pages themselves never move.
	dir atomic.Pointer[[]*page[T]]

	mu   sync.Mutex // guards free, used and slot writes
	free []uint32   // released slots that may be reused, most recent last
	used uint32     // slots ever handed out: indexes below this exist in dir

	live atomic.Int64
}

type page[T any] [pageSize]slot[T]

// slot's state is gen<<1 | liveBit. While live, gen is the occupant's generation; while free,
// it is the last occupant's (0 = never used), and the next occupant gets gen+1. Writers store
// the entry before setting live and clear live before dropping the entry, so a reader that
// sees the same live state before and after loading the entry holds that generation's entry.
type slot[T any] struct {
	state atomic.Uint64
	entry atomic.Pointer[entry[T]]
}

const liveBit = 1

type entry[T any] struct {
	value T
	refs  atomic.Int64
}

// NewTable returns an empty table described by c.
//
// # Notes
//
// NewTable panics when c.Kind is 0: tables are package-level values built at
// initialisation, so that is a programmer error, never a runtime condition.
func NewTable[T any](c Config[T]) *Table[T] {
	if c.Kind == 0 {
		panic("handles: NewTable: kind 0 is reserved for the null handle")
	}
	max := int64(c.MaxLive)
	if max <= 0 {
		max = DefaultMaxLive
	}
	name := c.Name
	kindNames[c.Kind].Store(&name)
	t := &Table[T]{kind: c.Kind, name: c.Name, finalize: c.Finalize, maxLive: max}
	t.dir.Store(new([]*page[T]))
	return t
}

// Kind returns the table's kind.
func (t *Table[T]) Kind() Kind { return t.kind }

// Live returns the number of handles currently issued and not yet removed.
func (t *Table[T]) Live() int { return int(t.live.Load()) }

// Insert stores v under a new handle holding one reference to it.
//
// # Errors
//
// ErrFull (wrapped) when the table holds MaxLive handles, or when every slot index is used.
func (t *Table[T]) Insert(v T) (Handle, error) {
	e := &entry[T]{value: v}
	e.refs.Store(1)

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live.Load() >= t.maxLive {
		return 0, fmt.Errorf("%w: %d live %s handles", ErrFull, t.live.Load(), t.name)
	}
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.used == 1<<indexBits-1 {
			return 0, fmt.Errorf("%w: every %s slot index is in use", ErrFull, t.name)
		}
		idx = t.used
		t.used++
		t.growFor(idx)
	}
	s := t.slotAt(idx)
	gen := s.state.Load()>>1 + 1
	s.entry.Store(e)
	s.state.Store(gen<<1 | liveBit)
	t.live.Add(1)
	return makeHandle(t.kind, gen, idx), nil
}

// growFor makes sure the page holding idx exists. Called with mu held.
func (t *Table[T]) growFor(idx uint32) {
	dir := *t.dir.Load()
	if int(idx>>pageBits) < len(dir) {
		return
	}
	// Copy rather than append in place: readers may hold the old slice.
	grown := append(dir[:len(dir):len(dir)], new(page[T]))
	t.dir.Store(&grown)
}

func (t *Table[T]) slotAt(idx uint32) *slot[T] {
	return &(*t.dir.Load())[idx>>pageBits][idx&pageMask]
}

// Get returns the value h names, without taking a reference: use it for values that stay
// valid on their own (immutable or internally locked objects whose finalizer does nothing
// destructive). It takes no lock and allocates nothing on success.
//
// # Errors
//
// ErrInvalid or ErrStale, wrapped with the handle and the reason.
func (t *Table[T]) Get(h Handle) (T, error) {
	e, _, err := t.lookup(h)
	if err != nil {
		var zero T
		return zero, err
	}
	return e.value, nil
}

// lookup finds h's live entry and its slot. It is the lock-free read described at slot.
func (t *Table[T]) lookup(h Handle) (*entry[T], *slot[T], error) {
	if h.Kind() != t.kind {
		return nil, nil, t.invalid(h)
	}
	idx := h.Index()
	dir := *t.dir.Load()
	if int(idx>>pageBits) >= len(dir) {
		return nil, nil, t.invalid(h)
	}
	s := &dir[idx>>pageBits][idx&pageMask]
	want := uint64(h.Generation())<<1 | liveBit
	if st := s.state.Load(); st != want {
		return nil, nil, t.notLive(h, st)
	}
	e := s.entry.Load()
	if st := s.state.Load(); st != want || e == nil {
		return nil, nil, t.notLive(h, st)
	}
	return e, s, nil
}

// notLive explains why h does not name the live occupant of a slot in state st.
func (t *Table[T]) notLive(h Handle, st uint64) error {
	if uint64(h.Generation()) <= st>>1 && h.Generation() != 0 {
		return fmt.Errorf("%w: %s handle %s was released", ErrStale, t.name, h)
	}
	return fmt.Errorf("%w: %s handle %s was never issued", ErrInvalid, t.name, h)
}

// invalid explains a handle that is zero or of another kind.
func (t *Table[T]) invalid(h Handle) error {
	switch {
	case h == 0:
		return fmt.Errorf("%w: the null handle is not a %s", ErrInvalid, t.name)
	case h.Kind() != t.kind:
		if other := kindNames[h.Kind()].Load(); other != nil {
			return fmt.Errorf("%w: wrong type: handle %s is of type %q, want %q", ErrInvalid, h, *other, t.name)
		}
		return fmt.Errorf("%w: handle %s is of no known type, want %q", ErrInvalid, h, t.name)
	}
	return fmt.Errorf("%w: %s handle %s was never issued", ErrInvalid, t.name, h)
}

// Acquire returns a lease holding a reference to h's value: the value is not finalized until
// the lease is released, even if h is removed meanwhile. It takes no lock and allocates
// nothing on success.
//
// # Errors
//
// ErrInvalid or ErrStale, wrapped; ErrStale also when h was removed and its last reference
// dropped between the lookup and the reference being taken.
func (t *Table[T]) Acquire(h Handle) (Lease[T], error) {
	e, _, err := t.lookup(h)
	if err != nil {
		return Lease[T]{}, err
	}
	for {
		r := e.refs.Load()
		if r == 0 {
			return Lease[T]{}, fmt.Errorf("%w: %s handle %s was released", ErrStale, t.name, h)
		}
		if e.refs.CompareAndSwap(r, r+1) {
			return Lease[T]{t: t, e: e}, nil
		}
	}
}

// Remove invalidates h and drops the reference it held. If that was the last reference the
// finalizer runs now and its error is returned; otherwise it runs when the last lease is
// released. After Remove returns, every use of h (including a second Remove) fails with
// ErrStale.
//
// # Errors
//
// ErrInvalid or ErrStale (wrapped) for a bad handle, in which case nothing changes; or the
// finalizer's error.
func (t *Table[T]) Remove(h Handle) error { return t.remove(h, nil) }

func (t *Table[T]) remove(h Handle, refuse func(T) error) error {
	t.mu.Lock()
	e, s, err := t.lookup(h)
	if err == nil && refuse != nil {
		err = refuse(e.value)
	}
	if err != nil {
		t.mu.Unlock()
		return err
	}
	gen := uint64(h.Generation())
	s.state.Store(gen << 1)
	s.entry.Store(nil)
	if gen < maxGen {
		t.free = append(t.free, h.Index())
	}
	t.live.Add(-1)
	t.mu.Unlock()
	return t.drop(e)
}

// RemoveIf is Remove when refuse, called with the handle's value under the table's lock,
// returns nil; otherwise the handle stays valid, nothing changes and refuse's error is
// returned. refuse must be quick and must not use the table.
func (t *Table[T]) RemoveIf(h Handle, refuse func(T) error) error {
	return t.remove(h, refuse)
}

// drop releases one reference to e, finalizing its value when it was the last.
func (t *Table[T]) drop(e *entry[T]) error {
	if e.refs.Add(-1) != 0 || t.finalize == nil {
		return nil
	}
	return t.finalize(e.value)
}

// Lease is a reference to a table's value, taken by [Table.Acquire]. The zero Lease holds
// nothing. A Lease must not be copied after Acquire: release it once, through one variable.
type Lease[T any] struct {
	t *Table[T]
	e *entry[T]
}

// Value returns the leased value, or T's zero value for an empty lease.
func (l *Lease[T]) Value() T {
	if l.e == nil {
		var zero T
		return zero
	}
	return l.e.value
}

// Clone returns a second lease on the same value (an empty lease for an empty one). It works
// after the handle was removed, since l still holds a reference.
func (l *Lease[T]) Clone() Lease[T] {
	if l.e == nil {
		return Lease[T]{}
	}
	l.e.refs.Add(1)
	return Lease[T]{t: l.t, e: l.e}
}

// Release drops the lease's reference and empties the lease, so a second Release does
// nothing. If it was the last reference, the table's finalizer runs now and its error is
// returned.
func (l *Lease[T]) Release() error {
	e := l.e
	if e == nil {
		return nil
	}
	l.e = nil
	return l.t.drop(e)
}
