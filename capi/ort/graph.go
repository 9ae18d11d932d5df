package ort

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// maxRank bounds the tensor ranks the adapter reads from ORT (a run's values carry as many
// dimensions: CUDAEP_ORT_MAX_RANK in shim.h).
const maxRank = C.CUDAEP_ORT_MAX_RANK

// value is one tensor-valued name of a graph: its element type and shape (-1 for a symbolic
// dimension); tensor is false for non-tensor values, which the adapter never claims.
type value struct {
	name   string
	tensor bool
	dtype  ep.DType
	shape  []int64
	konst  *ep.Const // the values of a small constant initializer (see readConst), else nil
}

// node is an ORT node as the adapter reads it: the partition's node (its name; its op and
// opset as the kernels know them, see kernelOp, empty for a domain that is not CudaEp's; its
// attributes; its values with their declared shapes, -1 for a symbolic dimension, and small
// constants' values) and what only ORT has.
type node struct {
	partition.Node
	ptr     *C.OrtNode
	ortOp   string // the op type in its domain, as ORT names it
	domain  string
	ep      string // the EP ORT assigned the node to, or ""
	badAttr string // an attribute of a kind ep cannot take (graph, tensor), or ""
	// tensors reports that every input and output the node names is a tensor of at most
	// maxRank dimensions (an optional input it leaves out before one it names is the zero
	// Value, which the kernels take as absent, or refuse).
	tensors bool
}

// readNodes reads every node of g, with the ONNX-domain opset the graph imports.
func readNodes(g *C.OrtGraph) ([]node, int64, error) {
	var opset C.int64_t
	if err := errorOf(C.cudaep_ort_graph_onnx_opset(g, &opset), "read the graph's opsets"); err != nil {
		return nil, 0, err
	}
	var arr **C.OrtNode
	var n C.size_t
	if err := errorOf(C.cudaep_ort_graph_nodes(g, &arr, &n), "list the graph's nodes"); err != nil {
		C.cudaep_ort_free_array(unsafe.Pointer(arr))
		return nil, 0, err
	}
	defer C.cudaep_ort_free_array(unsafe.Pointer(arr))
	if n == 0 {
		return nil, int64(opset), nil
	}
	ptrs := unsafe.Slice(arr, int(n))
	nodes := make([]node, len(ptrs))
	for i, p := range ptrs {
		nd, err := readNode(p, int64(opset))
		if err != nil {
			return nil, 0, err
		}
		nodes[i] = nd
	}
	return nodes, int64(opset), nil
}

// readNode reads one node of a graph importing ONNX opset opset.
func readNode(p *C.OrtNode, opset int64) (node, error) {
	nd := node{ptr: p}
	var op, domain, name *C.char
	if err := errorOf(C.cudaep_ort_node_strings(p, &op, &domain, &name), "read a node"); err != nil {
		return nd, err
	}
	nd.ortOp, nd.domain, nd.Name = goString(op), goString(domain), goString(name)
	if k, ok := kernelOp(nd.ortOp, nd.domain, opset); ok {
		nd.Op, nd.Opset = k.name, k.opset
	}
	var assigned *C.char
	if err := errorOf(C.cudaep_ort_node_ep(p, &assigned), "read a node's EP"); err != nil {
		return nd, err
	}
	nd.ep = goString(assigned)
	ins, err := readValues(p, 0)
	if err != nil {
		return nd, err
	}
	outs, err := readValues(p, 1)
	if err != nil {
		return nd, err
	}
	nd.tensors = true
	for _, v := range ins {
		nd.Inputs = append(nd.Inputs, v.partitionValue())
		if v.name != "" && !v.tensor {
			nd.tensors = false
		}
	}
	for _, v := range outs {
		nd.Outputs = append(nd.Outputs, v.partitionValue())
		if v.name != "" && !v.tensor {
			nd.tensors = false
		}
	}
	nd.Attrs, nd.badAttr, err = readAttrs(p)
	return nd, err
}

// readValues reads a node's inputs (outputs=0) or outputs; a missing optional value has an
// empty name.
func readValues(p *C.OrtNode, outputs C.int) ([]value, error) {
	var arr **C.OrtValueInfo
	var n C.size_t
	if err := errorOf(C.cudaep_ort_node_values(p, outputs, &arr, &n), "read a node's values"); err != nil {
		C.cudaep_ort_free_array(unsafe.Pointer(arr))
		return nil, err
	}
	defer C.cudaep_ort_free_array(unsafe.Pointer(arr))
	if n == 0 {
		return nil, nil
	}
	out := make([]value, int(n))
	for i, vi := range unsafe.Slice(arr, int(n)) {
		if vi == nil {
			continue
		}
		v, err := readValueInfo(vi)
		if err != nil {
			return nil, err
		}
		if outputs == 0 {
			if v.konst, err = readConst(vi, v); err != nil {
				return nil, err
			}
		}
		out[i] = v
	}
	return out, nil
}

