package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"math/bits"
	"unsafe"
)

// The bounds on array counts the header documents, taken from it so they cannot drift.
const (
	maxRank       = C.CUDAEP_MAX_RANK
	maxArray      = C.CUDAEP_MAX_ARRAY
	maxKernelArgs = C.CUDAEP_MAX_KERNEL_ARGS
)

// cArray returns a Go view of the n elements of C memory at p, checking first that n is
// within max and that p is not NULL unless n is 0. The view aliases caller memory that is
// valid for the duration of the call only: never keep it.
func cArray[T any](p *T, n uint64, max int, name string) ([]T, error) {
	switch {
	case n > uint64(max):
		return nil, argError("%d %s: at most %d", n, name, max)
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, argError("%s is NULL but its count is %d", name, n)
	}
	return unsafe.Slice(p, int(n)), nil
}

// checkRange refuses [off, off+n) outside a size-byte object, including an off+n that
// overflows 64 bits.
func checkRange(off, n, size uint64, what string) error {
	end, carry := bits.Add64(off, n, 0)
	if carry != 0 || end > size {
		return argError("range [%d, %d+%d) is outside the %d-byte %s", off, off, n, size, what)
	}
	return nil
}

// structOut is a struct the library fills for the caller, which starts with uint32_t
// struct_size. It is checked (size at least min) before any work, and written after, with
// no more than struct_size bytes, so a failing call writes nothing and a host built against
// a shorter layout is never overrun.
type structOut struct {
	p    unsafe.Pointer
	name string
	min  uintptr
}

// check validates the pointer and the caller's struct_size.
func (o structOut) check() error {
	if o.p == nil {
		return argError("%s is NULL", o.name)
	}
	if size := *(*uint32)(o.p); uintptr(size) < o.min {
		return argError("%s->struct_size is %d; set it to sizeof the struct (at least %d)", o.name, size, o.min)
	}
	return nil
}

// write copies the full struct at src (of n bytes, whose first field is struct_size) into the
// caller's, keeping the caller's struct_size and writing at most that many bytes.
func (o structOut) write(src unsafe.Pointer, n uintptr) {
	size := *(*uint32)(o.p)
	*(*uint32)(src) = size
	m := min(uintptr(size), n)
	copy(unsafe.Slice((*byte)(o.p), m), unsafe.Slice((*byte)(src), m))
}

// cBool converts a Go bool to the header's int32_t 0/1.
func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
