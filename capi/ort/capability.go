package ort

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// cudaepOrtGetCapability claims every node cudaep's kernels run, in connected, convex groups.
//
//export cudaepOrtGetCapability
func cudaepOrtGetCapability(e *C.CudaEpOrtEp, g *C.OrtGraph, info *C.OrtEpGraphSupportInfo) (st *C.OrtStatus) {
	defer recoverInto(&st)
	s, err := epTable.Get(handles.Handle(e.handle))
	if err != nil {
		return statusOf(err)
	}
	// Nodes of a subgraph (a Loop or If body, or the body ORT makes when it inlines a function
	// such as SequenceMap) stay with ORT: a fused node inside a subgraph breaks the model for
	// ORT ("no opset import for domain CudaEp").
	var sub C.int
	if err := errorOf(C.cudaep_ort_graph_is_subgraph(g, &sub), "find the graph's parent"); err != nil {
		return statusOf(err)
	}
	if sub != 0 {
		return nil
	}
	nodes, opset, err := readNodes(g)
	if err != nil {
		return statusOf(err)
	}
	// A graph that already holds a CudaEp partition is being partitioned again (after ORT
	// inlined a function, say). ORT 1.24 names the fused nodes of a later round like those of
	// the first and then refuses them as conflicting kernels, so later rounds claim nothing.
	for i := range nodes {
		if nodes[i].ep == EPName {
			return nil
		}
	}
	supported := make([]bool, len(nodes))
	logDeclines := s.logEnabled(C.ORT_LOGGING_LEVEL_INFO)
	for i := range nodes {
		nd := &nodes[i]
		why, crashed := judge(nd, opset, s.supports)
		supported[i] = why == nil
		if why != nil && (logDeclines || crashed) {
			op := fmt.Sprintf("%s, opset %d", nd.ortOp, opset) // the graph's ONNX opset
			if p := domainPrefix(nd.domain); p != "" {
				op = p + nd.ortOp
			}
			level := C.OrtLoggingLevel(C.ORT_LOGGING_LEVEL_INFO)
			if crashed {
				level = C.ORT_LOGGING_LEVEL_WARNING
			}
			s.log(level, fmt.Sprintf("%s leaves node %q (%s) to another EP: %v", EPName, nd.Name, op, why))
		}
	}
	for _, group := range partition.FusionGroups(nodeValues(nodes), supported) {
		if err := addNodesToFuse(info, nodes, group); err != nil {
			return statusOf(err)
		}
	}
	return nil
}

// judge asks supports about one node; a panic while judging it declines that node alone
// (crashed reports it, for a WARNING naming the node), never the whole graph, which would send
// every node of the model to another EP.
func judge(nd *node, opset int64, supports func(*node, int64) error) (why error, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			why, crashed = fmt.Errorf("cudaep: internal error while judging the node (recovered panic: %v)", r), true
		}
	}()
	return supports(nd, opset), false
}

// supports returns nil when the provider has a kernel for nd: an ONNX-domain or contrib op
// over tensors whose types it takes (symbolic dimensions count as 1 here; runs build kernels
// for the real shapes). Otherwise it says why not: GetCapability logs the reason.
func (s *session) supports(nd *node, opset int64) error {
	switch {
	case nd.badAttr != "":
		return fmt.Errorf("attribute %q is of a kind cudaep's kernels do not take", nd.badAttr)
	case opset <= 0:
		return errors.New("the graph imports no ONNX opset")
	case nd.Op == "":
		return fmt.Errorf("cudaep has no kernels in domain %q", nd.domain)
	case !nd.tensors:
		return errors.New("an input or output is not a tensor")
	}
	k, err := s.p.GetKernel(specOf(nd.Node, 1))
	if err != nil {
		return err
	}
	// A kernel whose work cannot be captured computes results whose shape depends on the data
	// (NonZero's count), which a plan of fixed shapes cannot hold. A kernel may make more
	// outputs than the node uses (optional ones the node leaves out), and must make every one
	// the node names.
	if !k.CaptureSupport().IsSupported() {
		return errors.New("its outputs' shapes depend on the input values (the kernel cannot be captured)")
	}
	if got, want := len(k.Outputs()), len(partition.Present(nd.Outputs)); got < want {
		return fmt.Errorf("the kernel makes %d outputs, the node names %d", got, want)
	}
	return nil
}

// domainPrefix is "domain." for an op outside the ONNX domain, else "".
func domainPrefix(domain string) string {
	if domain == "" || domain == "ai.onnx" {
		return ""
	}
	return domain + "."
}

// specOf is the kernel spec of n with symbolic dimensions set to d, its constant inputs'
// values in Consts, and an optional input the node leaves out as the zero TensorInfo.
func specOf(n partition.Node, d int64) ep.Spec {
	ins, outs := partition.Present(n.Inputs), partition.Present(n.Outputs)
	spec := ep.Spec{Name: n.Name, Op: n.Op, Opset: n.Opset, Attrs: n.Attrs, Inputs: make([]ep.TensorInfo, len(ins)),
		NumOutputs: len(outs)}
	for i, v := range ins {
		if v.Name == "" { // an optional input the node leaves out: absent
			continue
		}
		shape := make([]int64, len(v.Info.Shape))
		for j, x := range v.Info.Shape {
			if x < 0 {
				x = d
			}
			shape[j] = x
		}
		spec.Inputs[i] = ep.TensorInfo{DType: v.Info.DType, Shape: shape}
		if v.Const != nil {
			if spec.Consts == nil {
				spec.Consts = map[int]ep.Const{}
			}
			spec.Consts[i] = *v.Const
		}
	}
	return spec
}

// contribDomain is ONNX Runtime's contrib-op domain; its ops reach the kernels as
// "com.microsoft.<OpType>" (opset 1, the domain's only version).
const contribDomain = "com.microsoft"

// opName is an op as the kernels know it: its name and opset.
type opName struct {
	name  string
	opset int
}

// kernelOp names an op of domain for the kernels: ONNX-domain ops by their type at the graph's
// ONNX opset, contrib ops prefixed with their domain; ok is false for any other domain.
func kernelOp(op, domain string, opset int64) (k opName, ok bool) {
	switch domain {
	case "", "ai.onnx":
		k.name, k.opset = op, int(opset)
	case contribDomain:
		k.name, k.opset = contribDomain+"."+op, 1
	default:
		return k, false
	}
	return k, true
}

// nodeValues are the value names each node reads and writes, for the partition package's
// ordering and grouping.
func nodeValues(nodes []node) []partition.NodeValues {
	pn := make([]partition.Node, len(nodes))
	for i := range nodes {
		pn[i] = nodes[i].Node
	}
	return partition.Values(pn)
}

// addNodesToFuse hands one group to ORT; the node array lives in C memory for the call.
func addNodesToFuse(info *C.OrtEpGraphSupportInfo, nodes []node, group []int) error {
	arr := (**C.OrtNode)(C.calloc(C.size_t(len(group)), C.size_t(unsafe.Sizeof(uintptr(0)))))
	if arr == nil {
		return fmt.Errorf("cudaep: out of host memory")
	}
	defer C.free(unsafe.Pointer(arr))
	ptrs := unsafe.Slice(arr, len(group))
	for j, i := range group {
		ptrs[j] = nodes[i].ptr
	}
	return errorOf(C.cudaep_ort_add_nodes_to_fuse(info, arr, C.size_t(len(group))), "claim nodes")
}
