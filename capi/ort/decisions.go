package ort

import (
	"slices"

	"github.com/cudaep/cudaep/ep"
)

// A run decides from the addresses of ORT's tensors which of them its kernels read and write in
// place and which captured graph it replays (direct): a map, a lookup in devmem's index per
// device tensor, an overlap check and a graph key, tens of microseconds for a decode step's 130
// tensors. A decode loop swaps two sets of cache buffers, so from its third step on every run
// repeats one of two earlier decisions: a partition remembers its last few (recentRuns) with
// what they were decided from, and a run with the same plan and tensors reuses one while the
// allocations its lookups found are still ORT's with the same extent.

// recentRuns is how many decisions a partition remembers: a decode loop alternates between two.
const recentRuns = 4

// tensorSig is what a decision reads of one of a run's tensors: a non-empty device tensor's
// address; nothing of a host or empty tensor, which a run never reads or writes in place (their
// addresses may change every run without changing the decision). The plan fixes every tensor's
// type and shape.
type tensorSig struct {
	addr  uint64
	onGPU bool
}

// sigOf is the signature of t, of n bytes.
func sigOf(t hostTensor, n uint64) tensorSig {
	if !t.onGPU || n == 0 {
		return tensorSig{}
	}
	return tensorSig{addr: uint64(uintptr(t.data)), onGPU: true}
}

// decision is what a run does with ORT's tensors: the plan buffers whose values it reads and
// writes in ORT's tensors instead (rm, nil: none), with CUDA graphs the key of its graph and,
// once captured, the graph's slot, and what follows for the copies (see copies). A decision is
// shared by the runs that reuse it: read only.
type decision struct {
	rm       map[ep.DevicePtr]ep.DevicePtr
	gk       string
	slot     ep.Slot
	captured bool

	copyIns   []int  // the non-empty inputs copied into the plan's buffers, by index
	copyOuts  []int  // the non-empty outputs copied out of them (or from ORT's tensor rm names)
	inPlace   uint64 // the non-empty inputs and outputs read or written in place
	deviceOut bool   // a non-empty output is in device memory
}

// copies fills in which inputs and outputs of plan pl the run copies: the non-empty ones the
// run does not read or write in place. An output is written in place when its plan buffer maps
// to its own device tensor.
func (d *decision) copies(pl *plan, outs []hostTensor) {
	for i, t := range pl.inputs {
		if pl.inBytes[i] == 0 {
			continue
		}
		if _, ok := d.rm[t.buf.Ptr()]; ok {
			d.inPlace++
		} else {
			d.copyIns = append(d.copyIns, i)
		}
	}
	for j, out := range outs {
		if pl.outBytes[j] == 0 {
			continue
		}
		d.deviceOut = d.deviceOut || out.onGPU
		if at, ok := d.rm[pl.outputs[j].buf.Ptr()]; ok && out.onGPU && at == ep.DevicePtr(uintptr(out.data)) {
			d.inPlace++
		} else {
			d.copyOuts = append(d.copyOuts, j)
		}
	}
}

// recentRun is a decision remembered with what it was decided from: the plan, the tensors'
// signatures (inputs then outputs) and what its lookups in devmem's index found. It holds while
// every allocation found is still in the index (their registrations live: an allocation's extent
// and device never change) and, when a lookup found nothing, while no allocation has been added
// since (one might hold the address now). A free and the reuse of the same allocation, as ORT
// does with a run's logits every step, keeps it; a free and another allocation at that address
// does not.
type recentRun struct {
	pl     *plan
	sig    []tensorSig
	regs   []*registration
	missed bool
	added  uint64 // devmem.added before the lookups, when one missed
	d      decision
}

// holds reports whether the decision still holds for its plan and tensors.
func (r *recentRun) holds() bool {
	if r.missed && devmem.added.Load() != r.added {
		return false
	}
	for _, g := range r.regs {
		if !g.live.Load() {
			return false
		}
	}
	return true
}

// lookups finds device tensors in devmem's index for a decision, recording what it found.
type lookups struct {
	regs    []*registration
	added   uint64 // devmem.added before the first lookup
	missed  bool   // a lookup found no allocation
	unknown bool   // one found an allocation without a registration: the decision is not kept
}

// find is lookup, recorded.
func (l *lookups) find(addr, n uint64) (devBuf, uint64, error) {
	b, off, err := lookup(addr, n)
	switch {
	case err != nil:
		l.missed = true
	case b.reg == nil:
		l.unknown = true
	default:
		l.regs = append(l.regs, b.reg)
	}
	return b, off, err
}

// decide returns the decision for a run of plan pl with these tensors: a remembered one that
// still holds, else a new one from direct, remembered when later runs may reuse it (without
// CUDA graphs always; with them once its graph is captured, or when it reads nothing in place:
// a plan's graphs are never removed while it lives, so neither the key nor the cap's answer
// changes). Called with pt.mu held; the decision's rm is valid as long as the partition.
func (pt *partition) decide(pl *plan, ins, outs []hostTensor) decision {
	sig := pt.sig[:0]
	for i, t := range ins {
		sig = append(sig, sigOf(t, pl.inBytes[i]))
	}
	for j, t := range outs {
		sig = append(sig, sigOf(t, pl.outBytes[j]))
	}
	pt.sig = sig
	for i := range pt.recent {
		if r := &pt.recent[i]; r.pl == pl && slices.Equal(r.sig, sig) && r.holds() {
			pt.reused++
			return r.d
		}
	}
	l := lookups{regs: pt.regs[:0], added: devmem.added.Load()}
	rm, gk := pt.direct(pl, ins, outs, &l)
	pt.regs = l.regs[:0]
	d := decision{rm: rm, gk: gk}
	d.copies(pl, outs)
	graphs := pt.s.opts.cudaGraph
	if graphs {
		d.slot, d.captured = pl.graphs[gk]
	}
	if !l.unknown && (!graphs || rm == nil || d.captured) {
		r := &pt.recent[pt.nextRecent]
		pt.nextRecent = (pt.nextRecent + 1) % recentRuns
		r.pl, r.d, r.missed, r.added = pl, d, l.missed, l.added
		r.sig = append(r.sig[:0], sig...)
		r.regs = append(r.regs[:0], l.regs...)
	}
	return d
}

// forget drops the partition's remembered decisions (its plans are going).
func (pt *partition) forget() {
	pt.recent = [recentRuns]recentRun{}
	pt.nextRecent = 0
}
