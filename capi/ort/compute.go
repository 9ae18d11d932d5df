package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// cudaepOrtCompute runs the partition of a fused node with ORT's values (partition.Run).
//
//export cudaepOrtCompute
func cudaepOrtCompute(ci *C.CudaEpOrtComputeInfo, kc *C.OrtKernelContext) (st *C.OrtStatus) {
	defer recoverInto(&st)
	fn, err := fusedNodeTable.Get(handles.Handle(ci.handle))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(fn.pt.Run(ortCall{fn: fn, kc: kc}))
}

// ortCall is one Compute as the partition reads it: ORT's values, read into the fused node's
// memory (one call into the shim for all inputs, one for all outputs). The partition calls its
// methods with its lock held, which guards that memory.
type ortCall struct {
	fn *fusedNode
	kc *C.OrtKernelContext
}

// Inputs reads ORT's input values and the node's stream into the fused node's scratch: valid
// until the next run (their shapes too).
func (c ortCall) Inputs() ([]partition.Tensor, *ep.Provider, error) {
	fn := c.fn
	r, err := fn.values()
	if err != nil {
		return nil, nil, err
	}
	if err := fn.runError(C.cudaep_ort_run_inputs(c.kc, r), r); err != nil {
		return nil, nil, err
	}
	names := fn.pt.Inputs()
	if int(r.inputs) != len(names) || int(r.outputs) != len(fn.pt.Outputs()) {
		return nil, nil, fmt.Errorf("%w: partition %s was compiled for %d inputs and %d outputs, ORT passes %d and %d",
			errInvalid, fn.pt.Name(), len(names), len(fn.pt.Outputs()), int(r.inputs), int(r.outputs))
	}
	vs := unsafe.Slice(r.ins, len(names))
	total := 0
	for i := range vs {
		rank := int(vs[i].rank)
		if rank > maxRank {
			return nil, nil, fmt.Errorf("%w: input %q has rank %d, at most %d", ep.ErrUnsupported, names[i], rank, maxRank)
		}
		total += rank
	}
	if cap(fn.dims) < total {
		fn.dims = make([]int64, total)
	}
	dims := fn.dims[:total]
	ins := fn.ins[:0]
	for i := range vs {
		v := &vs[i]
		rank := int(v.rank)
		shape := dims[:rank:rank]
		dims = dims[rank:]
		for d := range shape {
			shape[d] = int64(v.dims[d])
		}
		ins = append(ins, partition.Tensor{Info: ep.TensorInfo{DType: ep.DType(v.elem), Shape: shape}, Data: v.data, OnDevice: v.on_cpu == 0})
	}
	fn.ins = ins
	// The stream ORT runs the node on: the session's own, another CudaEp stream (ORT's copies
	// on the device memory's provider), or none.
	return ins, streamProvider(r.stream, fn.s.p), nil
}

// Outputs has ORT allocate the outputs and returns them, in the fused node's scratch: valid
// until the next run.
func (c ortCall) Outputs(infos []ep.TensorInfo) ([]partition.Tensor, error) {
	fn := c.fn
	r := fn.vals // read by Inputs
	vs := unsafe.Slice(r.outs, len(infos))
	wide := false // a shape that does not fit the run's values
	for _, info := range infos {
		wide = wide || info.Rank() > maxRank
	}
	names := fn.pt.Outputs()
	if wide {
		// Rare: one call each.
		for j, info := range infos {
			dims := make([]C.int64_t, len(info.Shape)+1) // +1: never an empty slice to index
			for d, v := range info.Shape {
				dims[d] = C.int64_t(v)
			}
			v := &vs[j]
			if err := errorOf(C.cudaep_ort_kernel_output(c.kc, C.size_t(j), &dims[0], C.size_t(len(info.Shape)), &v.data, &v.on_cpu),
				fmt.Sprintf("allocate output %q", names[j])); err != nil {
				return nil, err
			}
		}
	} else {
		for j, info := range infos {
			v := &vs[j]
			v.rank = C.size_t(len(info.Shape))
			for d, x := range info.Shape {
				v.dims[d] = C.int64_t(x)
			}
		}
		if err := fn.runError(C.cudaep_ort_run_outputs(c.kc, r), r); err != nil {
			return nil, err
		}
	}
	outs := fn.outs[:0]
	for j, info := range infos {
		v := &vs[j]
		outs = append(outs, partition.Tensor{Info: info, Data: v.data, OnDevice: v.on_cpu == 0})
	}
	fn.outs = outs
	return outs, nil
}

// values returns the C memory the fused node's runs read ORT's values into, allocating it on
// the first run. Called with the partition's lock held.
func (fn *fusedNode) values() (*C.CudaEpOrtRun, error) {
	if fn.vals == nil {
		fn.vals = C.cudaep_ort_new_run(C.size_t(len(fn.pt.Inputs())), C.size_t(len(fn.pt.Outputs())))
		if fn.vals == nil {
			return nil, errors.New("cudaep: out of host memory")
		}
	}
	return fn.vals, nil
}

// runError turns the status of a run call into an error naming the value it was reading or
// making.
func (fn *fusedNode) runError(st *C.OrtStatus, r *C.CudaEpOrtRun) error {
	if st == nil {
		return nil
	}
	at := int(r.at)
	what := "count the partition's values"
	switch r.failed {
	case C.CUDAEP_ORT_RUN_INPUT:
		what = "read input " + strconv.Itoa(at)
		if ins := fn.pt.Inputs(); at < len(ins) {
			what = fmt.Sprintf("read input %q", ins[at])
		}
	case C.CUDAEP_ORT_RUN_STREAM:
		what = "read the node's stream"
	case C.CUDAEP_ORT_RUN_OUTPUT:
		what = "allocate output " + strconv.Itoa(at)
		if outs := fn.pt.Outputs(); at < len(outs) {
			what = fmt.Sprintf("allocate output %q", outs[at])
		}
	}
	return errorOf(st, what)
}
