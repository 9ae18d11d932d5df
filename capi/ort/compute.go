package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	engine "github.com/cudaep/cudaep/partition" // the planning engine; partition here is the adapter's compiled node
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

// compute runs the partition for ORT: it reads the values (one call into the shim for all
// inputs, one for all outputs), finds the plan and the run's decision, copies, runs or replays,
// and copies out. A run holds the session shared (exclusively while it captures) and the
// partition's lock throughout: the partition's scratch is the run's.
func (pt *partition) compute(kc *C.OrtKernelContext) error {
	// A capture forbids every other use of the provider's stream (the capture window), so a run
	// that captures excludes the session's other runs; every other run shares the session.
	clock := startPhases()
	s := pt.s
	unlock := s.runs.RUnlock
	s.runs.RLock()
	defer func() { unlock() }()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	r, err := pt.values()
	if err != nil {
		return err
	}
	if err := pt.runError(C.cudaep_ort_run_inputs(kc, r), r); err != nil {
		return err
	}
	if int(r.inputs) != len(pt.inputs) || int(r.outputs) != len(pt.outputs) {
		return fmt.Errorf("%w: partition %s was compiled for %d inputs and %d outputs, ORT passes %d and %d",
			errInvalid, pt.name, len(pt.inputs), len(pt.outputs), int(r.inputs), int(r.outputs))
	}
	clock.mark(phaseRead)
	p := s.p
	// The stream ORT runs the node on: the session's own (nothing to order), another CudaEp
	// stream (ORT's copies on the device memory's provider: ordered with fences both ways), or
	// none (the run then completes before Compute returns).
	sp := streamProvider(r.stream, p)
	ins, err := pt.readInputs(r)
	if err != nil {
		return err
	}
	pl, err := pt.planFor(ins)
	if err != nil {
		return err
	}
	outs, err := pt.makeOutputs(kc, r, pl)
	if err != nil {
		return err
	}
	clock.mark(phaseOutputs)
	d := pt.decide(pl, ins, outs)
	steady := d.captured
	if s.opts.cudaGraph && pt.w.paged == nil && !d.captured { // a paging partition never captures
		if _, ok := pl.graphs[d.gk]; !ok {
			// This run captures: take the session alone (and look again: another run may have
			// captured meanwhile). The partition's scratch is not this run's while its lock is
			// let go: keep copies of the tensors.
			ins, outs = detach(ins), detach(outs)
			pt.mu.Unlock()
			s.runs.RUnlock()
			s.runs.Lock()
			unlock = s.runs.Unlock
			pt.mu.Lock()
			d = pt.decide(pl, ins, outs)
		}
	}
	clock.mark(phaseDecide)
	if sp != nil && sp != p {
		if err := ep.OrderAfter(p, sp); err != nil {
			return err
		}
	}
	clock.mark(phaseFenceIn)
	counters.inPlace.Add(d.inPlace)
	counters.copied.Add(uint64(len(d.copyIns) + len(d.copyOuts)))
	for _, i := range d.copyIns {
		if err := pt.copyIn(pl.inputs[i].buf, ins[i], pl.inBytes[i]); err != nil {
			return fmt.Errorf("copy input %q into the partition: %w", pt.inputs[i], err)
		}
	}
	clock.mark(phaseCopyIn)
	if err := pt.run(pl, d); err != nil {
		return err
	}
	clock.mark(phaseRun)
	for _, j := range d.copyOuts {
		at, moved := d.rm[pl.outputs[j].buf.Ptr()]
		if err := pt.copyOut(outs[j], pl.outputs[j].buf, at, moved, pl.outBytes[j]); err != nil {
			return fmt.Errorf("copy output %q out of the partition: %w", pt.outputs[j], err)
		}
	}
	clock.mark(phaseCopyOut)
	switch {
	case d.deviceOut && sp == nil:
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
	clock.mark(phaseTail)
	clock.done(pt, steady)
	counters.runs.Add(1)
	if sp != nil {
		counters.streamRuns.Add(1)
	}
	return nil
}

// values returns the C memory the partition's runs read ORT's values into, allocating it on the
// first run. Called with pt.mu held.
func (pt *partition) values() (*C.CudaEpOrtRun, error) {
	if pt.vals == nil {
		pt.vals = C.cudaep_ort_new_run(C.size_t(len(pt.inputs)), C.size_t(len(pt.outputs)))
		if pt.vals == nil {
			return nil, errors.New("cudaep: out of host memory")
		}
	}
	return pt.vals, nil
}

// runError turns the status of a run call into an error naming the value it was reading or
// making.
func (pt *partition) runError(st *C.OrtStatus, r *C.CudaEpOrtRun) error {
	if st == nil {
		return nil
	}
	at := int(r.at)
	what := "count the partition's values"
	switch r.failed {
	case C.CUDAEP_ORT_RUN_INPUT:
		what = "read input " + strconv.Itoa(at)
		if at < len(pt.inputs) {
			what = fmt.Sprintf("read input %q", pt.inputs[at])
		}
	case C.CUDAEP_ORT_RUN_STREAM:
		what = "read the node's stream"
	case C.CUDAEP_ORT_RUN_OUTPUT:
		what = "allocate output " + strconv.Itoa(at)
		if at < len(pt.outputs) {
			what = fmt.Sprintf("allocate output %q", pt.outputs[at])
		}
	}
	return errorOf(st, what)
}

// readInputs turns the inputs cudaep_ort_run_inputs read into tensors, in the partition's
// scratch: valid until the next run (their shapes too). Called with pt.mu held.
func (pt *partition) readInputs(r *C.CudaEpOrtRun) ([]hostTensor, error) {
	vs := unsafe.Slice(r.ins, len(pt.inputs))
	total := 0
	for i := range vs {
		rank := int(vs[i].rank)
		if rank > maxRank {
			return nil, fmt.Errorf("%w: input %q has rank %d, at most %d", ep.ErrUnsupported, pt.inputs[i], rank, maxRank)
		}
		total += rank
	}
	if cap(pt.dims) < total {
		pt.dims = make([]int64, total)
	}
	dims := pt.dims[:total]
	ins := pt.ins[:0]
	for i := range vs {
		v := &vs[i]
		rank := int(v.rank)
		shape := dims[:rank:rank]
		dims = dims[rank:]
		for d := range shape {
			shape[d] = int64(v.dims[d])
		}
		ins = append(ins, hostTensor{info: ep.TensorInfo{DType: ep.DType(v.elem), Shape: shape}, data: v.data, onGPU: v.on_cpu == 0})
	}
	pt.ins = ins
	return ins, nil
}

// makeOutputs has ORT allocate the outputs of plan pl and returns them as tensors, in the
// partition's scratch: valid until the next run. Called with pt.mu held.
func (pt *partition) makeOutputs(kc *C.OrtKernelContext, r *C.CudaEpOrtRun, pl *plan) ([]hostTensor, error) {
	vs := unsafe.Slice(r.outs, len(pl.outputs))
	if pl.wide {
		// Rare: shapes that do not fit the run's values, one call each.
		for j, out := range pl.outputs {
			dims := make([]C.int64_t, len(out.info.Shape)+1) // +1: never an empty slice to index
			for d, v := range out.info.Shape {
				dims[d] = C.int64_t(v)
			}
			v := &vs[j]
			if err := errorOf(C.cudaep_ort_kernel_output(kc, C.size_t(j), &dims[0], C.size_t(len(out.info.Shape)), &v.data, &v.on_cpu),
				fmt.Sprintf("allocate output %q", pt.outputs[j])); err != nil {
				return nil, err
			}
		}
	} else {
		for j, out := range pl.outputs {
			v := &vs[j]
			v.rank = C.size_t(len(out.info.Shape))
			for d, x := range out.info.Shape {
				v.dims[d] = C.int64_t(x)
			}
		}
		if err := pt.runError(C.cudaep_ort_run_outputs(kc, r), r); err != nil {
			return nil, err
		}
	}
	outs := pt.outs[:0]
	for j, out := range pl.outputs {
		v := &vs[j]
		if v.data == nil && pl.outBytes[j] != 0 {
			return nil, fmt.Errorf("%w: ORT gave output %q no memory", errInvalid, pt.outputs[j])
		}
		outs = append(outs, hostTensor{info: out.info, data: v.data, onGPU: v.on_cpu == 0})
	}
	pt.outs = outs
	return outs, nil
}

// detach copies tensors out of the partition's scratch, shapes included.
func detach(ts []hostTensor) []hostTensor {
	out := slices.Clone(ts)
	for i := range out {
		out[i].info.Shape = slices.Clone(out[i].info.Shape)
	}
	return out
}

// planFor returns the plan for the inputs' types and shapes: the last run's when they match,
// else the one built for them, built now on the first run with them (the plan keeps copies of
// the shapes). Called with pt.mu held.
func (pt *partition) planFor(ins []hostTensor) (*plan, error) {
	if pl := pt.last; pl != nil && pl.takes(ins) {
		return pl, nil
	}
	pt.key = appendShapeKey(pt.key[:0], ins)
	pl := pt.plans[string(pt.key)]
	if pl == nil {
		infos := make([]ep.TensorInfo, len(ins))
		for i, t := range ins {
			infos[i] = ep.TensorInfo{DType: t.info.DType, Shape: slices.Clone(t.info.Shape)}
		}
		var err error
		if pl, err = pt.newPlan(infos); err != nil {
			return nil, err
		}
		pt.plans[string(pt.key)] = pl
	}
	pt.last = pl
	return pl, nil
}

// takes reports whether the plan is for these inputs' types and shapes.
func (pl *plan) takes(ins []hostTensor) bool {
	if len(ins) != len(pl.inputs) {
		return false
	}
	for i, t := range ins {
		if w := pl.inputs[i].info; t.info.DType != w.DType || !slices.Equal(t.info.Shape, w.Shape) {
			return false
		}
	}
	return true
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
// it, runs with other addresses copy through the plan's buffers and replay the one graph
// captured for that.
const maxDirectGraphs = 4

// direct decides which of ORT's device tensors this run reads and writes in place: it maps the
// plan buffer of each input, and of each output a kernel writes, to ORT's tensor (nil: copy
// everything). It does so only for tensors in CudaEp memory on the partition's device, never
// for a paging partition (its steps' addresses change per run), never when an output overlaps
// another tensor of the run, and with CUDA graphs only for a set of addresses the plan has
// captured or still may capture. With CUDA graphs it also returns the key of the graph for
// these addresses (directKey). Its lookups in devmem's index go through l (see decide).
func (pt *partition) direct(pl *plan, ins, outs []hostTensor, l *lookups) (map[ep.DevicePtr]ep.DevicePtr, string) {
	rm := pt.inPlace(pl, ins, outs, l)
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
func (pt *partition) inPlace(pl *plan, ins, outs []hostTensor, l *lookups) map[ep.DevicePtr]ep.DevicePtr {
	if pt.w.paged != nil {
		return nil
	}
	var spans []engine.Span
	rm := map[ep.DevicePtr]ep.DevicePtr{}
	// take maps b to t's device memory and returns the index of its span, or -1.
	take := func(b *ep.Buffer, t hostTensor, out bool) int {
		n := uint64(t.info.Bytes())
		if !t.onGPU || n == 0 {
			return -1
		}
		addr := uint64(uintptr(t.data))
		db, _, err := l.find(addr, n)
		if err != nil || db.ordinal != pt.s.opts.provider.DeviceID {
			return -1
		}
		if _, dup := rm[b.Ptr()]; dup {
			return -1
		}
		rm[b.Ptr()] = ep.DevicePtr(addr)
		spans = append(spans, engine.Span{Lo: addr, Hi: addr + n, Output: out})
		return len(spans) - 1
	}
	inSpan := make([]int, len(ins)) // each input's span, -1 when copied
	for i, in := range ins {
		inSpan[i] = take(pl.inputs[i].buf, in, false)
	}
	for j, out := range outs {
		if i := pl.sharedInput(j, ins, out, inSpan, spans); i >= 0 {
			// The output is input i's memory, and may be: the kernel that writes it writes
			// that memory in place, and its span now counts as an output's.
			rm[pl.outputs[j].buf.Ptr()] = ep.DevicePtr(uintptr(out.data))
			spans[inSpan[i]].Output = true
			continue
		}
		if pl.written[pl.outputs[j].buf] {
			take(pl.outputs[j].buf, out, true)
		} else if n := uint64(out.info.Bytes()); out.onGPU && n > 0 {
			// Copied out once the kernels are queued, but it must not overlap a tensor they read.
			addr := uint64(uintptr(out.data))
			spans = append(spans, engine.Span{Lo: addr, Hi: addr + n, Output: true})
		}
	}
	if len(rm) == 0 || engine.OutputOverlaps(spans) {
		return nil
	}
	return rm
}

// sharedInput returns the input whose memory output j of the run is, when the plan lets the
// output be written there (findShares) and no other output took it already: the same device
// address and size as an input the run reads in place (inSpan[i] >= 0). Else -1.
func (pl *plan) sharedInput(j int, ins []hostTensor, out hostTensor, inSpan []int, spans []engine.Span) int {
	if j >= len(pl.shares) || !out.onGPU {
		return -1
	}
	for _, i := range pl.shares[j] {
		if inSpan[i] < 0 || spans[inSpan[i]].Output || ins[i].data != out.data || ins[i].info.Bytes() != out.info.Bytes() {
			continue
		}
		return i
	}
	return -1
}

// findShares fills pl.shares: output j may be the memory of input i when the one step that
// writes it reads input i only through operands its kernel may run in place on for that output
// (ep.Kernel's InPlace: an elementwise op or Where of the output's shape, a cudaep.WherePair's
// own X or Y), no later step reads input i, and input i is not itself an output. The run then
// computes what it would with the input copied first: every read of the input's elements
// happens before, or in the same thread as, the write of the same element. A key/value cache
// bound as both a step's past and its present (one set of buffers instead of two swapped) is
// updated in place so.
func (pl *plan) findShares() {
	pl.shares = make([][]int, len(pl.outputs))
	for j, o := range pl.outputs {
		if !pl.written[o.buf] {
			continue
		}
		w, out := -1, -1 // the step that writes o, and which of its outputs o is
		for si, st := range pl.steps {
			if k := slices.IndexFunc(st.out, func(t ep.Tensor) bool { return t.Ptr == o.buf.Ptr() }); k >= 0 {
				w, out = si, k
				break
			}
		}
		if w < 0 {
			continue
		}
		for i, in := range pl.inputs {
			if pl.sharable(w, out, in.buf) {
				pl.shares[j] = append(pl.shares[j], i)
			}
		}
	}
}

// sharable reports whether output out of step w may be written into the memory of b, a buffer
// of the plan's inputs: see findShares.
func (pl *plan) sharable(w, out int, b *ep.Buffer) bool {
	st, reads := pl.steps[w], false
	for m, t := range st.ins {
		if t.Ptr == b.Ptr() {
			if !st.k.InPlace(out, m) {
				return false
			}
			reads = true
		}
	}
	if !reads {
		return false
	}
	for _, later := range pl.steps[w+1:] {
		if slices.ContainsFunc(later.ins, func(t ep.Tensor) bool { return t.Ptr == b.Ptr() }) {
			return false
		}
	}
	return !slices.ContainsFunc(pl.outputs, func(o tensorBuf) bool { return o.buf == b })
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
// these in-place addresses (d.gk) and replaying it afterwards (the plan's buffers are fixed,
// so a replay reads this run's inputs). d.rm maps plan buffers to the ORT tensors read and
// written in place (see direct).
func (pt *partition) run(pl *plan, d decision) error {
	p := pt.s.p
	if pt.w.paged != nil {
		return pt.w.paged.execute(pl)
	}
	if !pt.s.opts.cudaGraph {
		return pl.execute(d.rm)
	}
	slot, ok := d.slot, d.captured
	if !ok {
		slot, ok = pl.graphs[d.gk]
	}
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
		if err := pl.execute(d.rm); err != nil {
			return errors.Join(err, p.AbortCapture(slot))
		}
		if err := p.EndCapture(slot); err != nil {
			return err
		}
		pl.graphs[d.gk] = slot
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
			for _, ni := range l.nodes {
				layerOf[ni] = li
			}
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
		pl.inBytes = append(pl.inBytes, uint64(info.Bytes()))
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
		spec := ep.Spec{Name: nd.Name, Op: nd.Op, Opset: nd.Opset, Attrs: nd.Attrs, NumOutputs: len(outs)}
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
		pl.outBytes = append(pl.outBytes, uint64(t.info.Bytes()))
		pl.wide = pl.wide || t.info.Rank() > maxRank
	}
	pl.findShares()
	return pl, nil
}
