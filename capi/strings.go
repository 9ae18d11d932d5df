package main

/*
#include "capi_internal.h"
*/
import "C"

import "unsafe"

// goString copies a caller's NUL-terminated string into Go memory; name is the parameter's
// name for the error about a NULL pointer.
func goString(p *C.cudaep_cchar, name string) (string, error) {
	if p == nil {
		return "", argError("%s is NULL", name)
	}
	return C.GoString((*C.char)(unsafe.Pointer(p))), nil
}

// stringOut is a string result checked against the caller's (buf, buf_size, out_needed)
// before anything is written, so that a failing call writes nothing.
type stringOut struct {
	buf    *C.char
	size   C.size_t
	needed *C.size_t
}

// check validates the buffer for s: out_needed must be set, a NULL buf must come with size 0,
// and a non-NULL buf must hold s and its NUL.
func (o stringOut) check(s string) error {
	n := len(s) + 1
	switch {
	case o.needed == nil:
		return argError("out_needed is NULL")
	case o.buf == nil && o.size != 0:
		return argError("buf is NULL but buf_size is %d", uint64(o.size))
	case o.buf != nil && uint64(o.size) < uint64(n):
		return argError("buffer too small: buf_size is %d, %d bytes needed", uint64(o.size), n)
	}
	return nil
}

// write stores s (after a successful check): its size with the NUL in *out_needed and, when a
// buffer was given, the NUL-terminated bytes. buf is C memory owned by the caller.
func (o stringOut) write(s string) {
	n := len(s) + 1
	if o.buf != nil {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(o.buf)), n)
		copy(dst, s)
		dst[n-1] = 0
	}
	*o.needed = C.size_t(n)
}
