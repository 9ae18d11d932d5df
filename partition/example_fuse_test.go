package partition_test

import (
	"fmt"
	"runtime"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// A gated SiLU as exporters write it, Sigmoid(a)·a·b, runs as one kernel.
func ExampleFuse() {
	runtime.LockOSThread() // a provider's context is current per OS thread
	defer runtime.UnlockOSThread()
	opts := ep.DefaultOptions()
	opts.Backend = ep.BackendSim
	p, err := ep.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	value := func(name string) partition.Value {
		return partition.Value{Name: name, Info: ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 8192}}}
	}
	a, b, s, t, y := value("a"), value("b"), value("s"), value("t"), value("y")
	nodes := []partition.Node{
		{Name: "sigmoid", Op: "Sigmoid", Opset: 18, Inputs: []partition.Value{a}, Outputs: []partition.Value{s}},
		{Name: "silu", Op: "Mul", Opset: 18, Inputs: []partition.Value{a, s}, Outputs: []partition.Value{t}},
		{Name: "gate", Op: "Mul", Opset: 18, Inputs: []partition.Value{t, b}, Outputs: []partition.Value{y}},
	}
	for _, n := range partition.Fuse(p, nodes, []string{"y"}) {
		fmt.Println(n.Op, n.Inputs[0].Name, n.Inputs[1].Name, "->", n.Outputs[0].Name)
	}
	// Output:
	// cudaep.SiluMul a b -> y
}
