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
