package partition

// MaxCachedBytes bounds what a FreeList keeps. A host such as ONNX Runtime allocates a run's
// inputs and outputs anew every run and gives plugin allocators no arena of their own, so freed
// allocations are kept for reuse by size: a device allocation and free per tensor per run would
// cost more than the run.
const MaxCachedBytes = 256 << 20

// SizeKey is what a kept allocation is reused for: its device and size.
type SizeKey struct {
	Ordinal int
	Size    uint64
}

// FreeList keeps freed allocations for reuse by device and size, up to MaxCachedBytes in all.
// The zero value is empty and ready. It is not safe for concurrent use: the caller locks.
type FreeList[T any] struct {
	m     map[SizeKey][]T
	bytes uint64
}

// Take hands out a kept allocation of k's device and size, if there is one.
func (f *FreeList[T]) Take(k SizeKey) (T, bool) {
	list := f.m[k]
	if len(list) == 0 {
		var zero T
		return zero, false
	}
	v := list[len(list)-1]
	f.m[k] = list[:len(list)-1]
	f.bytes -= k.Size
	return v, true
}

// Keep keeps v for reuse; false when that would pass MaxCachedBytes (the caller frees v).
func (f *FreeList[T]) Keep(k SizeKey, v T) bool {
	if f.bytes+k.Size > MaxCachedBytes {
		return false
	}
	if f.m == nil {
		f.m = map[SizeKey][]T{}
	}
	f.m[k] = append(f.m[k], v)
	f.bytes += k.Size
	return true
}

// Bytes is the size of everything kept.
func (f *FreeList[T]) Bytes() uint64 { return f.bytes }

// Drain empties the list and returns what it kept.
func (f *FreeList[T]) Drain() []T {
	var all []T
	for _, list := range f.m {
		all = append(all, list...)
	}
	f.m, f.bytes = nil, 0
	return all
}
