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
)

// cudaepOrtCompute runs a partition: the plan for the inputs' shapes reads ORT's device tensors
// in place and copies host ones into its buffers, runs the kernels (or replays the graph
// captured for these addresses), and writes the outputs into the device tensors ORT allocates
// (in place where a kernel makes them) or copies them there.
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

	// A capture forbids every other use of the provider's stream (the capture window), so a run
	// that captures excludes the session's other runs; every other run shares the session.
	s := pt.s
	unlock := s.runs.RUnlock
	s.runs.RLock()
	defer func() { unlock() }()
	pt.mu.Lock()
	pl, err := pt.planFor(infos)
	pt.mu.Unlock()
	if err != nil {
		return err
	}
	p := pt.s.p
	outs := make([]hostTensor, len(pl.outputs))
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
		if data == nil && out.info.Bytes() != 0 {
			return fmt.Errorf("%w: ORT gave output %q no memory", errInvalid, pt.outputs[j])
		}
		outs[j] = hostTensor{info: out.info, data: data, onGPU: onCPU == 0}
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	rm, gk := pt.direct(pl, ins, outs)
	if s.opts.cudaGraph {
		if _, ok := pl.graphs[gk]; !ok {
			// This run captures: take the session alone (and look again: another run may have
			// captured meanwhile).
			pt.mu.Unlock()
			s.runs.RUnlock()
			s.runs.Lock()
			unlock = s.runs.Unlock
			pt.mu.Lock()
			rm, gk = pt.direct(pl, ins, outs)
		}
	}
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
		if _, inPlace := rm[pl.inputs[i].buf.Ptr()]; inPlace {
			counters.inPlace.Add(1)
			continue
		}
		counters.copied.Add(1)
		if err := pt.copyIn(pl.inputs[i].buf, in, uint64(n)); err != nil {
			return fmt.Errorf("copy input %q into the partition: %w", pt.inputs[i], err)
		}
	}
	if err := pt.run(pl, rm, gk); err != nil {
		return err
	}
	deviceOut := false
	for j, out := range outs {
		n := uint64(out.info.Bytes())
		if n == 0 {
			continue
		}
		deviceOut = deviceOut || out.onGPU
		src := pl.outputs[j].buf.Ptr()
		at, moved := rm[src]
		if moved && at == ep.DevicePtr(uintptr(out.data)) {
			counters.inPlace.Add(1) // the plan wrote it in place
			continue
		}
		counters.copied.Add(1)
		if err := pt.copyOut(out, pl.outputs[j].buf, at, moved, n); err != nil {
			return fmt.Errorf("copy output %q out of the partition: %w", pt.outputs[j], err)
		}
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

// planFor returns the plan for the inputs' shapes, building it on the first run with them.
// Called with pt.mu held.
func (pt *partition) planFor(infos []ep.TensorInfo) (*plan, error) {
	key := shapeKey(infos)
	if pl := pt.plans[key]; pl != nil {
		return pl, nil
	}
	pl, err := pt.newPlan(infos)
	if err != nil {
		return nil, err
	}
	pt.plans[key] = pl
	return pl, nil
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

// copyOut copies a plan's output into the tensor ORT allocated for it: from the plan's buffer
// src or, when the plan read or wrote that value in place (moved), from ORT's tensor at at.
func (pt *partition) copyOut(out hostTensor, src *ep.Buffer, at ep.DevicePtr, moved bool, n uint64) error {
	p := pt.s.p
	srcOff := uint64(0)
	if moved {
		db, off, err := lookup(uint64(at), n)
		if err != nil {
			return err
		}
		src, srcOff = db.buf, off
	}
	if !out.onGPU {
		return p.CopyToHost(unsafe.Slice((*byte)(out.data), n), src, srcOff)
	}
	db, off, err := lookup(uint64(uintptr(out.data)), n)
	if err != nil {
		return err
	}
	return p.CopyBuffer(db.buf, off, src, srcOff, n)
}

// maxDirectGraphs bounds the graphs a plan captures for the device tensors ORT hands over (one
// per set of addresses: a decode loop that swaps two sets of cache buffers needs two). Beyond
// it, runs with other addresses copy through the plan's buffers and replay its first graph.
const maxDirectGraphs = 4

// direct decides which of ORT's device tensors this run reads and writes in place: it maps the
// plan buffer of each input, and of each output a kernel writes, to ORT's tensor (nil: copy
// everything). It does so only for tensors in CudaEp memory on the partition's device, never
// for a paging partition (its steps' addresses change per run), never when an output overlaps
// another tensor of the run, and with CUDA graphs only for a set of addresses the plan has
// captured or still may capture. With CUDA graphs it also returns the key of the graph for
// these addresses (directKey).
func (pt *partition) direct(pl *plan, ins, outs []hostTensor) (map[ep.DevicePtr]ep.DevicePtr, string) {
	rm := pt.inPlace(pl, ins, outs)
	if !pt.s.opts.cudaGraph {
		return rm, ""
	}
	if rm != nil {
		gk := directKey(pl, rm)
		if _, ok := pl.graphs[gk]; ok || len(pl.graphs) < maxDirectGraphs {
			return rm, gk
		}
	}
	return nil, directKey(pl, nil)
}

// inPlace is direct's map, whatever graphs the plan holds.
func (pt *partition) inPlace(pl *plan, ins, outs []hostTensor) map[ep.DevicePtr]ep.DevicePtr {
	if pt.w.paged != nil {
		return nil
	}
	type span struct {
		lo, hi uint64
		out    bool
	}
	var spans []span
	rm := map[ep.DevicePtr]ep.DevicePtr{}
	take := func(b *ep.Buffer, t hostTensor, out bool) {
		n := uint64(t.info.Bytes())
		if !t.onGPU || n == 0 {
			return
		}
		addr := uint64(uintptr(t.data))
		db, _, err := lookup(addr, n)
		if err != nil || db.ordinal != pt.s.opts.provider.DeviceID {
			return
		}
		if _, dup := rm[b.Ptr()]; dup {
			return
		}
		rm[b.Ptr()] = ep.DevicePtr(addr)
		spans = append(spans, span{addr, addr + n, out})
	}
	for i, in := range ins {
		take(pl.inputs[i].buf, in, false)
	}
	for j, out := range outs {
		if pl.written[pl.outputs[j].buf] {
			take(pl.outputs[j].buf, out, true)
		} else if n := uint64(out.info.Bytes()); out.onGPU && n > 0 {
			// Copied out once the kernels are queued, but it must not overlap a tensor they read.
			addr := uint64(uintptr(out.data))
			spans = append(spans, span{addr, addr + n, true})
		}
	}
	for a, x := range spans {
		for _, y := range spans[a+1:] {
			if (x.out || y.out) && x.lo < y.hi && y.lo < x.hi {
				return nil
			}
		}
	}
	if len(rm) == 0 {
		return nil
	}
	return rm
}

// directKey names a set of in-place addresses: the graph captured for it.
func directKey(pl *plan, rm map[ep.DevicePtr]ep.DevicePtr) string {
	b := make([]byte, 0, 12*(len(pl.inputs)+len(pl.outputs)))
	for _, ts := range [][]tensorBuf{pl.inputs, pl.outputs} {
		for _, t := range ts {
			b = strconv.AppendUint(b, uint64(rm[t.buf.Ptr()]), 16)
			b = append(b, ';')
		}
	}
	return string(b)
}

// run executes a plan: eagerly, or with CUDA graphs by capturing it on the first run with
// these in-place addresses (key gk) and replaying it afterwards (the plan's buffers are fixed,
// so a replay reads this run's inputs). rm maps plan buffers to the ORT tensors read and
// written in place (see direct).
func (pt *partition) run(pl *plan, rm map[ep.DevicePtr]ep.DevicePtr, gk string) error {
	p := pt.s.p
	if pt.w.paged != nil {
		return pt.w.paged.execute(pl)
	}
	if !pt.s.opts.cudaGraph {
		return pl.execute(rm)
	}
	slot, ok := pl.graphs[gk]
	if !ok {
		kernels := make([]*ep.Kernel, len(pl.steps))
		for i, st := range pl.steps {
			kernels[i] = st.k
		}
		retain := append([]*ep.Buffer(nil), pl.owned...)
		for _, w := range pt.w.resident {
			retain = append(retain, w.buf)
		}
		slot = pt.s.slotFor()
		if err := p.BeginCapture(slot, kernels, retain); err != nil {
			return err
		}
		if err := pl.execute(rm); err != nil {
			return errors.Join(err, p.AbortCapture(slot))
		}
		if err := p.EndCapture(slot); err != nil {
			return err
		}
		pl.graphs[gk] = slot
		counters.captures.Add(1)
	}
	if err := p.Replay(slot); err != nil {
		return err
	}
	counters.replays.Add(1)
	return nil
}

// execute queues the plan's kernels, reading and writing ORT's tensors in place of the plan
// buffers rm maps.
func (pl *plan) execute(rm map[ep.DevicePtr]ep.DevicePtr) error {
	for _, st := range pl.steps {
		ins, out := st.ins, st.out
		if len(rm) > 0 {
			ins, out = remap(pl.scratch[:0], st.ins, rm), remap(pl.scratch[len(st.ins):len(st.ins)], st.out, rm)
		}
		if err := st.k.Execute(ins, out); err != nil {
			return err
		}
	}
	return nil
}

// remap appends ts to dst with the addresses rm maps replaced.
func remap(dst, ts []ep.Tensor, rm map[ep.DevicePtr]ep.DevicePtr) []ep.Tensor {
	for _, t := range ts {
		if at, ok := rm[t.Ptr]; ok {
			t.Ptr = at
		}
		dst = append(dst, t)
	}
	return dst
}

// newPlan builds the kernels of every node for concrete input shapes, allocating the inputs',
// intermediates' and outputs' device buffers once.
func (pt *partition) newPlan(ins []ep.TensorInfo) (*plan, error) {
	p := pt.s.p
	pl := &plan{graphs: map[string]ep.Slot{}, written: map[*ep.Buffer]bool{}}
	width := 0
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
		ins := nd.Inputs
		for len(ins) > 0 && ins[len(ins)-1].Name == "" {
			ins = ins[:len(ins)-1]
		}
		outs := nd.Outputs
		for len(outs) > 0 && outs[len(outs)-1].Name == "" {
			outs = outs[:len(outs)-1]
		}
		spec := ep.Spec{Op: nd.Op, Opset: nd.Opset, Attrs: nd.Attrs, NumOutputs: len(outs)}
		st := step{layer: -1}
		if li, ok := layerOf[ni]; ok {
			st.layer = li
		}
		for i, v := range ins {
			if v.Const != nil {
				if spec.Consts == nil {
					spec.Consts = map[int]ep.Const{}
				}
				spec.Consts[i] = *v.Const
			}
			if info, ok := paged[v.Name]; ok && st.layer >= 0 {
				st.patches = append(st.patches, patch{arg: len(st.ins), off: pt.w.paged.layers[st.layer].offsets[v.Name]})
				spec.Inputs = append(spec.Inputs, info)
				st.ins = append(st.ins, ep.Tensor{TensorInfo: info})
				continue
			}
			t, ok := vals[v.Name]
			if !ok {
				return fail(fmt.Errorf("%w: node %s reads %q, which the partition does not produce", errInvalid, nd.Name, v.Name))
			}
			spec.Inputs = append(spec.Inputs, t.info)
			st.ins = append(st.ins, t.tensor())
		}
		k, err := p.GetKernel(spec)
		if err != nil {
			return fail(fmt.Errorf("node %s: %w", nd.Name, err))
		}
		// A view's output is its input's bytes: name them instead of copying (not for a paged
		// input, whose address is known only when its layer is in a slot).
		if k.View() && len(st.patches) == 0 && len(outs) == 1 && outs[0].Name != "" {
			in := vals[ins[0].Name]
			vals[outs[0].Name] = tensorBuf{info: k.Outputs()[0], buf: in.buf}
			continue
		}
		st.k = k
		for j, info := range k.Outputs() {
			t, err := alloc(info)
			if err != nil {
				return fail(err)
			}
			pl.written[t.buf] = true
			if j < len(outs) && outs[j].Name != "" {
				vals[outs[j].Name] = t
			} // else an optional output the node leaves out: the kernel's scratch
			st.out = append(st.out, t.tensor())
		}
		pl.steps = append(pl.steps, st)
		width = max(width, len(st.ins)+len(st.out))
	}
	pl.scratch = make([]ep.Tensor, 0, width)
	for _, name := range pt.outputs {
		t, ok := vals[name]
		if !ok {
			return fail(fmt.Errorf("%w: partition %s does not produce its output %q", errInvalid, pt.name, name))
		}
		pl.outputs = append(pl.outputs, t)
	}
	return pl, nil
}
