package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	engine "github.com/cudaep/cudaep/partition" // the planning engine; partition here is the adapter's compiled node
)

// partition is one compiled group of nodes: its kernels in topological order, its weights on
// the device, and per input-shape key a plan (kernels, intermediate buffers and, with CUDA
// graphs, a captured slot). Runs of one partition serialize on mu.
type partition struct {
	s       *session
	name    string    // the fused node's name: the key between Compile and CreateState
	nodes   []engine.Node // in topological order, chains fused (engine.Fuse) unless fusion=off
	inputs  []string  // the fused node's inputs, in ORT's order
	outputs []string  // the fused node's outputs, in ORT's order
	w       *weights

	mu    sync.Mutex
	plans map[string]*plan

	// What a run uses and leaves for the next, guarded by mu (compute): the C memory ORT's
	// values are read into (allocated on the first run, freed by close), the Go tensors read
	// from it and their shapes, the plan of the last run, the remembered decisions (decide)
	// and the scratch they are made in, and how many runs reused one.
	vals      *C.CudaEpOrtRun
	ins, outs []hostTensor
	dims      []int64
	key       []byte
	last      *plan
	recent    [recentRuns]recentRun
	// nextRecent is the entry of recent the next decision kept replaces.
	nextRecent int
	sig        []tensorSig
	regs       []*registration
	reused     uint64
}

// tensorBuf is a tensor in a device buffer.
type tensorBuf struct {
	info ep.TensorInfo
	buf  *ep.Buffer
}

func (t tensorBuf) tensor() ep.Tensor { return ep.Tensor{TensorInfo: t.info, Ptr: t.buf.Ptr()} }

// plan is a partition instantiated for one set of input shapes. A plan lives as long as its
// partition, and so do the graphs it captures.
type plan struct {
	inputs  []tensorBuf // the fused inputs' device copies (their infos: the shapes it is for)
	steps   []step
	outputs []tensorBuf
	owned   []*ep.Buffer        // every buffer the plan allocated
	written map[*ep.Buffer]bool // the buffers a step writes (not inputs, weights or views of them)
	shares  [][]int             // per output, the inputs whose memory it may be (findShares)
	graphs  map[string]ep.Slot  // captured graphs by in-place addresses (directKey)
	scratch []ep.Tensor         // a step's remapped tensors (execute)
	wide    bool                // an output's rank passes maxRank (made one by one, see makeOutputs)
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

// close releases the partition's plans (their buffers and graphs), its weights and the memory
// its runs read ORT's values into. Runs must be over.
func (pt *partition) close() error {
	pt.reportPhases()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var errs []error
	for _, pl := range pt.plans {
		errs = append(errs, pl.release(pt.s.p))
	}
	pt.plans, pt.last = nil, nil
	pt.forget()
	if pt.vals != nil {
		C.cudaep_ort_free(unsafe.Pointer(pt.vals))
		pt.vals = nil
	}
	if pt.w != nil {
		errs = append(errs, pt.w.release(pt.s.p))
		pt.w = nil
	}
	return errors.Join(errs...)
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

// cudaepOrtCompile turns each fused group into a partition: it copies what it needs of the
// graph (which is invalid after Compile returns) and loads the group's weights onto the device.
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
			_ = partitionTable.Remove(h)
			C.cudaep_ort_free(unsafe.Pointer(out[i]))
			out[i] = nil
		}
		return statusOf(err)
	}
	for i := range gs {
		pt, err := s.compile(gs[i], fs[i])
		if err != nil {
			return fail(err)
		}
		h, err := partitionTable.Insert(pt)
		if err != nil {
			_ = pt.close()
			return fail(err)
		}
		ci := C.cudaep_ort_new_compute_info(C.uint64_t(h))
		if ci == nil {
			_ = partitionTable.Remove(h)
			return fail(fmt.Errorf("cudaep: out of host memory"))
		}
		made = append(made, h)
		out[i] = &ci.ci
	}
	return nil
}

