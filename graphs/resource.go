package graphs

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/cudaep/cudaep/cudadrv"
)

// Resource is a reference to something a captured graph embeds, typically a device buffer
// whose address was recorded into a kernel's arguments. A lifecycle holds the references its
// captures were given and releases each only after the graph that embeds it is destroyed and
// its stream has drained, so an embedded address is never freed (and reused) while a queued
// replay may still read it.
//
// Identity is the interface value: implementations are pointers (or other comparable values
// whose equality means "the same resource"). Release is called exactly once per reference
// the lifecycle holds, on whichever goroutine destroys the graph (possibly under the
// lifecycle's lock, never during a capture of that goroutine's thread); it must not call
// back into the lifecycle that releases it.
type Resource interface {
	Release()
}

// retainedSet is the deduplicated resources of one capture.
type retainedSet struct {
	items []Resource
}

// take adds the references in rs, each a reference handed over by the caller. A reference
// to a resource already held is surplus: it is returned in dup for the caller to release at
// once. A nil or non-comparable resource yields an error, and nothing is taken.
func (s *retainedSet) take(rs []Resource) (dup []Resource, err error) {
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("%w: resource %d is nil", ErrInvalidArgument, i)
		}
		if !reflect.ValueOf(r).Comparable() {
			return nil, fmt.Errorf("%w: resource %d (%T) is not comparable, so it has no identity", ErrInvalidArgument, i, r)
		}
	}
	for _, r := range rs {
		if s.has(r) {
			dup = append(dup, r)
			continue
		}
		s.items = append(s.items, r)
	}
	return dup, nil
}

func (s *retainedSet) has(r Resource) bool {
	for _, x := range s.items {
		if x == r {
			return true
		}
	}
	return false
}

// drain empties the set and returns its references.
func (s *retainedSet) drain() []Resource {
	items := s.items
	s.items = nil
	return items
}

// releaseAll releases every reference in rs, in order.
func releaseAll(rs []Resource) {
	for _, r := range rs {
		r.Release()
	}
}

// SharedBuffer is a reference-counted device buffer: its owner holds one reference, and
// every capture it is handed to (through [SharedBuffer.Retain]) holds another. The device
// memory is freed when the last reference is released, so an owner may release its buffer
// while a captured graph still embeds the address: the memory outlives the graph.
//
// All methods are safe for concurrent use.
type SharedBuffer struct {
	buf  *cudadrv.DeviceBuffer
	refs atomic.Int64

	mu  sync.Mutex
	err error // the first Free or over-release error
}

// errOverRelease is recorded when a SharedBuffer is released more often than retained.
var errOverRelease = errors.New("graphs: shared buffer released more often than retained")

// NewSharedBuffer takes ownership of buf and returns it with one reference, the caller's.
func NewSharedBuffer(buf *cudadrv.DeviceBuffer) *SharedBuffer {
	b := &SharedBuffer{buf: buf}
	b.refs.Store(1)
	return b
}

// Buffer returns the underlying device buffer. It must not be freed directly.
func (b *SharedBuffer) Buffer() *cudadrv.DeviceBuffer { return b.buf }

// Ptr returns the buffer's device address.
func (b *SharedBuffer) Ptr() cudadrv.DevicePtr { return b.buf.Ptr() }

// Size returns the buffer's size in bytes.
func (b *SharedBuffer) Size() uint64 { return b.buf.Size() }

// Refs returns the number of references held now.
func (b *SharedBuffer) Refs() int64 { return b.refs.Load() }

// Retain adds a reference and returns the buffer as a [Resource] carrying it, to hand to
// [Lifecycle.Begin].
func (b *SharedBuffer) Retain() Resource {
	b.refs.Add(1)
	return b
}

// Release drops one reference; dropping the last frees the device memory (cuMemFree), on
// the calling goroutine, whose thread must have the buffer's context bound.
func (b *SharedBuffer) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		if err := b.buf.Free(); err != nil {
			b.note(fmt.Errorf("graphs: free shared buffer at %#x: %w", uint64(b.buf.Ptr()), err))
		}
	case n < 0:
		b.refs.Add(1)
		b.note(errOverRelease)
	}
}

// Err returns the first error seen while releasing: a failed free, or a release without a
// matching reference. Release has no error result, so this is where such failures surface.
func (b *SharedBuffer) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *SharedBuffer) note(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}
