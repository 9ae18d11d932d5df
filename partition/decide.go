package partition

import (
	"slices"
	"strconv"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
)

// Tensor is a run's input or output as the host hands it over: its type and shape, and its
// bytes, in host memory (Data is a pointer the run reads or writes) or in device memory
// (OnDevice: Data is a device address, never dereferenced, which the session's Memory may
// know).
type Tensor struct {
	Info     ep.TensorInfo
	Data     unsafe.Pointer
	OnDevice bool
}

// addr is the tensor's address as a number.
func (t Tensor) addr() uint64 { return uint64(uintptr(t.Data)) }

// A run decides from the addresses of the host's tensors which of them its kernels read and
// write in place (bound to the plan's buffers) and which captured graph it replays: a map, a
// lookup in the session's Memory per device tensor, an overlap check and a graph key, tens of
// microseconds for a decode step's 130 tensors. A decode loop swaps two sets of cache buffers,
// so from its third step on every run repeats one of two earlier decisions: a partition
// remembers its last few (recentRuns) with what they were decided from, and a run with the
// same plan and tensors reuses one while the allocations its lookups found are still the
// host's with the same extent.

// recentRuns is how many decisions a partition remembers: a decode loop alternates between two.
const recentRuns = 4

// maxBoundGraphs bounds the graphs a plan captures for the device tensors the host hands over
// (one per set of addresses: a decode loop that swaps two sets of cache buffers needs two).
// Beyond it, runs with other addresses copy through the plan's buffers and replay the one graph
// captured for that.
const maxBoundGraphs = 4

// tensorSig is what a decision reads of one of a run's tensors: a non-empty device tensor's
// address; nothing of a host or empty tensor, which a run never reads or writes in place (their
// addresses may change every run without changing the decision). The plan fixes every tensor's
// type and shape.
type tensorSig struct {
	addr     uint64
	onDevice bool
}

// sigOf is the signature of t, of n bytes.
func sigOf(t Tensor, n uint64) tensorSig {
	if !t.OnDevice || n == 0 {
		return tensorSig{}
	}
	return tensorSig{addr: t.addr(), onDevice: true}
}

// decision is what a run does with the host's tensors: the plan buffers whose values it reads
// and writes in the host's tensors instead (bound, nil: none), with CUDA graphs the key of its
// graph and, once captured, the graph's slot, and what follows for the copies (see copies). A
// decision is shared by the runs that reuse it: read only.
type decision struct {
	bound    map[ep.DevicePtr]ep.DevicePtr
	graphKey string
	slot     ep.Slot
	captured bool

	copyIns   []int  // the non-empty inputs copied into the plan's buffers, by index
	copyOuts  []int  // the non-empty outputs copied out of them (or from the tensor bound names)
	inPlace   uint64 // the non-empty inputs and outputs read or written in place
	deviceOut bool   // a non-empty output is in device memory
}

// copies fills in which inputs and outputs of plan pl the run copies: the non-empty ones the
// run does not read or write in place. An output is written in place when its plan buffer is
// bound to its own device tensor.
func (d *decision) copies(pl *plan, outs []Tensor) {
	for i, t := range pl.inputs {
		if pl.inBytes[i] == 0 {
			continue
		}
		if _, ok := d.bound[t.buf.Ptr()]; ok {
			d.inPlace++
		} else {
			d.copyIns = append(d.copyIns, i)
		}
	}
	for j, out := range outs {
		if pl.outBytes[j] == 0 {
			continue
		}
		d.deviceOut = d.deviceOut || out.OnDevice
		if at, ok := d.bound[pl.outputs[j].buf.Ptr()]; ok && out.OnDevice && at == ep.DevicePtr(out.addr()) {
			d.inPlace++
		} else {
			d.copyOuts = append(d.copyOuts, j)
		}
	}
}

// recentRun is a decision remembered with what it was decided from: the plan, the tensors'
// signatures (inputs then outputs) and what its lookups in the Memory found. It holds while
// every allocation found is still in the index (their registrations live: an allocation's
// extent and device never change) and, when a lookup found nothing, while no allocation has
// been added since (one might hold the address now). A free and the reuse of the same
// allocation, as ONNX Runtime does with a run's logits every step, keeps it; a free and
// another allocation at that address does not.
type recentRun struct {
	pl     *plan
	sig    []tensorSig
	regs   []*registration
	missed bool
	added  uint64 // Memory.added before the lookups, when one missed
	d      decision
}

// holds reports whether the decision still holds for its plan and tensors, in mem.
func (r *recentRun) holds(mem *Memory) bool {
	if r.missed && mem.added.Load() != r.added {
		return false
	}
	for _, g := range r.regs {
		if !g.live.Load() {
			return false
		}
	}
	return true
}

// lookups finds device tensors in a Memory for a decision, recording what it found.
type lookups struct {
	mem     *Memory
	regs    []*registration
	added   uint64 // mem.added before the first lookup
	missed  bool   // a lookup found no allocation
	unknown bool   // one found an allocation without a registration: the decision is not kept
}

// find is Memory.Find, recorded.
func (l *lookups) find(addr, n uint64) (Allocation, uint64, error) {
	a, off, err := l.mem.Find(addr, n)
	switch {
	case err != nil:
		l.missed = true
	case a.reg == nil:
		l.unknown = true
	default:
		l.regs = append(l.regs, a.reg)
	}
	return a, off, err
}

