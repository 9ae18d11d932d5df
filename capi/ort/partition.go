package ort

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/partition"
)

// fusedNode is a node ORT fused from a group CudaEp claimed: the partition compiled for it, and
// the memory its runs read ORT's values into (the C struct the shim fills, allocated on the
// first run, and the Go tensors read from it), guarded by the partition's lock (partition.Call).
type fusedNode struct {
	s    *session
	pt   *partition.Partition
	vals *C.CudaEpOrtRun

	ins, outs []partition.Tensor
	dims      []int64
}

// close releases the partition and the memory its runs read ORT's values into. Runs must be
// over.
func (fn *fusedNode) close() error {
	err := fn.pt.Close()
	if fn.vals != nil {
		C.cudaep_ort_free(unsafe.Pointer(fn.vals))
		fn.vals = nil
	}
	return err
}

// cudaepOrtCompile compiles each fused group into a partition: it copies what the partition
// needs of the graph (which is invalid after Compile returns) and has it load the group's
// weights onto the device.
//
//export cudaepOrtCompile
func cudaepOrtCompile(e *C.CudaEpOrtEp, graphs **C.OrtGraph, fused **C.OrtNode, count C.size_t,
	infos **C.OrtNodeComputeInfo) (st *C.OrtStatus) {
	defer recoverInto(&st)
	s, err := epTable.Get(handles.Handle(e.handle))
	if err != nil {
		return statusOf(err)
	}
	gs, fs := unsafe.Slice(graphs, int(count)), unsafe.Slice(fused, int(count))
	out := unsafe.Slice(infos, int(count))
	made := make([]handles.Handle, 0, len(gs))
	fail := func(err error) *C.OrtStatus {
		for i, h := range made {
			_ = fusedNodeTable.Remove(h)
			C.cudaep_ort_free(unsafe.Pointer(out[i]))
			out[i] = nil
		}
		return statusOf(err)
	}
	for i := range gs {
		fn, err := s.compile(gs[i], fs[i])
		if err != nil {
			return fail(err)
		}
		h, err := fusedNodeTable.Insert(fn)
		if err != nil {
			_ = fn.close()
			return fail(err)
		}
		ci := C.cudaep_ort_new_compute_info(C.uint64_t(h))
		if ci == nil {
			_ = fusedNodeTable.Remove(h)
			return fail(fmt.Errorf("cudaep: out of host memory"))
		}
		made = append(made, h)
		out[i] = &ci.ci
	}
	return nil
}

// compile reads ORT's graph of one fused node (its nodes, inputs, outputs and initializers)
// and compiles it on the session.
func (s *session) compile(g *C.OrtGraph, fused *C.OrtNode) (*fusedNode, error) {
	fnode, err := readNode(fused, 0)
	if err != nil {
		return nil, err
	}
	nodes, _, err := readNodes(g)
	if err != nil {
		return nil, err
	}
	pg := partition.Graph{Name: fnode.Name}
	for i := range nodes {
		if nodes[i].Op == "" {
			return nil, fmt.Errorf("%w: node %s of domain %q is not CudaEp's", errInvalid, nodes[i].Name, nodes[i].domain)
		}
		pg.Nodes = append(pg.Nodes, nodes[i].Node)
	}
	for _, v := range fnode.Inputs {
		pg.Inputs = append(pg.Inputs, v.Name)
	}
	for _, v := range fnode.Outputs {
		pg.Outputs = append(pg.Outputs, v.Name)
	}
	if pg.Initializers, err = readInitializers(g); err != nil {
		return nil, fmt.Errorf("partition %s: %w", pg.Name, err)
	}
	pt, err := s.ps.Compile(pg)
	if err != nil {
		return nil, err
	}
	return &fusedNode{s: s, pt: pt}, nil
}

// cudaepOrtReleaseComputeInfo releases a fused node's partition and its C object.
//
//export cudaepOrtReleaseComputeInfo
func cudaepOrtReleaseComputeInfo(ci *C.CudaEpOrtComputeInfo) {
	defer recoverQuietly()
	if ci == nil {
		return
	}
	_ = fusedNodeTable.Remove(handles.Handle(ci.handle))
	C.cudaep_ort_free(unsafe.Pointer(ci))
}

// cudaepOrtCreateState checks that ORT runs the partition compiled for the node it names.
//
//export cudaepOrtCreateState
func cudaepOrtCreateState(ci *C.CudaEpOrtComputeInfo, ctx *C.OrtNodeComputeContext, state *unsafe.Pointer) (st *C.OrtStatus) {
	defer recoverInto(&st)
	fn, err := fusedNodeTable.Get(handles.Handle(ci.handle))
	if err != nil {
		return statusOf(err)
	}
	if name := goString(C.cudaep_ort_compute_context_name(ctx)); name != fn.pt.Name() {
		return statusOf(fmt.Errorf("cudaep: ORT asks to run node %q with the partition compiled for %q", name, fn.pt.Name()))
	}
	*state = unsafe.Pointer(ci)
	return nil
}
