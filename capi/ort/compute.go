package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// cudaepOrtCompute runs a partition: it copies the inputs ORT hands over (CPU tensors) into the
// plan for their shapes, runs the kernels (or replays the captured graph), and copies the
// outputs into the tensors ORT allocates.
//
//export cudaepOrtCompute
func cudaepOrtCompute(ci *C.CudaEpOrtComputeInfo, kc *C.OrtKernelContext) (st *C.OrtStatus) {
	defer recoverInto(&st)
	pt, err := partitionTable.Get(handles.Handle(ci.handle))
	if err != nil {
		return statusOf(err)
	}
	return statusOf(pt.compute(kc))
}

// hostTensor is a tensor ORT handed over: in host memory, or in CudaEp's device memory.
type hostTensor struct {
	info  ep.TensorInfo
	data  unsafe.Pointer
	onGPU bool
}

func (pt *partition) compute(kc *C.OrtKernelContext) error {
	var nin, nout C.size_t
	if err := errorOf(C.cudaep_ort_kernel_counts(kc, &nin, &nout), "count the partition's values"); err != nil {
		return err
	}
	if int(nin) != len(pt.inputs) || int(nout) != len(pt.outputs) {
		return fmt.Errorf("%w: partition %s was compiled for %d inputs and %d outputs, ORT passes %d and %d",
			errInvalid, pt.name, len(pt.inputs), len(pt.outputs), int(nin), int(nout))
	}
	ins := make([]hostTensor, int(nin))
	infos := make([]ep.TensorInfo, int(nin))
	for i := range ins {
		var data unsafe.Pointer
		var elem, onCPU C.int
		var dims [maxRank]C.int64_t
		var rank C.size_t
		if err := errorOf(C.cudaep_ort_kernel_input(kc, C.size_t(i), &data, &elem, &dims[0], maxRank, &rank, &onCPU), "read an input"); err != nil {
			return err
		}
		if rank > maxRank {
			return fmt.Errorf("%w: input %q has rank %d, at most %d", ep.ErrUnsupported, pt.inputs[i], int(rank), maxRank)
		}
		shape := make([]int64, int(rank))
		for d := range shape {
			shape[d] = int64(dims[d])
		}
		infos[i] = ep.TensorInfo{DType: ep.DType(elem), Shape: shape}
		ins[i] = hostTensor{info: infos[i], data: data, onGPU: onCPU == 0}
	}

	// A capture forbids every other use of the provider's stream (the capture window), so the
	// run that captures excludes the session's other runs; every other run shares the session.
	s := pt.s
	key := shapeKey(infos)
	if s.opts.cudaGraph && !pt.captured(key) {
		s.runs.Lock()
		defer s.runs.Unlock()
	} else {
		s.runs.RLock()
		defer s.runs.RUnlock()
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pl := pt.plans[key]
	if pl == nil {
		var err error
		if pl, err = pt.newPlan(infos); err != nil {
			return err
		}
		pt.plans[key] = pl
	}
	p := pt.s.p
	// The stream ORT runs the node on: the session's own (nothing to order), another CudaEp
	// stream (ORT's copies on the device memory's provider: ordered with fences both ways), or
	// none (the run then completes before Compute returns).
	sp, err := kernelStream(kc, p)
	if err != nil {
		return err
	}
	if sp != nil && sp != p {
		if err := ep.OrderAfter(p, sp); err != nil {
			return err
		}
	}
	for i, in := range ins {
		n := in.info.Bytes()
		if n == 0 {
			continue
		}
		if err := pt.copyIn(pl.inputs[i].buf, in, uint64(n)); err != nil {
			return fmt.Errorf("copy input %q into the partition: %w", pt.inputs[i], err)
		}
	}
	if err := pt.run(pl); err != nil {
		return err
	}
	deviceOut := false
	for j, out := range pl.outputs {
		dims := make([]C.int64_t, len(out.info.Shape)+1) // +1: never an empty slice to index
		for d, v := range out.info.Shape {
			dims[d] = C.int64_t(v)
		}
		var data unsafe.Pointer
		var onCPU C.int
		if err := errorOf(C.cudaep_ort_kernel_output(kc, C.size_t(j), &dims[0], C.size_t(len(out.info.Shape)), &data, &onCPU), "allocate an output"); err != nil {
			return err
		}
		n := out.info.Bytes()
		if n == 0 {
			continue
		}
		if data == nil {
			return fmt.Errorf("%w: ORT gave output %q no memory", errInvalid, pt.outputs[j])
		}
		if onCPU != 0 {
			if err := p.CopyToHost(unsafe.Slice((*byte)(data), n), out.buf, 0); err != nil {
				return fmt.Errorf("copy output %q to the host: %w", pt.outputs[j], err)
			}
			continue
		}
		db, off, err := lookup(uint64(uintptr(data)), uint64(n))
		if err != nil {
			return fmt.Errorf("output %q: %w", pt.outputs[j], err)
		}
		if err := p.CopyBuffer(db.buf, off, out.buf, 0, uint64(n)); err != nil {
			return fmt.Errorf("copy output %q into ORT's device tensor: %w", pt.outputs[j], err)
		}
		deviceOut = true
	}
	switch {
	case deviceOut && sp == nil:
		// No stream: the work is done when Compute returns, so a consumer on another stream
		// (ORT's data transfer, the next partition) reads finished results.
		if err := p.SynchronizeCompute(); err != nil {
			return err
		}
	case sp != nil && sp != p:
		if err := ep.OrderAfter(sp, p); err != nil {
			return err
		}
	}
	counters.runs.Add(1)
	if sp != nil {
		counters.streamRuns.Add(1)
	}
	return nil
}

// copyIn copies an input ORT handed over into a plan buffer: from host memory, or from CudaEp
// device memory on the provider's stream.
func (pt *partition) copyIn(dst *ep.Buffer, in hostTensor, n uint64) error {
	p := pt.s.p
	if !in.onGPU {
		return p.CopyToDevice(dst, 0, unsafe.Slice((*byte)(in.data), n))
	}
	sb, off, err := lookup(uint64(uintptr(in.data)), n)
	if err != nil {
		return err
	}
	return p.CopyBuffer(dst, 0, sb.buf, off, n)
}

// captured reports whether the plan for key exists and holds a captured graph.
func (pt *partition) captured(key string) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pl := pt.plans[key]
	return pl != nil && pl.graph
}

