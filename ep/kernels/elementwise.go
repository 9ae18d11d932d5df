package kernels

import "github.com/cudaep/cudaep/cudadrv"

// anyRank is the rank limit of ops whose rank is not otherwise constrained.
const anyRank = 64

var float32Only = []DType{Float32}

func init() {
	for _, op := range []struct{ name, entry string }{
		{"Add", "cudaep_add"}, {"Sub", "cudaep_sub"}, {"Mul", "cudaep_mul"}, {"Div", "cudaep_div"},
	} {
		builders[op.name] = builder{inputNames: []string{"A", "B"}, build: binaryBuilder(op.entry)}
	}
	for _, op := range []struct{ name, entry string }{
		{"Relu", "cudaep_relu_f32"}, {"Sigmoid", "cudaep_sigmoid_f32"}, {"Tanh", "cudaep_tanh_f32"},
	} {
		builders[op.name] = builder{inputNames: []string{"X"}, build: unaryBuilder(op.entry)}
	}
	builders["Gelu"] = builder{inputNames: []string{"X"}, build: buildGelu}
	builders["Identity"] = builder{inputNames: []string{"input"}, build: buildIdentity}
}

// binaryKernel is Add, Sub, Mul or Div with numpy broadcasting. When both inputs have the
// output's shape it launches the plain kernel <entry>_f32(out, a, b, n); otherwise
// <entry>_bcast_f32(out, a, b, n, dims[6], aStrides[6], bStrides[6]) over the merged
// iteration space.
type binaryKernel struct {
	kernelBase
	fn       *cudadrv.Function
	n        uint64
	same     bool
	dims     [maxBroadcastDims]int64
	aStrides [maxBroadcastDims]int64
	bStrides [maxBroadcastDims]int64
	grid     cudadrv.Dim3
	args     cudadrv.KernelArgs
}

func binaryBuilder(entry string) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		if err := s.checkOpset(7, "numpy broadcasting; earlier opsets used the broadcast and axis attributes"); err != nil {
			return nil, err
		}
		if err := s.checkInputCount(2, 2); err != nil {
			return nil, err
		}
		for i := range 2 {
			if err := s.checkInput(i, float32Only, 0, anyRank); err != nil {
				return nil, err
			}
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, err
		}
		a, b := s.Inputs[0].Shape, s.Inputs[1].Shape
		out, ok := broadcastShapes(a, b)
		if !ok {
			return nil, s.errorf("input 0 (A) shape %s and input 1 (B) shape %s do not broadcast (numpy rules: right-aligned dimensions must be equal or 1)", shapeString(a), shapeString(b))
		}
		if err := s.checkOutput(out); err != nil {
			return nil, err
		}
		layout := mergeDims(out, broadcastStrides(a, out), broadcastStrides(b, out))
		if len(layout.dims) > maxBroadcastDims {
			return nil, s.errorf("broadcasting %s with %s needs %d dimensions after merging neighbours; at most %d are supported", shapeString(a), shapeString(b), len(layout.dims), maxBroadcastDims)
		}
		k := &binaryKernel{kernelBase: newBase(l, s, TensorInfo{DType: Float32, Shape: out})}
		k.n = uint64(k.outs[0].NumElements())
		k.grid = linearGrid(k.n)
		k.same = layout.contiguous(0) && layout.contiguous(1)
		if k.same {
			k.fn = l.function(entry + "_f32")
		} else {
			k.fn = l.function(entry + "_bcast_f32")
			k.dims, k.aStrides = layout.padded(0)
			_, k.bStrides = layout.padded(1)
		}
		return k, nil
	}
}

// Execute queues out = A op B.
func (k *binaryKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).Ptr(inputs[1].Ptr).U64(k.n)
	if !k.same {
		for _, d := range k.dims {
			a.I64(d)
		}
		for _, st := range k.aStrides {
			a.I64(st)
		}
		for _, st := range k.bStrides {
			a.I64(st)
		}
	}
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// unaryKernel is an activation launched as entry(out, x, n).
type unaryKernel struct {
	kernelBase
	fn   *cudadrv.Function
	n    uint64
	grid cudadrv.Dim3
	args cudadrv.KernelArgs
}

func unaryBuilder(entry string) func(*Library, opSpec) (Kernel, error) {
	return func(l *Library, s opSpec) (Kernel, error) {
		if err := s.checkOpset(6, "earlier opsets had the consumed_inputs attribute"); err != nil {
			return nil, err
		}
		if err := s.checkAttrs(nil); err != nil {
			return nil, err
		}
		return newUnary(l, s, entry)
	}
}

// newUnary validates the single float32 input and builds the kernel.
func newUnary(l *Library, s opSpec, entry string) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, float32Only, 0, anyRank); err != nil {
		return nil, err
	}
	k := &unaryKernel{kernelBase: newBase(l, s, cloneInfo(s.Inputs[0])), fn: l.function(entry)}
	k.n = uint64(s.Inputs[0].NumElements())
	k.grid = linearGrid(k.n)
	return k, nil
}

// buildGelu builds Gelu (opset 20): approximate "none" is x·Φ(x) with the error function,
// "tanh" the tanh approximation.
func buildGelu(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkOpset(20, "Gelu entered the default domain in opset 20"); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(map[string]AttrKind{"approximate": AttrString}); err != nil {
		return nil, err
	}
	switch approx := s.stringAttr("approximate", "none"); approx {
	case "none":
		return newUnary(l, s, "cudaep_gelu_f32")
	case "tanh":
		return newUnary(l, s, "cudaep_gelu_tanh_f32")
	default:
		return nil, s.errorf(`attribute "approximate" is %q; supported: "none", "tanh"`, approx)
	}
}

// Execute queues out = f(x).
func (k *unaryKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	a := &k.args
	a.Reset()
	a.Ptr(outputs[0].Ptr).Ptr(inputs[0].Ptr).U64(k.n)
	return k.lib.rt.Stream.Launch(k.fn, k.grid, linearBlock, 0, a)
}

// identityKernel copies its input with one device-to-device copy on the stream (a memcpy node
// when captured).
type identityKernel struct {
	kernelBase
	bytes uint64
}

var identityDTypes = []DType{Float32, Float16, BFloat16, Float64, Int32, Int64, Bool}

func buildIdentity(l *Library, s opSpec) (Kernel, error) {
	if err := s.checkInputCount(1, 1); err != nil {
		return nil, err
	}
	if err := s.checkInput(0, identityDTypes, 0, anyRank); err != nil {
		return nil, err
	}
	if err := s.checkAttrs(nil); err != nil {
		return nil, err
	}
	k := &identityKernel{kernelBase: newBase(l, s, cloneInfo(s.Inputs[0]))}
	k.bytes = uint64(s.Inputs[0].Bytes())
	return k, nil
}

// Execute queues the copy; an output that is the input needs none.
func (k *identityKernel) Execute(inputs, outputs []Tensor) error {
	if err := k.check(inputs, outputs); err != nil {
		return err
	}
	if outputs[0].Ptr == inputs[0].Ptr {
		return nil
	}
	return k.lib.rt.Stream.CopyDtoDAsync(outputs[0].Ptr, inputs[0].Ptr, k.bytes)
}
