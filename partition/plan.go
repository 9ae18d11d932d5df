package partition

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/cudaep/cudaep/ep"
)

// tensorBuf is a tensor in a device buffer.
type tensorBuf struct {
	info ep.TensorInfo
	buf  *ep.Buffer
}

func (t tensorBuf) tensor() ep.Tensor { return ep.Tensor{TensorInfo: t.info, Ptr: t.buf.Ptr()} }

// plan is a partition instantiated for one set of input shapes. A plan lives as long as its
// partition, and so do the graphs it captures.
type plan struct {
	inputs  []tensorBuf // the inputs' device copies (their infos: the shapes it is for)
	steps   []step
	outputs []tensorBuf
	outInfo []ep.TensorInfo     // the outputs' types and shapes, for the host to allocate
	owned   []*ep.Buffer        // every buffer the plan allocated
	written map[*ep.Buffer]bool // the buffers a step writes (not inputs, weights or views of them)
	shares  [][]int             // per output, the inputs whose memory it may be (findShares)
	graphs  map[string]ep.Slot  // captured graphs by in-place addresses (graphKey)
	scratch []ep.Tensor         // a step's remapped tensors (execute)
	// inBytes and outBytes are the inputs' and outputs' sizes in bytes.
	inBytes, outBytes []uint64
}

// step is one kernel execution. A step of a paging partition that reads a layer has its
// layer's index (else -1) and, per input taken from the layer, the input's index and its
// offset in the layer's image: Ptr is set from the slot at every run.
type step struct {
	k        *ep.Kernel
	ins, out []ep.Tensor
	layer    int
	patches  []patch
}

// patch is an input of a step read from its layer's image.
type patch struct {
	arg int
	off uint64
}

func (pl *plan) release(p *ep.Provider) error {
	var errs []error
	for _, slot := range pl.graphs {
		errs = append(errs, p.RemoveGraph(slot))
	}
	for _, b := range pl.owned {
		if err := b.Release(); err != nil && !errors.Is(err, ep.ErrReleased) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// planFor returns the plan for the inputs' types and shapes: the last run's when they match,
// else the one built for them, built now on the first run with them (the plan keeps copies of
// the shapes). Called with pt.mu held.
func (pt *Partition) planFor(ins []Tensor) (*plan, error) {
	if pl := pt.last; pl != nil && pl.takes(ins) {
		return pl, nil
	}
	pt.key = appendShapeKey(pt.key[:0], ins)
	pl := pt.plans[string(pt.key)]
	if pl == nil {
		infos := make([]ep.TensorInfo, len(ins))
		for i, t := range ins {
			infos[i] = ep.TensorInfo{DType: t.Info.DType, Shape: slices.Clone(t.Info.Shape)}
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
func (pl *plan) takes(ins []Tensor) bool {
	if len(ins) != len(pl.inputs) {
		return false
	}
	for i, t := range ins {
		if w := pl.inputs[i].info; t.Info.DType != w.DType || !slices.Equal(t.Info.Shape, w.Shape) {
			return false
		}
	}
	return true
}

// appendShapeKey appends a plan's key to b: the inputs' element types and shapes.
func appendShapeKey(b []byte, ins []Tensor) []byte {
	for _, t := range ins {
		b = strconv.AppendInt(b, int64(t.Info.DType), 10)
		b = append(b, '[')
		for d, v := range t.Info.Shape {
			if d > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, "];"...)
	}
	return b
}

// newPlan builds the kernels of every node for concrete input shapes, allocating the inputs',
// intermediates' and outputs' device buffers once.
func (pt *Partition) newPlan(ins []ep.TensorInfo) (*plan, error) {
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
	if len(ins) != len(pt.inputs) {
		return fail(fmt.Errorf("%w: partition %s takes %d inputs, the run has %d", ep.ErrInvalidArgument, pt.name, len(pt.inputs), len(ins)))
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
		ins, outs := Present(nd.Inputs), Present(nd.Outputs)
		spec := ep.Spec{Name: nd.Name, Op: nd.Op, Opset: nd.Opset, Attrs: nd.Attrs, NumOutputs: len(outs)}
		st := step{layer: -1}
		if li, ok := layerOf[ni]; ok {
			st.layer = li
		}
		for i, v := range ins {
			if v.Name == "" { // an optional input the node leaves out: absent to the kernel
				spec.Inputs = append(spec.Inputs, ep.TensorInfo{})
				st.ins = append(st.ins, ep.Tensor{})
				continue
			}
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
				return fail(fmt.Errorf("%w: node %s reads %q, which the partition does not produce", ep.ErrInvalidArgument, nd.Name, v.Name))
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
			return fail(fmt.Errorf("%w: partition %s does not produce its output %q", ep.ErrInvalidArgument, pt.name, name))
		}
		pl.outputs = append(pl.outputs, t)
		pl.outInfo = append(pl.outInfo, t.info)
		pl.outBytes = append(pl.outBytes, uint64(t.info.Bytes()))
	}
	pl.findShares()
	return pl, nil
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

// execute queues the plan's kernels, reading and writing the host's tensors in place of the
// plan buffers bound maps.
func (pl *plan) execute(bound map[ep.DevicePtr]ep.DevicePtr) error {
	for _, st := range pl.steps {
		ins, out := st.ins, st.out
		if len(bound) > 0 {
			ins, out = remap(pl.scratch[:0], st.ins, bound), remap(pl.scratch[len(st.ins):len(st.ins)], st.out, bound)
		}
		if err := st.k.Execute(ins, out); err != nil {
			return err
		}
	}
	return nil
}

// remap appends ts to dst with the addresses bound maps replaced.
func remap(dst, ts []ep.Tensor, bound map[ep.DevicePtr]ep.DevicePtr) []ep.Tensor {
	for _, t := range ts {
		if at, ok := bound[t.Ptr]; ok {
			t.Ptr = at
		}
		dst = append(dst, t)
	}
	return dst
}
