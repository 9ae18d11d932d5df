package ep_test

import (
	"fmt"
	"runtime"

	"github.com/cudaep/cudaep/ep"
)

// A gated SiLU as exporters write it, Sigmoid(a)·a·b, runs as one kernel.
func ExampleProvider_Fuse() {
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

	value := func(name string) ep.Value {
		return ep.Value{Name: name, Info: ep.TensorInfo{DType: ep.BFloat16, Shape: []int64{1, 8192}}}
	}
	a, b, s, t, y := value("a"), value("b"), value("s"), value("t"), value("y")
	nodes := []ep.Node{
		{Name: "sigmoid", Op: "Sigmoid", Opset: 18, Inputs: []ep.Value{a}, Outputs: []ep.Value{s}},
		{Name: "silu", Op: "Mul", Opset: 18, Inputs: []ep.Value{a, s}, Outputs: []ep.Value{t}},
		{Name: "gate", Op: "Mul", Opset: 18, Inputs: []ep.Value{t, b}, Outputs: []ep.Value{y}},
	}
	for _, n := range p.Fuse(nodes, []string{"y"}) {
		fmt.Println(n.Op, n.Inputs[0].Name, n.Inputs[1].Name, "->", n.Outputs[0].Name)
	}
	// Output:
	// cudaep.SiluMul a b -> y
}
