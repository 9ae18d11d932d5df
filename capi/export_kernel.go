package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// decodeAttributes reads the attribute array of CudaEpGetKernel into a map, copying every
// string and array.
func decodeAttributes(arr *C.cudaep_cattribute, n C.size_t) (map[string]ep.Attribute, error) {
	cas, err := cArray((*C.CudaEpAttribute)(unsafe.Pointer(arr)), uint64(n), maxArray, "attributes")
	if err != nil || len(cas) == 0 {
		return nil, err
	}
	attrs := make(map[string]ep.Attribute, len(cas))
	for i := range cas {
		ca := &cas[i]
		name, err := goString((*C.cudaep_cchar)(unsafe.Pointer(ca.name)), fmt.Sprintf("attributes[%d].name", i))
		if err != nil {
			return nil, err
		}
		if _, dup := attrs[name]; dup {
			return nil, argError("attribute %q is given twice", name)
		}
		switch ca._type {
		case C.CUDAEP_ATTR_INT:
			attrs[name] = ep.IntAttr(int64(ca.i))
		case C.CUDAEP_ATTR_FLOAT:
			attrs[name] = ep.FloatAttr(float32(ca.f))
		case C.CUDAEP_ATTR_INTS:
			ints, err := cArray((*int64)(unsafe.Pointer(ca.ints)), uint64(ca.num_ints), maxArray, fmt.Sprintf("attribute %q ints", name))
			if err != nil {
				return nil, err
			}
			attrs[name] = ep.IntsAttr(ints...) // IntsAttr copies
		case C.CUDAEP_ATTR_STRING:
			s, err := goString((*C.cudaep_cchar)(unsafe.Pointer(ca.s)), fmt.Sprintf("attribute %q string", name))
			if err != nil {
				return nil, err
			}
			attrs[name] = ep.StringAttr(s)
		default:
			return nil, argError("attribute %q has type %d, not a CudaEpAttributeType", name, int32(ca._type))
		}
	}
	return attrs, nil
}