// decide returns the decision for a run of plan pl with these tensors: a remembered one that
// still holds, else a new one from bind, remembered when later runs may reuse it (without CUDA
// graphs always; with them once its graph is captured, or when it reads nothing in place: a
// plan's graphs are never removed while it lives, so neither the key nor the cap's answer
// changes). Called with pt.mu held; the decision's map is valid as long as the partition.
func (pt *Partition) decide(pl *plan, ins, outs []Tensor) decision {
	sig := pt.sig[:0]
	for i, t := range ins {
		sig = append(sig, sigOf(t, pl.inBytes[i]))
	}
	for j, t := range outs {
		sig = append(sig, sigOf(t, pl.outBytes[j]))
	}
	pt.sig = sig
	mem := pt.s.mem
	for i := range pt.recent {
		if r := &pt.recent[i]; r.pl == pl && slices.Equal(r.sig, sig) && r.holds(mem) {
			pt.reused++
			return r.d
		}
	}
	l := lookups{mem: mem, regs: pt.regs[:0], added: mem.added.Load()}
	bound, key := pt.bind(pl, ins, outs, &l)
	pt.regs = l.regs[:0]
	d := decision{bound: bound, graphKey: key}
	d.copies(pl, outs)
	graphs := pt.s.opts.CUDAGraph
	if graphs {
		d.slot, d.captured = pl.graphs[key]
	}
	if !l.unknown && (!graphs || bound == nil || d.captured) {
		r := &pt.recent[pt.nextRecent]
		pt.nextRecent = (pt.nextRecent + 1) % recentRuns
		r.pl, r.d, r.missed, r.added = pl, d, l.missed, l.added
		r.sig = append(r.sig[:0], sig...)
		r.regs = append(r.regs[:0], l.regs...)
	}
	return d
}

// forget drops the partition's remembered decisions (its plans are going).
func (pt *Partition) forget() {
	pt.recent = [recentRuns]recentRun{}
	pt.nextRecent = 0
}

// bind decides which of the host's device tensors this run reads and writes in place: it maps
// the plan buffer of each input, and of each output a kernel writes, to the host's tensor (nil:
// copy everything). It does so only for tensors in the session's Memory on the partition's
// device, never for a paging partition (its steps' addresses change per run), never when an
// output overlaps another tensor of the run, and with CUDA graphs only for a set of addresses
// the plan has captured or still may capture (maxBoundGraphs). With CUDA graphs it also returns
// the key of the graph for these addresses (graphKey). Its lookups go through l (see decide).
func (pt *Partition) bind(pl *plan, ins, outs []Tensor, l *lookups) (map[ep.DevicePtr]ep.DevicePtr, string) {
	bound := pt.bindable(pl, ins, outs, l)
	if !pt.s.opts.CUDAGraph {
		return bound, ""
	}
	if bound != nil {
		key := graphKey(pl, bound)
		if _, ok := pl.graphs[key]; ok || len(pl.graphs) < maxBoundGraphs {
			return bound, key
		}
	}
	return nil, graphKey(pl, nil)
}

// bindable is bind's map, whatever graphs the plan holds.
func (pt *Partition) bindable(pl *plan, ins, outs []Tensor, l *lookups) map[ep.DevicePtr]ep.DevicePtr {
	if pt.w.paged != nil {
		return nil
	}
	var spans []span
	bound := map[ep.DevicePtr]ep.DevicePtr{}
	device := pt.s.p.Options().DeviceID
	// take binds b to t's device memory and returns the index of its span, or -1.
	take := func(b *ep.Buffer, t Tensor, out bool) int {
		n := uint64(t.Info.Bytes())
		if !t.OnDevice || n == 0 {
			return -1
		}
		addr := t.addr()
		a, _, err := l.find(addr, n)
		if err != nil || a.Ordinal != device {
			return -1
		}
		if _, dup := bound[b.Ptr()]; dup {
			return -1
		}
		bound[b.Ptr()] = ep.DevicePtr(addr)
		spans = append(spans, span{Lo: addr, Hi: addr + n, Output: out})
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
			bound[pl.outputs[j].buf.Ptr()] = ep.DevicePtr(out.addr())
			spans[inSpan[i]].Output = true
			continue
		}
		if pl.written[pl.outputs[j].buf] {
			take(pl.outputs[j].buf, out, true)
		} else if n := uint64(out.Info.Bytes()); out.OnDevice && n > 0 {
			// Copied out once the kernels are queued, but it must not overlap a tensor they read.
			addr := out.addr()
			spans = append(spans, span{Lo: addr, Hi: addr + n, Output: true})
		}
	}
	if len(bound) == 0 || outputOverlaps(spans) {
		return nil
	}
	return bound
}

// sharedInput returns the input whose memory output j of the run is, when the plan lets the
// output be written there (findShares) and no other output took it already: the same device
// address and size as an input the run reads in place (inSpan[i] >= 0). Else -1.
func (pl *plan) sharedInput(j int, ins []Tensor, out Tensor, inSpan []int, spans []span) int {
	if j >= len(pl.shares) || !out.OnDevice {
		return -1
	}
	for _, i := range pl.shares[j] {
		if inSpan[i] < 0 || spans[inSpan[i]].Output || ins[i].Data != out.Data || ins[i].Info.Bytes() != out.Info.Bytes() {
			continue
		}
		return i
	}
	return -1
}

// graphKey names a set of in-place addresses: the graph captured for it.
func graphKey(pl *plan, bound map[ep.DevicePtr]ep.DevicePtr) string {
	b := make([]byte, 0, 12*(len(pl.inputs)+len(pl.outputs)))
	for _, ts := range [][]tensorBuf{pl.inputs, pl.outputs} {
		for _, t := range ts {
			b = strconv.AppendUint(b, uint64(bound[t.buf.Ptr()]), 16)
			b = append(b, ';')
		}
	}
	return string(b)
}