// maxConstElements bounds the constant initializers whose values the adapter reads for kernels
// that need them when they are built (shapes, axes, indices of Reshape, Slice, ...).
const maxConstElements = 1 << 16

// readConst returns the values of a node input that is a constant initializer of an integer,
// bool, float32 or float64 type with at most maxConstElements elements, held in memory by ORT;
// nil for any other input (the kernels that need such an input then refuse the node).
func readConst(vi *C.OrtValueInfo, v value) (*ep.Const, error) {
	if !v.tensor {
		return nil, nil
	}
	n := elementCount(v.shape)
	if n < 0 || n > maxConstElements {
		return nil, nil
	}
	switch v.dtype {
	case ep.Int64, ep.Int32, ep.Bool, ep.Float32, ep.Float64, ep.Float16, ep.BFloat16:
	default:
		return nil, nil
	}
	var isConst C.int
	if err := errorOf(C.cudaep_ort_value_info_const(vi, &isConst), "ask whether a value is a constant"); err != nil {
		return nil, err
	}
	if isConst == 0 {
		return nil, nil
	}
	var data unsafe.Pointer
	var bytes C.size_t
	if st := C.cudaep_ort_value_info_data(vi, &data, &bytes); st != nil {
		C.cudaep_ort_release_status(st) // not in memory (external data): not read here
		return nil, nil
	}
	c, ok := constOf(v.info(0), data, uint64(bytes))
	if !ok {
		return nil, nil
	}
	return &c, nil
}

// constOf converts a tensor's bytes (int64, int32, bool, float16, bfloat16, float32 or float64,
// at most maxConstElements elements) to the kernels' Const; ok is false for anything else.
func constOf(info ep.TensorInfo, data unsafe.Pointer, bytes uint64) (ep.Const, bool) {
	var c ep.Const
	n := elementCount(info.Shape)
	if n < 0 || n > maxConstElements || bytes != uint64(n)*uint64(info.DType.Size()) || (data == nil && n > 0) {
		return c, false
	}
	switch info.DType {
	case ep.Int64:
		c = ep.IntsConst(unsafe.Slice((*int64)(data), n)...)
	case ep.Int32:
		c.Ints = make([]int64, n)
		for i, x := range unsafe.Slice((*int32)(data), n) {
			c.Ints[i] = int64(x)
		}
	case ep.Bool:
		c.Ints = make([]int64, n)
		for i, x := range unsafe.Slice((*uint8)(data), n) {
			if x != 0 {
				c.Ints[i] = 1
			}
		}
	case ep.Float32:
		c.Floats = make([]float64, n)
		for i, x := range unsafe.Slice((*float32)(data), n) {
			c.Floats[i] = float64(x)
		}
	case ep.Float64:
		c = ep.FloatsConst(unsafe.Slice((*float64)(data), n)...)
	case ep.Float16, ep.BFloat16:
		decode := ep.Float16Value
		if info.DType == ep.BFloat16 {
			decode = ep.BFloat16Value
		}
		c.Floats = make([]float64, n)
		for i, x := range unsafe.Slice((*uint16)(data), n) {
			c.Floats[i] = float64(decode(x))
		}
	default:
		return c, false
	}
	if n == 0 { // an empty constant: a non-nil, empty slice of the right kind
		if isFloatType(info.DType) {
			c.Floats = []float64{}
		} else {
			c.Ints = []int64{}
		}
	}
	return c, true
}

func readValueInfo(vi *C.OrtValueInfo) (value, error) {
	var name *C.char
	var isTensor, elem C.int
	var dims [maxRank]C.int64_t
	var rank C.size_t
	if err := errorOf(C.cudaep_ort_value_info(vi, &name, &isTensor, &elem, &dims[0], maxRank, &rank), "read a value"); err != nil {
		return value{}, err
	}
	v := value{name: goString(name), tensor: isTensor != 0 && rank <= maxRank, dtype: ep.DType(elem)}
	if v.tensor {
		v.shape = make([]int64, int(rank))
		for i := range v.shape {
			v.shape[i] = int64(dims[i])
		}
	}
	return v, nil
}