func (s *session) compile(g *C.OrtGraph, fused *C.OrtNode) (*partition, error) {
	fn, err := readNode(fused)
	if err != nil {
		return nil, err
	}
	nodes, opset, err := readNodes(g)
	if err != nil {
		return nil, err
	}
	ordered := make([]engine.Node, 0, len(nodes))
	for _, i := range engine.TopoOrder(nodeValues(nodes)) {
		n, err := epNode(&nodes[i], opset)
		if err != nil {
			return nil, err
		}
		ordered = append(ordered, n)
	}
	pt := &partition{s: s, name: fn.name, plans: map[string]*plan{}}
	for _, v := range fn.inputs {
		pt.inputs = append(pt.inputs, v.name)
	}
	for _, v := range fn.outputs {
		pt.outputs = append(pt.outputs, v.name)
	}
	pt.nodes = ordered
	if s.opts.fusion {
		pt.nodes = engine.Fuse(s.p, ordered, pt.outputs)
		if len(pt.nodes) < len(ordered) {
			counters.fusedNodes.Add(uint64(len(ordered) - len(pt.nodes) + fusedKernels(pt.nodes, ordered)))
			s.log(C.ORT_LOGGING_LEVEL_INFO, fmt.Sprintf("%s fused partition %s: %d nodes run as %d kernels (%s)",
				EPName, pt.name, len(ordered), len(pt.nodes), opCounts(pt.nodes)))
		}
	}
	if pt.w, err = s.loadWeights(g, pt.nodes); err != nil {
		_ = pt.close()
		return nil, fmt.Errorf("partition %s: %w", pt.name, err)
	}
	return pt, nil
}

// opCounts lists how many of nodes each operator has, in order of first appearance ("MatMul
// x4, Add x2"): what a fused partition runs, views (which launch nothing) included.
func opCounts(nodes []engine.Node) string {
	var order []string
	count := map[string]int{}
	for _, n := range nodes {
		op := n.Op
		if count[op] == 0 {
			order = append(order, op)
		}
		count[op]++
	}
	parts := make([]string, len(order))
	for i, op := range order {
		parts[i] = fmt.Sprintf("%s x%d", op, count[op])
	}
	return strings.Join(parts, ", ")
}

// fusedKernels counts the nodes of fused that are not in orig: the kernels fusion made.
func fusedKernels(fused, orig []engine.Node) int {
	names := map[string]bool{}
	for _, n := range orig {
		names[n.Name+"\x00"+n.Op] = true
	}
	k := 0
	for _, n := range fused {
		if !names[n.Name+"\x00"+n.Op] {
			k++
		}
	}
	return k
}

// cudaepOrtReleaseComputeInfo releases a partition and its C object.
//
//export cudaepOrtReleaseComputeInfo
func cudaepOrtReleaseComputeInfo(ci *C.CudaEpOrtComputeInfo) {
	defer recoverQuietly()
	if ci == nil {
		return
	}
	_ = partitionTable.Remove(handles.Handle(ci.handle))
	C.cudaep_ort_free(unsafe.Pointer(ci))
}

// cudaepOrtCreateState checks that ORT runs the partition compiled for the node it names.
//
//export cudaepOrtCreateState
func cudaepOrtCreateState(ci *C.CudaEpOrtComputeInfo, ctx *C.OrtNodeComputeContext, state *unsafe.Pointer) (st *C.OrtStatus) {
	defer recoverInto(&st)
	pt, err := partitionTable.Get(handles.Handle(ci.handle))
	if err != nil {
		return statusOf(err)
	}
	if name := goString(C.cudaep_ort_compute_context_name(ctx)); name != pt.name {
		return statusOf(fmt.Errorf("cudaep: ORT asks to run node %q with the partition compiled for %q", name, pt.name))
	}
	*state = unsafe.Pointer(ci)
	return nil
}

// appendShapeKey appends a plan's key to b: the inputs' element types and shapes.
func appendShapeKey(b []byte, ins []hostTensor) []byte {
	for _, t := range ins {
		b = strconv.AppendInt(b, int64(t.info.DType), 10)
		b = append(b, '[')
		for d, v := range t.info.Shape {
			if d > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, "];"...)
	}
	return b
}