// CudaEpGetKernel returns the kernel for an operator (see cudaep.h).
//
//export CudaEpGetKernel
func CudaEpGetKernel(provider C.CudaEpProvider, op *C.cudaep_cchar, opset C.int32_t, inputs *C.cudaep_ctensor_info, numInputs C.size_t,
	attributes *C.cudaep_cattribute, numAttributes C.size_t, outKernel *C.CudaEpKernel) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outKernel == nil {
		return statusOf(argError("out_kernel is NULL"))
	}
	opName, err := goString(op, "op")
	if err != nil {
		return statusOf(err)
	}
	if opset < 1 {
		return statusOf(argError("opset is %d; it must be at least 1", int32(opset)))
	}
	cins, err := cArray((*C.CudaEpTensorInfo)(unsafe.Pointer(inputs)), uint64(numInputs), maxArray, "inputs")
	if err != nil {
		return statusOf(err)
	}
	spec := ep.Spec{Op: opName, Opset: int(opset), Inputs: make([]ep.TensorInfo, len(cins))}
	for i := range cins {
		if spec.Inputs[i], err = decodeInfo(&cins[i], fmt.Sprintf("inputs[%d]", i)); err != nil {
			return statusOf(err)
		}
	}
	if spec.Attrs, err = decodeAttributes(attributes, numAttributes); err != nil {
		return statusOf(err)
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	k, err := c.p.GetKernel(spec)
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	h, err := insertChild(kernelTable, &kernelObject{child: c, k: k}, (*kernelObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outKernel = C.CudaEpKernel(h)
	return nil
}

// CudaEpReleaseKernel releases a kernel handle (see cudaep.h).
//
//export CudaEpReleaseKernel
func CudaEpReleaseKernel(kernel C.CudaEpKernel) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(kernelTable.Remove(handles.Handle(kernel)))
}

// kernelString answers the two-call string queries about a kernel.
func kernelString(kernel C.CudaEpKernel, get func(*ep.Kernel) string, out stringOut) *C.CudaEpStatus {
	var s string
	err := with(kernelTable, handles.Handle(kernel), func(k *kernelObject) error {
		s = get(k.k)
		return out.check(s)
	})
	if err != nil {
		return statusOf(err)
	}
	out.write(s)
	return nil
}

// CudaEpKernelGetName returns a kernel's description (see cudaep.h).
//
//export CudaEpKernelGetName
func CudaEpKernelGetName(kernel C.CudaEpKernel, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return kernelString(kernel, (*ep.Kernel).Name, stringOut{buf, bufSize, outNeeded})
}

// CudaEpKernelGetCaptureSupport says whether a kernel may be captured (see cudaep.h).
//
//export CudaEpKernelGetCaptureSupport
func CudaEpKernelGetCaptureSupport(kernel C.CudaEpKernel, outSupported *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outSupported == nil {
		return statusOf(argError("out_supported is NULL"))
	}
	var ok bool
	if err := with(kernelTable, handles.Handle(kernel), func(k *kernelObject) error {
		ok = k.k.CaptureSupport().IsSupported()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outSupported = cBool(ok)
	return nil
}

// CudaEpKernelGetCaptureReason says why a kernel cannot be captured (see cudaep.h).
//
//export CudaEpKernelGetCaptureReason
func CudaEpKernelGetCaptureReason(kernel C.CudaEpKernel, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return kernelString(kernel, func(k *ep.Kernel) string { return k.CaptureSupport().Reason() },
		stringOut{buf, bufSize, outNeeded})
}

// CudaEpKernelGetOutputCount returns the number of outputs (see cudaep.h).
//
//export CudaEpKernelGetOutputCount
func CudaEpKernelGetOutputCount(kernel C.CudaEpKernel, outCount *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outCount == nil {
		return statusOf(argError("out_count is NULL"))
	}
	var n int
	if err := with(kernelTable, handles.Handle(kernel), func(k *kernelObject) error {
		n = len(k.k.Outputs())
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outCount = C.size_t(n)
	return nil
}

// CudaEpKernelGetOutputInfo returns one output's type and shape (see cudaep.h).
//
//export CudaEpKernelGetOutputInfo
func CudaEpKernelGetOutputInfo(kernel C.CudaEpKernel, index C.size_t, outDtype *C.int32_t, shape *C.int64_t, shapeCapacity C.size_t, outRank *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	switch {
	case outDtype == nil:
		return statusOf(argError("out_dtype is NULL"))
	case outRank == nil:
		return statusOf(argError("out_rank is NULL"))
	case shape == nil && shapeCapacity != 0:
		return statusOf(argError("shape is NULL but shape_capacity is %d", uint64(shapeCapacity)))
	}
	var info ep.TensorInfo
	if err := with(kernelTable, handles.Handle(kernel), func(k *kernelObject) error {
		outs := k.k.Outputs()
		if uint64(index) >= uint64(len(outs)) {
			return argError("output index %d: the kernel has %d outputs", uint64(index), len(outs))
		}
		info = outs[index]
		return nil
	}); err != nil {
		return statusOf(err)
	}
	if shape != nil && uint64(shapeCapacity) < uint64(len(info.Shape)) {
		return statusOf(argError("shape_capacity is %d, the rank is %d", uint64(shapeCapacity), len(info.Shape)))
	}
	if shape != nil {
		copy(unsafe.Slice((*int64)(unsafe.Pointer(shape)), len(info.Shape)), info.Shape)
	}
	*outDtype = C.int32_t(info.DType)
	*outRank = C.size_t(len(info.Shape))
	return nil
}

// CudaEpKernelExecute queues a kernel (see cudaep.h).
//
//export CudaEpKernelExecute
func CudaEpKernelExecute(kernel C.CudaEpKernel, inputs *C.cudaep_ctensor, numInputs C.size_t, outputs *C.cudaep_ctensor, numOutputs C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	// No lease on the kernel: its finalizer only gives back its provider's lease, and Execute
	// on a kernel whose provider was closed meanwhile is refused by ep (ErrClosed), so a host
	// that releases the handle during the call gets an error, never a crash, and the call saves
	// the lease's two atomic read-modify-writes. The tensors' memory stays leased: a buffer's
	// finalizer frees device memory the launch is about to name.
	k, err := kernelTable.Get(handles.Handle(kernel))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(k.execute(inputs, numInputs, outputs, numOutputs))
}

// execute decodes the tensors into the kernel's scratch and queues the kernel, under the
// kernel's lock.
func (k *kernelObject) execute(inputs *C.cudaep_ctensor, numInputs C.size_t, outputs *C.cudaep_ctensor, numOutputs C.size_t) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	args := &k.args
	defer args.release()
	ins, err := args.decode(k.p, (*C.CudaEpTensor)(unsafe.Pointer(inputs)), numInputs, 0, "inputs")
	if err != nil {
		return err
	}
	outs, err := args.decode(k.p, (*C.CudaEpTensor)(unsafe.Pointer(outputs)), numOutputs, 1, "outputs")
	if err != nil {
		return err
	}
	return k.k.Execute(ins, outs)
}

// CudaEpKernelNonZeroCount reads a NonZero kernel's count (see cudaep.h).
//
//export CudaEpKernelNonZeroCount
func CudaEpKernelNonZeroCount(kernel C.CudaEpKernel, count *C.cudaep_ctensor, outCount *C.int64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	switch {
	case count == nil:
		return statusOf(argError("count is NULL"))
	case outCount == nil:
		return statusOf(argError("out_count is NULL"))
	}
	var n int64
	if err := with(kernelTable, handles.Handle(kernel), func(k *kernelObject) error {
		if !k.k.IsNonZero() {
			return argError("%s is not a NonZero kernel", k.k.Name())
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		args := &k.args
		defer args.release()
		t, err := args.tensor(k.p, (*C.CudaEpTensor)(unsafe.Pointer(count)), "count")
		if err != nil {
			return err
		}
		n, err = k.k.NonZeroCount(t)
		return err
	}); err != nil {
		return statusOf(err)
	}
	*outCount = C.int64_t(n)
	return nil
}