// run executes a plan: eagerly, or with CUDA graphs by capturing it on first use and
// replaying it afterwards (the plan's buffers are fixed, so a replay reads this run's inputs).
func (pt *partition) run(pl *plan) error {
	p := pt.s.p
	if pt.w.paged != nil {
		return pt.w.paged.execute(pl)
	}
	if !pt.s.opts.cudaGraph {
		return pl.execute()
	}
	if !pl.graph {
		kernels := make([]*ep.Kernel, len(pl.steps))
		for i, st := range pl.steps {
			kernels[i] = st.k
		}
		retain := append([]*ep.Buffer(nil), pl.owned...)
		for _, w := range pt.w.resident {
			retain = append(retain, w.buf)
		}
		pl.slot = pt.s.slotFor()
		if err := p.BeginCapture(pl.slot, kernels, retain); err != nil {
			return err
		}
		if err := pl.execute(); err != nil {
			return errors.Join(err, p.AbortCapture(pl.slot))
		}
		if err := p.EndCapture(pl.slot); err != nil {
			return err
		}
		pl.graph = true
		counters.captures.Add(1)
	}
	if err := p.Replay(pl.slot); err != nil {
		return err
	}
	counters.replays.Add(1)
	return nil
}

func (pl *plan) execute() error {
	for _, st := range pl.steps {
		if err := st.k.Execute(st.ins, st.out); err != nil {
			return err
		}
	}
	return nil
}

// newPlan builds the kernels of every node for concrete input shapes, allocating the inputs',
// intermediates' and outputs' device buffers once.
func (pt *partition) newPlan(ins []ep.TensorInfo) (*plan, error) {
	p := pt.s.p
	pl := &plan{}
	vals := map[string]tensorBuf{}
	for name, w := range pt.w.resident {
		vals[name] = w
	}
	paged := map[string]ep.TensorInfo{} // initializers read from layers at run time
	layerOf := map[int]int{}            // node index → its layer
	if pw := pt.w.paged; pw != nil {
		for li, l := range pw.layers {
			layerOf[l.node] = li
		}
		paged = pw.infos
	}
	alloc := func(info ep.TensorInfo) (tensorBuf, error) {
		n := info.Bytes()
		if n <= 0 {
			n = 1
		}
		b, err := p.Alloc(uint64(n), 0)
		if err != nil {
			return tensorBuf{}, err
		}
		pl.owned = append(pl.owned, b)
		return tensorBuf{info: info, buf: b}, nil
	}
	fail := func(err error) (*plan, error) {
		return nil, errors.Join(err, pl.release(p))
	}
	for i, info := range ins {
		t, err := alloc(info)
		if err != nil {
			return fail(err)
		}
		vals[pt.inputs[i]] = t
		pl.inputs = append(pl.inputs, t)
	}
	for ni, nd := range pt.nodes {
		ins := presentInputs(&nd)
		op, ok := kernelOp(&nd, pt.opset)
		if !ok {
			return fail(fmt.Errorf("%w: node %s of domain %q is not CudaEp's", errInvalid, nd.name, nd.domain))
		}
		spec := ep.Spec{Op: op.name, Opset: op.opset, Attrs: nd.attrs, Consts: constsOf(ins),
			NumOutputs: len(presentOutputs(&nd))}
		st := step{layer: -1}
		if li, ok := layerOf[ni]; ok {
			st.layer = li
		}
		for _, v := range ins {
			if info, ok := paged[v.name]; ok && st.layer >= 0 {
				st.patches = append(st.patches, patch{arg: len(st.ins), off: pt.w.paged.layers[st.layer].offsets[v.name]})
				spec.Inputs = append(spec.Inputs, info)
				st.ins = append(st.ins, ep.Tensor{TensorInfo: info})
				continue
			}
			t, ok := vals[v.name]
			if !ok {
				return fail(fmt.Errorf("%w: node %s reads %q, which the partition does not produce", errInvalid, nd.name, v.name))
			}
			spec.Inputs = append(spec.Inputs, t.info)
			st.ins = append(st.ins, t.tensor())
		}
		k, err := p.GetKernel(spec)
		if err != nil {
			return fail(fmt.Errorf("node %s: %w", nd.name, err))
		}
		st.k = k
		for j, info := range k.Outputs() {
			t, err := alloc(info)
			if err != nil {
				return fail(err)
			}
			if j < len(nd.outputs) && nd.outputs[j].name != "" {
				vals[nd.outputs[j].name] = t
			} // else an optional output the node leaves out: the kernel's scratch
			st.out = append(st.out, t.tensor())
		}
		pl.steps = append(pl.steps, st)
	}
	for _, name := range pt.outputs {
		t, ok := vals[name]
		if !ok {
			return fail(fmt.Errorf("%w: partition %s does not produce its output %q", errInvalid, pt.name, name))
		}
		pl.outputs = append(pl.outputs, t)
	}
	return pl, nil
}
