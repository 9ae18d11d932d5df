package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// memoryHold is device memory a tensor or kernel argument names by handle: a buffer, a paged
// weight or a waited-for ticket, leased for the duration of one call.
type memoryHold struct {
	p    *ep.Provider
	ptr  ep.DevicePtr
	size uint64
	buf  *ep.Buffer // set for a buffer, so user launches can check it is not released

	buffer handles.Lease[*bufferObject]
	paged  handles.Lease[*pagedWeightObject]
	ticket handles.Lease[*ticketObject]
}

// acquireMemory leases the memory h names. what names the argument in messages.
func acquireMemory(h uint64, what string) (*memoryHold, error) {
	m := &memoryHold{}
	if err := m.acquire(h, what); err != nil {
		return nil, err
	}
	return m, nil
}

// acquire leases the memory h names into m, which must be empty. On error m holds nothing.
// It allocates nothing on success, so a kernel execution through the ABI stays cheap.
func (m *memoryHold) acquire(h uint64, what string) error {
	hh := handles.Handle(h)
	var err error
	switch hh.Kind() {
	case kindBuffer:
		if m.buffer, err = bufferTable.Acquire(hh); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		b := m.buffer.Value()
		m.p, m.ptr, m.size, m.buf = b.p, b.buf.Ptr(), b.buf.Size(), b.buf
	case kindPagedWeight:
		if m.paged, err = pagedWeightTable.Acquire(hh); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		w := m.paged.Value()
		m.p, m.ptr, m.size = w.p, w.pw.Ptr(), w.pw.Len()
	case kindTicket:
		if m.ticket, err = ticketTable.Acquire(hh); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		t := m.ticket.Value()
		t.mu.Lock()
		view, ok := t.view, t.inView
		t.mu.Unlock()
		if !ok {
			m.release()
			return fmt.Errorf("%w: %s: the ticket's layer is not waited for (or was released or cancelled): "+
				"call CudaEpDoubleBufferWaitLayer first", errInvalidArgument, what)
		}
		m.p, m.ptr, m.size = t.dbo.p, view.Ptr, view.Len
	default:
		_, err := bufferTable.Get(hh) // the table's own message for zero, forged or wrong-type handles
		return fmt.Errorf("%s (memory must be a buffer, paged weight or ticket): %w", what, err)
	}
	return nil
}

// release gives back the lease. Releasing the last reference of an object its handle no
// longer names finalizes it; that error has no call to report it to and is dropped, as the
// object's handle release already returned.
func (m *memoryHold) release() {
	_ = m.buffer.Release()
	_ = m.paged.Release()
	_ = m.ticket.Release()
	*m = memoryHold{}
}

// at returns the device address off bytes in, after checking [off, off+n) lies inside. The
// label of the message is built only on failure: it is on every kernel execution's path.
func (m *memoryHold) at(off, n uint64, what string) (ep.DevicePtr, error) {
	if end, carry := bits.Add64(off, n, 0); carry != 0 || end > m.size {
		return 0, checkRange(off, n, m.size, what+" memory")
	}
	return m.ptr + ep.DevicePtr(off), nil
}

// decodeInfo reads a CudaEpTensorInfo. The shape aliases the caller's memory (valid for the
// call only): kernels compare shapes and copy what they keep, never retaining it.
func decodeInfo(ci *C.CudaEpTensorInfo, what string) (ep.TensorInfo, error) {
	rank := uint64(ci.rank)
	if rank > maxRank {
		return ep.TensorInfo{}, argError("%s: rank %d: at most %d", what, rank, maxRank)
	}
	var shape []int64
	if rank > 0 {
		if ci.shape == nil { // the label is built only on failure: this is every execution's path
			return ep.TensorInfo{}, argError("%s shape is NULL but its count is %d", what, rank)
		}
		shape = unsafe.Slice((*int64)(unsafe.Pointer(ci.shape)), int(rank))
	}
	elems := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return ep.TensorInfo{}, argError("%s: dimension %d is %d", what, i, d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > 1<<56 {
			return ep.TensorInfo{}, argError("%s: shape %v overflows", what, shape)
		}
		elems = lo
	}
	if ci.strides != nil {
		strides := unsafe.Slice((*int64)(unsafe.Pointer(ci.strides)), int(rank))
		want := int64(1)
		for i := int(rank) - 1; i >= 0; i-- {
			if shape[i] != 1 && strides[i] != want {
				return ep.TensorInfo{}, fmt.Errorf("%w: %s: strides %v are not the dense row-major strides of shape %v: "+
					"kernels need dense tensors (copy the view into a dense buffer first)", ep.ErrUnsupported, what, strides, shape)
			}
			want *= shape[i]
		}
	}
	return ep.TensorInfo{DType: ep.DType(ci.dtype), Shape: shape}, nil
}

// tensorArgs decodes arrays of CudaEpTensor into kernel tensors, leasing each tensor's memory
// until release. It keeps what it decodes in arrays of its own, so a kernelObject reuses one
// for every execution (under the kernel's lock) and decoding allocates nothing; messages are
// formatted only when something is wrong.
type tensorArgs struct {
	holds   [2 * maxKernelTensors]memoryHold
	n       int // holds in use
	tensors [2][maxKernelTensors]ep.Tensor
}

// maxKernelTensors bounds the inputs, and separately the outputs, of one kernel call
// (CUDAEP_MAX_KERNEL_TENSORS): every operator cudaep runs has fewer (Gemm takes three inputs).
const maxKernelTensors = C.CUDAEP_MAX_KERNEL_TENSORS

func (a *tensorArgs) release() {
	for i := range a.holds[:a.n] {
		a.holds[i].release()
	}
	a.n = 0
}

// decode decodes n tensors at arr into set (0 inputs, 1 outputs); name ("inputs") and the
// index label any error.
func (a *tensorArgs) decode(p *ep.Provider, arr *C.CudaEpTensor, n C.size_t, set int, name string) ([]ep.Tensor, error) {
	cts, err := cArray(arr, uint64(n), maxKernelTensors, name)
	if err != nil {
		return nil, err
	}
	out := a.tensors[set][:len(cts)]
	for i := range cts {
		t, err := a.tensor(p, &cts[i], "tensor")
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		out[i] = t
	}
	return out, nil
}

func (a *tensorArgs) tensor(p *ep.Provider, ct *C.CudaEpTensor, what string) (ep.Tensor, error) {
	info, err := decodeInfo(&ct.info, what)
	if err != nil {
		return ep.Tensor{}, err
	}
	if a.n == len(a.holds) {
		return ep.Tensor{}, argError("%s: more than %d tensors in one call", what, len(a.holds))
	}
	m := &a.holds[a.n]
	if err := m.acquire(uint64(ct.memory), what); err != nil {
		return ep.Tensor{}, err
	}
	a.n++
	if m.p != p {
		return ep.Tensor{}, argError("%s: its memory belongs to another provider", what)
	}
	n := uint64(max(info.Bytes(), 0))
	ptr, err := m.at(uint64(ct.offset), n, what)
	if err != nil {
		return ep.Tensor{}, err
	}
	return ep.Tensor{TensorInfo: info, Ptr: ptr}, nil
}
