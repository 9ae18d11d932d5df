package partition

import "github.com/cudaep/cudaep/ep"

// Node is one operator of a graph as Fuse reads and writes it: its name, its op (as ep.Spec.Op:
// the ONNX op type, "<domain>.<op>" outside the default domain), the opset the graph imports
// for the op's domain, its attributes, and its input and output values in ONNX order (an
// absent optional input or output has an empty name).
type Node struct {
	Name    string
	Op      string
	Opset   int
	Attrs   map[string]ep.Attribute
	Inputs  []Value
	Outputs []Value
}

// Value is a tensor of a graph: its name, dtype and shape (-1 for a dimension known only at
// run time) and, for a constant the graph holds (an initializer), its value.
type Value struct {
	Name  string
	Info  ep.TensorInfo
	Const *ep.Const
}

// Present is vs without the trailing optional values a node leaves out (ONNX marks a missing
// optional input or output with an empty name); one left out before a named one stays, empty.
func Present(vs []Value) []Value {
	for len(vs) > 0 && vs[len(vs)-1].Name == "" {
		vs = vs[:len(vs)-1]
	}
	return vs
}

// Values are the value names each node reads and writes, for ordering and grouping
// (TopoOrder, FusionGroups).
func Values(nodes []Node) []NodeValues {
	out := make([]NodeValues, len(nodes))
	names := func(vs []Value) []string {
		ns := make([]string, len(vs))
		for i, v := range vs {
			ns[i] = v.Name
		}
		return ns
	}
	for i, n := range nodes {
		out[i] = NodeValues{Inputs: names(n.Inputs), Outputs: names(n.Outputs)}
	}
	return out
}
