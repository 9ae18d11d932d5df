package partition

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
)

// A Call is one run of a partition as its host hands it over. Run calls Inputs, then Outputs
// once it knows the plan's output types, both with the partition locked: the host may read its
// values into memory it keeps per partition, valid until the next run.
type Call interface {
	// Inputs returns the run's inputs, in the partition's order, and the provider whose stream
	// the host runs the partition on: nil for none (a run that writes device memory then
	// finishes before Run returns), the session's provider (nothing to order), or another
	// (the run is fenced after that stream's work, and that stream's later work after the run).
	Inputs() ([]Tensor, *ep.Provider, error)
	// Outputs returns the run's outputs, allocated by the host for these types and shapes.
	Outputs(infos []ep.TensorInfo) ([]Tensor, error)
}

// Run runs the partition once: the plan for the inputs' shapes reads the host's device tensors
// in place and copies host ones into its buffers, runs the kernels (or replays the graph
// captured for these addresses), and writes the outputs into the host's device tensors (in
// place where a kernel makes them) or copies them there. A run holds the session shared
// (exclusively while it captures a graph) and the partition's lock throughout: the
// partition's scratch is the run's.
func (pt *Partition) Run(c Call) error {
	// A capture forbids every other use of the provider's stream (the capture window), so a run
	// that captures excludes the session's other runs; every other run shares the session.
	clock := startPhases()
	s := pt.s
	unlock := s.runs.RUnlock
	s.runs.RLock()
	defer func() { unlock() }()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	ins, stream, err := c.Inputs()
	if err != nil {
		return err
	}
	if len(ins) != len(pt.inputs) {
		return fmt.Errorf("%w: partition %s takes %d inputs, the run gives %d", ep.ErrInvalidArgument, pt.name, len(pt.inputs), len(ins))
	}
	clock.mark(phaseRead)
	p := s.p
	pl, err := pt.planFor(ins)
	if err != nil {
		return err
	}
	outs, err := c.Outputs(pl.outInfo)
	if err != nil {
		return err
	}
	if len(outs) != len(pl.outputs) {
		return fmt.Errorf("%w: partition %s makes %d outputs, the run gives %d", ep.ErrInvalidArgument, pt.name, len(pl.outputs), len(outs))
	}
	for j, out := range outs {
		if out.Data == nil && pl.outBytes[j] != 0 {
			return fmt.Errorf("%w: the host gave output %q no memory", ep.ErrInvalidArgument, pt.outputs[j])
		}
	}
	clock.mark(phaseOutputs)
	d := pt.decide(pl, ins, outs)
	steady := d.captured
	if s.opts.CUDAGraph && pt.w.paged == nil && !d.captured { // a paging partition never captures
		if _, ok := pl.graphs[d.graphKey]; !ok {
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
	if stream != nil && stream != p {
		if err := ep.OrderAfter(p, stream); err != nil {
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
	if err := pt.execute(pl, d); err != nil {
		return err
	}
	clock.mark(phaseRun)
	for _, j := range d.copyOuts {
		at, moved := d.bound[pl.outputs[j].buf.Ptr()]
		if err := pt.copyOut(outs[j], pl.outputs[j].buf, at, moved, pl.outBytes[j]); err != nil {
			return fmt.Errorf("copy output %q out of the partition: %w", pt.outputs[j], err)
		}
	}
	clock.mark(phaseCopyOut)
	switch {
	case d.deviceOut && stream == nil:
		// No stream: the work is done when Run returns, so a consumer on another stream (the
		// host's data transfer, the next partition) reads finished results.
		if err := p.SynchronizeCompute(); err != nil {
			return err
		}
	case stream != nil && stream != p:
		if err := ep.OrderAfter(stream, p); err != nil {
			return err
		}
	}
	clock.mark(phaseTail)
	clock.done(pt, steady)
	counters.runs.Add(1)
	if stream != nil {
		counters.streamRuns.Add(1)
	}
	return nil
}

// detach copies tensors out of the host's scratch, shapes included.
func detach(ts []Tensor) []Tensor {
	out := slices.Clone(ts)
	for i := range out {
		out[i].Info.Shape = slices.Clone(out[i].Info.Shape)
	}
	return out
}

// copyIn copies an input the host handed over into a plan buffer: from host memory, or from
// device memory in the session's Memory on the provider's stream.
func (pt *Partition) copyIn(dst *ep.Buffer, in Tensor, n uint64) error {
	p := pt.s.p
	if !in.OnDevice {
		return p.CopyToDevice(dst, 0, unsafe.Slice((*byte)(in.Data), n))
	}
	a, off, err := pt.s.mem.Find(in.addr(), n)
	if err != nil {
		return err
	}
	return p.CopyBuffer(dst, 0, a.Buf, off, n)
}

// copyOut copies a plan's output into the host's tensor for it: from the plan's buffer src or,
// when the plan read or wrote that value in place (moved), from the host's tensor at at.
func (pt *Partition) copyOut(out Tensor, src *ep.Buffer, at ep.DevicePtr, moved bool, n uint64) error {
	p := pt.s.p
	srcOff := uint64(0)
	if moved {
		a, off, err := pt.s.mem.Find(uint64(at), n)
		if err != nil {
			return err
		}
		src, srcOff = a.Buf, off
	}
	if !out.OnDevice {
		return p.CopyToHost(unsafe.Slice((*byte)(out.Data), n), src, srcOff)
	}
	a, off, err := pt.s.mem.Find(out.addr(), n)
	if err != nil {
		return err
	}
	return p.CopyBuffer(a.Buf, off, src, srcOff, n)
}

// execute runs a plan: eagerly, or with CUDA graphs by capturing it on the first run with these
// in-place addresses (d.graphKey) and replaying it afterwards (the plan's buffers are fixed, so
// a replay reads this run's inputs); a paging partition streams its layers (pagedWeights).
// d.bound maps plan buffers to the host tensors read and written in place (see bind).
func (pt *Partition) execute(pl *plan, d decision) error {
	p := pt.s.p
	if pt.w.paged != nil {
		return pt.w.paged.execute(pl)
	}
	if !pt.s.opts.CUDAGraph {
		return pl.execute(d.bound)
	}
	slot, ok := d.slot, d.captured
	if !ok {
		slot, ok = pl.graphs[d.graphKey]
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
		if err := pl.execute(d.bound); err != nil {
			return errors.Join(err, p.AbortCapture(slot))
		}
		if err := p.EndCapture(slot); err != nil {
			return err
		}
		pl.graphs[d.graphKey] = slot
		counters.captures.Add(1)
	}
	if err := p.Replay(slot); err != nil {
		return err
	}
	counters.replays.Add(1)
	return nil
}
