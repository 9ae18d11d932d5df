package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
)

// CudaEpAllocBuffer allocates device memory (see cudaep.h).
//
//export CudaEpAllocBuffer
func CudaEpAllocBuffer(provider C.CudaEpProvider, size, alignment C.uint64_t, outBuffer *C.CudaEpBuffer) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outBuffer == nil {
		return statusOf(argError("out_buffer is NULL"))
	}
	sz, align := uint64(size), uint64(alignment)
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	buf, err := c.p.Alloc(sz, align)
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	h, err := insertChild(bufferTable, &bufferObject{child: c, buf: buf}, (*bufferObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outBuffer = C.CudaEpBuffer(h)
	return nil
}

// CudaEpReleaseBuffer releases a buffer handle (see cudaep.h).
//
//export CudaEpReleaseBuffer
func CudaEpReleaseBuffer(buffer C.CudaEpBuffer) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(bufferTable.Remove(handles.Handle(buffer)))
}

// CudaEpBufferGetSize returns a buffer's size (see cudaep.h).
//
//export CudaEpBufferGetSize
func CudaEpBufferGetSize(buffer C.CudaEpBuffer, outSize *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outSize == nil {
		return statusOf(argError("out_size is NULL"))
	}
	var n uint64
	if err := with(bufferTable, handles.Handle(buffer), func(b *bufferObject) error {
		n = b.buf.Size()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outSize = C.uint64_t(n)
	return nil
}

// CudaEpBufferGetDevicePointer returns a buffer's device address (see cudaep.h).
//
//export CudaEpBufferGetDevicePointer
func CudaEpBufferGetDevicePointer(buffer C.CudaEpBuffer, outDevicePtr *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outDevicePtr == nil {
		return statusOf(argError("out_device_ptr is NULL"))
	}
	var ptr uint64
	if err := with(bufferTable, handles.Handle(buffer), func(b *bufferObject) error {
		ptr = uint64(b.buf.Ptr())
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outDevicePtr = C.uint64_t(ptr)
	return nil
}

// hostBytes views size bytes of caller memory at p as a Go slice, for the duration of a copy.
// A size beyond the address space is refused before the view is made.
func hostBytes(p unsafe.Pointer, size uint64, name string) ([]byte, error) {
	if p == nil {
		return nil, argError("%s is NULL", name)
	}
	if size > uint64(^uint(0)>>1) {
		return nil, argError("size %d is larger than the address space", size)
	}
	return unsafe.Slice((*byte)(p), int(size)), nil
}

// CudaEpCopyToDevice copies host memory into a buffer (see cudaep.h).
//
//export CudaEpCopyToDevice
func CudaEpCopyToDevice(dst C.CudaEpBuffer, dstOffset C.uint64_t, src *C.cudaep_cvoid, size C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	host, err := hostBytes(unsafe.Pointer(src), uint64(size), "src")
	if err != nil {
		return statusOf(err)
	}
	return statusOf(with(bufferTable, handles.Handle(dst), func(b *bufferObject) error {
		if err := checkRange(uint64(dstOffset), uint64(size), b.buf.Size(), "buffer"); err != nil {
			return err
		}
		return b.p.CopyToDevice(b.buf, uint64(dstOffset), host)
	}))
}

// CudaEpCopyToHost copies a buffer's bytes into host memory (see cudaep.h).
//
//export CudaEpCopyToHost
func CudaEpCopyToHost(dst unsafe.Pointer, src C.CudaEpBuffer, srcOffset C.uint64_t, size C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	host, err := hostBytes(dst, uint64(size), "dst")
	if err != nil {
		return statusOf(err)
	}
	return statusOf(with(bufferTable, handles.Handle(src), func(b *bufferObject) error {
		if err := checkRange(uint64(srcOffset), uint64(size), b.buf.Size(), "buffer"); err != nil {
			return err
		}
		return b.p.CopyToHost(host, b.buf, uint64(srcOffset))
	}))
}

// CudaEpCopyBuffer queues a device-to-device copy (see cudaep.h).
//
//export CudaEpCopyBuffer
func CudaEpCopyBuffer(dst C.CudaEpBuffer, dstOffset C.uint64_t, src C.CudaEpBuffer, srcOffset, size C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	dOff, sOff, n := uint64(dstOffset), uint64(srcOffset), uint64(size)
	return statusOf(with(bufferTable, handles.Handle(dst), func(d *bufferObject) error {
		return with(bufferTable, handles.Handle(src), func(s *bufferObject) error {
			if err := s.sameProvider(d.p, "src"); err != nil {
				return err
			}
			if err := checkRange(dOff, n, d.buf.Size(), "dst buffer"); err != nil {
				return err
			}
			if err := checkRange(sOff, n, s.buf.Size(), "src buffer"); err != nil {
				return err
			}
			if d.buf == s.buf && dOff != sOff && dOff < sOff+n && sOff < dOff+n {
				return argError("the ranges [%d, %d+%d) and [%d, %d+%d) overlap", dOff, dOff, n, sOff, sOff, n)
			}
			if n == 0 || (d.buf == s.buf && dOff == sOff) {
				return nil
			}
			return d.p.CopyBuffer(d.buf, dOff, s.buf, sOff, n)
		})
	}))
}

// CudaEpMemset queues a memset (see cudaep.h).
//
//export CudaEpMemset
func CudaEpMemset(buffer C.CudaEpBuffer, offset, size C.uint64_t, value C.uint8_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(with(bufferTable, handles.Handle(buffer), func(b *bufferObject) error {
		if err := checkRange(uint64(offset), uint64(size), b.buf.Size(), "buffer"); err != nil {
			return err
		}
		if size == 0 {
			return nil
		}
		return b.p.Memset(b.buf, uint64(offset), uint64(size), byte(value))
	}))
}