// readAttrs reads a node's attributes into ep's form. A graph or tensor attribute is
// returned by name in bad (ep's kernels take none).
func readAttrs(p *C.OrtNode) (map[string]ep.Attribute, string, error) {
	var arr **C.OrtOpAttr
	var n C.size_t
	if err := errorOf(C.cudaep_ort_node_attributes(p, &arr, &n), "read a node's attributes"); err != nil {
		C.cudaep_ort_free_array(unsafe.Pointer(arr))
		return nil, "", err
	}
	defer C.cudaep_ort_free_array(unsafe.Pointer(arr))
	attrs := map[string]ep.Attribute{}
	if n == 0 {
		return attrs, "", nil
	}
	bad := ""
	for _, a := range unsafe.Slice(arr, int(n)) {
		var cname *C.char
		var kind C.int
		if st := C.cudaep_ort_attr_header(a, &cname, &kind); st != nil {
			// ORT cannot describe some attribute kinds (type protos, sparse tensors): such a
			// node is not one cudaep runs, and the graph is fine.
			C.cudaep_ort_release_status(st)
			bad = "(an attribute ORT cannot describe)"
			continue
		}
		name := goString(cname)
		switch kind {
		case C.ORT_OP_ATTR_INT:
			var v C.int64_t
			if err := readAttr(a, kind, unsafe.Pointer(&v), 8); err != nil {
				return nil, "", err
			}
			attrs[name] = ep.IntAttr(int64(v))
		case C.ORT_OP_ATTR_FLOAT:
			var v C.float
			if err := readAttr(a, kind, unsafe.Pointer(&v), 4); err != nil {
				return nil, "", err
			}
			attrs[name] = ep.FloatAttr(float32(v))
		case C.ORT_OP_ATTR_INTS:
			b, err := readAttrBytes(a, kind)
			if err != nil {
				return nil, "", err
			}
			ints := make([]int64, len(b)/8)
			for i := range ints {
				ints[i] = *(*int64)(unsafe.Pointer(&b[8*i]))
			}
			attrs[name] = ep.IntsAttr(ints...)
		case C.ORT_OP_ATTR_STRING:
			b, err := readAttrBytes(a, kind)
			if err != nil {
				return nil, "", err
			}
			attrs[name] = ep.StringAttr(string(b))
		case C.ORT_OP_ATTR_TENSOR:
			if at, ok := readTensorAttr(a); ok {
				attrs[name] = at
			} else {
				bad = name
			}
		default:
			bad = name
		}
	}
	return attrs, bad, nil
}

// readTensorAttr reads a tensor attribute (ConstantOfShape's value, say) of a type readConst
// takes; ok is false for any other (the node is then not claimed).
func readTensorAttr(a *C.OrtOpAttr) (ep.Attribute, bool) {
	var v *C.OrtValue
	var elem C.int
	var dims [maxRank]C.int64_t
	var rank, bytes C.size_t
	var data unsafe.Pointer
	st := C.cudaep_ort_attr_tensor(a, &v, &elem, &dims[0], maxRank, &rank, &data, &bytes)
	defer C.cudaep_ort_release_value(v)
	if st != nil {
		C.cudaep_ort_release_status(st)
		return ep.Attribute{}, false
	}
	if rank > maxRank {
		return ep.Attribute{}, false
	}
	info := ep.TensorInfo{DType: ep.DType(elem), Shape: make([]int64, int(rank))}
	for i := range info.Shape {
		info.Shape[i] = int64(dims[i])
	}
	c, ok := constOf(info, data, uint64(bytes))
	if !ok {
		return ep.Attribute{}, false
	}
	return ep.TensorAttr(info, c), true
}

func readAttr(a *C.OrtOpAttr, kind C.int, dst unsafe.Pointer, size C.size_t) error {
	var got C.size_t
	return errorOf(C.cudaep_ort_attr_read(a, kind, dst, size, &got), "read an attribute value")
}

// readAttrBytes reads a variable-length attribute: once for its size, once for its bytes.
func readAttrBytes(a *C.OrtOpAttr, kind C.int) ([]byte, error) {
	var size C.size_t
	st := C.cudaep_ort_attr_read(a, kind, nil, 0, &size)
	C.cudaep_ort_release_status(st) // a status saying the buffer is too small is expected
	if size == 0 {
		return nil, nil
	}
	if size > 1<<20 {
		return nil, fmt.Errorf("%w: an attribute of %d bytes", errInvalid, int(size))
	}
	b := make([]byte, int(size))
	var got C.size_t
	if err := errorOf(C.cudaep_ort_attr_read(a, kind, unsafe.Pointer(&b[0]), size, &got), "read an attribute value"); err != nil {
		return nil, err
	}
	return b[:min(int(got), len(b))], nil
}

// info is v's type with symbolic dimensions set to d (to ask ep whether it supports the
// node), or its concrete type.
func (v value) info(d int64) ep.TensorInfo {
	shape := make([]int64, len(v.shape))
	for i, s := range v.shape {
		if s < 0 {
			s = d
		}
		shape[i] = s
	}
	return ep.TensorInfo{DType: v.dtype, Shape: shape}
}

// elementCount is the number of elements of a concrete shape, or -1 when it overflows.
func elementCount(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/d) {
			return -1
		}
		n *= d
	}
	return n
}

// isFloatType reports whether a constant of dtype d holds Floats (else Ints).
func isFloatType(d ep.DType) bool {
	return d == ep.Float32 || d == ep.Float64 || d == ep.Float16 || d == ep.BFloat16
}

// partitionValue is v as the partition reads it (the zero Value for an absent optional one;
// a value that is not a tensor has only its name).
func (v value) partitionValue() partition.Value {
	if v.name == "" {
		return partition.Value{}
	}
	if !v.tensor {
		return partition.Value{Name: v.name}
	}
	return partition.Value{Name: v.name, Info: ep.TensorInfo{DType: v.dtype, Shape: v.shape}, Const: v.konst}
}
